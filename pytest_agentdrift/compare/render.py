"""A comparison as short, aligned terminal lines.

``render_comparison`` turns a comparison dict (compare/comparison.py) into
the lines the session and ``agentdrift compare`` print: critical regressions
first, then each arm, the paired statistics, the gates and the status.
``_line`` and ``_pp`` are the one way a comparison row is written
(compare/experiment.py writes its rows with them too).
"""

from __future__ import annotations

from typing import Sequence

from pytest_agentdrift.compare import stats
from pytest_agentdrift.compare.gates import HOLD
from pytest_agentdrift.compare.status import infra_arm
from pytest_agentdrift.record.spend import arm_text, power_text, spend_text
from pytest_agentdrift.shapes import ArmSummary, CheckTests, Comparison, DecisionCost, JsonValue, PairedResult
from pytest_agentdrift.vocabulary import GATE_REGRESSION


def _pct(x: float | None) -> str:
    return "null" if x is None else f"{100 * x:.1f}%"


def _pp(x: float | None) -> str:
    return "null" if x is None else f"{100 * x:+.1f} pp"


def render_comparison(comparison: Comparison) -> list[str]:
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
    regression = c.get("regression")
    lines += _confirm_lines(regression["check_tests"]) if regression else []
    lines += _paired_lines(c["paired"])
    tampered = [f"{label} {t['task']} r{t['rep']}" for label, arm in _arms(c) for t in arm["tampered_passes"]]
    if tampered:
        lines.append(_line("tampered", _ids(tampered) + " (counted as fails)"))
    fc = c["failure_classes"]
    if fc:
        for arm in ("baseline", "candidate"):
            parts = [f"{k} {fc[arm][k]['runs']}" for k in stats.FAILURE_CLASSES]
            lines.append(_line("failures", f"{arm:<9} " + "  ".join(parts)))
    var = c["variance"]
    sh = var.get("shares") if var else None
    if sh:
        lines.append(
            _line("variance", "  ".join(f"{k} {_pct(sh[k])}" for k in ("task", "arm", "task_x_arm", "run_to_run")))
        )
    return lines + _verdict_lines(c)


def _arms(c: Comparison) -> tuple[tuple[str, ArmSummary], tuple[str, ArmSummary]]:
    return ("baseline", c["baseline"]), ("candidate", c["candidate"])


def _count(value: JsonValue) -> int:
    """A count a confirmation plan or look holds (compare/confirm.py writes ints)."""
    if not isinstance(value, int):
        raise AssertionError(f"a confirmation count is not an int: {value!r}")
    return value


def _confirm_lines(tests: CheckTests) -> list[str]:
    """What confirmation bought: the screen, the confirming runs, where each screened task stopped."""
    if tests.get("method") != "confirm":
        return []
    plan, looks = tests["plan"], tests["looks"]
    k, cap = _count(plan["k"]), _count(plan["cap"])
    screen = sum(min(_count(x[0]["runs"]), k) for x in looks.values())
    bought = sum(_count(x[-1]["runs"]) for x in looks.values()) - screen
    most = cap * len(looks)
    lines = [
        _line(
            "confirm",
            f"screened {tests['screened']} of {len(looks)} task(s); {screen} screen run(s) + {bought} confirming "
            f"(a fixed design of {cap} runs a task would have run {most})",
        )
    ]
    for task, seq in sorted(looks.items()):
        if len(seq) > 1:
            last = seq[-1]
            lines.append(_line("", f"{task}: {str(last['state']).replace('_', ' ')} at r{last['runs']}"))
    return lines


def _arm_lines(c: Comparison) -> list[str]:
    """Each arm's pass rate, the runs it lost to infrastructure, and what it spent."""
    lines = []
    for label, arm in _arms(c):
        ci = arm["wilson"]
        ci_text = f"[{_pct(ci[0])}, {_pct(ci[1])}]" if ci else "[null]"
        lines.append(
            _line(label, f"{arm['passes']}/{arm['runs']} runs  {_pct(arm['pass_rate'])} {ci_text}  k={arm['k']}")
        )
    infra = c.get("infra")
    for label, lost in ((label, infra_arm(infra, label)) for label in ("baseline", "candidate") if infra):
        if lost["lost"]:
            runs = [f"{r['task']} r{r['rep']} ({r['class']})" for r in lost["runs_lost"]]
            lines.append(
                _line(
                    "infra",
                    f"{label} lost {lost['lost']}/{lost['runs']} run(s) to infrastructure errors, "
                    f"excluded from the statistics: {_ids(runs)}",
                )
            )
    if infra and infra.get("excluded_tasks"):
        lines.append(_line("", "left out of the pairing (every run lost in one arm): " + _ids(infra["excluded_tasks"])))
    cost = c.get("cost")
    if cost:
        return lines + _cost_lines(cost)
    spends = [(label, arm["spend"]) for label, arm in _arms(c)]
    if any(sp["tokens"] is not None or sp["cost_usd"] is not None for _, sp in spends):
        lines.append(_line("spend", "  ".join(f"{label} {spend_text(sp, ' ', 'n/a')}" for label, sp in spends)))
    return lines


def _cost_lines(cost: DecisionCost) -> list[str]:
    """A gated comparison's spend per arm (runs always) and the power it bought (compare/cost.py)."""
    arms = (("baseline", cost["baseline"]), ("candidate", cost["candidate"]))
    lines = [_line("spend", "  ".join(f"{label} {arm_text(arm)}" for label, arm in arms))]
    power = power_text(cost.get("power"))
    return lines + ([_line("power", power)] if power else [])


def _paired_lines(paired: PairedResult | None) -> list[str]:
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
    low, high = paired["delta_ci"] or (None, None)  # None only when no task was paired
    lines.append(_line("delta", f"{_pp(paired['delta'])} [{_pp(low)}, {_pp(high)}]  ({paired['ci_method']})"))
    return lines


def _verdict_lines(c: Comparison) -> list[str]:
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
    strata = c["strata"] or {}
    for suite, row in strata.items():
        if len(strata) > 1:
            lines.append(_line("", f"suite {suite}: {row['gate']['verdict']}: {row['gate']['reason']}"))
    promo = c["promotion"]
    if promo and promo.get("basis"):
        lines.append(_line("promotion", promo["reason"]))
    reg = c.get("regression")
    regression_line = _line("regression", ("pass: " if reg["passed"] else "FAIL: ") + reg["reason"]) if reg else None
    if regression_line and not secondary:
        lines.append(regression_line)
    decision = c["decision"]  # settled before anything renders
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
