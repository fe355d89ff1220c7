"""run/scratch.py: the harness's scratch directories carry their maker, and only those whose maker
has ended (same boot, same PID namespace) are swept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest

from pytest_agentdrift.run import scratch
from pytest_agentdrift.tasks.fdtree import drain_removals

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
    boot, pidns = scratch._here()
    owner = {"pid": pid, "start": start, "boot": boot, "pidns": pidns, **other}
    (path / scratch.OWNER_FILE).write_text(json.dumps(owner))


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
    bad = tmpdir_here / "agentdrift-bad-marker"
    bad.mkdir()
    (bad / scratch.OWNER_FILE).write_text('{"pid": "1"}')
    not_ours = tmpdir_here / "elsewhere-left"
    marked_by(not_ours, pid, start)
    linked = tmpdir_here / "agentdrift-link"
    linked.symlink_to(left)

    assert sorted(p.name for p in scratch.stale()) == ["agentdrift-left", "agentdrift-reused"]
    assert sorted(p.name for p in scratch.sweep()) == ["agentdrift-left", "agentdrift-reused"]
    assert drain_removals(timeout=30)
    assert not left.exists() and not reused.exists()
    assert (precious / "keep.txt").is_file()  # a link in a swept directory is removed, never followed
    for path in (live, kept, other_boot, other_ns, bad, not_ours):
        assert path.is_dir(), path
    assert linked.is_symlink()
    assert not list(kept.iterdir())


def test_a_marker_that_is_a_symlink_is_not_read(tmpdir_here, ended):
    pid, start = ended
    elsewhere = tmpdir_here / "owner.json"
    boot, pidns = scratch._here()
    elsewhere.write_text(json.dumps({"pid": pid, "start": start, "boot": boot, "pidns": pidns}))
    planted = tmpdir_here / "agentdrift-planted"
    planted.mkdir()
    (planted / scratch.OWNER_FILE).symlink_to(elsewhere)
    assert scratch.stale() == []
