"""A bundle in use by a session (`--agent-bundle`, `--agent-without`, `--agent-with`). No pytest.

What the session needs of an instruction bundle (manifest/bundles.py) once it has loaded one: the
overlay the runner puts in front of the agent (`overlay_for`), the check that an ablation removes
something real (`check_without`), the manifest context of what the agent will see (`staged_context`),
the bundle's digests folded into the identity (`stamp_manifest`) and the bundle's entry in
results.json's settings (`settings_entry`).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.vocabulary import UNOBSERVED

if TYPE_CHECKING:
    from pytest_agentdrift.manifest.bundles import Bundle
    from pytest_agentdrift.manifest.capture import ManifestContext
    from pytest_agentdrift.run.overlay import Overlay
    from pytest_agentdrift.shapes import BundleEntry


def overlay_for(bundle: Bundle) -> Overlay:
    """The run/overlay.Overlay of a bundle: its project and user files, what it removes, its secrets."""
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


def check_without(bundle: Bundle, without: tuple[str, ...], repos: list[Path]) -> None:
    """A path to remove must be in the bundle or in a selected task's repo/: a typo is not an experiment."""
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


def staged_context(overlay: Overlay, stage: Path, ctx: ManifestContext) -> ManifestContext:
    """The manifest context (manifest/capture.ManifestContext) of what the agent will see: a staged
    private home holding the bundle's user files, and copies of the task repositories with the
    bundle overlaid, under `stage` (emptied first)."""
    from pytest_agentdrift.agents.products import pathlike_env
    from pytest_agentdrift.run.overlay import apply_home, apply_project
    from pytest_agentdrift.run.runner import copy_tree

    shutil.rmtree(stage, ignore_errors=True)
    home = stage / "home"
    home.mkdir(parents=True)
    apply_home(overlay, home)
    repos: dict[str, Path] = {}
    for tid, repo in sorted(ctx.task_repos.items()):
        target = stage / "repos" / tid
        target.parent.mkdir(parents=True, exist_ok=True)  # copy_tree makes only the last directory
        copy_tree(Path(repo), target)
        apply_project(overlay, target)
        repos[tid] = target
    # the agent gets none of the variables that move a product's home (they would point at the real one)
    env = {k: v for k, v in ctx.env.items() if k not in pathlike_env()}
    return dataclasses.replace(ctx, home=home, task_repos=repos, env=env)


def stamp_manifest(bundle: Bundle, manifest: dict[str, object]) -> None:
    """Fold the bundle's digests into the identity's instruction and config hashes (runtime_id follows),
    so two bundles differing in one CLAUDE.md line differ in instruction_hash alone."""
    from pytest_agentdrift.canonical import digest

    if "identity" not in manifest:
        return
    ident = _part(manifest, "identity")
    parts = bundle.doc["digests"]
    discovered_i, discovered_c = ident.get("instruction_hash"), ident.get("config_hash")
    if discovered_i not in (UNOBSERVED, None):
        ident["instruction_hash"] = digest({"discovered": discovered_i, "agent_bundle": parts["instructions"]})
    if discovered_c not in (UNOBSERVED, None):
        ident["config_hash"] = digest({"discovered": discovered_c, "agent_bundle": parts["config"]})
    _part(manifest, "evidence")["agent_bundle"] = {
        "name": bundle.name,
        "digest": bundle.digest,
        "derived_from": bundle.identity.get("derived_from"),
        "digests": parts,
        "discovered_instruction_hash": discovered_i,
        "discovered_config_hash": discovered_c,
        "rule": "instruction_hash = digest({discovered, agent_bundle: digests.instructions}); "
        "config_hash = digest({discovered, agent_bundle: digests.config})",
    }
    _part(manifest, "provenance")["agent_bundle"] = {"name": bundle.name, "digest": bundle.digest}
    manifest["runtime_id"] = digest(ident)


def _part(manifest: dict[str, object], name: str) -> dict[str, object]:
    """One object of the manifest (identity, evidence, provenance), made when absent."""
    part = manifest.setdefault(name, {})
    if not isinstance(part, dict):
        raise AgentDriftError(f"the manifest's {name!r} is not an object")
    return part


def settings_entry(bundle: Bundle) -> BundleEntry:
    """results.json's settings.agent_bundle: the bundle, and what its overlay put in front of the agent."""
    entry = bundle.describe()
    entry["overlay"] = {
        "project_files": len(bundle.scoped("project")),
        "user_files": len(bundle.scoped("user")),
        "removed": list(bundle.removes),
        "note": "overlaid before each run's starting snapshot: never counted as changes",
    }
    return entry


__all__ = ["check_without", "overlay_for", "settings_entry", "stamp_manifest", "staged_context"]
