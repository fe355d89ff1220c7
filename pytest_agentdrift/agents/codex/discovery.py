"""Codex CLI: where the product reads its instructions and configuration.

Per the Codex AGENTS.md guide, configuration reference and skills docs
(read when this was written). The generic machinery is in
``pytest_agentdrift.agents.discovery_base``; this module holds what is Codex's
own: the AGENTS.md chain and its size cap, the config.toml layers and trust,
the allowlist of config keys, the facts they carry, the trees a bundle
snapshot takes, and the environment names that belong to it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Unpack

from pytest_agentdrift.agents.discovery_base import (
    NOT_APPLICABLE,
    AllowSpec,
    ConfigFile,
    ConfigSource,
    Discovery,
    Fact,
    InstructionEntry,
    Product,
    Scan,
    Where,
    discover_product,
    entry_for,
    exists,
    find_marker_root,
    is_file,
    load_config_file,
    walk_up,
)

#: the rules name recorded as the manifest's ``surface_rules``
RULES = "codex"

#: Codex AGENTS.md guide: project_doc_max_bytes defaults to 32 KiB.
CODEX_PROJECT_DOC_MAX_BYTES_DEFAULT = 32 * 1024
#: Codex: project root detection uses project_root_markers (default .git).
CODEX_DEFAULT_ROOT_MARKERS = (".git",)

_CODEX_CORE: AllowSpec = {
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
    "openai_base_url": "url",
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
CODEX_CONFIG_SPEC: AllowSpec = {**_CODEX_CORE, "profile": True, "profiles": ("each", _CODEX_CORE)}


#: the system and user configuration layers (``system`` is ``/etc/codex`` under the system root)
CONFIG_LAYERS = (
    ConfigFile("system", "config.toml", "system", 0, "toml", CODEX_CONFIG_SPEC, user_scope=True),
    ConfigFile("system", "managed_config.toml", "managed", 100, "toml", CODEX_CONFIG_SPEC, user_scope=True),
    ConfigFile("system", "requirements.toml", "managed-requirements", 101, "toml", CODEX_CONFIG_SPEC, user_scope=True),
    ConfigFile("user", "config.toml", "user", 1, "toml", CODEX_CONFIG_SPEC, user_scope=True),
)
#: the instruction file names a directory may hold, the first non-empty one loaded
AGENTS_NAMES = ("AGENTS.override.md", "AGENTS.md")


def _find(scan: Scan) -> None:
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
    codex_home = scan.product_home
    # config layers first: they decide the cap, fallback names and trust
    system = scan.system_root / "etc" / "codex" if scan.system_root is not None else None
    scan.read_config(CONFIG_LAYERS, {"system": system, "user": codex_home})
    configured = codex_setting(scan.disc.config, "project_root_markers")
    markers = (
        [str(m) for m in configured] if isinstance(configured, list) and configured else CODEX_DEFAULT_ROOT_MARKERS
    )
    root = find_marker_root(scan.cwd, markers, scan.upward_limit)
    chain = walk_up(scan.cwd, root) if root is not None else [Path(os.path.abspath(scan.cwd))]
    _project_layers(scan, chain, _trusted(scan, root))
    cap, fallbacks = _doc_limits(scan, root)
    if scan.include_user:
        _user_agents(scan)
        _add_components(scan, [codex_home / "skills", scan.home / ".agents" / "skills"], "user", codex_home / "prompts")
    _project_agents(scan, chain, cap, fallbacks)
    _add_components(scan, [d / ".agents" / "skills" for d in chain], "project")


def _trusted(scan: Scan, root: Path | None) -> bool:
    """Whether the user config trusts this project (recorded as a fact of this pass).

    Trust lives in the user config as [projects."<abs path>"] trust_level;
    only this project's level is recorded (other keys are private paths).
    """
    user_cfg_path = scan.product_home / "config.toml"
    user_doc = load_config_file(user_cfg_path, "toml") if is_file(user_cfg_path) else {}
    if not isinstance(user_doc, dict):
        user_doc = {}
    projects = user_doc.get("projects")
    trust_key = os.path.abspath(root if root is not None else scan.cwd)
    project = projects.get(trust_key) if isinstance(projects, dict) else None
    trust = project.get("trust_level") if isinstance(project, dict) else None
    scan.disc.facts[scan.context] = {
        "codex_project_trust": {
            "value": trust if trust is not None else "untrusted_or_unset",
            "source": scan.roots.label(user_cfg_path),
        }
    }
    return trust == "trusted"


def _project_layers(scan: Scan, chain: Sequence[Path], trusted: bool) -> None:
    """``.codex/config.toml`` from the project root down to cwd: the closest wins, a trusted project's only."""
    for i, d in enumerate(chain):
        src = scan.config(
            d / ".codex" / "config.toml", scope="project", precedence=10 + i, fmt="toml", spec=CODEX_CONFIG_SPEC
        )
        if src["status"] != "absent":
            src["trusted"] = trusted
            src["applies"] = trusted
        scan.disc.config.append(src)


def _doc_limits(scan: Scan, root: Path | None) -> tuple[int, list[object]]:
    """(project_doc_max_bytes, project_doc_fallback_filenames) as configured, recorded as limits."""
    sources = scan.disc.config
    cap = codex_setting(sources, "project_doc_max_bytes", trusted_only=True)
    cap = int(cap) if isinstance(cap, int) else CODEX_PROJECT_DOC_MAX_BYTES_DEFAULT
    configured = codex_setting(sources, "project_doc_fallback_filenames", trusted_only=True)
    fallbacks: list[object] = list(configured) if isinstance(configured, (list, tuple)) else []
    scan.disc.limits[f"codex:{scan.context}"] = {
        "project_doc_max_bytes": cap,
        "project_doc_fallback_filenames": list(fallbacks),
        "project_root": scan.roots.label(root) if root is not None else "not_found(cwd only)",
    }
    return cap, fallbacks


def _user_agents(scan: Scan) -> None:
    """The first non-empty of CODEX_HOME's AGENTS files; the others are shadowed or skipped."""
    chosen = None
    for name in AGENTS_NAMES:
        p = scan.product_home / name
        if not exists(p):
            continue
        entry, data = entry_for(p, scan.roots, scope="user", kind="agents", load="startup", context=scan.context)
        if chosen is None and data is not None and data.strip():
            chosen = entry
        else:
            entry.status = "shadowed" if chosen is not None else ("empty_skipped" if data is not None else entry.status)
        scan.disc.entries.append(entry)


def _project_agents(scan: Scan, chain: Sequence[Path], cap: int, fallbacks: Sequence[object]) -> None:
    """At most one file per directory of the chain, until their combined size reaches the cap."""
    remaining = cap
    for d in chain:
        picked = False
        for name in (*AGENTS_NAMES, *[str(f) for f in fallbacks]):
            p = d / name
            if not exists(p):
                continue
            entry, data = entry_for(p, scan.roots, scope="project", kind="agents", load="startup", context=scan.context)
            if picked:
                entry.status = "shadowed"  # one file per directory
            elif data is not None and not data.strip():
                entry.status = "empty_skipped"
            elif data is not None:
                picked = True
                remaining = _load_within(entry, len(data), remaining)
            scan.disc.entries.append(entry)


def _load_within(entry: InstructionEntry, size: int, remaining: int) -> int:
    """Mark how much of a file the cap lets load; the bytes still left under the cap."""
    if remaining <= 0:
        entry.status = "over_cap"
        entry.loaded_bytes = 0
        return remaining
    if size > remaining:
        entry.status = "truncated"
        entry.loaded_bytes = remaining
        return 0
    entry.loaded_bytes = size
    return remaining - size


def discover_codex(
    home: Path, project_root: Path, cwd: Path, env: Mapping[str, str], **where: Unpack[Where]
) -> Discovery:
    """Codex's discovery (see _find); ``where``: the keywords of discovery_base.discover_product."""
    return discover_product(PRODUCT, home, project_root, cwd, env, **where)


def codex_find(sources: Sequence[ConfigSource], key: str, trusted_only: bool = True) -> tuple[object, str] | None:
    best: tuple[float, object, str] | None = None
    for s in sources:
        if s.get("surface") != "codex" or s.get("scope") == "managed-requirements":
            continue
        if trusted_only and s.get("applies") is False:
            continue
        content = s.get("content")
        if isinstance(content, dict) and key in content and (best is None or s["precedence"] > best[0]):
            best = (s["precedence"], content[key], s["path"])
    return None if best is None else (best[1], best[2])


def codex_setting(sources: Sequence[ConfigSource], key: str, trusted_only: bool = True) -> object:
    found = codex_find(sources, key, trusted_only)
    return None if found is None else found[0]


def _add_components(scan: Scan, skill_dirs: Sequence[Path], scope: str, prompts: Path | None = None) -> None:
    """Skills (``*/SKILL.md``: only name and description are listed at
    startup, the body is read when the skill is used) and custom prompts
    (slash commands): ``on_demand`` instruction text."""
    seen: set[str] = set()
    found = []
    for base in skill_dirs:
        for p in sorted(base.glob("*/SKILL.md"), key=lambda p: p.as_posix()):
            if os.path.abspath(p) not in seen:
                seen.add(os.path.abspath(p))
                found.append((p, "skill"))
    if prompts is not None and prompts.is_dir():
        found += [(p, "command") for p in sorted(prompts.glob("*.md"), key=lambda p: p.as_posix())]
    for p, kind in found:
        entry, _ = entry_for(p, scan.roots, scope=scope, kind=kind, load="on_demand", context=scan.context)
        scan.disc.entries.append(entry)


def facts(sources: Sequence[ConfigSource], env: Mapping[str, str], profile: str | None = None) -> dict[str, Fact]:
    """Model, approval policy, sandbox and reasoning effort as configured (the active profile first)."""
    found: dict[str, Fact] = {}
    codex = [s for s in sources if s.get("surface") == RULES]
    active = profile or codex_setting(codex, "profile")
    found["codex_profile"] = {"value": active if active else NOT_APPLICABLE, "source": "argv/config"}
    for fact, key in (
        ("model", "model"),
        ("permission_mode", "approval_policy"),
        ("sandbox", "sandbox_mode"),
        ("model_reasoning_effort", "model_reasoning_effort"),
    ):
        value = None
        if active:
            prof = codex_setting(codex, "profiles")
            if isinstance(prof, dict) and isinstance(prof.get(active), dict) and key in prof[active]:
                value = (prof[active][key], f"profile:{active}")
        hit = value or codex_find(codex, key)
        if hit is not None:
            found[fact] = {"value": hit[0], "source": hit[1]}
    endpoint = _provider_endpoint(codex, active if isinstance(active, str) else None, env)
    if endpoint is not None:
        found["model_endpoint"] = {"value": endpoint[0], "source": endpoint[1]}
    return found


#: where the built-in `openai` provider sends an API key's requests (the Responses API)
OPENAI_API_ENDPOINT = "https://api.openai.com/v1"


def _provider_endpoint(
    codex: Sequence[ConfigSource], profile: str | None, env: Mapping[str, str]
) -> tuple[str, str] | None:
    """(base URL, where it was read) of the provider Codex sends its model requests to: the
    selected `model_providers` entry's `base_url`, else `openai_base_url`, else the built-in
    provider's API endpoint when an API key signs in (a ChatGPT sign-in goes elsewhere: None)."""
    profiles = codex_setting(codex, "profiles") if profile else None
    chosen = profiles.get(profile) if isinstance(profiles, dict) else None
    prof = chosen if isinstance(chosen, dict) else {}
    provider = prof.get("model_provider") or codex_setting(codex, "model_provider")
    providers = codex_setting(codex, "model_providers")
    entry = providers.get(provider) if isinstance(providers, dict) and isinstance(provider, str) else None
    if isinstance(entry, dict) and isinstance(entry.get("base_url"), str):
        return entry["base_url"], f"model_providers.{provider}.base_url"
    if provider not in (None, "openai"):
        return None
    hit = codex_find(codex, "openai_base_url")
    if hit is not None and isinstance(hit[0], str):
        return hit[0], hit[1]
    if env.get("CODEX_API_KEY") or env.get("OPENAI_API_KEY"):
        return OPENAI_API_ENDPOINT, "the built-in openai provider (API-key sign-in)"
    return None


#: the product's rules for the shared discovery pass; ``CODEX_HOME`` relocates ``~/.codex``
PRODUCT = Product(RULES, home_env="CODEX_HOME", home_dir=".codex", find=_find)
#: the uniform entry point ``manifest.discovery.discover_with`` calls (every product takes the same keywords)
discover = discover_codex


# --------------------------------------------------------------------------- bundles and runtime

#: directories a bundle snapshot takes whole: project skills, and under the
#: user's ``~/.codex`` (or ``$CODEX_HOME``) skills, custom prompts and rules
BUNDLE_TREES = {
    "project": (".agents/skills",),
    "user": (".codex/skills", ".codex/prompts", ".codex/rules", ".agents/skills"),
}
NON_SECRET_ENV_VALUES = frozenset({"CODEX_SANDBOX"})
PATHLIKE_ENV = frozenset({"CODEX_HOME"})
#: ``--agent-with plugin:DIR``: where a plugin directory's components go in a
#: bundle's project scope (plugin dir -> project path). Anything else in the
#: plugin (hooks, MCP servers, its manifest) needs the product's plugin
#: installer and is listed as not installed, never silently dropped.
PLUGIN_LAYOUT = {"skills": ".agents/skills"}
