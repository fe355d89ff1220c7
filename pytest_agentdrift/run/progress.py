"""Progress people can read while agents run. No pytest.

Each process that runs agents (the single process, or each xdist worker)
keeps one small status file per worker in the session's control directory:
the task, repetition and attempt it runs, when it started, its timeout, the
last tool call or event the product reported, and what it spent so far
(`StatusBoard`). The controller reads those files on a thread and shows
them (`ProgressDisplay`):

* on a terminal, refreshed in place below pytest's own line (one line per
  worker plus a header), erased before pytest writes and drawn again after;
* otherwise (CI logs) as plain lines every `interval` seconds while runs are
  going, never with a carriage return or an escape sequence.

The display writes to its own duplicate of the terminal's file descriptor,
taken while pytest's output capture is suspended: with capture on, a line
written to stdout while an agent runs would land in the item's captured
output instead of the terminal. Workers on other machines (`--tx ssh`) write
their files there, so the controller shows no progress for them.

`TimeLedger` adds up agent time, harness time (the item's time that was not
the agent's, nor waiting before a retry) and waiting, for the final line.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any, Callable

STATUS_DIR = "status"


def _fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class StatusBoard:
    """One worker's status file (atomic writes; the controller only reads)."""

    def __init__(self, control_dir: Path | None, worker: str, clock: Callable[[], float] = time.time):
        self.path = None if control_dir is None else Path(control_dir) / STATUS_DIR / f"{worker}.json"
        self.worker = worker
        self.clock = clock
        self.state: dict[str, Any] = {}

    def _write(self) -> None:
        if self.path is None:
            return
        try:
            # replaced whole (the reader never sees half a file), not synced: a status that a
            # crash loses is worth no fsync per update
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self.state), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:
            self.path = None  # the control directory went away: progress is best effort, the run is not

    def start(self, task: str, rep: int, attempt: int, timeout_s: float | None) -> None:
        self.state = {
            "worker": self.worker,
            "state": "running",
            "task": task,
            "rep": rep,
            "attempt": attempt,
            "started": self.clock(),
            "timeout_s": timeout_s,
            "last_event": None,
            "tokens": None,
            "cost_usd": None,
        }
        self._write()

    def update(self, fields: Mapping[str, object]) -> None:
        self.state.update({k: v for k, v in fields.items() if k in ("last_event", "tokens", "cost_usd")})
        self._write()

    def waiting(self, task: str, rep: int, next_attempt: int, seconds: float, why: str) -> None:
        self.state = {
            "worker": self.worker,
            "state": "backoff",
            "task": task,
            "rep": rep,
            "attempt": next_attempt,
            "started": self.clock(),
            "until": self.clock() + seconds,
            "last_event": why,
        }
        self._write()

    def idle(self) -> None:
        self.state = {"worker": self.worker, "state": "idle"}
        self._write()


def read_statuses(control_dir: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    d = Path(control_dir) / STATUS_DIR
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return out
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            doc = json.loads((d / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


def status_line(st: dict[str, Any], now: float) -> str | None:
    """One worker: `gw0  T03 r1 (attempt 2)  45s/600s  Bash: pytest -q  12,034 tokens $0.04`."""
    if st.get("state") == "running":
        attempt = f" (attempt {st['attempt']})" if (st.get("attempt") or 1) > 1 else ""
        timeout = _fmt_s(st.get("timeout_s")) if st.get("timeout_s") else "-"
        parts = [
            f"{st.get('worker', '?'):<5} {st.get('task')} r{st.get('rep')}{attempt}",
            f"{_fmt_s(now - st.get('started', now))}/{timeout}",
        ]
        if st.get("last_event"):
            parts.append(str(st["last_event"]))
        spent = []
        if st.get("tokens") is not None:
            spent.append(f"{st['tokens']:,} tokens")
        if st.get("cost_usd") is not None:
            spent.append(f"${st['cost_usd']:.2f}")
        if spent:
            parts.append(" ".join(spent))
        return "  ".join(parts)
    if st.get("state") == "backoff":
        left = max(0.0, st.get("until", now) - now)
        return (
            f"{st.get('worker', '?'):<5} {st.get('task')} r{st.get('rep')} waiting {_fmt_s(left)} before attempt "
            f"{st.get('attempt')}: {st.get('last_event') or ''}"
        ).rstrip(": ")
    return None


def render(statuses: list[dict[str, Any]], now: float, done: int, total: int, spend: str | None = None) -> list[str]:
    """The header and one line per busy worker."""
    lines = [status_line(st, now) for st in statuses]
    busy = [ln for ln in lines if ln]
    head = f"agentdrift progress: {done}/{total} run(s) done, {len(busy)} running"
    if spend:
        head += f", spent {spend}"
    return [head, *("  " + ln for ln in busy)]


@dataclass
class TimeLedger:
    runs: int = 0
    attempts: int = 0
    agent_s: float = 0.0
    item_s: float = 0.0
    wait_s: float = 0.0

    def add(self, timing: dict[str, Any]) -> None:
        self.runs += 1
        self.attempts += int(timing.get("attempts") or 1)
        self.agent_s += float(timing.get("agent_s") or 0)
        self.item_s += float(timing.get("item_s") or 0)
        self.wait_s += float(timing.get("wait_s") or 0)

    @property
    def harness_s(self) -> float:
        return max(0.0, self.item_s - self.agent_s - self.wait_s)

    def line(self, wall_s: float, spend: str | None) -> str:
        retried = f" in {self.attempts} attempt(s)" if self.attempts != self.runs else ""
        share = f" ({self.harness_s / self.item_s:.0%} of run time)" if self.item_s else ""
        text = (
            f"agentdrift time: {self.runs} run(s){retried}; agent {_fmt_s(self.agent_s)}, harness "
            f"{_fmt_s(self.harness_s)}{share}"
        )
        if self.wait_s:
            text += f", waiting before retries {_fmt_s(self.wait_s)}"
        text += f"; wall {_fmt_s(wall_s)}"
        if spend:
            text += f"; spent {spend}"
        return text


@dataclass(eq=False)
class ProgressDisplay:
    """The controller's progress thread (see the module docstring)."""

    control_dir: Path
    fd: int
    _: KW_ONLY
    tty: bool
    interval: float
    counts: Callable[[], tuple[int, int, str | None]]
    current_column: Callable[[], int]
    width: Callable[[], int]
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        self.lock = threading.RLock()
        self._drawn = 0  # lines of ours on screen (tty)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_plain = self.clock()

    # -- terminal writes (under self.lock)
    def _write(self, text: str) -> None:
        data = text.encode("utf-8", "replace")
        while data:
            try:
                n = os.write(self.fd, data)
            except InterruptedError:
                continue
            except OSError:
                self._stop.set()
                return
            data = data[n:]

    def erase(self) -> None:
        """Remove our lines and put the cursor back where pytest left it (tty)."""
        with self.lock:
            if not self._drawn:
                return
            width = max(20, self.width())
            col = self.current_column() % width
            seq = "\r\x1b[2K" + "\x1b[1A\x1b[2K" * (self._drawn - 1) + "\x1b[1A" + (f"\x1b[{col + 1}G" if col else "\r")
            self._write(seq)
            self._drawn = 0

    def draw(self) -> None:
        with self.lock:
            done, total, spend = self.counts()
            lines = render(read_statuses(self.control_dir), self.clock(), done, total, spend)
            if len(lines) == 1:  # nothing running
                if self.tty:
                    self.erase()
                return
            if self.tty:
                width = max(20, self.width())
                self.erase()
                self._write("".join("\n" + ln[: width - 1] for ln in lines))
                self._drawn = len(lines)
            else:
                now = self.clock()
                if now - self._last_plain < self.interval:
                    return
                self._last_plain = now
                lead = "\n" if self.current_column() else ""
                self._write(lead + "\n".join(lines) + "\n")

    def _loop(self) -> None:
        tick = 1.0 if self.tty else min(1.0, self.interval)
        while not self._stop.wait(tick):
            self.draw()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="agentdrift-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.erase()
        try:
            os.close(self.fd)
        except OSError:
            pass


__all__ = ["StatusBoard", "ProgressDisplay", "TimeLedger", "render", "status_line", "read_statuses"]
