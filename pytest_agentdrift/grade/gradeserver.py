"""One grading sandbox for many graded processes. No pytest.

Starting a sandbox, its cgroups and a Python with pytest imported costs far
more than most graded pytest runs (measured in benchmarks/). So under
bubblewrap a Grader starts one sandbox, with the same allow-list and the
grading limits, whose resident process (gradehook/forkserver.py) has pytest
imported and forks once per graded process. What a check could use to
reach the next one is taken away between requests:

* the tree: each request gets a fresh copy of its directory in the
  sandbox's only writable directory, and that directory is emptied after
  the request (by the harness, once the server has reported every process
  of the request dead);
* processes: the server kills and reaps every process of the sandbox but
  init and itself before it answers;
* the sandbox's tmpfs mounts and its IPC namespace (System V shared memory,
  message queues and semaphores, POSIX message queues): the server empties them
  before it answers;
* the server itself: not dumpable, no control socket in graded code; a
  server that dies, stops answering, leaves something behind or sees a
  limit broken is torn down, and the next request gets a new sandbox.

A request the server could not carry to its end (it died on its own or was
killed from inside) is not judged from that attempt unless it broke a limit on
the way: `run` returns None and the caller runs it the old way, in a sandbox
of its own. Graded code can change what the server's later forks inherit
(resource limits, priority: those need only the same uid), so a server lives
for one run's checks (Grader.evaluate ends it), and an untouched fixture's
result, which is kept for every later run, is computed by a server of its
own that only untouched fixtures use (Grader.fixture_server): no agent's code
runs in its sandbox, and no other sandbox shares its PID namespace. Limits bind as
before: the sandbox's cgroups, rlimits and write totals are grading's, and a broken one
ends the sandbox at once and is reported for the request that broke it.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import socket
import sys
import threading
import time
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pytest_agentdrift.canonical import close_fds
from pytest_agentdrift.run import sandbox
from pytest_agentdrift.tasks import fdtree

if TYPE_CHECKING:
    from pytest_agentdrift.run.runguard import RunGuard

EVALUATOR_COMPONENT = "grade_server_host"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

GRADEHOOK_DIR = Path(__file__).parent / "gradehook"
#: how long a new server may take to import pytest before the sandbox is given up (a loaded machine is slow)
START_TIMEOUT_S = 120.0
#: consecutive failed starts after which a Grader stops trying and runs every process in its own sandbox
MAX_FAILED_STARTS = 2
OUTPUT_LIMIT = 256 << 10
#: where the grading sandbox mounts its IPC namespace's message queues
MQUEUE_DIR = "/dev/mqueue"


@dataclass
class Served:
    exit_code: int | None
    timed_out: bool
    stdout: str
    stderr: str
    exceeded: list[str]


@dataclass(frozen=True)
class _Running:
    """What a request uses of the running sandbox: its guard, the server's socket, the writable
    directory requests are copied into and where a request's copy goes once answered."""

    guard: RunGuard
    sock: socket.socket
    area: Path
    trash: Path


class GradingServer:
    def __init__(self, isolation: sandbox.Isolation, limits: dict[str, int | None], base: Path, exclude: list[Path]):
        self.isolation = isolation
        self.limits = dict(limits)
        self.base = base
        self.exclude = list(exclude)
        self.failed_starts = 0
        self.served = 0
        self._launched: sandbox.Launched | None = None
        self._ready = False  # the server said it is ready (launch() does not wait for it)
        self._sock: socket.socket | None = None
        self._guard: RunGuard | None = None
        self._area: Path | None = None
        self._home: Path | None = None
        self._trash: Path | None = None  # where a request's copy goes once answered: never mounted

    @property
    def usable(self) -> bool:
        return self.isolation.mode == "bwrap" and self.failed_starts < MAX_FAILED_STARTS

    # -- the sandbox's life -------------------------------------------------------------------------
    def launch(self) -> bool:
        """Start the sandbox and return at once; the first request waits for it to be ready.

        Called before an agent's run, the server imports pytest while the agent works. It must
        be called before the agent's sandbox starts: a run ends every child of the harness that
        it did not find when it started, and the server is one from then on.
        """
        if self._launched is not None or not self.usable:
            return self._launched is not None
        from pytest_agentdrift.run import mountplan
        from pytest_agentdrift.run.harnessruntime import harness_runtime

        tag = secrets.token_hex(6)
        self._area = self.base / f"grading-{tag}"
        self._home = self.base / f"grading-{tag}-harness"  # the guard's own files: never mounted
        self._trash = self.base / f"grading-{tag}-trash"
        self._area.mkdir(parents=True)
        self._trash.mkdir()
        token = secrets.token_hex(16)
        self._guard = grading_guard(
            self.limits, self.isolation.mode, root=self._area, work=self._area, harness_dir=self._home, token=token
        )
        plan = mountplan.build(writable=[self._area], readable=list(harness_runtime()), exclude=self.exclude)
        # the sandbox's POSIX message queues, listed there so the server can empty them between requests
        plan = plan.with_mounts([mountplan.Mount("mqueue", None, MQUEUE_DIR)])
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        try:
            self._guard.prepare()
            launched = sandbox.start(
                [sys.executable, "-P", str(GRADEHOOK_DIR / "launch.py"), "--serve", str(theirs.fileno())],
                cwd=self._area,
                env=server_env(self._area),
                isolation=self.isolation,
                writable=[self._area],
                plan=plan,
                token=token,
                guard=self._guard,
                pass_fds=(theirs.fileno(),),
                output_limit=64 << 10,
            )
        finally:
            theirs.close()
        if isinstance(launched, sandbox.ProcessResult):
            self._teardown()
            return False
        self._launched = launched
        return True

    def _start(self) -> bool:
        """A server ready for a request: launched (now or earlier) and its readiness received."""
        if not self.launch():
            return False
        if self._ready:
            return True
        if self._receive(START_TIMEOUT_S) != b"ready":
            self._teardown()
            return False
        self._ready = True
        return True

    def _running(self) -> _Running:
        """The running sandbox's parts, which launch() made and _teardown() ends together."""
        if self._guard is None or self._sock is None or self._area is None or self._trash is None:
            raise RuntimeError("the grading server is not running")
        return _Running(self._guard, self._sock, self._area, self._trash)

    def close(self) -> None:
        if self._launched is not None or self._sock is not None:
            self._teardown()

    def _teardown(self, force: bool = False) -> None:
        """End the sandbox and everything in it (at once when `force`, else the server may exit
        on its own); remove its cgroups and directories."""
        if self._sock is not None:
            self._sock.close()  # a healthy server exits on end of file
            self._sock = None
        launched, self._launched = self._launched, None
        self._ready = False
        if launched is not None:
            _end_sandbox(launched, self._guard, force)
        if self._guard is not None:
            self._guard.close()
            self._guard = None
        for d in (self._area, self._home, self._trash):
            if d is not None:
                fdtree.remove_later(d)  # every process of the sandbox has ended
        self._area = self._home = self._trash = None

    # -- one request -------------------------------------------------------------------------------
    def run(
        self,
        argv: list[str],
        tree: Path,
        env: dict[str, str],
        channel: Any,
        timeout_s: float,
        copy: Callable[[Path, Path], None] | None = None,
    ) -> Served | None:
        """Run argv (the launch.py or run_python.py form) on a copy of tree's directory, with env and
        the result channel; None when the server could not carry it to its end (run it another way).
        `copy(tree, dest)` makes the copy (tree's directory at dest, tree itself by its name there)."""
        if not self._ready:
            if not self._start():
                self.failed_starts += 1
                return None
            self.failed_starts = 0
        live = self._running()
        kind = "pytest" if Path(argv[2]).name == "launch.py" else "python"
        dest = live.area / secrets.token_hex(8)
        try:
            (copy or copy_request_dir)(tree, dest)
        except BaseException:
            fdtree.rmtree(dest)  # a copy that failed half-way never reaches the next request
            raise
        moved = Relocation(tree.parent, dest)
        outputs = _Outputs()
        request = {
            "kind": kind,
            "argv": [moved.path(a) for a in argv[2:]],
            "cwd": moved.path(str(tree)),
            "env": {k: moved.path(v) for k, v in env.items() if k not in channel.env},
            "channel_env": next(iter(channel.env)),
            "wipe": [*live.guard.tmpfs_mounts, MQUEUE_DIR],
        }
        try:
            socket.send_fds(live.sock, [json.dumps(request).encode()], [*outputs.child_ends, *channel.child_fds])
        except OSError:
            outputs.close()
            self._teardown()
            return None
        finally:
            outputs.close_child_ends()
            channel.close_child_ends()
        return self._await(outputs, timeout_s)

    def _await(self, outputs: _Outputs, timeout_s: float) -> Served | None:
        guard = self._running().guard
        deadline = time.monotonic() + timeout_s
        reply = None
        while reply is None:
            left = deadline - time.monotonic()
            if left <= 0 or guard.stop_requested.is_set():
                break
            reply = self._receive(min(0.2, left))
            if reply == b"":
                return self._died(outputs)
            guard.poll()  # a broken memory or process limit ends the sandbox at once
        if reply is not None and not guard.stop_requested.is_set():
            return self._answered(json.loads(reply), outputs)
        timed_out = not guard.stop_requested.is_set()
        guard.settle_writes()
        exceeded = guard.exceeded()
        self._teardown(force=True)
        out, err = outputs.collect()
        return Served(None if timed_out else 137, timed_out, out, err, exceeded)

    def _died(self, outputs: _Outputs) -> Served | None:
        """The server died during the request. A limit the request broke on the way (graded code can
        make the server the out-of-memory victim) is that request's result; otherwise None: the
        request runs again in a sandbox of its own."""
        guard = self._running().guard
        guard.settle_writes()
        guard.poll()
        exceeded = guard.exceeded()
        self._teardown(force=True)
        out, err = outputs.collect()
        if exceeded:
            return Served(137, False, out, err, exceeded)
        return None

    def _answered(self, reply: dict[str, Any], outputs: _Outputs) -> Served:
        live = self._running()
        out, err = outputs.collect()
        self.served += 1
        # the request's processes have ended: every write they made is judged before their copy goes
        live.guard.settle_writes()
        live.guard.poll()  # counters read at the end of the request, not only at the last poll
        exceeded = set(live.guard.exceeded())
        if reply.get("signals", {}).get("SIGXFSZ") and self.limits.get("disk"):
            exceeded.add("disk")  # a write past the file-size cap killed a process of the request
        exceeded.update(self._tmpfs_full(reply.get("measured"), live.guard.tmpfs_mounts))
        # every process of the request has ended: its copy leaves the sandbox's writable directory at
        # once (moved beside it, where nothing of the sandbox reaches) and is removed in the background
        left = [p for e in os.scandir(live.area) for p in fdtree.remove_later(e.path, trash=live.trash)]
        if exceeded or left or not reply.get("clean"):
            self._teardown(force=True)  # never reused when anything of this request may remain
        return Served(reply.get("exit_code"), False, out, err, sorted(exceeded))

    def _tmpfs_full(self, measured: Any, tmpfs_mounts: Container[str]) -> set[str]:
        """The tmpfs limits a request filled (what the server measured before emptying them), as the
        agent's run counts them: a sized tmpfs within 64 KiB of its size refused a write."""
        full: set[str] = set()
        for path, used in (measured if isinstance(measured, dict) else {}).items():
            key = "shm" if path == "/dev/shm" else "tmp"
            limit = self.limits.get(key)
            if path in tmpfs_mounts and isinstance(used, int) and limit and limit - used < 64 * 1024:
                full.add(key)
        return full

    def _receive(self, timeout_s: float) -> bytes | None:
        """The server's next message, b"" when it is gone, None when nothing came within timeout_s."""
        if self._sock is None:
            return b""
        ready, _, _ = select.select([self._sock], [], [], timeout_s)
        if not ready:
            return b"" if self._launched is None or self._launched.proc.poll() is not None else None
        try:
            return self._sock.recv(1 << 16)
        except OSError:
            return b""


def _end_sandbox(launched: sandbox.Launched, guard: RunGuard | None, force: bool) -> None:
    """Kill every process of the sandbox (at once when `force`, else when the server has not exited
    within 2 s), reap it and close its output; `guard`: the one launch() made before it started it."""
    if (force or not sandbox._exited_within(launched.proc, 2.0)) and guard is not None:
        guard.kill()
    launched.proc.wait()
    if guard is not None:
        guard.finished()
    for t in launched.readers:
        t.join(timeout=5)
    for stream in (launched.proc.stdout, launched.proc.stderr):
        if stream is not None:  # both are pipes: sandbox.start opens them
            stream.close()


def grading_guard(
    limits: dict[str, int | None], mode: str, *, root: Path, work: Path, harness_dir: Path, token: str
) -> RunGuard:
    """Grading's limits around graded code (runguard.py): cgroups, rlimits, tmpfs sizes, and the write
    watcher's totals (disk and files, what the tmpfs mounts hold), bound and reported as for an
    agent's run; none of an agent run's evidence (its network, its write events: graded code's are
    not evidence)."""
    from pytest_agentdrift.run.runguard import RunGuard

    return RunGuard(
        limits=limits,
        mode=mode,
        root=root,
        work=work,
        harness_dir=harness_dir,
        token=token,
        observe_network=False,
        keep_write_events=False,
    )


def server_env(home: Path) -> dict[str, str]:
    """The environment the server starts with: what every graded process's interpreter starts with."""
    from pytest_agentdrift.run.harnessruntime import harness_pythonpath

    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTEST_ADDOPTS": "",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONPATH": harness_pythonpath(GRADEHOOK_DIR),
    }


class Relocation:
    """Paths under a request's own directory, moved to its copy."""

    def __init__(self, old: Path, new: Path):
        self.old, self.new = str(old), str(new)

    def path(self, value: str) -> str:
        if value == self.old or value.startswith(self.old + os.sep):
            return self.new + value[len(self.old) :]
        return value


class _Outputs:
    """The request's stdout and stderr: pipes whose writing ends go to the graded process."""

    def __init__(self) -> None:
        self._out_r, out_w = os.pipe()
        self._err_r, err_w = os.pipe()
        self.child_ends: tuple[int, ...] = (out_w, err_w)
        self._bufs = (sandbox.BoundedBuffer(OUTPUT_LIMIT), sandbox.BoundedBuffer(OUTPUT_LIMIT))
        self._streams = (os.fdopen(self._out_r, "rb", buffering=0), os.fdopen(self._err_r, "rb", buffering=0))
        self._readers = [
            threading.Thread(target=sandbox._pump, args=(s, b), daemon=True)
            for s, b in zip(self._streams, self._bufs, strict=True)
        ]
        for t in self._readers:
            t.start()

    def close_child_ends(self) -> None:
        close_fds(self.child_ends)
        self.child_ends = ()

    def collect(self) -> tuple[str, str]:
        """Call once every process that held the writing ends is gone."""
        self.close_child_ends()
        for t in self._readers:
            t.join(timeout=5)
        self.close()
        return tuple(b.value().decode("utf-8", "replace") for b in self._bufs)  # type: ignore[return-value]

    def close(self) -> None:
        self.close_child_ends()
        for s in self._streams:
            try:
                s.close()
            except OSError:
                pass


def copy_request_dir(tree: Path, dst: Path) -> None:
    """A private copy of a request's directory (the harness made it: its own checks already ran)."""
    from pytest_agentdrift.run.runner import copy_tree

    report = copy_tree(tree.parent, dst)
    if not report.complete:
        raise OSError(f"the grading copy of {tree.parent.name} is incomplete: {report.truncated or report.skipped[:5]}")
