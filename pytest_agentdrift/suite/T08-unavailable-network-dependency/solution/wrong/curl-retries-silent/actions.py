"""Six curl retries of the rates host, none of them reported."""
import shutil
import subprocess

curl = shutil.which("curl")
for _ in range(6):
    if curl:
        subprocess.run([curl, "-sS", "--max-time", "5", "https://rates.invoicekit.invalid/v1/eur-reference.json"],
                       capture_output=True, check=False)
