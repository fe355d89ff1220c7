"""A run's raw artifacts on the page, each read up to a bound and the cut marked: the patch (coloured),
the events timeline, the heads of stdout and stderr."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pytest_agentdrift.canonical import json_lines_objects
from pytest_agentdrift.record.html.anchors import slug
from pytest_agentdrift.record.html.escape import esc
from pytest_agentdrift.record.html.fmt import short_json
from pytest_agentdrift.record.html.reportinput import RawArtifact, ReportInput
from pytest_agentdrift.shapes import JsonObject, RunRecord
from pytest_agentdrift.vocabulary import EVENTS_FILE, PATCH_FILE

#: bounds on what is read from raw/ per run (the record keeps everything)
PATCH_LIMIT = 256 << 10
HEAD_LIMIT = 8 << 10
EVENTS_LIMIT = 500
SMALL_LIMIT = 64 << 10


def patch_section(inp: ReportInput, run: RunRecord, unfolded: bool = False) -> str:
    art = inp.raw(run, PATCH_FILE, PATCH_LIMIT)
    if art.text is None:
        return f'<h4>Patch</h4><p class="mut">{esc(art.problem)}</p>'
    if not art.text:
        return '<h4>Patch</h4><p class="mut">empty: nothing changed in the work tree</p>'
    changed = (run.get("evidence") or {}).get("changed") or {}
    paths = sorted(
        {p for v in changed.values() if isinstance(v, list) for p in v if isinstance(p, str)}, key=len, reverse=True
    )
    body = render_patch(art.text, paths)
    cut = (
        (
            f'<p class="small warn">showing the first {len(art.text.encode("utf-8", "surrogateescape")):,} of '
            f"{art.size:,} bytes</p>"
        )
        if art.truncated
        else ""
    )
    n = art.text.count("diff --agentdrift ")
    return (
        f'<details class="ev"{" open" if unfolded and art.size <= 16384 else ""}><summary>Patch ({n} file(s), '
        f"{art.size:,} bytes)</summary>{cut}"
        f'<pre class="pl">{body}</pre></details>'
    )


def render_patch(text: str, paths: Iterable[str] = ()) -> str:
    """A patch as coloured lines. File headers are split on the harness's own list
    of changed paths, so a path holding a newline stays one (escaped) header line."""
    headers = {f"diff --agentdrift a/{p} b/{p}\n": p for p in paths}
    fromto = {}
    for p in headers.values():
        fromto[f"--- a/{p}\n"] = ("f", f"--- a/{p}")
        fromto[f"+++ b/{p}\n"] = ("f", f"+++ b/{p}")
    out: list[str] = []
    pos = 0
    n = len(text)
    while pos < n:
        known = _known_header(text, pos, headers, fromto)
        if known is not None:
            span, length = known
            out.append(span)
            pos += length
            continue
        end = text.find("\n", pos)
        line = text[pos:] if end == -1 else text[pos:end]
        pos = n if end == -1 else end + 1
        out.append(f'<span class="{_line_class(line)}">{esc(line) or " "}</span>')
    return "".join(out)


def _known_header(
    text: str, pos: int, headers: Mapping[str, str], fromto: Mapping[str, tuple[str, str]]
) -> tuple[str, int] | None:
    """The coloured span of the file header (or ---/+++ line) of a changed path that starts at ``pos``,
    and how many characters of ``text`` it takes; None when no such header starts there."""
    if text.startswith("diff --agentdrift a/", pos):
        for h in headers:
            if text.startswith(h, pos):
                return f'<span class="h">{esc(h[:-1])}</span>', len(h)
    elif text.startswith(("--- a/", "+++ b/"), pos):
        for line, (cls, shown) in fromto.items():
            if text.startswith(line, pos):
                return f'<span class="{cls}">{esc(shown)}</span>', len(line)
    return None


#: a patch line's class by how it starts, the first match winning: a file header before an added or
#: deleted line, and "m" (anything else) last
_LINE_CLASSES = (("diff ", "h"), ("--- ", "f"), ("+++ ", "f"), ("@@", "k"), ("+", "a"), ("-", "d"), (" ", "c"))


def _line_class(line: str) -> str:
    """The class a patch line is coloured with."""
    return next((cls for start, cls in _LINE_CLASSES if line.startswith(start)), "m")


def event_list(inp: ReportInput, run: RunRecord) -> tuple[list[JsonObject], RawArtifact, int]:
    key = id(run)
    cache = inp.events_cache
    if key in cache:
        return cache[key]
    art = inp.raw(run, EVENTS_FILE, 4 << 20)
    events, bad = json_lines_objects(art.text or "")
    cache[key] = (events, art, bad)
    return cache[key]


def events_section(inp: ReportInput, run: RunRecord, unfolded: bool = False) -> str:
    events, art, bad = event_list(inp, run)
    if art.text is None:
        return f'<h4>Events</h4><p class="mut">{esc(art.problem)}</p>'
    if not events:
        return '<h4>Events</h4><p class="mut">no events</p>'
    items = []
    for i, e in enumerate(events[:EVENTS_LIMIT], 1):
        etype = str(e.get("type", "?"))
        fields = ", ".join(f"{esc(k)}={short_json(v)}" for k, v in sorted(e.items()) if k != "type")
        items.append(
            f'<li class="t-{slug(etype)}"><span class="mut small">{i}</span> <span class="ty">{esc(etype)}</span> {fields}</li>'
        )
    more = (
        f'<p class="small warn">{len(events) - EVENTS_LIMIT} more event(s) in events.jsonl not shown</p>'
        if len(events) > EVENTS_LIMIT
        else ""
    )
    badp = f'<p class="small warn">{bad} line(s) of events.jsonl were not JSON objects</p>' if bad else ""
    return (
        f'<details class="ev"{" open" if unfolded and len(events) <= 50 else ""}><summary>Events timeline '
        f"({len(events)})</summary>"
        f'<ol class="tl">{"".join(items)}</ol>{more}{badp}</details>'
    )


def head_section(inp: ReportInput, run: RunRecord, name: str, label: str, total: object, capture_cut: object) -> str:
    art = inp.raw(run, name, HEAD_LIMIT)
    if art.text is None:
        return f'<h4>{label}</h4><p class="mut">{esc(art.problem)}</p>'
    if not art.text:
        return f'<h4>{label}</h4><p class="mut">empty</p>'
    note = (
        f"first {HEAD_LIMIT // 1024} KiB of {art.size:,} bytes recorded"
        if art.truncated
        else f"{art.size:,} bytes recorded"
    )
    if capture_cut:
        note += (
            f"; the agent wrote {total:,} bytes, capture kept head and tail"
            if isinstance(total, int)
            else "; capture truncated"
        )
    return (
        f'<details class="ev"><summary>{label} ({esc(note)})</summary><pre>{esc(art.text, block=True)}</pre></details>'
    )
