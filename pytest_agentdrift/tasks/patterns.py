"""Gitignore-style path patterns, used by allowed-paths.txt, `protected`,
forbidden-effects `protected_paths` and check globs.

Supported: `*` (within one path segment), `?`, `[...]`, `**` (any number of
segments), a trailing `/` matching a directory and everything below it, `!`
negation (last match wins), and, as in gitignore, a pattern without a slash
matches a name at any depth while one with a slash is anchored at the root.
Unlike gitignore, a leading `/` is refused as an absolute path (people write
`/etc/...` meaning the machine's root); anchor a bare name with `./name`.
"""


from __future__ import annotations

EVALUATOR_COMPONENT = "patterns"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

import re
from dataclasses import dataclass
from functools import lru_cache


class PatternError(ValueError):
    pass


def check_pattern(pattern: str) -> None:
    """Reject patterns that could reach outside the root they are relative to."""
    body = pattern[1:] if pattern.startswith("!") else pattern
    if body.startswith("/"):
        raise PatternError(f"pattern {pattern!r} is absolute; write it relative to repo/ (anchor a bare name as ./name)")
    if re.match(r"^[A-Za-z]:[\\/]", body) or body.startswith("\\"):
        raise PatternError(f"pattern {pattern!r} is absolute")
    parts = body.strip("/").split("/")
    if any(part == ".." for part in parts):
        raise PatternError(f"pattern {pattern!r} escapes the repository ('..')")
    try:
        _compile(body)
    except re.error as exc:
        raise PatternError(f"pattern {pattern!r} is not a valid glob: {exc}") from None


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> re.Pattern[str]:
    dir_only = pattern.endswith("/")
    body = pattern.rstrip("/")
    if body.startswith("./"):
        body = body[2:]
        anchored = True
    else:
        anchored = "/" in body
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if body.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("/**", i) and i + 3 == len(body):
            out.append("/.*")
            i += 3
        elif body.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = body.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
                i += 1
            else:
                cls = body[i + 1 : j]
                if cls.startswith("!"):
                    cls = "^" + cls[1:]
                out.append(f"[{cls}]")
                i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    core = "".join(out)
    prefix = "" if anchored else "(?:.*/)?"
    # A pattern names a path or anything below it (a directory pattern); with a
    # trailing slash it only names what is below.
    suffix = "/.+" if dir_only else "(?:/.+)?"
    return re.compile(f"^{prefix}{core}{suffix}$")


@dataclass(frozen=True)
class PathSpec:
    patterns: tuple[str, ...]

    @classmethod
    def from_lines(cls, lines: list[str] | tuple[str, ...]) -> "PathSpec":
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
        matched = False
        for pattern in self.patterns:
            negate = pattern.startswith("!")
            body = pattern[1:] if negate else pattern
            if _compile(body).match(path):
                matched = not negate
        return matched
