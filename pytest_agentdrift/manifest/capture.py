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
version displays (30 s timeout, stdin closed), runs git with
``GIT_OPTIONAL_LOCKS=0`` so not even the index is refreshed, and never
creates a commit.
"""

from __future__ import annotations

import copy
import os
import platform as _platform
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pytest_agentdrift.agents import discovery_base, products
from pytest_agentdrift.canonical import digest, hash_file, sha256_hex
from pytest_agentdrift.errors import RecordError
from pytest_agentdrift.manifest import discovery
from pytest_agentdrift.manifest.agentcmd import (
    agent_files_hash,
    argv_value,
    identity_argv,
    label_argv,
    program_identity,
)
from pytest_agentdrift.manifest.environment import environment_allowlist, os_identity, region
from pytest_agentdrift.manifest.model import model_endpoint
from pytest_agentdrift.manifest.probes import VERSION_TIMEOUT_S, run_probes
from pytest_agentdrift.manifest.source import build_source_manifest, git_checkout
from pytest_agentdrift.shapes import JsonObject
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


# --------------------------------------------------------------------------- context


@dataclass(frozen=True)
class ManifestContext:
    """Everything capture may look at. Nothing else is read.

    ``home`` and ``env`` are what the agent's product would see (the real
    home and environment in a normal session, fixtures in tests); capture
    never falls back to ``Path.home()`` or ``os.environ``.
    """

    adapter: Mapping[str, object]  # AgentAdapter.describe(): name, product, surface (+ command)
    agent_argv: Sequence[str]  # argv template of one run, placeholders unexpanded
    version_argv: Sequence[str] | None  # the documented read-only version display, or None
    home: Path
    project_root: Path
    cwd: Path | None = None  # defaults to project_root
    options: Mapping[str, object] = field(default_factory=dict)  # model, model_options, permission_mode, sandbox,
    #   tools, temperature, seed, max_output_tokens, budget_tokens_per_task, tool_timeout_s, retry_policy
    task_repos: Mapping[str, Path] = field(default_factory=dict)  # task id -> repo/ (project-scope discovery)
    task_dirs: Mapping[str, Path] = field(default_factory=dict)  # task id -> task directory (source manifest)
    extra_config: Sequence[Path] = ()  # --agent-config PATH
    extra_instructions: Sequence[Path] = ()  # --agent-instructions PATH
    env: Mapping[str, str] = field(default_factory=dict)
    env_allowlist: Sequence[str] = ()  # names passed through to the agent
    task_set_id: str | None = None
    evaluator_id: str | None = None
    isolation: Mapping[str, object] | None = None  # {"requested", "enforced", "network", ...}
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
    cli_probe: Mapping[str, object] | None = None
    now: Callable[[], datetime] | None = None  # injectable clock (provenance only)
    runner: Callable[..., subprocess.CompletedProcess[bytes]] | None = None  # injectable subprocess.run


@dataclass
class Capture:
    manifest: dict[str, object]
    instruction_bundle: discovery_base.InstructionBundle
    source_manifest: dict[str, object]


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
    git_info = git_checkout(ctx.project_root, ctx.env)
    probes = run_probes(ctx, cwd, roots, rules)
    cli = probes.pop("cli")
    if "command" in adapter and not ctx.version_argv and ctx.cli_probe is None:
        cli, fields.program_file = _command_program(ctx, cwd, roots)
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
        declared = adapter.get(name, [])
        evidence[key] = [f for f in declared if f in IDENTITY_FIELDS] if isinstance(declared, list) else []
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


def _command_program(
    ctx: ManifestContext, cwd: Path, roots: discovery_base.Roots
) -> tuple[dict[str, object], str | None]:
    """An agent command has no documented version display: the program it runs is identified
    instead (manifest/agentcmd.py), and that identification is its cli_version. Also the file
    that identification was read from, when it was: its bytes are then cli_version's alone, not
    agent_files_hash's too (one change, one field)."""
    found = program_identity(ctx.agent_argv, ctx.env, cwd, ctx.probe_home, ctx.runner)
    cli: dict[str, object] = {"exit_code": None, "stderr": "", **found}
    path = cli.get("path")
    path = path if isinstance(path, str) else None  # program_identity's absolute path, when it found one
    observed = path if cli["version"] not in (UNOBSERVED, NOT_APPLICABLE) else None
    if path:
        try:
            cli["sha256"] = hash_file(path)
        except OSError:
            cli["sha256"] = UNOBSERVED
        cli["path"] = roots.label(path)
    return cli, observed


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
        profile=argv_value(ctx.agent_argv, ("--profile", "-p")) if rules == "codex" else None,
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

    def __init__(
        self, ctx: ManifestContext, adapter: dict[str, object], *, has_model: bool, roots: discovery_base.Roots
    ):
        self.ctx = ctx
        self.adapter = adapter
        self.has_model = has_model
        self.roots = roots
        self.opts = dict(ctx.options)
        self.reasons: dict[str, str] = {}
        self.evidence: dict[str, object] = {}
        self.facts: dict[str, object] = {}
        self.config_hash: str = UNOBSERVED
        #: the agent command's program file whose identification is cli_version (None: none)
        self.program_file: str | None = None

    def _opt_or_fact(self, name: str) -> object:
        if self.opts.get(name) is not None:
            return self.opts[name]
        found = self.facts.get(name)
        if found is not None:
            return found
        self.reasons.setdefault(name, "not set in the options and not configured in any discovered file")
        return UNOBSERVED

    def agent(self, rules: str) -> dict[str, object]:
        adapter = self.adapter
        return {
            "surface": adapter.get("surface", UNOBSERVED),
            "product": adapter.get("product", UNOBSERVED),
            "agent": adapter.get("name", UNOBSERVED),
            "surface_rules": rules,
        }

    def model(self) -> dict[str, object]:
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

    def client(self, cli: Mapping[str, object]) -> dict[str, object]:
        """The product client as run here: its version, settings and the isolation around it."""
        has_model, opts, reasons = self.has_model, self.opts, self.reasons
        on_cli = self.adapter.get("surface", "cli") == "cli"
        out: dict[str, object] = {
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

    def _built_in_tools(self) -> object:
        tools = self.opts.get("tools")
        if tools is not None:
            return sorted(tools) if isinstance(tools, (list, tuple)) else tools
        if not self.has_model:
            return NOT_APPLICABLE
        return _unobserved(
            self.reasons, "built_in_tools", "the enabled tool set is reported by the product only at run time"
        )

    def source_id(self, source_manifest: Mapping[str, object], git_info: object) -> object:
        if source_manifest["files"]:
            return source_manifest["digest"]
        if isinstance(git_info, dict) and git_info.get("commit"):
            # no task directory selected: the project's own commit is all we have
            return {"git_commit": git_info["commit"], "dirty": git_info["dirty"]}
        self.reasons["source_id"] = "no task directory selected and the project is not a git checkout"
        return UNOBSERVED

    def lockfile_hash(self, lockfiles: Sequence[Mapping[str, object]]) -> str:
        if lockfiles:
            return digest(lockfiles)
        self.reasons["lockfile_hash"] = "no lockfile in the project root or the selected tasks"
        return NOT_APPLICABLE

    def environment(self, cwd: Path, runtimes: object) -> dict[str, object]:
        """Where and how the agent runs: system, runtimes, working directory, command, environment."""
        ctx, roots = self.ctx, self.roots
        return {
            "os": os_identity(ctx.system_root),
            "runtime_versions": runtimes,
            "working_directory": roots.label(cwd)
            if not ctx.task_repos
            else {t: f"task:{t}:" for t in sorted(ctx.task_repos)},
            "command": identity_argv(ctx.agent_argv, roots),
            "agent_files_hash": agent_files_hash(
                ctx.agent_argv, ctx.extra_config, roots, self.reasons, program=self.program_file
            ),
            "environment_allowlist": environment_allowlist(ctx.env, ctx.env_allowlist),
        }

    def protocol(self) -> dict[str, object]:
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

    def envelope(self, identity: dict[str, object]) -> None:
        """The envelope options taken verbatim from the options the user set."""
        for name in ENVELOPE_OPTIONS:
            if self.opts.get(name) is not None:
                identity[name] = self.opts[name]
            elif self.has_model:
                identity[name] = UNOBSERVED
                self.reasons.setdefault(name, "not set in the options (the product default is not observable)")
            else:
                identity[name] = NOT_APPLICABLE

    def explain(self, identity: Mapping[str, object], cli: Mapping[str, object]) -> None:
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
            reasons["cli_version"] = str(cli.get("reason", "version display not run"))
        if self.has_model:
            reasons.setdefault("model_stamp", "reported by the host only in the agent's output; filled after the runs")
            reasons.setdefault("server_revision", "the host does not report a server revision to the client")


def _provenance(
    ctx: ManifestContext,
    roots: discovery_base.Roots,
    git_info: object,
    cli: Mapping[str, object],
    bundle: discovery_base.InstructionBundle,
    config: Sequence[discovery_base.ConfigSource],
) -> dict[str, object]:
    """Recorded and noted, never compared as identity: when, where, by whom, from which files."""
    now = (ctx.now or (lambda: datetime.now(timezone.utc)))()
    env = ctx.env
    return {
        "captured_at_utc": utc_timestamp(now),
        "run_id": ctx.run_id or UNOBSERVED,
        "operator": env.get("AGENTDRIFT_OPERATOR") or env.get("USER") or env.get("LOGNAME") or UNOBSERVED,
        "host": _platform.node() or UNOBSERVED,
        "region": region(env),
        "kernel": f"{_platform.system()} {_platform.release()} {_platform.version()}",
        "pytest_argv": label_argv(ctx.pytest_argv, roots),
        "source_git": git_info,
        "cli_executable": {k: cli.get(k) for k in ("path", "sha256", "exit_code", "stderr")},
        "instruction_sources_raw": {f"{e['context']}|{e['path']}": e["raw_sha256"] for e in bundle["entries"]},
        "config_sources_raw": {f"{s['context']}|{s['path']}": s.get("raw_sha256") for s in config},
    }


def capture_manifest(ctx: ManifestContext) -> dict[str, object]:
    """The runtime manifest alone (see `capture` for the bundle and source manifest)."""
    return capture(ctx).manifest


def runtime_id(identity: Mapping[str, object]) -> str:
    return digest(dict(identity))


def finalize_manifest(
    manifest: Mapping[str, object],
    model_stamps: Mapping[str, str | None] | None = None,
    server_revisions: Mapping[str, str | None] | None = None,
    reported: Mapping[str, Mapping[str, object]] | None = None,
) -> dict[str, object]:
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
    ident = _child(out, "identity")
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
            _child(_child(out, "evidence"), "post_run")[name] = {"reported": seen, "kept": ident[name]}
            continue
        ident[name] = seen[0] if len(seen) == 1 else seen
        source = "the host's answers" if name in POST_RUN_FIELDS else "the product's own report at run time"
        _child(_child(out, "evidence"), "post_run")[name] = {
            "runs_without_value": missing,
            "source": source,
        }
        reasons = out.get("reasons", {})
        if isinstance(reasons, dict):
            reasons.pop(name, None)
    out["runtime_id"] = runtime_id(ident)
    return out


def _child(doc: dict[str, object], key: str) -> dict[str, object]:
    """The object under `key` of a manifest's part, made empty when absent."""
    child = doc.setdefault(key, {})
    if not isinstance(child, dict):
        raise RecordError(f"the manifest's {key!r} is not an object")
    return child


def _reported_per_field(
    model_stamps: Mapping[str, str | None] | None,
    server_revisions: Mapping[str, str | None] | None,
    reported: Mapping[str, Mapping[str, object]] | None,
) -> dict[str, dict[str, object]]:
    """{identity field: {run key: value or None}}; a run that reported some fields and not
    another counts as a run without a value for it."""
    per_field: dict[str, dict[str, object]] = {"model_stamp": dict(model_stamps or {})}
    per_field["server_revision"] = dict(server_revisions or {})
    for key, facts in (reported or {}).items():
        for name, value in (facts or {}).items():
            if name in IDENTITY_FIELDS and name not in POST_RUN_FIELDS:
                per_field.setdefault(name, {})[key] = value
        for name in per_field:
            per_field[name].setdefault(key, None)
    return per_field


def validate_manifest(manifest: object, where: str | os.PathLike[str] | None = None) -> JsonObject:
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


# --------------------------------------------------------------------------- pieces


def _external_tools(sources: Sequence[discovery_base.ConfigSource]) -> list[dict[str, object]]:
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


def _merged_facts(facts: Mapping[str, Mapping[str, discovery_base.Fact]]) -> dict[str, object]:
    """One value per fact over all contexts; differing values are kept per context."""
    names = sorted({n for f in facts.values() for n in f})
    out: dict[str, object] = {}
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


def _is_reference(adapter: Mapping[str, object]) -> bool:
    """The bundled reference agents run no model: model fields are not_applicable."""
    return str(adapter.get("product", "")).startswith("pytest-agentdrift/")


def _unobserved(reasons: dict[str, str], name: str, why: str) -> str:
    reasons.setdefault(name, why)
    return UNOBSERVED


def _opt_na(opts: Mapping[str, object], name: str) -> object:
    return opts[name] if opts.get(name) is not None else NOT_APPLICABLE


__all__ = [
    "Capture",
    "ManifestContext",
    "NOT_APPLICABLE",
    "POST_RUN_FIELDS",
    "UNOBSERVED",
    "capture",
    "capture_manifest",
    "finalize_manifest",
    "runtime_id",
    "sha256_hex",
    "validate_manifest",
]
