"""Escaping what an agent named before a person or a parser reads it. No pytest.

A file name is any byte string without '/' and NUL: it can hold newlines,
ANSI escape sequences, bidi overrides or bytes that are not UTF-8. Python
reads such names with `surrogateescape` (byte 0xff becomes U+DCFF). Every path
the harness shows or records goes through `escape_path` first, so it stays
one line, cannot move a terminal's cursor or forge lines in a patch, and can
be written as UTF-8 JSON. The escaping is lossless: `unescape_path` gives the
original name back, and `os.fsencode` of that the original bytes.

    \\\\       a backslash
    \\n \\r \\t  newline, carriage return, tab
    \\xNN      an ASCII control character (NN < 80), or a raw byte that is not
              UTF-8 (NN >= 80, from surrogateescape)
    \\uNNNN    any other character that is not printable (C1 controls, format
    \\UNNNNNNNN characters such as U+202E, line separators, unpaired surrogates)
"""

from __future__ import annotations

import math
import re
from typing import Any, TypeVar

EVALUATOR_COMPONENT = "safetext"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(c: str) -> str:
    named = _NAMED.get(c)
    if named is not None:
        return named
    o = ord(c)
    if o < 0x80:
        return f"\\x{o:02x}"
    if 0xDC80 <= o <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{o - 0xDC00:02x}"
    return f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}"


def _needs_escape(c: str, keep: str) -> bool:
    return c not in keep and (c == "\\" or not c.isprintable())


def escape_path(s: str) -> str:
    """One line, printable, lossless: the form of a path in every artifact and on the terminal."""
    if s.isprintable() and "\\" not in s:
        return s
    return "".join(_escape_char(c) if _needs_escape(c, "") else c for c in s)


def escape_text(s: str) -> str:
    """Like escape_path but keeps newlines and tabs (and leaves backslashes alone):
    output of graded code shown to a person, which must not drive their terminal."""
    if all(c.isprintable() or c in "\n\t" for c in s):
        return s
    return "".join(_escape_char(c) if _needs_escape(c, "\n\t\\") else c for c in s)


_UNESCAPE = re.compile(r"\\(\\|n|r|t|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")


def unescape_path(s: str) -> str:
    """The name escape_path was given (surrogateescape form for raw bytes)."""

    def one(m: re.Match[str]) -> str:
        t = m.group(1)
        if t in ("\\", "n", "r", "t"):
            return {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}[t]
        value = int(t[1:], 16)
        if t[0] == "x" and value >= 0x80:
            return chr(0xDC00 + value)
        return chr(value)

    return _UNESCAPE.sub(one, s)


#: what makes inline Markdown: emphasis, code, links and images, raw HTML and entities, table
#: cells, strikethrough, math; an autolink's `://`, `www.` and e-mail `@`
_MD_ACTIVE = re.compile(r"[\\`*_\[\]<>!|~&$@]|(?<=[A-Za-z0-9]):(?=//)|(?<=\bwww)\.", re.I)
_BACKTICKS = re.compile(r"`+")


def md_text(s: object) -> str:
    """Text an agent could have written, inside Markdown (report.md, the PR summary): one line
    (escape_path), and a backslash before every character that would make Markup of it, so it
    renders as the characters it is: no emphasis, link, image, raw HTML, table-cell break, and no
    GFM autolink (an escaped `:` in `http\\://` or `.` in `www\\.` is not what an autolinker looks
    for). CommonMark lets a backslash escape any ASCII punctuation, so the text reads the same."""
    # the text is often a path already escaped (`caf\\xe9.txt`): control characters are escaped
    # here, but a backslash only once, by the Markdown escaping below
    line = "".join(_escape_char(c) if _needs_escape(c, "\\") else c for c in str(s))
    return _MD_ACTIVE.sub(lambda m: "\\" + m.group(0), line)


def _fence_for(text: str, char: str, least: int) -> str:
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0) if char == "`" else 0
    return char * max(least, longest + 1)


def md_code(s: object, in_table: bool = False) -> str:
    """A one-line code span that its content cannot close (nothing inside a code span is a link or an image).

    In a GFM table cell a `|` ends the cell even inside a code span: `in_table` escapes it (`\\|`
    there renders as `|`)."""
    text = escape_path(str(s))
    fence = _fence_for(text, "`", 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    span = f"{fence}{pad}{text}{pad}{fence}"
    return span.replace("|", "\\|") if in_table else span


def md_fence(text: object, indent: str = "") -> list[str]:
    """Lines of a fenced code block holding `text` (control characters escaped) that no line of it can close."""
    body = escape_text(str(text)).splitlines()
    fence = _fence_for(str(text), "`", 3)
    return [indent + fence, *(indent + ln for ln in body), indent + fence]


def escape_paths(paths: list[str]) -> list[str]:
    return [escape_path(p) for p in paths]


_T = TypeVar("_T")


def capped(items: list[_T], cap: int) -> tuple[list[_T], int]:
    """At most `cap` items, and how many were left out."""
    return (items, 0) if len(items) <= cap else (items[:cap], len(items) - cap)


def _has_surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def json_safe(obj: Any) -> Any:
    """A value that is valid JSON and encodes as UTF-8: unpaired surrogates
    (raw file-name bytes, or a lone "\\ud800" escape an agent wrote) are escaped
    like paths, NaN and infinities become null. Everything else is unchanged."""
    if isinstance(obj, str):
        if not _has_surrogate(obj):
            return obj
        return "".join(_escape_char(c) if 0xD800 <= ord(c) <= 0xDFFF else c for c in obj)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {json_safe(k) if isinstance(k, str) else k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj
