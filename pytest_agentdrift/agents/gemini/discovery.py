"""Gemini CLI: where the product reads its instructions and configuration.

Per the Gemini CLI docs on configuration ("Settings files"), context files
("GEMINI.md"), custom commands, skills, subagents and policies (read when
this was written, checked against 0.61). The generic machinery is in
``pytest_agentdrift.agents.discovery_base``; this module holds what is
Gemini CLI's own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Unpack

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
    load_config_file,
    lookup,
    nested_files,
    walk_up,
)

#: the rules name recorded as the manifest's ``surface_rules``
RULES = "gemini"

#: settings.json keys recorded as they are; ``mcpServers`` by the MCP rules, what can hold
#: commands or free text by digest
GEMINI_SETTINGS_SPEC: AllowSpec = {
    "general": True,
    "model": True,
    "modelConfigs": "digest",
    "context": True,
    "tools": True,
    "security": True,
    "privacy": True,
    "experimental": True,
    "skills": True,
    "agents": "digest",
    "hooks": "digest",
    "hooksConfig": True,
    "mcp": True,
    "mcpServers": "mcp",
    "advanced": "digest",
    "telemetry": "digest",
    "ui": "digest",
    "output": True,
    "ide": True,
    "billing": True,
    "admin": True,
    "extensions": True,
    "$schema": True,
}
#: settings files, lowest precedence first: system defaults < user < workspace < system
CONFIG_FILES = (
    ConfigFile("system", "system-defaults.json", "system-defaults", 0, "jsonc", GEMINI_SETTINGS_SPEC, user_scope=True),
    ConfigFile("user", "settings.json", "user", 1, "jsonc", GEMINI_SETTINGS_SPEC, user_scope=True),
    ConfigFile("cwd", ".gemini/settings.json", "workspace", 2, "jsonc", GEMINI_SETTINGS_SPEC),
    ConfigFile("system", "settings.json", "system", 3, "jsonc", GEMINI_SETTINGS_SPEC, user_scope=True),
)
#: the context file name when settings name none (`context.fileName`)
DEFAULT_CONTEXT_NAMES = ("GEMINI.md",)


def _find(scan: Scan) -> None:
    """Gemini CLI context files and settings, per its docs.

    Settings (later wins): system defaults (``/etc/gemini-cli/system-defaults.json``
    or ``$GEMINI_CLI_SYSTEM_DEFAULTS_PATH``) < user ``~/.gemini/settings.json`` <
    workspace ``.gemini/settings.json`` in the working directory (read only in a
    trusted folder: the preset trusts the work tree) < system
    (``/etc/gemini-cli/settings.json`` or ``$GEMINI_CLI_SYSTEM_SETTINGS_PATH``).

    Context ("memory") files, named by ``context.fileName`` (default
    ``GEMINI.md``; a list names several): the global one in ``~/.gemini/``;
    then from the project root (the nearest ancestor holding ``.git``, else the
    working directory) down to the working directory; then every directory
    below the working directory. Custom commands (``.gemini/commands/**/*.toml``),
    skills (``.gemini/skills/*/SKILL.md``, also ``.agents/skills``) and
    subagents (``.gemini/agents/*.md``), user and project, are read when used.
    ``oauth_creds.json``, ``google_accounts.json`` and ``.env`` are never opened.
    """
    user = _user_dir(scan)
    scan.read_config(CONFIG_FILES, {"system": _system_dir(scan), "user": user, "cwd": Path(scan.cwd)})
    names = context_names(scan.disc.config)
    if scan.include_user:
        for name in names:
            scan.add_once(user / name, scope="user", kind="context", load="startup")
    root = find_marker_root(scan.cwd, (".git",), scan.upward_limit) or Path(os.path.abspath(scan.cwd))
    cwd = Path(os.path.abspath(scan.cwd))
    chain = walk_up(scan.cwd, root) if is_under(cwd, root) else [cwd]
    for d in chain:
        for name in names:
            scope = "project" if os.path.abspath(d) == os.path.abspath(root) else "directory"
            scan.add_once(d / name, scope=scope, kind="context", load="startup")
    for p in nested_files(cwd, list(names)):
        scan.add_once(p, scope="subdirectory", kind="context", load="startup")
    _components(scan, root)


def _user_dir(scan: Scan) -> Path:
    """``~/.gemini``; ``$GEMINI_CLI_HOME`` stands for the home that holds it, not for the folder."""
    return scan.product_home / ".gemini" if scan.relocated else scan.product_home


def _system_dir(scan: Scan) -> Path | None:
    """Where the system settings files are (``/etc/gemini-cli`` under the system root)."""
    if scan.system_root is None:
        return None
    return scan.system_root / "etc" / "gemini-cli"


def context_names(sources: Sequence[ConfigSource]) -> tuple[str, ...]:
    """The context file names the settings choose (`context.fileName`, highest precedence wins)."""
    hit = highest([s for s in sources if s.get("surface") == RULES], lookup("context", "fileName"))
    value = hit[0] if hit is not None else None
    if isinstance(value, str) and value.strip():
        return (value.strip(),)
    if isinstance(value, list):
        names = tuple(v.strip() for v in value if isinstance(v, str) and v.strip() and "/" not in v)
        if names:
            return names
    return DEFAULT_CONTEXT_NAMES


def _components(scan: Scan, root: Path) -> None:
    """Commands, skills and subagents: instruction text read when the model uses them."""
    bases = [(root / ".gemini", "project"), (root / ".agents", "project")]
    if scan.include_user:
        bases = [(_user_dir(scan), "user"), (scan.home / ".agents", "user"), *bases]
    for base, scope in bases:
        for p in sorted((base / "skills").glob("*/SKILL.md"), key=lambda p: p.as_posix()):
            scan.add_once(p, scope=scope, kind="skill", load="on_demand")
        if base.name == ".agents":
            continue
        for p in glob_files(base / "commands", ".toml"):
            scan.add_once(p, scope=scope, kind="command", load="on_demand")
        for p in glob_files(base / "agents", ".md"):
            scan.add_once(p, scope=scope, kind="subagent", load="on_demand")


def discover_gemini(
    home: Path, project_root: Path, cwd: Path, env: Mapping[str, str], **where: Unpack[Where]
) -> Discovery:
    """Gemini CLI's discovery (see _find); ``where``: the keywords of discovery_base.discover_product."""
    return discover_product(PRODUCT, home, project_root, cwd, env, **where)


def facts(sources: Sequence[ConfigSource], env: Mapping[str, str], profile: str | None = None) -> dict[str, Fact]:
    """Model, approval mode and auto-update as the settings files say (later files win)."""
    found: dict[str, Fact] = {}
    settings = [s for s in sources if s.get("surface") == RULES]
    model = highest(settings, lookup("model", "name"))
    if model is not None:
        found["model"] = {"value": model[0], "source": model[1]}
    auto = highest(settings, lookup("general", "enableAutoUpdate"))
    if auto is not None:
        found["auto_update_state"] = {"value": "enabled" if auto[0] else "disabled", "source": auto[1]}
    return found


def preset_settings() -> dict[str, Any]:
    """The settings the preset gives every run (its two files), for the docs and the tests."""
    from pytest_agentdrift.agents.gemini.adapter import DEFAULTS_FILE, SYSTEM_FILE

    return {"defaults": load_config_file(DEFAULTS_FILE, "json"), "system": load_config_file(SYSTEM_FILE, "json")}


#: the product's rules for the shared discovery pass; ``GEMINI_CLI_HOME`` moves the home that
#: holds ``.gemini`` (not ``.gemini`` itself): the user scope is read from ``$GEMINI_CLI_HOME/.gemini``
PRODUCT = Product(RULES, home_env="GEMINI_CLI_HOME", home_dir=".gemini", find=_find)
#: the uniform entry point ``manifest.discovery.discover_with`` calls (every product takes the same keywords)
discover = discover_gemini


# --------------------------------------------------------------------------- bundles and runtime

#: directories a bundle snapshot takes whole (project root, and the home)
BUNDLE_TREES = {
    "project": (".gemini/commands", ".gemini/skills", ".gemini/agents", ".gemini/policies", ".agents/skills"),
    "user": (".gemini/commands", ".gemini/skills", ".gemini/agents", ".gemini/policies", ".agents/skills"),
}
NON_SECRET_ENV_VALUES = frozenset({"GEMINI_MODEL", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_LOCATION"})
PATHLIKE_ENV = frozenset({"GEMINI_CLI_HOME", "GEMINI_CLI_SYSTEM_SETTINGS_PATH", "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"})
