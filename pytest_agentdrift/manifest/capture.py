"""Capture the runtime manifest of a session: pure, read-only, no pytest.

`capture(ctx)` returns three documents:

* the runtime manifest: ``identity`` (compared between runs; its canonical
  digest is ``runtime_id``), ``provenance`` (recorded and noted, never
  blocking), ``evidence`` (raw file hashes, probe output, configuration
  sources: what the identity values were derived from) and ``reasons``
  (why a field is ``unobserved`` or ``not_applicable``);
* the instruction bundle (instruction-bundle.json), whose digest without
  the raw-bytes hashes is ``identity.instruction_hash`` (normalised text,
  the protocol);
* the source manifest (source-manifest.json): relative path, size and sha256
  of every file of every selected task directory; its digest is
  ``identity.source_id``.

Every identity value is concrete, ``"unobserved"`` or ``"not_applicable"``;
an unknown is never replaced by a default. Identity holds no timestamps, no
absolute private paths and no secret: paths are labelled relative to named
roots (``~/``, ``project:``, ``task:T05:``), environment values are recorded
only for allowlisted non-secret names, and configuration content only for
allowlisted keys (see manifest/discovery.py and agents/<product>/discovery.py).

Capture is read-only: it opens files for reading, runs only documented
version displays (10 s timeout, stdin closed), runs git with
``GIT_OPTIONAL_LOCKS=0`` so not even the index is refreshed, and never
creates a commit.
"""

from __future__ import annotations

import copy
import json
import os
import platform as _platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_agentdrift.agents import discovery_base, products
from pytest_agentdrift.canonical import digest, hash_file, sha256_hex
from pytest_agentdrift.errors import AgentDriftError, RecordError
from pytest_agentdrift.manifest import discovery
from pytest_agentdrift.record.redact import SECRET_NAME as _SECRET_NAME  # one notion of a secret-looking name
from pytest_agentdrift.vocabulary import (
    ENVELOPE_FIELDS,
    IDENTITY_FIELDS,
    NOT_APPLICABLE,
    POST_RUN_FIELDS,
    PROTOCOL_FIELDS,
    SCHEMA_VERSION,
    UNOBSERVED,
    utc_timestamp,
)

#: envelope options taken verbatim from the options the user set
ENVELOPE_OPTIONS = (*ENVELOPE_FIELDS, *PROTOCOL_FIELDS)

#: Environment variables whose VALUES may be recorded (when they are also on
#: the session's allowlist, or always for the ones in ALWAYS_RECORDED_ENV):
#: locale, timezone, terminal and CI switches select behaviour and carry no
#: credential. Everything else contributes its name only.
NON_SECRET_ENV_VALUES = (
    frozenset(
        {
            "LANG",
            "LANGUAGE",
            "LC_ALL",
            "LC_CTYPE",
            "LC_MESSAGES",
            "TZ",
            "TERM",
            "CI",
            "NO_COLOR",
            "FORCE_COLOR",
            "PYTHONHASHSEED",
            "PYTHONUTF8",
            "PYTHONDONTWRITEBYTECODE",
            "NODE_ENV",
            "DISABLE_AUTOUPDATER",
            "GIT_OPTIONAL_LOCKS",
            "SOURCE_DATE_EPOCH",
        }
    )
    | products.non_secret_env_values()
)  # each product lists its own behaviour switches
#: Names recorded with their value whenever set, allowlisted or not: they
#: change how the products and tools behave and are never secret.
ALWAYS_RECORDED_ENV = ("LANG", "LC_ALL", "TZ", "CI")
#: Even on the value list, a name that looks like a credential is names-only.

#: Names whose value is a private path or changes every session: names only.
_PATHLIKE_ENV = (
    frozenset(
        {
            "HOME",
            "PATH",
            "TMPDIR",
            "TEMP",
            "TMP",
            "PWD",
            "OLDPWD",
            "USER",
            "LOGNAME",
            "SHELL",
            "XDG_CONFIG_HOME",
            "XDG_CACHE_HOME",
        }
    )
    | products.pathlike_env()
)

#: names never counted in the source manifest: written by running tests
SOURCE_EXCLUDED_NAMES = frozenset({"__pycache__", ".pytest_cache"})

LOCKFILE_NAMES = {
    "uv.lock": "uv",
    "poetry.lock": "poetry",
    "Pipfile.lock": "pipenv",
    "pdm.lock": "pdm",
    "pylock.toml": "pylock",
    "package-lock.json": "npm",
    "npm-shrinkwrap.json": "npm-shrinkwrap",
    "yarn.lock": "yarn",
    "pnpm-lock.yaml": "pnpm",
    "bun.lock": "bun",
    "bun.lockb": "bun-binary",
    "Cargo.lock": "cargo",
    "go.sum": "go",
    "Gemfile.lock": "bundler",
    "composer.lock": "composer",
    "conda-lock.yml": "conda-lock",
    "packages.lock.json": "nuget",
    "mix.lock": "mix",
    "Package.resolved": "swiftpm",
}
_REQUIREMENTS = re.compile(r"^(requirements|constraints)([-_.\w]*)\.(txt|in)$")

#: generous: a version display that is merely slow (a loaded CI machine) must not turn a
#: runtime version into "unobserved" and refuse the comparison
VERSION_TIMEOUT_S = 10.0


# --------------------------------------------------------------------------- context


@dataclass(frozen=True)
class ManifestContext:
    """Everything capture may look at. Nothing else is read.

    ``home`` and ``env`` are what the agent's product would see (the real
    home and environment in a normal session, fixtures in tests); capture
    never falls back to ``Path.home()`` or ``os.environ``.
    """

    adapter: Mapping[str, Any]  # AgentAdapter.describe(): name, product, surface (+ command)
    agent_argv: Sequence[str]  # argv template of one run, placeholders unexpanded
    version_argv: Sequence[str] | None  # the documented read-only version display, or None
    home: Path
    project_root: Path
    cwd: Path | None = None  # defaults to project_root
    options: Mapping[str, Any] = field(default_factory=dict)  # model, model_options, permission_mode, sandbox,
    #   tools, temperature, seed, max_output_tokens, budget_tokens_per_task, tool_timeout_s, retry_policy
    task_repos: Mapping[str, Path] = field(default_factory=dict)  # task id -> repo/ (project-scope discovery)
    task_dirs: Mapping[str, Path] = field(default_factory=dict)  # task id -> task directory (source manifest)
    extra_config: Sequence[Path] = ()  # --agent-config PATH
    extra_instructions: Sequence[Path] = ()  # --agent-instructions PATH
    env: Mapping[str, str] = field(default_factory=dict)
    env_allowlist: Sequence[str] = ()  # names passed through to the agent
    task_set_id: str | None = None
    evaluator_id: str | None = None
    isolation: Mapping[str, Any] | None = None  # {"requested", "enforced", "network", ...}
    harness_version: str | None = None
    pytest_argv: Sequence[str] = ()
    run_id: str | None = None
    system_root: Path | None = Path("/")  # managed / system config; None = not read (unobserved)
    platform: str = sys.platform
    surface_rules: str | None = None  # override: claude-code / codex / copilot / generic
    env_image_digest: str | None = None
    scoring_files: Sequence[Path] | None = None  # files whose digest is scoring_script_digest
    version_timeout_s: float = VERSION_TIMEOUT_S
    #: runtimes the agent's CLI carries itself (AgentAdapter.bundled_runtimes): recorded instead of the host's
    bundled_runtimes: Mapping[str, str] = field(default_factory=dict)
    #: the scratch HOME and XDG dir of the agent CLI's version display (None: a temporary one per probe)
    probe_home: Path | None = None
    #: the agent CLI's version display as the session already ran it (probe_cli_version): reused, not
    #: run again (None: capture runs it)
    cli_probe: Mapping[str, Any] | None = None
    now: Callable[[], datetime] | None = None  # injectable clock (provenance only)
    runner: Callable[..., subprocess.CompletedProcess[bytes]] | None = None  # injectable subprocess.run


@dataclass
class Capture:
    manifest: dict[str, Any]
    instruction_bundle: dict[str, Any]
    source_manifest: dict[str, Any]


# --------------------------------------------------------------------------- public API


def capture(ctx: ManifestContext) -> Capture:
    """Capture the manifest, the instruction bundle and the source manifest."""
    cwd = Path(ctx.cwd) if ctx.cwd is not None else Path(ctx.project_root)
    adapter = dict(ctx.adapter)
    rules = ctx.surface_rules or products.surface_rules_for(adapter)
    roots = _capture_roots(ctx)
    fields = _Fields(ctx, adapter, has_model=not _is_reference(adapter), roots=roots)
    disc = _discover(ctx, cwd, rules, fields)
    bundle = discovery_base.instruction_bundle(disc)
    source_manifest, lockfiles = build_source_manifest(ctx.task_dirs or ctx.task_repos, ctx.project_root)
    git_info = _git_info(ctx.project_root, ctx.env)
    probes = _run_probes(ctx, cwd, roots, rules)
    cli = probes.pop("cli")
    fields.evidence["probes"] = probes | {"cli": cli}
    identity = {
        **fields.agent(rules),
        **fields.model(),
        **fields.client(cli),
        "external_tools": _external_tools(disc.config),
        "config_hash": fields.config_hash,
        "instruction_hash": discovery_base.instruction_hash(bundle),
        "source_id": fields.source_id(source_manifest, git_info),
        "lockfile_hash": fields.lockfile_hash(lockfiles),
        **fields.environment(cwd, probes["runtimes"]),
        **fields.protocol(),
    }
    fields.envelope(identity)
    fields.explain(identity, cli)
    evidence = fields.evidence
    evidence["lockfiles"] = lockfiles
    for key, name in (
        ("unobservable_fields", "unobservable"),
        ("unreportable_fields", "unreportable"),
        ("run_reported_fields", "run_reported"),
    ):
        evidence[key] = [f for f in adapter.get(name, []) if f in IDENTITY_FIELDS]
    evidence["instruction_bundle_entries"] = len(bundle["entries"])
    evidence["source_files"] = len(source_manifest["files"])
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "runtime_id": digest(identity),
        "identity": identity,
        "provenance": _provenance(ctx, roots, git_info, cli, bundle, disc.config),
        "evidence": evidence,
        "reasons": dict(sorted(fields.reasons.items())),
    }
    return Capture(manifest=manifest, instruction_bundle=bundle, source_manifest=source_manifest)


def _capture_roots(ctx: ManifestContext) -> discovery_base.Roots:
    """The named roots every path of the manifest is labelled by (the task repositories and directories too)."""
    return discovery_base.Roots.build(
        [
            ("~/", ctx.home),
            ("project:", ctx.project_root),
            ("system:/", ctx.system_root),
            *((f"task:{t}:", p) for t, p in sorted(ctx.task_repos.items())),
            *((f"taskdir:{t}:", p) for t, p in sorted(ctx.task_dirs.items())),
        ]
    )


def _discover(ctx: ManifestContext, cwd: Path, rules: str, fields: _Fields) -> discovery_base.Discovery:
    """Instructions and configuration; the configuration hash and its evidence go into ``fields``."""
    disc = discovery.discover(
        rules,
        ctx.home,
        ctx.project_root,
        cwd,
        ctx.env,
        task_repos=ctx.task_repos,
        system_root=ctx.system_root,
        platform=ctx.platform,
        config_paths=ctx.extra_config,
        instruction_paths=ctx.extra_instructions,
        profile=_argv_value(ctx.agent_argv, ("--profile", "-p")) if rules == "codex" else None,
    )
    reasons = fields.reasons
    if ctx.system_root is None and rules != "generic":
        reasons["managed_config"] = "system root not read (system_root=None): managed settings unobserved"
    fields.config_hash = discovery_base.config_hash(disc.config, effective_merge=UNOBSERVED)
    if fields.config_hash == UNOBSERVED:
        reasons["config_hash"] = "a configuration file could not be read: " + ", ".join(
            s["path"] for s in disc.config if s.get("status") == "unreadable"
        )
    fields.evidence["config"] = {
        "effective_merge": UNOBSERVED,
        "sources": disc.config,
        "canonical": discovery_base.canonical_config(disc.config, effective_merge=UNOBSERVED),
    }
    fields.evidence["facts"] = disc.facts
    fields.facts = _merged_facts(disc.facts)
    return disc


#: the fields a reference agent has no value for, because it runs no model and no product client
_NO_MODEL_FIELDS = (
    "model_id",
    "model_endpoint",
    "model_stamp",
    "server_revision",
    "model_options",
    "auto_update_state",
    *ENVELOPE_OPTIONS,
)


class _Fields:
    """The identity fields of one capture, group by group, with the reasons for what is unknown.

    The groups are built in the identity's field order, and the order matters: the first
    reason given for a field is the one kept.
    """

    def __init__(self, ctx: ManifestContext, adapter: dict[str, Any], *, has_model: bool, roots: Any):
        self.ctx = ctx
        self.adapter = adapter
        self.has_model = has_model
        self.roots = roots
        self.opts = dict(ctx.options)
        self.reasons: dict[str, str] = {}
        self.evidence: dict[str, Any] = {}
        self.facts: dict[str, Any] = {}
        self.config_hash: str = UNOBSERVED

    def _opt_or_fact(self, name: str) -> Any:
        if self.opts.get(name) is not None:
            return self.opts[name]
        found = self.facts.get(name)
        if found is not None:
            return found
        self.reasons.setdefault(name, "not set in the options and not configured in any discovered file")
        return UNOBSERVED

    def agent(self, rules: str) -> dict[str, Any]:
        adapter = self.adapter
        return {
            "surface": adapter.get("surface", UNOBSERVED),
            "product": adapter.get("product", UNOBSERVED),
            "agent": adapter.get("name", UNOBSERVED),
            "surface_rules": rules,
        }

    def model(self) -> dict[str, Any]:
        if not self.has_model:
            return dict.fromkeys(
                ("model_id", "model_endpoint", "model_stamp", "server_revision", "model_options"), NOT_APPLICABLE
            )
        opts, facts = self.opts, self.facts
        return {
            "model_id": self._opt_or_fact("model"),
            "model_endpoint": model_endpoint(self.adapter, self.ctx.env, facts, self.reasons, self.evidence),
            "model_stamp": UNOBSERVED,
            "server_revision": UNOBSERVED,
            "model_options": (
                opts["model_options"]
                if opts.get("model_options") is not None
                else (facts.get("model_reasoning_effort") and {"reasoning_effort": facts["model_reasoning_effort"]})
                or _unobserved(self.reasons, "model_options", "no model options set or configured")
            ),
        }

    def client(self, cli: Mapping[str, Any]) -> dict[str, Any]:
        """The product client as run here: its version, settings and the isolation around it."""
        has_model, opts, reasons = self.has_model, self.opts, self.reasons
        on_cli = self.adapter.get("surface", "cli") == "cli"
        out: dict[str, Any] = {
            "cli_version": cli["version"],
            "extension_id": NOT_APPLICABLE if on_cli else UNOBSERVED,
            "extension_version": NOT_APPLICABLE if on_cli else UNOBSERVED,
        }
        if has_model:
            out["auto_update_state"] = self.facts.get(
                "auto_update_state",
                _unobserved(
                    reasons, "auto_update_state", "the product's auto-update setting is not set in any discovered file"
                ),
            )
        else:
            out["auto_update_state"] = NOT_APPLICABLE
        for name in ("permission_mode", "sandbox"):
            out[name] = self._opt_or_fact(name) if has_model else _opt_na(opts, name)
        out["isolation"] = (
            dict(self.ctx.isolation)
            if self.ctx.isolation is not None
            else _unobserved(reasons, "isolation", "the runner did not describe its isolation")
        )
        out["built_in_tools"] = self._built_in_tools()
        return out

    def _built_in_tools(self) -> Any:
        tools = self.opts.get("tools")
        if tools is not None:
            return sorted(tools) if isinstance(tools, (list, tuple)) else tools
        if not self.has_model:
            return NOT_APPLICABLE
        return _unobserved(
            self.reasons, "built_in_tools", "the enabled tool set is reported by the product only at run time"
        )

    def source_id(self, source_manifest: Mapping[str, Any], git_info: Any) -> Any:
        if source_manifest["files"]:
            return source_manifest["digest"]
        if isinstance(git_info, dict) and git_info.get("commit"):
            # no task directory selected: the project's own commit is all we have
            return {"git_commit": git_info["commit"], "dirty": git_info["dirty"]}
        self.reasons["source_id"] = "no task directory selected and the project is not a git checkout"
        return UNOBSERVED

    def lockfile_hash(self, lockfiles: Sequence[Mapping[str, Any]]) -> Any:
        if lockfiles:
            return digest(lockfiles)
        self.reasons["lockfile_hash"] = "no lockfile in the project root or the selected tasks"
        return NOT_APPLICABLE

    def environment(self, cwd: Path, runtimes: Mapping[str, Any]) -> dict[str, Any]:
        """Where and how the agent runs: system, runtimes, working directory, command, environment."""
        ctx, roots = self.ctx, self.roots
        return {
            "os": _os_identity(ctx.system_root),
            "runtime_versions": runtimes,
            "working_directory": roots.label(cwd)
            if not ctx.task_repos
            else {t: f"task:{t}:" for t in sorted(ctx.task_repos)},
            "command": identity_argv(ctx.agent_argv, roots),
            "agent_files_hash": agent_files_hash(ctx.agent_argv, ctx.extra_config, roots, self.reasons),
            "environment_allowlist": environment_allowlist(ctx.env, ctx.env_allowlist),
        }

    def protocol(self) -> dict[str, Any]:
        """What the agent is measured on and by: tasks, evaluator, image, scoring code, harness."""
        ctx, reasons = self.ctx, self.reasons
        return {
            "task_set_id": ctx.task_set_id or _unobserved(reasons, "task_set_id", "the caller passed no task_set_id"),
            "evaluator_id": ctx.evaluator_id
            or _unobserved(reasons, "evaluator_id", "the caller passed no evaluator_id"),
            "env_image_digest": _image_digest(ctx, reasons),
            "scoring_script_digest": _scoring_digest(ctx, reasons),
            "harness_version": ctx.harness_version
            or _unobserved(reasons, "harness_version", "the caller passed no harness version"),
        }

    def envelope(self, identity: dict[str, Any]) -> None:
        """The envelope options taken verbatim from the options the user set."""
        for name in ENVELOPE_OPTIONS:
            if self.opts.get(name) is not None:
                identity[name] = self.opts[name]
            elif self.has_model:
                identity[name] = UNOBSERVED
                self.reasons.setdefault(name, "not set in the options (the product default is not observable)")
            else:
                identity[name] = NOT_APPLICABLE

    def explain(self, identity: Mapping[str, Any], cli: Mapping[str, Any]) -> None:
        """Why each field without a value has none (fields no earlier step explained)."""
        reasons = self.reasons
        if identity["extension_id"] == NOT_APPLICABLE:
            reasons["extension_id"] = reasons["extension_version"] = "a CLI surface has no editor extension"
        else:
            reasons["extension_id"] = reasons["extension_version"] = "editor extensions are not inspected by capture"
        if not self.has_model:
            for name in _NO_MODEL_FIELDS:
                if identity.get(name) == NOT_APPLICABLE:
                    reasons[name] = "the reference agent runs no model and no product client"
            for name in ("permission_mode", "sandbox", "built_in_tools"):
                if identity.get(name) == NOT_APPLICABLE:
                    reasons[name] = "the reference agent has no permission, sandbox or tool settings of its own"
        if cli["version"] in (UNOBSERVED, NOT_APPLICABLE):
            reasons["cli_version"] = cli.get("reason", "version display not run")
        if self.has_model:
            reasons.setdefault("model_stamp", "reported by the host only in the agent's output; filled after the runs")
            reasons.setdefault("server_revision", "the host does not report a server revision to the client")


def _provenance(
    ctx: ManifestContext,
    roots: discovery_base.Roots,
    git_info: Any,
    cli: Mapping[str, Any],
    bundle: Mapping[str, Any],
    config: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """Recorded and noted, never compared as identity: when, where, by whom, from which files."""
    now = (ctx.now or (lambda: datetime.now(timezone.utc)))()
    env = ctx.env
    return {
        "captured_at_utc": utc_timestamp(now),
        "run_id": ctx.run_id or UNOBSERVED,
        "operator": env.get("AGENTDRIFT_OPERATOR") or env.get("USER") or env.get("LOGNAME") or UNOBSERVED,
        "host": _platform.node() or UNOBSERVED,
        "region": _region(env),
        "kernel": f"{_platform.system()} {_platform.release()} {_platform.version()}",
        "pytest_argv": _label_argv(ctx.pytest_argv, roots),
        "source_git": git_info,
        "cli_executable": {k: cli.get(k) for k in ("path", "sha256", "exit_code", "stderr")},
        "instruction_sources_raw": {f"{e['context']}|{e['path']}": e["raw_sha256"] for e in bundle["entries"]},
        "config_sources_raw": {f"{s['context']}|{s['path']}": s.get("raw_sha256") for s in config},
    }


def capture_manifest(ctx: ManifestContext) -> dict[str, Any]:
    """The runtime manifest alone (see `capture` for the bundle and source manifest)."""
    return capture(ctx).manifest


def runtime_id(identity: Mapping[str, Any]) -> str:
    return digest(dict(identity))


def finalize_manifest(
    manifest: Mapping[str, Any],
    model_stamps: Mapping[str, str | None] | None = None,
    server_revisions: Mapping[str, str | None] | None = None,
    reported: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Fill the post-run fields from what the host reported, and recompute runtime_id.

    ``model_stamps`` maps a run key (``T02/r1``) to the model id that run's
    output reported (AdapterOutput.model_stamp) or None. One distinct value
    over all runs becomes the stamp; several distinct values are recorded
    as the sorted list (the host switched models mid-session: a comparison
    must see it); no value at all leaves ``unobserved``. A field that is
    ``not_applicable`` stays so.

    ``reported`` maps a run key to the identity facts the product reported
    about itself in that run (AdapterOutput.run_identity: the model its init
    event asked for, its tools). They fill only what capture left
    ``unobserved`` (an option or a configuration file wins), the same way.
    Returns a new manifest.
    """
    out = copy.deepcopy(dict(manifest))
    ident = out["identity"]
    for name, values in _reported_per_field(model_stamps, server_revisions, reported).items():
        if ident.get(name) == NOT_APPLICABLE or not values:
            continue
        seen = sorted(
            {digest(v): v for v in values.values() if v not in (None, "")}.values(),
            key=lambda v: (0, v, "") if isinstance(v, str) else (1, "", digest(v)),
        )
        missing = sorted(k for k, v in values.items() if v in (None, ""))
        if not seen:
            continue
        if name not in POST_RUN_FIELDS and ident.get(name) != UNOBSERVED:
            # an option or a file named it: that value stays, what the product asked for is evidence
            out.setdefault("evidence", {}).setdefault("post_run", {})[name] = {"reported": seen, "kept": ident[name]}
            continue
        ident[name] = seen[0] if len(seen) == 1 else seen
        source = "the host's answers" if name in POST_RUN_FIELDS else "the product's own report at run time"
        out.setdefault("evidence", {}).setdefault("post_run", {})[name] = {
            "runs_without_value": missing,
            "source": source,
        }
        out.get("reasons", {}).pop(name, None)
    out["runtime_id"] = runtime_id(ident)
    return out


def _reported_per_field(
    model_stamps: Mapping[str, str | None] | None,
    server_revisions: Mapping[str, str | None] | None,
    reported: Mapping[str, Mapping[str, Any]] | None,
) -> dict[str, dict[str, Any]]:
    """{identity field: {run key: value or None}}; a run that reported some fields and not
    another counts as a run without a value for it."""
    per_field: dict[str, dict[str, Any]] = {"model_stamp": dict(model_stamps or {})}
    per_field["server_revision"] = dict(server_revisions or {})
    for key, facts in (reported or {}).items():
        for name, value in (facts or {}).items():
            if name in IDENTITY_FIELDS and name not in POST_RUN_FIELDS:
                per_field.setdefault(name, {})[key] = value
        for name in per_field:
            per_field[name].setdefault(key, None)
    return per_field


def validate_manifest(manifest: Any, where: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """A stored manifest is complete and untouched, or RecordError (exit 4)."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("identity"), dict):
        raise RecordError("not a runtime manifest (no identity object)", where)
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise RecordError(f"unsupported manifest schema_version {manifest.get('schema_version')!r}", where)
    missing = [f for f in IDENTITY_FIELDS if f not in manifest["identity"]]
    if missing:
        raise RecordError(f"incomplete manifest: identity lacks {', '.join(missing)}", where)
    if manifest.get("runtime_id") != runtime_id(manifest["identity"]):
        raise RecordError("runtime_id does not match the identity it was computed from (edited or truncated)", where)
    return manifest


# --------------------------------------------------------------------------- source manifest


def build_source_manifest(
    task_dirs: Mapping[str, Path], project_root: Path | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(source-manifest.json document, lockfiles) for the selected task directories.

    Paths are ``<task id>/<posix path relative to the task directory>``,
    sorted; symlinks are recorded with their target (never followed); cache
    directories written by running tests are left out. Lockfiles are found
    in the same walk, plus the top level of the project root.
    """
    files: list[dict[str, Any]] = []
    lockfiles: list[dict[str, Any]] = []
    listing: list[tuple[str, str, str, str]] = []  # (task id, rel, full, kind)
    for tid, top in sorted(task_dirs.items()):
        listing.extend((tid, rel, full, kind) for rel, full, kind in _walk(Path(top)))
    hashed = _hash_files([full for _, _, full, kind in listing if kind == "file"])
    for tid, rel, full, kind in listing:
        path = f"{tid}/{rel}"
        if kind == "symlink":
            # recorded with its target, never followed; an absolute target by its name only
            target = os.readlink(full)
            target = target if not os.path.isabs(target) else "absolute:" + os.path.basename(target)
            files.append({"path": path, "type": "symlink", "target": target})
            continue
        size, sha = hashed[full]
        files.append({"path": path, "size": size, "sha256": sha})
        fmt = _lockfile_format(os.path.basename(full))
        if fmt is not None:
            lockfiles.append(_lockfile(f"task:{tid}:{rel}", full, fmt, sha))
    if project_root is not None and Path(project_root).is_dir():
        for entry in sorted(os.scandir(project_root), key=lambda e: e.name):
            fmt = _lockfile_format(entry.name)
            if fmt is not None and entry.is_file(follow_symlinks=False):
                lockfiles.append(_lockfile(f"project:{entry.name}", entry.path, fmt, hash_file(entry.path)))
    doc = {
        "manifest_version": 1,
        "excluded_names": sorted(SOURCE_EXCLUDED_NAMES),
        "tasks": sorted(task_dirs),
        "files": files,
    }
    # The digest covers [path, size, sha256] (symlinks: [path, "symlink",
    # target]) in path order: the same facts as `files`, in a compact form
    # that canonicalises about twice as fast as the list of objects.
    doc["digest"] = digest(
        [[f["path"], f["size"], f["sha256"]] if "sha256" in f else [f["path"], "symlink", f["target"]] for f in files]
    )
    return doc, sorted(lockfiles, key=lambda x: x["path"])


def _lockfile(label: str, full: str, fmt: str, sha: str) -> dict[str, Any]:
    return {"path": label, "format": fmt, "format_version": _lockfile_version(Path(full), fmt), "sha256": sha}


def _hash_files(regular: list[str]) -> dict[str, tuple[int, str]]:
    """{path: (size, sha256)}.

    Hash in a small thread pool: open/read/sha256 release the GIL, and a
    tree of many small files is bound by per-file system calls, not by
    one core's sha256 speed.
    """
    workers = min(4, (os.cpu_count() or 1)) if len(regular) > 64 and (os.cpu_count() or 1) > 2 else 1
    if workers == 1:
        return {full: _size_and_sha256(full) for full in regular}
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(regular, pool.map(_size_and_sha256, regular, chunksize=64), strict=False))


_SMALL = 1 << 20


def _size_and_sha256(full: str) -> tuple[int, str]:
    """(size, hex sha256) with one open; small files in one read."""
    import hashlib

    with open(full, "rb", buffering=0) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size <= _SMALL:
            return size, hashlib.sha256(fh.read()).hexdigest()
        return size, hashlib.file_digest(fh, "sha256").hexdigest()


def _walk(top: Path) -> Iterable[tuple[str, str, str]]:
    """(posix rel, full path, file|symlink) below top, sorted by rel; no symlink is followed."""
    out: list[tuple[str, str, str]] = []
    stack = [(os.fspath(top), "")]
    while stack:
        d, prefix = stack.pop()
        try:
            it = list(os.scandir(d))
        except OSError as exc:
            raise AgentDriftError(f"cannot list task directory: {exc.strerror or exc}", d) from None
        for e in it:
            if e.name in SOURCE_EXCLUDED_NAMES:
                continue
            rel = prefix + e.name
            if e.is_symlink():
                out.append((rel, e.path, "symlink"))
            elif e.is_dir(follow_symlinks=False):
                stack.append((e.path, rel + "/"))
            elif e.is_file(follow_symlinks=False):
                out.append((rel, e.path, "file"))
    out.sort(key=lambda t: t[0])
    return out


def _lockfile_format(name: str) -> str | None:
    if name in LOCKFILE_NAMES:
        return LOCKFILE_NAMES[name]
    if _REQUIREMENTS.match(name):
        return "pip-requirements"
    return None


def _lockfile_version(path: Path, fmt: str) -> str:
    """The lockfile's own format version where the format declares one in its head."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8192).decode("utf-8", errors="replace")
    except OSError:
        return UNOBSERVED
    patterns = {
        "uv": r"^version\s*=\s*(\d+)",
        "pylock": r"^lock-version\s*=\s*\"?([\d.]+)",
        "poetry": r"lock-version\s*=\s*\"([\d.]+)\"",
        "npm": r"\"lockfileVersion\"\s*:\s*(\d+)",
        "npm-shrinkwrap": r"\"lockfileVersion\"\s*:\s*(\d+)",
        "pnpm": r"^lockfileVersion:\s*'?([\d.]+)",
        "pipenv": r"\"pipfile-spec\"\s*:\s*(\d+)",
        "cargo": r"^version\s*=\s*(\d+)",
        "yarn": r"^# yarn lockfile (v\d+)|^__metadata:",
        "bun": r"\"lockfileVersion\"\s*:\s*(\d+)",
        "composer": r"\"plugin-api-version\"\s*:\s*\"([\d.]+)\"",
    }
    pat = patterns.get(fmt)
    if pat is None:
        return NOT_APPLICABLE
    m = re.search(pat, head, re.MULTILINE)
    if not m:
        return UNOBSERVED
    if fmt == "yarn":
        return m.group(1) or "berry"
    return m.group(1)


# --------------------------------------------------------------------------- git


def _git_info(project_root: Path, env: Mapping[str, str]) -> dict[str, Any] | str:
    """Commit and dirty flag of the project checkout (GitPython, imported here only).

    GIT_OPTIONAL_LOCKS=0 keeps `git status`-style commands from refreshing
    and rewriting the index: capture must leave every file as it found it.
    Remotes are not read (their URLs can hold tokens).
    """
    if not _find_git_dir(Path(project_root)):
        return NOT_APPLICABLE
    try:
        import git  # GitPython
    except ImportError:
        return UNOBSERVED
    try:
        repo = git.Repo(os.fspath(project_root), search_parent_directories=True)
        with repo.git.custom_environment(GIT_OPTIONAL_LOCKS="0"):
            try:
                commit = repo.head.commit.hexsha
            except ValueError:
                commit = UNOBSERVED  # no commit yet
            dirty = repo.is_dirty(untracked_files=True)
        return {"commit": commit, "dirty": bool(dirty)}
    except Exception as exc:  # noqa: BLE001 - any git failure leaves the field unobserved, never aborts capture
        return {"commit": UNOBSERVED, "dirty": UNOBSERVED, "error": type(exc).__name__}
    finally:
        try:
            repo.close()  # type: ignore[possibly-undefined]
        except Exception:  # noqa: BLE001
            pass


def _find_git_dir(start: Path) -> bool:
    cur = Path(os.path.abspath(start))
    while True:
        if (cur / ".git").exists():
            return True
        if cur.parent == cur:
            return False
        cur = cur.parent


# --------------------------------------------------------------------------- probes


def _run(
    ctx: ManifestContext | _ProbeSetting, argv: Sequence[str], cwd: Path, scratch_home: bool = False
) -> tuple[int | None, bytes, bytes, str | None]:
    """Run one read-only display; (exit code, stdout, stderr, error). With `scratch_home`, in a
    scratch HOME and XDG directories of its own."""
    import tempfile

    runner = ctx.runner or subprocess.run
    # Documented switches that keep a version display from updating itself.
    env = {**ctx.env, "DISABLE_AUTOUPDATER": "1", "NO_UPDATE_NOTIFIER": "1"}
    # A display may still write where it keeps its state (Copilot unpacks its whole package into
    # the cache dir on first use): it gets a scratch home of its own, so capture writes nothing
    # of the user's, and the scratch is gone when it returns.
    if not scratch_home:
        return _run_in(runner, ctx, argv, cwd, env)
    if ctx.probe_home is not None:
        env.update({name: str(ctx.probe_home) for name in PROBE_HOME_ENV})
        return _run_in(runner, ctx, argv, cwd, env)
    with tempfile.TemporaryDirectory(prefix="agentdrift-probe-", ignore_cleanup_errors=True) as scratch:
        env.update({name: scratch for name in PROBE_HOME_ENV})
        return _run_in(runner, ctx, argv, cwd, env)


#: where programs keep per-user state: a version probe gets a scratch directory for each
PROBE_HOME_ENV = ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")


def _run_in(runner, ctx: ManifestContext | _ProbeSetting, argv: Sequence[str], cwd: Path, env: dict[str, str]):
    try:
        proc = runner(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=ctx.version_timeout_s,
            cwd=os.fspath(cwd) if Path(cwd).is_dir() else None,
            env=env,
            check=False,
        )
    except FileNotFoundError:
        return None, b"", b"", "executable not found"
    except subprocess.TimeoutExpired:
        return None, b"", b"", f"timed out after {ctx.version_timeout_s:g} s"
    except OSError as exc:
        return None, b"", b"", f"could not run: {exc.strerror or exc}"
    return proc.returncode, proc.stdout or b"", proc.stderr or b"", None


def _which(name: str, env: Mapping[str, str]) -> str | None:
    if os.sep in name:
        return name if os.access(name, os.X_OK) else None
    return shutil.which(name, path=env.get("PATH", ""))


@dataclass(frozen=True)
class _ProbeSetting:
    """What a version display runs with (ManifestContext has the same fields)."""

    env: Mapping[str, str]
    probe_home: Path | None
    version_timeout_s: float = VERSION_TIMEOUT_S
    runner: Callable[..., subprocess.CompletedProcess[bytes]] | None = None


def probe_cli_version(
    argv: Sequence[str] | None, env: Mapping[str, str], cwd: Path, probe_home: Path | None
) -> dict[str, Any]:
    """The agent CLI's version display, run once a session in a scratch home: ``version`` (its exact
    stdout, or unobserved / not_applicable with a ``reason``), and the executable's path, sha256,
    exit code and stderr. The session shows its first line and capture records it whole
    (ManifestContext.cli_probe), so both say what one run of the display said."""
    return _probe_version(_ProbeSetting(dict(env), probe_home), argv, cwd, scratch_home=True)


def _probe_version(
    ctx: ManifestContext | _ProbeSetting, argv: Sequence[str] | None, cwd: Path, scratch_home: bool = False
) -> dict[str, Any]:
    if not argv:
        return {"version": NOT_APPLICABLE, "reason": "the adapter documents no version display"}
    exe = _which(argv[0], ctx.env)
    if exe is None:
        return {"version": UNOBSERVED, "reason": f"{argv[0]!r} not found on PATH"}
    code, out, err, error = _run(ctx, [exe, *argv[1:]], cwd, scratch_home)
    result: dict[str, Any] = {"path": exe, "exit_code": code, "stderr": _clip(err)}
    try:
        result["sha256"] = hash_file(exe)
    except OSError:
        result["sha256"] = UNOBSERVED
    if error is not None or code != 0:
        result["version"] = UNOBSERVED
        result["reason"] = error or f"version display exited {code}"
        return result
    text = out.decode("utf-8", errors="replace").strip()
    # exact stdout, never normalised (1.2.3-beta.1 stays 1.2.3-beta.1)
    result["version"] = text if text else UNOBSERVED
    if not text:
        result["reason"] = "version display printed nothing"
    return result


_RUNTIMES: dict[str, Sequence[str]] = {
    "node": ("node", "--version"),
    "npm": ("npm", "--version"),
    "git": ("git", "--version"),
}


def _run_probes(ctx: ManifestContext, cwd: Path, roots: discovery_base.Roots, rules: str) -> dict[str, Any]:
    """Version displays, run concurrently (each bounded by the timeout)."""
    from concurrent.futures import ThreadPoolExecutor

    shell = ctx.env.get("SHELL")
    jobs: dict[str, Sequence[str] | None] = dict(_RUNTIMES)
    if ctx.cli_probe is None:
        jobs["cli"] = list(ctx.version_argv) if ctx.version_argv else None
    if shell:
        jobs["shell"] = (shell, "--version")
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        # the agent's own CLI runs in a scratch home (its state is not the user's to change);
        # interpreters and shells keep theirs (a version manager's shim finds itself there)
        npm = _npm_package_version(ctx.env)
        if npm is not None:
            jobs.pop("npm")
        futures = {name: pool.submit(_probe_version, ctx, argv, cwd, name == "cli") for name, argv in jobs.items()}
        results = {name: f.result() for name, f in futures.items()}
    if npm is not None:
        results["npm"] = {"version": npm}
    if ctx.cli_probe is not None:
        results["cli"] = dict(ctx.cli_probe)
    runtimes: dict[str, Any] = {
        "python": f"{_platform.python_implementation()} {_platform.python_version()}",
    }
    for name in ("node", "npm", "git", "shell"):
        if name == "shell" and not shell:
            runtimes[name] = UNOBSERVED
            continue
        res = results[name]
        v = res["version"]
        # first line only: bash prints a licence after its version line
        runtimes[name] = (
            v.splitlines()[0].strip() if isinstance(v, str) and v not in (UNOBSERVED, NOT_APPLICABLE) else v
        )
        if name == "shell" and v not in (UNOBSERVED, NOT_APPLICABLE):
            runtimes[name] = f"{os.path.basename(shell or '')}: {runtimes[name]}"
    runtimes.update(ctx.bundled_runtimes)
    cli = results["cli"]
    if "path" in cli:
        cli["path"] = roots.label(cli["path"]) if cli["path"] else cli["path"]
    return {"cli": cli, "runtimes": runtimes}


def _npm_package_version(env: Mapping[str, str]) -> str | None:
    """npm's version as `npm --version` prints it, read from the package.json of the npm the PATH
    resolves to, when that is npm's own npm-cli.js (a system, nvm or prefix install); None for
    anything else (a version manager's shim), which is asked instead. Starting npm costs
    about half a second, in every session that records a manifest."""
    exe = _which("npm", env)
    if exe is None:
        return None
    cli = Path(os.path.realpath(exe))
    if cli.name != "npm-cli.js" or cli.parent.name != "bin" or cli.parent.parent.name != "npm":
        return None
    try:
        meta = json.loads((cli.parent.parent / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    version = meta.get("version") if isinstance(meta, dict) and meta.get("name") == "npm" else None
    return version if isinstance(version, str) and version.strip() == version and version else None


def _clip(data: bytes, limit: int = 400) -> str:
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= limit else text[:limit] + "…[truncated]"


# --------------------------------------------------------------------------- pieces


def environment_allowlist(env: Mapping[str, str], allowlist: Iterable[str]) -> dict[str, Any]:
    """Names always; values only for non-secret names (see NON_SECRET_ENV_VALUES).

    For each allowlisted name: ``{"set": bool, "value": ...}`` where value
    is present only when the name is on the non-secret list and does not
    look like a credential name. A few behaviour switches (locale, TZ, CI)
    are recorded whenever set.
    """
    names = sorted(set(allowlist) | {n for n in ALWAYS_RECORDED_ENV if n in env})
    out: dict[str, Any] = {}
    for name in names:
        item: dict[str, Any] = {"set": name in env}
        if (
            name in env
            and name in NON_SECRET_ENV_VALUES
            and not _SECRET_NAME.search(name)
            and name not in _PATHLIKE_ENV
        ):
            item["value"] = env[name]
        out[name] = item
    return out


def _label_argv(argv: Sequence[str], roots: discovery_base.Roots) -> list[str]:
    """argv with absolute paths under a named root relabelled, so identity holds no private path."""
    out = []
    for arg in argv:
        s = str(arg)
        if os.path.isabs(s) and not any(c in s for c in "{}"):
            label = roots.label(s)
            out.append(label if not label.startswith("outside:") else s)
        else:
            out.append(s)
    return out


_INTERPRETER = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?(\.exe)?$")


def _interpreter_label(path: str) -> str | None:
    """An interpreter by implementation and version, never by where it is installed."""
    if not _INTERPRETER.match(os.path.basename(path)):
        return None
    if os.path.realpath(path) == os.path.realpath(sys.executable) or os.path.abspath(path) == os.path.abspath(
        sys.executable
    ):
        return f"interpreter:{_platform.python_implementation()} {_platform.python_version()}"
    try:
        out = subprocess.run(
            [path, "-c", "import platform; print(platform.python_implementation(), platform.python_version())"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return "interpreter:unobserved"
    text = out.stdout.strip()
    return f"interpreter:{text}" if out.returncode == 0 and text else "interpreter:unobserved"


def _identity_label(path: str, roots: discovery_base.Roots) -> str:
    label = _interpreter_label(path) or roots.label(path)
    # the system root is "/": a label under it would still spell out this machine's directories
    if label.startswith(("outside:", "system:")):
        return "outside:" + os.path.basename(path)
    return label


def identity_argv(argv: Sequence[str], roots: discovery_base.Roots) -> list[str]:
    """argv for the identity: no absolute path of this machine.

    Interpreters become their implementation and version; paths under a named
    root (project, home, task) are relabelled; any other absolute path keeps
    only its file name (what the file holds is in agent_files_hash).
    """
    out = []
    for arg in argv:
        text = str(arg)
        if os.path.isabs(text) and not any(c in text for c in "{}"):
            out.append(_identity_label(text, roots))
        else:
            out.append(text)
    return out


def agent_files_hash(
    argv: Sequence[str], config_files: Sequence[Path], roots: discovery_base.Roots, reasons: dict[str, str]
) -> Any:
    """sha256 of each file the agent command names (its script, --agent-config files), by label.

    Interpreters are identified by version, not bytes; a file under a named root is
    labelled relative to it, any other by its name. Editing the agent's own script
    changes this field. An --agent-config file is hashed in its canonical form (the
    parsed value, as config_hash reads it): reordered keys or CRLF are no change.
    """
    files: dict[str, str] = {}
    candidates = [str(a) for a in argv[1:] if os.path.isabs(str(a)) and not any(c in str(a) for c in "{}")]
    if argv and os.path.isabs(str(argv[0])) and _interpreter_label(str(argv[0])) is None:
        candidates.insert(0, str(argv[0]))  # a script run directly is the agent itself
    configs = {os.path.abspath(os.fspath(p)) for p in config_files}
    candidates += sorted(configs)
    for path in candidates:
        if not os.path.isfile(path) or _interpreter_label(path):
            continue
        label = _identity_label(path, roots)
        try:
            files[label] = _config_digest(Path(path), roots) if path in configs else "sha256:" + hash_file(path)
        except OSError as exc:
            files[label] = UNOBSERVED
            reasons["agent_files_hash"] = f"{label}: {exc.strerror or exc}"
    if not files:
        reasons["agent_files_hash"] = "the agent command names no file of its own"
        return NOT_APPLICABLE
    return dict(sorted(files.items()))


def _config_digest(path: Path, roots: discovery_base.Roots) -> str:
    """The canonical digest of a configuration file, the one config_hash is built from."""
    source = discovery_base.config_source(
        path, roots, surface="generic", scope="user-named", precedence=0, fmt=discovery_base.format_for(path), spec=None
    )
    if source.get("status") != "present":
        raise OSError(f"{source.get('status')}: {path.name}")
    return str(source["canonical_sha256"])


def _argv_value(argv: Sequence[str], flags: Sequence[str]) -> str | None:
    for i, a in enumerate(argv):
        for f in flags:
            if a == f and i + 1 < len(argv):
                return str(argv[i + 1])
            if a.startswith(f + "="):
                return a.split("=", 1)[1]
    return None


def _external_tools(sources: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """MCP inventory from every configuration source, sorted by (name, source)."""
    tools = []
    for s in sources:
        content = s.get("content")
        if not isinstance(content, dict):
            continue
        for key in ("mcpServers", "mcp_servers", "servers"):
            servers = content.get(key)
            if isinstance(servers, dict):
                for name, spec in servers.items():
                    tools.append(
                        {
                            "name": name,
                            "source": s["path"],
                            "scope": s["scope"],
                            "context": s["context"],
                            "spec": spec,
                            "schema_sha256": UNOBSERVED,
                            "version": UNOBSERVED,
                        }
                    )
        profiles = content.get("profiles")
        if isinstance(profiles, dict):
            for pname, prof in profiles.items():
                if isinstance(prof, dict) and isinstance(prof.get("mcp_servers"), dict):
                    for name, spec in prof["mcp_servers"].items():
                        tools.append(
                            {
                                "name": name,
                                "source": f"{s['path']}#profiles.{pname}",
                                "scope": s["scope"],
                                "context": s["context"],
                                "spec": spec,
                                "schema_sha256": UNOBSERVED,
                                "version": UNOBSERVED,
                            }
                        )
    return sorted(tools, key=lambda t: (t["name"], t["context"], t["source"]))


def _merged_facts(facts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """One value per fact over all contexts; differing values are kept per context."""
    names = sorted({n for f in facts.values() for n in f})
    out: dict[str, Any] = {}
    for n in names:
        if n == "documented_merge":
            continue
        per = {ctx: f[n]["value"] for ctx, f in sorted(facts.items()) if n in f}
        values = list(per.values())
        if all(v == values[0] for v in values) and len(per) == len(facts):
            out[n] = {
                "configured": values[0],
                "source": [facts[c][n]["source"] for c in per][0],
                "effective": UNOBSERVED,
            }
        else:
            out[n] = {"configured_per_context": per, "effective": UNOBSERVED}
    return out


def model_endpoint(
    adapter: Mapping[str, Any],
    env: Mapping[str, str],
    facts: Mapping[str, Any],
    reasons: dict[str, str],
    evidence: dict[str, Any],
) -> str:
    """The base URL the product sends its model requests to, as identity (never a credential:
    agents.base.endpoint_label drops user, password, query and fragment).

    The product's configuration first (Codex's selected provider; a Claude Code settings file
    whose `env` block sets its base URL, which the CLI applies over its environment), then its
    environment (ANTHROPIC_BASE_URL, ...), then the product's built-in endpoint."""
    from pytest_agentdrift.agents.base import endpoint_label

    candidates: list[tuple[str, Any]] = []
    fact = facts.get("model_endpoint")
    if isinstance(fact, Mapping):
        per = fact.get("configured_per_context")
        values = {digest(v): v for v in per.values()} if isinstance(per, Mapping) else {"": fact.get("configured")}
        value = next(iter(values.values())) if len(values) == 1 else None
        candidates.append((f"configuration ({fact.get('source', 'config')})", value or fact))
    candidates += [(name, env.get(name)) for name in adapter.get("endpoint_env", ())]
    candidates.append(("the product's built-in endpoint", adapter.get("default_endpoint")))
    for source, value in candidates:
        if not value:
            continue
        label = endpoint_label(value) if isinstance(value, str) else None
        if label is None:
            why = "sets it in an env block, recorded by name only" if "settings_env" in str(value) else None
            return _unobserved(reasons, "model_endpoint", f"{source} {why or 'does not name one http(s) URL'}")
        evidence["model_endpoint"] = {"source": source}
        return label
    return _unobserved(reasons, "model_endpoint", "the agent names no model endpoint the harness can read")


def _os_identity(system_root: Path | None) -> dict[str, Any]:
    """Edition, release, build and architecture; the kernel build is provenance.

    On Linux the distribution (os-release ID, VERSION_ID, BUILD_ID) names the
    image; the kernel belongs to the host a container runs on and changes
    under CI without the image changing, so it is recorded in provenance.
    """
    info: dict[str, Any] = {"system": _platform.system() or UNOBSERVED, "machine": _platform.machine() or UNOBSERVED}
    if sys.platform.startswith("linux"):
        rel = _os_release(system_root)
        info["distribution"] = rel.get("ID", UNOBSERVED) if rel else UNOBSERVED
        info["release"] = rel.get("VERSION_ID", UNOBSERVED) if rel else UNOBSERVED
        info["build"] = rel.get("BUILD_ID", NOT_APPLICABLE) if rel else UNOBSERVED
        libc = _platform.libc_ver()
        info["libc"] = " ".join(x for x in libc if x) or UNOBSERVED
    elif sys.platform == "darwin":
        ver = _platform.mac_ver()[0]
        info["distribution"] = "macos"
        info["release"] = ver or UNOBSERVED
        info["build"] = UNOBSERVED
    else:
        info["distribution"] = _platform.system()
        info["release"] = _platform.release() or UNOBSERVED
        info["build"] = _platform.version() or UNOBSERVED
    return info


def _os_release(system_root: Path | None) -> dict[str, str] | None:
    root = Path(system_root) if system_root is not None else Path("/")
    for rel in ("etc/os-release", "usr/lib/os-release"):
        try:
            text = (root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        out = {}
        for line in text.splitlines():
            k, sep, v = line.partition("=")
            if sep:
                out[k.strip()] = v.strip().strip('"')
        return out
    return None


def _image_digest(ctx: ManifestContext, reasons: dict[str, str]) -> str:
    if ctx.env_image_digest:
        return ctx.env_image_digest
    if ctx.isolation and ctx.isolation.get("image_digest"):
        return str(ctx.isolation["image_digest"])
    root = Path(ctx.system_root) if ctx.system_root is not None else None
    if root is not None and ((root / ".dockerenv").exists() or (root / "run" / ".containerenv").exists()):
        reasons["env_image_digest"] = "running in a container whose image digest is not visible from inside"
        return UNOBSERVED
    if root is None:
        reasons["env_image_digest"] = "system root not read"
        return UNOBSERVED
    reasons["env_image_digest"] = "not running in a container image"
    return NOT_APPLICABLE


def _scoring_digest(ctx: ManifestContext, reasons: dict[str, str]) -> str:
    """Digest of the harness's scoring code by content: the given files, else this package's .py files.

    Paths are left out on purpose, so moving a module keeps the digest and editing one changes it.
    """
    if ctx.scoring_files is None:
        from pytest_agentdrift.grade.evaluator import code_digest

        return code_digest()
    files = list(ctx.scoring_files)
    if not files:
        reasons["scoring_script_digest"] = "no scoring files"
        return UNOBSERVED
    return digest(sorted(hash_file(Path(p)) for p in files))


def _region(env: Mapping[str, str]) -> str:
    for name in (
        "AGENTDRIFT_REGION",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "GOOGLE_CLOUD_REGION",
        "AZURE_REGION",
        "RUNNER_REGION",
    ):
        if env.get(name):
            return env[name]
    return UNOBSERVED


def _is_reference(adapter: Mapping[str, Any]) -> bool:
    """The bundled reference agents run no model: model fields are not_applicable."""
    return str(adapter.get("product", "")).startswith("pytest-agentdrift/")


def _unobserved(reasons: dict[str, str], name: str, why: str) -> str:
    reasons.setdefault(name, why)
    return UNOBSERVED


def _opt_na(opts: Mapping[str, Any], name: str) -> Any:
    return opts[name] if opts.get(name) is not None else NOT_APPLICABLE


__all__ = [
    "Capture",
    "ManifestContext",
    "NOT_APPLICABLE",
    "POST_RUN_FIELDS",
    "UNOBSERVED",
    "build_source_manifest",
    "capture",
    "capture_manifest",
    "environment_allowlist",
    "finalize_manifest",
    "probe_cli_version",
    "runtime_id",
    "sha256_hex",
    "validate_manifest",
]
