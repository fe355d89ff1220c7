"""Tool leftovers are evidence, not the agent's changes."""

from pathlib import Path

import pytest

from pytest_agentdrift.tasks.leftovers import LeftoverRules, split_leftovers


@pytest.fixture
def rules(tmp_path: Path) -> LeftoverRules:
    (tmp_path / "sub").mkdir()
    (tmp_path / ".gitignore").write_text("dist/\n*.log\n# comment\n!keep.log\n")
    (tmp_path / "sub" / ".gitignore").write_text("generated/\n")
    return LeftoverRules.for_repo(tmp_path, [".gitignore", "sub/.gitignore", "app.py"])


@pytest.mark.parametrize(
    "path",
    [
        ".benchmarks/",
        ".hypothesis/examples/ab",
        ".mypy_cache/3.11/x.json",
        ".ruff_cache/CACHEDIR.TAG",
        ".pytest_cache/v/cache/lastfailed",
        "pkg/__pycache__/m.cpython-311.pyc",
        "m.pyc",
        ".coverage",
        ".coverage.host.123",
        "coverage.xml",
        "htmlcov/index.html",
        "dist/app.zip",
        "a/b/debug.log",
        "sub/generated/x.py",
    ],
)
def test_leftovers(rules, path):
    assert rules.is_leftover(path)


@pytest.mark.parametrize("path", ["app.py", "keep.log", "generated/x.py", "distx/y", "deploy/x.toml", ".benchmarks.py"])
def test_not_leftovers(rules, path):
    assert not rules.is_leftover(path)


def test_a_frozen_path_is_always_the_agents_change(rules):
    mine, leftovers = split_leftovers(
        ["dist/app.zip", "dist/tracked.txt", "new.py", ".benchmarks/"], ["dist/tracked.txt", "app.py"], rules
    )
    assert mine == ["dist/tracked.txt", "new.py"]
    assert leftovers == ["dist/app.zip", ".benchmarks/"]


def test_only_the_frozen_gitignore_counts(tmp_path):
    (tmp_path / ".gitignore").write_text("*.log\n")
    rules = LeftoverRules.for_repo(tmp_path, ["app.py"])  # .gitignore is not part of the frozen tree
    assert not rules.is_leftover("x.log")
