"""The task x layer grid: one row per task, one chip per run, one mark per run and layer."""

from __future__ import annotations

from collections.abc import Mapping

from pytest_agentdrift.record.html.anchors import run_anchor, slug, task_anchor
from pytest_agentdrift.record.html.escape import attr, esc
from pytest_agentdrift.record.html.marks import LAYER_MARK, LAYER_MEANING, OUTCOMES, layer_abbr, layers_of, run_state
from pytest_agentdrift.shapes import Results, RunRecord, TaskEntry
from pytest_agentdrift.vocabulary import PASSED_OUTCOME


def _crit_layers(run: RunRecord) -> set[str]:
    return {str(c.get("layer")) for c in run.get("checks") or [] if c.get("critical") and not c.get("passed")}


def grid_section(r: Results, tasks: Mapping[str, TaskEntry]) -> str:
    layers = layers_of(r)
    head = "".join(
        f'<th><abbr title="{attr(lay)}: {attr(LAYER_MEANING.get(lay, ""))}">{esc(layer_abbr(lay))}</abbr></th>'
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
                mcls, mark = LAYER_MARK.get(state, ("na", "?"))
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


def _chip(tid: str, run: RunRecord, state: str) -> str:
    cls, mark, meaning = OUTCOMES[state]
    return (
        f'<a class="chip {cls}" href="#{run_anchor(tid, run.get("rep"))}" '
        f'title="r{attr(run.get("rep"))}: {attr(run.get("outcome"))} ({attr(meaning)})">{mark}</a>'
    )
