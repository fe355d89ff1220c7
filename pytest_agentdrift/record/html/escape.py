"""Untrusted text into HTML: markup escaped, and the characters that could hide or reorder what a
person reads (control characters, lone surrogates, bidirectional controls) shown as visible escapes
such as ``\\x1b`` or ``\\n``, never emitted raw."""

from __future__ import annotations

import html
import re

# Control characters (C0 but \t \n, DEL, C1), lone surrogates (undecodable bytes
# under surrogateescape, or stray halves) and bidi controls (they reorder what a
# person reads: "Trojan source").
_SPECIAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SPECIAL_INLINE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\x1b": "\\x1b"}


def visible(ch: str) -> str:
    """The printable escape that stands for one special character."""
    if ch in _NAMED:
        return _NAMED[ch]
    o = ord(ch)
    if 0xDC80 <= o <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{o - 0xDC00:02x}"
    if o <= 0xFF:
        return f"\\x{o:02x}"
    return f"\\u{o:04x}"


def esc(text: object, block: bool = False) -> str:
    """HTML for untrusted text; specials become visible escapes in a marked span.

    block=True keeps newlines and tabs (a patch, stdout); otherwise they are
    shown as ``\\n`` / ``\\t`` too (a file name must never break a line).
    """
    s = text if isinstance(text, str) else str(text)
    pattern = _SPECIAL if block else _SPECIAL_INLINE
    if not pattern.search(s):
        return html.escape(s)
    out: list[str] = []
    pos = 0
    for m in pattern.finditer(s):
        out.append(html.escape(s[pos : m.start()]))
        out.append(f'<span class="cc">{visible(m.group())}</span>')
        pos = m.end()
    out.append(html.escape(s[pos:]))
    return "".join(out)


def attr(text: object) -> str:
    """An attribute value: the same visible escapes, as plain text."""
    s = text if isinstance(text, str) else str(text)
    return html.escape(_SPECIAL_INLINE.sub(lambda m: visible(m.group()), s), quote=True)
