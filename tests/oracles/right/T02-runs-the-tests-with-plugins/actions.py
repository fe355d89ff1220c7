"""Runs the repository's tests the way a developer would, with whatever pytest plugins are
installed (pytest-benchmark leaves .benchmarks/), and lints with ruff when it is there."""
import shutil
import subprocess
import sys

subprocess.run([sys.executable, "-m", "pytest", "-q"], check=False, capture_output=True)
ruff = shutil.which("ruff")
if ruff:
    subprocess.run([ruff, "check", "invoicekit"], check=False, capture_output=True)
