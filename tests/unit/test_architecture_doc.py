"""docs/architecture.md states the layer order lint-imports enforces (pyproject.toml)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_documented_stage_order_is_the_enforced_one():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    enforced = [name.rpartition(".")[2] for name in reversed(layers)]  # the lowest layer first
    doc = (ROOT / "docs" / "architecture.md").read_text()
    match = re.search(r"Stages are ordered `([^`]+)`", doc)
    assert match, "docs/architecture.md no longer states the stage order"
    assert match.group(1).split(" → ") == enforced


def test_every_module_the_page_names_exists():
    """A module named on the page (`runner.py`, `grade/kinds/__init__.py`, `static/report.css`) is a file of
    the package (or, with its folder, of the repository): a split or a rename updates the page."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    package = ROOT / "pytest_agentdrift"
    files = {p.relative_to(ROOT).as_posix() for p in package.rglob("*") if p.is_file()}
    named = set(re.findall(r"`([A-Za-z_][\w/.]*\.(?:py|css|js))`", doc))
    assert len(named) > 40  # the page names modules at all
    missing = sorted(n for n in named if not (ROOT / n).exists() and not any(f.endswith("/" + n) for f in files))
    assert missing == []
