"""Read-only discovery of each product surface's instructions and configuration.

Every function here takes the places to look at explicitly (home, project
root, cwd, environment mapping, system root) and never consults the real
home or `os.environ`: the caller decides what "the runtime" is, and tests
build fixture homes and repositories in a temporary directory.

Two outputs per surface:

* instruction entries: one per instruction source the product's documented
  discovery would load (or could load on demand), in discovery order, with a
  path relative to a named root (``~/``, ``project:``, ``task:T05:``,
  ``system:/``, ``$CODEX_HOME/``...), scope, raw sha256, normalised sha256,
  imports, and the missing / unreadable files it refers to. Contents are
  never stored, only hashes.
* configuration sources: one per configuration file the product documents,
  with scope, precedence, a raw sha256 and the parsed content reduced to
  ALLOWLISTED keys. A key that is not on the allowlist contributes its name
  only (``unrecorded_keys``); MCP server arguments, hook commands and other
  free-form values that may embed credentials contribute a one-way digest.
  Credential files (``~/.codex/auth.json``, ``~/.claude/.credentials.json``,
  Copilot ``config.json``) are never opened.

Discovery is only reading: files are opened read-only, nothing is created,
and no product binary is run here (version probes live in manifest.py).

Normalisation of instruction text (``normalised_sha256``), applied to bytes
so that a file that is not valid UTF-8 still gets one: a leading UTF-8 BOM
is dropped; CRLF and lone CR become LF; trailing spaces, tabs, form feeds
and vertical tabs are stripped from every line; trailing empty lines are
dropped; a non-empty result ends with exactly one LF. Two files that differ
only in line endings or trailing whitespace therefore share the normalised
hash (and keep different raw hashes).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentdrift.canonical import (
    digest,
    load_json_file,
    load_toml_file,
    loads_json_strict,
    read_text_utf8,
    sha256_hex,
)
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.vocabulary import NOT_APPLICABLE, UNOBSERVED  # noqa: F401

#: Claude Code memory docs: "Imported files can recursively import additional
#: files, with a max-depth of 5 hops."
CLAUDE_IMPORT_MAX_DEPTH = 5
#: Codex AGENTS.md guide: project_doc_max_bytes defaults to 32 KiB.
CODEX_PROJECT_DOC_MAX_BYTES_DEFAULT = 32 * 1024
#: Codex: project root detection uses project_root_markers (default .git).
CODEX_DEFAULT_ROOT_MARKERS = (".git",)

#: Directories never descended into when looking for nested instruction
#: files: version-control internals and dependency / cache trees that no
#: product documents as an instruction location.
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".pytest_cache", ".mypy_cache", ".tox"}
)

NORMALISATION = (
    "bytes; leading UTF-8 BOM dropped; CRLF and CR -> LF; trailing space/tab/FF/VT stripped per line; "
    "trailing empty lines dropped; non-empty text ends with one LF"
)

SURFACE_RULES = ("claude-code", "codex", "copilot", "generic")


# --------------------------------------------------------------------------- paths


@dataclass(frozen=True)
class Roots:
    """Named roots used to turn absolute paths into stable, private-free labels.

    The most specific root containing a path wins, so a task repository inside
    the project is labelled ``task:T05:...`` rather than ``project:...``.
    """

    roots: tuple[tuple[str, str], ...]  # (prefix, absolute dir)

    @classmethod
    def build(cls, pairs: Iterable[tuple[str, Path | None]]) -> Roots:
        out = []
        for prefix, path in pairs:
            if path is not None:
                out.append((prefix, os.path.abspath(os.fspath(path))))
        # longest directory first: most specific root wins
        out.sort(key=lambda item: (-len(item[1]), item[0]))
        return cls(tuple(out))

    def with_root(self, prefix: str, path: Path) -> Roots:
        return Roots.build([*((p, Path(d)) for p, d in self.roots), (prefix, path)])

    def label(self, path: Path | str) -> str:
        full = os.path.abspath(os.fspath(path))
        for prefix, root in self.roots:
            if full == root:
                return prefix
            if full.startswith(root.rstrip(os.sep) + os.sep):
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                return prefix + rel
        # Outside every named root: keep the name, replace the directory by a
        # short digest so no private directory name reaches the manifest.
        return f"outside:{sha256_hex(full.encode())[:12]}/{os.path.basename(full)}"


def default_roots(home: Path, project_root: Path | None = None, system_root: Path | None = None) -> Roots:
    return Roots.build([("~/", home), ("project:", project_root), ("system:/", system_root)])


# --------------------------------------------------------------------------- text


_TRAILING_WS = re.compile(rb"[ \t\f\v]+$", re.MULTILINE)


def normalise_text(data: bytes) -> bytes:
    """The normalised form hashed into ``normalised_sha256`` (see module doc)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    data = _TRAILING_WS.sub(b"", data)
    data = data.rstrip(b"\n")
    return data + b"\n" if data else b""


def _read_bytes(path: Path) -> tuple[bytes | None, str]:
    """(bytes, status) where status is loaded / missing / unreadable."""
    try:
        with open(path, "rb") as fh:
            return fh.read(), "loaded"
    except FileNotFoundError:
        return None, "missing"
    except IsADirectoryError:
        return None, "unreadable"
    except OSError:
        return None, "unreadable"


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def _exists(path: Path) -> bool:
    try:
        return path.exists() or path.is_symlink()
    except OSError:
        return False


def parse_frontmatter(data: bytes) -> dict[str, Any]:
    """The small YAML subset instruction frontmatter uses.

    ``key: value`` (quoted or bare, comma separated allowed) and block lists
    (``key:`` followed by ``- item`` lines). Anything else is ignored: the
    frontmatter only decides *whether* a file applies, and an unparsed key
    is still covered by the file's hash.
    """
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
    if not text.startswith("---\n"):
        return {}
    end = text.find("\n---", 4)
    if end < 0:
        return {}
    out: dict[str, Any] = {}
    current: str | None = None
    for line in text[4:end].split("\n"):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("- ") and current is not None:
            out.setdefault(current, [])
            if isinstance(out[current], list):
                out[current].append(_unquote(stripped[2:].strip()))
            continue
        key, sep, value = stripped.partition(":")
        if not sep:
            continue
        current = key.strip()
        value = value.strip()
        out[current] = _unquote(value) if value else []
    return out


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _split_patterns(value: Any) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        for part in str(item).split(","):
            part = _unquote(part.strip())
            if part:
                out.append(part)
    return out


# --------------------------------------------------------------------------- bundle entries


@dataclass
class InstructionEntry:
    """One instruction source, in discovery order."""

    path: str  # label relative to a named root
    scope: str  # managed / user / project / local / nested / rules / import / task / user-named ...
    kind: str  # memory / rules / import / agents / copilot-instructions / path-instructions / named
    load: str  # startup / on_demand / conditional
    status: str  # loaded / missing / unreadable / empty_skipped / over_cap / truncated / shadowed
    raw_sha256: str | None = None
    normalised_sha256: str | None = None
    size: int | None = None
    depth: int = 0
    imported_by: str | None = None
    imports: list[str] = field(default_factory=list)
    apply_to: list[str] | None = None
    loaded_bytes: int | None = None
    context: str = "session"

    def to_dict(self, order: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "order": order,
            "context": self.context,
            "path": self.path,
            "scope": self.scope,
            "kind": self.kind,
            "load": self.load,
            "status": self.status,
            "size": self.size,
            "raw_sha256": self.raw_sha256,
            "normalised_sha256": self.normalised_sha256,
            "depth": self.depth,
            "imported_by": self.imported_by,
            "imports": list(self.imports),
        }
        if self.apply_to is not None:
            out["apply_to"] = list(self.apply_to)
        if self.loaded_bytes is not None:
            out["loaded_bytes"] = self.loaded_bytes
        return out


def _entry_for(
    path: Path,
    roots: Roots,
    *,
    scope: str,
    kind: str,
    load: str,
    context: str,
    depth: int = 0,
    imported_by: str | None = None,
) -> tuple[InstructionEntry, bytes | None]:
    data, status = _read_bytes(path)
    entry = InstructionEntry(
        path=roots.label(path),
        scope=scope,
        kind=kind,
        load=load,
        status=status,
        depth=depth,
        imported_by=imported_by,
        context=context,
    )
    if data is not None:
        entry.size = len(data)
        entry.raw_sha256 = sha256_hex(data)
        entry.normalised_sha256 = sha256_hex(normalise_text(data))
    return entry, data


@dataclass
class Discovery:
    """What one surface's discovery found, before it is assembled into a bundle."""

    surface_rules: str
    entries: list[InstructionEntry] = field(default_factory=list)
    missing: list[dict[str, str]] = field(default_factory=list)  # referenced but absent / unreadable
    config: list[dict[str, Any]] = field(default_factory=list)
    discovery_roots: dict[str, str] = field(default_factory=dict)  # context -> cwd label discovery started from
    limits: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)  # context -> {fact: {value, source}}

    def extend(self, other: Discovery) -> None:
        self.entries.extend(other.entries)
        self.missing.extend(other.missing)
        self.config.extend(other.config)
        self.discovery_roots.update(other.discovery_roots)
        self.limits.update(other.limits)
        self.notes.extend(n for n in other.notes if n not in self.notes)
        for ctx, facts in other.facts.items():
            self.facts.setdefault(ctx, {}).update(facts)


def instruction_bundle(discovery: Discovery) -> dict[str, Any]:
    """The ordered instruction-bundle.json document; its digest is instruction_hash."""
    entries = [e.to_dict(i) for i, e in enumerate(discovery.entries)]
    graph: dict[str, list[str]] = {}
    for e in discovery.entries:
        if e.imports:
            graph.setdefault(f"{e.context}|{e.path}", []).extend(e.imports)
    return {
        "bundle_version": 1,
        "surface_rules": discovery.surface_rules,
        "normalisation": NORMALISATION,
        "discovery_roots": dict(sorted(discovery.discovery_roots.items())),
        "limits": dict(sorted(discovery.limits.items())),
        "entries": entries,
        "import_graph": {k: sorted(set(v)) for k, v in sorted(graph.items())},
        "missing": sorted(
            discovery.missing, key=lambda m: (m.get("context", ""), m["path"], m.get("referenced_by", ""))
        ),
    }


#: bundle entry keys left out of instruction_hash: the exact bytes. A file
#: re-saved with CRLF line endings or trailing spaces is the same instruction
#: (seed 000: the hash is over normalised text); its raw hash stays in the
#: bundle and in the manifest's provenance, compared as a note.
RAW_ENTRY_KEYS = ("raw_sha256", "size")


def instruction_hash(bundle: Mapping[str, Any]) -> str:
    """digest of the bundle without the raw-bytes keys of its entries."""
    view = dict(bundle)
    view["entries"] = [{k: v for k, v in e.items() if k not in RAW_ENTRY_KEYS} for e in bundle.get("entries", [])]
    return digest(view)


# --------------------------------------------------------------------------- config parsing


def _strip_jsonc(text: str) -> str:
    """Remove // and /* */ comments and trailing commas outside strings (JSONC)."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        ch = text[i]
        if in_str:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_str = False
            i += 1
            continue
        if ch == '"':
            in_str = True
            out.append(ch)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(ch)
            i += 1
    # trailing commas before } or ] (JSONC tolerates them)
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def _load_jsonc(path: Path) -> Any:
    from pytest_agentdrift.canonical import DuplicateKeyError

    text = read_text_utf8(path)
    try:
        return loads_json_strict(_strip_jsonc(text))
    except DuplicateKeyError as exc:
        raise AgentDriftError(f"invalid JSON: duplicate key {exc.key!r}", path) from None
    except ValueError as exc:
        raise AgentDriftError(f"invalid JSON: {exc}", path) from None


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        return load_toml_file(path)
    except AgentDriftError as exc:
        # tomllib says "Cannot overwrite a value (at line N, column M)" for a
        # duplicate key without naming it; name it from the offending line.
        m = re.search(r"Cannot (?:overwrite|declare|mutate).*?line (\d+)", exc.problem)
        if m:
            key = _toml_key_at(path, int(m.group(1)))
            if key:
                raise AgentDriftError(f"invalid TOML: duplicate key {key!r} (line {m.group(1)})", path) from None
        raise


def _toml_key_at(path: Path, lineno: int) -> str | None:
    try:
        lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None
    if not 1 <= lineno <= len(lines):
        return None
    line = lines[lineno - 1].strip()
    if line.startswith("["):
        return line.strip("[] ")
    key = line.split("=", 1)[0].strip()
    return key or None


def load_config_file(path: Path, fmt: str) -> Any:
    """Parse one configuration file strictly: duplicate keys are AgentDriftError (exit 4)."""
    if fmt == "json":
        return load_json_file(path)
    if fmt == "jsonc":
        return _load_jsonc(path)
    if fmt == "toml":
        return _load_toml(path)
    raise AgentDriftError(f"unsupported configuration format {fmt!r}", path)


def _format_for(path: Path) -> str | None:
    name = path.name.lower()
    if name.endswith(".toml"):
        return "toml"
    if name.endswith(".jsonc"):
        return "jsonc"
    if name.endswith(".json"):
        return "json"
    return None


# --------------------------------------------------------------------------- allowlisting

# An allowlist spec maps a key to how its value is recorded:
#   True          -> value verbatim (safe keys: modes, booleans, model names, lists of rules)
#   "names"       -> mapping keys only (environment blocks, headers: values may be secrets)
#   "digest"      -> one-way digest only (free-form commands that may embed a token)
#   "present"     -> the label "present" (credential helpers: a credential source label)
#   "mcp"         -> a mapping of MCP servers, each reduced by _mcp_server
#   "url"         -> scheme://host[:port]/path, no userinfo, query or fragment
#   dict          -> nested allowlist
#   ("each", d)   -> a mapping whose values are each reduced by allowlist d

_MCP_SERVER_SPEC: dict[str, Any] = {
    "type": True,
    "transport": True,
    "command": True,
    "args": "digest",
    "url": "url",
    "env": "names",
    "headers": "names",
    "http_headers": "names",
    "env_http_headers": "names",
    "env_vars": True,
    "enabled": True,
    "disabled": True,
    "startup_timeout_sec": True,
    "startup_timeout_ms": True,
    "tool_timeout_sec": True,
    "timeout": True,
    "enabled_tools": True,
    "disabled_tools": True,
    "tools": True,
    "bearer_token_env_var": True,
    "cwd": "path",
    "trust": True,
    "alwaysAllow": True,
    "oauth": "names",
}

CLAUDE_SETTINGS_SPEC: dict[str, Any] = {
    "model": True,
    "availableModels": True,
    "effortLevel": True,
    "alwaysThinkingEnabled": True,
    "permissions": {
        "allow": True,
        "deny": True,
        "ask": True,
        "defaultMode": True,
        "additionalDirectories": "digest",
        "disableBypassPermissionsMode": True,
    },
    "sandbox": True,
    "env": "names",
    "hooks": "digest",
    "disableAllHooks": True,
    "statusLine": "digest",
    "apiKeyHelper": "present",
    "awsAuthRefresh": "present",
    "awsCredentialExport": "present",
    "otelHeadersHelper": "present",
    "forceLoginMethod": True,
    "forceLoginOrgUUID": "present",
    "enableAllProjectMcpServers": True,
    "enabledMcpjsonServers": True,
    "disabledMcpjsonServers": True,
    "allowedMcpServers": True,
    "deniedMcpServers": True,
    "mcpServers": "mcp",
    "includeCoAuthoredBy": True,
    "includeGitInstructions": True,
    "cleanupPeriodDays": True,
    "outputStyle": True,
    "autoUpdates": True,
    "autoUpdatesChannel": True,
    "enabledPlugins": True,
    "extraKnownMarketplaces": "digest",
    "language": True,
    "respectGitignore": True,
    "disableAutoMode": True,
    "$schema": True,
}

CLAUDE_JSON_SPEC: dict[str, Any] = {"mcpServers": "mcp", "autoUpdates": True}
CLAUDE_JSON_PROJECT_SPEC: dict[str, Any] = {
    "mcpServers": "mcp",
    "allowedTools": True,
    "enabledMcpjsonServers": True,
    "disabledMcpjsonServers": True,
    "hasTrustDialogAccepted": True,
}

_CODEX_CORE: dict[str, Any] = {
    "model": True,
    "model_provider": True,
    "model_reasoning_effort": True,
    "model_reasoning_summary": True,
    "model_verbosity": True,
    "model_context_window": True,
    "model_max_output_tokens": True,
    "model_auto_compact_token_limit": True,
    "model_supports_reasoning_summaries": True,
    "approval_policy": True,
    "sandbox_mode": True,
    "sandbox_workspace_write": {
        "writable_roots": "digest",
        "network_access": True,
        "exclude_tmpdir_env_var": True,
        "exclude_slash_tmp": True,
    },
    "shell_environment_policy": {
        "inherit": True,
        "ignore_default_excludes": True,
        "exclude": True,
        "include_only": True,
        "set": "names",
        "experimental_use_profile": True,
    },
    "tools": True,
    "features": True,
    "web_search": True,
    "hide_agent_reasoning": True,
    "show_raw_agent_reasoning": True,
    "project_doc_max_bytes": True,
    "project_doc_fallback_filenames": True,
    "project_root_markers": True,
    "notify": "digest",
    "instructions": "digest",
    "developer_instructions": "digest",
    "model_instructions_file": "path",
    "experimental_instructions_file": "path",
    "file_opener": True,
    "history": {"persistence": True, "max_bytes": True},
    "disable_response_storage": True,
    "preferred_auth_method": True,
    "forced_login_method": True,
    "cli_auth_credentials_store": True,
    "check_for_update_on_startup": True,
    "mcp_servers": "mcp",
    "model_providers": (
        "each",
        {
            "name": True,
            "base_url": "url",
            "env_key": True,
            "wire_api": True,
            "query_params": "names",
            "http_headers": "names",
            "env_http_headers": "names",
            "request_max_retries": True,
            "stream_max_retries": True,
            "stream_idle_timeout_ms": True,
            "requires_openai_auth": True,
        },
    ),
}
CODEX_CONFIG_SPEC: dict[str, Any] = {**_CODEX_CORE, "profile": True, "profiles": ("each", _CODEX_CORE)}

COPILOT_SETTINGS_SPEC: dict[str, Any] = {
    "model": True,
    "effortLevel": True,
    "autoTier": True,
    "allowedUrls": True,
    "deniedUrls": True,
    "askUser": True,
    "autoUpdate": True,
    "autoUpdatesChannel": True,
    "bashEnv": True,
    "continueOnAutoMode": True,
    "customAgents": True,
    "disableAllHooks": True,
    "disabledMcpServers": True,
    "enabledMcpServers": True,
    "disabledSkills": True,
    "dynamicRetrieval": True,
    "enabledPlugins": True,
    "experimental": True,
    "extraKnownMarketplaces": "digest",
    "hooks": "digest",
    "permissions": True,
    "sandbox": True,
    "companyAnnouncements": "digest",
    "$schema": True,
    "mcpServers": "mcp",
}
COPILOT_MCP_SPEC: dict[str, Any] = {"mcpServers": "mcp", "servers": "mcp"}
MCP_JSON_SPEC: dict[str, Any] = {"mcpServers": "mcp", "servers": "mcp"}


def _sanitise_url(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
    except ValueError:
        return {"sha256": digest(value)}
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}" if parts.scheme else {"sha256": digest(value)}


def allowlist(value: Any, spec: Mapping[str, Any], roots: Roots) -> tuple[Any, list[str]]:
    """Reduce a parsed mapping to allowlisted keys; returns (content, unrecorded key names).

    Explicit nulls of allowlisted keys are kept (null is not absent); array
    order is kept; keys outside the allowlist contribute their dotted name.
    """
    if not isinstance(value, dict):
        # a top-level value that is not an object: keep only its JSON type
        return {"$type": type(value).__name__}, []
    out: dict[str, Any] = {}
    unrecorded: list[str] = []
    for key in value:
        rule = spec.get(key)
        if rule is None:
            unrecorded.append(key)
            continue
        reduced, nested = _apply_rule(value[key], rule, roots)
        out[key] = reduced
        unrecorded.extend(f"{key}.{n}" for n in nested)
    return out, sorted(unrecorded)


def _apply_rule(v: Any, rule: Any, roots: Roots) -> tuple[Any, list[str]]:
    if rule is True:
        return v, []
    if rule == "names":
        return (sorted(v) if isinstance(v, dict) else {"$type": type(v).__name__}), []
    if rule == "digest":
        return {"sha256": digest(v)}, []
    if rule == "present":
        return "present" if v is not None else None, []
    if rule == "url":
        return _sanitise_url(v), []
    if rule == "path":
        return (
            roots.label(Path(os.path.expanduser(v)))
            if isinstance(v, str) and os.path.isabs(os.path.expanduser(v))
            else v
        ), []
    if rule == "mcp":
        if not isinstance(v, dict):
            return {"$type": type(v).__name__}, []
        servers: dict[str, Any] = {}
        nested: list[str] = []
        for name, spec in v.items():
            reduced, unrec = allowlist(spec, _MCP_SERVER_SPEC, roots)
            servers[name] = reduced
            nested.extend(f"{name}.{u}" for u in unrec)
        return servers, nested
    if isinstance(rule, tuple) and rule[0] == "each":
        if not isinstance(v, dict):
            return {"$type": type(v).__name__}, []
        items: dict[str, Any] = {}
        nested = []
        for name, sub in v.items():
            reduced, unrec = allowlist(sub, rule[1], roots)
            items[name] = reduced
            nested.extend(f"{name}.{u}" for u in unrec)
        return items, nested
    if isinstance(rule, dict):
        return allowlist(v, rule, roots)
    return {"sha256": digest(v)}, []


def config_source(
    path: Path,
    roots: Roots,
    *,
    surface: str,
    scope: str,
    precedence: int,
    fmt: str | None,
    spec: Mapping[str, Any] | None,
    context: str = "session",
    select: Any = None,
) -> dict[str, Any]:
    """One configuration source: raw hash, scope, precedence and allowlisted content.

    ``spec=None`` (a user-named file of an unknown product) records no content
    at all, only ``canonical_sha256`` of the parsed value: we cannot know which
    of its keys are safe, so none is written out.
    ``select`` picks a sub-document before allowlisting (``~/.claude.json``'s
    entry for one project).
    """
    src: dict[str, Any] = {
        "surface": surface,
        "context": context,
        "path": roots.label(path),
        "scope": scope,
        "precedence": precedence,
        "format": fmt or "unparsed",
    }
    data, status = _read_bytes(path)
    if data is None:
        src["status"] = "absent" if status == "missing" else "unreadable"
        return src
    src["status"] = "present"
    src["raw_sha256"] = sha256_hex(data)
    src["size"] = len(data)
    if fmt is None:
        # not a format we parse: the normalised text hash stands in for content
        src["canonical_sha256"] = sha256_hex(normalise_text(data))
        src["content"] = "not_recorded"
        return src
    parsed = load_config_file(path, fmt)
    if select is not None:
        parsed = select(parsed)
    if spec is None:
        src["canonical_sha256"] = digest(parsed)
        src["content"] = "not_recorded"
        return src
    content, unrecorded = allowlist(parsed, spec, roots)
    src["content"] = content
    src["unrecorded_keys"] = unrecorded
    return src


def canonical_config(
    sources: Sequence[Mapping[str, Any]], *, effective_merge: Any = UNOBSERVED, documented_merge: Any = None
) -> dict[str, Any]:
    """The document hashed into config_hash: sources without their raw hashes.

    Raw hashes are left out on purpose: a file re-saved with CRLF or with its
    keys reordered has the same configuration, and must not refuse a
    comparison. They stay in the manifest's evidence, compared as notes.
    """
    keep = (
        "surface",
        "context",
        "path",
        "scope",
        "precedence",
        "format",
        "status",
        "content",
        "unrecorded_keys",
        "canonical_sha256",
        "trusted",
        "applies",
    )
    doc: dict[str, Any] = {
        "sources": [{k: s[k] for k in keep if k in s} for s in sources],
        "effective_merge": effective_merge,
    }
    if documented_merge is not None:
        doc["documented_merge"] = documented_merge
    return doc


def config_hash(sources: Sequence[Mapping[str, Any]], **kw: Any) -> str:
    """digest of canonical_config, or "unobserved" when a source could not be read."""
    if any(s.get("status") == "unreadable" for s in sources):
        return UNOBSERVED
    return digest(canonical_config(sources, **kw))


# --------------------------------------------------------------------------- helpers


def _walk_up(cwd: Path, stop: Path | None) -> list[Path]:
    """cwd and its ancestors, outermost first; stops at ``stop`` (inclusive) or the filesystem root."""
    cur = Path(os.path.abspath(cwd))
    stop_abs = Path(os.path.abspath(stop)) if stop is not None else None
    chain = [cur]
    while True:
        if stop_abs is not None and cur == stop_abs:
            break
        parent = cur.parent
        if parent == cur:
            break
        cur = parent
        chain.append(cur)
    return list(reversed(chain))


def _nested_files(top: Path, names: Sequence[str], skip_top: bool = True) -> list[Path]:
    """Files with one of ``names`` below ``top`` (not in top itself), sorted."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        if skip_top and os.path.abspath(dirpath) == os.path.abspath(top):
            continue
        for name in names:
            if name in filenames:
                found.append(Path(dirpath) / name)
    return sorted(found, key=lambda p: p.as_posix())


def _glob_md(directory: Path, suffix: str = ".md") -> list[Path]:
    """All files ending with suffix under directory, recursively, sorted by relative path."""
    if not directory.is_dir():
        return []
    out = []
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in filenames:
            if name.endswith(suffix):
                out.append(Path(dirpath) / name)
    return sorted(out, key=lambda p: p.relative_to(directory).as_posix())


def _find_marker_root(cwd: Path, markers: Sequence[str], stop: Path | None) -> Path | None:
    for d in reversed(_walk_up(cwd, stop)):
        if any(_exists(d / m) for m in markers):
            return d
    return None


def _env_path(env: Mapping[str, str], name: str, home: Path) -> Path | None:
    value = env.get(name)
    if not value:
        return None
    return Path(os.path.expanduser(value.replace("~", os.fspath(home), 1) if value.startswith("~") else value))


# --------------------------------------------------------------------------- Claude Code

# Claude Code imports: `@path` at the start of a line or after whitespace,
# not inside inline code spans or fenced code blocks (memory docs).
_CLAUDE_IMPORT = re.compile(r"(?:^|(?<=\s))@((?:[^\s\\`]|\\ )+)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"`[^`]*`")


def claude_imports(text: str) -> list[str]:
    """The import targets a CLAUDE.md mentions, in order, outside code."""
    out: list[str] = []
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for m in _CLAUDE_IMPORT.finditer(_CODE_SPAN.sub(" ", line)):
            target = m.group(1).replace("\\ ", " ").rstrip(".,;:)")
            if target and target not in out:
                out.append(target)
    return out


def _resolve_import(target: str, base_dir: Path, home: Path) -> Path:
    if target.startswith("~/"):
        return home / target[2:]
    p = Path(target)
    return p if p.is_absolute() else base_dir / p


class _ClaudeWalker:
    def __init__(self, home: Path, roots: Roots, context: str, disc: Discovery, max_depth: int):
        self.home = home
        self.roots = roots
        self.context = context
        self.disc = disc
        self.max_depth = max_depth
        self.seen: set[str] = set()

    def add(
        self,
        path: Path,
        *,
        scope: str,
        kind: str,
        load: str,
        apply_to: list[str] | None = None,
        skip_missing: bool = True,
    ) -> None:
        if skip_missing and not _exists(path):
            return
        key = os.path.abspath(path)
        if key in self.seen:
            return
        self.seen.add(key)
        entry, data = _entry_for(path, self.roots, scope=scope, kind=kind, load=load, context=self.context)
        if kind == "rules" and data is not None and apply_to is None:
            fm = parse_frontmatter(data)
            if "paths" in fm:
                apply_to = _split_patterns(fm["paths"])
                entry.load = "conditional"
        entry.apply_to = apply_to
        self.disc.entries.append(entry)
        if data is not None:
            self._imports(entry, path, data, depth=0)

    def _imports(self, parent: InstructionEntry, path: Path, data: bytes, depth: int) -> None:
        targets = claude_imports(data.decode("utf-8", errors="replace"))
        for target in targets:
            resolved = _resolve_import(target, path.parent, self.home)
            label = self.roots.label(resolved)
            parent.imports.append(label)
            if depth + 1 > self.max_depth:
                self.disc.missing.append(
                    {
                        "context": self.context,
                        "path": label,
                        "referenced_by": parent.path,
                        "reason": f"beyond max import depth {self.max_depth}",
                    }
                )
                continue
            key = os.path.abspath(resolved)
            if key in self.seen:
                continue  # cycle or already loaded: the edge stays in the graph
            self.seen.add(key)
            entry, child = _entry_for(
                resolved,
                self.roots,
                scope="import",
                kind="import",
                load=parent.load,
                context=self.context,
                depth=depth + 1,
                imported_by=parent.path,
            )
            if child is None:
                self.disc.missing.append(
                    {"context": self.context, "path": label, "referenced_by": parent.path, "reason": entry.status}
                )
                continue
            self.disc.entries.append(entry)
            self._imports(entry, resolved, child, depth + 1)


def _claude_managed_dir(system_root: Path | None, platform: str) -> Path | None:
    if system_root is None:
        return None
    if platform == "darwin":
        return system_root / "Library" / "Application Support" / "ClaudeCode"
    if platform.startswith("win"):
        return system_root / "Program Files" / "ClaudeCode"
    return system_root / "etc" / "claude-code"


def discover_claude_code(
    home: Path,
    project_root: Path,
    cwd: Path,
    env: Mapping[str, str],
    *,
    system_root: Path | None = None,
    platform: str = "linux",
    context: str = "session",
    roots: Roots | None = None,
    upward_limit: Path | None = None,
    include_user: bool = True,
) -> Discovery:
    """Claude Code memory, settings and MCP, per the Claude Code memory and settings docs.

    Memory (startup): managed CLAUDE.md; user ``~/.claude/CLAUDE.md`` and
    ``~/.claude/rules/**/*.md``; then every directory from the outermost
    ancestor down to cwd: ``CLAUDE.md``, ``.claude/CLAUDE.md``,
    ``CLAUDE.local.md``, ``.claude/rules/**/*.md`` (rules with ``paths``
    frontmatter are conditional). ``@path`` imports are followed up to 5
    hops, relative to the importing file. CLAUDE.md files below cwd are
    recorded as ``on_demand`` (loaded when the agent reads that subtree).
    The upward walk stops at ``upward_limit`` when given (the harness runs
    the agent in a private copy of the repository, so nothing above it is
    visible to the agent).

    Settings: managed-settings.json > .claude/settings.local.json >
    .claude/settings.json > ~/.claude/settings.json (higher precedence
    number wins); MCP: managed-mcp.json, project ``.mcp.json``,
    ``~/.claude.json`` (user ``mcpServers`` and this project's entry).
    ``CLAUDE_CONFIG_DIR`` relocates ``~/.claude``.
    """
    roots = roots or default_roots(home, project_root, system_root)
    config_dir = _env_path(env, "CLAUDE_CONFIG_DIR", home)
    if config_dir is not None:
        roots = roots.with_root("$CLAUDE_CONFIG_DIR/", config_dir)
    user_dir = config_dir or home / ".claude"
    disc = Discovery("claude-code")
    disc.limits["claude_import_max_depth"] = CLAUDE_IMPORT_MAX_DEPTH
    disc.discovery_roots[context] = roots.label(cwd)
    walker = _ClaudeWalker(home, roots, context, disc, CLAUDE_IMPORT_MAX_DEPTH)
    managed = _claude_managed_dir(system_root, platform)

    if include_user:
        if managed is not None:
            walker.add(managed / "CLAUDE.md", scope="managed", kind="memory", load="startup")
            for p in _glob_md(managed / ".claude" / "rules"):
                walker.add(p, scope="managed", kind="rules", load="startup")
        walker.add(user_dir / "CLAUDE.md", scope="user", kind="memory", load="startup")
        for p in _glob_md(user_dir / "rules"):
            walker.add(p, scope="user", kind="rules", load="startup")

    for d in _walk_up(cwd, upward_limit):
        walker.add(d / "CLAUDE.md", scope="project", kind="memory", load="startup")
        walker.add(d / ".claude" / "CLAUDE.md", scope="project", kind="memory", load="startup")
        walker.add(d / "CLAUDE.local.md", scope="local", kind="memory", load="startup")
        for p in _glob_md(d / ".claude" / "rules"):
            walker.add(p, scope="project", kind="rules", load="startup")
    for p in _nested_files(cwd, ("CLAUDE.md", "CLAUDE.local.md")):
        walker.add(p, scope="nested", kind="memory", load="on_demand")

    # --- settings and MCP
    sources = disc.config
    if include_user:
        if managed is not None:
            sources.append(
                config_source(
                    managed / "managed-settings.json",
                    roots,
                    surface="claude-code",
                    scope="managed",
                    precedence=5,
                    fmt="json",
                    spec=CLAUDE_SETTINGS_SPEC,
                    context=context,
                )
            )
            sources.append(
                config_source(
                    managed / "managed-mcp.json",
                    roots,
                    surface="claude-code",
                    scope="managed-mcp",
                    precedence=5,
                    fmt="json",
                    spec=MCP_JSON_SPEC,
                    context=context,
                )
            )
        sources.append(
            config_source(
                user_dir / "settings.json",
                roots,
                surface="claude-code",
                scope="user",
                precedence=1,
                fmt="json",
                spec=CLAUDE_SETTINGS_SPEC,
                context=context,
            )
        )
    proj = Path(project_root)
    sources.append(
        config_source(
            proj / ".claude" / "settings.json",
            roots,
            surface="claude-code",
            scope="project",
            precedence=2,
            fmt="json",
            spec=CLAUDE_SETTINGS_SPEC,
            context=context,
        )
    )
    sources.append(
        config_source(
            proj / ".claude" / "settings.local.json",
            roots,
            surface="claude-code",
            scope="local",
            precedence=3,
            fmt="json",
            spec=CLAUDE_SETTINGS_SPEC,
            context=context,
        )
    )
    sources.append(
        config_source(
            proj / ".mcp.json",
            roots,
            surface="claude-code",
            scope="project-mcp",
            precedence=2,
            fmt="json",
            spec=MCP_JSON_SPEC,
            context=context,
        )
    )
    if include_user:
        claude_json = (config_dir / ".claude.json") if config_dir is not None else home / ".claude.json"
        # ~/.claude.json holds account details and app state: only the MCP
        # inventory (user scope, and this project's local scope) is read.
        sources.append(
            config_source(
                claude_json,
                roots,
                surface="claude-code",
                scope="user-mcp",
                precedence=1,
                fmt="json",
                spec=CLAUDE_JSON_SPEC,
                context=context,
            )
        )
    project_key = os.path.abspath(project_root)
    if include_user:
        # this project's entry of ~/.claude.json: local-scope MCP servers and
        # tool approvals (its other keys, e.g. prompt history, are names only)
        local = config_source(
            claude_json,
            roots,
            surface="claude-code",
            scope="local-mcp",
            precedence=3,
            fmt="json",
            spec=CLAUDE_JSON_PROJECT_SPEC,
            context=context,
            select=lambda doc: (doc.get("projects") or {}).get(project_key, {}) if isinstance(doc, dict) else {},
        )
        local.pop("raw_sha256", None)  # the same file's raw hash is already on the user-mcp source
        local["path"] = local["path"] + "#projects[" + roots.label(project_root) + "]"
        sources.append(local)

    return disc


def _is_under(path: Path, root: Path) -> bool:
    try:
        return Path(os.path.abspath(path)).is_relative_to(os.path.abspath(root))
    except ValueError:
        return False


def _highest(sources: Sequence[Mapping[str, Any]], getter: Any) -> tuple[Any, str] | None:
    best: tuple[int, Any, str] | None = None
    for s in sources:
        content = s.get("content")
        if not isinstance(content, dict):
            continue
        found, value = getter(content)
        if found and (best is None or s["precedence"] > best[0]):
            best = (s["precedence"], value, s["path"])
    return None if best is None else (best[1], best[2])


def _get(*keys: str) -> Any:
    def getter(content: Mapping[str, Any]) -> tuple[bool, Any]:
        cur: Any = content
        for k in keys:
            if not isinstance(cur, dict) or k not in cur:
                return False, None
            cur = cur[k]
        return True, cur

    return getter


def _fact(found: tuple[Any, str] | None) -> dict[str, Any] | None:
    return None if found is None else {"value": found[0], "source": found[1]}


def surface_facts(
    rules: str, sources: Sequence[Mapping[str, Any]], env: Mapping[str, str], profile: str | None = None
) -> dict[str, Any]:
    """What the configuration files say about model, permission mode, sandbox, auto-update.

    Each fact is the value of the highest-precedence source that sets it,
    with that source's label: a *configured* value, not the effective one
    (flags and managed policy can still override it at run time).
    """
    facts: dict[str, Any] = {}

    def put(name: str, found: tuple[Any, str] | None) -> None:
        f = _fact(found)
        if f is not None:
            facts[name] = f

    if rules == "claude-code":
        settings = [
            s
            for s in sources
            if s.get("surface") == "claude-code" and s.get("scope") in ("managed", "user", "project", "local")
        ]
        put("model", _highest(settings, _get("model")))
        put("permission_mode", _highest(settings, _get("permissions", "defaultMode")))
        put("sandbox", _highest(settings, _get("sandbox")))
        auto = _highest(settings, _get("autoUpdates"))
        if env.get("DISABLE_AUTOUPDATER"):
            facts["auto_update_state"] = {"value": "disabled", "source": "env:DISABLE_AUTOUPDATER"}
        elif auto is not None:
            facts["auto_update_state"] = {"value": "enabled" if auto[0] else "disabled", "source": auto[1]}
        facts["documented_merge"] = {"value": claude_documented_merge(settings), "source": "settings docs"}
    elif rules == "codex":
        codex = [s for s in sources if s.get("surface") == "codex"]
        active = profile or _codex_setting(codex, "profile")
        facts["codex_profile"] = {"value": active if active else NOT_APPLICABLE, "source": "argv/config"}
        for fact, key in (
            ("model", "model"),
            ("permission_mode", "approval_policy"),
            ("sandbox", "sandbox_mode"),
            ("model_reasoning_effort", "model_reasoning_effort"),
        ):
            value = None
            if active:
                prof = _codex_setting(codex, "profiles")
                if isinstance(prof, dict) and isinstance(prof.get(active), dict) and key in prof[active]:
                    value = (prof[active][key], f"profile:{active}")
            put(fact, value or _codex_find(codex, key))
    elif rules == "copilot":
        settings = [
            s for s in sources if s.get("surface") == "copilot" and s.get("scope") in ("user", "repository", "local")
        ]
        put("model", _highest(settings, _get("model")))
        put("model_reasoning_effort", _highest(settings, _get("effortLevel")))
        auto = _highest(settings, _get("autoUpdate"))
        if auto is not None:
            facts["auto_update_state"] = {"value": "enabled" if auto[0] else "disabled", "source": auto[1]}
    return facts


def claude_documented_merge(settings: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The merge the settings docs describe, over the allowlisted content.

    Lower precedence first; objects merge key by key; arrays are
    concatenated and de-duplicated (the docs: array settings are merged
    across scopes); scalars from a higher scope win. This is our reading of
    the documentation, recorded as ``documented_merge`` next to
    ``effective_merge: "unobserved"``: the product does not expose the
    merge it actually performs.
    """
    merged: dict[str, Any] = {}
    for s in sorted(settings, key=lambda s: (s["precedence"], s["path"])):
        if isinstance(s.get("content"), dict):
            merged = _deep_merge(merged, s["content"])
    return merged


def _deep_merge(low: Any, high: Any) -> Any:
    if isinstance(low, dict) and isinstance(high, dict):
        out = dict(low)
        for k, v in high.items():
            out[k] = _deep_merge(low[k], v) if k in low else v
        return out
    if isinstance(low, list) and isinstance(high, list):
        out_list = list(low)
        for item in high:
            if item not in out_list:
                out_list.append(item)
        return out_list
    return high


# --------------------------------------------------------------------------- Codex CLI


def discover_codex(
    home: Path,
    project_root: Path,
    cwd: Path,
    env: Mapping[str, str],
    *,
    system_root: Path | None = None,
    context: str = "session",
    roots: Roots | None = None,
    upward_limit: Path | None = None,
    include_user: bool = True,
    profile: str | None = None,
) -> Discovery:
    """Codex CLI AGENTS.md chain and config.toml layers, per the Codex docs.

    Instructions: in CODEX_HOME (default ``~/.codex``) the first non-empty of
    ``AGENTS.override.md`` / ``AGENTS.md``; then from the project root
    (nearest ancestor holding a ``project_root_markers`` entry, default
    ``.git``; cwd alone when none) down to cwd, at most one file per
    directory: ``AGENTS.override.md``, ``AGENTS.md``, then
    ``project_doc_fallback_filenames``. Empty files are skipped; project
    files stop once their combined size reaches ``project_doc_max_bytes``
    (32 KiB default), the file crossing the cap being truncated.

    Config: ``/etc/codex/config.toml`` (system) < ``$CODEX_HOME/config.toml``
    (user) < ``.codex/config.toml`` from project root down to cwd (applies
    only to a trusted project; closest wins) < the selected profile < CLI
    flags. ``[mcp_servers.*]`` tables are read from each layer.
    ``requirements.toml`` (managed constraints) is recorded when present.
    ``auth.json`` is never opened.
    """
    roots = roots or default_roots(home, project_root, system_root)
    codex_home = _env_path(env, "CODEX_HOME", home)
    if codex_home is not None:
        roots = roots.with_root("$CODEX_HOME/", codex_home)
    else:
        codex_home = home / ".codex"
    disc = Discovery("codex")
    disc.discovery_roots[context] = roots.label(cwd)
    sources = disc.config

    # --- config layers first: they decide the cap, fallback names and trust
    if include_user and system_root is not None:
        for name, scope, prec in (
            ("config.toml", "system", 0),
            ("managed_config.toml", "managed", 100),
            ("requirements.toml", "managed-requirements", 101),
        ):
            sources.append(
                config_source(
                    system_root / "etc" / "codex" / name,
                    roots,
                    surface="codex",
                    scope=scope,
                    precedence=prec,
                    fmt="toml",
                    spec=CODEX_CONFIG_SPEC,
                    context=context,
                )
            )
    user_cfg_path = codex_home / "config.toml"
    user_doc: dict[str, Any] = {}
    if include_user:
        user_src = config_source(
            user_cfg_path,
            roots,
            surface="codex",
            scope="user",
            precedence=1,
            fmt="toml",
            spec=CODEX_CONFIG_SPEC,
            context=context,
        )
        sources.append(user_src)
    if _is_file(user_cfg_path):
        user_doc = load_config_file(user_cfg_path, "toml")

    markers = _codex_setting(sources, "project_root_markers") or list(CODEX_DEFAULT_ROOT_MARKERS)
    root = _find_marker_root(cwd, markers, upward_limit)
    chain = _walk_up(cwd, root) if root is not None else [Path(os.path.abspath(cwd))]

    # Trust lives in the user config as [projects."<abs path>"] trust_level;
    # only this project's level is recorded (other keys are private paths).
    projects = user_doc.get("projects") if isinstance(user_doc.get("projects"), dict) else {}
    trust_key = os.path.abspath(root if root is not None else cwd)
    trust = projects.get(trust_key, {}).get("trust_level") if isinstance(projects.get(trust_key), dict) else None
    trusted = trust == "trusted"
    disc.facts[context] = {
        "codex_project_trust": {
            "value": trust if trust is not None else "untrusted_or_unset",
            "source": roots.label(user_cfg_path),
        }
    }
    for i, d in enumerate(chain):
        src = config_source(
            d / ".codex" / "config.toml",
            roots,
            surface="codex",
            scope="project",
            precedence=10 + i,
            fmt="toml",
            spec=CODEX_CONFIG_SPEC,
            context=context,
        )
        if src["status"] != "absent":
            src["trusted"] = trusted
            src["applies"] = trusted
        sources.append(src)

    cap = _codex_setting(sources, "project_doc_max_bytes", trusted_only=True)
    cap = int(cap) if isinstance(cap, int) else CODEX_PROJECT_DOC_MAX_BYTES_DEFAULT
    fallbacks = _codex_setting(sources, "project_doc_fallback_filenames", trusted_only=True) or []
    disc.limits[f"codex:{context}"] = {
        "project_doc_max_bytes": cap,
        "project_doc_fallback_filenames": list(fallbacks),
        "project_root": roots.label(root) if root is not None else "not_found(cwd only)",
    }

    # --- instructions
    if include_user:
        chosen = None
        for name in ("AGENTS.override.md", "AGENTS.md"):
            p = codex_home / name
            if not _exists(p):
                continue
            entry, data = _entry_for(p, roots, scope="user", kind="agents", load="startup", context=context)
            if chosen is None and data is not None and data.strip():
                chosen = entry
            else:
                entry.status = (
                    "shadowed" if chosen is not None else ("empty_skipped" if data is not None else entry.status)
                )
            disc.entries.append(entry)
    remaining = cap
    for d in chain:
        picked = False
        for name in ("AGENTS.override.md", "AGENTS.md", *[str(f) for f in fallbacks]):
            p = d / name
            if not _exists(p):
                continue
            entry, data = _entry_for(p, roots, scope="project", kind="agents", load="startup", context=context)
            if picked:
                entry.status = "shadowed"  # one file per directory
            elif data is not None and not data.strip():
                entry.status = "empty_skipped"
            elif data is not None:
                picked = True
                if remaining <= 0:
                    entry.status = "over_cap"
                    entry.loaded_bytes = 0
                elif len(data) > remaining:
                    entry.status = "truncated"
                    entry.loaded_bytes = remaining
                    remaining = 0
                else:
                    entry.loaded_bytes = len(data)
                    remaining -= len(data)
            disc.entries.append(entry)

    return disc


def _codex_find(sources: Sequence[Mapping[str, Any]], key: str, trusted_only: bool = True) -> tuple[Any, str] | None:
    best: tuple[float, Any, str] | None = None
    for s in sources:
        if s.get("surface") != "codex" or s.get("scope") == "managed-requirements":
            continue
        if trusted_only and s.get("applies") is False:
            continue
        content = s.get("content")
        if isinstance(content, dict) and key in content and (best is None or s["precedence"] > best[0]):
            best = (s["precedence"], content[key], s["path"])
    return None if best is None else (best[1], best[2])


def _codex_setting(sources: Sequence[Mapping[str, Any]], key: str, trusted_only: bool = True) -> Any:
    found = _codex_find(sources, key, trusted_only)
    return None if found is None else found[0]


# --------------------------------------------------------------------------- Copilot CLI


def discover_copilot(
    home: Path,
    project_root: Path,
    cwd: Path,
    env: Mapping[str, str],
    *,
    context: str = "session",
    roots: Roots | None = None,
    upward_limit: Path | None = None,
    include_user: bool = True,
    system_root: Path | None = None,
) -> Discovery:
    """GitHub Copilot CLI instructions and settings, per the Copilot CLI docs.

    Instructions: ``$COPILOT_HOME/copilot-instructions.md`` (default
    ``~/.copilot``) and ``$COPILOT_HOME/instructions/**/*.instructions.md``;
    in the repository root (git root), cwd and the directories between them:
    ``.github/copilot-instructions.md`` and ``AGENTS.md`` (root AGENTS.md is
    primary, others additional); ``.github/instructions/**/*.instructions.md``
    at the repository root and in cwd, applying only to files matching their
    ``applyTo`` frontmatter; ``CLAUDE.md`` / ``GEMINI.md`` at the repository
    root; and AGENTS.md plus ``.github/instructions`` in each directory of
    ``COPILOT_CUSTOM_INSTRUCTIONS_DIRS``.

    Settings (later wins): MDM managed (unobserved here) < user
    ``$COPILOT_HOME/settings.json`` (JSONC) < repository
    ``.github/copilot/settings.json`` < local
    ``.github/copilot/settings.local.json`` < environment < flags. MCP: user
    ``$COPILOT_HOME/mcp-config.json``; project ``.mcp.json`` /
    ``.github/mcp.json`` win on name conflicts. ``config.json`` (auth and
    app state) is never opened.
    """
    roots = roots or default_roots(home, project_root, system_root)
    copilot_home = _env_path(env, "COPILOT_HOME", home)
    if copilot_home is not None:
        roots = roots.with_root("$COPILOT_HOME/", copilot_home)
    else:
        copilot_home = home / ".copilot"
    disc = Discovery("copilot")
    disc.discovery_roots[context] = roots.label(cwd)
    seen: set[str] = set()

    def add(p: Path, scope: str, kind: str, load: str = "startup", apply_to: list[str] | None = None) -> None:
        key = os.path.abspath(p)
        if key in seen or not _exists(p):
            return
        seen.add(key)
        entry, data = _entry_for(p, roots, scope=scope, kind=kind, load=load, context=context)
        if kind == "path-instructions" and data is not None:
            fm = parse_frontmatter(data)
            patterns = _split_patterns(fm.get("applyTo"))
            entry.apply_to = patterns
            entry.load = "conditional" if patterns and patterns != ["**"] and patterns != ["**/*"] else "startup"
        disc.entries.append(entry)

    if include_user:
        add(copilot_home / "copilot-instructions.md", "user", "copilot-instructions")
        for p in _glob_md(copilot_home / "instructions", ".instructions.md"):
            add(p, "user", "path-instructions")
    repo_root = _find_marker_root(cwd, (".git",), upward_limit) or Path(os.path.abspath(project_root))
    chain = _walk_up(cwd, repo_root) if _is_under(cwd, repo_root) else [Path(os.path.abspath(cwd))]
    for d in chain:
        is_root = os.path.abspath(d) == os.path.abspath(repo_root)
        add(d / ".github" / "copilot-instructions.md", "repository" if is_root else "directory", "copilot-instructions")
        add(d / "AGENTS.md", "primary" if is_root else "additional", "agents")
    for d in (repo_root, Path(os.path.abspath(cwd))):
        for p in _glob_md(d / ".github" / "instructions", ".instructions.md"):
            add(p, "repository", "path-instructions")
    for name in ("CLAUDE.md", "GEMINI.md"):
        add(repo_root / name, "repository", "agents")
    extra_dirs = [x.strip() for x in env.get("COPILOT_CUSTOM_INSTRUCTIONS_DIRS", "").split(",") if x.strip()]
    for i, raw in enumerate(extra_dirs):
        d = Path(os.path.expanduser(raw))
        roots_i = roots
        if not any(_is_under(d, Path(r)) for _, r in roots.roots):
            roots_i = roots.with_root(f"$COPILOT_CUSTOM_INSTRUCTIONS_DIRS[{i}]/", d)
        prev = roots
        roots = roots_i
        add(d / "AGENTS.md", "custom-dir", "agents")
        for p in _glob_md(d / ".github" / "instructions", ".instructions.md"):
            add(p, "custom-dir", "path-instructions")
        roots = prev

    sources = disc.config
    if include_user:
        sources.append(
            {
                "surface": "copilot",
                "context": context,
                "path": "mdm:managed-settings",
                "scope": "managed",
                "precedence": 0,
                "format": "mdm",
                "status": UNOBSERVED,
            }
        )
        sources.append(
            config_source(
                copilot_home / "settings.json",
                roots,
                surface="copilot",
                scope="user",
                precedence=1,
                fmt="jsonc",
                spec=COPILOT_SETTINGS_SPEC,
                context=context,
            )
        )
        sources.append(
            config_source(
                copilot_home / "mcp-config.json",
                roots,
                surface="copilot",
                scope="user-mcp",
                precedence=1,
                fmt="json",
                spec=COPILOT_MCP_SPEC,
                context=context,
            )
        )
    sources.append(
        config_source(
            repo_root / ".github" / "copilot" / "settings.json",
            roots,
            surface="copilot",
            scope="repository",
            precedence=2,
            fmt="jsonc",
            spec=COPILOT_SETTINGS_SPEC,
            context=context,
        )
    )
    sources.append(
        config_source(
            repo_root / ".github" / "copilot" / "settings.local.json",
            roots,
            surface="copilot",
            scope="local",
            precedence=3,
            fmt="jsonc",
            spec=COPILOT_SETTINGS_SPEC,
            context=context,
        )
    )
    sources.append(
        config_source(
            repo_root / ".mcp.json",
            roots,
            surface="copilot",
            scope="project-mcp",
            precedence=2,
            fmt="json",
            spec=MCP_JSON_SPEC,
            context=context,
        )
    )
    sources.append(
        config_source(
            repo_root / ".github" / "mcp.json",
            roots,
            surface="copilot",
            scope="project-mcp",
            precedence=2,
            fmt="json",
            spec=MCP_JSON_SPEC,
            context=context,
        )
    )
    # the cross-tool subset Copilot reads from Claude's project settings
    for name, prec in (("settings.json", 2), ("settings.local.json", 3)):
        sources.append(
            config_source(
                repo_root / ".claude" / name,
                roots,
                surface="copilot",
                scope="claude-shared",
                precedence=prec,
                fmt="json",
                spec={k: True for k in ("companyAnnouncements", "disableAllHooks", "enabledPlugins")}
                | {"hooks": "digest", "extraKnownMarketplaces": "digest"},
                context=context,
            )
        )
    return disc


def applies_to(entry: Mapping[str, Any], rel_path: str) -> bool:
    """Whether a path-specific instruction entry applies to a repository-relative file path."""
    patterns = entry.get("apply_to")
    if not patterns:
        return entry.get("load") != "conditional"
    return any(
        fnmatch.fnmatchcase(rel_path, p) or fnmatch.fnmatchcase(rel_path, p.replace("**/", "")) for p in patterns
    )


# --------------------------------------------------------------------------- generic


def discover_generic(
    home: Path,
    project_root: Path,
    cwd: Path,
    env: Mapping[str, str],
    *,
    config_paths: Sequence[Path] = (),
    instruction_paths: Sequence[Path] = (),
    context: str = "session",
    roots: Roots | None = None,
    system_root: Path | None = None,
) -> Discovery:
    """Files the user names with ``--agent-config`` / ``--agent-instructions``.

    We cannot know an unknown product's discovery rules, so only the named
    files count, in the order given. Instruction files are hashed like any
    other (raw + normalised, no import semantics). Configuration files are
    parsed when JSON or TOML (duplicate keys rejected) and contribute only a
    canonical digest of their parsed value, never content: no allowlist of
    safe keys exists for a product we do not know. Other formats contribute
    their normalised text hash.
    """
    roots = roots or default_roots(home, project_root, system_root)
    disc = Discovery("generic")
    disc.discovery_roots[context] = roots.label(cwd)
    for p in instruction_paths:
        p = _absolute(p, cwd, home)
        entry, data = _entry_for(p, roots, scope="user-named", kind="named", load="startup", context=context)
        disc.entries.append(entry)
        if data is None:
            disc.missing.append(
                {
                    "context": context,
                    "path": entry.path,
                    "referenced_by": "--agent-instructions",
                    "reason": entry.status,
                }
            )
    for i, p in enumerate(config_paths):
        p = _absolute(p, cwd, home)
        disc.config.append(
            config_source(
                p,
                roots,
                surface="generic",
                scope="user-named",
                precedence=i,
                fmt=_format_for(p),
                spec=None,
                context=context,
            )
        )
    return disc


def _absolute(p: Path, cwd: Path, home: Path) -> Path:
    s = os.fspath(p)
    if s.startswith("~/"):
        return home / s[2:]
    return p if p.is_absolute() else cwd / p


# --------------------------------------------------------------------------- dispatch


def surface_rules_for(adapter: Mapping[str, Any]) -> str:
    """Which product's documented rules apply to an adapter description."""
    text = f"{adapter.get('name', '')} {adapter.get('product', '')}".lower()
    if "claude" in text:
        return "claude-code"
    if "codex" in text:
        return "codex"
    if "copilot" in text:
        return "copilot"
    return "generic"


def discover(
    rules: str,
    home: Path,
    project_root: Path,
    cwd: Path,
    env: Mapping[str, str],
    *,
    task_repos: Mapping[str, Path] | None = None,
    system_root: Path | None = None,
    platform: str = "linux",
    config_paths: Sequence[Path] = (),
    instruction_paths: Sequence[Path] = (),
    profile: str | None = None,
) -> Discovery:
    """User/managed scope once, then project scope for the session or for each task repository.

    When task repositories are given, the agent runs in a private copy of
    each one, so project-scope discovery happens per task with the task
    repository as project root and cwd, and the upward walk stops there.
    Without task repositories, discovery uses project_root and cwd.
    """
    if rules not in SURFACE_RULES:
        raise AgentDriftError(f"unknown surface rules {rules!r}; known: {', '.join(SURFACE_RULES)}")
    task_repos = dict(task_repos or {})
    base_pairs: list[tuple[str, Path | None]] = [("~/", home), ("project:", project_root), ("system:/", system_root)]
    base_pairs += [(f"task:{tid}:", p) for tid, p in sorted(task_repos.items())]
    roots = Roots.build(base_pairs)
    total = Discovery(rules)
    generic = discover_generic(
        home, project_root, cwd, env, config_paths=config_paths, instruction_paths=instruction_paths, roots=roots
    )
    if rules == "generic":
        total.extend(generic)
        return total
    if not generic.entries and not generic.config:
        generic.discovery_roots = {}

    def one(context: str, proot: Path, pcwd: Path, include_user: bool, limit: Path | None) -> Discovery:
        if rules == "claude-code":
            return discover_claude_code(
                home,
                proot,
                pcwd,
                env,
                system_root=system_root,
                platform=platform,
                context=context,
                roots=roots,
                upward_limit=limit,
                include_user=include_user,
            )
        if rules == "codex":
            return discover_codex(
                home,
                proot,
                pcwd,
                env,
                system_root=system_root,
                context=context,
                roots=roots,
                upward_limit=limit,
                include_user=include_user,
                profile=profile,
            )
        return discover_copilot(
            home,
            proot,
            pcwd,
            env,
            context=context,
            roots=roots,
            upward_limit=limit,
            include_user=include_user,
            system_root=system_root,
        )

    if task_repos:
        # user and managed scope once, then project scope per task repository
        user = _user_only(rules, one, home)
        total.extend(user)
        for tid, repo in sorted(task_repos.items()):
            part = one(f"task:{tid}", repo, repo, False, repo)
            total.extend(part)
            total.facts.setdefault(f"task:{tid}", {}).update(
                surface_facts(rules, user.config + part.config, env, profile)
            )
    else:
        part = one("session", project_root, cwd, True, None)
        total.extend(part)
        total.facts.setdefault("session", {}).update(surface_facts(rules, part.config, env, profile))
    total.extend(generic)
    return total


def _user_only(rules: str, one: Any, home: Path) -> Discovery:
    """User/managed-scope sources only: run discovery from an empty, non-existent project path under home."""
    # A project path that does not exist yields no project-scope files; the
    # walk is limited to it so no ancestor (e.g. home itself) is visited.
    ghost = home / ".agentdrift-no-project"
    disc = one("user", ghost, ghost, True, ghost)
    disc.config = [
        s
        for s in disc.config
        if not str(s.get("path", "")).startswith("~/.agentdrift-no-project") and s.get("scope") != "local-mcp"
    ]
    disc.entries = [e for e in disc.entries if not e.path.startswith("~/.agentdrift-no-project")]
    disc.discovery_roots = {"user": "~/"}
    disc.facts = {}
    disc.limits = {k: v for k, v in disc.limits.items() if not k.startswith("codex:")}
    return disc
