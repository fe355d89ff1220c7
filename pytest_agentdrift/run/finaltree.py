"""The work tree a run left, kept so it can be graded again without the agent.

A run's final tree is the frozen repo/ (less its hidden files) plus what the
agent changed. The record keeps only the changes: `raw/<task>/r<n>/tree.json`
lists every changed path (a file with its mode, size and sha256, a symlink
with its target, an added empty directory, a deletion) and each file's bytes
are stored once in the record's `blobs/` directory under their sha256, shared
by every run that left the same content. Only the work tree is read, from the
harness's own diff of it, by directory fd and without following a link: a
file planted beside the tree is never kept, a link out of it is kept as a
link. Files over FILE_CAP and the bytes of a run over RUN_CAP are listed but
not kept (`kept: false`, with why), so a grader knows the tree is not whole.

`rebuild` puts such a tree back: the frozen repo, then the entries, each blob
checked against its name first, no path outside the destination written.
No pytest.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pytest_agentdrift.errors import RecordError
from pytest_agentdrift.safetext import escape_path, unescape_path
from pytest_agentdrift.tasks import fdtree
from pytest_agentdrift.vocabulary import BLOB_DIR, FINAL_TREE_FILE

if TYPE_CHECKING:
    from pytest_agentdrift.run.evidence import RunEvidence
    from pytest_agentdrift.tasks.taskspec import TaskSpec

TREE_FORMAT = 1
TREE_FILE = FINAL_TREE_FILE
#: a changed file larger than this is listed, not kept
FILE_CAP = 1 << 20
#: at most this many bytes of one run's changed files are kept
RUN_CAP = 8 << 20
#: at most this many changed paths of one run are listed
ENTRY_CAP = 20000
#: why a kept file that held a secret is not the agent's file (its bytes are the redacted ones)
REDACTED_FILE = "a secret the session knows was replaced in it: not the agent's file, not regradable"
REDACTED_PATH = "its path held a secret the session knows (listed redacted): not kept"
REDACTED_TARGET = "its link target held a secret the session knows: not kept"
#: mode bits a kept tree never holds nor puts back
SETID_BITS = stat.S_ISUID | stat.S_ISGID


@dataclass
class FinalTree:
    """tree.json's document and the blobs it names (sha256 hex -> bytes)."""

    doc: dict[str, Any]
    blobs: dict[str, bytes] = field(default_factory=dict)

    def to_payload(self, secrets_: list[str]) -> dict[str, Any]:
        """JSON-safe form for the way to the record, every known secret replaced in the bytes first.

        A file that held a secret is kept redacted (its sha256 is the redacted bytes',
        `redacted: true`, with why): it is not the agent's file, and grading it again would grade
        what the agent never wrote (missing_for_grading). A path that held one is listed under
        its redacted name, not kept."""
        blobs: dict[str, str] = {}
        entries: dict[str, Any] = {}
        for path, e in self.doc["entries"].items():
            clean_path = _scrub_text(path, secrets_)
            if clean_path != path:
                entries[clean_path] = _not_kept(REDACTED_PATH, kind=e.get("kind", "file"))
                continue
            if _scrub_text(e.get("target", ""), secrets_) != e.get("target", ""):
                entries[path] = _not_kept(REDACTED_TARGET, kind="link")
                continue
            entries[path] = e
            if e.get("kind") != "file" or not e.get("kept"):
                continue
            data = self.blobs[e["sha256"]]
            clean = _scrub_bytes(data, secrets_)
            if clean != data:
                e = {**e, "sha256": hashlib.sha256(clean).hexdigest(), "size": len(clean), "redacted": True}
                entries[path] = {**e, "why": REDACTED_FILE}
            blobs[e["sha256"]] = base64.b64encode(clean).decode("ascii")
        return {"tree": {**self.doc, "entries": entries}, "blobs": blobs}


def _scrub_text(text: str, secrets_: list[str]) -> str:
    return _scrub_bytes(text.encode("utf-8", "surrogateescape"), secrets_).decode("utf-8", "surrogateescape")


def _scrub_bytes(data: bytes, secrets_: list[str]) -> bytes:
    for s in secrets_:
        raw = s.encode("utf-8", "surrogateescape")
        if raw and raw in data:
            data = data.replace(raw, b"[REDACTED]")
    return data


def blob_path(record: Path, sha: str) -> Path:
    return Path(record) / BLOB_DIR / sha[:2] / sha


def capture(run: RunEvidence) -> FinalTree:
    """The changes of the run's final tree against its starting copy, read from the work tree."""
    d = run.diff
    changed = sorted({*d.added, *d.modified, *d.mode, *run.leftovers})
    entries: dict[str, Any] = {}
    blobs: dict[str, bytes] = {}
    kept_bytes = 0
    for rel in sorted(d.deleted)[:ENTRY_CAP]:
        entries[escape_path(rel)] = {"kind": "deleted"}
    leftovers = set(run.leftovers)
    for rel in changed[: max(0, ENTRY_CAP - len(entries))]:
        entry = _entry(run.work, rel, RUN_CAP - kept_bytes) if not run.work_tree_deleted else _not_kept("gone")
        data = entry.pop("data", None)
        if data is not None:
            blobs[entry["sha256"]] = data
            kept_bytes += len(data)
        if rel in leftovers:
            entry["leftover"] = True  # removed before grading: not needed to grade
        entries[escape_path(rel)] = entry
    listed = len(d.deleted) + len(changed)
    doc = {
        "format": TREE_FORMAT,
        "base": "repo/ without the hidden files" + (" and with a bundle overlaid" if run.overlay else ""),
        "overlay": bool(run.overlay),
        "work_tree_deleted": run.work_tree_deleted,
        "seen_whole": bool(run.tree_complete),  # what `complete` says apart from the entries not kept
        "complete": run.tree_complete
        and listed <= ENTRY_CAP
        and all(e.get("kept", True) or e.get("leftover") for e in entries.values()),
        "not_listed": max(0, listed - ENTRY_CAP),
        "entries": entries,
    }
    return FinalTree(doc, blobs)


def _not_kept(why: str, **fields: Any) -> dict[str, Any]:
    return {"kind": fields.pop("kind", "file"), **fields, "kept": False, "why": why}


def _entry(work: Path, rel: str, room: int) -> dict[str, Any]:
    try:
        st = fdtree.lstat_at(work, rel)
        mode = stat.S_IMODE(st.st_mode)
        # setuid/setgid are never kept (nor recreated by rebuild): a tree put back by the harness
        # must not hand anyone the rights of whoever puts it back; the entry says they were dropped
        dropped = {"dropped": "setuid/setgid"} if mode & SETID_BITS else {}
        mode &= ~SETID_BITS
        if stat.S_ISLNK(st.st_mode):
            return {"kind": "link", "target": escape_path(_readlink_at(work, rel))}
        if stat.S_ISDIR(st.st_mode):
            return {"kind": "dir", "mode": mode, **dropped}
        if not stat.S_ISREG(st.st_mode):
            return _not_kept("not a regular file, link or directory", kind="other")
        if st.st_size > FILE_CAP:
            return _not_kept(f"over the {FILE_CAP >> 20} MiB per-file cap", mode=mode, size=st.st_size)
        if st.st_size > room:
            return _not_kept(f"over the {RUN_CAP >> 20} MiB per-run cap", mode=mode, size=st.st_size)
        data = fdtree.read_at(work, rel, FILE_CAP + 1)
    except OSError as exc:
        return _not_kept(f"could not be read: {exc.strerror or exc}")
    sha = hashlib.sha256(data).hexdigest()
    return {"kind": "file", "mode": mode, "size": len(data), "sha256": sha, "kept": True, "data": data, **dropped}


def _readlink_at(root: Path, rel: str) -> str:
    parent, _, name = rel.rpartition("/")
    fd = fdtree.open_at(root, parent, fdtree.O_DIR) if parent else os.open(root, fdtree.O_DIR)
    try:
        return os.readlink(name, dir_fd=fd)
    finally:
        os.close(fd)


# ---- putting a tree back ---------------------------------------------------------------------
def missing_paths(doc: dict[str, Any]) -> str | None:
    """Why the kept tree does not say which paths the run changed, or None: then what reads only
    that (paths, effects) can be graded again, even when some entry's content was not kept."""
    if doc.get("overlay"):
        return "the run had a bundle overlaid on its work tree, which the record does not keep"
    if doc.get("not_listed"):
        return f"{doc['not_listed']} changed path(s) were not listed (over {ENTRY_CAP})"
    redacted = [p for p, e in doc.get("entries", {}).items() if e.get("why") == REDACTED_PATH]
    if redacted:
        return f"{redacted[0]}: {REDACTED_PATH}"
    # a record from before `seen_whole` says only `complete`, which a lost entry also clears
    if doc.get("seen_whole", doc.get("complete")) is False:
        return "the harness did not see the whole work tree when the run ended"
    return None


def lost_entries(doc: dict[str, Any]) -> list[str]:
    """The listed paths whose final content the record does not hold as the agent left it: not
    kept (a FIFO, a file over a cap) or kept redacted (a secret replaced in it)."""
    return [
        p
        for p, e in doc.get("entries", {}).items()
        if (e.get("kept") is False or e.get("redacted")) and not e.get("leftover")
    ]


def missing_for_grading(doc: dict[str, Any]) -> str | None:
    """Why the kept tree is not the run's whole final tree (what grading needs of it), or None."""
    if why := missing_paths(doc):
        return why
    lost = lost_entries(doc)
    if lost:
        e = doc["entries"][lost[0]]
        more = f" (+{len(lost) - 1} more)" if len(lost) > 1 else ""
        what = "is not the agent's file" if e.get("kept") is not False else "was not kept"
        return f"{lost[0]} {what}: {e.get('why')}{more}"
    if doc.get("complete") is False:
        return "the harness did not see the whole work tree when the run ended"
    return None


def read_blob(record: Path, sha: str) -> bytes:
    """A blob's bytes, refused (naming the file) when they are not what their name says."""
    path = blob_path(record, sha)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RecordError(f"blob missing or unreadable: {exc.strerror or exc}", path) from None
    if hashlib.sha256(data).hexdigest() != sha:
        raise RecordError("blob does not match its sha256 (edited after it was recorded)", path)
    return data


def _safe_parts(rel: str, where: Path) -> list[str]:
    # an empty directory is listed as `name/`, as tree snapshots name it
    parts = (rel[:-1] if rel.endswith("/") else rel).split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise RecordError(f"tree entry {escape_path(rel)!r} is not a plain relative path", where)
    return parts


def _parent_fd(dest: Path, parts: list[str]) -> int:
    """An fd of the entry's parent directory below dest, made as needed; never through a link."""
    fd = os.open(dest, fdtree.O_DIR)
    try:
        for part in parts[:-1]:
            try:
                nfd = os.open(part, fdtree.O_DIR, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(part, 0o755, dir_fd=fd)
                nfd = os.open(part, fdtree.O_DIR, dir_fd=fd)
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def _remove_at(fd: int, name: str, dest: Path, rel: str) -> None:
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        fdtree.rmtree(dest / rel)
    else:
        os.unlink(name, dir_fd=fd)


def rebuild(spec: TaskSpec, doc: dict[str, Any], blobs: Callable[[str], bytes], dest: Path, tree_file: Path) -> None:
    """Write the run's final tree at dest: the frozen repo without its hidden files, then the entries.

    `blobs(sha)` returns a checked blob's bytes. A path that is not plain and relative, or
    that would pass through a link, is refused naming tree_file."""
    from pytest_agentdrift.run.runner import copy_tree

    copy_tree(spec.repo, dest)
    for rel in spec.hidden:
        (dest / rel).unlink()
    entries = doc.get("entries") or {}
    ordered = sorted(entries.items(), key=lambda kv: (kv[1].get("kind") != "deleted", kv[0]))
    for escaped, e in ordered:
        rel = unescape_path(escaped)
        parts = _safe_parts(rel, tree_file)
        try:
            fd = _parent_fd(dest, parts)
        except OSError as exc:
            if e.get("kind") == "deleted":
                continue
            raise RecordError(f"tree entry {escaped!r} cannot be placed: {exc.strerror or exc}", tree_file) from None
        try:
            _place(fd, parts[-1], e, blobs, dest, rel, tree_file)
        finally:
            os.close(fd)


def _place(
    fd: int, name: str, e: dict[str, Any], blobs: Callable[[str], bytes], dest: Path, rel: str, tree_file: Path
) -> None:
    kind = e.get("kind")
    if kind == "deleted" or e.get("kept") is False:
        _remove_at(fd, name, dest, rel)  # what was not kept stays out: grading says so (missing_for_grading)
        return
    _remove_at(fd, name, dest, rel)
    if kind == "dir":
        os.mkdir(name, e.get("mode", 0o755) & 0o7777 & ~SETID_BITS, dir_fd=fd)
    elif kind == "link":
        os.symlink(unescape_path(e["target"]), name, dir_fd=fd)
    elif kind == "file":
        data = blobs(e["sha256"])
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(out, view) :]
            os.fchmod(out, e.get("mode", 0o644) & 0o7777 & ~SETID_BITS)  # whatever an older record says
        finally:
            os.close(out)
    else:
        raise RecordError(f"tree entry {escape_path(rel)!r} has an unknown kind {kind!r}", tree_file)
