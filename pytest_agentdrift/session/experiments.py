"""Session glue for bundles, ablations, the null experiment and pre-registered plans.

The pure parts live in manifest/bundleuse.py and compare/experimentrun.py. `prepare_session` runs
at session start in the controller and every worker, after the agent is resolved: the bundle
(verified; B derived for ``--agent-without`` / ``--agent-with``), the options, the runner's overlay
and, in the controller, the plan and `ExperimentPlugin` (the public ``pytest_agentdrift_modify_report``
hook puts the bundle and the plan into results.json's settings). `staged_context` and
`stamp_manifest` wrap manifest capture, so that it describes what the agent will see;
`after_comparison` adds the experiment rows and verdicts to a comparison with a baseline.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.vocabulary import PLAN_FILE

if TYPE_CHECKING:
    import pytest

    from pytest_agentdrift.agents.base import AgentAdapter
    from pytest_agentdrift.manifest.bundles import Bundle
    from pytest_agentdrift.options import Settings


@dataclasses.dataclass
class ExperimentState:
    """On the SessionInfo (`info.experiment`): the bundle the runs use and the plan, one per process."""

    bundle: Bundle | None = None  # derived when --agent-without / --agent-with
    plan: dict[str, Any] | None = None


def bundles_dir(config: pytest.Config) -> Path:
    """The plugin's bundles directory: --agent-bundles, the agent_bundles ini value, AGENTDRIFT_BUNDLES, default."""
    from pytest_agentdrift.inifile import project_root
    from pytest_agentdrift.manifest.bundles import resolve_store

    return resolve_store(
        config.getoption("agentdrift_bundles"),
        config.getini("agent_bundles") or None,
        os.environ,
        project_root(config),
    )


def prepare_session(config: pytest.Config, info: Any, runner: Any, comparison: Any = None) -> None:
    """See the module doc. Raises AgentDriftError (a usage error) on bad options or a bad bundle."""
    from pytest_agentdrift.options import check_experiment_options

    settings = info.settings
    controller = not hasattr(config, "workerinput")
    check_experiment_options(settings, controller)
    st = info.experiment
    if controller and settings.plan is not None:
        from pytest_agentdrift.canonical import load_json_file
        from pytest_agentdrift.compare.planning import verify_plan

        st.plan = verify_plan(load_json_file(settings.plan), settings.plan)
    if settings.bundle:
        st.bundle = _load_bundle(config, settings, settings.bundle, runner.adapter)
        # the bundle's model and options stand in for the ones the session did not set
        bundle = st.bundle
        opts = {**({"model": bundle.model} if bundle.model else {}), **bundle.options, **settings.agent_options}
        info.settings = dataclasses.replace(settings, agent_options=opts)  # the runner reads info.settings
        from pytest_agentdrift.manifest.bundleuse import overlay_for

        runner.overlay = overlay_for(bundle)
    if (
        controller
        and (st.bundle is not None or st.plan is not None)
        and not config.pluginmanager.has_plugin("agentdrift-experiments")
    ):
        config.pluginmanager.register(ExperimentPlugin(info, comparison), "agentdrift-experiments")


def _load_bundle(config: pytest.Config, settings: Settings, name: str, adapter: AgentAdapter | None) -> Bundle:
    """The bundle the runs use: --agent-bundle `name`, verified, for this agent; derived when
    --agent-without / --agent-with ask for B."""
    from pytest_agentdrift.manifest import bundles
    from pytest_agentdrift.manifest.bundleuse import check_without
    from pytest_agentdrift.tasks.taskdirs import session_task_dirs

    store = bundles_dir(config)
    bundle = bundles.load(store, name)
    if adapter is None or adapter.name != bundle.agent:
        raise AgentDriftError(
            f"--agent-bundle {name}: the bundle is a {bundle.agent} setup, but the "
            f"session runs {adapter.name if adapter else 'no agent'}"
        )
    if not (settings.without or settings.with_items):
        return bundle
    if settings.without:
        check_without(bundle, settings.without, [d / "repo" for d in session_task_dirs(list(config.args)).values()])
    return bundles.derive(
        store, bundle, without=settings.without, with_=settings.with_items, cwd=Path.cwd(), home=Path.home()
    )


def staged_context(info: Any, runner: Any, ctx: Any) -> Any:
    """With a bundle: the manifest context of what the agent will see (staged home and task repos)."""
    if info.experiment.bundle is None:
        return ctx
    from pytest_agentdrift.manifest.bundleuse import staged_context

    return staged_context(runner.overlay, Path(runner.base) / "bundle-stage", ctx)


def stamp_manifest(info: Any, cap: Any) -> None:
    """Fold the bundle's digests into the identity's instruction and config hashes (runtime_id follows)."""
    if info.experiment.bundle is not None:
        from pytest_agentdrift.manifest.bundleuse import stamp_manifest

        stamp_manifest(info.experiment.bundle, cap.manifest)


class ExperimentPlugin:
    """Registered by prepare_session in the controller; uses only the public hooks."""

    def __init__(self, info: Any, comparison: Any):
        self.info = info
        self.comparison = comparison  # ComparisonState: its files go into the record

    def pytest_agentdrift_modify_report(self, config: Any, results: dict[str, Any]) -> None:
        st = self.info.experiment
        settings = results.setdefault("settings", {})
        if st.bundle is not None:
            from pytest_agentdrift.manifest.bundleuse import settings_entry

            settings["agent_bundle"] = settings_entry(st.bundle)
        if st.plan is not None:
            from pytest_agentdrift.compare.experimentrun import plan_check

            settings["plan"] = plan_check(st.plan, results)
            if self.comparison is not None:
                # a comparison adds it again after it resets the files
                self.comparison.files.setdefault(PLAN_FILE, st.plan)


def after_comparison(
    info: Any, state: Any, results: Mapping[str, Any], baseline: dict[str, Any], compared: Any
) -> None:
    """The experiment file, plan and null experiment (compare/experimentrun.py) into ``state``, the
    session's ComparisonState: its lines, record files and verdict. ``compared`` is what
    compare.experiment.compare_with_rows returned."""
    from pytest_agentdrift.compare.experimentrun import experiment_outcome

    lines, state.verdict = experiment_outcome(
        info.settings,
        (baseline, results),
        (state.baseline_manifest, info.manifest),
        compared,
        state.files,
        plan=info.experiment.plan,
    )
    state.lines.extend(lines)


__all__ = [
    "ExperimentPlugin",
    "ExperimentState",
    "after_comparison",
    "prepare_session",
    "stamp_manifest",
    "staged_context",
]
