"""Network attempts of every program in the sandbox, seen from the harness. No pytest.

Under bubblewrap the agent has its own network namespace with nothing but
a loopback device. The harness enters that namespace from one of its own
threads (setns affects only the calling thread), binds three sockets there
and leaves again:

* 127.0.0.1:53, UDP and TCP: the logging DNS stub (dnsstub.py), named by the
  sandbox's private /etc/resolv.conf;
* 127.0.0.1:3128: the recording CONNECT proxy (netproxy.py), named by
  HTTP_PROXY / HTTPS_PROXY / ALL_PROXY (and the lowercase forms).

The sockets live in the agent's namespace but are held by the harness
process alone: no process inside the sandbox serves them, so the agent can
neither kill the observer nor rewrite its log (which lives in a
harness-only directory). Each connection or query is attributed to the
program that made it by looking its socket up in the namespace's socket
table and in the sandbox processes' open files.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pytest_agentdrift.canonical import close_fds
from pytest_agentdrift.run.dnsstub import ClientAddress, DnsStub
from pytest_agentdrift.run.netproxy import RecordingProxy

EVALUATOR_COMPONENT = "network_watch"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

CLONE_NEWNET = 0x40000000
PROXY_PORT = 3128
DNS_PORT = 53
MAX_EVENTS = 10_000
#: how long to wait for the sandbox's loopback to come up: bubblewrap raises it after the namespace exists,
#: so a busy machine can enter the namespace first and find 127.0.0.1 not there yet (EADDRNOTAVAIL)
LOOPBACK_WAIT_S = 5.0
RESOLV_CONF = "# written by pytest-agentdrift: every lookup goes to the harness's logging stub\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n"


def bind_in_netns(pid: int, specs: Iterable[tuple[int, int]]) -> list[socket.socket]:
    """Sockets bound to 127.0.0.1 inside the network namespace of `pid`.

    `specs` are (socket type, port) pairs. Runs in a short-lived thread that
    enters the namespace, so the rest of the harness never leaves its own.
    """
    specs = list(specs)
    out: list[socket.socket] = []
    failure: list[BaseException] = []

    def work() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            if libc.setns(target, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns into the sandbox's network namespace: {os.strerror(err)}")
            try:
                deadline = time.monotonic() + LOOPBACK_WAIT_S
                for kind, port in specs:
                    s = socket.socket(socket.AF_INET, kind)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    _bind_when_up(s, port, deadline)
                    if kind == socket.SOCK_STREAM:
                        s.listen(64)
                    out.append(s)
            finally:
                libc.setns(own, CLONE_NEWNET)
        except BaseException as exc:  # noqa: BLE001  (handed to the caller's thread, re-raised there)
            failure.append(exc)
            for s in out:
                s.close()
        finally:
            os.close(own)
            os.close(target)

    t = threading.Thread(target=work, name="agentdrift-netns")
    t.start()
    t.join()
    if failure:
        raise failure[0] if isinstance(failure[0], OSError) else OSError(str(failure[0]))
    return out


def _bind_when_up(s: socket.socket, port: int, deadline: float) -> None:
    """Bind `s` to 127.0.0.1:`port`, waiting (up to `deadline`) for the namespace's loopback to be up."""
    while True:
        try:
            s.bind(("127.0.0.1", port))
            return
        except OSError as exc:
            if exc.errno != errno.EADDRNOTAVAIL or time.monotonic() >= deadline:
                s.close()
                raise
            time.sleep(0.01)


# ---- which program made a connection ------------------------------------------------------------


def _parse_addr(hexaddr: str) -> tuple[str, int]:
    ip_hex, port_hex = hexaddr.split(":")
    raw = bytes.fromhex(ip_hex)
    if len(raw) == 4:
        ip = socket.inet_ntop(socket.AF_INET, struct.pack("<I", struct.unpack(">I", raw)[0]))
    else:
        words = struct.unpack(">4I", raw)
        ip = socket.inet_ntop(socket.AF_INET6, b"".join(struct.pack("<I", w) for w in words))
    return ip, int(port_hex, 16)


def socket_inode(ns_pid: int, proto: str, client: ClientAddress) -> int | None:
    """The inode of the socket whose local address is `client`, from the namespace's tables."""
    host, port = client[0], client[1]
    for table in (proto, proto + "6"):
        try:
            lines = Path(f"/proc/{ns_pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) < 10:
                continue
            try:
                ip, p = _parse_addr(f[1])
            except (ValueError, OSError):
                continue
            if p == port and ip in (host, f"::ffff:{host}"):
                return int(f[9]) or None
    return None


def program_of(pid: int) -> str | None:
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
        return os.path.basename(exe.removesuffix(" (deleted)")) or None
    except OSError:
        pass
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() or None
    except OSError:
        return None


def owner_program(
    ns_pid: int, proto: str, client: ClientAddress, candidates: Callable[[], Iterable[int]]
) -> str | None:
    inode = socket_inode(ns_pid, proto, client)
    if inode is None:
        return None
    needle = f"socket:[{inode}]"
    for pid in candidates():
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == needle:
                    return program_of(pid)
            except OSError:
                continue
    return None


def pids_in_netns(ns_pid: int) -> list[int]:
    try:
        ns = os.readlink(f"/proc/{ns_pid}/ns/net")
    except OSError:
        return []
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.readlink(f"/proc/{name}/ns/net") == ns:
                    out.append(int(name))
            except OSError:
                continue
    return out


# ---- the proxy on a socket it did not bind ----------------------------------------------------

_conn = threading.local()


class _ListenerServer:
    """What RecordingProxy.stop() expects of its server, for a listener bound elsewhere."""

    def __init__(self, proxy: AttributingProxy):
        self.proxy = proxy

    def shutdown(self) -> None:
        if not self.proxy._stop_accepting.is_set():
            self.proxy._stop_accepting.set()
            os.write(self.proxy._wake_w, b"x")
        if self.proxy._serve_thread is not None:
            self.proxy._serve_thread.join(2)

    def server_close(self) -> None:
        self.proxy._listener.close()
        close_fds((self.proxy._wake_r, self.proxy._wake_w))


class AttributingProxy(RecordingProxy):
    """The recording proxy, serving a listener bound in the sandbox's namespace, naming the program."""

    def __init__(
        self,
        allow: Iterable[str],
        listener: socket.socket,
        attribute: Callable[[str, ClientAddress], str | None],
        **kw: Any,
    ):
        super().__init__(allow, **kw)
        self._listener = listener
        self._attribute = attribute
        self._stop_accepting = threading.Event()
        self._wake_r, self._wake_w = os.pipe()  # stop wakes the accept loop at once
        self._programs: dict[int, str | None] = {}

    def start(self) -> AttributingProxy:
        self._server = _ListenerServer(self)
        self._serve_thread = threading.Thread(target=self._accept_loop, name="agentdrift-proxy", daemon=True)
        self._serve_thread.start()
        return self

    def _accept_loop(self) -> None:
        while not self._stop_accepting.is_set():
            try:
                waits: list[socket.socket | int] = [self._listener, self._wake_r]
                ready, _, _ = select.select(waits, [], [], 0.2)
                if self._listener not in ready:
                    continue
                client, addr = self._listener.accept()
            except OSError:
                if self._stop_accepting.is_set():
                    return
                continue
            with self._lock:
                self._programs[id(client)] = self._attribute("tcp", addr)
            self._accept(client)

    def _serve(self, client: socket.socket) -> None:
        with self._lock:
            _conn.program = self._programs.pop(id(client), None)
        super()._serve(client)

    def _record(self, host: str, port: int, allowed: bool, **extra: Any) -> dict[str, Any]:
        extra.setdefault("program", getattr(_conn, "program", None))
        event = super()._record(host, port, allowed, **extra)
        event.setdefault("program", None)
        return event


class NetObserver:
    """The DNS stub and the proxy of one run, bound in the sandbox's namespace."""

    def __init__(self, allow: Iterable[str], log_path: Path | None, gateway: Any = None):
        self.allow = list(allow)
        self.log_path = log_path
        #: the run's model gateway (run/modelgateway.ModelGateway), served on GATEWAY_PORT onwards
        self.gateway = gateway
        self.dns_events: list[dict[str, Any]] = []
        self.dropped = 0
        self.proxy: AttributingProxy | None = None
        self.dns: DnsStub | None = None
        self._lock = threading.Lock()

    def start(self, ns_pid: int, candidates: Callable[[], Iterable[int]] | None = None) -> dict[str, str]:
        """Bind and serve; returns the proxy variables for the agent's environment."""
        from pytest_agentdrift.run.modelgateway import GATEWAY_PORT, covered

        routes = self.gateway.routes if self.gateway is not None else []
        udp, tcp, proxy_sock, *gateway_socks = bind_in_netns(
            ns_pid,
            [
                (socket.SOCK_DGRAM, DNS_PORT),
                (socket.SOCK_STREAM, DNS_PORT),
                (socket.SOCK_STREAM, PROXY_PORT),
                *((socket.SOCK_STREAM, GATEWAY_PORT + i) for i in range(len(routes))),
            ],
        )
        cands = candidates or (lambda: pids_in_netns(ns_pid))

        def attribute(proto: str, client: ClientAddress) -> str | None:
            try:
                return owner_program(ns_pid, proto, client, cands)
            except OSError:
                return None

        self.dns = DnsStub(udp, tcp, self._record_dns, attribute).start()
        self.proxy = AttributingProxy(
            self.allow, proxy_sock, attribute, events_path=self.log_path, covered=covered(routes)
        ).start()
        if self.gateway is not None:
            self.gateway.serve(gateway_socks)
        return proxy_env(f"127.0.0.1:{PROXY_PORT}")

    def _record_dns(self, event: dict[str, Any]) -> None:
        with self._lock:
            if len(self.dns_events) >= MAX_EVENTS:
                self.dropped += 1
                return
            self.dns_events.append(event)
            if self.log_path is not None:
                with open(self.log_path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(event, sort_keys=True) + "\n")

    def stop(self) -> None:
        if self.dns is not None:
            self.dns.stop()
        if self.proxy is not None:
            self.proxy.stop()
        if self.gateway is not None:
            self.gateway.stop()

    @property
    def proxy_events(self) -> list[dict[str, Any]]:
        return [dict(e, program=e.get("program")) for e in (self.proxy.events if self.proxy else [])]


def proxy_env(addr: str) -> dict[str, str]:
    url = f"http://{addr}"
    env = {name: url for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")}
    env.update(NO_PROXY="", no_proxy="", AGENTDRIFT_PROXY_ADDR=addr)
    return env


def merge_python_hook_events(
    hook_events: list[dict[str, Any]], dns_events: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Drop the Python audit hook's lookups that the DNS stub saw too (one attempt, one event).

    Each stub lookup of a name cancels one `socket.getaddrinfo` record of the
    same name; lookups the stub never saw (IP literals, /etc/hosts names) and
    connect records stay.
    """
    pending: dict[str, int] = {}
    for e in dns_events:
        host = str(e.get("host", "")).lower()
        pending[host] = pending.get(host, 0) + 1
    out = []
    for e in hook_events:
        host = str(e.get("host", "")).lower().rstrip(".")
        if e.get("via") == "socket.getaddrinfo" and pending.get(host):
            pending[host] -= 1
            continue
        out.append(e)
    return out
