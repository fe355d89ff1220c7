"""Tree snapshots, diffs and patches: how the harness sees what changed.

Before the agent runs every file is hashed. Afterwards each file is stat'ed
and hashed again only when size, mtime_ns, ctime_ns, inode or mode differ:
ctime is in the signature because an edit that restores its mtime (os.utime)
still moves ctime, and the agent cannot set ctime.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from pytest_agentdrift.safetext import escape_path, escape_text
from pytest_agentdrift.shapes import JsonObject
from pytest_agentdrift.tasks import fdtree

EVALUATOR_COMPONENT = "treesnap"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)


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


@dataclass(frozen=True)
class Budget:
    """What the harness spends on one tree an agent left behind.

    Entries of the fixture (the `before` snapshot) are always examined, so a
    change to any of them is always seen; only *new* entries count against
    `new_entries`. Beyond it entries are counted by name (up to `names`) but
    not stat'ed or hashed, and the report says the snapshot is incomplete.
    A file over `hash_file_bytes`, or once `hash_total_bytes` are spent, is not
    hashed: it is compared by its stat signature (a changed one counts as
    modified, never as unchanged).
    """

    new_entries: int = 20_000
    names: int = 1_000_000
    hash_file_bytes: int = 64 << 20
    hash_total_bytes: int = 1 << 30


DEFAULT_BUDGET = Budget()
#: at most this many paths are named in any one list of a report
LIST_CAP = 50


@dataclass
class WalkReport:
    """What a budgeted snapshot examined and what it left out."""

    entries: int = 0
    new_examined: int = 0
    not_examined: int = 0
    not_examined_sample: list[str] = field(default_factory=list)  # escaped
    unhashed: list[str] = field(default_factory=list)  # escaped
    unhashed_count: int = 0
    long_paths: list[str] = field(default_factory=list)  # escaped, longer than PATH_MAX
    long_paths_count: int = 0
    hashed_bytes: int = 0
    max_depth: int = 0
    truncated: str | None = None  # the walk itself stopped (too many names, tree changed)
    unreadable_dirs: list[str] = field(default_factory=list)  # escaped; their content is unseen

    @property
    def complete(self) -> bool:
        return self.not_examined == 0 and self.truncated is None and not self.unreadable_dirs

    def to_dict(self) -> JsonObject:
        return {"complete": self.complete, **asdict(self)}

    def describe(self) -> str | None:
        """One sentence for a person, or None when nothing was left out."""
        parts = []
        if self.not_examined:
            parts.append(
                f"{self.not_examined} new entr{'y' if self.not_examined == 1 else 'ies'} not examined "
                f"(budget {self.new_examined} examined)"
            )
        if self.truncated:
            parts.append(f"walk stopped: {self.truncated}")
        if self.unreadable_dirs:
            parts.append(
                f"{len(self.unreadable_dirs)} unreadable director{'y' if len(self.unreadable_dirs) == 1 else 'ies'}: "
                + ", ".join(self.unreadable_dirs[:5])
            )
        return "; ".join(parts) or None


def scan(root: str, skip: frozenset[str]) -> list[tuple[str, str, os.stat_result]]:
    """(rel, full path, lstat) of every non-directory and empty directory below root.

    For trees the harness made itself (fixtures): full paths are returned, so
    they must stay short. Trees an agent left are read with `fdtree.walk`."""
    out = []
    for item in fdtree.walk(root, skip):
        try:
            st = item.stat()
        except OSError:
            continue
        full = os.path.join(root, item.rel.rstrip("/")) if item.entry is None else os.path.join(root, item.rel)
        out.append((item.rel, full, st))
    return out


def _hash_at(dir_fd: int, name: str) -> str:
    return fdtree.hash_at(dir_fd, name)


def _entry(
    item: fdtree.Item, st: os.stat_result, content: bool, budget: Budget | None = None, report: WalkReport | None = None
) -> Entry:
    mode = stat.S_IMODE(st.st_mode)
    rel = item.rel
    if rel.endswith("/"):
        return Entry("dir-empty", mode, 0, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, "")
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(item.name, dir_fd=item.dir_fd)
        except OSError:
            target = "unreadable"
        return Entry("link", mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, target)
    if stat.S_ISREG(st.st_mode):
        digest = ""
        if content:
            if (
                budget is not None
                and report is not None
                and (st.st_size > budget.hash_file_bytes or report.hashed_bytes + st.st_size > budget.hash_total_bytes)
            ):
                # never read in full: compared by its stat signature, so any change shows as one
                digest = f"unhashed:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"
                report.unhashed_count += 1
                if len(report.unhashed) < LIST_CAP:
                    report.unhashed.append(escape_path(rel))
            else:
                try:
                    digest = _hash_at(item.dir_fd, item.name)
                except OSError:
                    digest = "unreadable"
                if report is not None:
                    report.hashed_bytes += st.st_size
        return Entry("file", mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, digest)
    return Entry("other", mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, "")


def snapshot(
    root: Path, skip: frozenset[str] = IGNORED_NAMES, budget: Budget | None = None, report: WalkReport | None = None
) -> Snapshot:
    """Stat and hash every entry below root (paths relative, posix; names that are
    not UTF-8 in surrogateescape form). Without a budget everything is read:
    for trees the harness made (a fixture copy)."""
    return resnapshot(root, {}, skip, budget=budget, report=report, rehash_all=True)


def resnapshot(
    root: Path,
    before: Snapshot,
    skip: frozenset[str] = IGNORED_NAMES,
    budget: Budget | None = DEFAULT_BUDGET,
    report: WalkReport | None = None,
    rehash_all: bool = False,
) -> Snapshot:
    """Snapshot again, hashing only entries whose stat signature changed.

    Walks by directory fd (any depth, any path length, no symlink followed).
    Entries of `before` are always examined; new ones up to the budget."""
    report = report if report is not None else WalkReport()
    stats = fdtree.WalkStats()
    out: Snapshot = {}
    root_s = os.fspath(root)
    try:
        for item in fdtree.walk(root_s, skip, max_names=budget.names if budget else None, stats=stats):
            rel = item.rel
            old = before.get(rel)
            if old is None and budget is not None and not _examine_new(report, budget, rel):
                continue
            try:
                st = item.stat()
            except OSError:
                continue
            if len(root_s) + 1 + len(rel) >= fdtree.PATH_MAX:
                report.long_paths_count += 1
                if len(report.long_paths) < LIST_CAP:
                    report.long_paths.append(escape_path(rel))
            out[rel] = _entry_again(item, st, old, budget, report, rehash_all)
    except fdtree.TreeChanged as exc:
        report.truncated = str(exc)
    except OSError as exc:  # the root itself is unreadable
        report.truncated = f"cannot read the tree: {exc.strerror or exc}"
    if stats.truncated:
        report.truncated = stats.truncated
    report.unreadable_dirs = [escape_path(d) for d in stats.unreadable[:LIST_CAP]]
    report.entries = len(out)
    report.max_depth = stats.max_depth
    return out


def _examine_new(report: WalkReport, budget: Budget, rel: str) -> bool:
    """Whether a new entry is still within the budget of new entries (one not is counted)."""
    if report.new_examined >= budget.new_entries:
        report.not_examined += 1
        if len(report.not_examined_sample) < LIST_CAP:
            report.not_examined_sample.append(escape_path(rel))
        return False
    report.new_examined += 1
    return True


def _entry_again(
    item: fdtree.Item,
    st: os.stat_result,
    old: Entry | None,
    budget: Budget | None,
    report: WalkReport,
    rehash_all: bool,
) -> Entry:
    """The entry as it is now: hashed again only when a file's stat signature changed."""
    if rehash_all:
        return _entry(item, st, True, budget, report)
    cheap = _entry(item, st, False)
    if old is not None and old.kind == cheap.kind == "file" and old.signature() == cheap.signature():
        return old
    if old is None or cheap.kind != "file":
        # new: it is added whatever its content (render_changes reads and hashes what it shows)
        return cheap
    return _entry(item, st, True, budget, report)


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

    def to_dict(self, cap: int | None = None) -> dict[str, list[str]]:
        """Escaped paths (see safetext); with `cap`, at most that many per list (omitted() counts the rest)."""
        lists = {"added": self.added, "modified": self.modified, "deleted": self.deleted, "mode": self.mode}
        return {k: [escape_path(p) for p in (v if cap is None else v[:cap])] for k, v in lists.items()}

    def omitted(self, cap: int) -> dict[str, int]:
        lists = {"added": self.added, "modified": self.modified, "deleted": self.deleted, "mode": self.mode}
        return {f"changed.{k}": len(v) - cap for k, v in lists.items() if len(v) > cap}


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


#: what one examination of the changed files may read (the patch, the added lines, the canary search)
EXAMINE_FILE_BYTES = 16 << 20
EXAMINE_TOTAL_BYTES = 256 << 20
#: a file over this many bytes is not diffed line by line in the patch
PATCH_FILE_LIMIT = 1 << 20
PATCH_TOTAL_LIMIT = 8 << 20
#: how much of an undisplayable file the patch shows
HEX_BYTES = 256
ADDED_LINES_SHOWN = 1000
#: characters of one added line of a large file shown in the patch (the rest is counted)
LINE_SHOWN = 4096

#: files whose content is code or configuration: a change the patch cannot show
#: plainly is flagged (a binary .so shadows a module; a latin-1 .py hides a line)
SOURCE_SUFFIXES = (
    ".py",
    ".pyi",
    ".pyw",
    ".pth",
    ".pyx",
    ".pxd",
    ".pyc",
    ".pyo",
    ".so",
    ".pyd",
    ".dll",
    ".dylib",
    ".c",
    ".h",
    ".cc",
    ".cpp",
    ".hpp",
    ".rs",
    ".go",
    ".java",
    ".js",
    ".mjs",
    ".cjs",
    ".ts",
    ".rb",
    ".pl",
    ".sh",
    ".bash",
    ".zsh",
    ".toml",
    ".cfg",
    ".ini",
    ".yaml",
    ".yml",
    ".json",
    ".lock",
    ".mk",
    ".cmake",
)
_SOURCE_NAMES = ("Makefile", "Dockerfile", "conftest.py", "setup.py", "noxfile.py", "Justfile")

_UTF8_ENCODINGS = ("utf-8", "utf-8-sig", "ascii", "us-ascii")


def is_source(rel: str, mode: int = 0) -> bool:
    name = rel.rstrip("/").rsplit("/", 1)[-1]
    return name.endswith(SOURCE_SUFFIXES) or name in _SOURCE_NAMES or bool(mode & 0o111)


def declared_encoding(rel: str, data: bytes) -> str | None:
    """The PEP 263 encoding a Python file declares, when it is not UTF-8 (else None).

    Python runs `# coding: utf-7` source, where `+AC4-` is a '.': such a file
    reads differently from its bytes, so it is decoded both ways."""
    if not rel.endswith((".py", ".pyw", ".pyi")):
        return None
    import io
    import tokenize

    try:
        enc, _ = tokenize.detect_encoding(io.BytesIO(data[:4096]).readline)
    except SyntaxError:
        return "undecodable"
    return None if enc.lower() in _UTF8_ENCODINGS else enc


def split_lines(text: str) -> list[str]:
    """Lines as Python's tokenizer and most editors see them (\r\n, \r or \n)."""
    lines = re.split(r"\r\n|\r|\n", text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def added_between(old: list[str], new: list[str]) -> list[str]:
    """Lines of `new` beyond those `old` already had (a multiset difference, in order).

    Linear in size, whatever the files: a moved line is not an added line."""
    have = Counter(old)
    out = []
    for ln in new:
        if have[ln] > 0:
            have[ln] -= 1
        else:
            out.append(ln)
    return out


@dataclass
class Side:
    """One side (before or after) of a changed path, as read by the harness."""

    kind: str  # file | link | dir-empty | other | missing | unreadable
    size: int = 0
    data: bytes | None = None  # the whole file when complete, else its head
    complete: bool = True
    sha256: str = ""
    mode: int = 0

    def describe(self) -> JsonObject:
        return {"kind": self.kind, "size": self.size, "sha256": self.sha256 or None}


def _read_side(root: Path, rel: str, entry: Entry | None, budget_left: int) -> Side:
    import hashlib

    if rel.endswith("/"):
        return Side("dir-empty")
    parent, _, name = rel.rpartition("/")
    try:  # the parent by fd (any depth, no symlink followed), then everything relative to it
        dir_fd = fdtree.open_at(root, parent, fdtree.O_DIR) if parent else os.open(root, fdtree.O_DIR)
    except OSError:
        return Side("missing")
    try:
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return Side("missing")
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(name, dir_fd=dir_fd)
            except OSError:
                target = "unreadable"
            data = f"symlink -> {target}\n".encode("utf-8", "surrogateescape")
            return Side("link", len(data), data, True, hashlib.sha256(data).hexdigest(), stat.S_IMODE(st.st_mode))
        if not stat.S_ISREG(st.st_mode):
            return Side("other", st.st_size, mode=stat.S_IMODE(st.st_mode))
        limit = min(EXAMINE_FILE_BYTES, max(budget_left, 0))
        try:
            fd = os.open(name, fdtree.O_FILE, dir_fd=dir_fd)
            try:
                data = fdtree.read_fd(fd, limit + 1 if st.st_size <= limit else HEX_BYTES)
            finally:
                os.close(fd)
        except OSError:
            return Side("unreadable", st.st_size, mode=stat.S_IMODE(st.st_mode))
    finally:
        os.close(dir_fd)
    complete = len(data) <= limit and st.st_size <= limit
    if complete:
        digest = hashlib.sha256(data).hexdigest()
    else:
        known = entry.sha256 if entry is not None and entry.kind == "file" else ""
        digest = known if known and not known.startswith(("unhashed", "unreadable")) else "not hashed (over the budget)"
    return Side("file", st.st_size, data, complete, digest, stat.S_IMODE(st.st_mode))


@dataclass
class Changes:
    """What the harness read of every changed path: the patch a person reads, and
    the added lines every check reads (from the raw bytes, never from the patch)."""

    patch: str = ""
    added: dict[str, list[str]] = field(default_factory=dict)  # raw path -> added lines
    undisplayable: list[JsonObject] = field(default_factory=list)  # escaped paths
    unexamined: list[str] = field(default_factory=list)  # raw paths whose content was not read in full
    examined_bytes: int = 0


def _display_lines(text: str) -> list[str]:
    """Lines for the patch: split on newlines only, every other control character escaped."""
    parts = text.split("\n")
    out = [escape_text(p) + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(escape_text(parts[-1]))
    return out


def _hex_view(data: bytes) -> list[str]:
    out = []
    for off in range(0, min(len(data), HEX_BYTES), 16):
        chunk = data[off : off + 16]
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        out.append(f"~ {off:08x}  {chunk.hex(' '):<47}  |{text}|\n")
    return out


def render_changes(
    old_root: Path,
    new_root: Path,
    d: TreeDiff,
    before: Snapshot | None = None,
    after: Snapshot | None = None,
    *,
    limit: int = PATCH_FILE_LIMIT,
    total: int = PATCH_TOTAL_LIMIT,
    inspect: Callable[[str, bytes], None] | None = None,
    old_roots: Mapping[str, Path] | None = None,
) -> Changes:
    """The patch (git-style headers, every path escaped) and the added lines of every changed path.

    `old_roots` names, per path, another tree its old side is read from (a file the harness
    placed before the run is diffed against what it placed); one patch, one budget.

    A change the patch cannot show as plain UTF-8 text (binary, not UTF-8, a
    Python file declaring another encoding, over `limit` bytes, too large to
    examine) is still shown (escaped text, added lines, or a bounded hex view
    with sizes and sha256) and listed in `undisplayable`. `inspect(rel, data)`
    sees every byte read of a new or changed file (the canary search)."""
    before, after = before or {}, after or {}
    ch = Changes()
    chunks: dict[str, str] = {}
    left = total  # bytes of patch left
    left_out: list[str] = []

    def source_first(rel: str) -> tuple[bool, str]:
        entry = after.get(rel) or before.get(rel)
        return (not is_source(rel, entry.mode if entry else 0), rel)

    # source files take the patch budget first: a large data file never crowds a code change out
    for rel in sorted(d.changed, key=source_first):
        chunk = _render_path(rel, old_root, new_root, d, before, after, ch, limit, inspect, old_roots)
        if _size(chunk) > left:
            left_out.append(rel)
            _left_out(ch, rel, before, after, f"left out of the patch: over its {total}-byte budget")
            chunk = _cut(chunk, left)
        left -= _size(chunk)
        if chunk:
            chunks[rel] = chunk
    out = [chunks[rel] for rel in d.changed if rel in chunks]  # one patch, in path order
    if left_out:
        out.append(
            f"[agentdrift: patch truncated at {total} bytes; {len(left_out)} changed path(s) not shown in full, "
            "listed in undisplayable_changes]\n"
        )
    ch.patch = "".join(out)
    return ch


def _size(chunk: str) -> int:
    """The patch budget counts the bytes written (UTF-8), not characters: a CJK line is three per character."""
    return len(chunk.encode("utf-8", "surrogatepass"))


def _cut(chunk: str, left: int) -> str:
    """A path's patch cut to the `left` bytes of the patch budget, saying how much was left out."""
    cut = max(left, 0)
    data = chunk.encode("utf-8", "surrogatepass")
    kept = data[:cut].decode("utf-8", "ignore")  # never half a character
    return kept + (f"\n[agentdrift: the rest of this path's patch left out ({len(data) - cut} bytes)]\n" if cut else "")


def _render_path(
    rel: str,
    old_root: Path,
    new_root: Path,
    d: TreeDiff,
    before: Snapshot,
    after: Snapshot,
    ch: Changes,
    limit: int,
    inspect: Callable[[str, bytes], None] | None,
    old_roots: Mapping[str, Path] | None,
) -> str:
    """One path's part of the patch (header and body); its added lines and problems go into `ch`."""
    esc = escape_path(rel)
    header = f"diff --agentdrift a/{esc} b/{esc}\n"
    if rel in d.mode:
        a_mode, b_mode = (before.get(rel), after.get(rel))
        return header + (
            f"mode changed {a_mode.mode:o} -> {b_mode.mode:o}\n" if a_mode and b_mode else "mode changed\n"
        )
    left = EXAMINE_TOTAL_BYTES - ch.examined_bytes
    old_tree = old_roots.get(rel, old_root) if old_roots else old_root
    old = Side("missing") if rel in d.added else _read_side(old_tree, rel, before.get(rel), EXAMINE_FILE_BYTES)
    new = Side("missing") if rel in d.deleted else _read_side(new_root, rel, after.get(rel), left)
    if new.data is not None:
        ch.examined_bytes += len(new.data)
        if inspect is not None:
            inspect(rel, new.data)
    text = _examine(rel, old, new, ch, limit)
    return header + _render(rel, esc, old, new, text, limit)


def _left_out(ch: Changes, rel: str, before: Snapshot, after: Snapshot, reason: str) -> None:
    """A path the patch does not show in full: undisplayable (a source file fails `tamper`)."""
    if any(u["path"] == escape_path(rel) for u in ch.undisplayable):
        return
    entry = after.get(rel) or before.get(rel)
    ch.undisplayable.append(
        {
            "path": escape_path(rel),
            "reason": reason,
            "source": is_source(rel, entry.mode if entry else 0),
            "before": None,
            "after": None,
        }
    )


@dataclass
class _Text:
    old: list[str] | None  # display lines (None: not text)
    new: list[str] | None
    problem: str | None  # why the new side cannot be shown plainly


def _decode(rel: str, side: Side, limit: int = PATCH_FILE_LIMIT) -> tuple[str | None, str | None, list[str]]:
    """(display text or None, problem, analysis lines) of one side."""
    if side.data is None:
        return None, None, []
    data = side.data
    problem = None
    if not side.complete:
        problem = f"too large to examine ({side.size} bytes)"
    elif b"\0" in data:
        problem = "binary"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", "surrogateescape")
        problem = problem or "not UTF-8"
    lines = split_lines(text) if side.complete else []
    declared = declared_encoding(rel, data) if side.complete else None
    if declared:
        problem = problem or f"declares source encoding {declared}"
        if declared != "undecodable":
            try:
                lines = lines + split_lines(data.decode(declared, "replace"))
            except LookupError:
                pass
    if problem is None and side.size > limit:
        problem = f"larger than {limit} bytes"
    return text, problem, lines


def _examine(rel: str, old: Side, new: Side, ch: Changes, limit: int) -> tuple[str | None, str | None, str | None]:
    old_text, _, old_lines = _decode(rel, old, limit)
    new_text, problem, new_lines = _decode(rel, new, limit)
    if new.kind == "file" and not new.complete:
        ch.unexamined.append(rel)
    if new.data is not None:
        ch.added[rel] = list(dict.fromkeys(added_between(old_lines, new_lines)))  # each once, first seen first
    else:
        ch.added[rel] = []
    if problem is not None and new.kind == "file":
        ch.undisplayable.append(
            {
                "path": escape_path(rel),
                "reason": problem,
                "source": is_source(rel, new.mode),
                "before": None if old.kind == "missing" else old.describe(),
                "after": new.describe(),
            }
        )
    return old_text, new_text, problem


def _render(
    rel: str, esc: str, old: Side, new: Side, text: tuple[str | None, str | None, str | None], limit: int
) -> str:
    old_text, new_text, problem = text
    fromfile = "/dev/null" if old.kind == "missing" else f"a/{esc}"
    tofile = "/dev/null" if new.kind == "missing" else f"b/{esc}"
    for side, name in ((old, "a"), (new, "b")):
        if side.kind in ("other", "unreadable", "dir-empty"):
            what = {
                "other": "a special file (FIFO, socket or device)",
                "unreadable": "unreadable",
                "dir-empty": "an empty directory",
            }[side.kind]
            return f"agentdrift: {name}/{esc} is {what}\n"
    binary = problem is not None and (problem == "binary" or problem.startswith("too large"))
    large = max(old.size, new.size) > limit
    if problem is None and not large:
        return _unified(_display_lines(old_text or ""), _display_lines(new_text or ""), fromfile, tofile)
    sizes = (
        f"agentdrift: {problem or 'large file'}; "
        + ("" if old.kind == "missing" else f"before {old.size} bytes sha256 {old.sha256}")
        + ("; " if old.kind != "missing" and new.kind != "missing" else "")
        + ("" if new.kind == "missing" else f"after {new.size} bytes sha256 {new.sha256}")
        + "\n"
    )
    if binary:
        shown = new if new.data is not None else old
        return (
            sizes
            + f"agentdrift: first {min(HEX_BYTES, len(shown.data or b''))} bytes of {'b' if shown is new else 'a'}/{esc}:\n"
            + "".join(_hex_view(shown.data or b""))
        )
    if not large:  # not UTF-8, or declares another encoding: the text, escaped
        return sizes + _unified(_display_lines(old_text or ""), _display_lines(new_text or ""), fromfile, tofile)
    # too large to diff line by line: every added line, escaped, without context
    added = added_between(split_lines(old_text or ""), split_lines(new_text or ""))
    out = [sizes, f"--- {fromfile}\n", f"+++ {tofile}\n", f"@@ added lines of a large file ({len(added)}) @@\n"]
    out += ["+" + _shown_line(ln) + "\n" for ln in added[:ADDED_LINES_SHOWN]]
    if len(added) > ADDED_LINES_SHOWN:
        out.append(f"agentdrift: {len(added) - ADDED_LINES_SHOWN} more added line(s) not shown\n")
    return "".join(out)


def _shown_line(line: str) -> str:
    shown = escape_text(line[:LINE_SHOWN]).replace("\n", "\\n")
    return shown + (f" [agentdrift: {len(line) - LINE_SHOWN} more character(s)]" if len(line) > LINE_SHOWN else "")


def _unified(a: list[str], b: list[str], fromfile: str, tofile: str) -> str:
    """difflib's unified diff; a file added or deleted whole is written directly (the same text, faster)."""
    if a and b or not (a or b):
        lines = list(difflib.unified_diff(a, b, fromfile, tofile))
    else:
        n = len(a or b)
        span = "1" if n == 1 else f"1,{n}"
        hunk = f"@@ -0,0 +{span} @@\n" if b else f"@@ -{span} +0,0 @@\n"
        lines = [f"--- {fromfile}\n", f"+++ {tofile}\n", hunk, *(("+" if b else "-") + ln for ln in (a or b))]
    return "".join(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n" for ln in lines)


def make_patch(
    old_root: Path, new_root: Path, d: TreeDiff, limit: int = PATCH_FILE_LIMIT, total: int = PATCH_TOTAL_LIMIT
) -> str:
    """The patch alone (see render_changes)."""
    return render_changes(old_root, new_root, d, limit=limit, total=total).patch
