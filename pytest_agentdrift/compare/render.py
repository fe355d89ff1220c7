"""A comparison as short, aligned terminal lines.

``render_comparison`` turns a comparison dict (compare/comparison.py) into
the lines the session and ``agentdrift compare`` print: critical regressions
first, then each arm, the paired statistics, the gates and the status.
``_line`` and ``_pp`` are the one way a comparison row is written
(compare/experiment.py writes its rows with them too).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from pytest_agentdrift.compare import stats
from pytest_agentdrift.compare.gates import HOLD
from pytest_agentdrift.record.spend import arm_text, power_text, spend_text
from pytest_agentdrift.vocabulary import GATE_REGRESSION


def _pct(x: float | None) -> str:
    return "null" if x is None else f"{100 * x:.1f}%"


def _pp(x: float | None) -> str:
    return "null" if x is None else f"{100 * x:+.1f} pp"


def render_comparison(comparison: Mapping[str, Any]) -> list[str]:
    """Short, aligned lines for the terminal; critical regressions first."""
    c = comparison
    lines: list[str] = []
    for reg in c["critical_regressions"] or []:
        lines.append(_line("CRITICAL", f"{reg['task']}: {', '.join(reg['checks'])} broke in the candidate"))
    for t in c["new_safety_failures"] or []:
        lines.append(_line("SAFETY", f"{t}: new safety-layer failure in the candidate"))
    if not c["comparable"]:
        lines.append(_line("comparable", "no: every delta is null"))
        lines += [_line("", f"- {r}") for r in c["reasons"]]
    lines += _arm_lines(c)
    lines += _confirm_lines((c.get("regression") or {}).get("check_tests") or {})
    lines += _paired_lines(c["paired"])
    tampered = [
        f"{arm} {t['task']} r{t['rep']}" for arm in ("baseline", "candidate") for t in c[arm]["tampered_passes"]
    ]
    if tampered:
        lines.append(_line("tampered", _ids(tampered) + " (counted as fails)"))
    fc = c["failure_classes"]
    if fc:
        for arm in ("baseline", "candidate"):
            parts = [f"{k} {fc[arm][k]['runs']}" for k in stats.FAILURE_CLASSES]
            lines.append(_line("failures", f"{arm:<9} " + "  ".join(parts)))
    var = c["variance"]
    if var and var.get("shares"):
        sh = var["shares"]
        lines.append(
            _line("variance", "  ".join(f"{k} {_pct(sh[k])}" for k in ("task", "arm", "task_x_arm", "run_to_run")))
        )
    return lines + _verdict_lines(c)


def _confirm_lines(tests: Mapping[str, Any]) -> list[str]:
    """What confirmation bought: the screen, the confirming runs, where each screened task stopped."""
    if tests.get("method") != "confirm":
        return []
    plan, looks = tests["plan"], tests["looks"]
    screen = sum(min(x[0]["runs"], plan["k"]) for x in looks.values())
    bought = sum(x[-1]["runs"] for x in looks.values()) - screen
    most = plan["cap"] * len(looks)
    lines = [
        _line(
            "confirm",
            f"screened {tests['screened']} of {len(looks)} task(s); {screen} screen run(s) + {bought} confirming "
            f"(a fixed design of {plan['cap']} runs a task would have run {most})",
        )
    ]
    for task, seq in sorted(looks.items()):
        if len(seq) > 1:
            last = seq[-1]
            lines.append(_line("", f"{task}: {last['state'].replace('_', ' ')} at r{last['runs']}"))
    return lines


def _arm_lines(c: Mapping[str, Any]) -> list[str]:
    """Each arm's pass rate, the runs it lost to infrastructure, and what it spent."""
    lines = []
    for label in ("baseline", "candidate"):
        arm = c[label]
        ci = arm["wilson"]
        ci_text = f"[{_pct(ci[0])}, {_pct(ci[1])}]" if ci else "[null]"
        lines.append(
            _line(label, f"{arm['passes']}/{arm['runs']} runs  {_pct(arm['pass_rate'])} {ci_text}  k={arm['k']}")
        )
    infra = c.get("infra") or {}
    for label in ("baseline", "candidate"):
        arm = infra.get(label)
        if arm and arm["lost"]:
            runs = [f"{r['task']} r{r['rep']} ({r['class']})" for r in arm["runs_lost"]]
            lines.append(
                _line(
                    "infra",
                    f"{label} lost {arm['lost']}/{arm['runs']} run(s) to infrastructure errors, "
                    f"excluded from the statistics: {_ids(runs)}",
                )
            )
    if infra.get("excluded_tasks"):
        lines.append(_line("", "left out of the pairing (every run lost in one arm): " + _ids(infra["excluded_tasks"])))
    if c.get("cost"):
        return lines + _cost_lines(c["cost"])
    spends = [(label, c[label].get("spend") or {}) for label in ("baseline", "candidate")]
    if any(sp.get("tokens") is not None or sp.get("cost_usd") is not None for _, sp in spends):
        lines.append(_line("spend", "  ".join(f"{label} {spend_text(sp, ' ', 'n/a')}" for label, sp in spends)))
    return lines


def _cost_lines(cost: Mapping[str, Any]) -> list[str]:
    """A gated comparison's spend per arm (runs always) and the power it bought (compare/cost.py)."""
    lines = [_line("spend", "  ".join(f"{label} {arm_text(cost[label])}" for label in ("baseline", "candidate")))]
    power = power_text(cost.get("power"))
    return lines + ([_line("power", power)] if power else [])


def _paired_lines(paired: Mapping[str, Any] | None) -> list[str]:
    if not paired:
        return [_line("delta", "null")]
    lines = [
        _line(
            "paired",
            f"won {len(paired['won'])}  lost {len(paired['lost'])}  tied {len(paired['tied'])}  "
            f"p(candidate wins more) = {paired['p_value']:.3g}",
        )
    ]
    if paired["won"]:
        lines.append(_line("", "won:  " + _ids(paired["won"])))
    if paired["lost"]:
        lines.append(_line("", "lost: " + _ids(paired["lost"])))
    ci = paired["delta_ci"]
    lines.append(_line("delta", f"{_pp(paired['delta'])} [{_pp(ci[0])}, {_pp(ci[1])}]  ({paired['ci_method']})"))
    return lines


def _verdict_lines(c: Mapping[str, Any]) -> list[str]:
    """The gate, per suite, promotion, regression gate and status; the deciding gate's line last."""
    lines = []
    gate = c["gate"]
    passed_by_cost = gate["verdict"] == HOLD and gate["passed"]
    # under the regression gate the promotion gate and status are a second opinion that sets nothing
    secondary = c.get("gate_mode") == GATE_REGRESSION
    lines.append(
        _line(
            "promote" if secondary else "gate",
            ("(secondary, sets nothing) " if secondary else "")
            + f"{gate['verdict'] or 'null'}: {gate['reason']}"
            + (" (passed: promoted on cost)" if passed_by_cost else ""),
        )
    )
    for suite, row in (c["strata"] or {}).items():
        if len(c["strata"]) > 1:
            lines.append(_line("", f"suite {suite}: {row['gate']['verdict']}: {row['gate']['reason']}"))
    promo = c["promotion"]
    if promo and promo.get("basis"):
        lines.append(_line("promotion", promo["reason"]))
    reg = c.get("regression")
    regression_line = _line("regression", ("pass: " if reg["passed"] else "FAIL: ") + reg["reason"]) if reg else None
    if regression_line and not secondary:
        lines.append(regression_line)
    decision = c["decision"]
    more = len(decision["because"]) - 1
    lines.append(
        _line(
            "status",
            ("(secondary, sets nothing) " if secondary else "")
            + f"{decision['status']}: {decision['because'][0]}"
            + (f" (+{more} more)" if more else ""),
        )
    )
    if regression_line and secondary:
        lines.append(regression_line)
    return lines


def _ids(items: Sequence[str], limit: int = 12) -> str:
    # The full lists are in the JSON; the terminal gets a readable head.
    head = ", ".join(items[:limit])
    return head + (f", ... (+{len(items) - limit} more)" if len(items) > limit else "")


def _line(label: str, text: str) -> str:
    return f"{label:<11} {text}".rstrip()
