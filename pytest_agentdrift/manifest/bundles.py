"""Instruction bundles: a team's agent setup, snapshotted read-only and stored by content.

A bundle is what a product reads by its own discovery rules (the project's
CLAUDE.md / AGENTS.md / settings / MCP config / skills / commands / hooks,
and the same under the user's home), plus the model and options, copied
into a bundles directory:

    <bundles>/objects/<sha256 hex>/bundle.json          what the digest covers, and provenance
    <bundles>/objects/<sha256 hex>/files/project/<path>  project-scope files (overlaid into each work tree)
    <bundles>/objects/<sha256 hex>/files/user/<path>     user-scope files, home-relative (into the private home)
    <bundles>/names/<NAME>.json                          a name bound to one digest, once

The digest is the canonical digest of ``bundle.json["identity"]`` (agent,
model, options, and every file's scope, path, size and sha256): the same
files and options give the same digest on any machine. A bundle is
immutable: a name is bound once (binding it to other content is refused),
and every load re-hashes the files against the recorded digest, so an
object edited after it was stored is refused, not used.

Two sub-digests split the files the way the runtime identity does:
``digests.instructions`` (instruction text: memory files, rules, skills,
subagents, commands; by normalised text hash) and ``digests.config``
(settings, MCP, hooks; by raw hash). A session run with the bundle folds
them into the manifest's ``instruction_hash`` and ``config_hash``, so two
bundles that differ in one CLAUDE.md line differ in ``instruction_hash``
alone.

Snapshot only reads. Credential files (the adapter's ``credential_files``,
and names that look like keys or tokens) and symlinks are never copied;
nested instruction files (``src/CLAUDE.md``) are left out because frozen
task repositories do not share the project's layout. Every file left out
is listed in ``provenance.skipped`` with its reason.

The jobs live in their own modules, re-exported here for the callers:
``bundlemodel`` (the bundle and its file entries as data, the digests),
``bundlestore`` (the bundles directory: locating it, writing, binding
names, loading and verifying, listing and showing), ``bundlesnapshot``
(what a product reads, copied into a new bundle), ``bundlederive``
(``--agent-without`` / ``--agent-with``) and ``bundlesecrets`` (the
configuration values scrubbed from every artifact).

No pytest here; GitPython is not needed.
"""

from __future__ import annotations

from pytest_agentdrift.manifest.bundlederive import derive, derived_name
from pytest_agentdrift.manifest.bundlemodel import (
    BUNDLE_FILE,
    BUNDLE_VERSION,
    CATEGORIES,
    SCOPES,
    Bundle,
    BundleFile,
    sub_digests,
)
from pytest_agentdrift.manifest.bundlesecrets import secret_strings
from pytest_agentdrift.manifest.bundlesnapshot import MAX_BUNDLE_BYTES, MAX_FILE_BYTES, snapshot
from pytest_agentdrift.manifest.bundlestore import (
    DEFAULT_STORE,
    NAME,
    STORE_ENV,
    BundleRow,
    list_bundles,
    load,
    names_for,
    resolve_store,
    show_lines,
)

__all__ = [
    "BUNDLE_FILE",
    "BUNDLE_VERSION",
    "CATEGORIES",
    "DEFAULT_STORE",
    "MAX_BUNDLE_BYTES",
    "MAX_FILE_BYTES",
    "NAME",
    "SCOPES",
    "STORE_ENV",
    "Bundle",
    "BundleFile",
    "BundleRow",
    "derive",
    "derived_name",
    "list_bundles",
    "load",
    "names_for",
    "resolve_store",
    "secret_strings",
    "show_lines",
    "snapshot",
    "sub_digests",
]
