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
from typing import Any

from pytest_agentdrift.agents.discovery_base import (
    MCP_JSON_SPEC,
    UNOBSERVED,
    Discovery,
    Roots,
    config_source,
    default_roots,
    entry_for,
    env_path,
    exists,
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
    platform: str = "linux",  # Copilot CLI reads the same paths on every platform it runs on here
    profile: str | None = None,  # Codex's config profiles; Copilot CLI has none
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
    copilot_home = env_path(env, "COPILOT_HOME", home)
    if copilot_home is not None:
        roots = roots.with_root("$COPILOT_HOME/", copilot_home)
    else:
        copilot_home = home / ".copilot"
    disc = Discovery("copilot")
    disc.discovery_roots[context] = roots.label(cwd)
    seen: set[str] = set()

    def add(p: Path, scope: str, kind: str, load: str = "startup", apply_to: list[str] | None = None) -> None:
        key = os.path.abspath(p)
        if key in seen or not exists(p):
            return
        seen.add(key)
        entry, data = entry_for(p, roots, scope=scope, kind=kind, load=load, context=context)
        if kind == "path-instructions" and data is not None:
            fm = parse_frontmatter(data)
            patterns = split_patterns(fm.get("applyTo"))
            entry.apply_to = patterns
            entry.load = "conditional" if patterns and patterns != ["**"] and patterns != ["**/*"] else "startup"
        disc.entries.append(entry)

    if include_user:
        add(copilot_home / "copilot-instructions.md", "user", "copilot-instructions")
        for p in glob_files(copilot_home / "instructions", ".instructions.md"):
            add(p, "user", "path-instructions")
    repo_root = find_marker_root(cwd, (".git",), upward_limit) or Path(os.path.abspath(project_root))
    chain = walk_up(cwd, repo_root) if is_under(cwd, repo_root) else [Path(os.path.abspath(cwd))]
    for d in chain:
        is_root = os.path.abspath(d) == os.path.abspath(repo_root)
        add(d / ".github" / "copilot-instructions.md", "repository" if is_root else "directory", "copilot-instructions")
        add(d / "AGENTS.md", "primary" if is_root else "additional", "agents")
    for d in (repo_root, Path(os.path.abspath(cwd))):
        for p in glob_files(d / ".github" / "instructions", ".instructions.md"):
            add(p, "repository", "path-instructions")
    for name in ("CLAUDE.md", "GEMINI.md"):
        add(repo_root / name, "repository", "agents")
    # skills (SKILL.md read when the skill is used) and custom agents: on_demand instruction text
    skill_dirs = [repo_root / ".github" / "skills", repo_root / ".claude" / "skills", repo_root / ".agents" / "skills"]
    if include_user:
        skill_dirs = [copilot_home / "skills", home / ".agents" / "skills", *skill_dirs]
    for base in skill_dirs:
        for p in sorted(base.glob("*/SKILL.md"), key=lambda p: p.as_posix()):
            add(p, "user" if not is_under(p, repo_root) else "repository", "skill", load="on_demand")
    for base, scope in (((copilot_home / "agents", "user"),) if include_user else ()) + (
        (repo_root / ".github" / "agents", "repository"),
    ):
        for p in glob_files(base, ".agent.md"):
            add(p, scope, "subagent", load="on_demand")
    extra_dirs = [x.strip() for x in env.get("COPILOT_CUSTOM_INSTRUCTIONS_DIRS", "").split(",") if x.strip()]
    for i, raw in enumerate(extra_dirs):
        d = Path(os.path.expanduser(raw))
        roots_i = roots
        if not any(is_under(d, Path(r)) for _, r in roots.roots):
            roots_i = roots.with_root(f"$COPILOT_CUSTOM_INSTRUCTIONS_DIRS[{i}]/", d)
        prev = roots
        roots = roots_i
        add(d / "AGENTS.md", "custom-dir", "agents")
        for p in glob_files(d / ".github" / "instructions", ".instructions.md"):
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


def facts(sources: Sequence[Mapping[str, Any]], env: Mapping[str, str], profile: str | None = None) -> dict[str, Any]:
    """Model, reasoning effort and auto-update as configured (later settings files win)."""
    found: dict[str, Any] = {}
    settings = [s for s in sources if s.get("surface") == RULES and s.get("scope") in ("user", "repository", "local")]
    for name, key in (("model", "model"), ("model_reasoning_effort", "effortLevel")):
        hit = highest(settings, lookup(key))
        if hit is not None:
            found[name] = {"value": hit[0], "source": hit[1]}
    auto = highest(settings, lookup("autoUpdate"))
    if auto is not None:
        found["auto_update_state"] = {"value": "enabled" if auto[0] else "disabled", "source": auto[1]}
    return found


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
