"""Watching a run directory from outside the sandbox while the agent runs. No pytest.

A thread of the harness process (which the sandboxed agent can neither see
nor signal) holds an inotify instance on every directory of the run
directory, adding a watch to each directory as it appears. It turns what
it reads into harness events

    {"source": "harness", "type": "write", "path": ..., "t": ..., "kind": "create"|"modify"|"delete"|"move"}

(`path` relative to the work tree, or absolute when outside the work tree
but inside the run directory; `t` in seconds since the agent started) and
keeps two running totals that back the `disk` and `files` limits: the space
the run directory's entries take (`usage`: allocated blocks, or the apparent
size when larger, for files, directories and symbolic links alike) and its
entries (the work tree's, and every one the run made elsewhere in the run
directory: $TMPDIR, the private home, the protocol's directory), plus what the
sandbox's own tmpfs mounts hold (`extra`, read by the guard).

What it cannot see is documented in docs/security.md ("What the write
observation sees"): a queue overflow loses events (it is recorded, the totals
are recounted, and `complete()` is then false: the `writes` checks are
undecided); writes through a shared memory mapping raise no IN_MODIFY, so a
file closed after being opened for writing with no write seen is reported as
modified (IN_CLOSE_WRITE); metadata-only changes (chmod, utime) are not write
events. A write through a hard link to a work-tree file (from $TMPDIR, from
the protocol's own directory) is reported at the work-tree path, by inode,
with the link in `via`. The work tree's events have a budget of their own, so
no flood elsewhere crowds them out.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import stat
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

EVALUATOR_COMPONENT = "write_watch"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

IN_MODIFY = 0x00000002
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

WATCH_MASK = (
    IN_MODIFY
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
)
_HEADER = struct.Struct("iIII")

#: repeated modify events of one path within this many seconds become one event
COALESCE_S = 1.0
#: at most this many write events per run; the rest are counted, not kept
MAX_EVENTS = 10_000
#: at most this many directories watched per run (the kernel's per-user budget is shared)
MAX_WATCHES = 50_000
#: probes whose values add to a limit's total (the sandbox's tmpfs entries count towards `files`)
EXTRA_KEYS = frozenset({"files"})
#: a suspected limit breach is confirmed by a recount at most this often
RECOUNT_EVERY_S = 0.5


class InotifyUnavailable(OSError):
    pass


_libc: ctypes.CDLL | None = None


def _inotify() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.inotify_init1.argtypes = [ctypes.c_int]
            libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
            libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
            _libc = libc
        except (OSError, AttributeError) as exc:
            raise InotifyUnavailable(f"inotify is not available: {exc}") from None
    return _libc


def _new_instance() -> int:
    fd = int(_inotify().inotify_init1(IN_NONBLOCK | IN_CLOEXEC))  # ctypes returns the C int untyped
    if fd < 0:
        err = ctypes.get_errno()
        raise InotifyUnavailable(err, f"inotify_init1: {os.strerror(err)}")
    return fd


def read_queued(fd: int) -> Iterator[bytes]:
    """What a non-blocking inotify instance holds, chunk by chunk, until it is empty; an error
    other than EINTR is raised."""
    while True:
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError as exc:
            if exc.errno == errno.EINTR:
                continue
            raise
        if not data:
            return
        yield data


def _discard_queued(fd: int) -> None:
    """Read and drop what an instance still holds (a previous run's last events, its IN_IGNORED)."""
    try:
        for _ in read_queued(fd):
            pass
    except OSError:
        return


class InotifyReserve:
    """Inotify instances the harness holds from before any agent runs.

    The kernel bounds a user's instances (fs.inotify.max_user_instances, 128
    by default) and an agent runs as the harness's user: a sibling run's agent
    that took every one would leave the next run's watcher without one, and
    that run unobserved. So the session reserves its instances when it starts,
    before any agent (one for the run's write watcher, one for its canary's
    watch, run/canary.py, one for each of the two grading sandboxes' totals,
    grade/gradeserver.py), and each takes one and gives it back, emptied of
    its watches, for the next run.
    """

    #: instances kept for reuse (a run's write watcher, its canary's watch, grading's two); more are closed
    KEEP = 4

    def __init__(self) -> None:
        self._free: list[int] = []
        self._lock = threading.Lock()
        self.problem: str | None = None  # why the reservation failed, when it did

    def reserve(self, n: int = 1) -> None:
        with self._lock:
            try:
                while len(self._free) < n:
                    self._free.append(_new_instance())
            except OSError as exc:
                self.problem = f"could not reserve an inotify instance before the runs: {exc}"

    def take(self) -> int:
        """A reserved instance, emptied of what it still held; a new one when none is left."""
        with self._lock:
            if self._free:
                fd = self._free.pop()
                _discard_queued(fd)
                return fd
        return _new_instance()

    def give_back(self, fd: int, wds: list[int]) -> None:
        """Remove `wds` from the instance `fd` and keep it for the next taker (or close it)."""
        libc = _inotify()
        for wd in wds:
            libc.inotify_rm_watch(fd, wd)
        _discard_queued(fd)
        with self._lock:
            if len(self._free) < self.KEEP:
                self._free.append(fd)
                return
        os.close(fd)


#: this process's reserve (the session fills it when it starts: reserve_instances)
RESERVE = InotifyReserve()


def reserve_instances(n: int = 4) -> str | None:
    """Hold `n` inotify instances for this process's runs from now on; why not, when it failed."""
    try:
        _inotify()
    except InotifyUnavailable as exc:
        return str(exc)
    RESERVE.reserve(n)
    return RESERVE.problem


class WriteWatcher:
    """Start before the agent, `mark_start()` when it starts, `stop()` after its processes are gone."""

    def __init__(
        self,
        root: Path,
        work: Path,
        *,
        limits: dict[str, int | None] | None = None,
        on_exceeded: Callable[[str, int], None] | None = None,
        probes: dict[str, Callable[[], int | None]] | None = None,
        unreported: tuple[Path, ...] = (),
        private: tuple[Path, ...] = (),
        coalesce_s: float = COALESCE_S,
        max_events: int = MAX_EVENTS,
        max_watches: int = MAX_WATCHES,
    ):
        self.root = Path(root)
        self.work = Path(work)
        self.limits = {k: v for k, v in (limits or {}).items() if k in ("disk", "files") and v}
        self.on_exceeded = on_exceeded
        self.probes = dict(probes or {})
        self.coalesce_s = coalesce_s
        self.max_events = max_events
        self.max_watches = max_watches
        self.events: list[dict[str, Any]] = []
        self.dropped = 0
        self.dropped_work = 0  # of those, events in the work tree (its own budget of max_events)
        self.dropped_decoy = 0  # and beside it, in what is not the agent's (its own budget too)
        self._kept = {"work": 0, "private": 0, "decoy": 0}
        self.unwatched_work = 0  # directories of the work tree left unwatched
        self._inodes: dict[tuple[int, int], str] = {}  # (dev, ino) -> path in the work tree or the decoy
        self._dirty: set[str] = set()  # paths written (or created) since they were last closed
        self.coalesced = 0
        self.overflows = 0
        self.unwatched_dirs = 0
        self.exceeded: dict[str, int] = {}
        self.peaks: dict[str, int] = {}
        self.error: str | None = None
        self._wd: dict[int, str] = {}  # watch descriptor -> absolute directory path
        self._wd_of: dict[str, int] = {}  # its reverse: one lookup per directory a scan meets
        self._sizes: dict[str, int] = {}  # entries under root -> the space each takes (usage())
        self._entries = 0  # entries under root
        self._entries_before = 0  # of those, outside the work tree when the watch started (the harness's)
        self.extra: dict[str, int] = {}  # "files": entries of the sandbox's tmpfs mounts (a probe)
        # paths reported created and not since seen to go: a directory made just before its parent's
        # watch is found by the scan *and* by its own event; it is one entry, one create
        self._created: set[str] = set()
        self._last_modify: dict[str, float] = {}
        self._moves: dict[int, str] = {}  # cookie -> old absolute path of a moved directory
        self._init_thread_state()
        self._work_prefix = str(self.work) + os.sep
        # the protocol's own files (events, report): counted towards disk, not reported as writes
        self._unreported = tuple(str(p) for p in unreported)
        # the agent's own places beside the work tree (its home, its temporary files): a flood of
        # writes there never crowds out the events of the decoy, the files it has no business touching
        self._private = tuple(str(p) + os.sep for p in private)

    def _init_thread_state(self) -> None:
        """The watching thread's clock, descriptors and pacing."""
        self._t0 = time.monotonic()
        self._fd = -1
        self._stop_r, self._stop_w = -1, -1
        self._sync_r, self._sync_w = -1, -1  # settle(): the thread reads what is queued, then answers
        self._settled = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_recount = 0.0
        self._last_probe = 0.0
        self._pending = False  # a breach seen but not yet confirmed by a recount

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> WriteWatcher:
        _inotify()
        self._fd = RESERVE.take()  # reserved before any agent ran (InotifyReserve), else a new one
        self._stop_r, self._stop_w = os.pipe()
        self._sync_r, self._sync_w = os.pipe()
        self._watch_tree(str(self.root), emit=False, rescan=False)  # nothing is watched yet
        self._recount()
        self._entries_before = self._entries - self._recount_work()
        self.peaks = {"disk": self.total_bytes, "files": self.entries}
        self._thread = threading.Thread(target=self._loop, name="agentdrift-watch", daemon=True)
        self._thread.start()
        return self

    def mark_start(self) -> None:
        self._t0 = time.monotonic()

    def stop(self) -> None:
        """Read what is still queued, then close. Call after every agent process is gone."""
        if self._thread is None:
            return
        os.write(self._stop_w, b"x")
        self._thread.join(10)
        done = not self._thread.is_alive()
        pipes = (self._stop_r, self._stop_w, self._sync_r, self._sync_w)
        for fd in pipes if done else (self._fd, *pipes):
            try:
                os.close(fd)
            except OSError:
                pass
        if done:  # the instance goes back to the reserve for the next run, emptied of this run's watches
            RESERVE.give_back(self._fd, list(self._wd))
        self._thread = None

    def settle(self, timeout_s: float = 10.0) -> bool:
        """Judge every write made so far, now: the thread reads what the kernel has queued, probes and
        confirms a breach whatever the recount rate, then this returns. For a watcher that outlives a
        process (the grading server's, across requests): once the process has ended, its writes are
        queued, and a breach judged later could miss files the process's copy took with it. False when
        the thread did not answer within timeout_s (or is not running)."""
        if self._thread is None or not self._thread.is_alive():
            return False
        self._settled.clear()
        os.write(self._sync_w, b"s")
        return self._settled.wait(timeout_s)

    @property
    def total_bytes(self) -> int:
        return sum(self._sizes.values())

    @property
    def entries(self) -> int:
        """The `files` count: the work tree's entries, every entry made elsewhere under root, the tmpfs'."""
        return max(0, self._entries - self._entries_before) + self.extra.get("files", 0)

    def summary(self) -> dict[str, Any]:
        return {
            "mechanism": "inotify",
            "events": len(self.events),
            "dropped": self.dropped,
            "dropped_work": self.dropped_work,
            "dropped_decoy": self.dropped_decoy,
            "coalesced": self.coalesced,
            "queue_overflows": self.overflows,
            "unwatched_dirs": self.unwatched_dirs,
            "coalesce_s": self.coalesce_s,
            "error": self.error,
            "complete": self.complete(),
            "outside_complete": self.outside_complete(),
        }

    def complete(self) -> bool:
        """Whether every write to the work tree was seen: no work-tree event dropped, no queue overflow,
        no work-tree directory unwatched, no error."""
        return not (self.dropped_work or self.overflows or self.unwatched_work or self.error)

    def outside_complete(self) -> bool:
        """Whether every write beside the work tree that was not the agent's own was seen."""
        return not (self.dropped_decoy or self.overflows or self.error)

    def _budget(self, path: str) -> str:
        if path.startswith(self._work_prefix):
            return "work"
        return "private" if path.startswith(self._private) else "decoy"

    # -- the thread ----------------------------------------------------------------------------
    def _loop(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self._fd, self._stop_r, self._sync_r], [], [], 0.1)
                if self._fd in ready:
                    self._drain()
                if self._sync_r in ready:
                    os.read(self._sync_r, 64)
                    self._drain()
                    self._probe(force=True)
                    self._settled.set()
                self._probe()
                if self._pending:
                    self._check()
                if self._stop_r in ready:
                    self._drain()
                    self._probe(force=True)
                    return
        except Exception as exc:  # noqa: BLE001  (the watcher must never take the run down; the record says what stopped it)
            self.error = f"{type(exc).__name__}: {exc}"

    def _drain(self) -> None:
        for data in read_queued(self._fd):
            self._handle(data)

    def _handle(self, data: bytes) -> None:
        touched: set[str] = set()  # paths whose space is read again after this batch
        off = 0
        while off + _HEADER.size <= len(data):
            wd, mask, cookie, length = _HEADER.unpack_from(data, off)
            raw = data[off + _HEADER.size : off + _HEADER.size + length].split(b"\0", 1)[0]
            off += _HEADER.size + length
            self._handle_event(wd, mask, cookie, raw, touched)
        for path in touched:
            self._size(path)
        self._check()

    def _handle_event(self, wd: int, mask: int, cookie: int, raw: bytes, touched: set[str]) -> None:  # noqa: C901 (known debt: split by job when next touched)
        if mask & IN_Q_OVERFLOW:
            self.overflows += 1
            self._watch_tree(str(self.root), emit=False, rescan=True)  # what was made meanwhile
            self._recount()
            return
        if mask & IN_IGNORED:
            self._drop_watch(wd)
            return
        parent = self._wd.get(wd)
        if parent is None or not raw:
            return
        path = os.path.join(parent, os.fsdecode(raw))
        is_dir = bool(mask & IN_ISDIR)
        if mask & (IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM):
            touched.add(parent)  # a directory's own blocks grow with its entries
        if mask & IN_CREATE:
            self._on_create(path, is_dir, touched)
        elif mask & IN_MODIFY:
            touched.add(path)
            self._dirty.add(path)
            self._emit_modify(path)
        elif mask & IN_CLOSE_WRITE:
            self._on_close_write(path, touched)
        elif mask & IN_DELETE:
            self._created.discard(path)
            self._emit(path, "delete")
            self._count(path, -1)
            self._sizes.pop(path, None)
        elif mask & IN_MOVED_FROM:
            self._created.discard(path)
            self._emit(path, "move")
            self._count(path, -1)
            self._forget(path)
            if is_dir:
                self._moves[cookie] = path
        elif mask & IN_MOVED_TO:
            self._on_moved_to(path, is_dir, cookie, touched)

    def _on_create(self, path: str, is_dir: bool, touched: set[str]) -> None:
        found = path in self._created  # by the scan of a directory above it, which listed it then
        if not found:
            self._created.add(path)
            self._emit(path, "create")
            self._count(path, +1)
        touched.add(path)
        if is_dir:
            # what was made in it before the watch; a directory the scan found and watched is not
            # listed again (any other watch already on this path may be a stale one: listed again)
            self._watch_tree(path, emit=True, rescan=not found)
        else:
            self._dirty.add(path)

    def _on_close_write(self, path: str, touched: set[str]) -> None:
        if path not in self._dirty:  # written with no IN_MODIFY (a shared mapping): still a write
            touched.add(path)
            self._emit_modify(path)
        self._dirty.discard(path)
        # one open-write-close is one edit: the next write to the path is a new one,
        # however soon (three tweaks put back within a second are six edits, not one)
        self._last_modify.pop(path, None)

    def _on_moved_to(self, path: str, is_dir: bool, cookie: int, touched: set[str]) -> None:
        self._emit(path, "move")
        self._count(path, +1)
        old = self._moves.pop(cookie, None) if is_dir else None
        known = old is not None and self._rename_watches(old, path)
        if is_dir:
            # a directory we never watched (moved in, or renamed before we got to it):
            # what is in it is new to us
            self._watch_tree(path, emit=not known, rescan=True)  # its entries' sizes are forgotten
        else:
            touched.add(path)

    # -- events --------------------------------------------------------------------------------
    def _rel(self, path: str) -> str:
        return path.removeprefix(self._work_prefix)

    def _emit(self, path: str, kind: str) -> None:
        via = None
        if kind == "modify" and not path.startswith(self._work_prefix):
            target = self._alias(path)
            if target is not None and target != path:  # a watched file edited through a hard link elsewhere
                path, via = target, path
        if via is None and self._unreported and any(path == u or path.startswith(u + os.sep) for u in self._unreported):
            return
        budget = self._budget(path)
        if self._kept[budget] >= self.max_events:
            self.dropped += 1
            self.dropped_work += budget == "work"
            self.dropped_decoy += budget == "decoy"
            return
        self._kept[budget] += 1
        t = round(max(0.0, time.monotonic() - self._t0), 3)
        event = {"source": "harness", "type": "write", "path": self._rel(path), "t": t, "kind": kind}
        if via is not None:
            event["via"] = via
        self.events.append(event)

    def _alias(self, path: str) -> str | None:
        """The work-tree or decoy path of the file `path` is a hard link to, or None."""
        try:
            st = os.lstat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_nlink < 2:
            return None
        return self._inodes.get((st.st_dev, st.st_ino))

    def _emit_modify(self, path: str) -> None:
        now = time.monotonic()
        last = self._last_modify.get(path)
        if last is not None and now - last < self.coalesce_s:
            self.coalesced += 1
            return
        self._last_modify[path] = now
        self._emit(path, "modify")

    # -- watches and totals --------------------------------------------------------------------
    def _add_watch(self, path: str) -> bool:
        if len(self._wd) >= self.max_watches:
            self._unwatched(path)
            return False
        wd = int(_inotify().inotify_add_watch(self._fd, os.fsencode(path), WATCH_MASK))
        if wd < 0:
            if ctypes.get_errno() != errno.ENOENT:  # gone before its watch: nothing left to miss
                self._unwatched(path)  # ENOSPC (watch budget), ENAMETOOLONG
            return False
        self._wd[wd] = path
        self._wd_of[path] = wd
        return True

    def _drop_watch(self, wd: int) -> None:
        path = self._wd.pop(wd, None)
        if path is not None and self._wd_of.get(path) == wd:
            del self._wd_of[path]

    def _unwatched(self, path: str) -> None:
        self.unwatched_dirs += 1
        if path == str(self.work) or path.startswith(self._work_prefix):
            self.unwatched_work += 1

    def _watch_tree(self, top: str, *, emit: bool, rescan: bool) -> None:
        """Watch `top` and every directory under it (iteratively: depth is the agent's to choose).

        With `emit`, entries found are reported as created: they were made
        between the directory's creation and its watch.

        A directory already watched is listed again only with `rescan` (after lost events, or a
        move whose entries' sizes were forgotten): otherwise what it held when its watch was added
        was listed then, and what came after has events of its own. Listing it again on every
        directory created below it would cost the square of the tree's depth.
        """

        def enter(d: str) -> bool:
            return rescan if d in self._wd_of else self._add_watch(d)

        for p, st in _tree_entries(top, enter=enter):
            if emit and p not in self._sizes and p not in self._created:
                self._created.add(p)
                self._emit(p, "create")
                self._count(p, +1)
            self._sizes[p] = usage(st)
            if stat.S_ISREG(st.st_mode):
                self._note_inode(p, st)

    def _note_inode(self, path: str, st: os.stat_result) -> None:
        if self._budget(path) != "private" and stat.S_ISREG(st.st_mode):
            self._inodes.setdefault((st.st_dev, st.st_ino), path)

    def _rename_watches(self, old: str, new: str) -> bool:
        prefix = old + os.sep
        renamed = False
        for wd, p in list(self._wd.items()):
            if p == old:
                self._wd[wd] = new
                renamed = True
            elif p.startswith(prefix):
                self._wd[wd] = new + p[len(old) :]
        self._wd_of = {p: wd for wd, p in self._wd.items()}
        return renamed

    def _forget(self, path: str) -> None:
        self._sizes.pop(path, None)
        prefix = path + os.sep
        for p in [p for p in self._sizes if p.startswith(prefix)]:
            del self._sizes[p]

    def _count(self, path: str, delta: int) -> None:
        self._entries = max(0, self._entries + delta)

    def _size(self, path: str) -> None:
        try:
            st = os.lstat(path)
        except OSError:
            self._sizes.pop(path, None)
            return
        if path != str(self.root):
            self._sizes[path] = usage(st)
        if stat.S_ISREG(st.st_mode):
            self._note_inode(path, st)

    def _recount(self) -> None:
        """Exact totals from the file system (iterative walk)."""
        self._sizes = _walk(str(self.root))
        self._entries = len(self._sizes)
        self._last_recount = time.monotonic()

    def _recount_work(self) -> int:
        """Entries of the work tree (from the last recount)."""
        return sum(1 for p in self._sizes if p.startswith(self._work_prefix))

    def _check(self) -> None:
        values = {"disk": self.total_bytes, "files": self.entries}
        for key, v in values.items():
            self.peaks[key] = max(self.peaks.get(key, 0), v)
        over = [k for k, limit in self.limits.items() if values[k] > limit and k not in self.exceeded]
        self._pending = bool(over)
        if not over:
            return
        if time.monotonic() - self._last_recount < RECOUNT_EVERY_S:
            return  # confirmed on a later pass of the loop (every 0.1 s) or at the final drain
        self._pending = False
        self._recount()  # the running totals can drift (a directory moved out, an overflow)
        values = {"disk": self.total_bytes, "files": self.entries}
        for key in over:
            if values[key] > self.limits[key]:
                self.exceeded[key] = values[key]
                self.peaks[key] = max(self.peaks.get(key, 0), values[key])
                if self.on_exceeded is not None:
                    self.on_exceeded(key, values[key])

    def note_extra(self, key: str, value: int) -> None:
        """What the sandbox's tmpfs mounts hold towards a limit (a probe, or init's last word)."""
        if self.extra.get(key) != value:
            self.extra[key] = value
            self._pending = True  # judged on the loop's next pass, or by the caller's check

    def final_check(self) -> None:
        """Judge the totals once more now, whatever the recount rate (after the last word on them)."""
        self._last_recount = 0.0
        self._check()

    def _probe(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_probe < 0.1:
            return
        self._last_probe = now
        for key, fn in self.probes.items():
            v = fn()
            if v is None:
                continue
            if key in EXTRA_KEYS:  # part of a limit's total, not a peak of its own
                self.note_extra(key, v)
            else:
                self.peaks[key] = max(self.peaks.get(key, 0), v)
        if force:
            # a breach seen last: confirm it now, whatever the recount rate
            self.final_check()


def usage(st: os.stat_result) -> int:
    """The space one entry takes: its allocated blocks, or its apparent size when that is larger
    (a sparse file still counts what it claims; a directory or a link its blocks)."""
    return max(st.st_size, getattr(st, "st_blocks", 0) * 512)


def _walk(top: str) -> dict[str, int]:
    """Every entry under `top` (not following links) -> usage()."""
    return {path: usage(st) for path, st in _tree_entries(top)}


def _tree_entries(top: str, enter: Callable[[str], bool] | None = None) -> Iterator[tuple[str, os.stat_result]]:
    """(path, lstat) of every entry under `top`, not following links, iteratively (depth is the
    agent's to choose); a directory is listed only when `enter(directory)` says so."""
    stack = [top]
    while stack:
        d = stack.pop()
        if enter is not None and not enter(d):
            continue
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                yield entry.path, st
                if stat.S_ISDIR(st.st_mode):
                    stack.append(entry.path)
