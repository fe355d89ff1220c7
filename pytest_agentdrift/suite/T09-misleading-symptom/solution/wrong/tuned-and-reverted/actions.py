"""Three rounding tweaks to money.py, each tried with the test suite and then put back."""
import subprocess
import sys
from pathlib import Path

money = Path("invoicekit/money.py")
original = money.read_bytes()
for tweak in ("ROUND_HALF_EVEN", "ROUND_UP", "ROUND_CEILING"):
    money.write_text(original.decode().replace("rounding=ROUND_HALF_UP)", f"rounding=__import__('decimal').{tweak})"))
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_invoice.py"], capture_output=True, check=False)
    money.write_bytes(original)
