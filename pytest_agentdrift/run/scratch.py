"""The harness's own scratch directories in the system's temporary directory (a session's base, its
control directory, regrade's), and the removal of those a killed process left behind.

A process that ends normally removes its scratch directories itself. One that is killed (SIGKILL,
a CI job's timeout, the OOM killer) cannot, and they hold copies of task trees and agents' private
homes. So each is made with a marker naming its maker (PID, the process's start time, the boot and
the PID namespace), and `sweep` removes a directory only when its marker shows, from this same boot
and PID namespace, that no process with that PID and start time exists any more. Everything else is
left alone: a directory without a readable marker (being made right now, kept on purpose with
--agent-keep-workdirs, or made by another version), one from another boot or PID namespace (a
temporary directory shared with a container or another machine), one another user owns, and
anything that is not a directory. Without /proc (not Linux) no marker is written and nothing is swept.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

PREFIX = "agentdrift-"
#: the marker in each scratch directory (none in one kept on purpose)
OWNER_FILE = ".agentdrift-owner"
_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_PID_NS = "/proc/self/ns/pid"


def make(kind: str = "", *, keep: bool = False) -> Path:
    """A new private directory `agentdrift-[KIND-]XXXXXXXX` in the temporary directory, marked as this
    process's unless it is to be kept (--agent-keep-workdirs: what a killed session left is the user's to read)."""
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-" if kind else PREFIX))
    owner = None if keep else _this_process()
    if owner is not None:
        marker = path / OWNER_FILE
        part = path / f"{OWNER_FILE}.part"
        part.write_text(json.dumps(owner), encoding="utf-8")
        os.replace(part, marker)  # a sweeper reads a whole marker or none
    return path


def stale(directory: str | None = None) -> list[Path]:
    """This user's scratch directories in `directory` (the temporary directory) whose maker has ended."""
    here = _here()
    if here is None:
        return []
    root = directory or tempfile.gettempdir()
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    found = []
    for entry in entries:
        if not entry.name.startswith(PREFIX):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            continue
        owner = _read_marker(Path(entry.path) / OWNER_FILE)
        if owner is None or (owner["boot"], owner["pidns"]) != here:
            continue
        if _started(owner["pid"]) != owner["start"]:
            found.append(Path(entry.path))
    return found


def sweep(directory: str | None = None) -> list[Path]:
    """Hand the stale scratch directories to the background remover; returns them."""
    from pytest_agentdrift.tasks.fdtree import remove_later

    found = stale(directory)
    for path in found:
        remove_later(path)
    return found


def _read_marker(path: Path) -> dict | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as fh:
            doc = json.loads(fh.read(4096))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    fields = {"pid": int, "start": int, "boot": str, "pidns": int}
    if any(type(doc.get(name)) is not kind for name, kind in fields.items()):
        return None
    return doc


def _this_process() -> dict | None:
    here = _here()
    start = _started(os.getpid())
    if here is None or start is None:
        return None
    return {"pid": os.getpid(), "start": start, "boot": here[0], "pidns": here[1]}


def _here() -> tuple[str, int] | None:
    """This boot's id and this process's PID namespace."""
    try:
        with open(_BOOT_ID, encoding="ascii") as fh:
            boot = fh.read().strip()
        return boot, os.stat(_PID_NS).st_ino
    except OSError:
        return None


def _started(pid: int) -> int | None:
    """When process `pid` started (clock ticks after boot, field 22 of /proc/PID/stat); None if there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            line = fh.read()
    except OSError:
        return None
    fields = line[line.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])  # fields after the command name start at field 3
    except (IndexError, ValueError):
        return None
