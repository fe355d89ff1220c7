"""Tree snapshots, diffs and patches: how the harness sees what changed.

Before the agent runs every file is hashed. Afterwards each file is stat'ed
and hashed again only when size, mtime_ns, ctime_ns, inode or mode differ:
ctime is in the signature because an edit that restores its mtime (os.utime)
still moves ctime, and the agent cannot set ctime.
"""


from __future__ import annotations

EVALUATOR_COMPONENT = "treesnap"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

import difflib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from pytest_agentdrift.canonical import hash_regular, read_regular


@dataclass(frozen=True)
class Entry:
    kind: str  # "file" | "link" | "dir-empty" | "other"
    mode: int  # permission bits
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    sha256: str  # content hash, link target for links, "" otherwise

    def signature(self) -> tuple[int, int, int, int, int]:
        return (self.size, self.mtime_ns, self.ctime_ns, self.ino, self.mode)


Snapshot = dict[str, Entry]


#: names the harness never counts as changes anywhere in a tree: VCS data is
#: evidence of its own (git mutation) and caches are written by running tests.
CACHE_NAMES = frozenset({"__pycache__", ".pytest_cache"})
#: a plain name is skipped at any depth, "./a/b" only at that path (a nested
#: .git is the agent's content and must stay visible)
IGNORED_NAMES = CACHE_NAMES | {"./.git"}


def scan(root: str, skip: frozenset[str]) -> list[tuple[str, str, os.stat_result]]:
    out = []
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        full_dir = os.path.join(root, rel_dir) if rel_dir else root
        try:
            it = os.scandir(full_dir)
        except OSError:
            continue
        with it:
            empty = True
            for entry in it:
                empty = False
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                if entry.name in skip or "./" + rel in skip:
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    stack.append(rel)
                else:
                    out.append((rel, entry.path, st))
            if empty and rel_dir:
                st = os.lstat(full_dir)
                out.append((rel_dir + "/", full_dir, st))
    return out


def _entry(full: str, st: os.stat_result, rel: str, content: bool) -> Entry:
    mode = stat.S_IMODE(st.st_mode)
    if rel.endswith("/"):
        return Entry("dir-empty", mode, 0, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, "")
    if stat.S_ISLNK(st.st_mode):
        return Entry("link", mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, os.readlink(full))
    if stat.S_ISREG(st.st_mode):
        digest = ""
        if content:
            try:
                digest = hash_regular(full)
            except OSError:
                digest = "unreadable"
        return Entry("file", mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, digest)
    return Entry("other", mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, "")


def snapshot(root: Path, skip: frozenset[str] = IGNORED_NAMES) -> Snapshot:
    """Stat and hash every entry below root (paths relative, posix)."""
    return {rel: _entry(full, st, rel, True) for rel, full, st in scan(os.fspath(root), skip)}


def resnapshot(root: Path, before: Snapshot, skip: frozenset[str] = IGNORED_NAMES) -> Snapshot:
    """Snapshot again, hashing only entries whose stat signature changed."""
    out: Snapshot = {}
    for rel, full, st in scan(os.fspath(root), skip):
        cheap = _entry(full, st, rel, False)
        old = before.get(rel)
        if old is not None and old.kind == cheap.kind == "file" and old.signature() == cheap.signature():
            out[rel] = old
        else:
            out[rel] = _entry(full, st, rel, True) if cheap.kind == "file" else cheap
    return out


@dataclass
class TreeDiff:
    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    mode: list[str] = field(default_factory=list)  # permission or kind change, content equal

    @property
    def changed(self) -> list[str]:
        return sorted(set(self.added) | set(self.modified) | set(self.deleted) | set(self.mode))

    def __bool__(self) -> bool:
        return bool(self.added or self.modified or self.deleted or self.mode)

    def to_dict(self) -> dict[str, list[str]]:
        return {"added": self.added, "modified": self.modified, "deleted": self.deleted, "mode": self.mode}


def diff(before: Snapshot, after: Snapshot) -> TreeDiff:
    d = TreeDiff()
    for rel in sorted(set(before) | set(after)):
        a, b = before.get(rel), after.get(rel)
        if a is None:
            d.added.append(rel)
        elif b is None:
            d.deleted.append(rel)
        elif a.kind != b.kind or a.sha256 != b.sha256:
            d.modified.append(rel)
        elif a.mode != b.mode:
            d.mode.append(rel)
    return d


def _read_lines(path: Path, limit: int) -> list[str] | None:
    """Text lines of a file, or None when binary / too large / not a regular file."""
    try:
        if path.is_symlink():
            return [f"symlink -> {os.readlink(path)}\n"]
        data = read_regular(path, limit + 1)
    except OSError:
        return None
    if len(data) > limit:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def make_patch(old_root: Path, new_root: Path, d: TreeDiff, limit: int = 1 << 20, total: int = 8 << 20) -> str:
    """A unified diff (git-style headers) of what changed between two trees.

    Each file is diffed up to `limit` bytes and the whole patch kept to about
    `total` bytes, with a visible mark for what was left out.
    """
    chunks: list[str] = []
    size = 0
    for n, rel in enumerate(d.changed):
        if size > total:
            chunks.append(f"[agentdrift: patch truncated; {len(d.changed) - n} more changed path(s) not shown]\n")
            break
        old = old_root / rel
        new = new_root / rel
        a = [] if rel in d.added else _read_lines(old, limit)
        b = [] if rel in d.deleted else _read_lines(new, limit)
        header = f"diff --agentdrift a/{rel} b/{rel}\n"
        if rel in d.mode:
            chunks.append(header + "mode changed\n")
            continue
        if a is None or b is None:
            chunks.append(header + "Binary or large files differ\n")
            continue
        fromfile = "/dev/null" if rel in d.added else f"a/{rel}"
        tofile = "/dev/null" if rel in d.deleted else f"b/{rel}"
        lines = list(difflib.unified_diff(a, b, fromfile, tofile))
        fixed = [ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n" for ln in lines]
        chunks.append(header + "".join(fixed))
        size += len(chunks[-1])
    return "".join(chunks)


def added_lines(patch: str) -> dict[str, list[str]]:
    """path -> lines added by a patch made by make_patch."""
    out: dict[str, list[str]] = {}
    current = None
    for line in patch.splitlines():
        if line.startswith("diff --agentdrift a/"):
            current = line.split(" b/", 1)[1]
            out.setdefault(current, [])
        elif current and line.startswith("+") and not line.startswith("+++"):
            out[current].append(line[1:])
    return out
