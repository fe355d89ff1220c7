"""The first process of a guarded agent run. Standard library only: it is run as a script.

    python -I -S sandboxinit.py --go-fd G [--status-fd S] [--measure PATH]... -- AGENT ARGV...

It blocks until the harness writes one byte to G: by then the harness has
put it into the run's cgroups, set its rlimits and bound the network
observer in its namespace, so nothing the agent starts escapes them.

Under bubblewrap it runs as PID 1 of the sandbox's PID namespace
(`--as-pid-1`). There it forks the agent and reaps every orphan; when the
agent exits it counts the processes still alive in the namespace (they
outlived the agent), measures each `--measure` file system (the sandbox's
own tmpfs mounts, gone with the namespace: bytes and entries the run left
there), counts the processes it reaped that the file-size limit killed
(SIGXFSZ), writes `{"exit_code", "survivors", "programs", "measured",
"signals"}` (one JSON line) to S and exits, which makes the kernel kill every one of them. The agent cannot
stop this: signals sent to a namespace's init from inside it are dropped
unless init handles them (it handles none), and the process is not
dumpable, so it cannot be traced and its file descriptors cannot be
opened through /proc. Outside a PID namespace it simply becomes the agent
(exec) and the harness counts survivors itself. In both cases a command
that cannot be started is reported on S as `{"launch_error": ...}`; S is
close-on-exec, so the agent never holds it.

The grading sandbox's resident server (grade/gradehook/forkserver.py) reaps
the same way, so it imports its prctl and reaping helpers from here: run as a
script this file imports nothing beyond the standard library (it cannot:
`-I -S`), imported as a module it is a plain one.
"""

import json
import os
import signal
import sys

# what a process ended with, and which limits stopped it, are read here for the agent and for every graded process
EVALUATOR_COMPONENT = "sandbox_init"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)


def _parse(argv):
    go_fd = status_fd = None
    measure = []
    i = 0
    while i < len(argv) and argv[i] != "--":
        if argv[i] == "--go-fd":
            go_fd = int(argv[i + 1])
        elif argv[i] == "--status-fd":
            status_fd = int(argv[i + 1])
        elif argv[i] == "--measure":
            measure.append(argv[i + 1])
        else:
            raise SystemExit(f"agentdrift-init: unknown option {argv[i]!r}")
        i += 2
    cmd = argv[i + 1 :]
    if go_fd is None or not cmd:
        raise SystemExit("agentdrift-init: usage: --go-fd G [--status-fd S] [--measure PATH]... -- ARGV")
    return go_fd, status_fd, measure, cmd


#: prctl(2) options (linux/prctl.h)
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


def prctl(option, value):
    """prctl(2) through libc: True when it took effect."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _report(status_fd, doc):
    if status_fd is not None:
        try:
            os.write(status_fd, json.dumps(doc).encode() + b"\n")
        except OSError:
            pass


def _exec(cmd, status_fd):
    """Become the agent; the status fd closes on success and carries the reason on failure."""
    # what Python's own subprocess restores for a child (it ignores these itself)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    if status_fd is not None:
        os.set_inheritable(status_fd, False)
    try:
        os.execvp(cmd[0], cmd)
    except OSError as exc:
        msg = f"cannot start {cmd[0]!r}: {exc.strerror or exc}"
        _report(status_fd, {"launch_error": msg})
        sys.stderr.write(f"agentdrift-init: {msg}\n")
        sys.stderr.flush()
        os._exit(127)


def _survivors():
    """Processes of this namespace other than us, zombies not counted, by program."""
    programs = {}
    n = 0
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == "1":
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                line = fh.read()
        except OSError:
            continue
        comm = line[line.find(b"(") + 1 : line.rfind(b")")].decode("utf-8", "replace")
        state = line[line.rfind(b")") + 2 : line.rfind(b")") + 3]
        if state == b"Z":
            continue
        n += 1
        programs[comm] = programs.get(comm, 0) + 1
    top = dict(sorted(programs.items(), key=lambda kv: (-kv[1], kv[0]))[:10])
    return n, top


def _measure(paths):
    """Bytes and entries (used inodes but the root) of each file system, as the run left them."""
    out = {}
    for path in paths:
        try:
            st = os.statvfs(path)
        except OSError:
            continue
        out[path] = {
            "bytes": (st.f_blocks - st.f_bfree) * st.f_frsize,
            "entries": max(0, st.f_files - st.f_ffree - 1),
        }
    return out


def count_reaped(st, signals):
    """Count a reaped process the file-size limit killed (RLIMIT_FSIZE's SIGXFSZ)."""
    if os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGXFSZ:
        signals["SIGXFSZ"] = signals.get("SIGXFSZ", 0) + 1


def wait_reaping(pid, signals):
    """The wait status of child `pid` (0 when there is no child left to wait for), reaping and
    counting every other child that ends before it."""
    while True:
        try:
            got, st = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        count_reaped(st, signals)
        if got == pid:
            return st


def reap_ended(signals, flags=0):
    """Reap and count children until none is left; with os.WNOHANG only those already ended."""
    while True:
        try:
            pid, st = os.waitpid(-1, flags)
        except ChildProcessError:
            return
        if pid == 0:
            return  # WNOHANG: the others are still running
        count_reaped(st, signals)


def exit_code(status):
    """A wait status as a shell reports it: the exit code, or 128 + the signal that ended the process."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def main(argv):
    go_fd, status_fd, measure, cmd = _parse(argv)
    prctl(PR_SET_DUMPABLE, 0)
    if os.read(go_fd, 1) != b"x":
        os._exit(125)  # the harness gave up before the agent started
    os.close(go_fd)
    if os.getpid() != 1:
        _exec(cmd, status_fd)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)  # no handler: from inside the namespace they never arrive
    agent = os.fork()
    if agent == 0:
        try:
            with open("/proc/self/oom_score_adj", "w") as fh:
                fh.write("0")  # the harness shielded init from the OOM killer, not the agent
        except OSError:
            pass
        _exec(cmd, status_fd)
    signals = {}
    status = wait_reaping(agent, signals)
    reap_ended(signals, os.WNOHANG)  # orphans that already died are not survivors
    code = exit_code(status)
    n, programs = _survivors()
    doc = {"exit_code": code, "survivors": n, "programs": programs, "measured": _measure(measure), "signals": signals}
    _report(status_fd, doc)
    os._exit(code & 0xFF)


if __name__ == "__main__":
    main(sys.argv[1:])
