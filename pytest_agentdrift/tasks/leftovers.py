"""Tool leftovers: files that tools write while an agent works, not changes of the agent's.

Running the tests with the plugins a developer has installed leaves
`.benchmarks/` (pytest-benchmark), `.hypothesis/`, `.mypy_cache/`,
`.ruff_cache/`, coverage data and byte code behind; a build leaves what the
repository's own `.gitignore` ignores (`dist/`, `*.egg-info/`). None of that
is part of the change a reviewer would read, so it is recorded as evidence,
listed apart, and never counted against the agent's scope.

Only *added* paths can be leftovers: git ignores untracked files only, so a
tracked (frozen) file that changed is always the agent's change, whatever a
`.gitignore` says. The `.gitignore` files read are the frozen fixture's, never
the agent's copy, so an agent cannot hide a change by ignoring it. No pytest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

EVALUATOR_COMPONENT = "leftovers"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

#: caches and reports of common tools, at any depth (gitignore syntax)
TOOL_LEFTOVERS = (
    "__pycache__/",
    "*.pyc",
    ".pytest_cache/",
    ".benchmarks/",
    ".hypothesis/",
    ".mypy_cache/",
    ".ruff_cache/",
    ".coverage",
    ".coverage.*",
    "coverage.xml",
    "htmlcov/",
)


@dataclass(frozen=True)
class LeftoverRules:
    """Which added paths of a work tree are tool leftovers (gitignore semantics, via pathspec)."""

    ignore_files: tuple[tuple[str, tuple[str, ...]], ...]  # (directory of a frozen .gitignore, its lines)

    @classmethod
    def for_repo(cls, repo: Path, frozen: Iterable[str]) -> LeftoverRules:
        found = []
        for rel in sorted(frozen):
            if rel == ".gitignore" or rel.endswith("/.gitignore"):
                try:
                    text = (repo / rel).read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
                found.append((rel.rpartition("/")[0], tuple(text.splitlines())))
        return cls(tuple(found))

    def is_leftover(self, rel: str) -> bool:
        path = rel.rstrip("/")
        is_dir = rel.endswith("/")
        if _spec(TOOL_LEFTOVERS).match_file(path + ("/" if is_dir else "")):
            return True
        for base, lines in self.ignore_files:
            if base and not path.startswith(base + "/"):
                continue
            sub = path[len(base) + 1 :] if base else path
            if _spec(lines).match_file(sub + ("/" if is_dir else "")):
                return True
        return False


@lru_cache(maxsize=64)
def _spec(lines: tuple[str, ...]):
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(lines)


def split_leftovers(added: Iterable[str], frozen: Iterable[str], rules: LeftoverRules) -> tuple[list[str], list[str]]:
    """(the agent's added paths, the tool leftovers) of a diff's added paths."""
    frozen_set = set(frozen)
    mine: list[str] = []
    leftovers: list[str] = []
    for rel in added:
        (leftovers if rel not in frozen_set and rules.is_leftover(rel) else mine).append(rel)
    return mine, leftovers
