"""Snapshot: what a product reads from a project and a home directory, copied into a new bundle.

Snapshot only reads. Credential files (the adapter's ``credential_files``,
and names that look like keys or tokens) and symlinks are never copied;
nested instruction files (``src/CLAUDE.md``) are left out because frozen
task repositories do not share the project's layout. Every file left out
is listed in ``provenance.skipped`` with its reason.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from pytest_agentdrift.canonical import digest, sha256_hex
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.manifest.bundlemodel import Bundle, BundleFile, identity_doc
from pytest_agentdrift.manifest.bundlestore import bind_name, check_binding, check_name, store_object
from pytest_agentdrift.vocabulary import utc_timestamp

if TYPE_CHECKING:
    from pytest_agentdrift.agents.base import AgentAdapter

#: a bundle is instruction text and configuration: larger files are not taken (listed as skipped)
MAX_FILE_BYTES = 1 << 20
MAX_BUNDLE_BYTES = 32 << 20
#: file names that hold credentials whatever the product: never copied into a bundle
_CREDENTIAL_NAME = re.compile(
    r"(^|/)(\.credentials\.json|auth\.json|\.env(\.[^/]*)?|\.netrc|credentials(\.json)?|[^/]*token[^/]*\.(json|txt)"
    r"|[^/]*\.(pem|key|p12|pfx))$",
    re.IGNORECASE,
)


def _adapter_class(agent: str) -> type[AgentAdapter]:
    from pytest_agentdrift.agents.base import builtin_adapters

    presets = builtin_adapters()
    if agent not in presets:
        raise AgentDriftError(f"--agent: unknown agent {agent!r}; known: {', '.join(sorted(presets))}")
    return presets[agent]


def _rules_for(adapter_cls: type[AgentAdapter]) -> str:
    from pytest_agentdrift.agents import products

    rules = products.surface_rules_for({"name": adapter_cls.name, "product": adapter_cls.product})
    if rules == products.GENERIC:
        raise AgentDriftError(
            f"agent {adapter_cls.name!r} has no documented discovery rules: a bundle needs a "
            f"product preset ({', '.join(products.PRODUCT_PACKAGES)})"
        )
    return rules


@dataclass
class _Collected:
    files: dict[tuple[str, str], tuple[Path, str, str]]  # (scope, rel) -> (source, category, kind)
    skipped: list[dict[str, str]]


def _label_to_file(
    label: str, home: Path, project: Path, env: Mapping[str, str], home_env: Mapping[str, str]
) -> tuple[str, str, Path] | None:
    """(scope, relative path, absolute source) for a discovery label, or None outside project and home."""
    if label.startswith("project:"):
        rel = label[len("project:") :]
        return "project", rel, project / rel
    if label.startswith("~/"):
        rel = label[2:]
        return "user", rel, home / rel
    for var, default in home_env.items():
        prefix = f"${var}/"
        if label.startswith(prefix) and env.get(var):
            rel = label[len(prefix) :]
            return "user", f"{default}/{rel}", Path(os.path.expanduser(env[var])) / rel
    return None


def _collect(
    adapter_cls: type[AgentAdapter], rules: str, project: Path, home: Path, env: Mapping[str, str], project_only: bool
) -> _Collected:
    """What a bundle takes: the files discovery finds, the product's component trees, minus credentials."""
    from pytest_agentdrift.agents import products
    from pytest_agentdrift.agents.discovery_base import Roots

    module = products.rules_module(rules)
    if module is None:  # _rules_for names a product's rules
        raise AgentDriftError(f"no discovery rules {rules!r}")
    disc = module.discover(
        home,
        project,
        project,
        env,
        system_root=None,
        context="snapshot",
        roots=Roots.build([("~/", home), ("project:", project)]),
        upward_limit=project,
        include_user=not project_only,
    )
    home_env = dict(getattr(adapter_cls, "config_home_env", {}))
    taker = _Taker(home, project, env, home_env, set(adapter_cls.credential_files))
    for e in disc.entries:
        if e.raw_sha256 is None:
            continue  # missing / unreadable: nothing to copy
        if e.scope == "nested":
            taker.skip(e.path, "nested instruction file: frozen task repositories do not share the project's layout")
            continue
        taker.take(e.path, "instructions", e.kind)
    for src in disc.config:
        if src.get("status") != "present" or "#" in src.get("path", ""):
            continue  # absent, or a sub-document of a file (its file is its own source)
        taker.take(src["path"], "config", "mcp" if "mcp" in src.get("scope", "") else "settings")
    trees = products.bundle_trees(rules)
    taker.trees("project", project, trees["project"])
    if not project_only:
        taker.trees("user", home, trees["user"])
    out = taker.out
    # names that look like credentials are never copied, whatever list they came from
    for key in sorted(out.files):
        if _CREDENTIAL_NAME.search(key[1]):
            taker.skip(_scoped_label(*key), "looks like a credential file: never copied into a bundle")
            del out.files[key]
    return out


def _scoped_label(scope: str, rel: str) -> str:
    return ("project:" if scope == "project" else "~/") + rel


@dataclass
class _Taker:
    """Collects a bundle's files by their discovery labels, and what it leaves out and why."""

    home: Path
    project: Path
    env: Mapping[str, str]
    home_env: Mapping[str, str]  # variable that moves a product's user directory -> the directory it replaces
    credentials: set[str]
    out: _Collected = field(default_factory=lambda: _Collected(files={}, skipped=[]))

    def skip(self, label: str, reason: str) -> None:
        self.out.skipped.append({"path": label, "reason": reason})

    def take(self, label: str, category: str, kind: str) -> None:
        where = _label_to_file(label, self.home, self.project, self.env, self.home_env)
        if where is None:
            self.skip(
                label,
                "outside the project and the home directory (managed or system scope is not the team's to overlay)",
            )
            return
        scope, rel, source = where
        if scope == "user" and rel in self.credentials:
            self.skip(label, "credential file: never copied into a bundle")
            return
        if (scope, rel) not in self.out.files:
            self.out.files[(scope, rel)] = (source, category, kind)

    def trees(self, scope: str, base: Path, trees: Sequence[str]) -> None:
        """Every file of the product's component trees (a skill's scripts too); hooks are configuration."""
        for tree in trees:
            top = base / tree
            if scope == "user":
                for var, default in self.home_env.items():
                    if self.env.get(var) and (tree == default or tree.startswith(default + "/")):
                        top = Path(os.path.expanduser(self.env[var])) / tree[len(default) :].lstrip("/")
            for full in tree_files(top, self.out.skipped, _scoped_label(scope, tree)):
                rel = f"{tree}/{full.relative_to(top).as_posix()}"
                is_config = "hooks" in PurePosixPath(rel).parts or rel.startswith(".codex/rules/")
                if (scope, rel) not in self.out.files:
                    kind = "hook" if is_config else tree_kind(rel)
                    self.out.files[(scope, rel)] = (full, "config" if is_config else "instructions", kind)


def tree_kind(rel: str) -> str:
    parts = PurePosixPath(rel).parts
    for kind, marker in (
        ("skill", "skills"),
        ("subagent", "agents"),
        ("command", "commands"),
        ("command", "prompts"),
        ("rules", "rules"),
        ("path-instructions", "instructions"),
    ):
        if marker in parts:
            return kind
    return "file"


def tree_files(top: Path, skipped: list[dict[str, str]], label: str) -> list[Path]:
    """Regular files below ``top``, sorted; symlinks and special files are skipped with a reason."""
    if not top.is_dir() or top.is_symlink():
        return []
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for d in list(dirnames):
            if os.path.islink(os.path.join(dirpath, d)):
                skipped.append(
                    {
                        "path": f"{label}/{Path(dirpath, d).relative_to(top).as_posix()}",
                        "reason": "symlink: never followed into a bundle",
                    }
                )
                dirnames.remove(d)
            elif d in ("__pycache__", ".git", "node_modules"):
                dirnames.remove(d)
        for name in sorted(filenames):
            found.append(Path(dirpath) / name)
    return found


def read_file(source: Path) -> tuple[bytes | None, bool, str | None]:
    """(bytes, executable, why not) for a file to copy: regular, not a link, not too large."""
    try:
        st = os.lstat(source)
    except OSError as exc:
        return None, False, f"unreadable: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return None, False, "symlink: never followed into a bundle"
    if not stat.S_ISREG(st.st_mode):
        return None, False, "not a regular file"
    if st.st_size > MAX_FILE_BYTES:
        return None, False, f"larger than {MAX_FILE_BYTES} bytes: not instruction text or configuration"
    try:
        from pytest_agentdrift.canonical import read_regular

        data = read_regular(source, MAX_FILE_BYTES + 1)
    except OSError as exc:
        return None, False, f"unreadable: {exc.strerror or exc}"
    return data, bool(st.st_mode & stat.S_IXUSR), None


def _normalised(data: bytes) -> str:
    from pytest_agentdrift.agents.discovery_base import normalise_text

    return sha256_hex(normalise_text(data))


def snapshot(
    store: Path,
    name: str,
    *,
    agent: str,
    project: Path,
    home: Path,
    env: Mapping[str, str],
    model: str | None = None,
    options: Mapping[str, object] | None = None,
    project_only: bool = False,
    now: datetime | None = None,
) -> tuple[Bundle, bool]:
    """Record what ``agent`` reads from ``project`` and ``home`` as bundle ``name``; (bundle, newly stored).

    Read-only towards the project and the home directory. Snapshotting the
    same content under the same name again is a no-op; binding the name to
    different content is refused.
    """
    check_name(name)
    project = Path(os.path.abspath(project))
    if not project.is_dir():
        raise AgentDriftError("--dir: not a directory", project)
    adapter_cls = _adapter_class(agent)
    rules = _rules_for(adapter_cls)
    collected = _collect(adapter_cls, rules, project, Path(home), env, project_only)
    payload, files = _read_collected(collected)
    identity = identity_doc(agent, rules, model, dict(options or {}), files)
    provenance = {
        "created_at": utc_timestamp(now),
        "source": {"project": _private_free(project), "home": "~/", "project_only": project_only},
        "skipped": sorted(collected.skipped, key=lambda s: (s["path"], s["reason"])),
    }
    check_binding(store, name, digest(identity))  # refused before anything is written
    bundle, created = store_object(store, identity, provenance, payload)
    bind_name(store, name, bundle)
    return Bundle(bundle.root, bundle.doc, name), created


def _read_collected(collected: _Collected) -> tuple[dict[tuple[str, str], bytes], list[BundleFile]]:
    """The bytes and the file entries of everything collected; what cannot be read is skipped with
    its reason, and a bundle larger than MAX_BUNDLE_BYTES is refused."""
    payload: dict[tuple[str, str], bytes] = {}
    files: list[BundleFile] = []
    total = 0
    for (scope, rel), (source, category, kind) in sorted(collected.files.items()):
        data, executable, why = read_file(source)
        label = _scoped_label(scope, rel)
        if data is None:
            collected.skipped.append({"path": label, "reason": why or "unreadable"})
            continue
        total += len(data)
        if total > MAX_BUNDLE_BYTES:
            raise AgentDriftError(
                f"the bundle would exceed {MAX_BUNDLE_BYTES} bytes at {label}: a bundle holds "
                "instructions and configuration, not a project"
            )
        payload[(scope, rel)] = data
        files.append(bundle_file(scope, rel, data, executable, category, kind))
    return payload, files


def bundle_file(scope: str, rel: str, data: bytes, executable: bool, category: str, kind: str) -> BundleFile:
    return BundleFile(
        scope=scope,
        path=rel,
        size=len(data),
        sha256=sha256_hex(data),
        normalised_sha256=_normalised(data),
        executable=executable,
        category=category,
        kind=kind,
    )


def _private_free(path: Path) -> str:
    """The project directory by its last component only: no private path in a bundle document."""
    return f"…/{path.name}"


__all__ = ["MAX_BUNDLE_BYTES", "MAX_FILE_BYTES", "bundle_file", "read_file", "snapshot", "tree_files", "tree_kind"]
