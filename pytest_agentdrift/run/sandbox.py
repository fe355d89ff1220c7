"""Running an untrusted command: isolation, time limit, bounded output.

Isolation, strongest first:
* ``bwrap`` (bubblewrap): an allow-list of the file system (mountplan.py: the
  system, the Python runtime, what the caller names, read-only; the run's own
  directory writable; nothing else exists), no network, a PID namespace (a
  child that escaped with setsid dies with the sandbox), ``--cap-drop ALL``
  when we are root (a root process inside could otherwise remount read-write).
* ``unshare``: a private network namespace; nothing of the file system
  is hidden, which the run records (`mountplan.not_hidden`). Where a mount
  namespace can be made too, the directories the caller names `readonly` (the
  task directories, the records, the project) are bound read-only in it and the
  command runs in a user namespace nested below, which cannot undo those mounts
  (the kernel locks mounts a less privileged namespace inherits).
* ``none``: unisolated, recorded and shown plainly in the report.

Whatever the mode, every process carries a per-run token in its environment,
and after the run any process still carrying it is killed and counted.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from pytest_agentdrift.shapes import IsolationRecord
from pytest_agentdrift.vocabulary import ISOLATION_MODES  # noqa: F401  (re-exported: one list of modes)


@dataclass(frozen=True)
class Isolation:
    mode: str  # bwrap | unshare | none
    network: str  # denied | not_enforced
    filesystem: str  # isolated | not_enforced
    pid_namespace: bool
    cap_drop: bool
    notes: tuple[str, ...] = ()

    def to_dict(self, requested: str) -> IsolationRecord:
        return {
            "requested": requested,
            "enforced": self.mode,
            "network": self.network,
            "filesystem": self.filesystem,
            "pid_namespace": self.pid_namespace,
            "cap_drop": self.cap_drop,
            "network_observation": "python-audit-hook",
            "notes": list(self.notes),
        }


def _is_root() -> bool:
    return os.geteuid() == 0


if TYPE_CHECKING:
    from pytest_agentdrift.run.limits import RunCgroups
    from pytest_agentdrift.run.mountplan import MountPlan


class Monitor(Protocol):
    """What a run's monitor does while its command runs: it sees stdout as it arrives, and says why to stop."""

    def feed(self, chunk: bytes) -> None: ...

    def poll(self) -> str | None: ...


class Guard(Protocol):
    """What a command's guard does around it (run/runguard.RunGuard, which imports this module): wraps
    its command line, takes the started process, watches its limits and reports what it saw."""

    @property
    def pass_fds(self) -> tuple[int, ...]: ...
    @property
    def stop_requested(self) -> threading.Event: ...
    @property
    def cgroups(self) -> RunCgroups: ...
    @property
    def agent_exit_code(self) -> int | None: ...
    @property
    def launch_error(self) -> str | None: ...

    def wrap(self, full: list[str], argv: list[str], mode: str) -> list[str]: ...

    def started(self, proc: subprocess.Popen[bytes]) -> None: ...

    def poll(self) -> None: ...

    def on_timeout(self) -> None: ...

    def finished(self) -> None: ...

    def leftovers(self, timed_out: bool) -> int | None: ...


def _bwrap_argv(plan: MountPlan) -> list[str]:
    argv = ["bwrap", *plan.bwrap_args(), "--unshare-all", "--die-with-parent", "--new-session"]
    if _is_root():
        argv += ["--cap-drop", "ALL"]
    return argv


def default_plan(
    writable: Iterable[str | os.PathLike[str]] = (),
    readable: Iterable[str | os.PathLike[str]] = (),
    hidden: Iterable[str | os.PathLike[str]] = (),
) -> MountPlan:
    """The allow-list for a command the harness runs: the system, the harness's Python
    runtime, `readable` read-only, `writable`; `hidden` never shows inside any of them."""
    from pytest_agentdrift.run import harnessruntime, mountplan

    return mountplan.build(writable=writable, readable=[*harnessruntime.harness_runtime(), *readable], exclude=hidden)


def _probe(argv: list[str]) -> bool:
    try:
        r = subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def _unshare_prefix() -> list[str]:
    return ["unshare", "--net"] if _is_root() else ["unshare", "--net", "--map-root-user"]


#: binds each directory before `--` read-only onto itself, then runs the rest (a nested user namespace)
_READONLY_SCRIPT = (
    'while [ "$1" != -- ]; do mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" || exit 125; shift; done; '
    'shift; exec "$@"'
)


def _unshare_readonly(readonly: Sequence[Path]) -> list[str]:
    """The unshare prefix that makes `readonly` read-only for the command (ending in `--`)."""
    nested = (
        ["unshare", "--user", "--map-root-user"]
        if _is_root()
        else ["unshare", "--user", f"--map-user={os.getuid()}", f"--map-group={os.getgid()}"]
    )
    dirs = [os.fspath(d) for d in readonly]
    return [*_unshare_prefix(), "--mount", "--", "sh", "-c", _READONLY_SCRIPT, "sh", *dirs, "--", *nested, "--"]


@lru_cache(maxsize=None)
def readonly_problem() -> str | None:
    """Why directories cannot be made read-only under unshare here (None when they can): probed once,
    a write into a directory bound read-only must fail."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="agentdrift-ro-") as d:
        probe = [sys.executable, "-c", f"open({os.path.join(d, 'x')!r}, 'w')"]
        try:
            r = subprocess.run(_unshare_readonly([Path(d)]) + probe, capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"cannot run unshare: {exc}"
        if os.path.exists(os.path.join(d, "x")) or b"Read-only file system" not in r.stderr:
            why = r.stderr.decode("utf-8", "replace").strip()[-200:]
            return "a mount namespace with read-only binds cannot be made here" + (f": {why}" if why else "")
    return None


def _ro_note() -> str:
    problem = readonly_problem()
    if problem is None:
        return "the task directories, the records and the project are read-only for the agent"
    return f"the task directories are writable by the agent (a change to one is only detected): {problem}"


def protected_dirs(paths: Iterable[str | os.PathLike[str]], writable_root: Path) -> list[Path]:
    """Of `paths` (the task directories, the records, the project), the existing directories that
    may be bound read-only for an agent under unshare: none that holds `writable_root` (the runs'
    own directories), when that mode can do it here."""
    if readonly_problem() is not None:
        return []
    root = Path(writable_root).absolute()
    out = []
    for p in paths:
        p = Path(p).absolute()
        if p.is_dir() and not root.is_relative_to(p):
            out.append(p)
    return out


@lru_cache(maxsize=None)
def detect(requested: str = "auto") -> Isolation:
    """The strongest isolation that actually works here (probed, not assumed)."""
    notes: list[str] = []
    if requested in ("auto", "bwrap"):
        if shutil.which("bwrap") and _probe(_bwrap_argv(default_plan()) + ["true"]):
            return Isolation("bwrap", "denied", "isolated", True, _is_root())
        why = "bwrap not installed" if not shutil.which("bwrap") else "bwrap present but cannot create namespaces here"
        if requested == "bwrap":
            from pytest_agentdrift.errors import AgentDriftError

            raise AgentDriftError(f"--agent-isolation bwrap: {why}")
        notes.append(why)
    if requested in ("auto", "unshare"):
        if shutil.which("unshare") and _probe(_unshare_prefix() + ["true"]):
            return Isolation(
                "unshare",
                "denied",
                "not_enforced",
                False,
                False,
                tuple(notes + ["file system not isolated: writes outside the work tree are only detected", _ro_note()]),
            )
        why = "unshare cannot create a network namespace here"
        if requested == "unshare":
            from pytest_agentdrift.errors import AgentDriftError

            raise AgentDriftError(f"--agent-isolation unshare: {why}")
        notes.append(why)
    notes.append("UNISOLATED: the agent ran with the host's network and file system; effects are only detected")
    return Isolation("none", "not_enforced", "not_enforced", False, False, tuple(notes))


class BoundedBuffer:
    """Keeps the head and the tail of a stream, counting what it drops."""

    def __init__(self, limit: int):
        self.head_limit = max(0, limit - limit // 8)
        self.tail_limit = limit // 8
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self.tail_limit:
            self.tail += chunk
            if len(self.tail) > self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def value(self) -> bytes:
        if not self.truncated:
            return bytes(self.head + self.tail)
        dropped = self.total - len(self.head) - len(self.tail)
        mark = f"\n[agentdrift: output truncated, {dropped} bytes dropped of {self.total}]\n".encode()
        return bytes(self.head) + mark + bytes(self.tail)


def _pump(stream: IO[bytes], buf: BoundedBuffer) -> None:
    try:
        while True:
            chunk = stream.read1(1 << 16) if hasattr(stream, "read1") else stream.read(1 << 16)
            if not chunk:
                break
            buf.feed(chunk)
    except (OSError, ValueError):
        pass


@dataclass
class ProcessResult:
    exit_code: int | None
    timed_out: bool
    duration_s: float
    stdout: bytes
    stderr: bytes
    stdout_bytes: int
    stderr_bytes: int
    stdout_truncated: bool
    stderr_truncated: bool
    leftover_processes: int
    launch_error: str | None = None
    argv: list[str] = field(default_factory=list)
    plan: Any = None  # the mountplan.MountPlan the command ran under (bwrap only)
    stopped: str | None = None  # why a monitor stopped the run (a per-run budget), else None


@lru_cache(maxsize=1)
def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux PR_SET_CHILD_SUBREAPER).

    A child that escapes with setsid, double-forks and clears its environment
    leaves both the process group and the run token behind; as subreaper, the
    harness still becomes its parent and can end it. Without a PID namespace
    (unshare / none) this is the last line.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(36, 1, 0, 0, 0)) == 0  # PR_SET_CHILD_SUBREAPER; ctypes returns the C int untyped
    except (OSError, AttributeError):
        return False


def _proc(filename: str) -> Iterator[tuple[int, bytes]]:
    """(pid, bytes of /proc/PID/<filename>) for every process we may read."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/{filename}", "rb") as fh:
                    yield int(name), fh.read()
            except OSError:
                continue


def _stat_fields(stat_line: bytes) -> list[bytes]:
    # the command name is in parentheses and may itself hold spaces or ')'
    return stat_line[stat_line.rfind(b")") + 2 :].split()


def _children_by_parent() -> dict[int, list[int]]:
    """Every process's children, from one pass over /proc."""
    out: dict[int, list[int]] = {}
    for pid, line in _proc("stat"):
        if len(f := _stat_fields(line)) > 1:
            out.setdefault(int(f[1]), []).append(pid)
    return out


def _children(parent: int) -> list[int]:
    """parent's children from its threads' `children` files (a few small reads; a pass over all
    of /proc costs milliseconds per call on a busy host), or that pass where the kernel has none."""
    try:
        tids = os.listdir(f"/proc/{parent}/task")
    except FileNotFoundError:
        return []  # gone: no children
    except OSError:
        return _children_by_parent().get(parent, [])
    if not tids:
        return []
    if not os.path.exists(f"/proc/{parent}/task/{tids[0]}/children"):
        return _children_by_parent().get(parent, [])  # a kernel without CONFIG_PROC_CHILDREN
    kids: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{parent}/task/{tid}/children", "rb") as fh:
                kids.extend(int(x) for x in fh.read().split())
        except FileNotFoundError:
            continue  # that thread ended meanwhile
        except OSError:
            return _children_by_parent().get(parent, [])
    return kids


def descendants(pid: int) -> list[int]:
    """The whole subtree under pid."""
    out, stack = [], [pid]
    while stack:
        for child in _children(stack.pop()):
            out.append(child)
            stack.append(child)
    return out


def proc_stat(pid: int) -> list[bytes]:
    """The fields of /proc/PID/stat after the command name ([] when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return _stat_fields(fh.read())
    except OSError:
        return []


def _state(pid: int) -> str:
    f = proc_stat(pid)
    return f[0].decode() if f else "?"


def kill_orphans(known: set[int]) -> int:
    """Kill (and reap) adopted descendants that were not our children before the run."""
    killed = 0
    for _ in range(5):
        strays = [p for p in _children(os.getpid()) if p not in known]
        if not strays:
            break
        zombies = {p for p in strays if _state(p) == "Z"}
        tree = _children_by_parent()
        stack = list(strays)
        while stack:  # the whole subtree, so nothing is re-parented again mid-sweep
            pid = stack.pop()
            stack.extend(tree.get(pid, []))
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in strays:
            try:
                os.waitpid(pid, 0)
                killed += pid not in zombies  # one already dead (killed by token) is only reaped
            except ChildProcessError:
                pass
    return killed


def kill_tagged(token: str) -> int:
    """SIGKILL every process whose environment carries AGENTDRIFT_RUN_TOKEN=token."""
    needle = f"AGENTDRIFT_RUN_TOKEN={token}".encode()
    killed = 0
    me = os.getpid()
    for _ in range(3):  # a dying parent may still fork; sweep a few times
        found = 0
        for pid, env in _proc("environ"):
            if pid != me and needle in env.split(b"\0"):
                try:
                    os.kill(pid, signal.SIGKILL)
                    found += 1
                except OSError:
                    pass
        killed += found
        if not found:
            break
        time.sleep(0.05)
    return killed


def run(argv: list[str], *, timeout_s: float, masked_home: Path | None = None, **launch: Any) -> ProcessResult:
    """Run argv under the given isolation for at most `timeout_s`; never raises for the command's
    own failures. `launch` is what `start` takes. The real home is not mounted at all
    (`masked_home` is kept for callers; nothing of it is needed)."""
    launched = start(argv, **launch)
    if isinstance(launched, ProcessResult):
        return launched
    timed_out, stopped = launched.wait(timeout_s)
    return launched.finish(timed_out, stopped)


def command_line(
    argv: list[str],
    *,
    cwd: Path,
    isolation: Isolation,
    writable: Sequence[Path],
    hidden_dirs: Sequence[Path],
    readable: Sequence[Path],
    plan: MountPlan | None,
    guard: Guard | None,
    readonly: Sequence[Path] = (),
) -> tuple[list[str], MountPlan | None]:
    """The full command (isolation prefix, the guard's first process) and the plan it runs under."""
    if isolation.mode == "bwrap":
        if plan is None:
            plan = default_plan(writable, [*readable, cwd], hidden_dirs)
        full = _bwrap_argv(plan) + ["--chdir", os.fspath(cwd), "--"] + argv
    elif isolation.mode == "unshare":
        full = (_unshare_readonly(readonly) if readonly else _unshare_prefix() + ["--"]) + argv
    else:
        full = list(argv)
    if guard is not None:
        full = guard.wrap(full, list(argv), isolation.mode)
    return full, plan


def _popen(full: list[str], cwd: Path, env: dict[str, str], pass_fds: tuple[int, ...]) -> subprocess.Popen[bytes]:
    """The command in a session of its own (its process group is what a stop kills), stdin closed."""
    return subprocess.Popen(
        full,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        pass_fds=pass_fds,
    )


def _hand_to_guard(proc: subprocess.Popen[bytes], guard: Guard) -> None:
    """The guard takes the started process; when it cannot, the process tree is killed first."""
    try:
        guard.started(proc)
    except BaseException:
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


def start(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    isolation: Isolation,
    writable: Sequence[Path],
    hidden_dirs: Sequence[Path] = (),
    readable: Sequence[Path] = (),
    output_limit: int = 4 << 20,
    token: str,
    guard: Guard | None = None,
    plan: MountPlan | None = None,
    pass_fds: tuple[int, ...] = (),
    monitor: Monitor | None = None,
    readonly: Sequence[Path] = (),
) -> Launched | ProcessResult:
    """Start argv under the given isolation and return at once: a Launched to wait for and
    finish, or the ProcessResult of a command that could not be started.

    Under bwrap the command sees `plan` (a mountplan.MountPlan), or by default
    the system, the harness's runtime, `readable` and cwd read-only and
    `writable`; `hidden_dirs` never show inside them. `pass_fds` stay open in
    the command (a harness-only channel). `guard` (a runguard.RunGuard) puts
    limits and observers around the run and counts the processes that outlived
    the agent. Under unshare, `readonly` directories are read-only for the command (see the
    module's text). `monitor` (optional) sees stdout as it arrives (`feed(chunk)`,
    on the reader thread) and is asked about twice a second whether to stop the
    run (`poll()` returns a reason or None); a stop ends the process tree like
    a timeout and is recorded in `stopped`.
    """
    env = {**env, "AGENTDRIFT_RUN_TOKEN": token}
    become_subreaper()
    known_children = set(_children(os.getpid()))
    full, plan = command_line(
        argv,
        cwd=cwd,
        writable=writable,
        hidden_dirs=hidden_dirs,
        readable=readable,
        readonly=readonly,
        isolation=isolation,
        plan=plan,
        guard=guard,
    )
    started_at = time.monotonic()
    out_buf = BoundedBuffer(output_limit) if monitor is None else _WatchedBuffer(output_limit, monitor.feed)
    err_buf = BoundedBuffer(output_limit)
    try:
        proc = _popen(full, cwd, env, (*pass_fds, *(guard.pass_fds if guard is not None else ())))
    except OSError as exc:
        why = f"cannot start {argv[0]!r}: {exc.strerror or exc}"
        return ProcessResult(None, False, 0.0, b"", b"", 0, 0, False, False, 0, why, full, plan)
    if guard is not None:
        _hand_to_guard(proc, guard)
    launched = Launched(proc, full, plan, token, guard, monitor, known_children, out_buf, err_buf, started_at)
    launched.start_readers()
    return launched


@dataclass
class Launched:
    """A started command: wait for it (a time limit, the guard's limits, a monitor), then finish it
    (end every process it left, collect its output and status)."""

    proc: subprocess.Popen[bytes]
    full: list[str]
    plan: MountPlan | None
    token: str
    guard: Guard | None
    monitor: Monitor | None
    known_children: set[int]
    out_buf: BoundedBuffer
    err_buf: BoundedBuffer
    started_at: float
    readers: list[threading.Thread] = field(default_factory=list)

    def start_readers(self) -> None:
        self.readers = [
            threading.Thread(target=_pump, args=(stream, buf), daemon=True)
            for stream, buf in ((self.proc.stdout, self.out_buf), (self.proc.stderr, self.err_buf))
            if stream is not None  # both are pipes: _popen opens them
        ]
        for t in self.readers:
            t.start()

    def wait(self, timeout_s: float) -> tuple[bool, str | None]:
        """(timed out, why a monitor stopped it); an interruption (Ctrl-C) ends the tree and is re-raised."""
        proc, guard = self.proc, self.guard
        try:
            if guard is not None:
                stopped = self._wait_guarded(timeout_s, guard)
            elif self.monitor is not None:
                stopped = _wait_watched(proc, timeout_s, self.monitor)
            else:
                if not _exited_within(proc, timeout_s):
                    raise subprocess.TimeoutExpired(self.full, timeout_s)
                proc.wait()
                stopped = None
            if stopped:
                _terminate(proc)
            return False, stopped
        except subprocess.TimeoutExpired:
            if guard is not None:
                guard.on_timeout()
            _terminate(proc)
            return True, None
        except BaseException:
            # interrupted (Ctrl-C): the agent's processes must not outlive the session
            _signal_group(proc.pid, signal.SIGKILL)
            kill_tagged(self.token)
            kill_orphans(self.known_children | {proc.pid})
            raise

    def _wait_guarded(self, timeout_s: float, guard: Guard) -> str | None:
        """A broken limit ends the run at once; a monitor may stop it too (a per-run budget)."""
        proc, monitor = self.proc, self.monitor
        stopped = None
        deadline = time.monotonic() + timeout_s
        next_look = time.monotonic() + 0.5
        next_guard_look = time.monotonic() + 0.2
        while proc.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(self.full, timeout_s)
            if guard.stop_requested.is_set():
                proc.wait()
                break
            if _exited_within(proc, min(0.05, left)) or time.monotonic() < next_guard_look:
                continue
            next_guard_look = time.monotonic() + 0.2
            guard.poll()
            if monitor is not None and time.monotonic() >= next_look:
                next_look = time.monotonic() + 0.5
                stopped = monitor.poll() or None
                if stopped:
                    return stopped
        if monitor is not None and proc.poll() is not None:
            monitor.poll()  # a last look: the final usage and event
        return stopped

    def finish(self, timed_out: bool, stopped: str | None) -> ProcessResult:
        """End what the command left (the group may outlive its leader; escaped, setsid children
        are found by token) and collect its output and status."""
        proc, guard = self.proc, self.guard
        duration = time.monotonic() - self.started_at
        counted = None
        if guard is not None:
            guard.finished()
            counted = guard.leftovers(timed_out)
            guard.cgroups.kill_all()  # escaped or not, a process of the run is in its cgroups
        _signal_group(proc.pid, signal.SIGKILL)
        leftovers = kill_tagged(self.token)
        leftovers += kill_orphans(self.known_children | {proc.pid})
        if counted is not None:
            leftovers = counted  # exact: counted before the sandbox's PID namespace took them down
        for t in self.readers:
            t.join(timeout=5)
        for stream in (proc.stdout, proc.stderr):
            try:
                if stream is not None:  # both are pipes: _popen opens them
                    stream.close()
            except OSError:
                pass
        exit_code = proc.returncode
        if guard is not None and guard.agent_exit_code is not None:
            exit_code = guard.agent_exit_code  # the agent's own status, as its first process saw it
        if guard is not None and guard.launch_error is not None:
            exit_code = None  # it never ran
        out, err = self.out_buf, self.err_buf
        return ProcessResult(
            exit_code=exit_code,
            timed_out=timed_out,
            duration_s=duration,
            stdout=out.value(),
            stderr=err.value(),
            stdout_bytes=out.total,
            stderr_bytes=err.total,
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
            leftover_processes=leftovers,
            launch_error=guard.launch_error if guard is not None else None,
            argv=self.full,
            plan=self.plan,
            stopped=stopped,
        )


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the group, SIGKILL two seconds later if it is still there."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()


class _WatchedBuffer(BoundedBuffer):
    """A BoundedBuffer that also hands every chunk to a watcher (monitor.feed)."""

    def __init__(self, limit: int, watcher: Callable[[bytes], None]):
        super().__init__(limit)
        self._watcher = watcher

    def feed(self, chunk: bytes) -> None:
        super().feed(chunk)
        self._watcher(chunk)


def _exited_within(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Whether proc ends within timeout_s, woken the moment it does (a pidfd; Popen.wait with a
    timeout polls with sleeps of up to 50 ms, paid by every sandboxed process). Does not reap."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        ready, _, _ = select.select([fd], [], [], max(0.0, timeout_s))
        return bool(ready)
    finally:
        os.close(fd)


def _wait_watched(proc: subprocess.Popen[bytes], timeout_s: float, monitor: Monitor) -> str | None:
    """Wait for the process, polling the monitor; raises TimeoutExpired like proc.wait."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(proc.args, timeout_s)
        if _exited_within(proc, min(left, 0.5)):
            proc.wait()
            monitor.poll()  # a last look: the final usage and event
            return None
        reason = monitor.poll()
        if reason:
            return reason


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass
