"""Instruction bundles: a team's agent setup, snapshotted read-only and stored by content.

A bundle is what a product reads by its own discovery rules (the project's
CLAUDE.md / AGENTS.md / settings / MCP config / skills / commands / hooks,
and the same under the user's home), plus the model and options, copied
into a bundles directory:

    <bundles>/objects/<sha256 hex>/bundle.json          what the digest covers, and provenance
    <bundles>/objects/<sha256 hex>/files/project/<path>  project-scope files (overlaid into each work tree)
    <bundles>/objects/<sha256 hex>/files/user/<path>     user-scope files, home-relative (into the private home)
    <bundles>/names/<NAME>.json                          a name bound to one digest, once

The digest is the canonical digest of ``bundle.json["identity"]`` (agent,
model, options, and every file's scope, path, size and sha256): the same
files and options give the same digest on any machine. A bundle is
immutable: a name is bound once (binding it to other content is refused),
and every load re-hashes the files against the recorded digest, so an
object edited after it was stored is refused, not used.

Two sub-digests split the files the way the runtime identity does:
``digests.instructions`` (instruction text: memory files, rules, skills,
subagents, commands; by normalised text hash) and ``digests.config``
(settings, MCP, hooks; by raw hash). A session run with the bundle folds
them into the manifest's ``instruction_hash`` and ``config_hash``, so two
bundles that differ in one CLAUDE.md line differ in ``instruction_hash``
alone.

Snapshot only reads. Credential files (the adapter's ``credential_files``,
and names that look like keys or tokens) and symlinks are never copied;
nested instruction files (``src/CLAUDE.md``) are left out because frozen
task repositories do not share the project's layout. Every file left out
is listed in ``provenance.skipped`` with its reason.

No pytest here; GitPython is not needed.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from pytest_agentdrift.canonical import digest, dumps_pretty, hash_file, load_json_file, sha256_hex
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.record.redact import SECRET_NAME, variants  # one notion of a secret, one set of its forms
from pytest_agentdrift.shapes import BundleEntry
from pytest_agentdrift.vocabulary import utc_timestamp

if TYPE_CHECKING:
    from pytest_agentdrift.agents.base import AgentAdapter

BUNDLE_VERSION = 1
BUNDLE_FILE = "bundle.json"
#: where a project keeps its bundles unless told otherwise (under the rootdir)
DEFAULT_STORE = Path(".agentdrift") / "bundles"
STORE_ENV = "AGENTDRIFT_BUNDLES"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
#: a bundle is instruction text and configuration: larger files are not taken (listed as skipped)
MAX_FILE_BYTES = 1 << 20
MAX_BUNDLE_BYTES = 32 << 20
SCOPES = ("project", "user")
CATEGORIES = ("instructions", "config")
#: file names that hold credentials whatever the product: never copied into a bundle
_CREDENTIAL_NAME = re.compile(
    r"(^|/)(\.credentials\.json|auth\.json|\.env(\.[^/]*)?|\.netrc|credentials(\.json)?|[^/]*token[^/]*\.(json|txt)"
    r"|[^/]*\.(pem|key|p12|pfx))$",
    re.IGNORECASE,
)
_DERIVED_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


# --------------------------------------------------------------------------- the store


def resolve_store(
    explicit: str | os.PathLike[str] | None, ini: str | None, env: Mapping[str, str], rootdir: Path
) -> Path:
    """The bundles directory, the same way for the plugin and the CLI.

    The command line (``--agent-bundles`` / ``--bundles``) wins, then the
    ``agent_bundles`` ini value, then ``AGENTDRIFT_BUNDLES``, then
    ``.agentdrift/bundles`` under the rootdir. A relative ini value is
    relative to the rootdir (like every ini path); a relative command-line
    or environment value to the current directory.
    """
    for value, base in ((explicit, None), (ini, Path(rootdir)), (env.get(STORE_ENV), None)):
        if value not in (None, ""):
            path = Path(os.path.expanduser(os.fspath(value)))
            return path if path.is_absolute() else (base / path if base is not None else Path(os.path.abspath(path)))
    return Path(rootdir) / DEFAULT_STORE


# --------------------------------------------------------------------------- the bundle


@dataclass(frozen=True)
class BundleFile:
    scope: str  # project | user
    path: str  # posix, relative to the project root or the home directory
    size: int
    sha256: str
    normalised_sha256: str
    executable: bool
    category: str  # instructions | config
    kind: str  # memory, rules, skill, subagent, command, settings, mcp, hook, ...

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BundleFile:
        given = {f.name: d[f.name] for f in fields(cls)}
        return cls(**{**given, "size": int(d["size"]), "executable": bool(d["executable"])})


@dataclass(frozen=True)
class Bundle:
    root: Path  # the object directory
    doc: dict[str, Any]  # bundle.json
    name: str | None = None  # the name it was loaded by, when it was

    @property
    def digest(self) -> str:
        return self.doc["digest"]

    @property
    def short(self) -> str:
        return self.digest.split(":", 1)[1][:12]

    @property
    def label(self) -> str:
        return self.name or self.short

    @property
    def identity(self) -> dict[str, Any]:
        return self.doc["identity"]

    @property
    def agent(self) -> str:
        return self.identity["agent"]

    @property
    def model(self) -> str | None:
        return self.identity.get("model")

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.identity.get("options") or {})

    @property
    def files(self) -> list[BundleFile]:
        return [BundleFile.from_dict(f) for f in self.identity["files"]]

    def source(self, f: BundleFile) -> Path:
        return self.root / "files" / f.scope / f.path

    def scoped(self, scope: str) -> list[BundleFile]:
        return [f for f in self.files if f.scope == scope]

    @property
    def removes(self) -> list[str]:
        """Project paths a derived bundle also deletes from each task's repo (``--agent-without``)."""
        return [p for p in (self.identity.get("derivation") or {}).get("without", []) if not p.startswith("~/")]

    def describe(self) -> BundleEntry:
        """What a run records about the bundle it ran with (no contents, no machine paths)."""
        ident = self.identity
        return {
            "name": self.name,
            "digest": self.digest,
            "agent": ident["agent"],
            "model": ident.get("model"),
            "options": ident.get("options") or {},
            "derived_from": ident.get("derived_from"),
            "derivation": ident.get("derivation"),
            "digests": self.doc["digests"],
            "files": [
                {"scope": f.scope, "path": f.path, "size": f.size, "category": f.category, "kind": f.kind}
                for f in self.files
            ],
        }


def _identity_doc(
    agent: str,
    rules: str,
    model: str | None,
    options: Mapping[str, object],
    files: Sequence[BundleFile],
    derived_from: str | None = None,
    derivation: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    return {
        "bundle_version": BUNDLE_VERSION,
        "agent": agent,
        "surface_rules": rules,
        "model": model,
        "options": {k: v for k, v in sorted(options.items()) if v is not None},
        "files": [f.to_dict() for f in sorted(files, key=lambda f: (f.scope, f.path))],
        "derived_from": derived_from,
        "derivation": dict(derivation) if derivation else None,
    }


def sub_digests(files: Iterable[BundleFile]) -> dict[str, str]:
    """The instruction and configuration parts, hashed the way the manifest hashes them."""
    files = sorted(files, key=lambda f: (f.scope, f.path))
    return {
        # instruction text by its normalised form: a CRLF re-save is the same instruction
        "instructions": digest([[f.scope, f.path, f.normalised_sha256] for f in files if f.category == "instructions"]),
        "config": digest([[f.scope, f.path, f.sha256, f.executable] for f in files if f.category == "config"]),
    }


# --------------------------------------------------------------------------- snapshot


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
            for full in _tree_files(top, self.out.skipped, _scoped_label(scope, tree)):
                rel = f"{tree}/{full.relative_to(top).as_posix()}"
                is_config = "hooks" in PurePosixPath(rel).parts or rel.startswith(".codex/rules/")
                if (scope, rel) not in self.out.files:
                    kind = "hook" if is_config else _tree_kind(rel)
                    self.out.files[(scope, rel)] = (full, "config" if is_config else "instructions", kind)


def _tree_kind(rel: str) -> str:
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


def _tree_files(top: Path, skipped: list[dict[str, str]], label: str) -> list[Path]:
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


def _read_file(source: Path) -> tuple[bytes | None, bool, str | None]:
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
    _check_name(name)
    project = Path(os.path.abspath(project))
    if not project.is_dir():
        raise AgentDriftError("--dir: not a directory", project)
    adapter_cls = _adapter_class(agent)
    rules = _rules_for(adapter_cls)
    collected = _collect(adapter_cls, rules, project, Path(home), env, project_only)
    payload, files = _read_collected(collected)
    identity = _identity_doc(agent, rules, model, dict(options or {}), files)
    provenance = {
        "created_at": utc_timestamp(now),
        "source": {"project": _private_free(project), "home": "~/", "project_only": project_only},
        "skipped": sorted(collected.skipped, key=lambda s: (s["path"], s["reason"])),
    }
    _check_binding(store, name, digest(identity))  # refused before anything is written
    bundle, created = _store(store, identity, provenance, payload)
    _bind_name(store, name, bundle)
    return Bundle(bundle.root, bundle.doc, name), created


def _read_collected(collected: _Collected) -> tuple[dict[tuple[str, str], bytes], list[BundleFile]]:
    """The bytes and the file entries of everything collected; what cannot be read is skipped with
    its reason, and a bundle larger than MAX_BUNDLE_BYTES is refused."""
    payload: dict[tuple[str, str], bytes] = {}
    files: list[BundleFile] = []
    total = 0
    for (scope, rel), (source, category, kind) in sorted(collected.files.items()):
        data, executable, why = _read_file(source)
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
        files.append(_bundle_file(scope, rel, data, executable, category, kind))
    return payload, files


def _bundle_file(scope: str, rel: str, data: bytes, executable: bool, category: str, kind: str) -> BundleFile:
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


def _check_name(name: str) -> None:
    if not NAME.fullmatch(name or ""):
        raise AgentDriftError(
            f"bundle name {name!r}: use letters, digits, '.', '_' or '-' (at most 100, starting with a letter or digit)"
        )


def _store(
    store: Path, identity: dict[str, Any], provenance: dict[str, Any], payload: Mapping[tuple[str, str], bytes]
) -> tuple[Bundle, bool]:
    """Write an object atomically (a temp dir renamed into place); reuse an identical one."""
    digest_ = digest(identity)
    doc = {
        "digest": digest_,
        "identity": identity,
        "digests": sub_digests(BundleFile.from_dict(f) for f in identity["files"]),
        "provenance": provenance,
    }
    objects = store / "objects"
    target = objects / digest_.split(":", 1)[1]
    if target.is_dir():
        return _verified(target, None), False
    try:
        objects.mkdir(parents=True, exist_ok=True)
        tmp = objects / f".tmp-{secrets.token_hex(6)}"
        tmp.mkdir()
    except OSError as exc:
        raise AgentDriftError(f"cannot write to the bundles directory: {exc.strerror or exc}", store) from None
    try:
        for f in identity["files"]:
            dst = tmp / "files" / f["scope"] / f["path"]
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(payload[(f["scope"], f["path"])])
            os.chmod(dst, 0o555 if f["executable"] else 0o444)
        (tmp / BUNDLE_FILE).write_text(dumps_pretty(doc), encoding="utf-8")
        os.chmod(tmp / BUNDLE_FILE, 0o444)
        try:
            os.rename(tmp, target)
        except OSError:
            if not target.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another process stored the same content first
            return _verified(target, None), False
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise AgentDriftError(f"cannot write the bundle: {exc.strerror or exc}", target) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Bundle(target, doc), True


def _check_binding(store: Path, name: str, digest_: str) -> None:
    path = store / "names" / f"{name}.json"
    if path.is_file() and (existing := _read_name(path)) != digest_:
        raise AgentDriftError(
            f"bundle name {name!r} already names {existing}; bundles are immutable: snapshot under a new name", path
        )


def _bind_name(store: Path, name: str, bundle: Bundle) -> None:
    """Bind a name to a digest once; an existing binding to other content is refused."""
    names = store / "names"
    path = names / f"{name}.json"
    record = {"name": name, "digest": bundle.digest, "bound_at": utc_timestamp()}
    try:
        names.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    except FileExistsError:
        existing = _read_name(path)
        if existing != bundle.digest:
            raise AgentDriftError(
                f"bundle name {name!r} already names {existing}; bundles are immutable: snapshot under a new name", path
            ) from None
        return
    except OSError as exc:
        raise AgentDriftError(f"cannot write to the bundles directory: {exc.strerror or exc}", names) from None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(dumps_pretty(record))


def _read_name(path: Path) -> str:
    doc = load_json_file(path)
    value = doc.get("digest") if isinstance(doc, dict) else None
    if not isinstance(value, str) or not value.startswith("sha256:"):
        raise AgentDriftError("not a bundle name record (no digest)", path)
    return value


# --------------------------------------------------------------------------- load, list, show


def load(store: Path, ref: str | os.PathLike[str]) -> Bundle:
    """A stored bundle by NAME, by digest (``sha256:…`` or a unique hex prefix), or by directory; verified."""
    text = os.fspath(ref)
    as_path = Path(os.path.expanduser(text))
    if (as_path / BUNDLE_FILE).is_file():
        return _verified(as_path, None)
    if ("/" in text or os.sep in text) and as_path.is_dir():
        raise AgentDriftError(
            f"{text} is a directory but not a bundle (no {BUNDLE_FILE}): snapshot it first with "
            f"agentdrift bundle snapshot NAME --agent PRESET --dir {text}"
        )
    if NAME.fullmatch(text) and (store / "names" / f"{text}.json").is_file():
        digest_ = _read_name(store / "names" / f"{text}.json")
        target = store / "objects" / digest_.split(":", 1)[1]
        if not target.is_dir():
            raise AgentDriftError(f"bundle {text!r} names {digest_}, which is not in the store", store)
        return _verified(target, text)
    hexpart = text.removeprefix("sha256:")
    if re.fullmatch(r"[0-9a-f]{6,64}", hexpart) and (store / "objects").is_dir():
        hits = [p for p in (store / "objects").iterdir() if p.name.startswith(hexpart) and p.is_dir()]
        if len(hits) == 1:
            return _verified(hits[0], None)
        if len(hits) > 1:
            raise AgentDriftError(f"bundle digest prefix {text!r} is ambiguous ({len(hits)} bundles)", store)
    known = ", ".join(sorted(n["name"] for n in list_bundles(store))) if store.is_dir() else ""
    raise AgentDriftError(
        f"no bundle {text!r} in {store}"
        + (f" (known: {known})" if known else " (snapshot one with: agentdrift bundle snapshot NAME --agent PRESET)")
    )


def _verified(root: Path, name: str | None) -> Bundle:  # noqa: C901 (known debt: split by job when next touched)
    """Load an object and re-hash everything it claims: an edited object is refused."""
    doc = load_json_file(root / BUNDLE_FILE)
    if not isinstance(doc, dict) or not isinstance(doc.get("identity"), dict) or "digest" not in doc:
        raise AgentDriftError("not a bundle (bundle.json has no identity and digest)", root / BUNDLE_FILE)
    identity = doc["identity"]
    if identity.get("bundle_version") != BUNDLE_VERSION:
        raise AgentDriftError(f"unsupported bundle_version {identity.get('bundle_version')!r}", root / BUNDLE_FILE)
    if digest(identity) != doc["digest"]:
        raise AgentDriftError(
            "bundle.json was edited after the bundle was stored (digest mismatch); bundles are immutable",
            root / BUNDLE_FILE,
        )
    try:
        files = [BundleFile.from_dict(f) for f in identity["files"]]
    except (KeyError, TypeError, ValueError):
        raise AgentDriftError("malformed file list in bundle.json", root / BUNDLE_FILE) from None
    listed = set()
    for f in files:
        if f.scope not in SCOPES or f.category not in CATEGORIES or not _safe_rel(f.path):
            raise AgentDriftError(f"bad file entry {f.scope}:{f.path}", root / BUNDLE_FILE)
        src = root / "files" / f.scope / f.path
        listed.add(src)
        try:
            if src.is_symlink() or hash_file(src) != f.sha256:
                raise AgentDriftError(
                    f"{f.scope} file {f.path} differs from what was recorded; bundles are immutable", root
                )
        except OSError:
            raise AgentDriftError(f"{f.scope} file {f.path} is missing from the stored bundle", root) from None
    extra = (
        [p for p in (root / "files").rglob("*") if p.is_file() and p not in listed] if (root / "files").is_dir() else []
    )
    if extra:
        raise AgentDriftError(
            f"files were added to the stored bundle after it was recorded: "
            f"{', '.join(p.relative_to(root).as_posix() for p in extra[:5])}",
            root,
        )
    if sub_digests(files) != doc.get("digests"):
        raise AgentDriftError("bundle.json's sub-digests do not match its files", root / BUNDLE_FILE)
    return Bundle(root, doc, name)


def _safe_rel(rel: str) -> bool:
    p = PurePosixPath(rel)
    return bool(rel) and not p.is_absolute() and ".." not in p.parts and "\\" not in rel


class BundleRow(TypedDict):
    """One named bundle as `agentdrift bundle list` shows it (list_bundles); `problem` instead of
    the bundle's facts when its object cannot be read."""

    name: str
    digest: str
    agent: NotRequired[str]
    model: NotRequired[str | None]
    files: NotRequired[int]
    bytes: NotRequired[int]
    derived_from: NotRequired[str | None]
    created_at: NotRequired[str | None]
    problem: NotRequired[str]


def list_bundles(store: Path) -> list[BundleRow]:
    """Every named bundle: name, digest, agent, model, files, bytes, derived_from (sorted by name)."""
    out: list[BundleRow] = []
    names = store / "names"
    if not names.is_dir():
        return out
    for path in sorted(names.glob("*.json")):
        digest_ = _read_name(path)
        target = store / "objects" / digest_.split(":", 1)[1]
        row: BundleRow = {"name": path.stem, "digest": digest_}
        try:
            doc = load_json_file(target / BUNDLE_FILE)
            ident = doc["identity"]
            facts: BundleRow = {
                "name": path.stem,
                "digest": digest_,
                "agent": ident["agent"],
                "model": ident.get("model"),
                "files": len(ident["files"]),
                "bytes": sum(f["size"] for f in ident["files"]),
                "derived_from": ident.get("derived_from"),
                "created_at": doc.get("provenance", {}).get("created_at"),
            }
            row = facts
        except (AgentDriftError, KeyError, TypeError):
            row["problem"] = "object missing or unreadable"
        out.append(row)
    return out


def names_for(store: Path, digest_: str) -> list[str]:
    return [row["name"] for row in list_bundles(store) if row["digest"] == digest_]


def show_lines(bundle: Bundle, store: Path | None = None) -> list[str]:
    """What a person reads about one bundle: identity, files with sizes, what was left out."""
    ident, prov = bundle.identity, bundle.doc.get("provenance", {})
    names = names_for(store, bundle.digest) if store is not None else ([bundle.name] if bundle.name else [])
    lines = [
        f"bundle      {', '.join(names) or '(no name)'}  {bundle.digest}",
        f"agent       {ident['agent']}  model {ident.get('model') or '(preset default)'}"
        + (f"  options {json.dumps(ident.get('options'), sort_keys=True)}" if ident.get("options") else ""),
        f"created     {prov.get('created_at', '?')}  from {prov.get('source', {}).get('project', '?')}",
    ]
    if ident.get("derived_from"):
        lines.append(f"derived     from {ident['derived_from']}: {json.dumps(ident.get('derivation'), sort_keys=True)}")
    lines.append(f"digests     instructions {bundle.doc['digests']['instructions']}")
    lines.append(f"            config       {bundle.doc['digests']['config']}")
    files = bundle.files
    lines.append(f"files       {len(files)} ({sum(f.size for f in files)} B)")
    for f in files:
        where = "project:" if f.scope == "project" else "~/"
        lines.append(f"  {f.size:>7} B  {f.category:<12} {f.kind:<18} {where}{f.path}")
    for s in prov.get("skipped", []):
        lines.append(f"  skipped    {s['path']}: {s['reason']}")
    return lines


# --------------------------------------------------------------------------- secrets travelling with a bundle

_VALUES_ARE_SECRET = frozenset({"env", "headers", "http_headers", "env_http_headers", "environment"})
_SECRET_FLAG = re.compile(r"^--?[\w-]*(token|key|secret|password|passwd|auth|bearer)[\w-]*$", re.IGNORECASE)
_SECRET_SHAPE = re.compile(r"^(sk-|ghp_|gho_|ghs_|github_pat_|xox[abpr]-|AKIA|AIza|glpat-|eyJ)[A-Za-z0-9._~+/=-]{6,}$")


def secret_strings(bundle: Bundle) -> list[str]:
    """Values in the bundle's configuration that the manifest treats as secret, to keep out of every artifact.

    A team's settings and MCP files travel with the bundle into the work
    tree, where the agent can read and print them. The runs record only
    hashes of them, and these values (environment and header values, keys
    that name a credential, the argument after a ``--token``-like flag,
    strings shaped like well-known tokens, URL userinfo), also in hex and
    base64, are scrubbed from run artifacts like the session's own secrets.
    Hook scripts are not parsed: a token written into a script is not found.
    """
    found: set[str] = set()
    for f in bundle.files:
        if f.category == "config":
            doc = _parsed_config(bundle.source(f).read_bytes(), f.path)
            if doc is not None:
                _find_secrets(doc, found)
    out: set[str] = set()
    for value in found:
        if len(value) >= 6:
            out.update(variants(value))
    return sorted(out, key=len, reverse=True)


def _parsed_config(data: bytes, path: str) -> object:
    """A TOML, JSON or JSONC configuration file's value; None for another format or a file that does not parse."""
    import tomllib

    from pytest_agentdrift.agents.discovery_base import strip_jsonc

    try:
        if path.endswith(".toml"):
            return tomllib.loads(data.decode("utf-8"))
        if path.endswith((".json", ".jsonc")):
            return json.loads(strip_jsonc(data.decode("utf-8")))
    except (ValueError, UnicodeDecodeError):
        return None
    return None


def _find_secrets(value: object, found: set[str], secret: bool = False) -> None:
    """Add to ``found`` every string of ``value`` the manifest treats as secret (see secret_strings)."""
    if isinstance(value, dict):
        for k, v in value.items():
            _find_secrets(v, found, secret or str(k).lower() in _VALUES_ARE_SECRET or bool(SECRET_NAME.search(str(k))))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            before = value[i - 1] if i > 0 else None
            flagged = isinstance(before, str) and bool(_SECRET_FLAG.match(before))
            if isinstance(item, str) and "=" in item and _SECRET_FLAG.match(item.split("=", 1)[0]):
                found.add(item.split("=", 1)[1])
            _find_secrets(item, found, secret or flagged)
    elif isinstance(value, str):
        if secret or _SECRET_SHAPE.match(value):
            found.add(value)
        if "://" in value:
            _url_secrets(value, found)


def _url_secrets(value: str, found: set[str]) -> None:
    """A URL's password, and a long user name given without one (a token in the user slot)."""
    from urllib.parse import urlsplit

    try:
        user = urlsplit(value)
    except ValueError:
        return
    if user.password:
        found.add(user.password)
    if user.username and user.password is None and len(user.username) >= 8:
        found.add(user.username)


# --------------------------------------------------------------------------- derive


def derive(
    store: Path, base: Bundle, *, without: Sequence[str] = (), with_: Sequence[str] = (), cwd: Path, home: Path
) -> Bundle:
    """B = base minus the ``without`` paths plus the ``with`` items, stored and named (findable again).

    A ``without`` path is project-relative (``CLAUDE.md``, ``.claude/skills/pdf``)
    or home-relative (``~/.claude/CLAUDE.md``); a directory removes everything
    below it. A ``with`` item is a project-relative path taken from ``cwd``,
    a home-relative ``~/`` path taken from ``home``, or ``plugin:DIR``: the
    skills, subagents and commands of a plugin directory, placed where the
    product reads project components (agents/<product>/discovery.py
    PLUGIN_LAYOUT). Removing a path that is neither in the bundle nor meant
    for the task repositories is the caller's check (it knows the tasks).
    """
    from pytest_agentdrift.agents import products

    files = {(f.scope, f.path): f for f in base.files}
    payload = {(f.scope, f.path): base.source(f).read_bytes() for f in base.files}
    removed = _remove(files, payload, without)
    layout = getattr(products.rules_module(base.identity["surface_rules"]), "PLUGIN_LAYOUT", {})
    added = [_add(files, payload, spec, cwd, home, layout) for spec in with_]
    base_keys = {(f.scope, f.path) for f in base.files}
    added_files = sorted(f"{k[0]}:{k[1]}" for k in files if k not in base_keys or files[k].sha256 != _sha(base, k))
    derivation = {
        "without": list(without),
        "with": list(with_),
        "removed_files": removed,
        "added": added,
        "added_files": added_files,
    }
    identity = _identity_doc(
        base.agent,
        base.identity["surface_rules"],
        base.model,
        base.options,
        list(files.values()),
        derived_from=base.digest,
        derivation=derivation,
    )
    provenance = {
        "created_at": utc_timestamp(),
        "source": {"derived_from": base.digest, "base_name": base.name},
        "skipped": [],
    }
    name = _free_name(store, derived_name(base, without, with_), digest(identity))
    stored, _ = _store(store, identity, provenance, payload)
    _bind_name(store, name, stored)
    return Bundle(stored.root, stored.doc, name)


_Files = dict[tuple[str, str], BundleFile]
_Payload = dict[tuple[str, str], bytes]


def _remove(files: _Files, payload: _Payload, without: Sequence[str]) -> list[str]:
    """Drop each ``--agent-without`` path (a directory: everything below it); the files removed."""
    removed: list[str] = []
    for spec in without:
        scope, rel = _split_spec(spec, "--agent-without")
        hits = [k for k in files if k[0] == scope and (k[1] == rel or k[1].startswith(rel.rstrip("/") + "/"))]
        for k in hits:
            del files[k]
            payload.pop(k, None)
        removed.extend(f"{k[0]}:{k[1]}" for k in hits)
    return removed


def _add(
    files: _Files, payload: _Payload, spec: str, cwd: Path, home: Path, layout: Mapping[str, str]
) -> dict[str, object]:
    """Add one ``--agent-with`` item's files (replacing ones at the same path); what it added."""
    items, not_installed = _with_items(spec, cwd, home, layout)
    for scope, rel, source in items:
        data, executable, why = _read_file(source)
        if data is None:
            raise AgentDriftError(f"--agent-with {spec}: {why}", source)
        is_config = "hooks" in PurePosixPath(rel).parts or rel.endswith((".json", ".toml"))
        kind = "settings" if is_config else _tree_kind(rel)
        files[(scope, rel)] = _bundle_file(
            scope, rel, data, executable, "config" if is_config else "instructions", kind
        )
        payload[(scope, rel)] = data
    return {"item": spec, "files": len(items), "not_installed": not_installed}


def _free_name(store: Path, name: str, digest_: str) -> str:
    """The derived name, unless it already names other content: the same recipe gave other content
    (an added file changed since), so both are kept, told apart by digest."""
    taken = store / "names" / f"{name}.json"
    if taken.is_file() and _read_name(taken) != digest_:
        return f"{name[:90]}-{digest_.split(':', 1)[1][:8]}"
    return name


def _sha(bundle: Bundle, key: tuple[str, str]) -> str | None:
    return next((f.sha256 for f in bundle.files if (f.scope, f.path) == key), None)


def derived_name(base: Bundle, without: Sequence[str], with_: Sequence[str]) -> str:
    parts = [base.label] + [f"without-{w}" for w in without] + [f"with-{w}" for w in with_]
    name = _DERIVED_SLUG.sub("_", "--".join(parts)).strip("._-")
    if len(name) > 100:
        name = name[:83] + "-" + sha256_hex(name.encode())[:16]
    return name


def _split_spec(spec: str, option: str) -> tuple[str, str]:
    if spec.startswith("~/"):
        scope, rel = "user", spec[2:]
    else:
        scope, rel = "project", spec[2:] if spec.startswith("./") else spec
    rel = rel.rstrip("/")
    if not _safe_rel(rel):
        raise AgentDriftError(
            f"{option} {spec!r}: give a path relative to the project (or ~/ for the home directory), without '..'"
        )
    return scope, rel


def _with_items(
    spec: str, cwd: Path, home: Path, layout: Mapping[str, str]
) -> tuple[list[tuple[str, str, Path]], list[str]]:
    """(scope, bundle path, source) for one ``--agent-with`` item, and the plugin parts not installed."""
    if spec.startswith("plugin:"):
        raw = spec[len("plugin:") :]
        plugin = Path(os.path.expanduser(raw))
        plugin = plugin if plugin.is_absolute() else cwd / plugin
        if not plugin.is_dir():
            raise AgentDriftError(
                f"--agent-with {spec}: not a directory (installed plugins are not looked up by "
                "name; give the plugin's directory)",
                plugin,
            )
        items: list[tuple[str, str, Path]] = []
        skipped: list[dict[str, str]] = []
        for part, dest in sorted(layout.items()):
            for full in _tree_files(plugin / part, skipped, f"plugin:{part}"):
                items.append(("project", f"{dest}/{full.relative_to(plugin / part).as_posix()}", full))
        not_installed = sorted(p.name for p in plugin.iterdir() if p.name not in layout)
        if not items:
            raise AgentDriftError(f"--agent-with {spec}: the plugin has none of {', '.join(sorted(layout))}", plugin)
        return items, not_installed
    scope, rel = _split_spec(spec, "--agent-with")
    source = (home if scope == "user" else cwd) / rel
    if source.is_dir() and not source.is_symlink():
        skipped = []
        return [
            (scope, f"{rel}/{full.relative_to(source).as_posix()}", full) for full in _tree_files(source, skipped, spec)
        ], []
    if not source.is_file():
        raise AgentDriftError(f"--agent-with {spec}: no such file or directory", source)
    return [(scope, rel, source)], []


__all__ = [
    "Bundle",
    "BundleFile",
    "DEFAULT_STORE",
    "derive",
    "list_bundles",
    "load",
    "resolve_store",
    "show_lines",
    "snapshot",
    "sub_digests",
]
