"""Gitignore-style path patterns, used by allowed-paths.txt, `protected`,
forbidden-effects `protected_paths` and check globs.

Matching is gitignore's, by the `pathspec` library: `*`, `?`, `[...]`, `**`,
a trailing `/` for a directory and everything below it, `!` negation (last
match wins), `\\#` for a literal `#`, and a pattern without a slash matches a
name at any depth while one with a slash is anchored at the root. One
difference, on purpose: a leading `/` is refused as an absolute path (people
write `/etc/...` meaning the machine's root); anchor a bare name with `./name`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

import pathspec

EVALUATOR_COMPONENT = "patterns"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)


class PatternError(ValueError):
    pass


def check_pattern(pattern: str) -> None:
    """Reject patterns that could reach outside the root they are relative to."""
    body = pattern[1:] if pattern.startswith("!") else pattern
    if body.startswith("/"):
        raise PatternError(
            f"pattern {pattern!r} is absolute; write it relative to repo/ (anchor a bare name as ./name)"
        )
    if re.match(r"^[A-Za-z]:[\\/]", body) or body.startswith("\\\\"):  # a drive letter or a UNC path
        raise PatternError(f"pattern {pattern!r} is absolute")
    parts = body.strip("/").split("/")
    if any(part == ".." for part in parts):
        raise PatternError(f"pattern {pattern!r} escapes the repository ('..')")
    try:
        _compile((pattern,))
    except (ValueError, re.error) as exc:
        raise PatternError(f"pattern {pattern!r} is not a valid glob: {exc}") from None


def _to_gitignore(pattern: str) -> str:
    # `./name` is our spelling of gitignore's root anchor `/name` (a leading `/` is refused
    # above because people mean the machine's root by it).
    negate = pattern.startswith("!")
    body = pattern[1:] if negate else pattern
    if body.startswith("./"):
        body = "/" + body[2:]
    return ("!" if negate else "") + body


@lru_cache(maxsize=1024)
def _compile(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(_to_gitignore(p) for p in patterns)


@dataclass(frozen=True)
class PathSpec:
    """An ordered list of gitignore patterns (last match wins, `!` negates), matched with `pathspec`."""

    patterns: tuple[str, ...]
    _spec: pathspec.GitIgnoreSpec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_spec", _compile(self.patterns))

    @classmethod
    def from_lines(cls, lines: list[str] | tuple[str, ...]) -> PathSpec:
        kept = []
        for raw in lines:
            line = raw.rstrip("\n").rstrip()
            if not line or line.startswith("#"):
                continue
            check_pattern(line)
            kept.append(line)
        return cls(tuple(kept))

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def matches(self, path: str) -> bool:
        return self._spec.match_file(path)
