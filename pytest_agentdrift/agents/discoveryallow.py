"""Allowlisting: which keys of a parsed configuration file are recorded, and how each value is.

A key outside the allowlist is recorded by its name only, so no value that
may be a secret reaches the manifest. Part of the generic discovery
machinery (agents/discovery_base.py re-exports it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TypeAlias

from pytest_agentdrift.agents.discoveryfiles import Roots
from pytest_agentdrift.canonical import digest

#: how one allowlisted key's value is recorded (see the table above MCP_SERVER_SPEC)
AllowRule: TypeAlias = "bool | str | Mapping[str, AllowRule] | tuple[str, Mapping[str, AllowRule]]"
AllowSpec: TypeAlias = "Mapping[str, AllowRule]"

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


def _labelled_path(v: object, roots: Roots) -> object:
    """An absolute path (`~` expanded) as its label under the known roots; any other value as it is."""
    if isinstance(v, str) and os.path.isabs(os.path.expanduser(v)):
        return roots.label(Path(os.path.expanduser(v)))
    return v


def _each_allowlisted(v: object, spec: AllowSpec, roots: Roots) -> tuple[object, list[str]]:
    """A mapping with each value reduced by `spec`: (content, unrecorded key names, each under its
    entry's name); a value that is not a mapping keeps only its JSON type."""
    if not isinstance(v, dict):
        return {"$type": type(v).__name__}, []
    items: dict[str, object] = {}
    nested: list[str] = []
    for name, sub in v.items():
        reduced, unrec = allowlist(sub, spec, roots)
        items[name] = reduced
        nested.extend(f"{name}.{u}" for u in unrec)
    return items, nested


def _apply_rule(v: object, rule: AllowRule, roots: Roots) -> tuple[object, list[str]]:
    """One allowlisted value as `rule` records it: (content, unrecorded key names below it)."""
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
        return _labelled_path(v, roots), []
    if rule == "mcp":
        return _each_allowlisted(v, MCP_SERVER_SPEC, roots)
    if isinstance(rule, tuple) and rule[0] == "each":
        return _each_allowlisted(v, rule[1], roots)
    if isinstance(rule, dict):
        return allowlist(v, rule, roots)
    return {"sha256": digest(v)}, []


__all__ = ["MCP_JSON_SPEC", "MCP_SERVER_SPEC", "AllowRule", "AllowSpec", "allowlist"]
