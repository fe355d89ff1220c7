"""Network observations, kept where the agent cannot reach them. No pytest.

The audit hook (sitehook/sitecustomize.py) in every Python process the agent
starts reports each connect / getaddrinfo as one datagram to a Unix socket the
harness listens on. The harness keeps what arrives in its own memory, so
there is no log file to truncate or rewrite. Under bubblewrap the socket's
directory is mounted read-only into the sandbox: the agent can add datagrams
(which only adds attempts to its own record) but cannot remove the socket or
take back what it sent. Under `unshare` / `none` the directory is the
harness's (root-owned), but an agent running as the same user could remove
the socket before connecting; what it sent before stays recorded.

Known limits: the hook observes Python processes that load it; `python -I`
or `-S`, or a program in another language, bypasses it. Under bwrap and
unshare such attempts are still denied (no network namespace route) and real
agents' traffic goes through the recording proxy, but they are not itemised.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any

EVALUATOR_COMPONENT = "netlog"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

#: datagrams kept per run (the rest are counted)
NETLOG_MAX = 10_000
_SUN_PATH_MAX = 107


def observer_dir(base: Path, name: str) -> Path:
    """A harness-only directory for this run's sockets, short enough for AF_UNIX."""
    d = base / f".obs-{name}"
    if len(os.fsencode(d / "proxy.sock")) > _SUN_PATH_MAX:
        # a deep base (a long TMPDIR): somewhere short instead, still never inside the run directory
        d = Path(tempfile.mkdtemp(prefix="agentdrift-obs-", dir="/tmp" if os.access("/tmp", os.W_OK) else None))
    else:
        d.mkdir(mode=0o755)
    os.chmod(d, 0o755)
    return d


class NetlogReceiver:
    """Receives the audit hook's datagrams on `<dir>/net.sock` until stopped."""

    def __init__(self, directory: Path):
        self.path = directory / "net.sock"
        self.records: list[dict[str, Any]] = []
        self.dropped: Counter[str] = Counter()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(os.fspath(self.path))
        os.chmod(self.path, 0o777)  # any uid the agent runs as may send; nobody may remove it (the dir)
        self._sock.setblocking(False)
        # stop() wakes the reader at once through this pipe instead of a polling timeout
        self._wake_r, self._wake_w = os.pipe()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="agentdrift-netlog", daemon=True)

    def start(self) -> "NetlogReceiver":
        self._thread.start()
        return self

    def _take(self, data: bytes) -> None:
        if len(self.records) >= NETLOG_MAX:
            self.dropped["over the limit"] += 1
            return
        rec = parse_record(data)
        if rec is None:
            self.dropped["malformed"] += 1
        else:
            self.records.append(rec)

    def _serve(self) -> None:
        # a selector (epoll), not select(): the socket's fd number may be past select's 1024
        with selectors.DefaultSelector() as sel:
            sel.register(self._sock, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while not self._stop.is_set():
                if not any(key.fileobj is self._sock for key, _ in sel.select()):
                    continue
                try:
                    data = self._sock.recv(1 << 16)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    self.dropped[f"the receiver stopped: {exc}"] += 1
                    return
                self._take(data)

    def stop(self) -> tuple[list[dict[str, Any]], list[str]]:
        """Stop, drain what is still queued, and return (records, problems)."""
        self._stop.set()
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=5)
        os.close(self._wake_r)
        os.close(self._wake_w)
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except (BlockingIOError, OSError):
                break
            self._take(data)
        self._sock.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass
        problems = [f"network log: {n} datagram(s) dropped ({why})" for why, n in sorted(self.dropped.items())]
        return self.records, problems


def parse_record(data: bytes) -> dict[str, Any] | None:
    """One audit-hook datagram as a harness event, or None when malformed."""
    if len(data) > 4096:
        return None
    try:
        obj = json.loads(data.decode("utf-8"), parse_constant=lambda _: None)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(obj, dict):
        return None
    host, port, via = obj.get("host"), obj.get("port"), obj.get("via")
    if not isinstance(host, str) or len(host) > 255:
        return None
    if isinstance(port, bool) or not (port is None or isinstance(port, (int, str))):
        return None
    if isinstance(port, str):
        from pytest_agentdrift.safetext import escape_path as _esc

        port = _esc(port[:32])
    if via not in ("socket.connect", "socket.getaddrinfo"):
        return None
    from pytest_agentdrift.safetext import escape_path

    return {
        "type": "network_attempt",
        "host": escape_path(host),
        "port": port,
        "via": via,
        "source": "harness",
        "observer": "python-audit-hook",
    }
