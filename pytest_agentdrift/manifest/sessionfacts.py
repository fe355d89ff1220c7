"""What a session's runtime manifest is captured from, and the facts it gets from the session rather
than from capture. No pytest.

`session_context` is the manifest/capture.ManifestContext of a session (its agent, tasks, options,
isolation); `sandbox_evidence` what the sandbox shows the agent beyond the system; `session_isolation`
the isolation the manifest records, with the network policy; `apply_operator_facts` what the operator
declared and what the agent reports about itself.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agentdrift.vocabulary import enforces_network

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pytest_agentdrift.agents.base import AgentAdapter
    from pytest_agentdrift.manifest.capture import ManifestContext
    from pytest_agentdrift.run.sandbox import Isolation
    from pytest_agentdrift.shapes import Results
    from pytest_agentdrift.tasks.taskspec import TaskSpec

# `settings` below is options.Settings, the session's resolved options: `options` imports the stages
# (its parsers), so a stage names it Any rather than import it back


def session_context(
    *,
    adapter: AgentAdapter | None,
    settings: Any,
    task_dirs: dict[str, Path],
    specs: list[TaskSpec],
    isolation: Mapping[str, object],
    probe_home: Path | None,
    cli_probe: Mapping[str, object] | None,
    project_root: Path,
    identity_options: Mapping[str, object],
    run_id: str,
    pytest_argv: list[str],
) -> ManifestContext:
    """The capture context of a session: `identity_options` are the long-run options that enter
    the identity (retry policy, per-run budget), `isolation` session_isolation's, `cli_probe` the
    session's own run of the agent's version display (so capture does not run it again)."""
    from pytest_agentdrift import __version__
    from pytest_agentdrift.manifest.capture import ManifestContext
    from pytest_agentdrift.record.results import evaluator_id, task_set_id

    st = settings
    # what the run will really use: a preset's documented defaults included
    effective = getattr(adapter, "effective_options", None)
    options: dict[str, object] = effective(st.agent_options) if effective is not None else dict(st.agent_options)
    return ManifestContext(
        adapter=adapter.describe() if adapter else {"name": "none", "product": "none", "surface": "none"},
        agent_argv=adapter.argv_template(st.agent_options) if adapter else [],
        version_argv=adapter.version_argv() if adapter else None,
        bundled_runtimes=adapter.bundled_runtimes(dict(os.environ)) if adapter else {},
        probe_home=probe_home if adapter else None,
        cli_probe=cli_probe if adapter else None,
        home=Path.home(),
        project_root=project_root,
        cwd=Path.cwd(),
        options={**options, **identity_options},
        task_repos={t: d / "repo" for t, d in task_dirs.items()},
        task_dirs=task_dirs,
        extra_config=[Path(p) for p in st.config_files],
        extra_instructions=[Path(p) for p in st.instruction_files],
        env=dict(os.environ),
        env_allowlist=sorted(set(st.env) | set(getattr(adapter, "env_allowlist", ()))),
        task_set_id=task_set_id(specs) if specs else None,
        evaluator_id=evaluator_id(specs) if specs else None,
        isolation=isolation,
        harness_version=__version__,
        pytest_argv=pytest_argv,
        run_id=run_id,
        env_image_digest=st.image_digest or os.environ.get("AGENTDRIFT_IMAGE_DIGEST") or None,
    )


def finalized(manifest: dict[str, object] | None, results: Results) -> dict[str, object] | None:
    """The manifest after the runs: model_stamp, and what the product reported about itself, filled
    in from them (manifest/capture.finalize_manifest); results.json takes its runtime id."""
    from pytest_agentdrift.manifest.capture import finalize_manifest
    from pytest_agentdrift.tasks.shard import item_key

    if manifest is None or "identity" not in manifest:
        return manifest
    runs = [(item_key(tid, r["rep"]), r) for tid, t in results["tasks"].items() for r in t["runs"]]
    stamps = {key: r.get("model_stamp") for key, r in runs}
    reported = {key: (r.get("evidence") or {}).get("product_reported") or {} for key, r in runs}
    manifest = finalize_manifest(manifest, stamps, reported=reported)
    runtime_id = manifest["runtime_id"]
    results["runtime_id"] = runtime_id if isinstance(runtime_id, str) else None
    return manifest


def sandbox_evidence(manifest: dict[str, object], mode: str, mounts: list[tuple[str, str]]) -> None:
    """What the sandbox shows the agent beyond the system and the harness runtime (an adapter's
    install prefix, files the command names), and the toolchain: evidence, not identity (paths
    differ by host)."""
    from pytest_agentdrift.run import mountplan, toolchain

    evidence = manifest.setdefault("evidence", {})
    if not isinstance(evidence, dict):
        raise TypeError("a manifest's evidence is an object")
    evidence["sandbox_additions"] = {
        "isolation": mode,
        "paths": mountplan.describe_additions(mounts),
        "not_hidden": mountplan.not_hidden(mode),
    }
    evidence["toolchain"] = toolchain.describe()


def apply_operator_facts(manifest: dict[str, object], settings: Any, rootpath: Path) -> None:
    """--agent-declare first (the operator vouches), then --agent-describe-cmd (the agent reports)."""
    from pytest_agentdrift.manifest.declare import apply_facts, load_declarations, run_describe

    if "identity" not in manifest:
        return
    if settings.declare is not None:
        path = settings.declare if settings.declare.is_absolute() else rootpath / settings.declare
        apply_facts(manifest, load_declarations(path), "declared", str(settings.declare))
    if settings.describe_cmd:
        from pytest_agentdrift.run.agentview import hidden_paths

        hidden = hidden_paths(settings, (), rootpath)  # the records and the project; task dirs are not known yet
        facts = run_describe(settings.describe_cmd, rootpath, settings, hidden)
        apply_facts(manifest, facts, "agent_reported", settings.describe_cmd)


def session_isolation(settings: Any, isolation: Isolation, adapter: AgentAdapter | None) -> dict[str, object]:
    """The enforced isolation, with the network policy a real agent runs under."""
    from pytest_agentdrift.run.runner import network_allowlist

    iso: dict[str, object] = {**isolation.to_dict(settings.isolation)}
    allow = network_allowlist(adapter, settings.allow_hosts) if adapter is not None else []
    if adapter is not None:
        # the endpoint the product's environment names is identity of its own (model_endpoint):
        # here it is only "the model endpoint", so a gateway change is not an isolation change
        own = set(adapter.endpoint_hosts(dict(os.environ))) - set(adapter.api_hosts) - set(settings.allow_hosts)
        allow = list(dict.fromkeys("model_endpoint" if h in own else h for h in allow))
    if allow:
        iso["network_allowlist"] = sorted(allow)
        iso["network_policy_enforced"] = enforces_network(str(iso["enforced"]))
    # what the operator declared the product's own (an --agent-cmd agent): what is excused is identity
    from pytest_agentdrift.agents.base import CommandAdapter

    declared = adapter.declared_product() if isinstance(adapter, CommandAdapter) else {}
    iso.update({k: sorted(v) for k, v in declared.items()})
    return iso


__all__ = ["apply_operator_facts", "finalized", "sandbox_evidence", "session_context", "session_isolation"]
