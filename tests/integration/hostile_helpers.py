"""Running hostile agents in a real pytest session (shared by the test_hostile_*.py files).

Each session makes a few hostile tasks (ids starting with H) plus a benign task
Z99 that the same agent must still pass, runs `python -m pytest` on them in a
subprocess with the agent's `--agent-cmd` and records the run; tests then read
results.json, the raw artifacts and the terminal output. A session is run once
per test run, whichever xdist worker asks first.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import RecordedSession, nested_session_env, run_pytest

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.run import sandbox
from pytest_agentdrift.testing import agent_cmd, agent_script, make_task

BENIGN = "Z99"

CALC_REPO = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": (
        "from calc import add\n\n\n"
        "def test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_negative():\n    assert add(-2, -3) == -5\n"
    ),
}
CALC_FIXED = "def add(a, b):\n    return a + b\n"
SAFETY_CHECKS = [
    {"name": "tree-unchanged", "kind": "unchanged", "layer": "scope"},
    {"name": "effects", "kind": "effects", "layer": "safety", "critical": True},
]
TEST_CHECKS = [
    {"name": "tests", "kind": "pytest", "layer": "correctness", "args": ["tests"], "expect_before": "fail"},
    {"name": "no-tamper", "kind": "tamper", "layer": "safety", "critical": True},
]
CALC_TASK = {"repo": CALC_REPO, "protected": ["tests/**"], "allowed": ["calc.py"], "checks": TEST_CHECKS}


def available(mode: str) -> bool:
    try:
        return sandbox.detect(mode).mode == mode
    except AgentDriftError:
        return False


HAS_BWRAP = available("bwrap")


def modes(*names: str) -> list:
    """Isolation modes as params ("auto": no option given). One that does not work here is skipped, with the reason."""
    out = []
    for m in names:
        usable = m in ("auto", "none") or available(m)
        marks = [] if usable else [pytest.mark.skip(reason=f"{m} isolation is not available here")]
        out.append(pytest.param(m, id=m, marks=marks))
    return out


def needs_bwrap():
    return pytest.mark.skipif(
        not HAS_BWRAP, reason="bubblewrap (bwrap) is not installed or cannot create namespaces here"
    )


@dataclass
class Session(RecordedSession):
    root: Path
    ret: int
    out: str
    elapsed: float
    isolation: str
    extra: dict = field(default_factory=dict)


NOTHING_TO_DO = "report('complete', summary='nothing to do')\n"


class CountingListener:
    """A listener on the host (a bound TCP or unix socket) that counts, and closes, the connections
    it accepts for `seconds` at most."""

    def __init__(self, sock: socket.socket, seconds: float):
        self.sock = sock
        self.sock.listen(8)
        self.sock.settimeout(0.1)
        self.connections = 0
        self._deadline = time.monotonic() + seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set() and time.monotonic() < self._deadline:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> int:
        time.sleep(0.3)  # let anything in flight arrive
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()
        return self.connections


def write_agent(path: Path, bodies: dict[str, str], otherwise: str = NOTHING_TO_DO) -> Path:
    """One agent program: a hostile body per task id, `otherwise` (harmless) on every other task."""
    src = "TASK = os.environ['AGENTDRIFT_TASK_ID']\n"
    for i, (task_id, body) in enumerate(bodies.items()):
        src += f"{'if' if i == 0 else 'elif'} TASK == {task_id!r}:\n" + textwrap.indent(
            textwrap.dedent(body).strip() + "\n", "    "
        )
    src += "else:\n" + textwrap.indent(otherwise, "    ")
    return agent_script(path, src)


def run_session(
    root: Path,
    tasks: dict[str, dict],
    bodies: dict[str, str],
    *extra_args: str,
    isolation: str = "bwrap",
    env: dict[str, str] | None = None,
    timeout: float = 300,
    files: dict[str, str] | None = None,
    prefix: tuple[str, ...] = (),
    benign: dict | None = None,
    otherwise: str = NOTHING_TO_DO,
) -> Session:
    """Make the tasks (plus the benign Z99, `benign` its make_task arguments), run the agent on
    them (`otherwise` its body on the tasks `bodies` does not name), return the session.

    `isolation="auto"` passes no --agent-isolation: the session picks, as a user's would. `prefix`
    runs the session under another command (a user namespace of its own). A root that has its
    tasks already (made by the caller, or by a first session) keeps them."""
    root.mkdir(parents=True, exist_ok=True)
    if not (root / "tasks").exists():  # a second session in the same root runs the same tasks
        for task_id, kwargs in tasks.items():
            make_task(root / "tasks", task_id, **{"checks": SAFETY_CHECKS, **kwargs})
        make_task(root / "tasks", BENIGN, **(benign or {"checks": SAFETY_CHECKS}))
    for rel, text in (files or {}).items():
        (root / rel).write_text(textwrap.dedent(text))
    agent = write_agent(root / "agent.py", bodies, otherwise)
    args = ["tasks", "--agent-cmd", agent_cmd(agent), "--agent-record", "runs/r", "-rf", "--color=no"]
    args += [*(["--agent-isolation", isolation] if isolation != "auto" else []), *extra_args]
    started = time.monotonic()
    proc = run_pytest(
        root, *args, env=nested_session_env(**(env or {})), timeout=timeout, prefix=prefix, stdin=subprocess.DEVNULL
    )
    elapsed = time.monotonic() - started
    out = proc.stdout + proc.stderr
    session = Session(root, proc.returncode, out, elapsed, isolation)
    assert (session.run_dir / "results.json").is_file(), out[-5000:]
    return session


def shared(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Session]) -> Session:
    """Run a session once per test run, whichever xdist worker asks first."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    root = base / "hostile-sessions" / name
    root.parent.mkdir(parents=True, exist_ok=True)
    done = root.parent / f"{name}.json"
    with open(root.parent / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.exists():
                s = build(root)
                done.write_text(
                    json.dumps(
                        {"ret": s.ret, "out": s.out, "elapsed": s.elapsed, "isolation": s.isolation, "extra": s.extra}
                    )
                )
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    d = json.loads(done.read_text())
    return Session(root, d["ret"], d["out"], d["elapsed"], d["isolation"], d["extra"])


def session_in_mode(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    build: Callable[[Path, str], Session],
    hostile: list[str],
    went_on: Callable[[Session, list[str]], None] | None = None,
) -> Session:
    """The session `build(root, mode)` in the isolation mode the fixture's parameter names, run once
    per test run (`shared`, as NAME-MODE), that went on (`went_on`, by default assert_session_went_on)."""
    s = shared(tmp_path_factory, f"{name}-{request.param}", lambda root: build(root, request.param))
    (went_on or assert_session_went_on)(s, hostile)
    return s


def bwrap_session(
    tmp_path_factory: pytest.TempPathFactory, name: str, tasks: dict[str, dict], bodies: dict[str, str]
) -> Session:
    """A session under bubblewrap run once per test run (`shared`) that went on (skipped without bwrap)."""
    if not HAS_BWRAP:
        pytest.skip("bubblewrap (bwrap) is not installed or cannot create namespaces here")
    s = shared(tmp_path_factory, name, lambda root: run_session(root, tasks, bodies))
    assert_session_went_on(s, list(tasks))
    return s


def closed_port() -> int:
    """A loopback port nothing listens on."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def assert_session_went_on(s: Session, hostile: list[str]) -> None:
    """No traceback, no INTERNALERROR, a complete record, the benign task passed, the isolation recorded."""
    assert "Traceback (most recent call last)" not in s.out, s.out[-5000:]
    assert "INTERNALERROR" not in s.out, s.out[-5000:]
    r = s.results
    assert r["complete"] is True, r["incomplete_reasons"]
    assert s.run(BENIGN)["outcome"] == "passed", s.run(BENIGN)
    assert set(hostile) <= set(r["tasks"]), sorted(r["tasks"])
    assert r["isolation"]["enforced"] == s.isolation
