"""The harness's own scratch directories in the system's temporary directory (a session's base, its
control directory, regrade's), and the removal of those a killed process left behind. A temporary
directory under /dev is not used for them (`base`).

A process that ends normally removes its scratch directories itself. One that is killed (SIGKILL,
a CI job's timeout, the OOM killer) cannot, and they hold copies of task trees and agents' private
homes. So each is made with a marker naming its maker (PID, the process's start time, the boot, the
PID and time namespaces), and `sweep` removes a directory only when its marker shows, from this same
boot and these namespaces, that no process with that PID and start time exists any more. Everything
else is left alone: a directory without a readable marker (being made right now, kept on purpose
with --agent-keep-workdirs, made by another version, or a marker that is a FIFO, a link or no
JSON), one from another boot or namespace (a temporary directory shared with a container or
another machine), one another user owns, one with a file system mounted inside, and anything that
is not a directory. Each is checked again just before it is removed, on a thread of the sweep's own,
its marker last: a removal cut short is finished by the next sweep. Without /proc, or with a /proc
that is not this PID namespace's own, no marker is written and nothing is swept.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import threading
from pathlib import Path

from pytest_agentdrift.run.scratchplaces import SCRATCH_PREFIX, scratch_places, under_dev, work_root

#: the marker in each scratch directory (none in one kept on purpose)
OWNER_FILE = ".agentdrift-owner"
_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_PID_NS = "/proc/self/ns/pid"
_TIME_NS = "/proc/self/ns/time"


def base() -> str:
    """The directory scratch directories are made in: the temporary directory, or somewhere else
    when it lies under /dev (scratchplaces.work_root says why)."""
    return work_root(tempfile.gettempdir())


def placement_note() -> str | None:
    """What the session's header says when scratch is not simply the temporary directory."""
    tmp, where = tempfile.gettempdir(), base()
    if where != tmp:
        return f"work trees in {where}, not {tmp}: an agent's own sandbox may replace /dev"
    if under_dev(tmp):
        return (
            f"work trees in {tmp}, under /dev, which an agent's own sandbox may replace (no writable /tmp or /var/tmp)"
        )
    return None


def make(kind: str = "", *, keep: bool = False) -> Path:
    """A new private directory `agentdrift-[KIND-]XXXXXXXX` in `base()`, marked as this process's
    unless it is to be kept (--agent-keep-workdirs: what a killed session left is the user's to read)."""
    path = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{kind}-" if kind else SCRATCH_PREFIX, dir=base()))
    owner = None if keep else _this_process()
    if owner is not None:
        part = path / f"{OWNER_FILE}.part"
        try:
            part.write_text(json.dumps(owner), encoding="utf-8")
            os.replace(part, path / OWNER_FILE)  # a sweeper reads a whole marker or none
        except OSError:
            part.unlink(missing_ok=True)  # a full disk: the directory works, unmarked (never swept)
    return path


def stale(directory: str | None = None) -> list[Path]:
    """This user's scratch directories in `directory` (scratchplaces.scratch_places) whose maker has ended."""
    return [path for path, _ in _stale_entries(directory)]


def sweep(directory: str | None = None) -> list[Path]:
    """Remove the stale scratch directories on a thread of their own (a session's close never waits
    for them; what an exit cuts short keeps its marker, removed last, for the next sweep). Returns them."""
    found = _stale_entries(directory)
    if found:
        threading.Thread(target=_remove_all, args=(found,), name="agentdrift-sweep", daemon=True).start()
    return [path for path, _ in found]


def _stale_entries(directory: str | None) -> list[tuple[Path, os.stat_result]]:
    here = _here()
    if here is None:
        return []
    # every place scratch is made: what a killed session made in the temporary directory before a move too
    places = [directory] if directory else scratch_places()
    found = ((Path(e.path), e.name) for place in places for e in _entries(place))
    return [(path, st) for path, name in found if name.startswith(SCRATCH_PREFIX) and (st := _stale_stat(path, here))]


def _entries(directory: str) -> list[os.DirEntry]:
    try:
        return list(os.scandir(directory))
    except OSError:
        return []


def _remove_all(found: list[tuple[Path, os.stat_result]]) -> None:
    for path, seen in found:
        try:
            _remove(path, seen)
        except Exception:  # noqa: BLE001 - housekeeping: what is left is tried again by the next sweep
            pass


def _remove(path: Path, seen: os.stat_result) -> None:
    """Remove a stale directory, its marker last, if it is still the one found stale and holds no mount."""
    from pytest_agentdrift.tasks.fdtree import rmtree

    here = _here()
    st = _stale_stat(path, here) if here is not None else None
    if st is None or (st.st_dev, st.st_ino) != (seen.st_dev, seen.st_ino):
        return
    if _holds_a_mount(path):
        return  # someone's file system is mounted in it: never removed through
    for name in os.listdir(path):
        if name != OWNER_FILE:
            rmtree(path / name)
    (path / OWNER_FILE).unlink(missing_ok=True)
    os.rmdir(path)


def _stale_stat(path: Path, here: tuple[str, int, int]) -> os.stat_result | None:
    """`path`'s lstat if it is this user's directory whose marker names, from this boot and these
    PID and time namespaces, a process that no longer exists; else None (anything unreadable too)."""
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return None
        owner = _read_marker(path / OWNER_FILE)
        if owner is None or (owner["boot"], owner["pidns"], owner["timens"]) != here:
            return None
        return st if _started(owner["pid"]) != owner["start"] else None
    except (OSError, ValueError, IndexError):
        return None


def _read_marker(path: Path) -> dict | None:
    """The marker, if it is a small regular file holding one (canonical.open_regular: never a FIFO or a link)."""
    from pytest_agentdrift.canonical import open_regular

    try:
        fd = open_regular(path)
    except OSError:
        return None
    try:
        doc = json.loads(os.read(fd, 4096))
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)
    fields = {"pid": int, "start": int, "boot": str, "pidns": int, "timens": int}
    if not isinstance(doc, dict) or any(type(doc.get(name)) is not kind for name, kind in fields.items()):
        return None
    return doc


def _holds_a_mount(path: Path) -> bool:
    from pytest_agentdrift.run.limits import unescape_mount_path

    inside = os.path.join(path, "")
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
            points = [unescape_mount_path(line.split(" ")[4]) for line in fh if line.count(" ") > 4]
    except OSError:
        return True  # cannot tell: leave it
    return any(p.startswith(inside) for p in points)


def _this_process() -> dict | None:
    here = _here()
    try:
        start = _started(os.getpid())
    except (OSError, ValueError, IndexError):
        return None
    if here is None or start is None:
        return None
    return {"pid": os.getpid(), "start": start, "boot": here[0], "pidns": here[1], "timens": here[2]}


def _here() -> tuple[str, int, int] | None:
    """This boot's id and this process's PID and time namespaces; None when /proc is not this PID
    namespace's own (a PID read there would name another process)."""
    try:
        if os.readlink("/proc/self") != str(os.getpid()):
            return None
        with open(_BOOT_ID, encoding="ascii") as fh:
            boot = fh.read().strip()
        timens = os.stat(_TIME_NS).st_ino if os.path.exists(_TIME_NS) else 0
        return boot, os.stat(_PID_NS).st_ino, timens
    except OSError:
        return None


def _started(pid: int) -> int | None:
    """When process `pid` started (clock ticks after boot, field 22 of /proc/PID/stat); None when
    there is no such process, or it has ended and only its exit status waits to be read (a zombie:
    an orphan of a killed session whose reaper never waits). An unreadable one raises: not ended."""
    from pytest_agentdrift.run.sandbox import proc_stat

    fields = proc_stat(pid)  # the fields after the command name: the state first, field 22 the 20th
    if len(fields) > 19:
        return int(fields[19]) if fields[0] != b"Z" else None
    if os.path.lexists(f"/proc/{pid}"):
        raise OSError(f"/proc/{pid}/stat cannot be read")
    return None
