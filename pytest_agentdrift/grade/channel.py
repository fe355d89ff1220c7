"""How the harness learns what graded code did, through a channel that code cannot write. No pytest.

Graded code (the project's modules, imported by the tests) owns its exit
status, every file in its tree and, under `atexit`, the last word of its
process. So the harness's reporter (gradehook/agentdrift_grade.py) does not
leave a file behind: it speaks over a pipe the harness reads, and it signs
each message (HMAC-SHA256 with a sequence number) with a key that reached it
through a second pipe. gradehook/launch.py reads the key and takes both fds
out of the environment before pytest starts and before any directory of the
graded tree is importable; the key then lives only in the reporter's memory.

What the harness accepts: authentic messages in order, then end of file.
Anything else on the pipe (a forged line, a replay, bytes after the last
message) makes the result "forged", which is a fail; no message at all is a
missing result (`os._exit`, a crash, a timeout), which is a fail too.

What the channel cannot prove: graded code runs in the reporter's process,
so code written to find the key in that process's memory (or to patch the
reporter's state before it reports) can make the report say what it wants.
A check that must hold against that does not take the report's word: its
tests observe values and the harness compares them with values it holds
outside every graded process (a pytest check's `expected` file,
grade/kinds/commands.observation_problems).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any

EVALUATOR_COMPONENT = "result_channel"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

ENV = "AGENTDRIFT_GRADE_CHANNEL"
KEY_BYTES = 32
#: the most the harness reads from one graded process (outcomes of a very large suite fit)
MAX_BYTES = 32 << 20


def empty_test_report() -> dict[str, Any]:
    """The grade plugin's report (gradehook/agentdrift_grade.py) before any test: the plugin starts
    from it, and the harness stands it in for a report that never arrived or was forged."""
    return {
        "collected": [],
        "deselected": [],
        "outcomes": {},
        "forged": [],
        "marks": {},
        "messages": {},
        "exc_types": {},
        "observed": {},
    }


def _sign(key: bytes, seq: int, body: bytes) -> str:
    return hmac.new(key, str(seq).encode() + b" " + body, hashlib.sha256).hexdigest()


@dataclass
class Received:
    messages: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def last(self, kind: str) -> dict[str, Any] | None:
        found = [m for m in self.messages if m.get("kind") == kind]
        return found[-1] if found else None


class HarnessEnd:
    """Made by the harness for one graded process: `child_fds` and `env` go to the child."""

    def __init__(self) -> None:
        self.key = secrets.token_bytes(KEY_BYTES)
        key_r, key_w = os.pipe()
        try:
            os.write(key_w, self.key)  # far below the pipe buffer: never blocks
        finally:
            os.close(key_w)
        self._read_fd, res_w = os.pipe()
        self.child_fds: tuple[int, ...] = (key_r, res_w)
        self.env = {ENV: f"{key_r},{res_w}"}
        self._data = bytearray()
        self._overflow = False
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            while True:
                chunk = os.read(self._read_fd, 1 << 16)
                if not chunk:
                    break
                if len(self._data) + len(chunk) > MAX_BYTES:
                    self._overflow = True
                    continue  # keep draining so the writer never blocks
                self._data += chunk
        except OSError:
            pass

    def close_child_ends(self) -> None:
        """After the child started (or failed to): only the child may hold the writing end."""
        from pytest_agentdrift.canonical import close_fds  # harness side only: graded processes import this module

        close_fds(self.child_fds)
        self.child_fds = ()

    def receive(self, timeout_s: float = 5.0) -> Received:  # noqa: C901 (known debt: split by job when next touched)
        """Everything the child said, checked. Call once the child and its processes are gone."""
        self.close_child_ends()
        self._thread.join(timeout_s)
        still_open = self._thread.is_alive()
        try:
            os.close(self._read_fd)
        except OSError:
            pass
        out = Received()
        if still_open:
            out.problems.append("the result channel was still held open after the graded process ended")
        if self._overflow:
            out.problems.append(f"more than {MAX_BYTES} bytes on the result channel")
        data = bytes(self._data)
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        elif lines:
            out.problems.append("the result channel ends in an unterminated line")
        seq = 0
        for line in lines:
            mac, _, rest = line.partition(b" ")
            num, _, body = rest.partition(b" ")
            try:
                good = (
                    num.isdigit()
                    and int(num) == seq
                    and hmac.compare_digest(mac.decode("ascii"), _sign(self.key, seq, body))
                )
            except (UnicodeDecodeError, ValueError):
                good = False
            if not good:
                out.problems.append(
                    f"the result channel carried {len(line)} byte(s) the harness's reporter did not send"
                    f" (at message {seq})"
                )
                break
            try:
                msg = json.loads(body)
            except ValueError:
                out.problems.append(f"message {seq} on the result channel is not JSON")
                break
            if not isinstance(msg, dict):
                out.problems.append(f"message {seq} on the result channel is not an object")
                break
            out.messages.append(msg)
            seq += 1
        return out


class GradedEnd:
    """The reporter's end, inside the graded process."""

    def __init__(self, fd: int, key: bytes):
        self.fd = fd
        self.key = key
        self.seq = 0

    @classmethod
    def from_env(cls) -> "GradedEnd | None":
        """Take the channel out of the environment; read and close the key pipe."""
        spec = os.environ.pop(ENV, None)
        if not spec:
            return None
        key_fd, out_fd = (int(x) for x in spec.split(","))
        key = b""
        try:
            while len(key) < KEY_BYTES:
                chunk = os.read(key_fd, KEY_BYTES - len(key))
                if not chunk:
                    break
                key += chunk
        finally:
            os.close(key_fd)
        os.set_inheritable(out_fd, False)  # children of the tests do not get it
        return cls(out_fd, key)

    def send(self, kind: str, payload: dict[str, Any]) -> None:
        body = json.dumps({"kind": kind, **payload}, sort_keys=True).encode()
        line = f"{_sign(self.key, self.seq, body)} {self.seq} ".encode() + body + b"\n"
        self.seq += 1
        view = memoryview(line)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass
        self.key = b""
