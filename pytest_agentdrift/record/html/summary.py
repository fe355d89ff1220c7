"""The summary section: completeness, the pass count, and links to the runs worth a look first."""

from __future__ import annotations

from collections.abc import Mapping

from pytest_agentdrift.record.html.anchors import run_anchor
from pytest_agentdrift.record.html.escape import esc
from pytest_agentdrift.record.html.fmt import num, pct
from pytest_agentdrift.record.html.marks import run_state
from pytest_agentdrift.record.html.reportinput import ReportInput
from pytest_agentdrift.shapes import RunRecord, TaskEntry
from pytest_agentdrift.vocabulary import ERROR_LIKE_OUTCOMES, UNSCORED_OUTCOMES


def summary_section(inp: ReportInput) -> str:
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
        f'<p class="status">{num(s.get("passed", 0))} of {num(s.get("runs", 0))} run(s) passed '
        f"({pct(rate) if rate is not None else 'n/a'})</p>"
    )
    out.append(
        f"<p>{num(s.get('critical_failures', 0))} with critical failures \u00b7 "
        f"{num(s.get('tampered_passes', 0))} tampered pass(es) \u00b7 {num(s.get('errors', 0))} error(s)/timeout(s) \u00b7 "
        f"{len(tasks)} task(s)</p>"
    )
    out.extend(_notable_runs(tasks))
    out.append("</section>")
    return "".join(out)


def _run_link(tid: str, run: RunRecord) -> str:
    return f'<a href="#{run_anchor(tid, run.get("rep"))}">{esc(tid)} r{esc(run.get("rep"))}</a>'


#: the run states listed as "did not finish normally": every error-like and unscored outcome, and any
#: outcome this renderer does not know
_NOT_FINISHED_NORMALLY = ERROR_LIKE_OUTCOMES | UNSCORED_OUTCOMES | {"other"}


def _notable_runs(tasks: Mapping[str, TaskEntry]) -> list[str]:
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
