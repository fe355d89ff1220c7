"""Generic, read-only discovery machinery for instruction and configuration files.

What every product's discovery shares lives here; each product's own rules
(which files, in which order, with which precedence) live beside its adapter
in ``pytest_agentdrift/agents/<product>/discovery.py`` and are dispatched by
``pytest_agentdrift.agents.products``. This module imports no product.

Every function takes the places to look at explicitly (home, project root,
cwd, environment mapping, system root) and never consults the real home or
``os.environ``: the caller decides what "the runtime" is, and tests build
fixture homes and repositories in a temporary directory.

Two outputs per surface:

* instruction entries: one per instruction source the product's documented
  discovery would load (or could load on demand), in discovery order, with a
  path relative to a named root (``~/``, ``project:``, ``task:T05:``,
  ``system:/``, ``$CODEX_HOME/``...), scope, raw sha256, normalised sha256,
  imports, and the missing / unreadable files it refers to. Contents are
  never stored, only hashes.
* configuration sources: one per configuration file the product documents,
  with scope, precedence, a raw sha256 and the parsed content reduced to
  ALLOWLISTED keys. A key that is not on the allowlist contributes its name
  only (``unrecorded_keys``); MCP server arguments, hook commands and other
  free-form values that may embed credentials contribute a one-way digest.
  Credential files (``~/.codex/auth.json``, ``~/.claude/.credentials.json``,
  Copilot ``config.json``) are never opened.

Discovery is only reading: files are opened read-only, nothing is created,
and no product binary is run here (version probes live in probes.py).

Normalisation of instruction text (``normalised_sha256``), applied to bytes
so that a file that is not valid UTF-8 still gets one: a leading UTF-8 BOM
is dropped; CRLF and lone CR become LF; trailing spaces, tabs, form feeds
and vertical tabs are stripped from every line; trailing empty lines are
dropped; a non-empty result ends with exactly one LF. Two files that differ
only in line endings or trailing whitespace therefore share the normalised
hash (and keep different raw hashes).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Unpack, runtime_checkable

from pytest_agentdrift.agents.discovery_base import (
    ConfigSource,
    Discovery,
    Fact,
    Roots,
    Where,
    config_source,
    default_roots,
    entry_for,
    format_for,
)

# --------------------------------------------------------------------------- generic


def discover_generic(
    home: Path,
    project_root: Path,
    cwd: Path,
    env: Mapping[str, str],
    *,
    config_paths: Sequence[Path] = (),
    instruction_paths: Sequence[Path] = (),
    context: str = "session",
    roots: Roots | None = None,
    system_root: Path | None = None,
) -> Discovery:
    """Files the user names with ``--agent-config`` / ``--agent-instructions``.

    We cannot know an unknown product's discovery rules, so only the named
    files count, in the order given. Instruction files are hashed like any
    other (raw + normalised, no import semantics). Configuration files are
    parsed when JSON or TOML (duplicate keys rejected) and contribute only a
    canonical digest of their parsed value, never content: no allowlist of
    safe keys exists for a product we do not know. Other formats contribute
    their normalised text hash.
    """
    roots = roots or default_roots(home, project_root, system_root)
    disc = Discovery(GENERIC_RULES)
    disc.discovery_roots[context] = roots.label(cwd)
    for p in instruction_paths:
        entry, data = entry_for(
            _absolute(p, cwd, home), roots, scope="user-named", kind="named", load="startup", context=context
        )
        disc.entries.append(entry)
        if data is None:
            disc.missing.append(
                {
                    "context": context,
                    "path": entry.path,
                    "referenced_by": "--agent-instructions",
                    "reason": entry.status,
                }
            )
    for i, p in enumerate(config_paths):
        p = _absolute(p, cwd, home)
        disc.config.append(
            config_source(
                p,
                roots,
                surface=GENERIC_RULES,
                scope="user-named",
                precedence=i,
                fmt=format_for(p),
                spec=None,
                context=context,
            )
        )
    return disc


def _absolute(p: Path, cwd: Path, home: Path) -> Path:
    s = os.fspath(p)
    if s.startswith("~/"):
        return home / s[2:]
    return p if p.is_absolute() else cwd / p


# --------------------------------------------------------------------------- orchestration

#: the rules name of an agent whose product we do not know (--agent-cmd)
GENERIC_RULES = "generic"


def discover(rules: str, home: Path, project_root: Path, cwd: Path, env: Mapping[str, str], **how: Any) -> Discovery:
    """One product's discovery by its rules name (agents.products picks the module); ``how``: the
    keywords of discover_with."""
    from pytest_agentdrift.agents.products import rules_module

    module = rules_module(rules)
    if module is not None and not isinstance(module, ProductRules):
        raise TypeError(f"{module.__name__} does not define a product's discovery rules (RULES, discover, facts)")
    return discover_with(module, home, project_root, cwd, env, **how)


@runtime_checkable
class ProductRules(Protocol):
    """What discovery runs of a product's rules module (agents/<product>/discovery.py), which
    agents.products imports by name."""

    RULES: str

    def discover(
        self, home: Path, project_root: Path, cwd: Path, env: Mapping[str, str], **where: Unpack[Where]
    ) -> Discovery: ...

    def facts(
        self, sources: Sequence[ConfigSource], env: Mapping[str, str], profile: str | None = None
    ) -> dict[str, Fact]: ...


@dataclass(frozen=True)
class _Pass:
    """The arguments every pass of one product's discovery shares (only the project part differs)."""

    product: ProductRules
    home: Path
    env: Mapping[str, str]
    roots: Roots
    system_root: Path | None
    platform: str
    profile: str | None

    def run(self, context: str, project: Path, cwd: Path, include_user: bool, limit: Path | None) -> Discovery:
        return self.product.discover(
            self.home,
            project,
            cwd,
            self.env,
            system_root=self.system_root,
            platform=self.platform,
            context=context,
            roots=self.roots,
            upward_limit=limit,
            include_user=include_user,
            profile=self.profile,
        )


def discover_with(
    product: ProductRules | None,
    home: Path,
    project_root: Path,
    cwd: Path,
    env: Mapping[str, str],
    *,
    task_repos: Mapping[str, Path] | None = None,
    system_root: Path | None = None,
    platform: str = "linux",
    config_paths: Sequence[Path] = (),
    instruction_paths: Sequence[Path] = (),
    profile: str | None = None,
) -> Discovery:
    """User/managed scope once, then project scope for the session or for each task repository.

    ``product`` is a product's rules module (``RULES``, ``discover(...)``,
    ``facts(...)``), or None for a generic agent: then only the files named
    with ``--agent-instructions`` / ``--agent-config`` count.

    When task repositories are given, the agent runs in a private copy of
    each one, so project-scope discovery happens per task with the task
    repository as project root and cwd, and the upward walk stops there.
    Without task repositories, discovery uses project_root and cwd.
    """
    task_repos = dict(task_repos or {})
    base_pairs: list[tuple[str, Path | None]] = [("~/", home), ("project:", project_root), ("system:/", system_root)]
    base_pairs += [(f"task:{tid}:", p) for tid, p in sorted(task_repos.items())]
    roots = Roots.build(base_pairs)
    total = Discovery(product.RULES if product is not None else GENERIC_RULES)
    generic = discover_generic(
        home, project_root, cwd, env, config_paths=config_paths, instruction_paths=instruction_paths, roots=roots
    )
    if product is None:
        total.extend(generic)
        return total
    if not generic.entries and not generic.config:
        generic.discovery_roots = {}
    one = _Pass(product, home, env, roots, system_root, platform, profile)
    if task_repos:
        _per_task(total, one, task_repos)
    else:
        part = one.run("session", project_root, cwd, True, None)
        total.extend(part)
        total.facts.setdefault("session", {}).update(product.facts(part.config, env, profile))
    total.extend(generic)
    return total


def _per_task(total: Discovery, one: _Pass, task_repos: Mapping[str, Path]) -> None:
    """User and managed scope once, then project scope per task repository, each with its facts."""
    user = _user_only(one)
    total.extend(user)
    for tid, repo in sorted(task_repos.items()):
        part = one.run(f"task:{tid}", repo, repo, False, repo)
        total.extend(part)
        facts = one.product.facts(user.config + part.config, one.env, one.profile)
        total.facts.setdefault(f"task:{tid}", {}).update(facts)


def _user_only(one: _Pass) -> Discovery:
    """User/managed-scope sources only: run discovery from an empty, non-existent project path under home."""
    # A project path that does not exist yields no project-scope files; the
    # walk is limited to it so no ancestor (e.g. home itself) is visited.
    ghost = one.home / ".agentdrift-no-project"
    disc = one.run("user", ghost, ghost, True, ghost)
    disc.config = [
        s
        for s in disc.config
        if not str(s.get("path", "")).startswith("~/.agentdrift-no-project") and s.get("scope") != "local-mcp"
    ]
    disc.entries = [e for e in disc.entries if not e.path.startswith("~/.agentdrift-no-project")]
    disc.discovery_roots = {"user": "~/"}
    disc.facts = {}
    disc.limits = {k: v for k, v in disc.limits.items() if not k.startswith("codex:")}
    return disc
