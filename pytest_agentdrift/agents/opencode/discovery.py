"""OpenCode: where the product reads its instructions and configuration.

Per the OpenCode docs on config ("Locations", "Precedence order"), rules
(AGENTS.md), agents, commands and skills (read when this was written,
checked against 1.18.33). The generic machinery is in
``pytest_agentdrift.agents.discovery_base``; this module holds what is
OpenCode's own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Unpack

from pytest_agentdrift.agents.discovery_base import (
    AllowSpec,
    ConfigFile,
    ConfigSource,
    Discovery,
    Fact,
    Product,
    Scan,
    Where,
    discover_product,
    find_marker_root,
    glob_files,
    highest,
    is_under,
    lookup,
    walk_up,
)

#: the rules name recorded as the manifest's ``surface_rules``
RULES = "opencode"

_PROVIDER_SPEC: AllowSpec = {
    "npm": True,
    "name": True,
    "api": "url",
    "models": "names",
    "whitelist": True,
    "blacklist": True,
    "options": {"baseURL": "url", "apiKey": "names", "headers": "names", "timeout": True},
}
#: opencode.json keys recorded as they are; what can hold commands, prompts or keys by digest or name
OPENCODE_CONFIG_SPEC: AllowSpec = {
    "$schema": True,
    "model": True,
    "small_model": True,
    "default_agent": True,
    "provider": ("each", _PROVIDER_SPEC),
    "enabled_providers": True,
    "disabled_providers": True,
    "permission": True,
    "tools": True,
    "agent": "digest",
    "command": "digest",
    "instructions": True,
    "mcp": "mcp",
    "plugin": True,
    "autoupdate": True,
    "share": True,
    "snapshot": True,
    "compaction": True,
    "formatter": "digest",
    "lsp": "digest",
    "experimental": True,
    "watcher": True,
}
#: config files, lowest precedence first: global < OPENCODE_CONFIG < project
CONFIG_FILES = (
    ConfigFile("user", "config.json", "user", 1, "jsonc", OPENCODE_CONFIG_SPEC, user_scope=True),
    ConfigFile("user", "opencode.json", "user", 1, "jsonc", OPENCODE_CONFIG_SPEC, user_scope=True),
    ConfigFile("user", "opencode.jsonc", "user", 1, "jsonc", OPENCODE_CONFIG_SPEC, user_scope=True),
)
PROJECT_NAMES = ("opencode.json", "opencode.jsonc")
#: the rule files a directory may hold, the first that exists taken (CLAUDE.md only when no AGENTS.md)
RULE_NAMES = ("AGENTS.md", "CLAUDE.md")


def _find(scan: Scan) -> None:
    """OpenCode rules and configuration, per its docs.

    Config (later wins): global ``~/.config/opencode/opencode.json(c)`` (or
    ``config.json``) < ``$OPENCODE_CONFIG`` < the project's ``opencode.json(c)``
    from the worktree root down to the working directory < ``.opencode/``
    directories < ``$OPENCODE_CONFIG_CONTENT``.

    Rules: the global ``~/.config/opencode/AGENTS.md`` (else
    ``~/.claude/CLAUDE.md``); in the project, the first ``AGENTS.md`` (else
    ``CLAUDE.md``) found walking up from the working directory to the
    worktree root; and the files the config's ``instructions`` name. Agents
    (``agent(s)/*.md``), commands (``command(s)/*.md``) and skills
    (``skills/*/SKILL.md``, also ``.claude/skills`` and ``.agents/skills``) in
    ``.opencode/`` and the global directory are read when used.
    ``auth.json`` is never opened.
    """
    user = scan.product_home
    scan.read_config(CONFIG_FILES, {"user": user})
    if scan.include_user and scan.env.get("OPENCODE_CONFIG"):
        path = Path(os.path.expanduser(scan.env["OPENCODE_CONFIG"]))
        scan.disc.config.append(scan.config(path, scope="env", precedence=2, fmt="jsonc", spec=OPENCODE_CONFIG_SPEC))
    root = find_marker_root(scan.cwd, (".git",), scan.upward_limit) or Path(os.path.abspath(scan.cwd))
    cwd = Path(os.path.abspath(scan.cwd))
    chain = walk_up(scan.cwd, root) if is_under(cwd, root) else [cwd]
    for d in chain:
        for name in PROJECT_NAMES:
            scan.disc.config.append(
                scan.config(d / name, scope="project", precedence=3, fmt="jsonc", spec=OPENCODE_CONFIG_SPEC)
            )
    if scan.include_user:
        _first(scan, [user / "AGENTS.md", scan.home / ".claude" / "CLAUDE.md"], "user")
    for d in reversed(chain):
        if _first(scan, [d / name for name in RULE_NAMES], "project"):
            break
    _instructions(scan, root)
    _components(scan, [(root / ".opencode", "project")] + ([(user, "user")] if scan.include_user else []), root)


def _first(scan: Scan, paths: list[Path], scope: str) -> bool:
    for p in paths:
        if p.is_file():
            scan.add_once(p, scope=scope, kind="rules", load="startup")
            return True
    return False


def _instructions(scan: Scan, root: Path) -> None:
    """Files the configuration's ``instructions`` name (paths or globs, relative to the project)."""
    hit = highest([s for s in scan.disc.config if s.get("surface") == RULES], lookup("instructions"))
    for pattern in hit[0] if hit is not None and isinstance(hit[0], list) else []:
        if not isinstance(pattern, str) or pattern.startswith(("http://", "https://")):
            continue
        base = Path(os.path.expanduser(pattern))
        matches = [base] if base.is_absolute() else sorted(root.glob(pattern), key=lambda p: p.as_posix())
        for p in matches:
            if p.is_file():
                scan.add_once(p, scope="instructions", kind="rules", load="startup")


def _components(scan: Scan, bases: list[tuple[Path, str]], root: Path) -> None:
    skill_bases = [*bases, (root / ".claude", "project"), (root / ".agents", "project")]
    for base, scope in skill_bases:
        for p in sorted((base / "skills").glob("*/SKILL.md"), key=lambda p: p.as_posix()):
            scan.add_once(p, scope=scope, kind="skill", load="on_demand")
    for base, scope in bases:
        for sub, kind in (
            ("agent", "subagent"),
            ("agents", "subagent"),
            ("command", "command"),
            ("commands", "command"),
        ):
            for p in glob_files(base / sub, ".md"):
                scan.add_once(p, scope=scope, kind=kind, load="on_demand")


def discover_opencode(
    home: Path, project_root: Path, cwd: Path, env: Mapping[str, str], **where: Unpack[Where]
) -> Discovery:
    """OpenCode's discovery (see _find); ``where``: the keywords of discovery_base.discover_product."""
    return discover_product(PRODUCT, home, project_root, cwd, env, **where)


def facts(sources: Sequence[ConfigSource], env: Mapping[str, str], profile: str | None = None) -> dict[str, Fact]:
    """Model, auto-update and the selected provider's endpoint as the config files say."""
    found: dict[str, Fact] = {}
    settings = [s for s in sources if s.get("surface") == RULES]
    model = highest(settings, lookup("model"))
    if model is not None:
        found["model"] = {"value": model[0], "source": model[1]}
    auto = highest(settings, lookup("autoupdate"))
    if auto is not None:
        found["auto_update_state"] = {"value": "disabled" if auto[0] is False else "enabled", "source": auto[1]}
    if model is not None and isinstance(model[0], str) and "/" in model[0]:
        url = highest(settings, lookup("provider", model[0].split("/", 1)[0], "options", "baseURL"))
        if url is not None:
            found["model_endpoint"] = {"value": url[0], "source": url[1]}
    return found


#: ``OPENCODE_CONFIG_DIR`` adds a directory read like ``.opencode``; the global directory is
#: ``$XDG_CONFIG_HOME/opencode`` (default ``~/.config/opencode``)
PRODUCT = Product(RULES, home_env="OPENCODE_CONFIG_DIR", home_dir=".config/opencode", find=_find)
#: the uniform entry point ``manifest.discovery.discover_with`` calls (every product takes the same keywords)
discover = discover_opencode


# --------------------------------------------------------------------------- bundles and runtime

#: directories a bundle snapshot takes whole (project root, and the home)
BUNDLE_TREES = {
    "project": (".opencode", ".agents/skills"),
    "user": (".config/opencode/agent", ".config/opencode/command", ".config/opencode/skills", ".agents/skills"),
}
NON_SECRET_ENV_VALUES = frozenset({"OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_MODELS_FETCH"})
PATHLIKE_ENV = frozenset({"OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR"})
