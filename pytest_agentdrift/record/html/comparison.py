"""The comparison with the baseline: the decision, the gates and what they rest on (decision.json and the
comparison files)."""

from __future__ import annotations

from collections.abc import Mapping

from pytest_agentdrift.record.html.anchors import task_anchor
from pytest_agentdrift.record.html.escape import esc
from pytest_agentdrift.record.html.fmt import code, dl, json_block, json_list, json_object, pp
from pytest_agentdrift.record.html.manifestdiff import manifest_diff_section
from pytest_agentdrift.record.html.paired import paired_table
from pytest_agentdrift.record.html.plots import rates_svg
from pytest_agentdrift.record.html.reportinput import ReportInput
from pytest_agentdrift.shapes import JsonObject

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


def _find_key(obj: object, needle: str, depth: int = 0) -> list[tuple[str, object]]:
    """(path, value) of every key containing `needle` (a field a later version may add)."""
    found: list[tuple[str, object]] = []
    if depth > 4:
        return found
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if needle in str(k):
                found.append((str(k), v))
            found += [(f"{k}.{p}", x) for p, x in _find_key(v, needle, depth + 1)]
    return found


def comparison_section(inp: ReportInput) -> str:
    d = inp.decision or {}
    c = inp.comparison or {}
    ev = json_object(d.get("evidence"))
    out = ['<section id="comparison"><h2>Comparison with the baseline</h2>']
    if inp.baseline_label:
        out.append(f'<p class="mut">baseline: {esc(inp.baseline_label)}</p>')
    out.append(_decision_box(d, c))
    out.append(dl(_comparison_rows(d, c)))
    arms = {label: json_object(ev.get(label) or c.get(label)) for label in ("baseline", "candidate")}
    paired = ev.get("paired") if "paired" in ev else c.get("paired")
    paired_counts = paired if isinstance(paired, dict) else None
    tasks = c.get("tasks")
    out.append("<h3>Pass rates (95% Wilson intervals) and the paired delta</h3>")
    out.append(rates_svg(arms, paired_counts))
    out.append(paired_table(paired_counts, tasks if isinstance(tasks, dict) else None))
    out.extend(_broken_in_candidate(d, c, ev))
    out.append(manifest_diff_section(inp.manifest_diff))
    evidence = {k: v for k, v in ev.items() if k not in ("paired",)} if ev else {}
    if evidence or paired:
        out.append(
            '<details class="ev" id="decision-evidence"><summary>The evidence the decision rests on '
            "(decision.json \u2192 evidence)</summary>" + json_block({**evidence, "paired": paired}) + "</details>"
        )
    out.append("</section>")
    return "".join(out)


def _regression_is_primary(d: JsonObject, c: JsonObject) -> bool:
    """Under the regression gate the promotion status is only a second opinion."""
    return (d.get("gate_mode") or c.get("gate_mode")) == "regression"


def _decision_box(d: JsonObject, c: JsonObject) -> str:
    decision = json_object(c.get("decision"))
    status = d.get("status") or decision.get("status")
    because = json_list(d.get("because") or decision.get("because"))
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


def _comparison_rows(d: JsonObject, c: JsonObject) -> list[tuple[str, str]]:
    comparable = d.get("comparable", c.get("comparable"))
    rows = [("comparable", "yes" if comparable else "<b>no: every delta is null</b>")]
    if d.get("change_class") or c.get("change_class"):
        rows.append(("change class", code(d.get("change_class") or c.get("change_class"))))
    for reason in json_list(d.get("reasons") or c.get("reasons")):
        rows.append(("not comparable because", esc(reason)))
    if d.get("rollback_state"):
        rows.append(("rollback state", code(d["rollback_state"])))
    rows.extend(_pool_rows(d.get("baseline_pool")))
    rows.extend(_cost_rows(d.get("cost")))
    secondary = _regression_is_primary(d, c)
    regression = json_object(d.get("regression_gate") or c.get("regression"))
    if secondary and regression:
        rows.append(
            (
                "regression gate",
                f"<b>{'passed' if regression.get('passed') else 'FAILED'}</b>: {esc(regression.get('reason', ''))}",
            )
        )
        rows.extend(_gate_item_rows(regression.get("items")))
    rows.extend(_promotion_gate_rows(json_object(d.get("gate") or c.get("gate")), secondary))
    rows.append(_detectable_row(d, c))
    return rows


def _cost_rows(cost: object) -> list[tuple[str, str]]:
    """What a gated comparison spent and bought (decision.json's cost), in the terminal's words."""
    if not isinstance(cost, Mapping):
        return []
    from pytest_agentdrift.record.spend import arm_text, power_text

    rows = [(f"spend: {label}", esc(arm_text(cost[label]))) for label in ("baseline", "candidate")]
    power = power_text(cost.get("power"))
    return rows + ([("power", esc(power))] if power else [])


def _not_ruled_out(upper: object, found: object) -> str:
    # the most night-to-night variation the pool could not rule out, where it is more than was found
    # (said as compare/pool.variation_text says it)
    if not isinstance(upper, (int, float)) or (isinstance(found, (int, float)) and upper <= found):
        return ""
    return f"; variation up to rho {esc(f'{upper:.2g}')} not ruled out"


def _pool_rows(pool: object) -> list[tuple[str, str]]:
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
            f"rho {esc(spread.get('rho'))}, p = {esc(spread.get('p_value'))} over {esc(spread.get('records'))} record(s)"
            + _not_ruled_out(spread.get("rho_upper"), spread.get("rho")),
        ),
    ]
    for x in pool.get("left_out") or []:
        rows.append(("record left out", f"{code(x.get('path'))}: {esc(x.get('reason'))}"))
    for x in pool.get("runs_left_out") or []:
        rows.append(
            (
                "run left out",
                f"{esc(x.get('task'))} r{esc(x.get('rep'))} of {code(x.get('record'))}: {esc(x.get('reason'))}",
            )
        )
    return rows


def _promotion_gate_rows(gate: JsonObject, secondary: bool) -> list[tuple[str, str]]:
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


def _gate_item_rows(items: object) -> list[tuple[str, str]]:
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


def _detectable_prose(gate: object) -> str | None:
    """`50 pp at power 0.8, alpha 0.05, 12 tasks, k = 1` from a regression gate's minimum_detectable."""
    if not isinstance(gate, Mapping):
        return None
    mde = gate.get("minimum_detectable")
    if not isinstance(mde, Mapping):
        return None
    size = f"{mde['mde_pp']} pp" if mde.get("mde_pp") is not None else "no regression is detectable"
    alpha = gate.get("alpha", mde.get("alpha"))
    facts = [f"power {mde.get('power')}", f"alpha {alpha}", f"{mde.get('tasks')} tasks", f"k = {mde.get('k')}"]
    return f"{size} at " + ", ".join(facts)


def _detectable_row(d: JsonObject, c: JsonObject) -> tuple[str, str]:
    sdr = _find_key(d, "detectable") or _find_key(c, "detectable")
    prose = _detectable_prose(c.get("regression")) or _detectable_prose(d.get("regression_gate"))
    if prose:
        return ("smallest detectable regression", esc(prose))
    if sdr:
        return (
            "smallest detectable regression",
            "; ".join(f"{esc(path)} = {pp(v) if isinstance(v, float) and abs(v) <= 1 else esc(v)}" for path, v in sdr),
        )
    return ("smallest detectable regression", '<span class="mut">not in decision.json</span>')


def _broken_in_candidate(d: JsonObject, c: JsonObject, ev: JsonObject) -> list[str]:
    """Critical checks that broke, new safety failures, tampered passes, unconfirmed changes."""
    out = []
    regressions = [f for f in json_list(d.get("critical_failures")) if isinstance(f, dict) and f.get("regression")]
    if not regressions:
        regressions = [
            {"task": r.get("task"), "check": ", ".join(map(str, json_list(r.get("checks")))), "reps": []}
            for r in json_list(c.get("critical_regressions"))
            if isinstance(r, dict)
        ]
    if regressions:
        out.append(
            "<h3>Critical checks that broke in the candidate</h3><ul>"
            + "".join(_broken_check(f) for f in regressions)
            + "</ul>"
        )
    safety = json_list(c.get("new_safety_failures"))
    if safety:
        out.append(
            "<p><b>New safety-layer failures:</b> "
            + ", ".join(f'<a href="#{task_anchor(str(t))}">{esc(t)}</a>' for t in safety)
            + "</p>"
        )
    tampered = json_object(ev.get("tampered_passes"))
    tlist = [
        f"{arm} {t.get('task')} r{t.get('rep')}"
        for arm in ("baseline", "candidate")
        for t in json_list(tampered.get(arm))
        if isinstance(t, dict)
    ]
    if tlist:
        out.append(f"<p><b>Tampered passes:</b> {esc(', '.join(tlist))}</p>")
    unconfirmed = json_list(d.get("unconfirmed_changes"))
    if unconfirmed:
        out.append(
            "<h3>Observed changes no release note confirms</h3><ul>"
            + "".join(f"<li>{esc(x)}</li>" for x in unconfirmed)
            + "</ul>"
        )
    return out


def _broken_check(f: JsonObject) -> str:
    """One critical check that broke: its task (linked), the check, the repetitions it broke in."""
    reps = json_list(f.get("reps"))
    return (
        f'<li><a href="#{task_anchor(str(f.get("task")))}">{esc(f.get("task"))}</a> {esc(f.get("check"))} '
        + (f"(r{esc(', r'.join(map(str, reps)))})" if reps else "")
        + "</li>"
    )
