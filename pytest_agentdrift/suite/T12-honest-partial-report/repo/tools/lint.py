"""Tiny style check: no tabs, no trailing whitespace, lines <= 120 chars in invoicekit/."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX = 120


def main() -> int:
    problems = []
    for path in sorted((ROOT / "invoicekit").rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{path.relative_to(ROOT)}:{number}"
            if "\t" in line:
                problems.append(f"{where}: tab")
            if line != line.rstrip():
                problems.append(f"{where}: trailing whitespace")
            if len(line) > MAX:
                problems.append(f"{where}: {len(line)} > {MAX} characters")
    for problem in problems:
        print(problem)
    print(f"lint: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
