"""Derive: a stored bundle minus some paths plus others (``--agent-without`` / ``--agent-with``), stored and named.

No pytest here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from pytest_agentdrift.canonical import digest, sha256_hex
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.manifest.bundlemodel import Bundle, BundleFile, identity_doc, safe_rel
from pytest_agentdrift.manifest.bundlesnapshot import bundle_file, read_file, tree_files, tree_kind
from pytest_agentdrift.manifest.bundlestore import bind_name, read_name, store_object
from pytest_agentdrift.vocabulary import utc_timestamp

_DERIVED_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


def derive(
    store: Path, base: Bundle, *, without: Sequence[str] = (), with_: Sequence[str] = (), cwd: Path, home: Path
) -> Bundle:
    """B = base minus the ``without`` paths plus the ``with`` items, stored and named (findable again).

    A ``without`` path is project-relative (``CLAUDE.md``, ``.claude/skills/pdf``)
    or home-relative (``~/.claude/CLAUDE.md``); a directory removes everything
    below it. A ``with`` item is a project-relative path taken from ``cwd``,
    a home-relative ``~/`` path taken from ``home``, or ``plugin:DIR``: the
    skills, subagents and commands of a plugin directory, placed where the
    product reads project components (agents/<product>/discovery.py
    PLUGIN_LAYOUT). Removing a path that is neither in the bundle nor meant
    for the task repositories is the caller's check (it knows the tasks).
    """
    from pytest_agentdrift.agents import products

    files = {(f.scope, f.path): f for f in base.files}
    payload = {(f.scope, f.path): base.source(f).read_bytes() for f in base.files}
    removed = _remove(files, payload, without)
    layout = getattr(products.rules_module(base.identity["surface_rules"]), "PLUGIN_LAYOUT", {})
    added = [_add(files, payload, spec, cwd, home, layout) for spec in with_]
    base_keys = {(f.scope, f.path) for f in base.files}
    added_files = sorted(f"{k[0]}:{k[1]}" for k in files if k not in base_keys or files[k].sha256 != _sha(base, k))
    derivation = {
        "without": list(without),
        "with": list(with_),
        "removed_files": removed,
        "added": added,
        "added_files": added_files,
    }
    identity = identity_doc(
        base.agent,
        base.identity["surface_rules"],
        base.model,
        base.options,
        list(files.values()),
        derived_from=base.digest,
        derivation=derivation,
    )
    provenance = {
        "created_at": utc_timestamp(),
        "source": {"derived_from": base.digest, "base_name": base.name},
        "skipped": [],
    }
    name = _free_name(store, derived_name(base, without, with_), digest(identity))
    stored, _ = store_object(store, identity, provenance, payload)
    bind_name(store, name, stored)
    return Bundle(stored.root, stored.doc, name)


_Files = dict[tuple[str, str], BundleFile]
_Payload = dict[tuple[str, str], bytes]


def _remove(files: _Files, payload: _Payload, without: Sequence[str]) -> list[str]:
    """Drop each ``--agent-without`` path (a directory: everything below it); the files removed."""
    removed: list[str] = []
    for spec in without:
        scope, rel = _split_spec(spec, "--agent-without")
        hits = [k for k in files if k[0] == scope and (k[1] == rel or k[1].startswith(rel.rstrip("/") + "/"))]
        for k in hits:
            del files[k]
            payload.pop(k, None)
        removed.extend(f"{k[0]}:{k[1]}" for k in hits)
    return removed


def _add(
    files: _Files, payload: _Payload, spec: str, cwd: Path, home: Path, layout: Mapping[str, str]
) -> dict[str, object]:
    """Add one ``--agent-with`` item's files (replacing ones at the same path); what it added."""
    items, not_installed = _with_items(spec, cwd, home, layout)
    for scope, rel, source in items:
        data, executable, why = read_file(source)
        if data is None:
            raise AgentDriftError(f"--agent-with {spec}: {why}", source)
        is_config = "hooks" in PurePosixPath(rel).parts or rel.endswith((".json", ".toml"))
        kind = "settings" if is_config else tree_kind(rel)
        files[(scope, rel)] = bundle_file(scope, rel, data, executable, "config" if is_config else "instructions", kind)
        payload[(scope, rel)] = data
    return {"item": spec, "files": len(items), "not_installed": not_installed}


def _free_name(store: Path, name: str, digest_: str) -> str:
    """The derived name, unless it already names other content: the same recipe gave other content
    (an added file changed since), so both are kept, told apart by digest."""
    taken = store / "names" / f"{name}.json"
    if taken.is_file() and read_name(taken) != digest_:
        return f"{name[:90]}-{digest_.split(':', 1)[1][:8]}"
    return name


def _sha(bundle: Bundle, key: tuple[str, str]) -> str | None:
    return next((f.sha256 for f in bundle.files if (f.scope, f.path) == key), None)


def derived_name(base: Bundle, without: Sequence[str], with_: Sequence[str]) -> str:
    parts = [base.label] + [f"without-{w}" for w in without] + [f"with-{w}" for w in with_]
    name = _DERIVED_SLUG.sub("_", "--".join(parts)).strip("._-")
    if len(name) > 100:
        name = name[:83] + "-" + sha256_hex(name.encode())[:16]
    return name


def _split_spec(spec: str, option: str) -> tuple[str, str]:
    if spec.startswith("~/"):
        scope, rel = "user", spec[2:]
    else:
        scope, rel = "project", spec[2:] if spec.startswith("./") else spec
    rel = rel.rstrip("/")
    if not safe_rel(rel):
        raise AgentDriftError(
            f"{option} {spec!r}: give a path relative to the project (or ~/ for the home directory), without '..'"
        )
    return scope, rel


def _with_items(
    spec: str, cwd: Path, home: Path, layout: Mapping[str, str]
) -> tuple[list[tuple[str, str, Path]], list[str]]:
    """(scope, bundle path, source) for one ``--agent-with`` item, and the plugin parts not installed."""
    if spec.startswith("plugin:"):
        raw = spec[len("plugin:") :]
        plugin = Path(os.path.expanduser(raw))
        plugin = plugin if plugin.is_absolute() else cwd / plugin
        if not plugin.is_dir():
            raise AgentDriftError(
                f"--agent-with {spec}: not a directory (installed plugins are not looked up by "
                "name; give the plugin's directory)",
                plugin,
            )
        items: list[tuple[str, str, Path]] = []
        skipped: list[dict[str, str]] = []
        for part, dest in sorted(layout.items()):
            for full in tree_files(plugin / part, skipped, f"plugin:{part}"):
                items.append(("project", f"{dest}/{full.relative_to(plugin / part).as_posix()}", full))
        not_installed = sorted(p.name for p in plugin.iterdir() if p.name not in layout)
        if not items:
            raise AgentDriftError(f"--agent-with {spec}: the plugin has none of {', '.join(sorted(layout))}", plugin)
        return items, not_installed
    scope, rel = _split_spec(spec, "--agent-with")
    source = (home if scope == "user" else cwd) / rel
    if source.is_dir() and not source.is_symlink():
        skipped = []
        return [
            (scope, f"{rel}/{full.relative_to(source).as_posix()}", full) for full in tree_files(source, skipped, spec)
        ], []
    if not source.is_file():
        raise AgentDriftError(f"--agent-with {spec}: no such file or directory", source)
    return [(scope, rel, source)], []


__all__ = ["derive", "derived_name"]
