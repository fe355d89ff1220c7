"""Configuration sources: parsing a product's configuration files strictly (JSON, JSONC, TOML,
duplicate keys rejected), recording one source, hashing the sources into config_hash, and
reading a setting from the highest-precedence source that sets it.

Part of the generic discovery machinery (agents/discovery_base.py re-exports it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeAlias, TypedDict

from pytest_agentdrift.agents.discoveryallow import AllowSpec, allowlist
from pytest_agentdrift.agents.discoveryfiles import Roots, normalise_text, read_bytes
from pytest_agentdrift.canonical import (
    digest,
    load_json_file,
    load_toml_file,
    loads_json_strict,
    read_text_utf8,
    sha256_hex,
)
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.vocabulary import UNOBSERVED


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


# --------------------------------------------------------------------------- parsing


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


# --------------------------------------------------------------------------- one source, and their hash


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


# --------------------------------------------------------------------------- reading a setting


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


__all__ = [
    "ConfigSource",
    "Fact",
    "Getter",
    "canonical_config",
    "config_hash",
    "config_source",
    "deep_merge",
    "fact",
    "format_for",
    "highest",
    "load_config_file",
    "lookup",
    "strip_jsonc",
]
