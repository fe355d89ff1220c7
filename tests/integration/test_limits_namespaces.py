"""The limits in namespaces of their own: the sandbox's first process as PID 1 under bubblewrap
measures its tmpfs and counts what the file size limit killed, and the write watcher's reserved
inotify instance outlasts a sibling that takes every other one (in a user namespace)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agentdrift.run import sandboxinit


@pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap is not installed")
def test_init_as_pid_1_measures_the_tmpfs_and_counts_what_the_file_size_limit_killed(tmp_path):
    go_r, go_w = os.pipe()
    st_r, st_w = os.pipe()
    script = (
        "import os, resource, signal, subprocess\n"
        "open('/dev/shm/a', 'wb').write(b'x' * 300000)\n"
        "open('/dev/shm/b', 'wb').close()\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "subprocess.call(['dd', 'if=/dev/zero', 'of=/dev/shm/big', 'bs=8192', 'count=2'], stderr=subprocess.DEVNULL)\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_DFL)\n"  # Python ignores it; most programs do not
        "open('/dev/shm/c', 'wb').write(b'y' * 8192)\n"  # the agent itself, killed past the limit
    )
    init = [sys.executable, "-I", "-S", sandboxinit.__file__, "--go-fd", str(go_r), "--status-fd", str(st_w)]
    argv = ["bwrap", "--dev-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "--tmpfs", "/dev/shm", "--as-pid-1"]
    proc = subprocess.Popen(
        [*argv, "--", *init, "--measure", "/dev/shm", "--", sys.executable, "-c", script],
        pass_fds=(go_r, st_w),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    os.close(go_r)
    os.close(st_w)
    os.write(go_w, b"x")
    os.close(go_w)
    proc.communicate(timeout=60)
    status = json.loads(os.read(st_r, 65536).splitlines()[0])
    os.close(st_r)
    shm = status["measured"]["/dev/shm"]
    assert shm["entries"] == 4 and shm["bytes"] >= 300000 + 2 * 4096, status
    # dd (reaped by the agent, a shell's child) is not init's to see; the agent is
    assert status["signals"] == {"SIGXFSZ": 1} and status["exit_code"] == 128 + signal.SIGXFSZ, status


RESERVE_SCRIPT = """
import ctypes, os, sys, time
from pathlib import Path
from pytest_agentdrift.run.watch import RESERVE, InotifyUnavailable, WriteWatcher, reserve_instances

root = Path(sys.argv[1])
work = root / "box" / "work"
work.mkdir(parents=True)
assert reserve_instances() is None
libc = ctypes.CDLL(None, use_errno=True)
taken = []  # a sibling of the same user takes every instance left
while libc.inotify_init1(0o2000000) >= 0:
    taken.append(1)
print("sibling took", len(taken))
for run in range(3):  # each run takes the reserved instance and gives it back
    w = WriteWatcher(root, work).start()
    w.mark_start()
    (work / f"f{run}").write_text("x")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(e["path"] == f"f{run}" for e in w.events):
        time.sleep(0.02)
    w.stop()
    print("run", run, sorted({e["path"] for e in w.events}))
RESERVE._free.clear()  # without a reserve, the next watcher finds none left
try:
    WriteWatcher(root, work).start()
    print("unreserved: started")
except InotifyUnavailable as exc:
    print("unreserved:", exc)
"""


@pytest.mark.skipif(not shutil.which("unshare"), reason="unshare (util-linux) is not installed")
def test_a_reserved_instance_outlasts_a_sibling_that_takes_every_other_one(tmp_path):
    # in a user namespace of its own with a limit of 8 instances, so that the machine's are untouched
    shell = 'echo 8 > /proc/sys/user/max_inotify_instances && exec "$@"'
    argv = ["unshare", "--user", "--map-root-user", "sh", "-c", shell, "sh", sys.executable, "-c", RESERVE_SCRIPT]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([*argv, str(tmp_path / "run")], capture_output=True, text=True, env=env, timeout=120)
    if out.returncode != 0 and "max_inotify_instances" in out.stderr:
        pytest.skip(f"no user namespace with a limit of its own here: {out.stderr.strip()}")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    # the other four are the reserve's (the watcher's, the canary's, the two grading sandboxes')
    assert lines[0] == "sibling took 4", lines
    assert lines[1:4] == ["run 0 ['f0']", "run 1 ['f1']", "run 2 ['f2']"]  # no event of an earlier run
    assert lines[4] == "unreserved: [Errno 24] inotify_init1: Too many open files", lines
