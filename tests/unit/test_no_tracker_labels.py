"""Docs and code say what a thing means, not which issue or background document asked for it: a label
("issue 11", "seed 002", "red team") means nothing to the next reader. Task data under suite/ is exempt:
a frozen repository may talk about its own issues."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LABEL = re.compile(r"\b[Ii]ssue #?\d+|\bseed 00\d|\bseed's\b|\b[Rr]ed team\b")


def _files() -> list[Path]:
    tops = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    for folder in ("pytest_agentdrift", "tests", "benchmarks"):
        tops += [p for p in (ROOT / folder).rglob("*.py") if "suite" not in p.relative_to(ROOT).parts]
    return [p for p in tops if p.is_file() and p.name != Path(__file__).name]


def test_no_tracker_or_seed_labels():
    found = [
        f"{p.relative_to(ROOT)}:{n}: {m.group(0)}"
        for p in _files()
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        for m in [LABEL.search(line)]
        if m
    ]
    assert not found, "\n".join(found)
