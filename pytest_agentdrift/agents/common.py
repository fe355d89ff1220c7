"""Shared helpers for the real-product adapters (Claude Code, Codex, Copilot).

All three products write one JSON object per line on stdout. Reading that is
one concept, so it lives here once: `read_jsonl` never raises, keeps the
records it could read, and says in plain words what it could not (a line that
is not JSON, a line that is JSON but not an object, bytes that are not UTF-8,
a final line cut off mid-record). Each adapter then only maps its product's
record types onto the common event list.

Also here: pulling the agent's final report out of its last message
(`extract_report`), clipping long strings before they land in events.jsonl
(`clip`), and small number coercions for usage figures.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from pytest_agentdrift.shapes import JsonObject, JsonValue
from pytest_agentdrift.tasks.taskspec import REPORT_STATUSES  # the statuses of a final report (the agent protocol)

if TYPE_CHECKING:
    from pytest_agentdrift.agents.base import AdapterOutput

#: at most this many parse errors are listed one by one; the rest are counted
MAX_LISTED_ERRORS = 20

#: longest string kept in an event field (tool inputs can hold whole files)
MAX_FIELD_CHARS = 2000

#: how much of a final message `extract_report` scans (the report is at the end)
MAX_REPORT_SCAN_CHARS = 64_000


@dataclass
class JsonlStream:
    """What `read_jsonl` got out of one captured stream."""

    records: list[tuple[int, JsonObject]] = field(default_factory=list)  # (line number, object)
    errors: list[str] = field(default_factory=list)
    text_lines: int = 0  # non-empty lines that were not JSON (plain text output, warnings)
    truncated: bool = False  # the last line had no newline and did not parse


def read_jsonl(data: bytes | str | None, *, source: str = "stdout") -> JsonlStream:
    """Split `data` into JSON objects, one per line, never raising.

    Blank lines are skipped. A final line without a newline that still parses
    is accepted (a process may exit right after its last write); one that does
    not parse is reported as a truncated stream, because that is what a killed
    or crashed agent leaves behind.
    """
    out = JsonlStream()
    if not data:
        return out
    if isinstance(data, str):
        raw = data.encode("utf-8", "surrogatepass")
    else:
        raw = bytes(data)
    lines = raw.split(b"\n")
    ends_with_newline = raw.endswith(b"\n")
    if ends_with_newline:
        lines = lines[:-1]  # the empty piece after the final newline
    errors: list[str] = []
    for index, chunk in enumerate(lines):
        # a last line without its newline is where a killed or crashed agent stopped writing
        cut = index == len(lines) - 1 and not ends_with_newline
        _read_line(chunk.rstrip(b"\r"), index + 1, cut, source, out, errors)
    if out.text_lines:
        errors.append(f"{source}: {out.text_lines} non-JSON line(s) ignored")
    out.errors = cap_errors(errors)
    return out


def typed_records(stream: JsonlStream, errors: list[str]) -> Iterator[tuple[JsonValue, JsonObject]]:
    """(type, record) of each record in order; one without a 'type' is a parse error instead."""
    for lineno, rec in stream.records:
        kind = rec.get("type")
        if kind is None:
            errors.append(f"stdout line {lineno}: object without a 'type'")
            continue
        yield kind, rec


class StreamParse(Protocol):
    """One adapter's parse of its product's JSONL transcript (parse_stream drives it)."""

    errors: list[str]

    def record(self, kind: JsonValue, rec: JsonObject) -> None: ...

    def end(self) -> None: ...

    def close(self) -> AdapterOutput: ...


def parse_stream(stdout: bytes, make: Callable[[list[str]], StreamParse], no_records: str) -> AdapterOutput:
    """An adapter's output from its JSONL transcript. `make(errors)` builds the parse: each typed
    record goes to its `record(kind, rec)`, then `end()` closes the stream; `no_records` is said
    when stdout held something but no record. The parse's `close()` is the output, with the
    parse's errors (capped) as its parse_errors."""
    stream = read_jsonl(stdout)
    parse = make(list(stream.errors))
    for kind, rec in typed_records(stream, parse.errors):
        parse.record(kind, rec)
    parse.end()
    if not stream.records and stdout:
        parse.errors.append(no_records)
    out = parse.close()
    out.parse_errors = cap_errors(parse.errors)
    return out


def _read_line(chunk: bytes, lineno: int, cut: bool, source: str, out: JsonlStream, errors: list[str]) -> None:
    """One line into ``out.records``, or a counted text line, or a message in ``errors``."""
    if not chunk.strip():
        return
    try:
        text = chunk.decode("utf-8")
    except UnicodeDecodeError as exc:
        errors.append(f"{source} line {lineno}: not UTF-8 ({exc.reason} at byte {exc.start})")
        return
    stripped = text.strip()
    # Every record of these products is an object; a line that does not
    # open like JSON is plain text (a banner, a warning, text output).
    if not stripped.startswith(("{", "[")):
        # Products print the odd plain-text line (warnings, banners); count
        # it rather than flood parse_errors, but still say so once below.
        if cut:
            out.truncated = True
            errors.append(f"{source} line {lineno}: stream ends mid-line (no newline, not JSON): {_preview(stripped)}")
        else:
            out.text_lines += 1
        return
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError) as exc:
        if cut:
            out.truncated = True
            errors.append(f"{source} line {lineno}: truncated record at end of stream ({_short(exc)})")
        else:
            errors.append(f"{source} line {lineno}: malformed JSON ({_short(exc)}): {_preview(stripped)}")
        return
    if not isinstance(value, dict):
        errors.append(f"{source} line {lineno}: JSON {type(value).__name__}, expected an object")
        return
    out.records.append((lineno, value))


def cap_errors(errors: list[str], limit: int = MAX_LISTED_ERRORS) -> list[str]:
    """Keep the first `limit` messages and say how many more there were."""
    if len(errors) <= limit:
        return list(errors)
    return [*errors[:limit], f"... and {len(errors) - limit} more parse error(s)"]


def _short(exc: BaseException) -> str:
    return str(exc).split("\n", 1)[0][:120]


def _preview(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def clip(value: object, limit: int = MAX_FIELD_CHARS, _depth: int = 0) -> JsonValue:
    """Copy `value` with long strings shortened and deep nesting cut.

    Events are evidence a person reads; a tool input holding a 200 kB file
    would drown them, so long strings keep their head and a visible mark.
    """
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return value[:limit] + f"…[{len(value) - limit} more chars]"
    if _depth > 6:
        return "…[nested too deep]"
    if isinstance(value, dict):
        return {str(k): clip(v, limit, _depth + 1) for k, v in list(value.items())[:100]}
    if isinstance(value, (list, tuple)):
        return [clip(v, limit, _depth + 1) for v in list(value)[:100]]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return clip(str(value), limit, _depth + 1)


#: no real count or price comes near this; larger numbers in a product's output are garbage, not
#: something to do arithmetic with (a 400-digit integer overflows a float)
COUNT_MAX = 10**15


def as_int(value: object) -> int | None:
    """A token count as int, or None when the product gave none or garbage."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value <= COUNT_MAX else None
    if isinstance(value, float) and value.is_integer() and 0 <= value <= COUNT_MAX:
        return int(value)
    return None


def as_float(value: object) -> float | None:
    """A cost or duration as float, or None when the product gave none, garbage or no finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if abs(value) > COUNT_MAX or value != value:  # too large, infinite or NaN
        return None
    return float(value)


def as_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def as_dict(value: object) -> JsonObject:
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[JsonValue]:
    return value if isinstance(value, list) else []


def extract_report(text: str | None) -> JsonObject | None:
    """The last JSON object in `text` that looks like a final report, else None.

    The agent may end its last message with the report (`{"status": ...,
    "summary": ...}`), fenced as ```json or bare. A JSON object counts as a
    report only when its `status` is one of REPORT_STATUSES, so code samples
    in the message are not mistaken for it. Only the tail of a long message is
    scanned: the report is expected at the end, and scanning is quadratic.
    """
    if not text or not isinstance(text, str):
        return None
    tail = text[-MAX_REPORT_SCAN_CHARS:]
    decoder = json.JSONDecoder()
    found: JsonObject | None = None
    pos = tail.find("{")
    attempts = 0
    while pos != -1 and attempts < 2000:
        attempts += 1
        try:
            value, end = decoder.raw_decode(tail, pos)
        except (ValueError, RecursionError):
            pos = tail.find("{", pos + 1)
            continue
        if isinstance(value, dict) and value.get("status") in REPORT_STATUSES:
            found = value
            pos = tail.find("{", end)
        else:
            # A non-report object may still contain a report nested inside it
            # (unlikely) or be followed by one; keep scanning after its start.
            pos = tail.find("{", pos + 1)
    return found


def final_event(report: Mapping[str, object] | None, outcome: str, **extra: JsonValue) -> JsonObject:
    """The common `final` event.

    `status` is the agent's own declared status (from its report) when it gave
    one, else None: the product's success/error flag is kept apart as
    `outcome`, because "the CLI exited cleanly" is not "the task is complete".
    """
    status = report.get("status") if report else None
    event: JsonObject = {"type": "final", "status": status if isinstance(status, str) else None, "outcome": outcome}
    event.update({k: v for k, v in extra.items() if v is not None})
    return event


def close_report(out: AdapterOutput, text: str | None, outcome: str | None, **extra: JsonValue) -> None:
    """The final report the agent's last message holds (`text`), into `out`; and when the product
    said how the run ended (`outcome`), the `final` event (a stream cut short has none)."""
    out.final_report = extract_report(text)
    if outcome is not None:
        out.events.append(final_event(out.final_report, outcome, **extra))


def option_list(value: object) -> list[str]:
    """A tool list option may come as a list or as one comma-separated string."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, Iterable):
        raise TypeError(f"a tool list option is a list or a string, not {type(value).__name__}")
    return [str(v).strip() for v in value if str(v).strip()]
