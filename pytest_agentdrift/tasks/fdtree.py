"""Walking, reading, copying and removing trees an agent controlled. No pytest.

What an agent leaves behind may be anything a file system allows: a chain of
5,000 directories, a path longer than PATH_MAX, 200,000 files, a 12 GB
sparse file, names that are not UTF-8. The harness must see all of it and
must never pay more than a bounded price for it. So:

* every walk goes by directory file descriptor (`openat` relative to the
  directory being read), never by a full path: depth and path length do not
  matter, and a symlink is never followed (O_NOFOLLOW on every component);
* a walk holds ONE directory fd whatever the depth: it goes down with
  `openat(name)` and back up with `openat("..")`, checking each time that it
  arrived where it came from (device and inode), so no recursion and no fd
  limit;
* copies are sparse-aware (SEEK_DATA / SEEK_HOLE: only data is copied, holes
  stay holes) and bounded by a byte and an entry budget; what did not fit is
  counted and named, never silently missing;
* removal is iterative, post-order, by fd; scratch trees nothing reads again
  are removed on a background thread (`remove_later`).
"""

from __future__ import annotations

import atexit
import errno
import hashlib
import os
import secrets
import stat
import threading
from dataclasses import asdict, dataclass, field
from typing import Generator, Iterator

EVALUATOR_COMPONENT = "fdtree"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
O_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

#: paths at least this long cannot be used whole by system calls (PATH_MAX)
PATH_MAX = os.pathconf("/", "PC_PATH_MAX") if hasattr(os, "pathconf") else 4096


class TreeChanged(OSError):
    """The tree moved under a walk ('..' did not lead back where it came from)."""


class Cursor:
    """One open directory fd that moves down and up a tree."""

    def __init__(self, root: str | os.PathLike[str]):
        self.fd = os.open(root, O_DIR)
        st = os.fstat(self.fd)
        self._ids = [(st.st_dev, st.st_ino)]

    @property
    def depth(self) -> int:
        return len(self._ids) - 1

    def down(self, name: str) -> None:
        fd = os.open(name, O_DIR, dir_fd=self.fd)
        st = os.fstat(fd)
        os.close(self.fd)
        self.fd = fd
        self._ids.append((st.st_dev, st.st_ino))

    def up(self) -> None:
        fd = os.open("..", O_DIR, dir_fd=self.fd)
        st = os.fstat(fd)
        if len(self._ids) < 2 or (st.st_dev, st.st_ino) != self._ids[-2]:
            os.close(fd)
            raise TreeChanged(errno.ESTALE, "the tree changed while it was walked")
        os.close(self.fd)
        self.fd = fd
        self._ids.pop()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "Cursor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class Item:
    """One entry found by `walk`: a non-directory, or an empty directory ("rel/").

    `dir_fd` is the containing directory and is open only while the item is
    being handled (until the generator is advanced)."""

    rel: str
    name: str
    dir_fd: int
    entry: os.DirEntry | None  # None for an empty directory (then name is ".")

    def stat(self) -> os.stat_result:
        if self.entry is None:
            return os.fstat(self.dir_fd)
        return self.entry.stat(follow_symlinks=False)


@dataclass
class WalkStats:
    names: int = 0  # directory entries listed
    dirs: int = 0
    max_depth: int = 0
    longest_path: int = 0
    truncated: str | None = None  # why the walk stopped early
    unreadable: list[str] = field(default_factory=list)  # directories that could not be listed


def walk(
    root: str | os.PathLike[str],
    skip: frozenset[str] = frozenset(),
    *,
    max_names: int | None = None,
    stats: WalkStats | None = None,
) -> Iterator[Item]:
    """Every non-directory below root, and every empty directory, by fd.

    `skip`: a plain name is skipped at any depth, "./a/b" only at that path.
    Names are visited sorted, so a walk cut short by `max_names` always cuts
    at the same place. Unreadable directories are passed over.
    """
    stats = stats if stats is not None else WalkStats()
    root_len = len(os.fspath(root))
    with Cursor(root) as cur:
        # a frame: (rel of the directory, its subdirectories not visited yet)
        frames: list[tuple[str, list[str]]] = [("", [])]
        rel_dir: str | None = ""
        while rel_dir is not None:
            subdirs = yield from _walk_dir(cur, rel_dir, skip, root_len, max_names, stats)
            if subdirs is None:
                return
            # pop() takes from the end: reverse so subdirectories are visited in name order
            frames[-1][1].extend(reversed(subdirs))
            rel_dir = _next_dir(cur, frames, stats)


def _walk_dir(
    cur: Cursor, rel_dir: str, skip: frozenset[str], root_len: int, max_names: int | None, stats: WalkStats
) -> Generator[Item, None, list[str] | None]:
    """The items of the directory `cur` is at; returns its subdirectories (None: over max_names)."""
    stats.dirs += 1
    stats.max_depth = max(stats.max_depth, cur.depth)
    try:
        with os.scandir(cur.fd) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        stats.unreadable.append(rel_dir)
        return []
    if not entries and rel_dir:
        stats.longest_path = max(stats.longest_path, root_len + 1 + len(rel_dir))
        yield Item(rel_dir + "/", ".", cur.fd, None)
        return []
    subdirs = []
    for entry in entries:
        stats.names += 1
        if max_names is not None and stats.names > max_names:
            stats.truncated = f"more than {max_names} entries"
            return None
        rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
        if entry.name in skip or "./" + rel in skip:
            continue
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_dir:
            subdirs.append(entry.name)
        else:
            stats.longest_path = max(stats.longest_path, root_len + 1 + len(rel))
            yield Item(rel, entry.name, cur.fd, entry)
    return subdirs


def _next_dir(cur: Cursor, frames: list[tuple[str, list[str]]], stats: WalkStats) -> str | None:
    """Move `cur` to the next directory to list (depth first) and return its rel; None: the walk is done."""
    while frames:
        rel_dir, pending = frames[-1]
        if not pending:
            frames.pop()
            if frames:
                cur.up()
            continue
        name = pending.pop()
        try:
            cur.down(name)
        except OSError:
            stats.unreadable.append(f"{rel_dir}/{name}" if rel_dir else name)
            continue
        rel = f"{rel_dir}/{name}" if rel_dir else name
        frames.append((rel, []))
        return rel
    return None


# ---- reading one file by a relative path ---------------------------------------------------
def _parent_fd(root: str | os.PathLike[str], parts: list[str]) -> int:
    """An fd of the directory holding parts[-1] (root itself for one part or none), reached one
    component at a time, never following a symlink; the caller closes it."""
    fd = os.open(root, O_DIR)
    try:
        for part in parts[:-1]:
            nfd = os.open(part, O_DIR, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_at(root: str | os.PathLike[str], rel: str, flags: int = O_FILE) -> int:
    """Open root/rel one component at a time, never following a symlink.

    Works at any depth. Raises OSError (ELOOP, ENOTDIR, ENOENT, ...) when a
    component is missing or not a directory."""
    parts = [p for p in rel.split("/") if p]
    if not parts:
        raise OSError(errno.EINVAL, "empty relative path")
    fd = _parent_fd(root, parts)
    try:
        return os.open(parts[-1], flags, dir_fd=fd)
    finally:
        os.close(fd)


def lstat_at(root: str | os.PathLike[str], rel: str) -> os.stat_result:
    parts = [p for p in rel.split("/") if p]
    fd = _parent_fd(root, parts)
    try:
        return os.stat(parts[-1], dir_fd=fd, follow_symlinks=False) if parts else os.fstat(fd)
    finally:
        os.close(fd)


def lexists_at(root: str | os.PathLike[str], rel: str) -> bool:
    try:
        lstat_at(root, rel)
    except OSError:
        return False
    return True


def read_fd(fd: int, limit: int) -> bytes:
    """At most `limit` bytes of a regular file's fd (OSError if it is not regular)."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise OSError(errno.EINVAL, "not a regular file")
    chunks = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_at(root: str | os.PathLike[str], rel: str, limit: int) -> bytes:
    fd = open_at(root, rel)
    try:
        return read_fd(fd, limit)
    finally:
        os.close(fd)


def hash_fd(fd: int) -> str:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise OSError(errno.EINVAL, "not a regular file")
    with os.fdopen(os.dup(fd), "rb", buffering=0) as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def hash_at(dir_fd: int, name: str) -> str:
    fd = os.open(name, O_FILE, dir_fd=dir_fd)
    try:
        return hash_fd(fd)
    finally:
        os.close(fd)


# ---- copying -------------------------------------------------------------------------------
@dataclass
class CopyBudget:
    entries: int = 100_000  # entries created in the copy
    data_bytes: int = 1 << 30  # bytes of real data copied (holes are free)
    #: directories deep: every directory made is one more to remove, and removing one costs
    #: milliseconds on some file systems; no real project nests this deep
    depth: int = 256


@dataclass
class CopyReport:
    entries: int = 0
    data_bytes: int = 0
    apparent_bytes: int = 0  # file sizes as ls shows them (sparse files count in full)
    skipped: list[str] = field(default_factory=list)  # paths left out, with the reason
    skipped_count: int = 0
    truncated: str | None = None  # the budget that stopped the copy
    #: FIFOs, sockets, devices: never copied (a FIFO would hang a copy), not content to grade
    special: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.skipped_count and self.truncated is None

    def skip(self, rel: str, why: str, cap: int = 50) -> None:
        self.skipped_count += 1
        if len(self.skipped) < cap:
            from pytest_agentdrift.safetext import escape_path

            self.skipped.append(f"{escape_path(rel)} ({why})")

    def left_special(self, rel: str, cap: int = 50) -> None:
        if len(self.special) < cap:
            from pytest_agentdrift.safetext import escape_path

            self.special.append(escape_path(rel))

    def to_dict(self) -> dict:
        return {"complete": self.complete, **asdict(self)}


def _data_segments(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(offset, length) of the data of a file; one segment where SEEK_DATA is unsupported."""
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole from here on
                return
            yield pos, size - pos  # no SEEK_DATA here: all of it is data
            return
        try:
            end = os.lseek(fd, start, os.SEEK_HOLE)
        except OSError:
            end = size
        end = min(end, size)
        if end <= start:
            return
        yield start, end - start
        pos = end


def data_size(fd: int, size: int) -> int:
    return sum(n for _, n in _data_segments(fd, size))


def _copy_file(src_fd: int, dst_fd: int, size: int) -> int:
    copied = 0
    for offset, length in _data_segments(src_fd, size):
        done = 0
        while done < length:
            chunk = os.pread(src_fd, min(1 << 20, length - done), offset + done)
            if not chunk:
                break
            os.pwrite(dst_fd, chunk, offset + done)
            done += len(chunk)
        copied += done
    os.ftruncate(dst_fd, size)  # trailing hole, or a file that shrank meanwhile
    return copied


def copy_tree(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    skip: frozenset[str] = frozenset(),
    budget: CopyBudget | None = None,
    report: CopyReport | None = None,
) -> CopyReport:
    """Copy src into a new directory dst: files (sparse-aware), symlinks as links,
    directories; FIFOs, sockets and devices are left out (a FIFO would hang a
    copy). Plain private copies, never hard links. Bounded by `budget`: what
    does not fit is named in the report, and the report says it is incomplete."""
    budget = budget or CopyBudget()
    report = report if report is not None else CopyReport()
    os.mkdir(dst, 0o755)
    dst_cur = Cursor(dst)
    here = ""  # where dst_cur is, relative to dst
    try:
        for item in walk(src, skip):
            if item.rel.rstrip("/").count("/") >= budget.depth:
                report.skip(item.rel, f"deeper than {budget.depth} directories")
                continue
            if item.entry is None:  # an empty directory
                here = _copy_empty_dir(dst_cur, here, item)
                continue
            if report.truncated is None and report.entries >= budget.entries:
                report.truncated = f"more than {budget.entries} entries"
            if report.truncated is not None:
                report.skip(item.rel, "over the copy budget")
                continue
            try:
                st = item.stat()
            except OSError:
                continue
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                report.left_special(item.rel)
                continue
            here = _move_to(dst_cur, here, item.rel.rpartition("/")[0])
            try:
                if stat.S_ISLNK(st.st_mode):
                    os.symlink(os.readlink(item.name, dir_fd=item.dir_fd), item.name, dir_fd=dst_cur.fd)
                    report.entries += 1
                else:
                    _copy_one(item, st, dst_cur.fd, budget, report)
            except OSError as exc:
                report.skip(item.rel, f"unreadable: {exc.strerror or exc}")
    finally:
        dst_cur.close()
    return report


def _copy_empty_dir(dst_cur: Cursor, here: str, item: Item) -> str:
    """Make the empty directory `item` in the copy, with its mode; where the cursor now is."""
    here = _move_to(dst_cur, here, item.rel.rstrip("/"))
    try:
        os.fchmod(dst_cur.fd, stat.S_IMODE(item.stat().st_mode) | 0o700)
    except OSError:
        pass
    return here


def _copy_one(item: Item, st: os.stat_result, dst_fd: int, budget: CopyBudget, report: CopyReport) -> None:
    name = item.name
    sfd = os.open(name, O_FILE, dir_fd=item.dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(sfd).st_mode):
            report.skip(item.rel, "changed while copied")
            return
        data = data_size(sfd, st.st_size)
        if report.data_bytes + data > budget.data_bytes:
            report.truncated = report.truncated or f"more than {budget.data_bytes} bytes of data"
            report.skip(item.rel, f"{data} bytes of data, over the copy budget")
            return
        dfd = os.open(
            name,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            stat.S_IMODE(st.st_mode) | 0o600,
            dir_fd=dst_fd,
        )
        try:
            report.data_bytes += _copy_file(sfd, dfd, st.st_size)
            os.fchmod(dfd, stat.S_IMODE(st.st_mode))
            os.utime(dfd, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(dfd)
        report.apparent_bytes += st.st_size
        report.entries += 1
    finally:
        os.close(sfd)


def _move_to(cur: Cursor, here: str, there: str) -> str:
    """Move a destination cursor from directory `here` to `there` (both relative),
    creating directories on the way down."""
    a = here.split("/") if here else []
    b = there.split("/") if there else []
    common = 0
    while common < len(a) and common < len(b) and a[common] == b[common]:
        common += 1
    for _ in range(len(a) - common):
        cur.up()
    for part in b[common:]:
        try:
            os.mkdir(part, 0o755, dir_fd=cur.fd)
        except FileExistsError:
            pass
        cur.down(part)
    return there


# ---- removing ------------------------------------------------------------------------------
def rmtree(path: str | os.PathLike[str]) -> list[str]:
    """Remove a tree iteratively, by fd; returns what could not be removed (never raises).

    A symlink (or file) at `path` is removed itself, never followed. Directories
    an agent made unreadable are made readable first (the harness owns them)."""
    problems: list[str] = []
    path = os.fspath(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return problems
    except OSError as exc:
        return [f"{path}: {exc}"]
    if not stat.S_ISDIR(st.st_mode):
        try:
            os.unlink(path)
        except OSError as exc:
            problems.append(f"{path}: {exc}")
        return problems
    try:
        cur = Cursor(path)
    except OSError:
        try:
            os.chmod(path, 0o700)
            cur = Cursor(path)
        except OSError as exc:
            return [f"{path}: {exc}"]
    with cur:
        _remove_contents(cur, path, problems)
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        problems.append(f"{path}: {exc}")
    return problems


def _remove_contents(cur: Cursor, path: str, problems: list[str]) -> None:
    """Empty the directory `cur` is at, post-order, one fd whatever the depth."""
    # a frame: [name of the directory in its parent, subdirectories left, listed yet]
    frames: list[list] = [["", [], False]]
    while frames:
        frame = frames[-1]
        if not frame[2]:
            frame[2] = True
            frame[1] = _unlink_all_but_dirs(cur.fd, problems)
        if frame[1]:
            name = frame[1].pop()
            try:
                cur.down(name)
            except OSError:
                try:  # an agent's chmod 000: the harness owns the tree
                    os.chmod(name, 0o700, dir_fd=cur.fd)
                    cur.down(name)
                except (OSError, NotImplementedError) as exc:
                    problems.append(f"{name}: {exc}")
                    continue
            frames.append([name, [], False])
            continue
        frames.pop()
        if not frames:
            break
        try:
            cur.up()
            os.rmdir(frame[0], dir_fd=cur.fd)
        except OSError as exc:
            problems.append(f"{path}: {exc}")
            if isinstance(exc, TreeChanged):
                break


def _unlink_all_but_dirs(dir_fd: int, problems: list[str]) -> list[str]:
    """Unlink every non-directory in dir_fd; return the names of the subdirectories."""
    try:
        with os.scandir(dir_fd) as it:
            entries = list(it)
    except OSError as exc:
        problems.append(str(exc))
        return []
    subdirs = []
    for e in entries:
        try:
            is_dir = e.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        if is_dir:
            subdirs.append(e.name)
            continue
        try:
            os.unlink(e.name, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            problems.append(f"{e.name}: {exc}")
    return subdirs


# ---- removing later ------------------------------------------------------------------------------
#: how long a process that exits waits for the trees it handed over to be removed
DRAIN_AT_EXIT_S = 120.0


class _Remover:
    """Removes trees on one background thread, in the order they were handed over.

    Removing a tree waits on the file system (its journal) far longer than it uses the CPU:
    measured here about 20 ms of waiting and 2 ms of CPU for a bundled task's tree. The
    harness never reads a scratch tree again once it is done with it, so nothing needs to
    wait for it to go, but the session's end (`drain`)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: list[str] = []
        self._busy = False
        self._thread: threading.Thread | None = None

    def put(self, path: str) -> None:
        with self._cond:
            self._queue.append(path)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name="agentdrift-remover", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._queue))
                path = self._queue.pop(0)
                self._busy = True
            try:
                rmtree(path)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every tree handed over is removed (or tried); False if `timeout` ran out."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)


_remover = _Remover()


def _new_remover_in_child() -> None:
    global _remover
    _remover = _Remover()  # a forked child has no remover thread; the parent's queue is the parent's


os.register_at_fork(after_in_child=_new_remover_in_child)
atexit.register(lambda: _remover.drain(DRAIN_AT_EXIT_S))


def remove_later(path: str | os.PathLike[str], trash: str | os.PathLike[str] | None = None) -> list[str]:
    """Have the tree at `path` removed on the background thread (as `rmtree` does).

    With `trash` (a directory on the same file system that nothing but the harness sees),
    `path` is first renamed into it, so it is gone from where it was when this returns: what
    could not be moved is removed at once, and what could not be removed is returned."""
    path = os.fspath(path)
    if trash is not None:
        moved = os.path.join(os.fspath(trash), secrets.token_hex(8))
        try:
            os.rename(path, moved)
        except OSError:
            return rmtree(path)  # nothing at `path` is nothing to remove
        path = moved
    _remover.put(path)
    return []


def drain_removals(timeout: float | None = None) -> bool:
    """Wait until the trees handed to `remove_later` are removed; False if `timeout` ran out."""
    return _remover.drain(timeout)
