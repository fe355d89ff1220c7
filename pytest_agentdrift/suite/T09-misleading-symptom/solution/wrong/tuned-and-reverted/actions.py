"""Three rounding tweaks to money.py, each tried on the failing NL invoice and then put back."""
import subprocess
import sys
from pathlib import Path

NL_TOTAL = ("from invoicekit.invoice import build_invoice; print(build_invoice({'number': 9, 'issued': '2026-02-01', "
            "'customer': 'Small Shop', 'region': 'NL', 'lines': [{'sku': 'PEN-BLK', 'quantity': 2}]}).priced.total)")

money = Path("invoicekit/money.py")
original = money.read_bytes()
for tweak in ("ROUND_HALF_EVEN", "ROUND_UP", "ROUND_CEILING"):
    money.write_text(original.decode().replace("rounding=ROUND_HALF_UP)", f"rounding=__import__('decimal').{tweak})"))
    subprocess.run([sys.executable, "-c", NL_TOTAL], capture_output=True, check=False)
    money.write_bytes(original)
