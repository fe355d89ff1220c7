"""The grading sandbox's resident process: one fork per graded process. It imports the standard
library and the sandbox init's reaping helpers (run/sandboxinit.py, itself standard library only).

launch.py, started as `python -P launch.py --serve CTL_FD` inside the grading
sandbox (bubblewrap, under the run's limits), imports pytest and everything
it imports late, then calls `serve`. For each request the harness sends on
CTL_FD (a SOCK_SEQPACKET socket: one JSON request with the request's stdout,
stderr and result-channel fds) it forks; the child closes the control
socket, takes the request's environment, working directory, argv and fds,
and becomes the graded process: `serve` returns in it for a pytest run
(launch.py goes on exactly as a fresh launch would) or the child runs
gradehook/run_python.py. The server waits for it, kills every other process
of the sandbox (kill(-1) inside the sandbox's PID namespace: whatever graded
code left running dies before the next request), reaps them, empties the
sandbox's tmpfs mounts and answers with the exit status. It never runs
graded code itself, so each graded process starts from the same clean
interpreter a fresh launch would, without paying for its start-up.

Why graded code cannot reach the next request through the server: the
server is not dumpable (no ptrace, no /proc/PID/mem, and the sandbox has no
capabilities); the control socket is closed in every child before graded
code runs; the server reads nothing graded code can write; a request that
leaves anything behind it cannot remove answers `clean: false`, and anything
that stops or kills the server ends the sandbox. The harness replaces the
sandbox in both cases (grade/gradeserver.py).
"""

import json
import os
import signal
import socket
import sys

# the init's own reaping (this server is its child in the same sandbox); launch.py has the package on its path
from pytest_agentdrift.run.sandboxinit import (
    PR_SET_CHILD_SUBREAPER,
    PR_SET_DUMPABLE,
    exit_code,
    prctl,
    reap_ended,
    wait_reaping,
)

EVALUATOR_COMPONENT = "grade_server"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

READY = b"ready"
#: rounds of kill(-1) + reap after a request before the sandbox is declared unclean
SWEEP_ROUNDS = 50


def _in_own_pid_namespace():
    """kill(-1) ends only the sandbox's processes when the sandbox has a PID namespace whose init is the
    harness's (run/sandboxinit.py, our parent as PID 1): never serve anywhere else."""
    if os.getppid() != 1:
        return False
    try:
        with open("/proc/1/cmdline", "rb") as fh:
            args = fh.read().split(b"\0")
    except OSError:
        return False
    return any(os.path.basename(a) == b"sandboxinit.py" for a in args[:4])


def serve(ctl_fd):
    """Answer requests until the harness closes the socket; returns only in a forked child that
    is to run pytest (launch.py continues it). Any other request kind is run here, in the child."""
    if not _in_own_pid_namespace():
        raise SystemExit("agentdrift forkserver: not inside a PID namespace of its own; refusing to serve")
    prctl(PR_SET_DUMPABLE, 0)  # graded code cannot trace the server or read its memory
    prctl(PR_SET_CHILD_SUBREAPER, 1)  # what graded code orphans is ours to reap and count
    sock = socket.socket(fileno=ctl_fd)
    sock.send(READY)
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 16)
        except OSError:
            os._exit(0)
        if not msg:
            os._exit(0)  # the harness is done with this sandbox
        request = json.loads(msg)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            sock.close()  # graded code never holds the control socket
            _become(request, fds)
            if request["kind"] == "pytest":
                return
            _run_python(request)
        for fd in fds:
            os.close(fd)
        reply = _reap(pid)
        # what the request left in the tmpfs mounts, measured before they are emptied: a full one is a hit
        reply["measured"] = _used(request.get("wipe", []))
        reply["clean"] = reply["clean"] and _empty(request.get("wipe", [])) and _no_sysv_ipc()
        sock.send(json.dumps(reply).encode())


def _become(request, fds):
    """This child as a fresh launch of the request would be: its stdio, environment, directory, argv."""
    prctl(PR_SET_DUMPABLE, 1)  # dumpable again, as any freshly started process is
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    for fd in fds[:2]:
        os.close(fd)
    env = dict(request["env"])
    if request.get("channel_env"):
        env[request["channel_env"]] = f"{fds[2]},{fds[3]}"
    os.environ.clear()
    os.environ.update(env)
    os.chdir(request["cwd"])
    sys.argv = list(request["argv"])
    if "tempfile" in sys.modules:
        sys.modules["tempfile"].tempdir = None  # TMPDIR is the request's, not the server's


def _run_python(request):
    """gradehook/run_python.py, as `python -P run_python.py ARGS` would run it: it ends the process
    with the command's status (SystemExit), and any error of its own ends it as Python would."""
    import runpy

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_python.py")
    sys.argv = [script, *request["argv"][1:]]
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        finish(exc.code)
    finish(None)  # never the next request's loop in this child


def finish(status):
    """End a forked child as a fresh launch ends with SystemExit(status), without tearing down
    its copy of the server's interpreter (that touches every page the fork shares: about 60 ms
    a request). What Python's exit does that a program can see is done: the status's message
    printed, non-daemon threads joined, atexit callbacks run (logging, weakref finalizers and
    multiprocessing among them), and every open file object flushed as its finalizer would."""
    if status is None:
        code = 0
    elif isinstance(status, int):
        code = status
    else:
        code = 1
        try:
            print(status, file=sys.stderr)
        except Exception:  # noqa: BLE001 - Python ignores a failing stderr here too
            pass
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()
    import atexit

    atexit._run_exitfuncs()
    _flush_open_files()
    os._exit(code & 0xFF)


def _flush_open_files():
    import gc
    import io

    streams = [sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__]
    # objects made after the server's gc.freeze(): what the graded process opened (the frozen
    # ones are the server's own and were flushed before the fork)
    streams += [o for o in gc.get_objects() if isinstance(o, (io.TextIOBase, io.BufferedIOBase))]
    for stream in streams:
        try:
            if stream is not None and not stream.closed and stream.writable():
                stream.flush()
        except Exception:  # noqa: BLE001 - a stream that cannot flush loses its data as at exit
            pass


def _reap(pid):
    """Wait for the request's process, then end and reap everything else in the sandbox but init and us."""
    signals = {}
    status = wait_reaping(pid, signals)
    clean = False
    for _ in range(SWEEP_ROUNDS):
        try:
            os.kill(-1, signal.SIGKILL)  # in a PID namespace: every process but init and the caller
        except ProcessLookupError:
            clean = True
            break
        reap_ended(signals)
    return {"exit_code": exit_code(status), "signals": signals, "clean": clean}


#: /proc/sysvipc/<kind> -> how an object of that kind is removed (libc call, its arguments after the id)
_SYSV_IPC = {"shm": ("shmctl", (0, None)), "msg": ("msgctl", (0, None)), "sem": ("semctl", (0, 0))}  # IPC_RMID = 0


def _sysv_ids(kind):
    with open(f"/proc/sysvipc/{kind}") as fh:
        return [int(line.split()[1]) for line in fh.read().splitlines()[1:] if line.strip()]


def _no_sysv_ipc():
    """Remove what the request left in the sandbox's System V IPC namespace (shared memory, message
    queues, semaphores): the namespace outlives the request's processes. False when something stays."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    try:
        for kind, (call, rest) in _SYSV_IPC.items():
            for ipc_id in _sysv_ids(kind):
                getattr(libc, call)(ipc_id, *rest)
        return not any(_sysv_ids(kind) for kind in _SYSV_IPC)
    except (OSError, ValueError, IndexError):
        return False


def _used(mounts):
    """Bytes in use on each mount (those that cannot be read are left out)."""
    used = {}
    for mount in mounts:
        try:
            st = os.statvfs(mount)
        except OSError:
            continue
        used[mount] = (st.f_blocks - st.f_bfree) * st.f_frsize
    return used


def _empty(mounts):
    """Remove what the request left in the sandbox's own tmpfs mounts; False when something stays."""
    for mount in mounts:
        try:
            if not _clear(mount, os.lstat(mount).st_dev):
                return False
        except (OSError, RecursionError):
            return False
    return True


def _clear(directory, device):
    """Remove everything in directory that lives on its file system (device), depth first. A
    mount of another file system inside it is the sandbox's own making (a harness directory under
    a TMPDIR in /dev/shm is bound onto the sandbox's /dev/shm): never entered, and the directories
    that lead to it stay, emptied of everything else. Graded code cannot mount (bubblewrap drops
    every capability), so no request makes such a mount. True when nothing of the request stays."""
    import errno

    for entry in list(os.scandir(directory)):
        if entry.stat(follow_symlinks=False).st_dev != device:
            continue
        if not entry.is_dir(follow_symlinks=False):
            os.unlink(entry.path)
            continue
        if not _clear(entry.path, device):
            return False
        try:
            os.rmdir(entry.path)
        except OSError as exc:  # left standing only when all it holds is the way to a mount
            if exc.errno not in (errno.ENOTEMPTY, errno.EBUSY):
                return False
    return True
