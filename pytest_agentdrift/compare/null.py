"""The null experiment: two or more recordings of the *same* runtime, compared as if one were a candidate.

Pure functions over results.json / runtime-manifest.json dicts (no pytest,
no I/O). Whatever moves between two recordings of one runtime is run-to-run
noise, or something that changed where no manifest can see it
(a host that changed its model behind an unchanged stamp). The report says:

* for every pair of recordings (i < j, the earlier as baseline): the outcome
  flips (tasks solved by one recording and not the other, read over the same
  number of runs), the variance row, and whether the regression gate would
  have failed (a false alarm, because nothing was changed);
* with three or more recordings, the observed false-alarm rate over the
  pairs against alpha (pairs share recordings, so they are not independent
  trials: the rate is descriptive);
* a status: ``invalid_comparison`` when the identities differ (this is not a
  null experiment); ``hold_unconfirmed`` with "host-side drift suspected"
  only when outcomes move beyond what the agent's own randomness explains:
  the exact two-sided sign test on a pair's discordant tasks rejects at
  alpha divided by the number of pairs (Bonferroni: every pair is a chance
  to see noise as drift); otherwise ``no_material_evidence``. A gate that
  fires on some pairs while no pair moves beyond noise is the gate's own
  false-alarm rate on this agent, not the host: the report says so, and
  names the flakes the design could not tell from changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import TYPE_CHECKING, Any

from pytest_agentdrift.compare import stats
from pytest_agentdrift.vocabulary import DEFAULT_ACCEPT_UNOBSERVED, DEFAULT_SEED, SCHEMA_VERSION

if TYPE_CHECKING:
    from pytest_agentdrift.compare.gates import GateParams

NULL_OK = "no_material_evidence"
DRIFT = "hold_unconfirmed"
NOT_NULL = "invalid_comparison"
DRIFT_REASON = "host-side drift suspected"


def two_sided_discordant_pvalue(won: int, lost: int) -> float:
    """Exact two-sided sign test on the discordant tasks (1.0 with none)."""
    if won + lost == 0:
        return 1.0
    return min(1.0, 2.0 * stats.binomial_tail_pvalue(max(won, lost), won + lost, 0.5))


def null_experiment(
    runs: Sequence[Mapping[str, Any]],
    manifests: Sequence[Mapping[str, Any]] | None,
    *,
    labels: Sequence[str] | None = None,
    alpha: float = 0.05,
    seed: int = DEFAULT_SEED,
    accept_unobserved: Sequence[str] = DEFAULT_ACCEPT_UNOBSERVED,
) -> dict[str, Any]:
    """Compare every pair of recordings of one runtime; see the module doc.

    `accept_unobserved` holds tokens (field and group names, as --agent-accept-unobserved
    takes them), resolved for each pair by the one resolver the plugin and CLI use."""
    from pytest_agentdrift.compare.gates import GateParams

    if len(runs) < 2:
        raise ValueError("a null experiment needs at least two recordings")
    labels = list(labels or [f"run{i + 1}" for i in range(len(runs))])
    params = GateParams(alpha=alpha)
    pairs = []
    identity_problems: list[str] = []
    for i, j in combinations(range(len(runs)), 2):
        comparable, change_class = True, "identical"
        reasons: list[str] = []
        if manifests is not None:
            comparable, change_class, reasons = _pair_identity(manifests[i], manifests[j], accept_unobserved)
            if change_class != "identical" or not comparable:
                identity_problems.append(
                    f"{labels[i]} vs {labels[j]}: {change_class}" + (f" ({'; '.join(reasons[:3])})" if reasons else "")
                )
        pairs.append(_pair_row(runs[i], runs[j], labels[i], labels[j], comparable, change_class, reasons, params, seed))
    compared = [p for p in pairs if p["comparable"]]
    level = alpha / max(len(compared), 1)  # every pair is one more chance to read noise as drift
    for p in compared:
        p["beyond_noise"] = p["p_two_sided"] is not None and p["p_two_sided"] < level
    out = _null_summary(labels, alpha, level, pairs, compared, len(runs))
    out["status"], out["because"] = _null_status(out, pairs, compared, identity_problems)
    return out


def _pair_identity(
    base: Mapping[str, Any], cand: Mapping[str, Any], accept_unobserved: Sequence[str]
) -> tuple[bool, str, list[str]]:
    """(comparable, change class, blocking differences) of two recordings' manifests, by the shared resolver."""
    from pytest_agentdrift.manifest.accept import resolve_for
    from pytest_agentdrift.manifest.identity import compare_manifests

    accepted = resolve_for(accept_unobserved, base, cand).fields
    cmp = compare_manifests(base, cand, [], pre_run=False, accept_unobserved=accepted)
    return cmp.comparable, cmp.change_class or "identical", [f"{name}: {b!r} != {c!r}" for name, b, c in cmp.blocks]


def _pair_row(
    base: Mapping[str, Any],
    cand: Mapping[str, Any],
    base_label: str,
    cand_label: str,
    comparable: bool,
    change_class: str,
    reasons: list[str],
    params: GateParams,
    seed: int,
) -> dict[str, Any]:
    """One pair of recordings compared: its flips, their two-sided p-value, and whether the gate fired."""
    from pytest_agentdrift.compare.comparison import compare_runs

    comparison = compare_runs(
        base, cand, comparable=comparable, reasons=reasons, change_class=change_class, gate=params, seed=seed
    )
    paired = comparison["paired"]
    won, lost = (list(paired["won"]), list(paired["lost"])) if paired else ([], [])
    reg = comparison["regression"]
    p_two = two_sided_discordant_pvalue(len(won), len(lost)) if comparison["comparable"] else None
    fired = bool(comparison["comparable"] and not (reg and reg["passed"]))
    return {
        "baseline": base_label,
        "candidate": cand_label,
        "comparable": comparison["comparable"],
        "reasons": comparison["reasons"],
        "flips": len(won) + len(lost),
        "won": won,
        "lost": lost,
        "p_two_sided": p_two,
        "variance": comparison.get("variance"),
        "gate_verdict": None if not comparison["comparable"] else ("pass" if reg and reg["passed"] else "fail"),
        "gate_reason": reg["reason"] if reg else None,
        "gate_fired": fired,
        "undecided": [x["task"] for x in reg["undecided_failures"]] if reg else [],
    }


def _null_summary(
    labels: list[str],
    alpha: float,
    level: float,
    pairs: list[dict[str, Any]],
    compared: list[dict[str, Any]],
    runs: int,
) -> dict[str, Any]:
    fired_pairs = sum(1 for p in compared if p["gate_fired"])
    return {
        "schema_version": SCHEMA_VERSION,
        "recordings": labels,
        "alpha": alpha,
        "level": level,
        "pairs": pairs,
        "flips": sum(p["flips"] for p in compared),
        "gate_fired": fired_pairs,
        "false_alarm_rate": (fired_pairs / len(compared)) if runs >= 3 and compared else None,
        "false_alarm_note": (
            "pairs share recordings, so they are not independent trials: the rate is descriptive" if runs >= 3 else None
        ),
    }


def _null_status(out, pairs, compared, identity_problems) -> tuple[str, list[str]]:
    """The status and its evidence: not a null experiment, host-side drift, or the agent's randomness."""
    if identity_problems:
        return NOT_NULL, ["not a null experiment: the runtimes differ: " + p for p in identity_problems]
    if not compared:
        return NOT_NULL, [r for p in pairs for r in p["reasons"]] or ["no pair is comparable"]
    if any(p["beyond_noise"] for p in compared):
        moved = [
            f"{p['baseline']} vs {p['candidate']}: {p['flips']} flip(s) (lost {', '.join(p['lost']) or '-'}; won "
            f"{', '.join(p['won']) or '-'}; two-sided p = {p['p_two_sided']:.3g} < {out['level']:.3g})"
            for p in compared
            if p["beyond_noise"]
        ]
        return DRIFT, [f"{DRIFT_REASON}: identity is equal but outcomes moved beyond run-to-run noise", *moved]
    why = (
        "no outcome flipped"
        if out["flips"] == 0
        else f"{out['flips']} flip(s) within run-to-run noise (two-sided p >= {out['level']:.3g} on every pair)"
    )
    if not out["gate_fired"]:
        return NULL_OK, [f"{why}; the gate did not fire"]
    because = [
        f"{why}; the gate fired on {out['gate_fired']} of {len(compared)} pair(s): the agent's own randomness "
        "(a false alarm), not the host"
    ]
    undecided = sorted({t for p in compared for t in p["undecided"]})
    if undecided:
        because.append(
            f"critical failures on {', '.join(undecided)} could not be told from flakes with these repetitions:"
            " record the baseline with --agent-k 5 or more and run pull requests with "
            "the k `agentdrift plan` recommends, or use --agent-gate-flakes report"
        )
    return NULL_OK, because


def null_exit_code(result: Mapping[str, Any]) -> int:
    from pytest_agentdrift.errors import EXIT_FAILED, EXIT_OK, EXIT_REFUSED

    if result["status"] == NOT_NULL:
        return EXIT_REFUSED
    return EXIT_FAILED if result["status"] == DRIFT else EXIT_OK


def render_null(result: Mapping[str, Any]) -> list[str]:
    lines = []
    for p in result["pairs"]:
        head = f"{p['baseline']} vs {p['candidate']}"
        if not p["comparable"]:
            lines.append(f"{'null':<11} {head}: not comparable: {'; '.join(p['reasons'][:3])}")
            continue
        lines.append(
            f"{'null':<11} {head}: {p['flips']} flip(s)"
            + (f" (lost {', '.join(p['lost']) or '-'}; won {', '.join(p['won']) or '-'})" if p["flips"] else "")
            + f"; regression gate {p['gate_verdict']}"
            + (" (FIRED: a false alarm)" if p["gate_fired"] else ", would not fire")
        )
        shares = (p.get("variance") or {}).get("shares")
        if shares:
            lines.append(
                f"{'variance':<11} "
                + "  ".join(f"{k} {100 * shares[k]:.1f}%" for k in ("task", "arm", "task_x_arm", "run_to_run"))
            )
        elif p.get("variance") is not None:
            lines.append(
                f"{'variance':<11} {p['variance'].get('note') or 'total sum of squares 0: nothing to apportion'}"
            )
        else:
            lines.append(f"{'variance':<11} null (k = 1: run-to-run variance needs repetitions)")
    if result["false_alarm_rate"] is not None:
        compared = sum(1 for p in result["pairs"] if p["comparable"])
        lines.append(
            f"{'false alarm':<11} {result['gate_fired']}/{compared} pair(s) = {100 * result['false_alarm_rate']:.1f}% "
            f"against alpha {result['alpha']:g} ({result['false_alarm_note']})"
        )
    more = len(result["because"]) - 1
    lines.append(f"{'status':<11} {result['status']}: {result['because'][0]}" + (f" (+{more} more)" if more else ""))
    lines += [f"{'':<11} - {b}" for b in result["because"][1:]]
    return lines
