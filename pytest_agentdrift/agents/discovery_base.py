"""The generic discovery machinery every product's discovery rules are written with.

Roots and labels, reading and normalising instruction text, instruction
entries, configuration parsing (JSON, JSONC, TOML, duplicate keys
rejected), allowlisting of configuration keys and the small helpers each
product's rules use (walking up, nested files, the highest-precedence
value). Each product's rules live in ``agents/<product>/discovery.py`` and
import from here, their shared pass is ``discover_product`` (a product gives
its table of configuration files and the order it reads in), and
``pytest_agentdrift.manifest.discovery`` runs them: user scope once,
project scope per task.
It sits in the agents stage so a product's rules never import a later stage
(pyproject.toml: the pipeline order). Imports no product, reads only what it
is given (see manifest/discovery.py for the normalisation and the outputs).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypeAlias, TypedDict

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


def read_bytes(path: Path) -> tuple[bytes | None, str]:
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


def is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def exists(path: Path) -> bool:
    try:
        return path.exists() or path.is_symlink()
    except OSError:
        return False


def parse_frontmatter(data: bytes) -> dict[str, str | list[str]]:
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
    out: dict[str, str | list[str]] = {}
    current: str | None = None
    for line in text[4:end].split("\n"):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("- ") and current is not None:
            items = out.setdefault(current, [])
            if isinstance(items, list):
                items.append(unquote(stripped[2:].strip()))
            continue
        key, sep, value = stripped.partition(":")
        if not sep:
            continue
        current = key.strip()
        value = value.strip()
        out[current] = unquote(value) if value else []
    return out


def unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def split_patterns(value: object) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        for part in str(item).split(","):
            part = unquote(part.strip())
            if part:
                out.append(part)
    return out


# --------------------------------------------------------------------------- bundle entries


class EntryRecord(TypedDict):
    """One instruction source as instruction-bundle.json records it (InstructionEntry.to_dict)."""

    order: int
    context: str
    path: str
    scope: str
    kind: str
    load: str
    status: str
    size: int | None
    raw_sha256: str | None
    normalised_sha256: str | None
    depth: int
    imported_by: str | None
    imports: list[str]
    apply_to: NotRequired[list[str]]
    loaded_bytes: NotRequired[int]


class ConfigSource(TypedDict, total=False):
    """One configuration source as discovery records it (config_source); a product's rules add
    whether the product trusts it (`trusted`, `applies`)."""

    surface: str
    context: str
    path: str
    scope: str
    precedence: int
    format: str
    status: str
    raw_sha256: str
    size: int
    #: the allowlisted content (allowlist), a parsed JSON or TOML value
    content: object
    unrecorded_keys: list[str]
    canonical_sha256: str
    trusted: bool
    applies: bool


class Fact(TypedDict):
    """A fact read from the configuration: its value and the source that set it."""

    value: object
    source: str


class InstructionBundle(TypedDict):
    """The instruction-bundle.json document (instruction_bundle)."""

    bundle_version: int
    surface_rules: str
    normalisation: str
    discovery_roots: dict[str, str]
    limits: dict[str, object]
    entries: list[EntryRecord]
    import_graph: dict[str, list[str]]
    missing: list[dict[str, str]]


#: how one allowlisted key's value is recorded (see the table above MCP_SERVER_SPEC)
AllowRule: TypeAlias = "bool | str | Mapping[str, AllowRule] | tuple[str, Mapping[str, AllowRule]]"
AllowSpec: TypeAlias = "Mapping[str, AllowRule]"


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

    def to_dict(self, order: int) -> EntryRecord:
        out: EntryRecord = {
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


def entry_for(
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
    data, status = read_bytes(path)
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
    config: list[ConfigSource] = field(default_factory=list)
    discovery_roots: dict[str, str] = field(default_factory=dict)  # context -> cwd label discovery started from
    limits: dict[str, object] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    facts: dict[str, dict[str, Fact]] = field(default_factory=dict)  # context -> {fact: {value, source}}

    def extend(self, other: Discovery) -> None:
        self.entries.extend(other.entries)
        self.missing.extend(other.missing)
        self.config.extend(other.config)
        self.discovery_roots.update(other.discovery_roots)
        self.limits.update(other.limits)
        self.notes.extend(n for n in other.notes if n not in self.notes)
        for ctx, facts in other.facts.items():
            self.facts.setdefault(ctx, {}).update(facts)


def instruction_bundle(discovery: Discovery) -> InstructionBundle:
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
#: (the hash is over normalised text); its raw hash stays in the
#: bundle and in the manifest's provenance, compared as a note.
RAW_ENTRY_KEYS = ("raw_sha256", "size")


def instruction_hash(bundle: Mapping[str, object]) -> str:
    """digest of the bundle without the raw-bytes keys of its entries."""
    view = dict(bundle)
    entries = bundle.get("entries", [])
    if not isinstance(entries, list):
        raise TypeError(f"a bundle's entries are a list, not {type(entries).__name__}")
    view["entries"] = [{k: v for k, v in dict(e).items() if k not in RAW_ENTRY_KEYS} for e in entries]
    return digest(view)


# --------------------------------------------------------------------------- config parsing


def strip_jsonc(text: str) -> str:
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


def _load_jsonc(path: Path) -> object:
    from pytest_agentdrift.canonical import DuplicateKeyError

    text = read_text_utf8(path)
    try:
        return loads_json_strict(strip_jsonc(text))
    except DuplicateKeyError as exc:
        raise AgentDriftError(f"invalid JSON: duplicate key {exc.key!r}", path) from None
    except ValueError as exc:
        raise AgentDriftError(f"invalid JSON: {exc}", path) from None


def _load_toml(path: Path) -> dict[str, object]:
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


def load_config_file(path: Path, fmt: str) -> object:
    """Parse one configuration file strictly: duplicate keys are AgentDriftError (exit 4)."""
    if fmt == "json":
        return load_json_file(path)
    if fmt == "jsonc":
        return _load_jsonc(path)
    if fmt == "toml":
        return _load_toml(path)
    raise AgentDriftError(f"unsupported configuration format {fmt!r}", path)


def format_for(path: Path) -> str | None:
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

MCP_SERVER_SPEC: AllowSpec = {
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
#: project `.mcp.json` (Claude Code, Copilot) and other MCP-only files: the standard MCP layout
MCP_JSON_SPEC: AllowSpec = {"mcpServers": "mcp", "servers": "mcp"}


def _sanitise_url(value: object) -> object:
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


def allowlist(value: object, spec: AllowSpec, roots: Roots) -> tuple[object, list[str]]:
    """Reduce a parsed mapping to allowlisted keys; returns (content, unrecorded key names).

    Explicit nulls of allowlisted keys are kept (null is not absent); array
    order is kept; keys outside the allowlist contribute their dotted name.
    """
    if not isinstance(value, dict):
        # a top-level value that is not an object: keep only its JSON type
        return {"$type": type(value).__name__}, []
    out: dict[str, object] = {}
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


def _apply_rule(v: object, rule: AllowRule, roots: Roots) -> tuple[object, list[str]]:  # noqa: C901 (known debt: split by job when next touched)
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
        servers: dict[str, object] = {}
        nested: list[str] = []
        for name, spec in v.items():
            reduced, unrec = allowlist(spec, MCP_SERVER_SPEC, roots)
            servers[name] = reduced
            nested.extend(f"{name}.{u}" for u in unrec)
        return servers, nested
    if isinstance(rule, tuple) and rule[0] == "each":
        if not isinstance(v, dict):
            return {"$type": type(v).__name__}, []
        items: dict[str, object] = {}
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
    spec: AllowSpec | None,
    context: str = "session",
    select: Callable[[object], object] | None = None,
) -> ConfigSource:
    """One configuration source: raw hash, scope, precedence and allowlisted content.

    ``spec=None`` (a user-named file of an unknown product) records no content
    at all, only ``canonical_sha256`` of the parsed value: we cannot know which
    of its keys are safe, so none is written out.
    ``select`` picks a sub-document before allowlisting (``~/.claude.json``'s
    entry for one project).
    """
    src: ConfigSource = {
        "surface": surface,
        "context": context,
        "path": roots.label(path),
        "scope": scope,
        "precedence": precedence,
        "format": fmt or "unparsed",
    }
    data, status = read_bytes(path)
    if data is None:
        src["status"] = "absent" if status == "missing" else "unreadable"
        return src
    src["status"] = "present"
    src["raw_sha256"] = sha256_hex(data)
    src["size"] = len(data)
    src.update(_recorded_content(path, data, roots, fmt, spec, select))
    return src


def _recorded_content(
    path: Path,
    data: bytes,
    roots: Roots,
    fmt: str | None,
    spec: AllowSpec | None,
    select: Callable[[object], object] | None,
) -> ConfigSource:
    """What a present source records of its content: allowlisted keys, or only a digest."""
    if fmt is None:
        # not a format we parse: the normalised text hash stands in for content
        return {"canonical_sha256": sha256_hex(normalise_text(data)), "content": "not_recorded"}
    parsed = load_config_file(path, fmt)
    if select is not None:
        parsed = select(parsed)
    if spec is None:
        return {"canonical_sha256": digest(parsed), "content": "not_recorded"}
    content, unrecorded = allowlist(parsed, spec, roots)
    return {"content": content, "unrecorded_keys": unrecorded}


# --------------------------------------------------------------------------- one product's pass


@dataclass(frozen=True)
class ConfigFile:
    """One configuration file a product documents: a row of its table of configuration sources.

    ``base`` names the directory ``path`` is relative to (the product's
    rules map each name to a directory, or to None when that place is not
    read in this pass); ``user_scope`` files are read only with the user's
    own scope (once per session, never per task).
    """

    base: str
    path: str
    scope: str
    precedence: int
    fmt: str
    spec: AllowSpec
    user_scope: bool = False


@dataclass(frozen=True)
class Product:
    """What the shared discovery pass needs to know of one product.

    ``home_env`` names the variable that moves the product's user directory
    (default ``home_dir`` under the home directory); ``find`` adds the
    product's instruction entries and configuration sources in its own order.
    """

    rules: str
    home_env: str
    home_dir: str
    find: Callable[[Scan], None]


@dataclass
class Scan:
    """One product's discovery pass: the places it looks at, and what it found so far."""

    home: Path
    project_root: Path
    cwd: Path
    env: Mapping[str, str]
    roots: Roots
    product_home: Path
    relocated: bool  # the product's user directory was moved by its environment variable
    system_root: Path | None
    platform: str
    context: str
    upward_limit: Path | None
    include_user: bool
    profile: str | None
    disc: Discovery
    seen: set[str] = field(default_factory=set)

    def add_once(
        self, path: Path, *, scope: str, kind: str, load: str, roots: Roots | None = None
    ) -> tuple[InstructionEntry, bytes | None] | None:
        """The entry of an instruction file that exists and was not taken yet (appended), else None.

        A file reached twice (a rule directory under two walked ancestors) is
        one instruction the product reads once.
        """
        key = os.path.abspath(path)
        if key in self.seen or not exists(path):
            return None
        self.seen.add(key)
        entry, data = entry_for(path, roots or self.roots, scope=scope, kind=kind, load=load, context=self.context)
        self.disc.entries.append(entry)
        return entry, data

    def config(
        self,
        path: Path,
        *,
        scope: str,
        precedence: int,
        fmt: str | None,
        spec: AllowSpec | None,
        select: Callable[[object], object] | None = None,
    ) -> ConfigSource:
        """config_source for this pass's product, roots and context."""
        return config_source(
            path,
            self.roots,
            surface=self.disc.surface_rules,
            scope=scope,
            precedence=precedence,
            fmt=fmt,
            spec=spec,
            context=self.context,
            select=select,
        )

    def read_config(self, files: Sequence[ConfigFile], bases: Mapping[str, Path | None]) -> None:
        """Append one source per row of a product's table, in table order (the order is hashed)."""
        for row in files:
            base = bases[row.base]
            if base is None or (row.user_scope and not self.include_user):
                continue
            self.disc.config.append(
                self.config(base / row.path, scope=row.scope, precedence=row.precedence, fmt=row.fmt, spec=row.spec)
            )


class Where(TypedDict, total=False):
    """The keywords of discover_product beside its places, which each product's discover_* passes on."""

    system_root: Path | None
    platform: str
    context: str
    roots: Roots | None
    upward_limit: Path | None
    include_user: bool
    profile: str | None


def discover_product(
    product: Product,
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
    profile: str | None = None,
) -> Discovery:
    """One discovery pass over a product's rules: the uniform entry point every product shares.

    ``roots`` labels paths (default: home, project and system root);
    ``upward_limit`` stops the walk up from cwd (the harness runs the agent
    in a private copy of a repository: nothing above it is visible);
    ``include_user`` reads the user and managed scope too; ``profile`` is
    Codex's selected config profile.
    """
    roots = roots or default_roots(home, project_root, system_root)
    moved = env_path(env, product.home_env, home)
    if moved is not None:
        roots = roots.with_root(f"${product.home_env}/", moved)
    disc = Discovery(product.rules)
    disc.discovery_roots[context] = roots.label(cwd)
    scan = Scan(
        home=home,
        project_root=project_root,
        cwd=cwd,
        env=env,
        roots=roots,
        product_home=moved if moved is not None else home / product.home_dir,
        relocated=moved is not None,
        system_root=system_root,
        platform=platform,
        context=context,
        upward_limit=upward_limit,
        include_user=include_user,
        profile=profile,
        disc=disc,
    )
    product.find(scan)
    return disc


def canonical_config(
    sources: Sequence[Mapping[str, object]], *, effective_merge: object = UNOBSERVED, documented_merge: object = None
) -> dict[str, object]:
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
    doc: dict[str, object] = {
        "sources": [{k: s[k] for k in keep if k in s} for s in sources],
        "effective_merge": effective_merge,
    }
    if documented_merge is not None:
        doc["documented_merge"] = documented_merge
    return doc


def config_hash(
    sources: Sequence[Mapping[str, object]], *, effective_merge: object = UNOBSERVED, documented_merge: object = None
) -> str:
    """digest of canonical_config, or "unobserved" when a source could not be read."""
    if any(s.get("status") == "unreadable" for s in sources):
        return UNOBSERVED
    return digest(canonical_config(sources, effective_merge=effective_merge, documented_merge=documented_merge))


# --------------------------------------------------------------------------- helpers


def walk_up(cwd: Path, stop: Path | None) -> list[Path]:
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


def nested_files(top: Path, names: Sequence[str], skip_top: bool = True) -> list[Path]:
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


def glob_files(directory: Path, suffix: str = ".md") -> list[Path]:
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


def find_marker_root(cwd: Path, markers: Sequence[str], stop: Path | None) -> Path | None:
    for d in reversed(walk_up(cwd, stop)):
        if any(exists(d / m) for m in markers):
            return d
    return None


def env_path(env: Mapping[str, str], name: str, home: Path) -> Path | None:
    value = env.get(name)
    if not value:
        return None
    return Path(os.path.expanduser(value.replace("~", os.fspath(home), 1) if value.startswith("~") else value))


def is_under(path: Path, root: Path) -> bool:
    try:
        return Path(os.path.abspath(path)).is_relative_to(os.path.abspath(root))
    except ValueError:
        return False


#: reads one setting of a source's content: (whether it is set, its value)
Getter: TypeAlias = "Callable[[Mapping[str, object]], tuple[bool, object]]"


def highest(sources: Sequence[ConfigSource], getter: Getter) -> tuple[object, str] | None:
    best: tuple[int, object, str] | None = None
    for s in sources:
        content = s.get("content")
        if not isinstance(content, dict):
            continue
        found, value = getter(content)
        if found and (best is None or s["precedence"] > best[0]):
            best = (s["precedence"], value, s["path"])
    return None if best is None else (best[1], best[2])


def lookup(*keys: str) -> Getter:
    def getter(content: Mapping[str, object]) -> tuple[bool, object]:
        cur: object = content
        for k in keys:
            if not isinstance(cur, dict) or k not in cur:
                return False, None
            cur = cur[k]
        return True, cur

    return getter


def fact(found: tuple[object, str] | None) -> Fact | None:
    return None if found is None else {"value": found[0], "source": found[1]}


def deep_merge(low: object, high: object) -> object:
    if isinstance(low, dict) and isinstance(high, dict):
        out = dict(low)
        for k, v in high.items():
            out[k] = deep_merge(low[k], v) if k in low else v
        return out
    if isinstance(low, list) and isinstance(high, list):
        out_list = list(low)
        for item in high:
            if item not in out_list:
                out_list.append(item)
        return out_list
    return high


def applies_to(entry: Mapping[str, object], rel_path: str) -> bool:
    """Whether a path-specific instruction entry applies to a repository-relative file path."""
    patterns = entry.get("apply_to")
    if not patterns:
        return entry.get("load") != "conditional"
    if not isinstance(patterns, list):
        patterns = [patterns]
    patterns = [str(p) for p in patterns]
    return any(
        fnmatch.fnmatchcase(rel_path, p) or fnmatch.fnmatchcase(rel_path, p.replace("**/", "")) for p in patterns
    )
