"""Claude Code: where the product reads its instructions and configuration.

Per the Claude Code memory, settings, skills, subagents and slash-command
docs (read when this was written). The generic machinery (roots, hashing,
allowlisting) is in ``pytest_agentdrift.agents.discovery_base`` and the
user-once / per-task orchestration in ``pytest_agentdrift.manifest.discovery``; this module holds only what is
Claude Code's own: file names, discovery order, precedence, the allowlist of
settings keys, which facts the settings carry, which trees a bundle
snapshot takes, and which environment names belong to it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Unpack

from pytest_agentdrift.agents.discovery_base import (
    MCP_JSON_SPEC,
    AllowSpec,
    ConfigFile,
    ConfigSource,
    Discovery,
    Fact,
    InstructionEntry,
    Product,
    Scan,
    Where,
    deep_merge,
    discover_product,
    entry_for,
    glob_files,
    highest,
    lookup,
    nested_files,
    parse_frontmatter,
    split_patterns,
    walk_up,
)

#: the rules name recorded as the manifest's ``surface_rules``
RULES = "claude-code"

#: Claude Code memory docs: "Imported files can recursively import additional
#: files, with a max-depth of 5 hops."
CLAUDE_IMPORT_MAX_DEPTH = 5

CLAUDE_SETTINGS_SPEC: AllowSpec = {
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

CLAUDE_JSON_SPEC: AllowSpec = {"mcpServers": "mcp", "autoUpdates": True}
CLAUDE_JSON_PROJECT_SPEC: AllowSpec = {
    "mcpServers": "mcp",
    "allowedTools": True,
    "enabledMcpjsonServers": True,
    "disabledMcpjsonServers": True,
    "hasTrustDialogAccepted": True,
}

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
    """Memory files and what they @import, up to a depth, into one discovery pass."""

    def __init__(self, scan: Scan, max_depth: int):
        self.scan = scan
        self.max_depth = max_depth

    def add(
        self,
        path: Path,
        *,
        scope: str,
        kind: str,
        load: str,
        follow_imports: bool = True,
    ) -> None:
        added = self.scan.add_once(path, scope=scope, kind=kind, load=load)
        if added is None:
            return
        entry, data = added
        if kind == "rules" and data is not None:
            fm = parse_frontmatter(data)
            if "paths" in fm:
                entry.apply_to = split_patterns(fm["paths"])
                entry.load = "conditional"
        if data is not None and follow_imports:
            self._imports(entry, path, data, depth=0)

    def _missing(self, label: str, parent: InstructionEntry, reason: str) -> None:
        self.scan.disc.missing.append(
            {"context": self.scan.context, "path": label, "referenced_by": parent.path, "reason": reason}
        )

    def _imports(self, parent: InstructionEntry, path: Path, data: bytes, depth: int) -> None:
        scan = self.scan
        for target in claude_imports(data.decode("utf-8", errors="replace")):
            resolved = _resolve_import(target, path.parent, scan.home)
            label = scan.roots.label(resolved)
            parent.imports.append(label)
            if depth + 1 > self.max_depth:
                self._missing(label, parent, f"beyond max import depth {self.max_depth}")
                continue
            key = os.path.abspath(resolved)
            if key in scan.seen:
                continue  # cycle or already loaded: the edge stays in the graph
            scan.seen.add(key)
            entry, child = entry_for(
                resolved,
                scan.roots,
                scope="import",
                kind="import",
                load=parent.load,
                context=scan.context,
                depth=depth + 1,
                imported_by=parent.path,
            )
            if child is None:
                self._missing(label, parent, entry.status)
                continue
            scan.disc.entries.append(entry)
            self._imports(entry, resolved, child, depth + 1)


def _claude_managed_dir(system_root: Path | None, platform: str) -> Path | None:
    if system_root is None:
        return None
    if platform == "darwin":
        return system_root / "Library" / "Application Support" / "ClaudeCode"
    if platform.startswith("win"):
        return system_root / "Program Files" / "ClaudeCode"
    return system_root / "etc" / "claude-code"


#: settings and MCP files, lowest precedence number first within a scope (a higher number wins);
#: ``app_state`` is ``~/.claude.json`` (beside ``$CLAUDE_CONFIG_DIR``'s files when it is set)
CONFIG_FILES = (
    ConfigFile("managed", "managed-settings.json", "managed", 5, "json", CLAUDE_SETTINGS_SPEC, user_scope=True),
    ConfigFile("managed", "managed-mcp.json", "managed-mcp", 5, "json", MCP_JSON_SPEC, user_scope=True),
    ConfigFile("user", "settings.json", "user", 1, "json", CLAUDE_SETTINGS_SPEC, user_scope=True),
    ConfigFile("project", ".claude/settings.json", "project", 2, "json", CLAUDE_SETTINGS_SPEC),
    ConfigFile("project", ".claude/settings.local.json", "local", 3, "json", CLAUDE_SETTINGS_SPEC),
    ConfigFile("project", ".mcp.json", "project-mcp", 2, "json", MCP_JSON_SPEC),
    # ~/.claude.json holds account details and app state: only the MCP inventory is read
    ConfigFile("app_state", ".claude.json", "user-mcp", 1, "json", CLAUDE_JSON_SPEC, user_scope=True),
)
#: memory files every directory from the outermost ancestor down to cwd may hold: (path, scope)
DIRECTORY_MEMORY = (("CLAUDE.md", "project"), (".claude/CLAUDE.md", "project"), ("CLAUDE.local.md", "local"))


def _find(scan: Scan) -> None:
    """Claude Code memory, settings and MCP, per the Claude Code memory and settings docs.

    Memory (startup): managed CLAUDE.md; user ``~/.claude/CLAUDE.md`` and
    ``~/.claude/rules/**/*.md``; then every directory from the outermost
    ancestor down to cwd: ``CLAUDE.md``, ``.claude/CLAUDE.md``,
    ``CLAUDE.local.md``, ``.claude/rules/**/*.md`` (rules with ``paths``
    frontmatter are conditional). ``@path`` imports are followed up to 5
    hops, relative to the importing file. CLAUDE.md files below cwd are
    recorded as ``on_demand`` (loaded when the agent reads that subtree).

    Skills (``.claude/skills/*/SKILL.md``), subagents (``.claude/agents``)
    and slash commands (``.claude/commands``), in the user dir and the
    project root, are ``on_demand`` entries.

    Settings: managed-settings.json > .claude/settings.local.json >
    .claude/settings.json > ~/.claude/settings.json (higher precedence
    number wins); MCP: managed-mcp.json, project ``.mcp.json``,
    ``~/.claude.json`` (user ``mcpServers`` and this project's entry).
    ``CLAUDE_CONFIG_DIR`` relocates ``~/.claude``.
    """
    scan.disc.limits["claude_import_max_depth"] = CLAUDE_IMPORT_MAX_DEPTH
    walker = _ClaudeWalker(scan, CLAUDE_IMPORT_MAX_DEPTH)
    managed = _claude_managed_dir(scan.system_root, scan.platform)
    if scan.include_user:
        _user_memory(walker, managed, scan.product_home)
    for d in walk_up(scan.cwd, scan.upward_limit):
        for name, scope in DIRECTORY_MEMORY:
            walker.add(d / name, scope=scope, kind="memory", load="startup")
        _rules(walker, d / ".claude" / "rules", "project")
    for p in nested_files(scan.cwd, ("CLAUDE.md", "CLAUDE.local.md")):
        walker.add(p, scope="nested", kind="memory", load="on_demand")
    _add_components(walker, Path(scan.project_root) / ".claude", "project")
    app_state = scan.product_home if scan.relocated else scan.home
    scan.read_config(
        CONFIG_FILES,
        {"managed": managed, "user": scan.product_home, "project": Path(scan.project_root), "app_state": app_state},
    )
    if scan.include_user:
        scan.disc.config.append(_project_entry(scan, app_state / ".claude.json"))


def _rules(walker: _ClaudeWalker, directory: Path, scope: str) -> None:
    for p in glob_files(directory):
        walker.add(p, scope=scope, kind="rules", load="startup")


def _user_memory(walker: _ClaudeWalker, managed: Path | None, user_dir: Path) -> None:
    """Managed and user memory, rules and components: read once per session."""
    if managed is not None:
        walker.add(managed / "CLAUDE.md", scope="managed", kind="memory", load="startup")
        _rules(walker, managed / ".claude" / "rules", "managed")
    walker.add(user_dir / "CLAUDE.md", scope="user", kind="memory", load="startup")
    _rules(walker, user_dir / "rules", "user")
    _add_components(walker, user_dir, "user")


def _project_entry(scan: Scan, claude_json: Path) -> ConfigSource:
    """This project's entry of ~/.claude.json: local-scope MCP servers and tool approvals (its
    other keys, e.g. prompt history, are names only)."""
    project_key = os.path.abspath(scan.project_root)
    local = scan.config(
        claude_json,
        scope="local-mcp",
        precedence=3,
        fmt="json",
        spec=CLAUDE_JSON_PROJECT_SPEC,
        select=lambda doc: (doc.get("projects") or {}).get(project_key, {}) if isinstance(doc, dict) else {},
    )
    local.pop("raw_sha256", None)  # the same file's raw hash is already on the user-mcp source
    local["path"] = local["path"] + "#projects[" + scan.roots.label(scan.project_root) + "]"
    return local


def discover_claude_code(
    home: Path, project_root: Path, cwd: Path, env: Mapping[str, str], **where: Unpack[Where]
) -> Discovery:
    """Claude Code's discovery (see _find); ``where``: the keywords of discovery_base.discover_product."""
    return discover_product(PRODUCT, home, project_root, cwd, env, **where)


def claude_documented_merge(settings: Sequence[ConfigSource]) -> object:
    """The merge the settings docs describe, over the allowlisted content.

    Lower precedence first; objects merge key by key; arrays are
    concatenated and de-duplicated (the docs: array settings are merged
    across scopes); scalars from a higher scope win. This is our reading of
    the documentation, recorded as ``documented_merge`` next to
    ``effective_merge: "unobserved"``: the product does not expose the
    merge it actually performs.
    """
    merged: object = {}
    for s in sorted(settings, key=lambda s: (s["precedence"], s["path"])):
        if isinstance(s.get("content"), dict):
            merged = deep_merge(merged, s["content"])
    return merged


def _add_components(walker: _ClaudeWalker, base: Path, scope: str) -> None:
    """Skills, subagents and slash commands under one ``.claude`` directory.

    A skill's SKILL.md is read when the skill is invoked (its description
    is listed at startup), a subagent's prompt when it is delegated to, a
    command's text when it is typed: all ``on_demand``, all instruction
    text the agent can be given.
    """
    # memory-file @imports are a CLAUDE.md feature: these files are hashed as they are, not followed
    for p in sorted(base.glob("skills/*/SKILL.md"), key=lambda p: p.as_posix()):
        walker.add(p, scope=scope, kind="skill", load="on_demand", follow_imports=False)
    for p in glob_files(base / "agents"):
        walker.add(p, scope=scope, kind="subagent", load="on_demand", follow_imports=False)
    for p in glob_files(base / "commands"):
        walker.add(p, scope=scope, kind="command", load="on_demand", follow_imports=False)


def facts(sources: Sequence[ConfigSource], env: Mapping[str, str], profile: str | None = None) -> dict[str, Fact]:
    """What the settings files say about model, permission mode, sandbox, auto-update.

    Each fact is the value of the highest-precedence source that sets it,
    with that source's label: a *configured* value, not the effective one
    (flags and managed policy can still override it at run time).
    """
    found: dict[str, Fact] = {}
    settings = [
        s for s in sources if s.get("surface") == RULES and s.get("scope") in ("managed", "user", "project", "local")
    ]
    for name, keys in (
        ("model", ("model",)),
        ("permission_mode", ("permissions", "defaultMode")),
        ("sandbox", ("sandbox",)),
    ):
        hit = highest(settings, lookup(*keys))
        if hit is not None:
            found[name] = {"value": hit[0], "source": hit[1]}
    auto = highest(settings, lookup("autoUpdates"))
    if env.get("DISABLE_AUTOUPDATER"):
        found["auto_update_state"] = {"value": "disabled", "source": "env:DISABLE_AUTOUPDATER"}
    elif auto is not None:
        found["auto_update_state"] = {"value": "enabled" if auto[0] else "disabled", "source": auto[1]}
    found["documented_merge"] = {"value": claude_documented_merge(settings), "source": "settings docs"}
    # a settings file's `env` block reaches the CLI's environment over the session's own; its values
    # are recorded by name only, so an endpoint set there is known to be set, not where it points
    redirects = [src for src in settings if "ANTHROPIC_BASE_URL" in _env_names(src.get("content"))]
    if redirects:
        top = max(redirects, key=lambda src: src["precedence"])
        found["model_endpoint"] = {"value": {"settings_env": "ANTHROPIC_BASE_URL"}, "source": top["path"]}
    return found


def _env_names(content: Any) -> list[str]:
    names = content.get("env") if isinstance(content, dict) else None
    if isinstance(names, dict):
        return list(names)
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


#: the product's rules for the shared discovery pass; ``CLAUDE_CONFIG_DIR`` relocates ``~/.claude``
PRODUCT = Product(RULES, home_env="CLAUDE_CONFIG_DIR", home_dir=".claude", find=_find)
#: the uniform entry point ``manifest.discovery.discover_with`` calls (every product takes the same keywords)
discover = discover_claude_code


# --------------------------------------------------------------------------- bundles and runtime

#: directories a bundle snapshot takes whole, relative to the project root
#: ("project") and to the home directory ("user"; ``.claude`` is read from
#: ``$CLAUDE_CONFIG_DIR`` when set): every file of a skill (its scripts and
#: references too), subagents, commands, rules and hook scripts
BUNDLE_TREES = {
    "project": (".claude/skills", ".claude/agents", ".claude/commands", ".claude/rules", ".claude/hooks"),
    "user": (".claude/skills", ".claude/agents", ".claude/commands", ".claude/rules", ".claude/hooks"),
}
#: environment names whose values select behaviour and are never secret (recorded in the manifest)
NON_SECRET_ENV_VALUES = frozenset(
    {
        "DISABLE_AUTOUPDATER",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
        "MAX_THINKING_TOKENS",
        "BASH_DEFAULT_TIMEOUT_MS",
        "BASH_MAX_TIMEOUT_MS",
        "MCP_TIMEOUT",
        "MCP_TOOL_TIMEOUT",
        "DISABLE_TELEMETRY",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "ANTHROPIC_MODEL",
        "ANTHROPIC_SMALL_FAST_MODEL",
    }
)
#: environment names that hold a private path: names only, never values
PATHLIKE_ENV = frozenset({"CLAUDE_CONFIG_DIR"})
#: ``--agent-with plugin:DIR``: where a plugin directory's components go in a
#: bundle's project scope (plugin dir -> project path). Anything else in the
#: plugin (hooks, MCP servers, its manifest) needs the product's plugin
#: installer and is listed as not installed, never silently dropped.
PLUGIN_LAYOUT = {"skills": ".claude/skills", "agents": ".claude/agents", "commands": ".claude/commands"}
