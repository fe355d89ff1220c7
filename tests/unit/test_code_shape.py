"""Functions do one job: cyclomatic complexity is checked in CI by ruff (C901, pyproject.toml), and
reviewed; there is no line count for code to stand under. The functions over the bound are listed where
they stand, each with a noqa that names it as known debt, so the list is visible and can only shrink
deliberately."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from package_source import GROUP, PACKAGE, modules

pytestmark = pytest.mark.xdist_group(GROUP)
ROOT = PACKAGE.parent
DEBT = "# noqa: C901 (known debt: split by job when next touched)"


def test_ci_checks_complexity():
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
    assert "C901" in lint["select"]
    assert lint["mccabe"]["max-complexity"] == 10


def test_every_complexity_exception_is_named_as_debt():
    loose = []
    for path in modules():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"noqa:[^#]*\bC901\b", line) and DEBT not in line:
                loose.append(f"{path.relative_to(PACKAGE)}:{n}")
    assert not loose, f"a C901 exception without its reason: {loose}"


def test_the_debt_list_is_short(tmp_path: Path):
    debt = sum(p.read_text(encoding="utf-8").count(DEBT) for p in modules())
    # not a bound to stand under: the figure the list had when the check came in, so that it only shrinks
    assert debt <= 25, f"{debt} functions over complexity 10: split one rather than excuse another"
