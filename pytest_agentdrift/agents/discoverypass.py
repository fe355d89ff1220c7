"""One product's discovery pass: its table of configuration files, the places it looks at
(Scan) and discover_product, the entry point every product's rules share.

Part of the generic discovery machinery (agents/discovery_base.py re-exports it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from pytest_agentdrift.agents.discoveryallow import AllowSpec
from pytest_agentdrift.agents.discoveryconfig import ConfigSource, config_source
from pytest_agentdrift.agents.discoveryentries import Discovery, InstructionEntry, entry_for
from pytest_agentdrift.agents.discoveryfiles import Roots, default_roots, env_path, exists


@dataclass(frozen=True)
class ConfigFile:
    """One configuration file a product documents: a row of its table of configuration sources.

    ``base`` names the directory ``path`` is relative to (the product's
    rules map each name to a directory, or to None when that place is not
    read in this pass); ``user_scope`` files are read only with the user's
    own scope (once per session, never per task).
    """

    base: str
    path: str
    scope: str
    precedence: int
    fmt: str
    spec: AllowSpec
    user_scope: bool = False


@dataclass(frozen=True)
class Product:
    """What the shared discovery pass needs to know of one product.

    ``home_env`` names the variable that moves the product's user directory
    (default ``home_dir`` under the home directory); ``find`` adds the
    product's instruction entries and configuration sources in its own order.
    """

    rules: str
    home_env: str
    home_dir: str
    find: Callable[[Scan], None]


@dataclass
class Scan:
    """One product's discovery pass: the places it looks at, and what it found so far."""

    home: Path
    project_root: Path
    cwd: Path
    env: Mapping[str, str]
    roots: Roots
    product_home: Path
    relocated: bool  # the product's user directory was moved by its environment variable
    system_root: Path | None
    platform: str
    context: str
    upward_limit: Path | None
    include_user: bool
    profile: str | None
    disc: Discovery
    seen: set[str] = field(default_factory=set)

    def add_once(
        self, path: Path, *, scope: str, kind: str, load: str, roots: Roots | None = None
    ) -> tuple[InstructionEntry, bytes | None] | None:
        """The entry of an instruction file that exists and was not taken yet (appended), else None.

        A file reached twice (a rule directory under two walked ancestors) is
        one instruction the product reads once.
        """
        key = os.path.abspath(path)
        if key in self.seen or not exists(path):
            return None
        self.seen.add(key)
        entry, data = entry_for(path, roots or self.roots, scope=scope, kind=kind, load=load, context=self.context)
        self.disc.entries.append(entry)
        return entry, data

    def config(
        self,
        path: Path,
        *,
        scope: str,
        precedence: int,
        fmt: str | None,
        spec: AllowSpec | None,
        select: Callable[[object], object] | None = None,
    ) -> ConfigSource:
        """config_source for this pass's product, roots and context."""
        return config_source(
            path,
            self.roots,
            surface=self.disc.surface_rules,
            scope=scope,
            precedence=precedence,
            fmt=fmt,
            spec=spec,
            context=self.context,
            select=select,
        )

    def read_config(self, files: Sequence[ConfigFile], bases: Mapping[str, Path | None]) -> None:
        """Append one source per row of a product's table, in table order (the order is hashed)."""
        for row in files:
            base = bases[row.base]
            if base is None or (row.user_scope and not self.include_user):
                continue
            self.disc.config.append(
                self.config(base / row.path, scope=row.scope, precedence=row.precedence, fmt=row.fmt, spec=row.spec)
            )


class Where(TypedDict, total=False):
    """The keywords of discover_product beside its places, which each product's discover_* passes on."""

    system_root: Path | None
    platform: str
    context: str
    roots: Roots | None
    upward_limit: Path | None
    include_user: bool
    profile: str | None


def discover_product(
    product: Product,
    home: Path,
    project_root: Path,
    cwd: Path,
    env: Mapping[str, str],
    *,
    system_root: Path | None = None,
    platform: str = "linux",
    context: str = "session",
    roots: Roots | None = None,
    upward_limit: Path | None = None,
    include_user: bool = True,
    profile: str | None = None,
) -> Discovery:
    """One discovery pass over a product's rules: the uniform entry point every product shares.

    ``roots`` labels paths (default: home, project and system root);
    ``upward_limit`` stops the walk up from cwd (the harness runs the agent
    in a private copy of a repository: nothing above it is visible);
    ``include_user`` reads the user and managed scope too; ``profile`` is
    Codex's selected config profile.
    """
    roots = roots or default_roots(home, project_root, system_root)
    moved = env_path(env, product.home_env, home)
    if moved is not None:
        roots = roots.with_root(f"${product.home_env}/", moved)
    disc = Discovery(product.rules)
    disc.discovery_roots[context] = roots.label(cwd)
    scan = Scan(
        home=home,
        project_root=project_root,
        cwd=cwd,
        env=env,
        roots=roots,
        product_home=moved if moved is not None else home / product.home_dir,
        relocated=moved is not None,
        system_root=system_root,
        platform=platform,
        context=context,
        upward_limit=upward_limit,
        include_user=include_user,
        profile=profile,
        disc=disc,
    )
    product.find(scan)
    return disc


__all__ = ["ConfigFile", "Product", "Scan", "Where", "discover_product"]
