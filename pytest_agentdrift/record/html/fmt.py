"""Small HTML formatting helpers shared by the page's sections: numbers, percentages, code, JSON, lists."""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable

from pytest_agentdrift.record.html.escape import esc
from pytest_agentdrift.shapes import JsonObject, JsonValue
from pytest_agentdrift.vocabulary import TIMESTAMP_FORMAT


def json_object(value: object) -> JsonObject:
    """`value` when it is a JSON object, else an empty one: the files beside results.json are read leniently."""
    return value if isinstance(value, dict) else {}


def json_list(value: object) -> list[JsonValue]:
    """`value` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def num(x: object) -> str:
    if isinstance(x, bool) or x is None:
        return esc(x)
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return f"{x:,.4g}" if abs(x) < 1000 else f"{x:,.0f}"
    return esc(x)


def pct(x: object) -> str:
    return "null" if not isinstance(x, (int, float)) or isinstance(x, bool) else f"{100 * x:.1f}%"


def human_limit(key: str, value: object) -> object:
    """`4 GiB`, as report.md and the terminal say it (run/limits.human), for a byte count."""
    from pytest_agentdrift.run.limits import human

    return human(str(key), value) if isinstance(value, int) and not isinstance(value, bool) else value


def pp(x: object) -> str:
    return "null" if not isinstance(x, (int, float)) or isinstance(x, bool) else f"{100 * x:+.1f} pp"


def code(x: object) -> str:
    return f"<code>{esc(x)}</code>"


def json_block(obj: object) -> str:
    try:
        text = json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(obj)
    return f'<pre class="json">{esc(text, block=True)}</pre>'


def short_json(value: object) -> str:
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    if len(text) > 400:
        text = text[:400] + "\u2026"
    return f"<code>{esc(text)}</code>"


def parse_time(text: object) -> _dt.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return _dt.datetime.strptime(text, TIMESTAMP_FORMAT)
    except ValueError:
        return None


def duration(seconds: float) -> str:
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else (f"{m}m {s:02d}s" if m else f"{s}s")


def dl(rows: Iterable[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def path_list(paths: object) -> str:
    if not paths:
        return '<span class="mut">none</span>'
    if not isinstance(paths, list):
        return esc(paths)
    shown = "".join(f"<li><code>{esc(p)}</code></li>" for p in paths[:200])
    more = f"<li>\u2026 and {len(paths) - 200} more</li>" if len(paths) > 200 else ""
    return f'<ul class="paths">{shown}{more}</ul>'
