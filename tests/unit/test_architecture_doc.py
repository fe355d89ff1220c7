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
