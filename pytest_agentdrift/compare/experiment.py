"""The experiment rows every comparison adds, and the ablation verdicts: one section, one renderer.

Pure (no pytest, no I/O): the plugin and ``agentdrift compare`` hand in the
two results.json dicts, the comparison from ``decision.compare_runs``, and,
when they have them, both runtime manifests and instruction bundles. The
section goes into the terminal lines, report.md, decision.json
(``experiment``) and comparison/experiment.json.

Rows: ``agent`` (and a note when the agent release differs between arms and
no release notes were given: the delta then mixes the change with the
release), ``own tests``, ``tampered`` (disclosed / stealth), ``surface``,
``diverge``; for an ablation or addition also ``effect``, ``item gate`` and,
with ``--agent-gate drop-it``, ``drop-it gate``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_agentdrift.canonical import digest
from pytest_agentdrift.compare import ablation, behaviour
from pytest_agentdrift.compare.outcome import ComparisonOutcome, Verdict
from pytest_agentdrift.compare.render import _line, _pp  # one way a comparison row is written
from pytest_agentdrift.shapes import Comparison
from pytest_agentdrift.vocabulary import DECISION_FILE, GATE_DROP_IT, SCHEMA_VERSION

if TYPE_CHECKING:
    from pytest_agentdrift.manifest.identity import StampComparison

DROP_IT_MODE = GATE_DROP_IT  # `--agent-gate drop-it` (vocabulary.py)


def _version(results: Mapping[str, Any], manifest: Mapping[str, Any] | None) -> str:
    ident = (manifest or {}).get("identity") or {}
    value = ident.get("cli_version")
    if isinstance(value, str) and value not in ("unobserved", "not_applicable"):
        return value
    if isinstance(value, dict):
        # an agent command's script: its name and a short digest of its bytes and distributions,
        # so two releases differ here exactly when the identity's value does
        return f"{value.get('program', 'program')} ({digest(value).removeprefix('sha256:')[:12]})"
    return str((results.get("agent") or {}).get("version") or "unobserved")


def agent_release(
    base: Mapping[str, Any],
    cand: Mapping[str, Any],
    base_manifest: Mapping[str, Any] | None,
    cand_manifest: Mapping[str, Any] | None,
    release_notes_given: bool,
) -> dict[str, Any]:
    b, c = _version(base, base_manifest), _version(cand, cand_manifest)
    arms = {
        label: {
            "agent": (results.get("agent") or {}).get("name"),
            "version": version,
            "runs": (results.get("summary") or {}).get("runs"),
        }
        for label, results, version in (("baseline", base, b), ("candidate", cand, c))
    }
    row: dict[str, object] = {**arms, "differs": b != c, "note": None}
    if b != c and not release_notes_given:
        was, now = arms["baseline"], arms["candidate"]
        row["note"] = (
            f"the baseline ran on {was['agent']} {b} ({was['runs']} runs), the candidate on "
            f"{now['agent']} {c} ({now['runs']} runs): the agent release differs "
            "between arms, so the delta mixes your change with the release and cannot be attributed to the "
            "bundle. Re-run both arms on one release with the agent's auto-update off, or give the release "
            "notes (--agent-release-notes)"
        )
    return row


def host_drift(comparison: Comparison, alpha: float = 0.05) -> dict[str, Any] | None:
    """Identity equal, outcomes moved beyond run-to-run noise: a host-side change behind an unchanged stamp."""
    from pytest_agentdrift.compare.null import DRIFT_REASON, two_sided_discordant_pvalue

    paired = comparison.get("paired")
    if comparison.get("change_class") != "identical" or not comparison.get("comparable") or not paired:
        return None
    won, lost = len(paired["won"]), len(paired["lost"])
    p = two_sided_discordant_pvalue(won, lost)
    fired = (comparison.get("gate") or {}).get("quality_verdict") == "dont_ship"
    if p >= alpha and not fired:
        return None
    return {
        "p_two_sided": p,
        "gate_fired": fired,
        "note": f"{DRIFT_REASON}: the identity is equal but {won + lost} task(s) changed outcome (two-sided p = "
        f"{p:.3g}" + ("; the gate fired" if fired else "") + "); check with agentdrift null",
    }


def _bundle_info(results: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return (results.get("settings") or {}).get("agent_bundle")


@dataclass(frozen=True)
class ArmDocuments:
    """What the experiment rows read of one arm besides its results (None where the arm has none)."""

    manifest: Mapping[str, Any] | None = None
    instructions: Mapping[str, Any] | None = None


def experiment_section(
    base: Mapping[str, Any],
    cand: Mapping[str, Any],
    comparison: Comparison,
    *,
    base_docs: ArmDocuments = ArmDocuments(),
    cand_docs: ArmDocuments = ArmDocuments(),
    gate_mode: str | None = None,
    release_notes_given: bool = False,
    item_params: ablation.ItemGateParams | None = None,
) -> dict[str, Any]:
    paired = comparison.get("paired")
    base_instructions, cand_instructions = base_docs.instructions, cand_docs.instructions
    section: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "agent_release": agent_release(base, cand, base_docs.manifest, cand_docs.manifest, release_notes_given),
        "own_tests": {"baseline": behaviour.own_tests(base), "candidate": behaviour.own_tests(cand)},
        "tampered_passes": {"baseline": behaviour.tampered_split(base), "candidate": behaviour.tampered_split(cand)},
        "surface": behaviour.surface_row(base_instructions, cand_instructions, paired["delta_ci"] if paired else None),
        "diverge": behaviour.divergences(base, cand, comparison["tasks"]) if comparison.get("comparable") else [],
        "bundles": {"baseline": _bundle_info(base), "candidate": _bundle_info(cand)},
        "ablation": None,
        "gate_mode": gate_mode,
        "host_drift": host_drift(comparison),
    }
    section["ablation"] = _ablation_part(
        base, cand, comparison, base_instructions, cand_instructions, gate_mode, item_params
    )
    return section


def _ablation_part(
    base: Mapping[str, Any],
    cand: Mapping[str, Any],
    comparison: Comparison,
    base_instructions: Mapping[str, Any] | None,
    cand_instructions: Mapping[str, Any] | None,
    gate_mode: str | None,
    item_params: ablation.ItemGateParams | None,
) -> dict[str, Any] | None:
    """The one item B removes or adds: its exposure, effect, item gate and drop-it answer (None without one)."""
    cand_bundle = _bundle_info(cand) or {}
    item = ablation.item_from_derivation(cand_bundle.get("derivation"))
    if item is None and gate_mode == DROP_IT_MODE:
        return {
            "item": None,
            "drop_it": {
                "answer": ablation.KEEP_IT,
                "passed": False,
                "reason": "--agent-gate drop-it needs exactly one kind of change: --agent-without or --agent-with",
            },
        }
    if item is None:
        return None
    with_bundle = (_bundle_info(base) if item.kind == ablation.REMOVAL else cand_bundle) or {}
    config_paths = {(f["scope"], f["path"]) for f in with_bundle.get("files") or [] if f.get("category") == "config"}
    with_results = base if item.kind == ablation.REMOVAL else cand
    with_instructions = base_instructions if item.kind == ablation.REMOVAL else cand_instructions
    exposed = ablation.exposure(with_results, with_instructions, item, config_paths)
    gate = ablation.item_gate(item, base, cand, exposed, item_params or ablation.ItemGateParams())
    return {
        "item": {
            "kind": item.kind,
            "label": item.label,
            "paths": [list(p) for p in item.paths],
            "from_bundle": cand_bundle.get("derived_from"),
            "bundle": cand_bundle.get("name"),
        },
        "effect": ablation.effect(item, comparison),
        "exposure": exposed,
        "item_gate": gate,
        "drop_it": ablation.drop_it_gate(item, gate, comparison) if gate_mode == DROP_IT_MODE else None,
    }


@dataclass
class ComparedWithRows:
    outcome: ComparisonOutcome
    section: dict[str, Any]  # comparison/experiment.json, and decision.json's ``experiment``
    lines: list[str]  # the experiment rows, printed below the comparison's own lines
    verdict: Verdict  # the comparison's own, or the drop-it gate's under that gate


def compare_with_rows(
    base: dict[str, Any],
    cand: Mapping[str, Any],
    stamps: StampComparison,
    *,
    base_docs: ArmDocuments,
    cand_docs: ArmDocuments,
    rows_gate_mode: str | None,
    release_notes_given: bool,
    **compare_options: Any,
) -> ComparedWithRows:
    """The one comparison path of the plugin and ``agentdrift compare``: compare_recorded, then the
    experiment rows on the baseline it paired, then the verdict the drop-it gate may set."""
    from pytest_agentdrift.compare.outcome import compare_recorded, selected_baseline

    outcome = compare_recorded(base, cand, stamps, **compare_options)
    section = experiment_section(
        selected_baseline(base, cand)[0],
        cand,
        outcome.comparison,
        base_docs=base_docs,
        cand_docs=cand_docs,
        gate_mode=rows_gate_mode,
        release_notes_given=release_notes_given,
    )
    if isinstance(outcome.files.get(DECISION_FILE), dict):
        outcome.files[DECISION_FILE]["experiment"] = section
    verdict = drop_it_verdict(section, outcome.comparison, rows_gate_mode, outcome.verdict)
    return ComparedWithRows(outcome, section, render_experiment(section), verdict)


def experiment_exit_code(section: Mapping[str, Any], gate_mode: str | None) -> int | None:
    """Exit status the drop-it gate asks for (None when it is not enabled)."""
    from pytest_agentdrift.errors import EXIT_FAILED, EXIT_OK

    if gate_mode != DROP_IT_MODE:
        return None
    drop = ((section.get("ablation") or {}).get("drop_it")) or {}
    return EXIT_OK if drop.get("passed") else EXIT_FAILED


def drop_it_verdict(
    section: Mapping[str, Any], comparison: Comparison, gate_mode: str | None, prior: Verdict
) -> Verdict:
    """The exit verdict under the drop-it gate; `prior` (the comparison's own) otherwise.

    A comparison that decided nothing (refused, or an arm lost more of its runs to
    infrastructure than --max-infra-loss) keeps its own verdict under every gate,
    drop-it included: an ablation cannot say "drop it" on runs that were not scored.
    """
    code = experiment_exit_code(section, gate_mode)
    if code is None or not comparison.get("comparable") or (comparison.get("infra") or {}).get("exceeded"):
        return prior
    gate = (section.get("ablation") or {}).get("drop_it") or {}
    return Verdict(code, f"gate drop-it: {gate.get('answer', 'no answer')}: {gate.get('reason', 'no single item')}")


def render_experiment(section: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    rel = section["agent_release"]
    b, c = rel["baseline"], rel["candidate"]
    lines.append(
        _line(
            "agent",
            f"{b['agent']} {b['version']} ×{b['runs']}    {c['agent']} {c['version']} ×{c['runs']}"
            + ("    release differs" if rel["differs"] else ""),
        )
    )
    lines += _behaviour_lines(section)
    lines += _ablation_lines(section.get("ablation"))
    sf = section["surface"]
    notes = [n for n in (rel.get("note"), sf.get("note"), (section.get("host_drift") or {}).get("note")) if n]
    lines += [_line("note", n) for n in notes]
    return lines


def _behaviour_lines(section: Mapping[str, Any]) -> list[str]:
    """Own tests, tampered passes, instruction surface and where the arms' steps diverge."""
    lines = []
    for arm in ("baseline", "candidate"):
        ot = section["own_tests"][arm]
        if ot["failed_runs"]:
            counts = "  ".join(
                f"{k} {v}" for k, v in ot["counts"].items() if v or k in ("green", "red", "stale", "none")
            )
            lines.append(_line("own tests", f"{arm:<9} {counts}  (of {ot['failed_runs']} failed run(s))"))
        else:
            lines.append(_line("own tests", f"{arm:<9} no failed run"))
    for arm in ("baseline", "candidate"):
        tp = section["tampered_passes"][arm]
        if tp["disclosed"] or tp["stealth"]:
            stealth = ", ".join(f"{r['task']} r{r['rep']}" for r in tp["stealth"]) or "-"
            lines.append(
                _line(
                    "tampered",
                    f"{arm:<9} disclosed {len(tp['disclosed'])}  stealth {len(tp['stealth'])}  (stealth: {stealth})",
                )
            )
    sf = section["surface"]
    if sf["baseline"] is not None and sf["candidate"] is not None:
        share = "" if sf["delta_share"] is None else f" ({100 * sf['delta_share']:+.0f}%)"
        lines.append(
            _line(
                "surface",
                f"{behaviour.human_bytes(sf['baseline']['bytes'])} ({sf['baseline']['files']} files)    "
                f"{behaviour.human_bytes(sf['candidate']['bytes'])} ({sf['candidate']['files']} files)    "
                f"{sf['delta_bytes']:+d} B{share}",
            )
        )
    for d in section["diverge"]:
        if d["step"] is None:
            lines.append(_line("diverge", f"{d['task']} ({d['outcome']}): {d['note']}"))
        else:
            lines.append(
                _line(
                    "diverge",
                    f"{d['task']} ({d['outcome']}) step {d['step']}: baseline "
                    f"{behaviour.show_step(d['baseline'])} | candidate {behaviour.show_step(d['candidate'])}",
                )
            )
    return lines


def _ablation_lines(ab: Mapping[str, Any] | None) -> list[str]:
    """The removed or added item's effect, its gate, and the drop-it answer."""
    lines = []
    if ab and ab.get("item"):
        eff, gate = ab["effect"], ab["item_gate"]
        ci = eff["ci"]
        ci_text = "[null]" if ci is None else f"[{_pp(ci[0])}, {_pp(ci[1])}]"
        lines.append(
            _line(
                "effect",
                f"effect of {eff['item']} = {eff['formula']}: {_pp(eff['estimate'])} {ci_text}"
                + (f"  ({eff['method']})" if eff.get("method") else ""),
            )
        )
        p = gate["params"]
        lines.append(
            _line(
                "item gate",
                f"k={p['k']} τ={p['tau']:.2f} m={p['margin']}: {gate['verdict']} · G={gate['G']:+d} "
                f"net runs D={100 * gate['D']:.0f} pp fired {gate['fired_runs']}/{gate['with_runs']}"
                f" · S={gate['S']} task(s)",
            )
        )
        verb = "removes" if gate["kind"] == ablation.REMOVAL else "adds"
        lines.append(_line("", f"B {verb} {eff['item']}: {gate['reason']}"))
        if gate.get("recheck"):
            rc = gate["recheck"]
            sel = " or ".join(rc["tasks"]) if rc["tasks"] else None
            lines.append(
                _line(
                    "", "re-run: pytest <the same options>" + (f" -k '{sel}'" if sel else "") + f" --agent-k {rc['k']}"
                )
            )
    if ab and ab.get("drop_it"):
        lines.append(_line("drop-it", f"drop-it gate: {ab['drop_it']['answer']}: {ab['drop_it']['reason']}"))
    return lines
