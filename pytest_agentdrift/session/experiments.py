"""Session glue for bundles, ablations, the null experiment and pre-registered plans.

The pytest layer calls four functions, each from one line in the existing
session code, with the session objects of session/state.py (SessionInfo,
TaskRunner, RunCollector, ComparisonState):

* `prepare_session(config, info, runner, comparison)` at session start, in
  the controller and in every worker (``comparison`` None there), after the
  agent is resolved: loads the bundle (verified), derives B for
  ``--agent-without`` / ``--agent-with`` (stored, findable again), checks
  the options, and sets ``runner.overlay`` for the runner; in the
  controller it also loads a ``--agent-plan`` and registers
  `ExperimentPlugin` (the public ``pytest_agentdrift_modify_report`` hook
  puts the bundle and the plan into results.json's settings);
* `staged_context(info, runner, ctx)` before the manifest is captured: with a bundle,
  discovery runs on what the agent will really see (a staged private home
  holding the bundle's user files, and copies of the task repositories with
  the bundle overlaid), so instruction-bundle.json describes that;
* `stamp_manifest(info, capture)` right after: the bundle's instruction and
  configuration digests are folded into ``instruction_hash`` and
  ``config_hash`` (so two bundles differing in one CLAUDE.md line differ in
  ``instruction_hash`` alone);
* `after_comparison(...)` at the end of a comparison with a baseline: the
  experiment rows, the ablation verdicts, the null experiment, the plan; into
  the terminal lines, decision.json and comparison/*.json; returns the
  session's comparison exit code.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path
from typing import Any

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.vocabulary import DECISION_FILE, EXIT_FAILED, EXIT_OK, EXIT_REFUSED, GATE_DROP_IT, UNOBSERVED

DROP_IT = GATE_DROP_IT
STATE_ATTR = "agentdrift_experiment"  # on the SessionInfo: this module's state, one per process


@dataclasses.dataclass
class ExperimentState:
    store: Path | None = None
    bundle: Any = None  # manifest.bundles.Bundle the runs use (derived when --agent-without / --agent-with)
    base_bundle: Any = None
    plan: dict[str, Any] | None = None
    plan_path: Path | None = None


def state_of(s: Any) -> ExperimentState:
    st = getattr(s, STATE_ATTR, None)
    if st is None:
        st = ExperimentState()
        setattr(s, STATE_ATTR, st)
    return st


def bundles_dir(config: Any) -> Path:
    """The plugin's bundles directory: --agent-bundles, the agent_bundles ini value, AGENTDRIFT_BUNDLES, default."""
    from pytest_agentdrift.inifile import project_root
    from pytest_agentdrift.manifest.bundles import resolve_store

    return resolve_store(
        config.getoption("agentdrift_bundles"),
        config.getini("agent_bundles") or None,
        os.environ,
        project_root(config),
    )


def _check_options(st_: Any, controller: bool) -> None:
    if (st_.without or st_.with_items) and not st_.bundle:
        raise AgentDriftError(
            "--agent-without / --agent-with derive B from a bundle: give --agent-bundle NAME (make one "
            "with: agentdrift bundle snapshot NAME --agent PRESET)"
        )
    if st_.gate == DROP_IT and not (st_.without or st_.with_items):
        raise AgentDriftError(
            "--agent-gate drop-it decides on one removed or added item: give --agent-without PATH or --agent-with PATH"
        )
    if controller and st_.gate == DROP_IT and st_.baseline is None:
        raise AgentDriftError(
            "--agent-gate drop-it compares against the arm with the whole bundle: give --agent-baseline"
        )
    if controller and st_.null and st_.baseline is None:
        raise AgentDriftError("--agent-null compares two recordings of one runtime: give --agent-baseline")
    if st_.null and st_.vary:
        raise AgentDriftError(
            f"--agent-null: a null experiment varies nothing, but --agent-vary {', '.join(st_.vary)} was given"
        )
    if st_.bundle and not (st_.agent or st_.cmd):
        raise AgentDriftError("--agent-bundle: give the agent preset the bundle belongs to (--agent PRESET)")


def prepare_session(config: Any, info: Any, runner: Any, comparison: Any = None) -> None:
    """See the module doc. Raises AgentDriftError (a usage error) on bad options or a bad bundle."""
    settings = info.settings
    controller = not hasattr(config, "workerinput")
    _check_options(settings, controller)
    st = state_of(info)
    if controller and settings.plan is not None:
        from pytest_agentdrift.canonical import load_json_file
        from pytest_agentdrift.compare.planning import verify_plan

        st.plan = verify_plan(load_json_file(settings.plan), settings.plan)
        st.plan_path = settings.plan
    if settings.bundle:
        from pytest_agentdrift.manifest import bundles

        st.store = bundles_dir(config)
        st.base_bundle = bundle = bundles.load(st.store, settings.bundle)
        adapter = runner.adapter
        if adapter is None or adapter.name != bundle.agent:
            raise AgentDriftError(
                f"--agent-bundle {settings.bundle}: the bundle is a {bundle.agent} setup, but the "
                f"session runs {adapter.name if adapter else 'no agent'}"
            )
        if settings.without or settings.with_items:
            _check_without(config, bundle, settings.without)
            bundle = bundles.derive(
                st.store, bundle, without=settings.without, with_=settings.with_items, cwd=Path.cwd(), home=Path.home()
            )
        st.bundle = bundle
        # the bundle's model and options stand in for the ones the session did not set
        opts = {**({"model": bundle.model} if bundle.model else {}), **bundle.options, **settings.agent_options}
        info.settings = dataclasses.replace(settings, agent_options=opts)  # the runner reads info.settings
        runner.overlay = overlay_for(bundle)
    if (
        controller
        and (st.bundle is not None or st.plan is not None)
        and not config.pluginmanager.has_plugin("agentdrift-experiments")
    ):
        config.pluginmanager.register(ExperimentPlugin(info, comparison), "agentdrift-experiments")


def _check_without(config: Any, bundle: Any, without: tuple[str, ...]) -> None:
    """A path to remove must be in the bundle or in a selected task's repo/: a typo is not an experiment."""
    from pytest_agentdrift.tasks.load import session_task_dirs

    if not without:
        return
    repos = [d / "repo" for d in session_task_dirs(list(config.args)).values()]
    for spec in without:
        user = spec.startswith("~/")
        rel = (spec[2:] if user else spec.removeprefix("./")).rstrip("/")
        in_bundle = any(
            f.scope == ("user" if user else "project") and (f.path == rel or f.path.startswith(rel + "/"))
            for f in bundle.files
        )
        in_repo = not user and any(os.path.lexists(r / rel) for r in repos)
        if not in_bundle and not in_repo:
            raise AgentDriftError(
                f"--agent-without {spec}: not in bundle {bundle.label} and not in the repo/ of any "
                "selected task; nothing would be removed"
            )


def overlay_for(bundle: Any) -> Any:
    from pytest_agentdrift.manifest import bundles
    from pytest_agentdrift.run.overlay import Overlay

    return Overlay(
        name=bundle.name,
        digest=bundle.digest,
        project_root=str(bundle.root / "files" / "project"),
        project=tuple((f.path, f.executable) for f in bundle.scoped("project")),
        user_root=str(bundle.root / "files" / "user"),
        user=tuple((f.path, f.executable) for f in bundle.scoped("user")),
        remove=tuple(bundle.removes),
        secrets=tuple(bundles.secret_strings(bundle)),
    )


# --------------------------------------------------------------------------- the manifest


def staged_context(info: Any, runner: Any, ctx: Any) -> Any:
    """With a bundle: the manifest context of what the agent will see (staged home and task repos)."""
    st = state_of(info)
    if st.bundle is None:
        return ctx
    from pytest_agentdrift.agents.products import pathlike_env
    from pytest_agentdrift.run.overlay import apply_home, apply_project
    from pytest_agentdrift.run.runner import copy_tree

    stage = Path(runner.base) / "bundle-stage"
    shutil.rmtree(stage, ignore_errors=True)
    home = stage / "home"
    home.mkdir(parents=True)
    overlay = runner.overlay
    apply_home(overlay, home)
    repos = {}
    for tid, repo in sorted(ctx.task_repos.items()):
        target = stage / "repos" / tid
        target.parent.mkdir(parents=True, exist_ok=True)  # copy_tree makes only the last directory
        copy_tree(Path(repo), target)
        apply_project(overlay, target)
        repos[tid] = target
    # the agent gets none of the variables that move a product's home (they would point at the real one)
    env = {k: v for k, v in ctx.env.items() if k not in pathlike_env()}
    return dataclasses.replace(ctx, home=home, task_repos=repos, env=env)


def stamp_manifest(info: Any, cap: Any) -> None:
    """Fold the bundle's digests into the identity's instruction and config hashes (runtime_id follows)."""
    from pytest_agentdrift.canonical import digest

    st = state_of(info)
    if st.bundle is None or "identity" not in cap.manifest:
        return
    ident = cap.manifest["identity"]
    parts = st.bundle.doc["digests"]
    discovered_i, discovered_c = ident.get("instruction_hash"), ident.get("config_hash")
    if discovered_i not in (UNOBSERVED, None):
        ident["instruction_hash"] = digest({"discovered": discovered_i, "agent_bundle": parts["instructions"]})
    if discovered_c not in (UNOBSERVED, None):
        ident["config_hash"] = digest({"discovered": discovered_c, "agent_bundle": parts["config"]})
    info = {
        "name": st.bundle.name,
        "digest": st.bundle.digest,
        "derived_from": st.bundle.identity.get("derived_from"),
        "digests": parts,
        "discovered_instruction_hash": discovered_i,
        "discovered_config_hash": discovered_c,
        "rule": "instruction_hash = digest({discovered, agent_bundle: digests.instructions}); "
        "config_hash = digest({discovered, agent_bundle: digests.config})",
    }
    cap.manifest.setdefault("evidence", {})["agent_bundle"] = info
    cap.manifest.setdefault("provenance", {})["agent_bundle"] = {"name": st.bundle.name, "digest": st.bundle.digest}
    cap.manifest["runtime_id"] = digest(ident)


# --------------------------------------------------------------------------- results and comparison


class ExperimentPlugin:
    """Registered by prepare_session in the controller; uses only the public hooks."""

    def __init__(self, info: Any, comparison: Any):
        self.info = info
        self.comparison = comparison  # ComparisonState: its files go into the record

    def pytest_agentdrift_modify_report(self, config: Any, results: dict[str, Any]) -> None:
        st = state_of(self.info)
        settings = results.setdefault("settings", {})
        if st.bundle is not None:
            info = st.bundle.describe()
            info["overlay"] = {
                "project_files": len(st.bundle.scoped("project")),
                "user_files": len(st.bundle.scoped("user")),
                "removed": list(st.bundle.removes),
                "note": "overlaid before each run's starting snapshot: never counted as changes",
            }
            settings["agent_bundle"] = info
        if st.plan is not None:
            settings["plan"] = plan_check(st.plan, results)
            if self.comparison is not None:
                self.comparison.files.setdefault(
                    "plan.json", st.plan
                )  # a comparison adds it again after it resets the files


def plan_check(plan: dict[str, Any], results: dict[str, Any]) -> dict[str, Any]:
    """Did this run follow its pre-registered plan (the recommended design)?"""
    rec = plan.get("recommended") or {}
    runs = [len(t["runs"]) for t in results.get("tasks", {}).values()]
    k = min(runs) if runs else 0
    tasks = len(runs)
    problems = []
    if rec.get("k") and k < rec["k"]:
        problems.append(f"k {k} < planned {rec['k']}")
    if rec.get("tasks") and tasks < rec["tasks"]:
        problems.append(f"{tasks} task(s) < planned {rec['tasks']}")
    same_tasks = plan["source"].get("task_set_id") in (None, results.get("task_set_id"))
    if not same_tasks:
        problems.append("the plan was made from another task set")
    return {
        "digest": plan["digest"],
        "created_at": plan.get("created_at"),
        "delta": plan["question"]["delta"],
        "alpha": plan["question"]["alpha"],
        "power": plan["question"]["power"],
        "planned": rec,
        "ran": {"tasks": tasks, "k": k},
        "followed": not problems,
        "problems": problems,
        "pre_registered": bool(plan.get("created_at")) and plan["created_at"] <= str(results.get("started_at", "")),
        "file": "plan.json",
    }


def after_comparison(
    info: Any,
    state: Any,
    results: dict[str, Any],
    baseline: dict[str, Any],
    compared: Any,
) -> None:
    """The experiment rows and verdicts for a session compared with a baseline.

    ``state`` is the session's ComparisonState (its lines, record files and verdict),
    ``compared`` what compare.experiment.compare_with_rows returned. Under ``--agent-gate
    drop-it`` the drop-it gate sets ``state.verdict``; ``--agent-null`` sets it when it
    suspects drift (1) or the two runs were no null experiment (6); a refusal (6) is never
    overridden."""
    from pytest_agentdrift.compare.outcome import Verdict

    st = state_of(info)
    settings = info.settings
    base_dir = Path(settings.baseline)
    section = compared.section
    lines = list(compared.lines)
    files = state.files
    files["comparison/experiment.json"] = section
    if st.plan is not None:
        files["plan.json"] = st.plan
    verdict = compared.verdict
    if settings.null:
        from pytest_agentdrift.compare.null import null_exit_code, null_experiment, render_null

        result = null_experiment(
            [baseline, results],
            [state.baseline_manifest, info.manifest],
            labels=[str(base_dir), "this session"],
            alpha=0.05,
            seed=settings.seed,
            accept_unobserved=settings.accept_unobserved,
        )
        files["comparison/null.json"] = result
        if isinstance(files.get(DECISION_FILE), dict):
            files[DECISION_FILE]["null_experiment"] = {
                "status": result["status"],
                "because": result["because"],
            }
        lines += render_null(result)
        null_code = null_exit_code(result)
        if (verdict is None or verdict.code != EXIT_REFUSED) and null_code != EXIT_OK:
            # drift suspected (1), or not a null experiment (6)
            because = (
                result["because"][0]
                if isinstance(result.get("because"), list) and result["because"]
                else result.get("because", "")
            )
            verdict = Verdict(null_code, f"null experiment: {result['status']}" + (f": {because}" if because else ""))
    state.verdict = verdict
    state.lines.extend(lines)


__all__ = ["EXIT_FAILED", "ExperimentPlugin", "after_comparison", "prepare_session", "stamp_manifest", "staged_context"]
