"""Manifest capture and baseline comparison for a session (controller only).

Glue between the pure modules (manifest capture, identity comparison, the
accepted-unobserved resolver, declarations, compare.outcome) and the
session objects; `agentdrift compare` reaches the same comparison through
compare.outcome.compare_recorded, so both give the same numbers, decision
and exit codes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.manifest.baseline import load_baseline, rebaseline_command, unobserved_hint
from pytest_agentdrift.tasks.taskdirs import session_task_dirs
from pytest_agentdrift.vocabulary import INSTRUCTION_BUNDLE_FILE, UNOBSERVED


def capture_for_session(config, info, runner, collector) -> None:
    """Capture the runtime manifest (hookable), then the declared and agent-reported facts."""
    from pytest_agentdrift.inifile import project_root
    from pytest_agentdrift.manifest import capture as mf
    from pytest_agentdrift.manifest.sessionfacts import apply_operator_facts

    st = info.settings
    generated = config.hook.pytest_agentdrift_generate_manifest(config=config)
    if generated is not None:
        info.manifest, collector.instruction_bundle, collector.source_manifest = dict(generated), None, None
    else:
        from pytest_agentdrift.session.experiments import staged_context, stamp_manifest

        # with a bundle: what the agent will see
        cap = mf.capture(staged_context(info, runner, _context(config, info, runner)))
        stamp_manifest(info, cap)
        info.manifest, collector.instruction_bundle = cap.manifest, cap.instruction_bundle
        collector.source_manifest = cap.source_manifest
        from pytest_agentdrift.manifest.sessionfacts import sandbox_evidence

        sandbox_evidence(info.manifest, runner.isolation.mode, runner.sandbox_mounts())
    apply_operator_facts(info.manifest, st, project_root(config))
    config.hook.pytest_agentdrift_update_manifest(config=config, manifest=info.manifest)
    if "identity" in info.manifest:
        info.manifest["runtime_id"] = mf.runtime_id(info.manifest["identity"])


def _compare(config, info, comparison, pre_run: bool):
    from pytest_agentdrift.manifest.accept import resolve_for
    from pytest_agentdrift.manifest.identity import compare_manifests

    vary = list(info.settings.vary)
    accepted = resolve_for(info.settings.accept_unobserved, comparison.baseline_manifest, info.manifest)
    comparison.accepted = accepted.to_dict()
    custom = config.hook.pytest_agentdrift_compare_stamps(
        config=config, baseline=comparison.baseline_manifest, current=info.manifest, vary=vary
    )
    if custom is not None:
        return custom, accepted
    return compare_manifests(
        comparison.baseline_manifest, info.manifest, vary, pre_run=pre_run, accept_unobserved=accepted.fields
    ), accepted


def _context(config, info, runner):
    """The manifest capture context of this session (manifest/sessionfacts.py)."""
    from pytest_agentdrift.inifile import project_root
    from pytest_agentdrift.manifest.sessionfacts import session_context, session_isolation
    from pytest_agentdrift.tasks.load import load_task

    dirs = session_task_dirs(list(config.args))
    specs = []
    for d in dirs.values():
        try:
            specs.append(load_task(d))
        except AgentDriftError:
            pass  # reported at collection
    return session_context(
        adapter=runner.adapter,
        settings=info.settings,
        task_dirs=dirs,
        specs=specs,
        isolation=session_isolation(info.settings, runner.isolation, runner.adapter),
        probe_home=runner.probe_home if runner.adapter else None,
        cli_probe=runner.cli_probe if runner.adapter else None,  # the session's probe, not a second run
        project_root=project_root(config),  # never config.rootpath (inifile.py)
        identity_options=info.longrun.identity_options(),  # retry_policy, per-run budget
        run_id=info.run_id,
        pytest_argv=list(config.invocation_params.args),
    )


def check_baseline(config, info, comparison) -> list[str] | None:
    """Before collection: load the baseline and refuse when identity stamps differ; None when comparable."""
    from pytest_agentdrift.compare.pool import load_any_baseline
    from pytest_agentdrift.manifest.identity import check_vary, regrade_hint, render_refusal, settle_deferred

    check_vary(info.settings.vary)
    # one record, or a directory of records pooled (compare/pool.py; PoolRefused when none can be)
    comparison.baseline_results, comparison.baseline_manifest = load_any_baseline(
        info.settings.baseline, load_baseline, info.settings.baseline_window
    )
    cmp, accepted = _compare(config, info, comparison, pre_run=True)
    # fields only known after the runs that the recorded baseline never observed would block then: now
    settle_deferred(cmp, comparison.baseline_manifest, accepted.fields)
    comparison.stamps = cmp
    if not cmp.comparable:
        both_unknown = [f for f, b, c in cmp.blocks if b == c == UNOBSERVED]
        only_unknown = all(b == c == UNOBSERVED for _, b, c in cmp.blocks)
        lines = accepted.lines() + render_refusal(
            cmp, None if only_unknown else rebaseline_command(config.invocation_params.args)
        )
        hint = regrade_hint(cmp, str(info.settings.baseline))  # this session is the newer arm
        lines += [hint] if hint else []
        if both_unknown:
            unobservable = (info.manifest or {}).get("evidence", {}).get("unobservable_fields")
            lines += unobserved_hint(both_unknown, info.settings.declare, unobservable)
        return lines
    comparison.lines = accepted.lines() + render_refusal(cmp)
    return None


def _baseline_record(baseline: dict[str, Any], given: Path) -> Path:
    """The record whose documents speak for the baseline: the one given, or a pool's newest record."""
    pool = baseline.get("pool")
    return Path(pool["records"][0]["path"]) if isinstance(pool, dict) else given


def compare_with_baseline(config, info, comparison, results: Mapping[str, Any], collector=None) -> None:
    """After the runs: the full comparison, decision and files, into ``comparison``."""
    from pytest_agentdrift.canonical import load_json_file
    from pytest_agentdrift.compare.experiment import ArmDocuments, compare_with_rows

    cmp, accepted = _compare(config, info, comparison, pre_run=False)
    st = info.settings
    base_instructions = _baseline_record(comparison.baseline_results, Path(st.baseline)) / INSTRUCTION_BUNDLE_FILE
    compared = compare_with_rows(
        comparison.baseline_results,
        results,
        cmp,
        base_docs=ArmDocuments(
            comparison.baseline_manifest,
            load_json_file(base_instructions) if base_instructions.is_file() else None,
        ),
        cand_docs=ArmDocuments(info.manifest, getattr(collector, "instruction_bundle", None)),
        rows_gate_mode=st.gate,
        release_notes_given=st.release_notes is not None,
        gate=st.gate,
        seed=st.seed,
        release_notes=st.release_notes,
        rollback_state=st.rollback_state,
        rollback_evidence=st.rollback_evidence,
        accepted=accepted.to_dict(),
        max_infra_loss=st.max_infra_loss,
        gate_flakes=st.gate_flakes,
    )
    outcome = compared.outcome
    comparison.stamps = cmp
    comparison.files = outcome.files
    comparison.comparison = outcome.comparison
    comparison.lines = accepted.lines() + outcome.lines
    comparison.verdict = outcome.verdict
    from pytest_agentdrift.compare.outcome import selected_baseline
    from pytest_agentdrift.session.experiments import after_comparison

    # the experiment rows, ablation verdicts and the null experiment; drop-it and null set their own verdict
    baseline = selected_baseline(comparison.baseline_results, results)[0]
    after_comparison(info, comparison, results, baseline, compared)


__all__ = ["check_baseline", "compare_with_baseline", "capture_for_session"]
