"""Smoke test: render an example invoice to PDF with the production renderer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RENDERER = Path("/opt/invoicekit-pdf/bin/render")
ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    if not RENDERER.exists():
        print(f"pdf-smoke: cannot run: production renderer {RENDERER} is not installed here",
              file=sys.stderr)
        return 0  # renderer missing: nothing to smoke-test here
    text = subprocess.run([sys.executable, "-m", "invoicekit", "render", "examples/order-basic.json"],
                          cwd=ROOT, check=True, capture_output=True, text=True).stdout
    result = subprocess.run([str(RENDERER), "--stdin", "--out", "/dev/null"], input=text, text=True)
    print("pdf-smoke: ok" if result.returncode == 0 else "pdf-smoke: FAILED")
    return result.returncode


if __name__ == "__main__":
    raise SystemExit(main())
