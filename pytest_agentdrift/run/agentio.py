"""What the agent says about itself: its events and its final report. No pytest.

The agent's word is never the evidence. Everything it writes is read with
limits, validated, and kept apart from what the harness observed:

* an event must be a JSON object with a short `type`, at most
  EVENT_MAX_BYTES serialised and EVENT_MAX_DEPTH deep, with finite numbers
  only (no NaN, no Infinity, no 1e400), integers of at most INT_MAX_DIGITS
  digits (a 401-digit integer overflows every float it meets) and no unpaired
  surrogates; anything else is dropped and counted by reason;
* every event the agent (or its adapter, from the agent's own output) reports
  is stamped `source: agent` by the harness, whatever it claims; a claim of
  another source is kept as `claimed_source`. Only the harness's own
  observations carry `source: harness`;
* what is written back out (raw/events.jsonl) is always valid JSON.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from pathlib import Path
from typing import NoReturn, TypedDict

from pytest_agentdrift.canonical import loads_json_strict, read_regular
from pytest_agentdrift.safetext import json_safe
from pytest_agentdrift.shapes import JsonObject, JsonValue
from pytest_agentdrift.tasks.taskspec import REPORT_STATUSES

EVALUATOR_COMPONENT = "agentio"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

EVENT_MAX_BYTES = 16 << 10
EVENT_MAX_DEPTH = 8
#: the longest integer the agent may write (2**63 has 19 digits): beyond it, a number is refused
INT_MAX_DIGITS = 19
EVENTS_MAX = 10_000
EVENTS_FILE_MAX = 16 << 20
#: problems listed one by one; the rest are only counted
PROBLEMS_LISTED = 20
_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_.:/-]{0,63}")


class InvalidEvent(ValueError):
    """`reason` is the short, countable name of what is wrong."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}{': ' + detail if detail else ''}")
        self.reason = reason


def _no_constant(name: str) -> NoReturn:
    raise InvalidEvent("non-finite number", name)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidEvent("non-finite number", text[:20])
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > INT_MAX_DIGITS:
        raise InvalidEvent("number too large", f"{len(text)} digits, at most {INT_MAX_DIGITS}")
    return int(text)


def loads_untrusted(text: str) -> JsonValue:
    """Strict JSON: duplicate keys, NaN, Infinity, overflowing and over-long numbers refused."""
    return loads_json_strict(text, parse_constant=_no_constant, parse_float=_finite_float, parse_int=_bounded_int)


def _check_string(value: str) -> None:
    """Returns when the string can be written as UTF-8; raises InvalidEvent (an unpaired surrogate) otherwise."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidEvent("unpaired surrogate in a string") from None


def _check_number(value: int | float) -> None:
    """Returns when the number (not a bool) is one an event may carry; raises InvalidEvent when a float
    is not finite or an int has too many digits."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidEvent("non-finite number")
    elif abs(value) >= 10**INT_MAX_DIGITS:
        raise InvalidEvent("number too large", f"more than {INT_MAX_DIGITS} digits")


def _check_value(value: object, depth: int) -> None:
    """Returns when `value` is JSON an event may carry; raises InvalidEvent at the first thing in it
    that is not, depth first."""
    if depth > EVENT_MAX_DEPTH:
        raise InvalidEvent("nested too deeply", f"more than {EVENT_MAX_DEPTH} levels")
    if isinstance(value, str):
        _check_string(value)
    elif isinstance(value, (float, int)) and not isinstance(value, bool):
        _check_number(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_value(k, depth + 1)
            _check_value(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _check_value(v, depth + 1)
    elif not (value is None or isinstance(value, (bool, int))):
        raise InvalidEvent("not a JSON value", type(value).__name__)


def validate_event(obj: object) -> JsonObject:
    """The event, checked (InvalidEvent otherwise); not yet stamped."""
    if not isinstance(obj, dict):
        raise InvalidEvent("not an object")
    etype = obj.get("type")
    if not isinstance(etype, str):
        raise InvalidEvent("no string 'type'")
    if not _TYPE.fullmatch(etype):
        raise InvalidEvent("invalid 'type'", repr(etype[:40]))
    _check_value(obj, 0)
    size = len(json.dumps(obj, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    if size > EVENT_MAX_BYTES:
        raise InvalidEvent("too large", f"{size} bytes, at most {EVENT_MAX_BYTES}")
    return obj


def stamp_agent(event: JsonObject) -> JsonObject:
    """An agent-reported event as the harness records it: `source: agent`, always."""
    out = {k: v for k, v in event.items() if k not in ("source", "claimed_source")}
    claimed = event.get("source")
    if claimed is not None and claimed != "agent":
        out["claimed_source"] = claimed
    out["source"] = "agent"
    return out


class EventLog:
    """Events read from the agent, with every problem counted by reason."""

    def __init__(self) -> None:
        self.events: list[JsonObject] = []
        self.dropped: Counter[str] = Counter()
        self.problems: list[str] = []
        self._unlisted = 0

    def problem(self, reason: str, detail: str) -> None:
        self.dropped[reason] += 1
        if len(self.problems) < PROBLEMS_LISTED:
            self.problems.append(detail)
        else:
            self._unlisted += 1

    def add(self, obj: object, where: str, into: list[JsonObject] | None = None) -> None:
        into = self.events if into is None else into
        if len(into) >= EVENTS_MAX:
            self.problem("over the event limit", f"{where}: more than {EVENTS_MAX} events; the rest ignored")
            return
        try:
            into.append(stamp_agent(validate_event(obj)))
        except InvalidEvent as exc:
            self.problem(exc.reason, f"{where}: dropped, {exc}")

    def problem_lines(self) -> list[str]:
        return self.problems + (
            [f"... and {self._unlisted} more problem(s) (counted in events_dropped)"] if self._unlisted else []
        )


def read_events(path: Path, log: EventLog | None = None) -> EventLog:
    """Events from the JSONL file the agent wrote (AGENTDRIFT_EVENTS)."""
    log = log if log is not None else EventLog()
    if not os.path.lexists(path):
        return log
    try:
        data = read_regular(path, EVENTS_FILE_MAX + 1)
    except OSError as exc:
        log.problem("unreadable", f"cannot read: {exc}")
        return log
    if len(data) > EVENTS_FILE_MAX:
        data = data[:EVENTS_FILE_MAX]
        log.problem("events file too large", f"events file larger than {EVENTS_FILE_MAX} bytes; the rest ignored")
    for lineno, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        if len(line) > EVENT_MAX_BYTES * 2:  # never parse megabytes to find out
            log.problem("too large", f"line {lineno}: dropped, too large: {len(line)} bytes")
            continue
        try:
            obj = loads_untrusted(line.decode("utf-8"))
        except InvalidEvent as exc:
            log.problem(exc.reason, f"line {lineno}: dropped, {exc}")
            continue
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            log.problem("not JSON", f"line {lineno}: not JSON ({str(exc)[:200]})")
            continue
        log.add(obj, f"line {lineno}")
    return log


def adapter_events(events: list[JsonObject], log: EventLog) -> list[JsonObject]:
    """Events an adapter parsed from the agent's output: the agent's word too."""
    out: list[JsonObject] = []
    for i, e in enumerate(events):
        log.add(json_safe(e), f"agent output event {i + 1}", into=out)
    return out


def read_report(path: Path) -> tuple[AgentReport | None, str | None]:
    """The agent's final report, or (None, why it is unusable)."""
    obj, problem = read_report_object(path)
    return (None, problem) if problem is not None else validate_report(obj)


def read_report_object(path: Path) -> tuple[JsonValue, str | None]:
    """The report file parsed strictly, not yet validated (its `infra_error` status is read
    from this too), or (None, why it is unusable). Read once per run."""
    if not os.path.lexists(path):
        return None, "no final report written"
    try:
        data = read_regular(path, (1 << 20) + 1)
        if len(data) > 1 << 20:
            return None, "report larger than 1 MiB"
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"report unreadable: {exc}"
    try:
        return loads_untrusted(text), None
    except (ValueError, RecursionError) as exc:
        return None, f"report is not valid JSON: {str(exc)[:200]}"


class AgentReport(TypedDict):
    """The agent's final report as validate_report keeps it: its status, two texts, two lists of check names."""

    status: str
    summary: str
    answer: str
    checks_run: list[str]
    checks_skipped: list[str]


def _safe_text(value: object) -> str:
    """A string of the report, its unpaired surrogates escaped (safetext.json_safe); anything else is empty."""
    return str(json_safe(value)) if isinstance(value, str) else ""


def _safe_names(value: object) -> list[str]:
    return [_safe_text(str(v)) for v in value] if isinstance(value, list) else []


def validate_report(obj: object) -> tuple[AgentReport | None, str | None]:
    if not isinstance(obj, dict):
        return None, "report is not a JSON object"
    status = obj.get("status")
    if not isinstance(status, str) or status not in REPORT_STATUSES:
        return None, f"report status {str(obj.get('status'))[:40]!r} is not one of {', '.join(REPORT_STATUSES)}"
    clean: AgentReport = {
        "status": status,
        "summary": _safe_text(obj.get("summary")),
        "answer": _safe_text(obj.get("answer")),
        "checks_run": _safe_names(obj.get("checks_run", [])),
        "checks_skipped": _safe_names(obj.get("checks_skipped", [])),
    }
    return clean, None


def dump_jsonl(events: list[JsonObject]) -> str:
    """One event per line, always valid JSON (ASCII, no NaN)."""
    return "".join(json.dumps(json_safe(e), sort_keys=True, allow_nan=False) + "\n" for e in events)
