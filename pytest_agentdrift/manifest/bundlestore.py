"""The bundles directory: where it is, writing an object and binding a name, loading, listing, showing.

    <bundles>/objects/<sha256 hex>/bundle.json   what the digest covers, and provenance
    <bundles>/objects/<sha256 hex>/files/...     the files, read-only
    <bundles>/names/<NAME>.json                  a name bound to one digest, once

Every load re-hashes the files against the recorded digest, so an object
edited after it was stored is refused, not used.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from pytest_agentdrift.canonical import digest, dumps_pretty, hash_file, load_json_file
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.manifest.bundlemodel import (
    BUNDLE_FILE,
    BUNDLE_VERSION,
    CATEGORIES,
    SCOPES,
    Bundle,
    BundleFile,
    safe_rel,
    sub_digests,
)
from pytest_agentdrift.vocabulary import utc_timestamp

#: where a project keeps its bundles unless told otherwise (under the rootdir)
DEFAULT_STORE = Path(".agentdrift") / "bundles"
STORE_ENV = "AGENTDRIFT_BUNDLES"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


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


# --------------------------------------------------------------------------- writing an object, binding a name


def check_name(name: str) -> None:
    if not NAME.fullmatch(name or ""):
        raise AgentDriftError(
            f"bundle name {name!r}: use letters, digits, '.', '_' or '-' (at most 100, starting with a letter or digit)"
        )


def store_object(
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


def check_binding(store: Path, name: str, digest_: str) -> None:
    path = store / "names" / f"{name}.json"
    if path.is_file() and (existing := read_name(path)) != digest_:
        raise AgentDriftError(
            f"bundle name {name!r} already names {existing}; bundles are immutable: snapshot under a new name", path
        )


def bind_name(store: Path, name: str, bundle: Bundle) -> None:
    """Bind a name to a digest once; an existing binding to other content is refused."""
    names = store / "names"
    path = names / f"{name}.json"
    record = {"name": name, "digest": bundle.digest, "bound_at": utc_timestamp()}
    try:
        names.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    except FileExistsError:
        existing = read_name(path)
        if existing != bundle.digest:
            raise AgentDriftError(
                f"bundle name {name!r} already names {existing}; bundles are immutable: snapshot under a new name", path
            ) from None
        return
    except OSError as exc:
        raise AgentDriftError(f"cannot write to the bundles directory: {exc.strerror or exc}", names) from None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(dumps_pretty(record))


def read_name(path: Path) -> str:
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
        digest_ = read_name(store / "names" / f"{text}.json")
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


def _verified_file(root: Path, f: BundleFile) -> Path:
    """Where the listed file `f` is stored, once its entry is valid and its content hashes as recorded;
    AgentDriftError otherwise."""
    if f.scope not in SCOPES or f.category not in CATEGORIES or not safe_rel(f.path):
        raise AgentDriftError(f"bad file entry {f.scope}:{f.path}", root / BUNDLE_FILE)
    src = root / "files" / f.scope / f.path
    try:
        if src.is_symlink() or hash_file(src) != f.sha256:
            raise AgentDriftError(
                f"{f.scope} file {f.path} differs from what was recorded; bundles are immutable", root
            )
    except OSError:
        raise AgentDriftError(f"{f.scope} file {f.path} is missing from the stored bundle", root) from None
    return src


def _check_stored_files(root: Path, files: list[BundleFile]) -> None:
    """Returns when the stored files are exactly those listed, each as recorded; AgentDriftError
    otherwise, for the first bad listed file, else for the files added beside them."""
    listed = {_verified_file(root, f) for f in files}
    extra = (
        [p for p in (root / "files").rglob("*") if p.is_file() and p not in listed] if (root / "files").is_dir() else []
    )
    if extra:
        raise AgentDriftError(
            f"files were added to the stored bundle after it was recorded: "
            f"{', '.join(p.relative_to(root).as_posix() for p in extra[:5])}",
            root,
        )


def _verified(root: Path, name: str | None) -> Bundle:
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
    _check_stored_files(root, files)
    if sub_digests(files) != doc.get("digests"):
        raise AgentDriftError("bundle.json's sub-digests do not match its files", root / BUNDLE_FILE)
    return Bundle(root, doc, name)


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
        digest_ = read_name(path)
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


__all__ = [
    "DEFAULT_STORE",
    "NAME",
    "STORE_ENV",
    "BundleRow",
    "bind_name",
    "check_binding",
    "check_name",
    "list_bundles",
    "load",
    "names_for",
    "read_name",
    "resolve_store",
    "show_lines",
    "store_object",
]
