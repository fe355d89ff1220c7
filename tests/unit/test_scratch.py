"""run/scratch.py: the harness's scratch directories carry their maker, and only those whose maker
has ended (same boot, same PID namespace) are swept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from pytest_agentdrift.run import agentpaths, scratch, scratchplaces
from pytest_agentdrift.tasks.fdtree import rmtree as fdtree_rmtree

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="process start times come from /proc")


@pytest.fixture
def tmpdir_here(tmp_path, monkeypatch):
    """The temporary directory the harness makes its scratch in, private to the test."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="module")
def ended() -> tuple[int, int]:
    """(PID, start time) of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    start = scratch._started(proc.pid)
    proc.communicate(b"")
    assert start is not None and scratch._started(proc.pid) is None
    return proc.pid, start


def marked_by(path, pid: int, start: int, **other) -> None:
    path.mkdir()
    boot, pidns, timens = scratch._here()
    owner = {"pid": pid, "start": start, "boot": boot, "pidns": pidns, "timens": timens, **other}
    (path / scratch.OWNER_FILE).write_text(json.dumps(owner))


def gone(*paths, timeout: float = 30) -> bool:
    """Whether the sweep's thread removed `paths` within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while any(os.path.lexists(p) for p in paths):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_scratch_directory_is_private_and_names_its_maker(tmpdir_here):
    made = scratch.make("control")
    assert made.parent == tmpdir_here and made.name.startswith("agentdrift-control-")
    assert (made.stat().st_mode & 0o777) == 0o700
    owner = json.loads((made / scratch.OWNER_FILE).read_text())
    assert owner["pid"] == os.getpid() and owner["start"] == scratch._started(os.getpid())
    assert scratch.stale() == []  # its maker is running


def test_what_an_ended_process_left_is_swept_and_nothing_else(tmpdir_here, ended):
    pid, start = ended
    left = tmpdir_here / "agentdrift-left"
    marked_by(left, pid, start)
    (left / "runs" / "T01").mkdir(parents=True)
    (left / "runs" / "T01" / "calc.py").write_text("copy of a task tree\n")
    precious = tmpdir_here / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("never removed through a link\n")
    (left / "runs" / "link").symlink_to(precious)
    reused = tmpdir_here / "agentdrift-reused"
    marked_by(reused, os.getpid(), start)  # the PID now belongs to another process (this one)
    live = scratch.make()
    kept = scratch.make(keep=True)  # --agent-keep-workdirs: no marker
    other_boot = tmpdir_here / "agentdrift-other-boot"
    marked_by(other_boot, pid, start, boot="another-boot")
    other_ns = tmpdir_here / "agentdrift-other-pidns"
    marked_by(other_ns, pid, start, pidns=1)
    other_time = tmpdir_here / "agentdrift-other-timens"
    marked_by(other_time, pid, start, timens=1)
    bad = tmpdir_here / "agentdrift-bad-marker"
    bad.mkdir()
    (bad / scratch.OWNER_FILE).write_text('{"pid": "1"}')
    not_ours = tmpdir_here / "elsewhere-left"
    marked_by(not_ours, pid, start)
    linked = tmpdir_here / "agentdrift-link"
    linked.symlink_to(left)

    assert sorted(p.name for p in scratch.stale()) == ["agentdrift-left", "agentdrift-reused"]
    assert sorted(p.name for p in scratch.sweep()) == ["agentdrift-left", "agentdrift-reused"]
    assert gone(left, reused)
    assert (precious / "keep.txt").is_file()  # a link in a swept directory is removed, never followed
    for path in (live, kept, other_boot, other_ns, other_time, bad, not_ours):
        assert path.is_dir(), path
    assert linked.is_symlink()
    assert not list(kept.iterdir())


def test_a_marker_that_is_a_symlink_is_not_read(tmpdir_here, ended):
    pid, start = ended
    elsewhere = tmpdir_here / "owner.json"
    boot, pidns, timens = scratch._here()
    elsewhere.write_text(json.dumps({"pid": pid, "start": start, "boot": boot, "pidns": pidns, "timens": timens}))
    planted = tmpdir_here / "agentdrift-planted"
    planted.mkdir()
    (planted / scratch.OWNER_FILE).symlink_to(elsewhere)
    assert scratch.stale() == []


@pytest.mark.parametrize("plant", ["fifo", "deep-json", "directory"])
def test_a_planted_marker_neither_hangs_nor_breaks_the_sweep(tmpdir_here, plant):
    planted = tmpdir_here / "agentdrift-planted"
    planted.mkdir()
    marker = planted / scratch.OWNER_FILE
    if plant == "fifo":
        os.mkfifo(marker)  # an open for reading would wait for a writer forever
    elif plant == "deep-json":
        marker.write_text("[" * 5000)  # RecursionError in json, not ValueError
    else:
        marker.mkdir()
    swept = []
    worker = threading.Thread(target=lambda: swept.append(scratch.sweep()), daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the sweep hangs on the planted marker"
    assert swept == [[]] and planted.is_dir()


def test_a_removal_cut_short_keeps_the_marker_for_the_next_sweep(tmpdir_here, ended, monkeypatch):
    from pytest_agentdrift.tasks import fdtree

    pid, start = ended
    left = tmpdir_here / "agentdrift-left"
    marked_by(left, pid, start)
    for name in ("a", "b"):
        (left / name).mkdir()
        (left / name / "f").write_text("x")
    real = fdtree.rmtree
    removed = []

    def cut_short(path):
        removed.append(Path(path).name)
        real(path)
        if len(removed) == 2:
            raise KeyboardInterrupt  # the process ends before the marker's turn

    monkeypatch.setattr(fdtree, "rmtree", cut_short)
    with pytest.raises(KeyboardInterrupt):
        scratch._remove(left, os.lstat(left))
    assert sorted(removed) == ["a", "b"] and (left / scratch.OWNER_FILE).is_file()  # the marker goes last
    monkeypatch.setattr(fdtree, "rmtree", real)
    assert scratch.sweep() == [left] and gone(left)


def test_a_directory_holding_a_mount_is_never_removed_through():
    assert scratch._holds_a_mount(Path("/"))  # /proc, at least, is mounted below it
    assert not scratch._holds_a_mount(Path("/proc/self/fd"))


def test_nothing_is_marked_or_swept_where_proc_is_another_namespaces(tmpdir_here, ended, monkeypatch):
    pid, start = ended
    marked_by(tmpdir_here / "agentdrift-left", pid, start)
    monkeypatch.setattr(scratch.os, "getpid", lambda: 1)  # /proc/self names a different PID here
    assert scratch._here() is None and scratch.stale() == []
    assert not (scratch.make() / scratch.OWNER_FILE).exists()


def test_a_maker_that_ended_unreaped_is_ended(tmpdir_here):
    """An orphan of a killed session is a zombie under a reaper that never waits: it has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    start = scratch._started(proc.pid)
    left = tmpdir_here / "agentdrift-zombie"
    marked_by(left, proc.pid, start)
    assert scratch.stale() == []  # running
    proc.stdin.close()
    deadline = time.monotonic() + 30
    while scratch.stale() == []:  # exited, not yet waited for
        assert time.monotonic() < deadline and os.path.exists(f"/proc/{proc.pid}")
        time.sleep(0.02)
    assert scratch.stale() == [left]
    proc.wait()


#: /dev/shm to make a temporary directory in, and a writable /tmp outside /dev for scratch to move to
DEV_SHM_AND_TMP = pytest.mark.skipif(
    not os.access("/dev/shm", os.W_OK) or not os.access("/tmp", os.W_OK) or scratchplaces.under_dev("/tmp"),
    reason="needs a writable /dev/shm and a writable /tmp outside /dev",
)


@DEV_SHM_AND_TMP
def test_a_temporary_directory_under_dev_is_not_where_work_trees_go(monkeypatch):
    # an agent's own sandbox (Codex's bubblewrap) mounts a /dev of its own: a tree there vanishes
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        monkeypatch.setattr(tempfile, "tempdir", shm)
        assert scratch.base() == "/tmp"
        assert scratch.placement_note() == f"work trees in /tmp, not {shm}: an agent's own sandbox may replace /dev"
        made = scratch.make("test")
        try:
            assert made.parent == Path("/tmp") and (made / scratch.OWNER_FILE).is_file()
        finally:
            fdtree_rmtree(made)
        # the scratch's own directory is never shown as an agent's code directory
        assert not agentpaths.code_dir_shown("/tmp", [])
        assert agentpaths.code_dir_shown("/opt/my-agent", [])


@DEV_SHM_AND_TMP
def test_nowhere_outside_dev_to_go_is_said_not_passed_over(monkeypatch):
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        monkeypatch.setattr(tempfile, "tempdir", shm)
        monkeypatch.setattr(scratchplaces, "OUTSIDE_DEV", ("/nonexistent-agentdrift-test",))
        assert scratch.base() == shm
        assert "under /dev, which an agent's own sandbox may replace" in scratch.placement_note()


def test_a_temporary_directory_elsewhere_is_used_as_it_is(tmpdir_here):
    assert (scratch.base(), scratch.placement_note()) == (str(tmpdir_here), None)
    assert scratch.make("test").parent == tmpdir_here


@DEV_SHM_AND_TMP
def test_what_a_killed_session_left_in_a_temporary_directory_under_dev_is_still_found(monkeypatch, ended):
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        monkeypatch.setattr(tempfile, "tempdir", shm)
        left = Path(shm) / f"{scratch.SCRATCH_PREFIX}before-the-move"
        marked_by(left, *ended)
        assert left in scratch.stale()
