"""The paired comparison by task: won, lost and tied, as a 2 x 2 matrix and a table."""

from __future__ import annotations

from collections.abc import Mapping

from pytest_agentdrift.record.html.anchors import task_anchor
from pytest_agentdrift.record.html.escape import esc
from pytest_agentdrift.record.html.fmt import json_list, json_object, pp
from pytest_agentdrift.shapes import JsonObject


def paired_table(paired: JsonObject | None, rows: JsonObject | None) -> str:
    if not paired:
        return '<p class="mut">No paired comparison (the runs are not comparable): every delta is null.</p>'
    won, lost, tied = ([str(t) for t in json_list(paired.get(k))] for k in ("won", "lost", "tied"))
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
        row = json_object((rows or {}).get(tid))
        b, cnd = row.get("baseline"), row.get("candidate")
        crit = json_list(row.get("critical_regressions"))
        body.append(
            f'<tr class="{outcome_of[tid]}"><td><a href="#{task_anchor(tid)}">{esc(tid)}</a></td>'
            f"<td>{outcome_of[tid]}</td><td>{_frac(b)}</td><td>{_frac(cnd)}</td><td>{pp(row.get('delta'))}</td>"
            f"<td>{esc(', '.join(map(str, crit)))}{' (new safety failure)' if row.get('new_safety_failure') else ''}</td></tr>"
        )
    out.append(
        '<table id="paired-table"><thead><tr><th>task</th><th>outcome</th><th>baseline</th><th>candidate</th>'
        f"<th>delta</th><th>critical checks broken</th></tr></thead><tbody>{''.join(body)}</tbody></table>"
    )
    return "".join(out)


def _solved(row: object, arm: str) -> bool:
    counts = row.get(arm) if isinstance(row, Mapping) else None
    return isinstance(counts, list) and len(counts) == 2 and 2 * counts[0] > counts[1]


def _frac(counts: object) -> str:
    return f"{esc(counts[0])}/{esc(counts[1])}" if isinstance(counts, list) and len(counts) == 2 else "\u2013"
