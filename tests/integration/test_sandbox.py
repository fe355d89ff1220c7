"""The sandbox: bounded output, time limits that end the whole process tree,
escaped children killed by token, and what bubblewrap actually denies."""

import os
import secrets
import shutil
import socket
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.run import sandbox
from pytest_agentdrift.run.sandbox import BoundedBuffer, detect, kill_tagged

HAVE_BWRAP = shutil.which("bwrap") is not None
needs_bwrap = pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap (bwrap) is not installed on this machine")
NONE = sandbox.detect("none")


def alive(pid: int) -> bool:
    """A process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def wait_dead(pid: int, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.02)
    return not alive(pid)


def script(tmp_path: Path, body: str, name: str = "prog.py") -> list[str]:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return [sys.executable, str(p)]


def env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


def run(argv, tmp_path, isolation=NONE, **kw):
    kw.setdefault("timeout_s", 20)
    kw.setdefault("writable", [tmp_path])
    return sandbox.run(argv, cwd=tmp_path, env=env(), isolation=isolation, token=secrets.token_hex(16), **kw)


# ---- BoundedBuffer -------------------------------------------------------------------


def test_buffer_under_the_limit_keeps_everything():
    buf = BoundedBuffer(80)
    for i in range(8):
        buf.feed(bytes([65 + i]) * 10)  # exactly 80 bytes
    assert buf.total == 80
    assert buf.truncated is False
    assert buf.value() == b"A" * 10 + b"B" * 10 + b"C" * 10 + b"D" * 10 + b"E" * 10 + b"F" * 10 + b"G" * 10 + b"H" * 10


def test_buffer_keeps_head_and_tail_with_a_mark():
    buf = BoundedBuffer(80)  # 70 bytes of head, 10 of tail
    data = bytes(range(200))
    for i in range(0, 200, 7):
        buf.feed(data[i : i + 7])
    assert buf.total == 200
    assert buf.truncated is True
    assert buf.value() == data[:70] + b"\n[agentdrift: output truncated, 120 bytes dropped of 200]\n" + data[190:]


def test_buffer_one_huge_chunk():
    buf = BoundedBuffer(16)  # head 14, tail 2
    buf.feed(b"h" * 14 + b"m" * 1000 + b"TT")
    assert buf.value() == b"h" * 14 + b"\n[agentdrift: output truncated, 1000 bytes dropped of 1016]\n" + b"TT"


def test_buffer_empty():
    buf = BoundedBuffer(1024)
    assert (buf.value(), buf.total, buf.truncated) == (b"", 0, False)


# ---- detect --------------------------------------------------------------------------


def facets(iso: sandbox.Isolation) -> tuple[str, str, str, bool, bool]:
    """What the isolation enforces: its mode, network, file system, pid namespace, dropped capabilities."""
    return (iso.mode, iso.network, iso.filesystem, iso.pid_namespace, iso.cap_drop)


def test_detect_none_says_unisolated():
    iso = detect("none")
    assert facets(iso) == ("none", "not_enforced", "not_enforced", False, False)
    assert iso.notes == (
        "UNISOLATED: the agent ran with the host's network and file system; effects are only detected",
    )
    d = iso.to_dict("none")
    assert (d["requested"], d["enforced"]) == ("none", "none")


def test_detect_unshare():
    if not shutil.which("unshare") or not sandbox._probe(sandbox._unshare_prefix() + ["true"]):
        with pytest.raises(
            AgentDriftError, match="--agent-isolation unshare: unshare cannot create a network namespace here"
        ):
            detect("unshare")
        pytest.skip("this kernel does not let unshare create a network namespace")
    iso = detect("unshare")
    assert facets(iso) == ("unshare", "denied", "not_enforced", False, False)
    assert "file system not isolated: writes outside the work tree are only detected" in iso.notes
    ro = sandbox.readonly_problem()
    assert iso.notes[-1] == (
        "the task directories, the records and the project are read-only for the agent"
        if ro is None
        else f"the task directories are writable by the agent (a change to one is only detected): {ro}"
    )


def test_unshare_binds_what_it_protects_read_only_for_good(tmp_path):
    """The command can neither write a protected directory nor undo the bind (unmount, remount
    read-write, a mount namespace of its own); it writes elsewhere as before."""
    if not shutil.which("unshare") or sandbox.readonly_problem() is not None:
        pytest.skip(f"no read-only binds under unshare here: {sandbox.readonly_problem()}")
    task, work = tmp_path / "task", tmp_path / "work"
    task.mkdir()
    work.mkdir()
    attack = (
        f"umount {task}; mount -o remount,rw,bind {task}; unshare -m sh -c 'umount {task}; touch {task}/a'; "
        f"touch {task}/b; touch {work}/ok"
    )
    iso = detect("unshare")
    res = sandbox.run(
        ["sh", "-c", attack],
        cwd=work,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        isolation=iso,
        writable=[work],
        timeout_s=60,
        token="t" * 32,
        readonly=sandbox.protected_dirs([task], work),
    )
    assert list(task.iterdir()) == [], res.stderr
    assert (work / "ok").exists()
    assert b"Read-only file system" in res.stderr
    assert sandbox.protected_dirs([tmp_path], work) == []  # never a directory the command must write in


@needs_bwrap
def test_detect_bwrap():
    iso = detect("bwrap")
    assert (iso.mode, iso.network, iso.filesystem, iso.pid_namespace) == ("bwrap", "denied", "isolated", True)
    assert iso.cap_drop is (os.geteuid() == 0)
    assert detect("auto") == iso


# ---- run(), unisolated ---------------------------------------------------------------


def test_exit_code_and_output(tmp_path):
    res = run(
        script(
            tmp_path,
            """
        import sys
        print("to out")
        print("to err", file=sys.stderr)
        sys.exit(3)
    """,
        ),
        tmp_path,
    )
    assert res.exit_code == 3
    assert res.timed_out is False
    assert res.launch_error is None
    assert res.stdout == b"to out\n"
    assert res.stderr == b"to err\n"
    assert (res.stdout_bytes, res.stderr_bytes, res.stdout_truncated, res.stderr_truncated) == (7, 7, False, False)
    assert res.leftover_processes == 0


def test_token_is_in_the_environment(tmp_path):
    token = secrets.token_hex(16)
    res = sandbox.run(
        [sys.executable, "-c", "import os; print(os.environ['AGENTDRIFT_RUN_TOKEN'])"],
        cwd=tmp_path,
        env=env(),
        isolation=NONE,
        writable=[tmp_path],
        timeout_s=20,
        token=token,
    )
    assert res.stdout == token.encode() + b"\n"


def test_signal_death_has_negative_exit_code(tmp_path):
    res = run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], tmp_path)
    assert res.exit_code == -9
    assert res.timed_out is False


def test_timeout_kills_the_whole_process_group(tmp_path):
    pidfile = tmp_path / "child.pid"
    argv = script(
        tmp_path,
        f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time\\nwhile True: time.sleep(0.05)"])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        print("started", flush=True)
        while True:
            time.sleep(0.05)
    """,
    )
    start = time.monotonic()
    res = run(argv, tmp_path, timeout_s=1.0)
    assert time.monotonic() - start < 6
    assert res.timed_out is True
    assert res.exit_code is not None and res.exit_code < 0
    assert res.stdout == b"started\n"
    assert 1.0 <= res.duration_s < 4
    child = int(pidfile.read_text())
    assert wait_dead(child), f"child {child} of a timed-out agent is still running"


def test_timeout_ignoring_sigterm_gets_sigkill(tmp_path):
    argv = script(
        tmp_path,
        """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ignoring", flush=True)
        while True:
            time.sleep(0.05)
    """,
    )
    res = run(argv, tmp_path, timeout_s=0.5)
    assert res.timed_out is True
    assert res.exit_code == -9


def test_setsid_escaped_child_is_killed_by_token(tmp_path):
    pidfile, beat = tmp_path / "child.pid", tmp_path / "beat.txt"
    argv = script(
        tmp_path,
        f"""
        import subprocess, sys
        code = "import time\\nwhile True:\\n    open({str(beat)!r}, 'a').write('x')\\n    time.sleep(0.02)"
        child = subprocess.Popen([sys.executable, "-c", code], start_new_session=True,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        open({str(pidfile)!r}, "w").write(str(child.pid))
        while not __import__("os").path.exists({str(beat)!r}):
            __import__("time").sleep(0.01)
    """,
    )
    res = run(argv, tmp_path)
    assert res.exit_code == 0
    assert res.timed_out is False
    child = int(pidfile.read_text())
    assert res.leftover_processes == 1
    assert wait_dead(child), f"escaped child {child} survived the run"
    size = beat.stat().st_size
    time.sleep(0.2)
    assert beat.stat().st_size == size  # nothing writes any more


def test_kill_tagged_only_touches_its_own_token(tmp_path):
    mine, other = secrets.token_hex(8), secrets.token_hex(8)
    import subprocess

    procs = [
        subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(30)"], env={**env(), "AGENTDRIFT_RUN_TOKEN": tok}
        )
        for tok in (mine, other)
    ]
    try:
        time.sleep(0.2)  # let the environ be readable
        assert kill_tagged(mine) == 1
        assert procs[0].wait(timeout=5) == -9
        assert procs[1].poll() is None
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_output_flood_is_bounded(tmp_path):
    argv = [
        sys.executable,
        "-c",
        "import sys\nfor _ in range(160): sys.stdout.buffer.write(b'x' * 65536)\nsys.stdout.buffer.write(b'END')",
    ]
    res = run(argv, tmp_path, output_limit=64 << 10)
    total = 160 * 65536 + 3
    assert res.exit_code == 0
    assert res.stdout_bytes == total
    assert res.stdout_truncated is True
    mark = f"\n[agentdrift: output truncated, {total - 65536} bytes dropped of {total}]\n".encode()
    assert res.stdout == b"x" * (65536 - 8192) + mark + b"x" * (8192 - 3) + b"END"
    assert res.stderr == b"" and res.stderr_truncated is False


def test_missing_binary_is_a_launch_error_not_an_exception(tmp_path):
    res = run(["/nonexistent/agent-binary", "--flag"], tmp_path)
    assert res.exit_code is None
    assert res.timed_out is False
    assert res.launch_error == "cannot start '/nonexistent/agent-binary': No such file or directory"
    assert (res.stdout, res.stderr, res.leftover_processes) == (b"", b"", 0)


# ---- run() under bubblewrap ----------------------------------------------------------


@pytest.fixture
def bwrap():
    if not HAVE_BWRAP:
        pytest.skip("bubblewrap (bwrap) is not installed on this machine")
    return detect("bwrap")


def test_bwrap_exit_code_and_output(tmp_path, bwrap):
    res = run([sys.executable, "-c", "import sys; print('in'); sys.exit(5)"], tmp_path, isolation=bwrap)
    assert (res.exit_code, res.stdout, res.timed_out) == (5, b"in\n", False)
    assert res.argv[0] == "bwrap"


def test_bwrap_denies_the_network(tmp_path, bwrap):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        argv = script(
            tmp_path,
            f"""
            import socket, sys
            s = socket.socket()
            s.settimeout(3)
            try:
                s.connect(("127.0.0.1", {port}))
            except OSError as exc:
                print("blocked", type(exc).__name__)
                sys.exit(7)
            print("connected")
        """,
        )
        res = run(argv, tmp_path, isolation=bwrap)
        assert res.exit_code == 7, res.stdout + res.stderr
        assert res.stdout.startswith(b"blocked ")
        with pytest.raises(socket.timeout):
            listener.accept()
    finally:
        listener.close()
    # the same program, unisolated, does reach the listener: the test can tell
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    listener.settimeout(5)
    try:
        port2 = listener.getsockname()[1]
        res = run(
            [
                sys.executable,
                "-c",
                f"import socket; socket.create_connection(('127.0.0.1', {port2}), 3); print('connected')",
            ],
            tmp_path,
        )
        assert res.stdout == b"connected\n"
        listener.accept()[0].close()
    finally:
        listener.close()


def test_bwrap_only_writable_dirs_are_writable(tmp_path, bwrap):
    work, other = tmp_path / "work", tmp_path / "other"
    work.mkdir()
    other.mkdir()
    argv = script(
        work,
        f"""
        import sys
        results = []
        for target in ({str(work / "ok.txt")!r}, {str(other / "evil.txt")!r}, "/usr/evil.txt", {str(Path.home() / "evil.txt")!r}):
            try:
                open(target, "w").write("x")
                results.append("wrote")
            except OSError as exc:
                results.append(type(exc).__name__)
        print(" ".join(results))
    """,
    )
    res = sandbox.run(
        argv, cwd=work, env=env(), isolation=bwrap, writable=[work], timeout_s=20, token=secrets.token_hex(16)
    )
    assert res.exit_code == 0, res.stderr
    # `other` is not mounted at all (allow-list); /usr and the (empty) home are read-only
    assert res.stdout == b"wrote FileNotFoundError OSError OSError\n"
    assert (work / "ok.txt").read_text() == "x"
    assert not (other / "evil.txt").exists()
    assert not (Path.home() / "evil.txt").exists()


def test_bwrap_the_real_home_is_not_mounted(tmp_path, bwrap):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE-KEY-MATERIAL\n")
    (home / ".gitconfig").write_text("[user]\n\tname = SECRET-GITCONFIG\n")
    (home / "plain.txt").write_text("not needed either\n")
    work = tmp_path / "work"
    work.mkdir()
    argv = script(
        work,
        f"""
        import os
        home = {str(home)!r}
        for rel in (".ssh", ".gitconfig", "plain.txt"):
            try:
                p = os.path.join(home, rel)
                print(os.listdir(p) if os.path.isdir(p) else open(p).read())
            except OSError as exc:
                print(type(exc).__name__)
    """,
    )
    res = sandbox.run(
        argv,
        cwd=work,
        env=env(),
        isolation=bwrap,
        writable=[work],
        masked_home=home,
        timeout_s=20,
        token=secrets.token_hex(16),
    )
    assert res.exit_code == 0, res.stderr
    assert res.stdout.decode().splitlines() == ["FileNotFoundError"] * 3
    assert b"SECRET" not in res.stdout + res.stderr and b"PRIVATE" not in res.stdout + res.stderr
    assert (home / ".ssh" / "id_rsa").read_text() == "PRIVATE-KEY-MATERIAL\n"  # the host's copy is untouched


def test_bwrap_hidden_dirs_do_not_exist_and_are_not_named(tmp_path, bwrap):
    shown = tmp_path / "shown"
    hidden = shown / "others"
    hidden.mkdir(parents=True)
    (hidden / "other-run.txt").write_text("another run's files\n")
    (shown / "fine.txt").write_text("fine\n")
    work = tmp_path / "work"
    work.mkdir()
    code = (
        f"import os; print(sorted(os.listdir({str(shown)!r}))); print(os.path.exists({str(hidden)!r})); "
        "print(open('/proc/self/mountinfo').read())"
    )
    res = sandbox.run(
        [sys.executable, "-c", code],
        cwd=work,
        env=env(),
        isolation=bwrap,
        writable=[work],
        readable=[shown],
        hidden_dirs=[hidden],
        timeout_s=20,
        token=secrets.token_hex(16),
    )
    assert res.exit_code == 0, res.stderr
    listing, exists, mountinfo = res.stdout.decode().split("\n", 2)
    assert (listing, exists) == ("['fine.txt']", "False")
    assert str(hidden) not in mountinfo
    assert f"dir {shown}" in res.plan.to_record()["mounts"] and str(hidden) in res.plan.excluded


def test_bwrap_cannot_remount_root_read_write(tmp_path, bwrap):
    if os.geteuid() != 0:
        pytest.skip("--cap-drop ALL is only added when running as root")
    if not shutil.which("mount"):
        pytest.skip("mount(8) is not installed")
    probe = "/etc/agentdrift-remount-probe"
    assert not os.path.exists(probe)
    try:
        res = run(["mount", "-o", "remount,rw", "/"], tmp_path, isolation=bwrap)
        assert res.exit_code != 0, res.stdout + res.stderr
        # the variant that does work for a root process holding CAP_SYS_ADMIN inside bwrap
        res = run(["sh", "-c", f"mount -o remount,bind,rw / && touch {probe}"], tmp_path, isolation=bwrap)
        assert res.exit_code != 0, res.stdout + res.stderr
        assert b"permission denied" in res.stderr
        assert not os.path.exists(probe)
        assert "--cap-drop" in res.argv and res.argv[res.argv.index("--cap-drop") + 1] == "ALL"
        caps = run(["grep", "^CapEff:", "/proc/self/status"], tmp_path, isolation=bwrap)
        assert caps.stdout == b"CapEff:\t0000000000000000\n"
        write = run([sys.executable, "-c", f"open({probe!r}, 'w')"], tmp_path, isolation=bwrap)
        assert write.exit_code == 1 and b"Read-only file system" in write.stderr
        assert not os.path.exists(probe)
    finally:
        if os.path.exists(probe):
            os.unlink(probe)


def test_bwrap_escaped_child_dies_with_the_sandbox(tmp_path, bwrap):
    beat = tmp_path / "beat.txt"
    argv = script(
        tmp_path,
        f"""
        import os, subprocess, sys, time
        code = "import time\\nwhile True:\\n    open({str(beat)!r}, 'a').write('x')\\n    time.sleep(0.02)"
        subprocess.Popen([sys.executable, "-c", code], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not os.path.exists({str(beat)!r}):
            time.sleep(0.01)
    """,
    )
    res = run(argv, tmp_path, isolation=bwrap)
    assert res.exit_code == 0, res.stderr
    time.sleep(0.1)
    size = beat.stat().st_size
    time.sleep(0.3)
    assert beat.stat().st_size == size


def test_bwrap_timeout_kills_the_tree(tmp_path, bwrap):
    beat = tmp_path / "beat.txt"
    argv = script(
        tmp_path,
        f"""
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time\\nwhile True:\\n    open({str(beat)!r}, 'a').write('x')\\n    time.sleep(0.02)"])
        while True:
            time.sleep(0.05)
    """,
    )
    res = run(argv, tmp_path, isolation=bwrap, timeout_s=1.0)
    assert res.timed_out is True
    time.sleep(0.1)
    size = beat.stat().st_size
    time.sleep(0.3)
    assert beat.stat().st_size == size
