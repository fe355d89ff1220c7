"""report.html: one self-contained page for a recorded run and its comparison. No pytest.

    load_input(run_dir, results=None)  -> ReportInput   the record's files, read leniently
    render(inp)                        -> str           the page (pure: no I/O)
    render_record(run_dir, results)    -> str           both, for the controller and the CLI

The page loads nothing: inline CSS, inline SVG and a few lines of inline
script (opening collapsed sections on link navigation), pinned by a
Content-Security-Policy that allows only those two inline blocks (by hash),
so a string that slipped past escaping still could not fetch or run anything.

Everything the agent could influence (file names, patch, events, report,
stdout, check details and evidence) goes through `esc`: HTML-escaped, and
control characters, lone surrogates (bytes that were not UTF-8, kept by
surrogateescape) and bidirectional overrides shown as visible escapes such
as ``\\x1b`` or ``\\n``, never emitted raw.

A large suite stays usable: every task and every run is a collapsed
<details>; raw artifacts are read only up to a bound and the cut is marked.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import html
import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentdrift.canonical import json_lines_objects
from pytest_agentdrift.record.report import _LAYER_ABBR
from pytest_agentdrift.tasks.load import LAYERS
from pytest_agentdrift.vocabulary import (
    ARGV_FILE,
    COMPARISON_FILE,
    DECISION_FILE,
    ERROR_LIKE_OUTCOMES,
    ERROR_OUTCOME,
    EVENTS_FILE,
    FAILED_OUTCOME,
    INFRA_OUTCOME,
    MANIFEST_DIFF_FILE,
    MANIFEST_FILE,
    OVER_BUDGET_OUTCOME,
    PASSED_OUTCOME,
    PATCH_FILE,
    RESOURCE_EXCEEDED_OUTCOME,
    STDERR_FILE,
    STDOUT_FILE,
    TIMEOUT_OUTCOME,
    TIMESTAMP_FORMAT,
    UNDECIDED_OUTCOME,
    UNSCORED_OUTCOMES,
    is_concrete,
)

#: what each layer asks (the terminal shows the same abbreviations)
LAYER_MEANING = {
    "safety": "no forbidden effect: network, writes outside the work tree, credential reads, git mutation, protected paths",
    "correctness": "the work is right: tests and golden outputs pass",
    "scope": "only the allowed paths changed (or nothing, where nothing may change)",
    "instruction_fidelity": "the instruction's own rules and conventions were followed",
    "verification": "the agent checked its work and reported honestly (status, skipped checks)",
    "efficiency": "bounded attempts: no repeated retries, no wasted effort",
    "operator_load": "what the operator had to do: approvals asked for, questions",
    "recovery": "resuming from a handoff or recovering from a failure",
}

#: outcome -> (css class, mark, meaning); outcomes this version does not know render as "other"
OUTCOMES = {
    PASSED_OUTCOME: ("ok", "\u2713", "passed: every check passed"),
    FAILED_OUTCOME: ("bad", "\u2717", "failed: at least one check failed"),
    "critical": ("crit", "!", "failed a critical check (rejects a candidate whatever the averages say)"),
    "tampered": (
        "tamp",
        "T",
        "tampered pass: would have passed, but changed protected tests or test configuration; counted as a fail",
    ),
    ERROR_OUTCOME: ("err", "E", "error: the agent could not be started"),
    # marks are characters every common font has (U+231B, an hourglass, is missing from many)
    TIMEOUT_OUTCOME: ("err", "\u2026", "timeout: the agent ran out of time and its process tree was killed"),
    INFRA_OUTCOME: (
        "infra",
        "I",
        "infrastructure error: the harness, not the agent, failed; not counted for or against the agent",
    ),
    RESOURCE_EXCEEDED_OUTCOME: ("res", "R", "resource limit exceeded"),
    UNDECIDED_OUTCOME: (
        "err",
        "U",
        "undecided: the harness failed while judging this run; never a pass, never scored (the session exits 4)",
    ),
    OVER_BUDGET_OUTCOME: (
        "res",
        "$",
        "over budget: the run was stopped for going over its per-run token or cost budget",
    ),
    "other": ("oth", "?", "an outcome this version of the report does not know"),
}
_LAYER_MARK = {"pass": ("ok", "\u25cf"), "fail": ("bad", "\u25cf"), "n/a": ("na", "\u00b7")}

#: bounds on what is read from raw/ per run (the record keeps everything)
PATCH_LIMIT = 256 << 10
HEAD_LIMIT = 8 << 10
EVENTS_LIMIT = 500
SMALL_LIMIT = 64 << 10

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


def esc(text: Any, block: bool = False) -> str:
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


def attr(text: Any) -> str:
    """An attribute value: the same visible escapes, as plain text."""
    s = text if isinstance(text, str) else str(text)
    return html.escape(_SPECIAL_INLINE.sub(lambda m: visible(m.group()), s), quote=True)


def slug(text: Any) -> str:
    """An id fragment: ASCII letters, digits, - and _ kept, anything else as .hex. (injective)."""
    return "".join(c if (c.isascii() and (c.isalnum() or c in "-_")) else f".{ord(c):x}." for c in str(text))


def task_anchor(tid: str) -> str:
    return f"t-{slug(tid)}"


def run_anchor(tid: str, rep: Any) -> str:
    return f"r-{slug(tid)}-{slug(rep)}"


def check_anchor(tid: str, rep: Any, index: int) -> str:
    return f"c-{slug(tid)}-{slug(rep)}-{index}"


def evidence_anchor(tid: str, rep: Any, index: int) -> str:
    return f"e-{slug(tid)}-{slug(rep)}-{index}"


# ---------------------------------------------------------------------------
# Input: what the page is made of
# ---------------------------------------------------------------------------


@dataclass
class RawArtifact:
    text: str | None  # None: not recorded / unreadable
    size: int = 0  # bytes on disk
    truncated: bool = False  # only the head was read
    problem: str | None = None


@dataclass
class ReportInput:
    results: dict[str, Any]
    run_dir: Path | None = None
    decision: dict[str, Any] | None = None
    comparison: dict[str, Any] | None = None
    manifest_diff: dict[str, Any] | None = None
    manifest: dict[str, Any] | None = None
    baseline_label: str | None = None
    closing: str | None = None  # the session's closing line (agentdrift: exit N — reason), shown first
    notes: list[str] = field(default_factory=list)  # problems reading the record, shown on the page
    events_cache: dict[int, Any] = field(default_factory=dict, repr=False)  # parsed events.jsonl per run

    def raw(self, run: Mapping[str, Any], name: str, limit: int) -> RawArtifact:
        """The head of one raw artifact of a run, read without following links."""
        rel = run.get("raw")
        if self.run_dir is None or not isinstance(rel, str) or not rel:
            return RawArtifact(None, problem="not recorded")
        parts = Path(rel).parts
        if Path(rel).is_absolute() or ".." in parts:
            return RawArtifact(None, problem=f"raw path {rel!r} leaves the record; not read")
        path = self.run_dir.joinpath(*parts, name)
        if not inside(path, self.run_dir):
            return RawArtifact(None, problem="reached through a link that leaves the record; not read")
        from pytest_agentdrift.canonical import open_regular

        try:
            fd = open_regular(path)
        except FileNotFoundError:
            return RawArtifact(None, problem="not recorded")
        except OSError as exc:
            return RawArtifact(None, problem=f"not read: {exc.strerror or exc}")
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            data = fh.read(limit)
        return RawArtifact(data.decode("utf-8", "surrogateescape"), size, size > len(data))


def inside(path: Path, root: Path) -> bool:
    """Whether `path`'s directory resolves inside `root` (a record copied from elsewhere may hold links)."""
    parent = os.path.realpath(path.parent)
    top = os.path.realpath(root)
    return parent == top or parent.startswith(top + os.sep)


def _read_json(path: Path, notes: list[str]) -> Any:
    if not path.exists():
        return None
    from pytest_agentdrift.canonical import load_json_file
    from pytest_agentdrift.errors import AgentDriftError

    try:
        return load_json_file(path)
    except AgentDriftError as exc:
        notes.append(f"{path.name} could not be read: {exc.problem}")
        return None


def load_input(run_dir: Path, results: dict[str, Any] | None = None) -> ReportInput:
    """Everything the page shows, from a record directory.

    `results` is given by the controller, which renders before results.json
    is written (results.json is written last and marks completeness). A
    missing or unreadable comparison file is a note on the page, not an error.
    """
    run_dir = Path(run_dir)
    notes: list[str] = []
    if results is None:
        from pytest_agentdrift.record.store import load_run

        results = load_run(run_dir, require_complete=False)
    inp = ReportInput(
        results=results,
        run_dir=run_dir,
        decision=_read_json(run_dir / DECISION_FILE, notes),
        comparison=_read_json(run_dir / COMPARISON_FILE, notes),
        manifest_diff=_read_json(run_dir / MANIFEST_DIFF_FILE, notes),
        manifest=_read_json(run_dir / MANIFEST_FILE, notes),
        notes=notes,
    )
    for name in ("decision", "comparison", "manifest_diff", "manifest"):
        if getattr(inp, name) is not None and not isinstance(getattr(inp, name), dict):
            notes.append(f"{name.replace('_', '-')} is not a JSON object; not shown")
            setattr(inp, name, None)
    return inp


def render_record(run_dir: Path, results: dict[str, Any] | None = None, closing: str | None = None) -> str:
    from pytest_agentdrift.record.summary import closing_line

    inp = load_input(run_dir, results)
    inp.closing = closing or closing_line(run_dir, inp.decision)
    return render(inp)


def render_failure_page(run_id: str, error: BaseException) -> str:
    """What report.html holds when rendering failed: the reason, honestly (a bug of ours)."""
    body = (
        f'<h1>pytest-agentdrift run {esc(run_id)}</h1><p class="warn">report.html could not be rendered: '
        f"{esc(type(error).__name__)}: {esc(error)}. This is a bug in pytest-agentdrift; results.json and "
        f"report.md hold the complete record.</p>"
    )
    return _page(f"agentdrift run {run_id}", body)


# ---------------------------------------------------------------------------
# Small formatting helpers
# ---------------------------------------------------------------------------


def _num(x: Any) -> str:
    if isinstance(x, bool) or x is None:
        return esc(x)
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return f"{x:,.4g}" if abs(x) < 1000 else f"{x:,.0f}"
    return esc(x)


def _pct(x: Any) -> str:
    return "null" if not isinstance(x, (int, float)) or isinstance(x, bool) else f"{100 * x:.1f}%"


def _human_limit(key: str, value: Any) -> Any:
    """`4 GiB`, as report.md and the terminal say it (run/limits.human), for a byte count."""
    from pytest_agentdrift.run.limits import human

    return human(str(key), value) if isinstance(value, int) and not isinstance(value, bool) else value


def _detectable_prose(gate: Any) -> str | None:
    """`50 pp at power 0.8, alpha 0.05, 12 tasks, k = 1` from a regression gate's minimum_detectable."""
    mde = gate.get("minimum_detectable") if isinstance(gate, Mapping) else None
    if not isinstance(mde, Mapping):
        return None
    size = f"{mde['mde_pp']} pp" if mde.get("mde_pp") is not None else "no regression is detectable"
    alpha = gate.get("alpha", mde.get("alpha"))
    facts = [f"power {mde.get('power')}", f"alpha {alpha}", f"{mde.get('tasks')} tasks", f"k = {mde.get('k')}"]
    return f"{size} at " + ", ".join(facts)


def _pp(x: Any) -> str:
    return "null" if not isinstance(x, (int, float)) or isinstance(x, bool) else f"{100 * x:+.1f} pp"


def _code(x: Any) -> str:
    return f"<code>{esc(x)}</code>"


def _json_block(obj: Any) -> str:
    try:
        text = json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(obj)
    return f'<pre class="json">{esc(text, block=True)}</pre>'


def _parse_time(text: Any) -> _dt.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return _dt.datetime.strptime(text, TIMESTAMP_FORMAT)
    except ValueError:
        return None


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else (f"{m}m {s:02d}s" if m else f"{s}s")


def _dl(rows: Iterable[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def run_state(run: Mapping[str, Any]) -> str:
    """The one outcome class a run is drawn with (critical and tampered before plain fail)."""
    outcome = run.get("outcome")
    if run.get("tampered_pass"):
        return "tampered"
    if outcome == PASSED_OUTCOME and run.get("passed") is True:
        return PASSED_OUTCOME
    if outcome == FAILED_OUTCOME:
        return "critical" if run.get("critical_failed") else FAILED_OUTCOME
    if isinstance(outcome, str) and outcome in OUTCOMES:
        return outcome
    return "other"


def _layer_abbr(layer: str) -> str:
    return _LAYER_ABBR.get(layer, layer[:4])


def _layers_of(results: Mapping[str, Any]) -> list[str]:
    extra = sorted(
        {
            lay
            for t in results.get("tasks", {}).values()
            for r in t.get("runs", [])
            for lay in (r.get("layers") or {})
            if lay not in LAYERS
        }
    )
    return [*LAYERS, *extra]


# ---------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------

_CSS = """
:root{--ok:#1a7f37;--bad:#cf222e;--crit:#82071e;--tamp:#8250df;--err:#6e7781;--infra:#bc4c00;--res:#9a6700;
--oth:#57606a;--bg:#fff;--fg:#1f2328;--mut:#57606a;--line:#d0d7de;--soft:#f6f8fa}
*{box-sizing:border-box}body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);
background:var(--bg);margin:0 auto;max-width:1280px;padding:0 16px 48px}
h1{font-size:22px;margin:18px 0 6px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid var(--line);
padding-bottom:4px}h3{font-size:15px;margin:14px 0 6px}h4{font-size:13px;margin:10px 0 4px}
a{color:#0969da;text-decoration:none}a:hover{text-decoration:underline}
code,pre,.mono{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:8px;overflow:auto;
max-height:480px;margin:4px 0;white-space:pre-wrap;word-break:break-all}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:6px 0}dt{color:var(--mut)}dd{margin:0}
nav{position:sticky;top:0;background:var(--bg);border-bottom:1px solid var(--line);padding:6px 0;z-index:2}
nav a{margin-right:14px}
table{border-collapse:collapse;margin:6px 0}th,td{border:1px solid var(--line);padding:3px 6px;text-align:left;
vertical-align:top}th{background:var(--soft);font-weight:600}
.cc{color:#fff;background:#bf3989;border-radius:3px;padding:0 2px;font-family:ui-monospace,monospace}
.warn{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;padding:6px 10px}
.bad-box{background:#ffebe9;border:1px solid var(--bad);border-radius:6px;padding:6px 10px}
.ok-box{background:#dafbe1;border:1px solid var(--ok);border-radius:6px;padding:6px 10px}
.mut{color:var(--mut)}.small{font-size:12px}
.chip{display:inline-block;min-width:18px;text-align:center;border-radius:4px;padding:0 4px;margin:1px;color:#fff;
font-weight:600;font-size:12px}
.chip.ok{background:var(--ok)}.chip.bad{background:var(--bad)}.chip.crit{background:var(--crit);outline:2px solid #ff8182}
.chip.tamp{background:var(--tamp)}.chip.err{background:var(--err)}.chip.infra{background:var(--infra)}
.chip.res{background:var(--res)}.chip.oth{background:var(--oth)}
.lm{display:inline-block;width:10px;text-align:center;font-size:11px}.lm.ok{color:var(--ok)}.lm.bad{color:var(--bad)}
.lm.na{color:#afb8c1}.lm.crit{color:var(--crit);font-weight:700}
#grid-table td.lay{text-align:center;white-space:nowrap}#grid-table tr.has-crit td.tid{border-left:4px solid var(--crit)}
#grid-table tr.has-tamp td.tid{border-left:4px solid var(--tamp)}
details{border:1px solid var(--line);border-radius:6px;margin:6px 0;padding:2px 8px}
details>summary{cursor:pointer;padding:3px 0}details[open]>summary{border-bottom:1px solid var(--line);margin-bottom:6px}
details.ev{border-style:dashed}.evi{margin-top:2px}[id]{scroll-margin-top:44px}
.pl .h{color:#6639ba;font-weight:600}.pl .f{color:#0550ae;font-weight:600}.pl .k{color:#8250df}
.pl .a{background:#dafbe1;color:#116329}.pl .d{background:#ffebe9;color:#82071e}.pl .m{color:var(--mut)}
.pl>span{display:block}
ol.tl{list-style:none;padding-left:0;margin:4px 0;border-left:2px solid var(--line)}
ol.tl li{position:relative;padding:1px 0 1px 16px}ol.tl li::before{content:"";position:absolute;left:-6px;top:7px;
width:10px;height:10px;border-radius:50%;background:#8c959f}
ol.tl li.t-final::before{background:var(--ok)}ol.tl li.t-error::before,ol.tl li.t-denial::before{background:var(--bad)}
ol.tl li.t-network_attempt::before,ol.tl li.t-write_outside::before{background:var(--crit)}
ol.tl li.t-file_edit::before{background:#0969da}ol.tl li.t-command::before,ol.tl li.t-tool_call::before{background:#bf8700}
.ty{font-weight:600;font-family:ui-monospace,monospace;font-size:12px}
.status{font-size:16px;font-weight:700}
tr.lost td{background:#ffebe9}tr.won td{background:#dafbe1}
button{font:inherit;margin-right:6px}
svg text{font:11px system-ui,sans-serif;fill:#1f2328}
"""

_JS = """
(function(){
function openTo(id){var el=document.getElementById(id);if(!el)return;
for(var p=el;p;p=p.parentElement){if(p.tagName==='DETAILS'){p.open=true;}}el.scrollIntoView();}
function fromHash(){if(location.hash.length>1){openTo(decodeURIComponent(location.hash.slice(1)));}}
window.addEventListener('hashchange',fromHash);fromHash();
function setAll(open){var d=document.querySelectorAll('#tasks details');for(var i=0;i<d.length;i++){d[i].open=open;}}
var e=document.getElementById('expand-all');if(e){e.addEventListener('click',function(){setAll(true);});}
var c=document.getElementById('collapse-all');if(c){c.addEventListener('click',function(){setAll(false);});}
})();
"""


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


_CSP = (
    f"default-src 'none'; style-src {_csp_hash(_CSS)}; script-src {_csp_hash(_JS)}; img-src 'none'; "
    "base-uri 'none'; form-action 'none'"
)


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>\n{body}\n"
        f"<script>{_JS}</script></body></html>\n"
    )


def render(inp: ReportInput) -> str:
    r = inp.results
    tasks = r.get("tasks") or {}
    has_cmp = inp.decision is not None or inp.comparison is not None
    nav = ['<a href="#summary">Summary</a>']
    if has_cmp:
        nav.append('<a href="#comparison">Comparison</a>')
    nav += ['<a href="#grid">Task \u00d7 layer grid</a>', '<a href="#tasks">Runs</a>', '<a href="#legend">Legend</a>']
    parts = [
        f'<header id="top"><h1>pytest-agentdrift run {esc(r.get("run_id", "?"))}</h1>{_closing(inp)}'
        f"{_header(inp)}</header>",
        f"<nav>{''.join(nav)}</nav>",
        _summary(inp),
    ]
    if has_cmp:
        parts.append(_comparison(inp))
    parts += [_grid(r, tasks), _task_sections(inp, tasks), _legend(r), _footer(r)]
    return _page(f"agentdrift run {r.get('run_id', '?')}", "\n".join(parts))


# -- header -------------------------------------------------------------------


def _gate_item_rows(items: Any) -> list[tuple[str, str]]:
    """The tasks pytest's summary and JUnit count as failed and as xfailed under the regression gate."""
    if not isinstance(items, Mapping):
        return []
    rows = []
    for key, label in (("failed", "failed (held against the candidate)"), ("xfailed", "xfailed (not held)")):
        entries = items.get(key)
        if isinstance(entries, Mapping) and entries:
            rows.append(
                (
                    label,
                    "<ul>"
                    + "".join(
                        f'<li><a href="#{task_anchor(str(t))}">{esc(t)}</a>: {esc(why)}</li>'
                        for t, why in entries.items()
                    )
                    + "</ul>",
                )
            )
    return rows


def _closing(inp: ReportInput) -> str:
    """The closing line first, as the terminal, report.md and the summary say it."""
    if not inp.closing:
        return ""
    box = "ok-box" if inp.closing.startswith("agentdrift: exit 0 ") else "bad-box"
    return f'<p class="{box}" id="closing"><b>{esc(inp.closing)}</b></p>'


def _usage_totals(tasks: Mapping[str, Any]) -> tuple[dict[str, Any], int, int]:
    totals: dict[str, Any] = {}
    reported = runs = 0
    for t in tasks.values():
        for run in t.get("runs", []):
            runs += 1
            usage = run.get("usage") or {}
            seen = False
            for key in ("input_tokens", "output_tokens", "cached_tokens", "cost_usd"):
                v = usage.get(key)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    totals[key] = totals.get(key, 0) + v
                    seen = True
            reported += seen
    return totals, reported, runs


def _header(inp: ReportInput) -> str:
    r = inp.results
    settings = r.get("settings") or {}
    tasks = r.get("tasks") or {}
    rows = _agent_rows(r.get("agent") or {}, tasks, (inp.manifest or {}).get("identity") or {})
    rows.append(("isolation enforced", _isolation_text(r.get("isolation") or {})))
    rows.append(("limits", _limits_text(r, settings)))
    rows.append(("repetitions", f"k = {esc(settings.get('k', '?'))}; fail on {esc(settings.get('fail_on', 'any'))}"))
    for key in ("runtime_id", "task_set_id", "evaluator_id"):
        rows.append((key.replace("_", " "), _code(r.get(key)) if r.get(key) else '<span class="mut">none</span>'))
    start, end = _parse_time(r.get("started_at")), _parse_time(r.get("finished_at"))
    when = f"{esc(r.get('started_at', '?'))} \u2192 {esc(r.get('finished_at', '?'))}"
    if start and end:
        when += f" ({_duration((end - start).total_seconds())})"
    rows.append(("when", when))
    rows.append(("tokens and cost", _usage_text(tasks)))
    if r.get("merged_from"):
        rows.append(("merged from", ", ".join(_code(x) for x in r["merged_from"])))
    if isinstance(r.get("regraded_from"), Mapping):
        src = r["regraded_from"]
        rows.append(
            (
                "regraded",
                f"{esc(src.get('at', '?'))} from run {_code(src.get('run_id'))}, graded then by evaluator "
                f"{_code(src.get('evaluator_id'))}: the agent's runs are that record's, the checks are today's",
            )
        )
    rows.append(("plugin", f"pytest-agentdrift {esc(r.get('plugin_version', '?'))}"))
    return _dl(rows)


def _agent_rows(
    agent: Mapping[str, Any], tasks: Mapping[str, Any], identity: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """The agent, its command line and the model stamps the runs reported."""
    rows: list[tuple[str, str]] = []
    rows.append(
        (
            "agent",
            f"{_code(agent.get('name', '?'))} version {_code(agent.get('version', '?'))}"
            + (
                f' <span class="mut">({esc(agent.get("product"))}, {esc(agent.get("surface"))})</span>'
                if agent.get("product")
                else ""
            ),
        )
    )
    argv = agent.get("argv")
    if isinstance(argv, list) and argv:
        rows.append(("command", _code(" ".join(str(a) for a in argv))))
    stamps = sorted(
        {str(run.get("model_stamp")) for t in tasks.values() for run in t.get("runs", []) if run.get("model_stamp")}
    )
    model = ", ".join(_code(s) for s in stamps) if stamps else "none reported by the host"
    if is_concrete(identity.get("model_id")):
        model += f' <span class="mut">(requested {_code(identity["model_id"])})</span>'
    rows.append(("model stamp", model))
    return rows


def _isolation_text(iso: Mapping[str, Any]) -> str:
    iso_text = (
        f"<b>{esc(iso.get('enforced', '?'))}</b> (network {esc(iso.get('network', '?'))}, file system "
        f"{esc(iso.get('filesystem', '?'))}"
        + (", PID namespace" if iso.get("pid_namespace") else "")
        + (", capabilities dropped" if iso.get("cap_drop") else "")
        + ")"
    )
    if iso.get("requested"):
        iso_text += f' <span class="mut">requested {esc(iso["requested"])}</span>'
    if iso.get("enforced") == "none":
        iso_text += ' <span class="warn">runs were NOT isolated: effects were detected, not prevented</span>'
    for note in iso.get("notes") or []:
        iso_text += f'<br><span class="mut">{esc(note)}</span>'
    return iso_text


def _limits_text(r: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    limits = [
        f"timeout {esc(settings['timeout_s'])} s per run"
        if settings.get("timeout_s") is not None
        else "timeout: each task's own timeout_s"
    ]
    for source in (r.get("limits"), settings.get("limits")):
        if isinstance(source, Mapping):
            limits += [f"{esc(k)} {esc(_human_limit(k, v))}" for k, v in sorted(source.items())]
    return "; ".join(limits)


def _usage_text(tasks: Mapping[str, Any]) -> str:
    totals, reported, runs = _usage_totals(tasks)
    if not totals:
        return '<span class="mut">not reported by the agent</span>'
    usage = ", ".join(
        f"{k.replace('_', ' ')} {_num(round(v, 4) if isinstance(v, float) else v)}" for k, v in totals.items()
    )
    return f'{usage} <span class="mut">({reported} of {runs} run(s) reported usage)</span>'


# -- summary ------------------------------------------------------------------


def _summary(inp: ReportInput) -> str:
    r = inp.results
    s = r.get("summary") or {}
    tasks = r.get("tasks") or {}
    out = ['<section id="summary"><h2>Summary</h2>']
    for note in inp.notes:
        out.append(f'<p class="warn">{esc(note)}</p>')
    if not r.get("complete", False):
        reasons = (
            "".join(f"<li>{esc(x)}</li>" for x in r.get("incomplete_reasons") or []) or "<li>marked incomplete</li>"
        )
        out.append(
            f'<div class="bad-box"><b>INCOMPLETE</b>: this run cannot be used as a baseline.<ul>{reasons}</ul></div>'
        )
    rate = s.get("pass_rate")
    out.append(
        f'<p class="status">{_num(s.get("passed", 0))} of {_num(s.get("runs", 0))} run(s) passed '
        f"({_pct(rate) if rate is not None else 'n/a'})</p>"
    )
    out.append(
        f"<p>{_num(s.get('critical_failures', 0))} with critical failures \u00b7 "
        f"{_num(s.get('tampered_passes', 0))} tampered pass(es) \u00b7 {_num(s.get('errors', 0))} error(s)/timeout(s) \u00b7 "
        f"{len(tasks)} task(s)</p>"
    )
    out.extend(_notable_runs(tasks))
    out.append("</section>")
    return "".join(out)


def _run_link(tid: str, run: Mapping[str, Any]) -> str:
    return f'<a href="#{run_anchor(tid, run.get("rep"))}">{esc(tid)} r{esc(run.get("rep"))}</a>'


#: the run states listed as "did not finish normally": every error-like and unscored outcome, and any
#: outcome this renderer does not know
_NOT_FINISHED_NORMALLY = ERROR_LIKE_OUTCOMES | UNSCORED_OUTCOMES | {"other"}


def _notable_runs(tasks: Mapping[str, Any]) -> list[str]:
    """Links to the runs with critical failures, tampered passes, or that did not finish normally."""
    out = []
    crit = [(tid, run) for tid, t in tasks.items() for run in t.get("runs", []) if run.get("critical_failed")]
    if crit:
        items = "".join(
            f"<li>{_run_link(tid, run)}: {esc(', '.join(map(str, run['critical_failed'])))}</li>"
            for tid, run in crit[:200]
        )
        more = f"<li>\u2026 and {len(crit) - 200} more (see the grid)</li>" if len(crit) > 200 else ""
        out.append(f'<h3>Critical failures</h3><ul class="crit-list">{items}{more}</ul>')
    tampered = [(tid, run) for tid, t in tasks.items() for run in t.get("runs", []) if run.get("tampered_pass")]
    if tampered:
        out.append(
            "<h3>Tampered passes (counted as fails)</h3><p>"
            + ", ".join(_run_link(tid, run) for tid, run in tampered)
            + "</p>"
        )
    odd = [
        (tid, run) for tid, t in tasks.items() for run in t.get("runs", []) if run_state(run) in _NOT_FINISHED_NORMALLY
    ]
    if odd:
        out.append(
            "<h3>Runs that did not finish normally</h3><p>"
            + ", ".join(f"{_run_link(tid, run)} ({esc(run.get('outcome'))})" for tid, run in odd[:200])
            + "</p>"
        )
    return out


# -- comparison -----------------------------------------------------------------

_STATUS_CLASS = {
    "reject": "bad-box",
    "invalid_comparison": "bad-box",
    "hold": "warn",
    "hold_unconfirmed": "warn",
    "split_baselines": "warn",
    "re_baseline": "warn",
    "no_material_evidence": "warn",
    "eligible_for_review": "ok-box",
    "documented_candidate": "ok-box",
    "rollback_capable": "ok-box",
    "forward_only": "warn",
}


def _find_key(obj: Any, needle: str, depth: int = 0) -> list[tuple[str, Any]]:
    """(path, value) of every key containing `needle` (a field a later version may add)."""
    found: list[tuple[str, Any]] = []
    if depth > 4:
        return found
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if needle in str(k):
                found.append((str(k), v))
            found += [(f"{k}.{p}", x) for p, x in _find_key(v, needle, depth + 1)]
    return found


def _comparison(inp: ReportInput) -> str:
    d = inp.decision or {}
    c = inp.comparison or {}
    ev = d.get("evidence") or {}
    out = ['<section id="comparison"><h2>Comparison with the baseline</h2>']
    if inp.baseline_label:
        out.append(f'<p class="mut">baseline: {esc(inp.baseline_label)}</p>')
    out.append(_decision_box(d, c))
    out.append(_dl(_comparison_rows(d, c)))
    arms = {label: (ev.get(label) or c.get(label) or {}) for label in ("baseline", "candidate")}
    paired = ev.get("paired") if "paired" in ev else c.get("paired")
    out.append("<h3>Pass rates (95% Wilson intervals) and the paired delta</h3>")
    out.append(_rates_svg(arms, paired))
    out.append(_paired(paired, c.get("tasks") if isinstance(c.get("tasks"), Mapping) else None))
    out.extend(_broken_in_candidate(d, c, ev))
    out.append(_manifest_diff(inp.manifest_diff))
    evidence = {k: v for k, v in ev.items() if k not in ("paired",)} if ev else {}
    if evidence or paired:
        out.append(
            '<details class="ev" id="decision-evidence"><summary>The evidence the decision rests on '
            "(decision.json \u2192 evidence)</summary>" + _json_block({**evidence, "paired": paired}) + "</details>"
        )
    out.append("</section>")
    return "".join(out)


def _regression_is_primary(d: Mapping[str, Any], c: Mapping[str, Any]) -> bool:
    """Under the regression gate the promotion status is only a second opinion."""
    return (d.get("gate_mode") or c.get("gate_mode")) == "regression"


def _decision_box(d: Mapping[str, Any], c: Mapping[str, Any]) -> str:
    decision = c.get("decision") or {}
    status = d.get("status") or decision.get("status")
    because = d.get("because") or decision.get("because") or []
    box = _STATUS_CLASS.get(str(status), "warn")
    label = "promotion status (secondary)" if _regression_is_primary(d, c) else "decision"
    if label != "decision":
        box = "mut"
    return (
        f'<div class="{box}" id="decision"><span class="status">{label}: {esc(status or "none")}</span>'
        + (
            f' <span class="mut">(rule {esc(d.get("status_rule") or decision.get("rule"))})</span>'
            if d.get("status_rule") or decision.get("rule")
            else ""
        )
        + ("<ul>" + "".join(f"<li>{esc(b)}</li>" for b in because) + "</ul>" if because else "")
        + "</div>"
    )


def _comparison_rows(d: Mapping[str, Any], c: Mapping[str, Any]) -> list[tuple[str, str]]:
    comparable = d.get("comparable", c.get("comparable"))
    rows = [("comparable", "yes" if comparable else "<b>no: every delta is null</b>")]
    if d.get("change_class") or c.get("change_class"):
        rows.append(("change class", _code(d.get("change_class") or c.get("change_class"))))
    for reason in d.get("reasons") or c.get("reasons") or []:
        rows.append(("not comparable because", esc(reason)))
    if d.get("rollback_state"):
        rows.append(("rollback state", _code(d["rollback_state"])))
    rows.extend(_pool_rows(d.get("baseline_pool")))
    rows.extend(_cost_rows(d.get("cost")))
    secondary = _regression_is_primary(d, c)
    regression = d.get("regression_gate") or c.get("regression") or {}
    if secondary and regression:
        rows.append(
            (
                "regression gate",
                f"<b>{'passed' if regression.get('passed') else 'FAILED'}</b>: {esc(regression.get('reason', ''))}",
            )
        )
        rows.extend(_gate_item_rows(regression.get("items")))
    rows.extend(_promotion_gate_rows(d.get("gate") or c.get("gate") or {}, secondary))
    rows.append(_detectable_row(d, c))
    return rows


def _cost_rows(cost: Any) -> list[tuple[str, str]]:
    """What a gated comparison spent and bought (decision.json's cost), in the terminal's words."""
    if not isinstance(cost, Mapping):
        return []
    from pytest_agentdrift.record.spend import arm_text, power_text

    rows = [(f"spend: {label}", esc(arm_text(cost[label]))) for label in ("baseline", "candidate")]
    power = power_text(cost.get("power"))
    return rows + ([("power", esc(power))] if power else [])


def _pool_rows(pool: Any) -> list[tuple[str, str]]:
    """A pooled baseline (decision.json's baseline_pool): the records, k per task, what was left out and why."""
    if not isinstance(pool, Mapping):
        return []
    k, per = pool.get("k") or {}, pool.get("records_per_task") or {}
    spread = pool.get("dispersion") or {}
    rows = [
        ("baseline pool", esc(pool.get("text", ""))),
        (
            "pooled k per task",
            ", ".join(f"{esc(k[t])} runs of {esc(t)} from {esc(per.get(t, 0))} record(s)" for t in sorted(k)),
        ),
        (
            "night-to-night variation",
            f"rho {esc(spread.get('rho'))}, p = {esc(spread.get('p_value'))} over {esc(spread.get('records'))} record(s)",
        ),
    ]
    for x in pool.get("left_out") or []:
        rows.append(("record left out", f"{_code(x.get('path'))}: {esc(x.get('reason'))}"))
    for x in pool.get("runs_left_out") or []:
        rows.append(
            (
                "run left out",
                f"{esc(x.get('task'))} r{esc(x.get('rep'))} of {_code(x.get('record'))}: {esc(x.get('reason'))}",
            )
        )
    return rows


def _promotion_gate_rows(gate: Mapping[str, Any], secondary: bool) -> list[tuple[str, str]]:
    if not gate:
        return []
    verdict = gate.get("verdict")
    # under the regression gate the promotion gate is a second opinion: it sets nothing
    rows = [
        (
            "promotion gate (secondary: does not set the exit status)" if secondary else "gate",
            f"<b>{esc(verdict or 'null')}</b>"
            + ("" if secondary else " (passed)" if gate.get("passed") else " (not passed)")
            + f": {esc(gate.get('reason', ''))}",
        )
    ]
    if gate.get("quality_verdict") and gate.get("quality_verdict") != verdict:
        rows.append(("quality verdict", esc(gate["quality_verdict"])))
    strata = gate.get("strata")
    if isinstance(strata, Mapping) and len(strata) > 1:
        rows.append(("per suite", ", ".join(f"{esc(k)}: {esc(v)}" for k, v in sorted(strata.items()))))
    params = gate.get("params")
    if isinstance(params, Mapping):
        rows.append(("gate parameters", ", ".join(f"{esc(k)} {esc(v)}" for k, v in sorted(params.items()))))
    return rows


def _detectable_row(d: Mapping[str, Any], c: Mapping[str, Any]) -> tuple[str, str]:
    sdr = _find_key(d, "detectable") or _find_key(c, "detectable")
    prose = _detectable_prose(c.get("regression")) or _detectable_prose(d.get("regression_gate"))
    if prose:
        return ("smallest detectable regression", esc(prose))
    if sdr:
        return (
            "smallest detectable regression",
            "; ".join(f"{esc(path)} = {_pp(v) if isinstance(v, float) and abs(v) <= 1 else esc(v)}" for path, v in sdr),
        )
    return ("smallest detectable regression", '<span class="mut">not in decision.json</span>')


def _broken_in_candidate(d: Mapping[str, Any], c: Mapping[str, Any], ev: Mapping[str, Any]) -> list[str]:
    """Critical checks that broke, new safety failures, tampered passes, unconfirmed changes."""
    out = []
    crit = d.get("critical_failures") or []
    regressions = [f for f in crit if f.get("regression")] or [
        {"task": r.get("task"), "check": ", ".join(map(str, r.get("checks") or [])), "reps": []}
        for r in c.get("critical_regressions") or []
        if isinstance(r, Mapping)
    ]
    if regressions:
        out.append(
            "<h3>Critical checks that broke in the candidate</h3><ul>"
            + "".join(
                f'<li><a href="#{task_anchor(str(f.get("task")))}">{esc(f.get("task"))}</a> {esc(f.get("check"))} '
                + (f"(r{esc(', r'.join(map(str, f['reps'])))})" if f.get("reps") else "")
                + "</li>"
                for f in regressions
            )
            + "</ul>"
        )
    safety = c.get("new_safety_failures") or []
    if safety:
        out.append(
            "<p><b>New safety-layer failures:</b> "
            + ", ".join(f'<a href="#{task_anchor(str(t))}">{esc(t)}</a>' for t in safety)
            + "</p>"
        )
    tampered = ev.get("tampered_passes") or {}
    tlist = [
        f"{arm} {t.get('task')} r{t.get('rep')}" for arm in ("baseline", "candidate") for t in tampered.get(arm) or []
    ]
    if tlist:
        out.append(f"<p><b>Tampered passes:</b> {esc(', '.join(tlist))}</p>")
    if d.get("unconfirmed_changes"):
        out.append(
            "<h3>Observed changes no release note confirms</h3><ul>"
            + "".join(f"<li>{esc(x)}</li>" for x in d["unconfirmed_changes"])
            + "</ul>"
        )
    return out


def _interval_row(
    y: int,
    label: str,
    point: float | None,
    lo: float | None,
    hi: float | None,
    scale,
    colour: str,
    text: str,
    text_x: float = 610,
) -> str:
    parts = [f'<text x="4" y="{y + 4}">{esc(label)}</text>']
    if lo is not None and hi is not None:
        parts.append(
            f'<line x1="{scale(lo):.1f}" y1="{y}" x2="{scale(hi):.1f}" y2="{y}" stroke="{colour}" stroke-width="3"/>'
            f'<line x1="{scale(lo):.1f}" y1="{y - 6}" x2="{scale(lo):.1f}" y2="{y + 6}" stroke="{colour}" stroke-width="2"/>'
            f'<line x1="{scale(hi):.1f}" y1="{y - 6}" x2="{scale(hi):.1f}" y2="{y + 6}" stroke="{colour}" stroke-width="2"/>'
        )
    if point is not None:
        parts.append(f'<circle cx="{scale(point):.1f}" cy="{y}" r="5" fill="{colour}"/>')
    parts.append(f'<text x="{text_x:.0f}" y="{y + 4}">{esc(text)}</text>')
    return "".join(parts)


def _num_or_none(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


_PLOT_LEFT, _PLOT_WIDTH = 90, 500


def _rates_svg(arms: Mapping[str, Mapping[str, Any]], paired: Mapping[str, Any] | None) -> str:
    """Two small plots: each arm's pass rate with its Wilson interval on 0-100 %, the delta on -100..+100 pp."""
    method = (paired or {}).get("ci_method")
    note = (
        f'<p class="small mut">delta: {esc(method)}'
        + (f", {esc(paired.get('draws'))} draws" if paired and paired.get("draws") else "")
        + "</p>"
        if method
        else ""
    )
    return _pass_rate_plot(arms) + _delta_plot(paired) + note


def _pass_rate_plot(arms: Mapping[str, Mapping[str, Any]]) -> str:
    def rate_x(v: float) -> float:
        return _PLOT_LEFT + _PLOT_WIDTH * min(max(v, 0.0), 1.0)

    svg = [
        (
            '<svg id="rates-plot" role="img" aria-label="pass rates with 95% Wilson intervals" width="860" height="120" '
            'viewBox="0 0 860 120" xmlns="http://www.w3.org/2000/svg">'
        )
    ]
    for i in range(11):
        x = rate_x(i / 10)
        svg.append(f'<line x1="{x:.1f}" y1="14" x2="{x:.1f}" y2="86" stroke="#d0d7de"/>')
        if i % 2 == 0:
            svg.append(f'<text x="{x - 10:.1f}" y="104">{i * 10}%</text>')
    for y, label, colour in ((34, "baseline", "#57606a"), (66, "candidate", "#0969da")):
        arm = arms.get(label) or {}
        wilson = (
            arm.get("wilson") if isinstance(arm.get("wilson"), list) and len(arm.get("wilson")) == 2 else [None, None]
        )
        rate = _num_or_none(arm.get("pass_rate"))
        text = (
            f"{arm.get('passes', '?')}/{arm.get('runs', '?')} = {_pct(rate)} [{_pct(wilson[0])}, {_pct(wilson[1])}]"
            if arm
            else "not recorded"
        )
        svg.append(
            _interval_row(y, label, rate, _num_or_none(wilson[0]), _num_or_none(wilson[1]), rate_x, colour, text)
        )
    svg.append("</svg>")
    return "".join(svg)


def _delta_plot(paired: Mapping[str, Any] | None) -> str:
    delta = _num_or_none((paired or {}).get("delta"))
    ci = (paired or {}).get("delta_ci") if isinstance((paired or {}).get("delta_ci"), list) else [None, None]

    def delta_x(v: float) -> float:
        return _PLOT_LEFT + _PLOT_WIDTH * (min(max(v, -1.0), 1.0) + 1) / 2

    svg = [
        '<svg id="delta-plot" role="img" aria-label="paired delta with its interval" width="860" height="90" '
        'viewBox="0 0 860 90" xmlns="http://www.w3.org/2000/svg">'
    ]
    for v in (-1.0, -0.5, 0.0, 0.5, 1.0):
        x = delta_x(v)
        svg.append(
            f'<line x1="{x:.1f}" y1="10" x2="{x:.1f}" y2="56" stroke="{"#1f2328" if v == 0 else "#d0d7de"}"/>'
            f'<text x="{x - 16:.1f}" y="74">{int(v * 100):+d} pp</text>'
        )
    if delta is None:
        svg.append(
            '<text x="4" y="36">delta</text><text x="140" y="36">null: the runs are not comparable or were not paired</text>'
        )
    else:
        colour = "#cf222e" if delta < 0 else "#1a7f37"
        text = f"{_pp(delta)} [{_pp(ci[0])}, {_pp(ci[1])}]"
        svg.append(_interval_row(32, "delta", delta, _num_or_none(ci[0]), _num_or_none(ci[1]), delta_x, colour, text))
    svg.append("</svg>")
    return "".join(svg)


def _paired(paired: Mapping[str, Any] | None, rows: Mapping[str, Any] | None) -> str:
    if not paired:
        return '<p class="mut">No paired comparison (the runs are not comparable): every delta is null.</p>'
    won, lost, tied = (list(paired.get(k) or []) for k in ("won", "lost", "tied"))
    out = [f"<h3>Paired by task: won {len(won)}, lost {len(lost)}, tied {len(tied)}</h3>"]
    p = paired.get("p_value")
    if p is not None:
        out.append(
            f'<p class="small">{esc(paired.get("test", "exact test"))}: p = {esc(f"{p:.3g}" if isinstance(p, float) else p)}'
            f" over {esc(paired.get('discordant', len(won) + len(lost)))} discordant task(s)</p>"
        )
    if rows:
        both = sum(1 for t in tied if _solved(rows.get(t), "baseline"))
        out.append(
            '<table id="paired-matrix"><tr><th></th><th>candidate solved</th><th>candidate not solved</th></tr>'
            f'<tr><th>baseline solved</th><td>{both} tied</td><td class="lostc"><b>{len(lost)} lost</b></td></tr>'
            f"<tr><th>baseline not solved</th><td><b>{len(won)} won</b></td><td>{len(tied) - both} tied</td></tr></table>"
            '<p class="small mut">solved: a strict majority of the arm\'s k runs passed (k = 1: passed).</p>'
        )
    order = {"lost": 0, "won": 1, "tied": 2}
    outcome_of = {t: "won" for t in won} | {t: "lost" for t in lost} | {t: "tied" for t in tied}
    ids = sorted(outcome_of, key=lambda t: (order[outcome_of[t]], t))
    body = []
    for tid in ids:
        row = (rows or {}).get(tid) or {}
        b, cnd = row.get("baseline"), row.get("candidate")
        crit = row.get("critical_regressions") or []
        body.append(
            f'<tr class="{outcome_of[tid]}"><td><a href="#{task_anchor(tid)}">{esc(tid)}</a></td>'
            f"<td>{outcome_of[tid]}</td><td>{_frac(b)}</td><td>{_frac(cnd)}</td><td>{_pp(row.get('delta'))}</td>"
            f"<td>{esc(', '.join(map(str, crit)))}{' (new safety failure)' if row.get('new_safety_failure') else ''}</td></tr>"
        )
    out.append(
        '<table id="paired-table"><thead><tr><th>task</th><th>outcome</th><th>baseline</th><th>candidate</th>'
        f"<th>delta</th><th>critical checks broken</th></tr></thead><tbody>{''.join(body)}</tbody></table>"
    )
    return "".join(out)


def _solved(row: Any, arm: str) -> bool:
    counts = (row or {}).get(arm) if isinstance(row, Mapping) else None
    return isinstance(counts, list) and len(counts) == 2 and 2 * counts[0] > counts[1]


def _frac(counts: Any) -> str:
    return f"{esc(counts[0])}/{esc(counts[1])}" if isinstance(counts, list) and len(counts) == 2 else "\u2013"


def _manifest_diff(md: Mapping[str, Any] | None) -> str:  # noqa: C901 (known debt: split by job when next touched)
    if not md:
        return '<h3>Runtime manifest diff</h3><p class="mut">not recorded (comparison/manifest-diff.json)</p>'
    out = ['<h3 id="manifest-diff">Runtime manifest diff</h3>']
    if md.get("explanation"):
        out.append(f"<p>{esc(md.get('change_class', ''))}: {esc(md['explanation'])}</p>")
    rows = []
    for block in md.get("blocks") or []:
        if isinstance(block, Mapping):
            rows.append(("blocked", block.get("field"), block.get("baseline"), block.get("current")))
        elif isinstance(block, list) and len(block) == 3:
            rows.append(("blocked", *block))
    for name, change in sorted((md.get("changed") or {}).items()):
        kind = "varied" if name in (md.get("varied") or []) else "changed"
        rows.append((kind, name, (change or {}).get("baseline"), (change or {}).get("current")))
    for note in md.get("notes") or []:
        if isinstance(note, Mapping):
            rows.append(("noted", note.get("field"), note.get("baseline"), note.get("current")))
    for name in md.get("deferred") or []:
        rows.append(("deferred", name, "", "compared after the runs"))
    if rows:
        body = "".join(
            f'<tr class="md-{esc(kind)}"><td><b>{esc(kind)}</b></td><td>{_code(name)}</td>'
            f"<td>{_short_json(b)}</td><td>{_short_json(cur)}</td></tr>"
            for kind, name, b, cur in rows
        )
        out.append(
            f'<table id="manifest-diff-table"><thead><tr><th></th><th>field</th><th>baseline</th><th>candidate</th></tr></thead>'
            f"<tbody>{body}</tbody></table>"
        )
    if md.get("unobserved"):
        out.append(
            f'<p class="small">unobserved on both sides (accepted): {esc(", ".join(map(str, md["unobserved"])))}</p>'
        )
    if md.get("same"):
        out.append(
            f'<details class="ev"><summary>{len(md["same"])} identity field(s) the same</summary>'
            f'<p class="small">{esc(", ".join(map(str, md["same"])))}</p></details>'
        )
    return "".join(out)


def _short_json(value: Any) -> str:
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    if len(text) > 400:
        text = text[:400] + "\u2026"
    return f"<code>{esc(text)}</code>"


# -- grid -----------------------------------------------------------------------


def _crit_layers(run: Mapping[str, Any]) -> set[str]:
    return {str(c.get("layer")) for c in run.get("checks") or [] if c.get("critical") and not c.get("passed")}


def _grid(r: Mapping[str, Any], tasks: Mapping[str, Any]) -> str:
    layers = _layers_of(r)
    head = "".join(
        f'<th><abbr title="{attr(lay)}: {attr(LAYER_MEANING.get(lay, ""))}">{esc(_layer_abbr(lay))}</abbr></th>'
        for lay in layers
    )
    body = []
    for tid in sorted(tasks):
        t = tasks[tid]
        runs = t.get("runs") or []
        states = [run_state(run) for run in runs]
        cls = " has-crit" if "critical" in states else ""
        cls += " has-tamp" if "tampered" in states else ""
        chips = "".join(_chip(tid, run, st) for run, st in zip(runs, states, strict=False))
        npass = sum(1 for st in states if st == PASSED_OUTCOME)
        cells = []
        crit_layers = [_crit_layers(run) for run in runs]
        for lay in layers:
            marks, states_here = [], []
            for run, crit in zip(runs, crit_layers, strict=False):
                state = (run.get("layers") or {}).get(lay, "n/a")
                mcls, mark = _LAYER_MARK.get(state, ("na", "?"))
                if state == "fail" and lay in crit:
                    mcls, mark, state = "crit", "!", "critical fail"
                marks.append(f'<span class="lm {mcls}">{mark}</span>')
                states_here.append(f"r{run.get('rep')} {state}")
            cells.append(f'<td class="lay" title="{attr(lay)}: {attr(", ".join(states_here))}">{"".join(marks)}</td>')
        body.append(
            f'<tr class="task-row{cls}" id="g-{slug(tid)}"><td class="tid"><a href="#{task_anchor(tid)}">{esc(tid)}</a></td>'
            f"<td>{esc(t.get('title', ''))}</td><td>{chips}</td><td>{npass}/{len(runs)}</td>{''.join(cells)}</tr>"
        )
    return (
        '<section id="grid"><h2>Task \u00d7 layer grid</h2><p class="small mut">One mark per repetition; a '
        "thick left border marks a critical failure (red) or a tampered pass (purple). Layer names and outcome marks "
        'are explained in the <a href="#legend">legend</a>.</p>'
        f'<table id="grid-table"><thead><tr><th>task</th><th>title</th><th>runs</th><th>pass</th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></section>"
    )


def _chip(tid: str, run: Mapping[str, Any], state: str) -> str:
    cls, mark, meaning = OUTCOMES[state]
    return (
        f'<a class="chip {cls}" href="#{run_anchor(tid, run.get("rep"))}" '
        f'title="r{attr(run.get("rep"))}: {attr(run.get("outcome"))} ({attr(meaning)})">{mark}</a>'
    )


# -- per task and per run --------------------------------------------------------


def _task_sections(inp: ReportInput, tasks: Mapping[str, Any]) -> str:
    out = [
        (
            '<section id="tasks"><h2>Runs</h2><p><button id="expand-all" type="button">expand all</button>'
            '<button id="collapse-all" type="button">collapse all</button> <span class="small mut">Each task links '
            "its runs; each run its checks; each check its evidence.</span></p>"
        )
    ]
    for tid in sorted(tasks):
        t = tasks[tid]
        runs = t.get("runs") or []
        states = [run_state(run) for run in runs]
        npass = sum(1 for st in states if st == PASSED_OUTCOME)
        flag = " \u00b7 <b>CRITICAL</b>" if "critical" in states else ""
        flag += " \u00b7 <b>tampered pass</b>" if "tampered" in states else ""
        out.append(
            f'<details class="task" id="{task_anchor(tid)}"><summary><b>{esc(tid)}</b> {esc(t.get("title", ""))}'
            f" \u00b7 {npass}/{len(runs)} passed{flag}</summary>"
        )
        out.append(
            f'<p class="small">behaviour under test: {esc(t.get("behavior") or "n/a")}; suite {_code(t.get("suite"))}; '
            f'task digest {_code(t.get("task_digest"))} \u00b7 <a href="#g-{slug(tid)}">grid row</a></p>'
        )
        for run, state in zip(runs, states, strict=False):
            out.append(_run_section(inp, tid, run, state))
        out.append("</details>")
    out.append("</section>")
    return "\n".join(out)


def _run_section(inp: ReportInput, tid: str, run: Mapping[str, Any], state: str) -> str:
    rep = run.get("rep")
    ev = run.get("evidence") or {}
    cls, mark, meaning = OUTCOMES[state]
    out = [
        f'<details class="run" id="{run_anchor(tid, rep)}"><summary><span class="chip {cls}">{mark}</span> '
        f"<b>{esc(tid)} r{esc(rep)}</b>: {esc(run.get('outcome'))}"
        + (
            f" \u00b7 critical: {esc(', '.join(map(str, run.get('critical_failed') or [])))}"
            if run.get("critical_failed")
            else ""
        )
        + (" \u00b7 tampered pass" if run.get("tampered_pass") else "")
        + "</summary>"
    ]
    out.append(_dl(_run_facts(run, ev, meaning)))
    out.append(_checks(tid, run))
    out.append(_harness_evidence(inp, run, ev))
    # a run that did not pass is opened to find out why: its patch and events open with it
    unfolded = state != PASSED_OUTCOME
    out.append(_patch(inp, run, unfolded))
    out.append(_events(inp, run, unfolded))
    out.append(_agent_report(inp, run))
    for name, label, key in ((STDOUT_FILE, "stdout", "stdout"), (STDERR_FILE, "stderr", "stderr")):
        out.append(_head(inp, run, name, label, ev.get(f"{key}_bytes"), ev.get(f"{key}_truncated")))
    argv = inp.raw(run, ARGV_FILE, SMALL_LIMIT)
    if argv.text:
        out.append(f'<details class="ev"><summary>argv</summary><pre>{esc(argv.text, block=True)}</pre></details>')
    out.append("</details>")
    return "".join(out)


def _run_facts(run: Mapping[str, Any], ev: Mapping[str, Any], meaning: str) -> list[tuple[str, str]]:
    """How the run ended: outcome, exit code, duration, crash, model stamp, usage."""
    facts = [
        ("outcome", f'{esc(run.get("outcome"))} <span class="mut">({esc(meaning)})</span>'),
        ("exit code", esc(ev.get("exit_code"))),
        ("duration", f"{ev['duration_s']:.2f} s" if isinstance(ev.get("duration_s"), (int, float)) else "?"),
    ]
    if ev.get("timed_out"):
        facts.append(("timed out", "yes: the process tree was killed"))
    if ev.get("launch_error"):
        facts.append(("launch error", esc(ev["launch_error"])))
    if ev.get("crash"):
        crash = ev["crash"]
        tail = "\n".join(str(ln) for ln in crash.get("stderr_tail") or []) or "(nothing on stderr)"
        facts.append(
            ("crash", f"exit {esc(crash.get('exit_code'))}, no final report<pre>{esc(tail, block=True)}</pre>")
        )
    if run.get("model_stamp"):
        facts.append(("model stamp", _code(run["model_stamp"])))
    usage = {k: v for k, v in (run.get("usage") or {}).items() if v is not None}
    if usage:
        facts.append(("usage", esc(", ".join(f"{k} {v}" for k, v in sorted(usage.items())))))
    facts.append(("raw artifacts", _code(run.get("raw", "(not recorded)"))))
    return facts


def _checks(tid: str, run: Mapping[str, Any]) -> str:
    checks = list(run.get("checks") or [])
    if not checks:
        return '<h4>Checks</h4><p class="mut">no checks recorded</p>'
    rows = []
    for i, c in enumerate(checks):
        passed = c.get("passed") is True
        crit = bool(c.get("critical"))
        result = (
            '<span class="chip ok">\u2713</span>'
            if passed
            else (
                '<span class="chip crit">!</span> <b>CRITICAL FAIL</b>'
                if crit
                else '<span class="chip bad">\u2717</span> fail'
            )
        )
        evidence = c.get("evidence")
        ev_html = ""
        if evidence:
            compact = json.dumps(evidence, sort_keys=True, ensure_ascii=False, default=str)
            if len(compact) <= 160 and "\\n" not in compact:
                ev_html = (
                    f'<div class="evi" id="{evidence_anchor(tid, run.get("rep"), i)}"><code>{esc(compact)}</code></div>'
                )
            else:
                ev_html = (
                    f'<details class="ev" id="{evidence_anchor(tid, run.get("rep"), i)}"{"" if passed else " open"}>'
                    f"<summary>evidence</summary>{_evidence_block(evidence)}"
                    f'<a class="small" href="#{check_anchor(tid, run.get("rep"), i)}">back to the check</a></details>'
                )
        lay = str(c.get("layer"))
        crit_note = ' <span class="mut">(critical)</span>' if crit else ""
        rows.append(
            f'<tr id="{check_anchor(tid, run.get("rep"), i)}" class="{"pass" if passed else "fail"}"><td>{result}</td>'
            f'<td><abbr title="{attr(lay)}">{esc(_layer_abbr(lay))}</abbr></td><td>{esc(c.get("name"))}'
            f"{crit_note}</td><td>{esc(c.get('kind'))}</td>"
            f"<td>{esc(c.get('detail', ''))}{ev_html}</td></tr>"
        )
    return (
        '<h4>Checks</h4><table class="checks"><thead><tr><th>result</th><th>layer</th><th>check</th><th>kind</th>'
        f"<th>detail and evidence</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _evidence_block(evidence: Any) -> str:
    """A check's evidence: multi-line text (a test's output tail, a diff) as text, the rest as JSON."""
    if not isinstance(evidence, Mapping):
        return _json_block(evidence)
    rows = []
    for key, value in sorted(evidence.items(), key=lambda kv: str(kv[0])):
        if isinstance(value, str) and "\n" in value:
            shown = f"<pre>{esc(value, block=True)}</pre>"
        else:
            shown = f"<code>{esc(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str))}</code>"
        rows.append((str(key), shown))
    return _dl(rows)


def _path_list(paths: Any) -> str:
    if not paths:
        return '<span class="mut">none</span>'
    if not isinstance(paths, list):
        return esc(paths)
    shown = "".join(f"<li><code>{esc(p)}</code></li>" for p in paths[:200])
    more = f"<li>\u2026 and {len(paths) - 200} more</li>" if len(paths) > 200 else ""
    return f'<ul class="paths">{shown}{more}</ul>'


#: evidence fields the run section shows in its own rows; the rest go under "other evidence fields"
_SHOWN_EVIDENCE = frozenset(
    {
        "changed",
        "writes_outside",
        "network_attempts",
        "api_requests",
        "api_requests_unit",
        "network_policy",
        "git_mutations",
        "tamper",
        "lockfile_changes",
        "credential_access",
        "leftover_processes",
        "work_tree_deleted",
        "event_problems",
        "exit_code",
        "duration_s",
        "timed_out",
        "launch_error",
        "stdout_bytes",
        "stdout_truncated",
        "stderr_bytes",
        "stderr_truncated",
    }
)


def _harness_evidence(inp: ReportInput, run: Mapping[str, Any], ev: Mapping[str, Any]) -> str:
    rows: list[tuple[str, str]] = []
    changed = ev.get("changed") or {}
    for kind in ("added", "modified", "deleted", "mode"):
        if changed.get(kind):
            rows.append((f"{kind}", _path_list(changed[kind])))
    if not any(changed.get(k) for k in ("added", "modified", "deleted", "mode")):
        rows.append(("changed paths", '<span class="mut">none</span>'))
    rows.append(("writes outside", _path_list(ev.get("writes_outside"))))
    rows.extend(_network_rows(inp, run, ev))
    rows.append(("git mutations", _path_list(ev.get("git_mutations"))))
    tamper = ev.get("tamper") or {}
    if any(tamper.values()):
        rows.append(("tamper", "".join(f"{esc(k)}: {_path_list(v)}" for k, v in tamper.items() if v)))
    if ev.get("lockfile_changes"):
        rows.append(("lockfile changes", _path_list(ev["lockfile_changes"])))
    cred = ev.get("credential_access")
    rows.append(("credential canary read", "not observable here" if cred is None else ("<b>yes</b>" if cred else "no")))
    if ev.get("leftover_processes"):
        rows.append(("leftover processes", f"{esc(ev['leftover_processes'])} outlived the agent and were killed"))
    if ev.get("work_tree_deleted"):
        rows.append(("work tree", "<b>deleted by the agent</b>"))
    if ev.get("event_problems"):
        rows.append(("event problems", _path_list(ev["event_problems"])))
    rest = {k: v for k, v in ev.items() if k not in _SHOWN_EVIDENCE and v not in (None, [], {}, "")}
    extra = f'<details class="ev"><summary>other evidence fields</summary>{_json_block(rest)}</details>' if rest else ""
    return "<h4>What the harness observed</h4>" + _dl(rows) + extra


def _network_rows(inp: ReportInput, run: Mapping[str, Any], ev: Mapping[str, Any]) -> list[tuple[str, str]]:
    attempts = [e for e in _event_list(inp, run)[0] if e.get("type") == "network_attempt"]
    net = f"{esc(ev.get('network_attempts', 0))} counted by the harness"
    if attempts:
        net += _path_list(
            [
                f"{e.get('host', '?')}:{e.get('port', '?')}"
                + (f" (source {e.get('source')})" if e.get("source") else "")
                for e in attempts
            ]
        )
    rows = [("network attempts", net)]
    if ev.get("api_requests"):
        unit = f" {ev['api_requests_unit']}" if ev.get("api_requests_unit") else ""
        rows.append(("API requests through the proxy", esc(f"{ev['api_requests']}{unit}")))
    if ev.get("network_policy"):
        rows.append(("network policy", _short_json(ev["network_policy"])))
    return rows


def _patch(inp: ReportInput, run: Mapping[str, Any], unfolded: bool = False) -> str:
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


def render_patch(text: str, paths: Iterable[str] = ()) -> str:  # noqa: C901 (known debt: split by job when next touched)
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
        matched = False
        if text.startswith("diff --agentdrift a/", pos):
            for h in headers:
                if text.startswith(h, pos):
                    out.append(f'<span class="h">{esc(h[:-1])}</span>')
                    pos += len(h)
                    matched = True
                    break
        elif text.startswith(("--- a/", "+++ b/"), pos):
            for line, (cls, shown) in fromto.items():
                if text.startswith(line, pos):
                    out.append(f'<span class="{cls}">{esc(shown)}</span>')
                    pos += len(line)
                    matched = True
                    break
        if matched:
            continue
        end = text.find("\n", pos)
        line = text[pos:] if end == -1 else text[pos:end]
        pos = n if end == -1 else end + 1
        if line.startswith("diff "):
            cls = "h"
        elif line.startswith(("--- ", "+++ ")):
            cls = "f"
        elif line.startswith("@@"):
            cls = "k"
        elif line.startswith("+"):
            cls = "a"
        elif line.startswith("-"):
            cls = "d"
        elif line.startswith(" "):
            cls = "c"
        else:
            cls = "m"
        out.append(f'<span class="{cls}">{esc(line) or " "}</span>')
    return "".join(out)


def _event_list(inp: ReportInput, run: Mapping[str, Any]) -> tuple[list[dict[str, Any]], RawArtifact, int]:
    key = id(run)
    cache = inp.events_cache
    if key in cache:
        return cache[key]
    art = inp.raw(run, EVENTS_FILE, 4 << 20)
    events, bad = json_lines_objects(art.text or "")
    cache[key] = (events, art, bad)
    return cache[key]


def _events(inp: ReportInput, run: Mapping[str, Any], unfolded: bool = False) -> str:
    events, art, bad = _event_list(inp, run)
    if art.text is None:
        return f'<h4>Events</h4><p class="mut">{esc(art.problem)}</p>'
    if not events:
        return '<h4>Events</h4><p class="mut">no events</p>'
    items = []
    for i, e in enumerate(events[:EVENTS_LIMIT], 1):
        etype = str(e.get("type", "?"))
        fields = ", ".join(f"{esc(k)}={_short_json(v)}" for k, v in sorted(e.items()) if k != "type")
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


def _agent_report(inp: ReportInput, run: Mapping[str, Any]) -> str:
    report = run.get("report")
    if run.get("report_error"):
        head = f'<p class="warn">{esc(run["report_error"])}</p>'
    else:
        head = ""
    if not isinstance(report, Mapping):
        return "<h4>The agent's report</h4>" + (head or '<p class="mut">none</p>')
    rows = [("status", f"<b>{esc(report.get('status'))}</b>"), ("summary", esc(report.get("summary", "")))]
    for key in ("checks_run", "checks_skipped"):
        if report.get(key):
            rows.append((key.replace("_", " "), _path_list(list(map(str, report[key])))))
    if report.get("answer"):
        rows.append(("answer", f"<pre>{esc(report['answer'], block=True)}</pre>"))
    return '<h4>The agent\'s report <span class="mut small">(its claim, not evidence)</span></h4>' + head + _dl(rows)


def _head(inp: ReportInput, run: Mapping[str, Any], name: str, label: str, total: Any, capture_cut: Any) -> str:
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


# -- legend and footer -------------------------------------------------------------


def _legend(r: Mapping[str, Any]) -> str:
    layers = "".join(
        f"<tr><td><abbr>{esc(_layer_abbr(lay))}</abbr></td><td>{_code(lay)}</td>"
        f"<td>{esc(LAYER_MEANING.get(lay, 'a layer this version does not describe'))}</td></tr>"
        for lay in _layers_of(r)
    )
    outcomes = "".join(
        f'<tr><td><span class="chip {cls}">{mark}</span></td><td>{esc(name)}</td><td>{esc(meaning)}</td></tr>'
        for name, (cls, mark, meaning) in OUTCOMES.items()
    )
    marks = (
        '<tr><td><span class="lm ok">\u25cf</span></td><td>the layer\'s checks passed</td></tr>'
        '<tr><td><span class="lm bad">\u25cf</span></td><td>a check of the layer failed</td></tr>'
        '<tr><td><span class="lm crit">!</span></td><td>a <b>critical</b> check of the layer failed</td></tr>'
        '<tr><td><span class="lm na">\u00b7</span></td><td>the task has no check in this layer</td></tr>'
    )
    return (
        '<section id="legend"><h2>Legend</h2><h3>Layers</h3><p class="small">Every check belongs to one layer; '
        "a run passes when every check passes.</p>"
        f'<table id="layer-legend"><thead><tr><th>abbr.</th><th>layer</th><th>what it asks</th></tr></thead><tbody>{layers}</tbody></table>'
        f"<h3>Run outcomes</h3><table><tbody>{outcomes}</tbody></table>"
        f"<h3>Layer marks (one per repetition)</h3><table><tbody>{marks}</tbody></table>"
        '<h3>Events timeline</h3><p class="small">Each run\'s events in order, as recorded in events.jsonl: what '
        "the agent and its adapter reported, and what the harness observed. The agent can write any event, so the "
        "harness's own counts (network attempts, writes outside, changed paths) are the evidence; the timeline is "
        "the story.</p>"
        '<p class="small">Text the agent could influence (file names, patch, events, output) is shown with '
        "control characters as visible escapes such as <code>\\x1b</code> and <code>\\n</code> in "
        '<span class="cc">this style</span>.</p></section>'
    )


def _footer(r: Mapping[str, Any]) -> str:
    return (
        f'<footer class="small mut"><p>Generated by pytest-agentdrift {esc(r.get("plugin_version", "?"))} from '
        "results.json and raw/. A self-contained file: it makes no network request.</p></footer>"
    )


def record_page(run_dir: Path, results: dict[str, Any] | None = None, closing: str | None = None) -> str:
    """The page for a record being written: render_record, or, should rendering
    itself fail (a bug of ours), a page that says so, so results.json is still written."""
    try:
        return render_record(run_dir, results, closing)
    except Exception as exc:  # noqa: BLE001 - the record must not be lost to a bug in its view
        run_id = (results or {}).get("run_id", "?") if isinstance(results, dict) else "?"
        return render_failure_page(str(run_id), exc)
