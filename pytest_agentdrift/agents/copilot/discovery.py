"""GitHub Copilot CLI: where the product reads its instructions and configuration.

Per the Copilot CLI custom-instructions, skills, custom-agents and
configuration-directory docs (read when this was written). The generic
machinery is in ``pytest_agentdrift.agents.discovery_base``; this module holds
what is Copilot's own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Unpack

from pytest_agentdrift.agents.discovery_base import (
    MCP_JSON_SPEC,
    UNOBSERVED,
    AllowSpec,
    ConfigFile,
    ConfigSource,
    Discovery,
    Fact,
    Product,
    Roots,
    Scan,
    Where,
    discover_product,
    find_marker_root,
    glob_files,
    highest,
    is_under,
    lookup,
    parse_frontmatter,
    split_patterns,
    walk_up,
)

#: the rules name recorded as the manifest's ``surface_rules``
RULES = "copilot"

COPILOT_SETTINGS_SPEC: AllowSpec = {
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
COPILOT_MCP_SPEC: AllowSpec = {"mcpServers": "mcp", "servers": "mcp"}


#: the settings Copilot reads from Claude Code's project settings (the cross-tool subset)
CLAUDE_SHARED_SPEC: AllowSpec = {k: True for k in ("companyAnnouncements", "disableAllHooks", "enabledPlugins")} | {
    "hooks": "digest",
    "extraKnownMarketplaces": "digest",
}
#: settings and MCP files (later wins: a higher precedence number), after the MDM managed settings
CONFIG_FILES = (
    ConfigFile("user", "settings.json", "user", 1, "jsonc", COPILOT_SETTINGS_SPEC, user_scope=True),
    ConfigFile("user", "mcp-config.json", "user-mcp", 1, "json", COPILOT_MCP_SPEC, user_scope=True),
    ConfigFile("repo", ".github/copilot/settings.json", "repository", 2, "jsonc", COPILOT_SETTINGS_SPEC),
    ConfigFile("repo", ".github/copilot/settings.local.json", "local", 3, "jsonc", COPILOT_SETTINGS_SPEC),
    ConfigFile("repo", ".mcp.json", "project-mcp", 2, "json", MCP_JSON_SPEC),
    ConfigFile("repo", ".github/mcp.json", "project-mcp", 2, "json", MCP_JSON_SPEC),
    ConfigFile("repo", ".claude/settings.json", "claude-shared", 2, "json", CLAUDE_SHARED_SPEC),
    ConfigFile("repo", ".claude/settings.local.json", "claude-shared", 3, "json", CLAUDE_SHARED_SPEC),
)
#: path-specific instruction files: ``*.instructions.md`` under an ``instructions`` directory
PATH_INSTRUCTIONS = ".instructions.md"


def _find(scan: Scan) -> None:
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
    if scan.include_user:
        _add(scan, scan.product_home / "copilot-instructions.md", "user", "copilot-instructions")
        for p in glob_files(scan.product_home / "instructions", PATH_INSTRUCTIONS):
            _add(scan, p, "user", "path-instructions")
    repo_root = find_marker_root(scan.cwd, (".git",), scan.upward_limit) or Path(os.path.abspath(scan.project_root))
    _repository_instructions(scan, repo_root)
    _components(scan, repo_root)
    _custom_dirs(scan)
    if scan.include_user:
        scan.disc.config.append(_managed_settings(scan.context))
    scan.read_config(CONFIG_FILES, {"user": scan.product_home, "repo": repo_root})


def _add(scan: Scan, path: Path, scope: str, kind: str, load: str = "startup", roots: Roots | None = None) -> None:
    """One instruction file; a path-specific one applies where its ``applyTo`` frontmatter says."""
    added = scan.add_once(path, scope=scope, kind=kind, load=load, roots=roots)
    if added is None or kind != "path-instructions":
        return
    entry, data = added
    if data is None:
        return
    patterns = split_patterns(parse_frontmatter(data).get("applyTo"))
    entry.apply_to = patterns
    entry.load = "conditional" if patterns and patterns != ["**"] and patterns != ["**/*"] else "startup"


def _repository_instructions(scan: Scan, repo_root: Path) -> None:
    """From the repository root down to cwd, then the root's own CLAUDE.md / GEMINI.md."""
    cwd = Path(os.path.abspath(scan.cwd))
    chain = walk_up(scan.cwd, repo_root) if is_under(scan.cwd, repo_root) else [cwd]
    for d in chain:
        is_root = os.path.abspath(d) == os.path.abspath(repo_root)
        scope = "repository" if is_root else "directory"
        _add(scan, d / ".github" / "copilot-instructions.md", scope, "copilot-instructions")
        _add(scan, d / "AGENTS.md", "primary" if is_root else "additional", "agents")
    for d in (repo_root, cwd):
        for p in glob_files(d / ".github" / "instructions", PATH_INSTRUCTIONS):
            _add(scan, p, "repository", "path-instructions")
    for name in ("CLAUDE.md", "GEMINI.md"):
        _add(scan, repo_root / name, "repository", "agents")


def _components(scan: Scan, repo_root: Path) -> None:
    """Skills (SKILL.md read when the skill is used) and custom agents: on_demand instruction text."""
    skill_dirs = [repo_root / ".github" / "skills", repo_root / ".claude" / "skills", repo_root / ".agents" / "skills"]
    agent_dirs = [(repo_root / ".github" / "agents", "repository")]
    if scan.include_user:
        skill_dirs = [scan.product_home / "skills", scan.home / ".agents" / "skills", *skill_dirs]
        agent_dirs.insert(0, (scan.product_home / "agents", "user"))
    for base in skill_dirs:
        for p in sorted(base.glob("*/SKILL.md"), key=lambda p: p.as_posix()):
            _add(scan, p, "user" if not is_under(p, repo_root) else "repository", "skill", load="on_demand")
    for base, scope in agent_dirs:
        for p in glob_files(base, ".agent.md"):
            _add(scan, p, scope, "subagent", load="on_demand")


def _custom_dirs(scan: Scan) -> None:
    """AGENTS.md and ``.github/instructions`` of each ``COPILOT_CUSTOM_INSTRUCTIONS_DIRS`` directory;
    one outside every named root is labelled by its place in the variable, never by its path."""
    extra_dirs = [x.strip() for x in scan.env.get("COPILOT_CUSTOM_INSTRUCTIONS_DIRS", "").split(",") if x.strip()]
    for i, raw in enumerate(extra_dirs):
        d = Path(os.path.expanduser(raw))
        roots = scan.roots
        if not any(is_under(d, Path(r)) for _, r in roots.roots):
            roots = roots.with_root(f"$COPILOT_CUSTOM_INSTRUCTIONS_DIRS[{i}]/", d)
        _add(scan, d / "AGENTS.md", "custom-dir", "agents", roots=roots)
        for p in glob_files(d / ".github" / "instructions", PATH_INSTRUCTIONS):
            _add(scan, p, "custom-dir", "path-instructions", roots=roots)


def _managed_settings(context: str) -> ConfigSource:
    """MDM-managed settings: a source that exists for the product but that the harness cannot read."""
    return {
        "surface": RULES,
        "context": context,
        "path": "mdm:managed-settings",
        "scope": "managed",
        "precedence": 0,
        "format": "mdm",
        "status": UNOBSERVED,
    }


def discover_copilot(
    home: Path, project_root: Path, cwd: Path, env: Mapping[str, str], **where: Unpack[Where]
) -> Discovery:
    """Copilot CLI's discovery (see _find); ``where``: the keywords of discovery_base.discover_product."""
    return discover_product(PRODUCT, home, project_root, cwd, env, **where)


def facts(sources: Sequence[ConfigSource], env: Mapping[str, str], profile: str | None = None) -> dict[str, Fact]:
    """Model, reasoning effort and auto-update as configured (later settings files win)."""
    found: dict[str, Fact] = {}
    settings = [s for s in sources if s.get("surface") == RULES and s.get("scope") in ("user", "repository", "local")]
    for name, key in (("model", "model"), ("model_reasoning_effort", "effortLevel")):
        hit = highest(settings, lookup(key))
        if hit is not None:
            found[name] = {"value": hit[0], "source": hit[1]}
    auto = highest(settings, lookup("autoUpdate"))
    if auto is not None:
        found["auto_update_state"] = {"value": "enabled" if auto[0] else "disabled", "source": auto[1]}
    return found


#: the product's rules for the shared discovery pass; ``COPILOT_HOME`` relocates ``~/.copilot``
PRODUCT = Product(RULES, home_env="COPILOT_HOME", home_dir=".copilot", find=_find)
#: the uniform entry point ``manifest.discovery.discover_with`` calls (every product takes the same keywords)
discover = discover_copilot


# --------------------------------------------------------------------------- bundles and runtime

#: directories a bundle snapshot takes whole (project root, and ``~/.copilot``)
BUNDLE_TREES = {
    "project": (".github/instructions", ".github/skills", ".github/agents", ".claude/skills", ".agents/skills"),
    "user": (".copilot/instructions", ".copilot/skills", ".copilot/agents", ".copilot/hooks", ".agents/skills"),
}
NON_SECRET_ENV_VALUES = frozenset({"COPILOT_MODEL", "COPILOT_ALLOW_ALL"})
PATHLIKE_ENV = frozenset({"COPILOT_HOME"})
#: ``--agent-with plugin:DIR``: where a plugin directory's components go in a
#: bundle's project scope (plugin dir -> project path). Anything else in the
#: plugin (hooks, MCP servers, its manifest) needs the product's plugin
#: installer and is listed as not installed, never silently dropped.
PLUGIN_LAYOUT = {"skills": ".github/skills", "agents": ".github/agents"}
