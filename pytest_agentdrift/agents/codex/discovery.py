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
from typing import Any

from pytest_agentdrift.agents.discovery_base import (
    NOT_APPLICABLE,
    Discovery,
    Roots,
    config_source,
    default_roots,
    entry_for,
    env_path,
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
CODEX_CONFIG_SPEC: dict[str, Any] = {**_CODEX_CORE, "profile": True, "profiles": ("each", _CODEX_CORE)}


def discover_codex(
    home: Path,
    project_root: Path,
    cwd: Path,
    env: Mapping[str, str],
    *,
    system_root: Path | None = None,
    platform: str = "linux",  # Codex reads the same paths on every platform it runs on here
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
    codex_home = env_path(env, "CODEX_HOME", home)
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
    if is_file(user_cfg_path):
        user_doc = load_config_file(user_cfg_path, "toml")

    markers = codex_setting(sources, "project_root_markers") or list(CODEX_DEFAULT_ROOT_MARKERS)
    root = find_marker_root(cwd, markers, upward_limit)
    chain = walk_up(cwd, root) if root is not None else [Path(os.path.abspath(cwd))]

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

    cap = codex_setting(sources, "project_doc_max_bytes", trusted_only=True)
    cap = int(cap) if isinstance(cap, int) else CODEX_PROJECT_DOC_MAX_BYTES_DEFAULT
    fallbacks = codex_setting(sources, "project_doc_fallback_filenames", trusted_only=True) or []
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
            if not exists(p):
                continue
            entry, data = entry_for(p, roots, scope="user", kind="agents", load="startup", context=context)
            if chosen is None and data is not None and data.strip():
                chosen = entry
            else:
                entry.status = (
                    "shadowed" if chosen is not None else ("empty_skipped" if data is not None else entry.status)
                )
            disc.entries.append(entry)
        _add_components(
            disc,
            roots,
            context,
            [codex_home / "skills", home / ".agents" / "skills"],
            "user",
            prompts=codex_home / "prompts",
        )
    remaining = cap
    for d in chain:
        picked = False
        for name in ("AGENTS.override.md", "AGENTS.md", *[str(f) for f in fallbacks]):
            p = d / name
            if not exists(p):
                continue
            entry, data = entry_for(p, roots, scope="project", kind="agents", load="startup", context=context)
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
    _add_components(disc, roots, context, [d / ".agents" / "skills" for d in chain], "project")

    return disc


def codex_find(sources: Sequence[Mapping[str, Any]], key: str, trusted_only: bool = True) -> tuple[Any, str] | None:
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


def codex_setting(sources: Sequence[Mapping[str, Any]], key: str, trusted_only: bool = True) -> Any:
    found = codex_find(sources, key, trusted_only)
    return None if found is None else found[0]


def _add_components(
    disc: Discovery, roots: Roots, context: str, skill_dirs: Sequence[Path], scope: str, prompts: Path | None = None
) -> None:
    """Skills (``*/SKILL.md``: only name and description are listed at
    startup, the body is read when the skill is used) and custom prompts
    (slash commands): ``on_demand`` instruction text."""
    seen: set[str] = set()
    for base in skill_dirs:
        for p in sorted(base.glob("*/SKILL.md"), key=lambda p: p.as_posix()):
            if os.path.abspath(p) in seen:
                continue
            seen.add(os.path.abspath(p))
            disc.entries.append(entry_for(p, roots, scope=scope, kind="skill", load="on_demand", context=context)[0])
    if prompts is not None and prompts.is_dir():
        for p in sorted(prompts.glob("*.md"), key=lambda p: p.as_posix()):
            disc.entries.append(entry_for(p, roots, scope=scope, kind="command", load="on_demand", context=context)[0])


def facts(sources: Sequence[Mapping[str, Any]], env: Mapping[str, str], profile: str | None = None) -> dict[str, Any]:
    """Model, approval policy, sandbox and reasoning effort as configured (the active profile first)."""
    found: dict[str, Any] = {}
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
    endpoint = _provider_endpoint(codex, active, env)
    if endpoint is not None:
        found["model_endpoint"] = {"value": endpoint[0], "source": endpoint[1]}
    return found


#: where the built-in `openai` provider sends an API key's requests (the Responses API)
OPENAI_API_ENDPOINT = "https://api.openai.com/v1"


def _provider_endpoint(
    codex: Sequence[Mapping[str, Any]], profile: str | None, env: Mapping[str, str]
) -> tuple[str, str] | None:
    """(base URL, where it was read) of the provider Codex sends its model requests to: the
    selected `model_providers` entry's `base_url`, else `openai_base_url`, else the built-in
    provider's API endpoint when an API key signs in (a ChatGPT sign-in goes elsewhere: None)."""
    prof = codex_setting(codex, "profiles") if profile else None
    prof = prof.get(profile) if isinstance(prof, dict) and isinstance(prof.get(profile), dict) else {}
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
