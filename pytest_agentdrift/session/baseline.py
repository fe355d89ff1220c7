"""Manifest capture and baseline comparison for a session (controller only).

Glue between the pure modules (manifest, stamps, decision, ledger) and the
session; the plugin and the CLI share it so both give the same numbers,
decision and exit codes.
"""

from __future__ import annotations

import os
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

from pytest_agentdrift import __version__
from pytest_agentdrift.canonical import load_json_file
from pytest_agentdrift.errors import EXIT_OK, AgentDriftError, RecordError
from pytest_agentdrift.tasks.load import find_task_dirs

MANIFEST_FILE = "runtime-manifest.json"


def session_task_dirs(args: list[str]) -> dict[str, Path]:
    """task id -> directory for every task the command line names (before collection)."""
    found: dict[str, Path] = {}
    for arg in args:
        path = Path(arg.split("::", 1)[0])
        if not path.is_dir():
            continue
        for d in find_task_dirs(path):
            try:
                tid = tomllib.loads((d / "task.toml").read_text(encoding="utf-8")).get("id")
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                continue  # collection reports the malformed task
            if isinstance(tid, str):
                found[tid] = d.absolute()
    return dict(sorted(found.items()))


def capture_for_session(config, s) -> None:
    """Capture the runtime manifest (hookable) into the session."""
    from pytest_agentdrift.manifest import capture as mf
    from pytest_agentdrift.session.state import evaluator_id, task_set_id
    from pytest_agentdrift.tasks.load import load_task

    dirs = session_task_dirs(list(config.args))
    specs = []
    for d in dirs.values():
        try:
            specs.append(load_task(d))
        except AgentDriftError:
            pass  # reported at collection
    generated = config.hook.pytest_agentdrift_generate_manifest(config=config)
    if generated is not None:
        s.manifest, s.instruction_bundle, s.source_manifest = dict(generated), None, None
    else:
        adapter = s.adapter
        st = s.settings
        ctx = mf.ManifestContext(
            adapter=adapter.describe() if adapter else {"name": "none", "product": "none", "surface": "none"},
            agent_argv=adapter.argv_template(st.agent_options) if adapter else [],
            version_argv=adapter.version_argv() if adapter else None,
            home=Path.home(),
            project_root=config.rootpath,
            cwd=Path.cwd(),
            # what the run will really use: a preset's documented defaults included
            options=adapter.effective_options(st.agent_options) if hasattr(adapter, "effective_options") else dict(st.agent_options),
            task_repos={t: d / "repo" for t, d in dirs.items()},
            task_dirs=dirs,
            extra_config=[Path(p) for p in st.config_files],
            extra_instructions=[Path(p) for p in st.instruction_files],
            env=dict(os.environ),
            env_allowlist=sorted(set(st.env) | set(getattr(adapter, "env_allowlist", ()))),
            task_set_id=task_set_id(specs) if specs else None,
            evaluator_id=evaluator_id(specs) if specs else None,
            isolation=session_isolation(s),
            harness_version=__version__,
            pytest_argv=list(config.invocation_params.args),
            run_id=s.run_id,
            env_image_digest=st.image_digest or os.environ.get("AGENTDRIFT_IMAGE_DIGEST") or None,
        )
        from pytest_agentdrift.session.experiments import stamp_manifest, staged_context

        cap = mf.capture(staged_context(s, ctx))  # with a bundle: what the agent will see
        stamp_manifest(s, cap)
        s.manifest, s.instruction_bundle, s.source_manifest = cap.manifest, cap.instruction_bundle, cap.source_manifest
    config.hook.pytest_agentdrift_update_manifest(config=config, manifest=s.manifest)
    if "identity" in s.manifest:
        s.manifest["runtime_id"] = mf.runtime_id(s.manifest["identity"])


def session_isolation(s) -> dict[str, Any]:
    """The enforced isolation, with the network policy a real agent runs under."""
    iso = s.isolation.to_dict(s.settings.isolation)
    adapter = s.adapter
    if adapter is not None and adapter.api_hosts:
        iso["network_allowlist"] = sorted({*adapter.api_hosts, *s.settings.allow_hosts})
        iso["network_policy_enforced"] = iso["enforced"] in ("bwrap", "unshare")
    return iso


def load_baseline(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(results, manifest) of a complete recorded run, or RecordError (exit 4)."""
    from pytest_agentdrift.manifest.capture import validate_manifest
    from pytest_agentdrift.record.store import load_run

    results = load_run(path, require_complete=True)
    mpath = path / MANIFEST_FILE
    if not mpath.is_file():
        raise RecordError("the baseline has no runtime manifest", mpath)
    manifest = validate_manifest(load_json_file(mpath, RecordError), mpath)
    return results, manifest


def _compare(config, s, pre_run: bool):
    from pytest_agentdrift.manifest.identity import compare_manifests

    vary = list(s.settings.vary)
    custom = config.hook.pytest_agentdrift_compare_stamps(config=config, baseline=s.baseline_manifest, current=s.manifest, vary=vary)
    if custom is not None:
        return custom
    return compare_manifests(s.baseline_manifest, s.manifest, vary, pre_run=pre_run, accept_unobserved=s.settings.accept_unobserved)


def rebaseline_command(config, s) -> str:
    args = [a for a in config.invocation_params.args]
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("--agent-baseline", "--agent-record", "--agent-vary"):
            skip = True
            continue
        if a.startswith(("--agent-baseline=", "--agent-record=", "--agent-vary=")):
            continue
        out.append(a)
    return "pytest " + " ".join(shlex.quote(a) for a in out + ["--agent-record", "runs/<new-baseline>"])


def check_baseline(config, s) -> list[str] | None:
    """Before collection: load the baseline and refuse when identity stamps differ."""
    from pytest_agentdrift.manifest.identity import check_vary, render_refusal

    check_vary(s.settings.vary)
    from pytest_agentdrift.manifest.identity import IDENTITY_FIELDS

    unknown = [f for f in s.settings.accept_unobserved if f not in IDENTITY_FIELDS]
    if unknown:
        raise AgentDriftError(f"--agent-accept-unobserved: unknown field(s) {', '.join(unknown)}; valid: {', '.join(IDENTITY_FIELDS)}")
    s.baseline_results, s.baseline_manifest = load_baseline(s.settings.baseline)
    if s.manifest is None:
        capture_for_session(config, s)
    cmp = _compare(config, s, pre_run=True)
    s.stamp_comparison = cmp
    if not cmp.comparable:
        lines = render_refusal(cmp, rebaseline_command(config, s))
        unknown = [f for f, b, c in cmp.blocks if b == c == "unobserved"]
        # fields only known after the runs that the baseline never observed will block then
        unknown += [f for f in cmp.deferred if (s.baseline_manifest.get("identity") or {}).get(f) == "unobserved"]
        if unknown:
            # the same unknown on both sides cannot be shown equal; only the operator can vouch for it
            lines.append("these fields are unobserved on both sides: declare what you know (--agent-model, "
                         "--agent-permission-mode, --agent-sandbox-mode) or accept what cannot be observed with "
                         "--agent-accept-unobserved FIELD (repeatable; ini agent_accept_unobserved): " + ", ".join(unknown))
        return lines
    s.comparison_lines.extend(render_refusal(cmp))
    return None


def selected_baseline(base: dict[str, Any], cand: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Pair on the tasks the candidate ran when -k / -m selected part of the same task set.

    The manifests already proved the task set is the same; a candidate that ran a
    subset is compared on that subset (the baseline's other tasks are left out,
    and the note says so). Anything else is left for compare_runs to refuse.
    """
    cand_ids, base_ids = set(cand["tasks"]), set(base["tasks"])
    if not cand_ids or cand_ids == base_ids or not cand_ids < base_ids:
        return base, None
    kept = {tid: base["tasks"][tid] for tid in sorted(cand_ids)}
    from pytest_agentdrift.grade.scoring import summarise

    note = f"note  compared on the {len(kept)} selected task(s) of the baseline's {len(base_ids)}"
    return {**base, "tasks": kept, "summary": summarise(kept)}, note


def finalize_session_manifest(s, results: dict[str, Any]) -> None:
    """Fill model_stamp from what the runs reported; results carry the runtime id."""
    from pytest_agentdrift.manifest.capture import finalize_manifest

    if s.manifest is None or "identity" not in s.manifest:
        return
    stamps = {f"{tid}/r{r['rep']}": r.get("model_stamp") for tid, t in results["tasks"].items() for r in t["runs"]}
    s.manifest = finalize_manifest(s.manifest, stamps)
    results["runtime_id"] = s.manifest["runtime_id"]


def compare_with_baseline(config, s, results: dict[str, Any]) -> int:
    """After the runs: the full comparison, decision and files. Returns an exit code."""
    from pytest_agentdrift.compare.decision import GateParams, compare_runs, comparison_exit_code, decision_document, render_comparison
    from pytest_agentdrift.compare.ledger import ledger_csv, read_release_notes
    from pytest_agentdrift.manifest.identity import manifest_diff_document, render_refusal

    cmp = _compare(config, s, pre_run=False)
    reasons = [f"{name}: {b!r} != {c!r}" for name, b, c in cmp.blocks]
    ledger = read_release_notes(s.settings.release_notes) if s.settings.release_notes else None
    rollback_evidence = load_json_file(s.settings.rollback_evidence) if s.settings.rollback_evidence else None
    baseline, note = selected_baseline(s.baseline_results, results)
    comparison = compare_runs(
        baseline, results, comparable=cmp.comparable, reasons=reasons,
        change_class=cmp.change_class, gate=GateParams(scope="critical" if s.settings.fail_on == "critical" else "all"),
        seed=s.settings.seed, ledger=ledger, rollback_state=s.settings.rollback_state, rollback_evidence=rollback_evidence,
    )
    s.comparison_files = {
        "comparison/manifest-diff.json": manifest_diff_document(cmp),
        "comparison/decision.json": decision_document(comparison),
        "comparison/comparison.json": comparison,
    }
    if comparison.get("ledger") is not None and ledger is not None:
        s.comparison_files["comparison/release-note-ledger.csv"] = ledger_csv(comparison["ledger"])
    change = [f"change      {cmp.change_class}: {cmp.explanation}" + (f" (declared variable: {', '.join(cmp.varied)})" if cmp.varied else "")]
    s.comparison_lines = (render_refusal(cmp) if not cmp.comparable else change) + ([note] if note else []) + render_comparison(comparison)
    from pytest_agentdrift.session.experiments import after_comparison

    # the seed 002 rows, ablation verdicts and the null experiment; drop-it decides its own exit
    return after_comparison(config, s, results, baseline, comparison, comparison_exit_code(comparison, s.settings.gate == "ship"))


__all__ = ["check_baseline", "compare_with_baseline", "capture_for_session", "load_baseline", "EXIT_OK", "sys"]
