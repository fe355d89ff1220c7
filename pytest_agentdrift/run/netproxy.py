"""A recording HTTP CONNECT proxy for real agents (stdlib only).

The sandbox has no network of its own. A real agent still needs its model
API, so the harness starts this proxy on the host side and lets the agent
reach it (HTTPS_PROXY pointing at a loopback port the harness forwards; see
docs/agents.md). The proxy:

- listens on 127.0.0.1 / ::1 (never another interface) or on a Unix socket;
- tunnels `CONNECT host:port` when the host is on the allowlist (exact name
  or `*.suffix`, on an allowed port) and answers 403 to everything else,
  plain-HTTP requests included: model APIs are HTTPS, and a tunnel-only
  proxy never sees or stores request bodies or credentials;
- appends one `network_attempt` event per connection, allowed or refused,
  to an in-memory list and, if given, a JSONL file, at the moment of the
  decision (so a run killed mid-request still has the evidence);
- bounds everything: a connection cap, header/connect/idle timeouts, and a
  stop() that joins its threads with a deadline.

It does not look inside TLS: what was sent to an allowed host is not
observable, only that a tunnel to it was opened.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import select
import socket
import socketserver
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

_MAX_HEADER_BYTES = 16 * 1024
#: events kept per proxy (like the DNS stub's): the rest are counted in `dropped`, never stored
MAX_EVENTS = 10_000
#: a DNS name: at most 253 characters, labels of at most 63 (letters, digits, '-', '_')
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_RELAY_CHUNK = 64 * 1024
_POLL_S = 0.2  # how often blocked loops look at the stop flag
_ACCEPT_POLL_S = 0.02  # the accept loop's: stop() waits for it once per run, so it is short


#: the most of one client-sent string an event keeps (a host name is at most 253 characters)
FIELD_MAX = 300


def _cut(text: str) -> str:
    return text if len(text) <= FIELD_MAX else text[:FIELD_MAX] + f"…({len(text) - FIELD_MAX} more)"


class Allowlist:
    """Host patterns: `name`, `*.suffix`, each optionally with `:port`.

    Without a port an entry allows `default_ports` (443). `*.example.com`
    matches subdomains only, never `example.com` itself: list both when both
    are needed, so nothing is allowed by accident.
    """

    def __init__(self, entries: Iterable[str], default_ports: Iterable[int] = (443,)):
        self.default_ports = frozenset(int(p) for p in default_ports)
        self.exact: dict[str, frozenset[int]] = {}
        self.suffixes: list[tuple[str, frozenset[int]]] = []
        self.entries: tuple[str, ...] = tuple(entries)
        for entry in self.entries:
            pattern, ports = self._parse(entry)
            if pattern.startswith("*."):
                self.suffixes.append((pattern[1:], ports))  # keep the leading dot
            else:
                self.exact[pattern] = self.exact.get(pattern, frozenset()) | ports

    def _parse(self, entry: str) -> tuple[str, frozenset[int]]:
        raw = str(entry).strip()
        if not raw or any(c in raw for c in "/@ \t") or "://" in raw:
            raise ValueError(f"allowlist entry {entry!r}: expected host, *.suffix, or host:port")
        host, port = split_host_port(raw, None)
        if host is None:
            raise ValueError(f"allowlist entry {entry!r}: cannot read a host from it")
        if "*" in host and not (host.startswith("*.") and len(host) > 2 and "*" not in host[2:]):
            raise ValueError(f"allowlist entry {entry!r}: a wildcard must be a leading '*.'")
        return host, frozenset({port}) if port is not None else self.default_ports

    def allows(self, host: str, port: int) -> bool:
        host = normalise_host(host)
        if not host:
            return False
        if port in self.exact.get(host, frozenset()):
            return True
        return any(
            host.endswith(suffix) and len(host) > len(suffix) and port in ports for suffix, ports in self.suffixes
        )


def normalise_host(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host.rstrip(".")


def split_host_port(target: str, default_port: int | None) -> tuple[str | None, int | None]:
    """`host:port`, `[v6]:port`, or a bare host -> (host, port); (None, None) if unreadable."""
    target = target.strip()
    if target.startswith("["):
        end = target.find("]")
        if end == -1:
            return None, None
        host, rest = target[1:end], target[end + 1 :]
        if rest and not rest.startswith(":"):
            return None, None
        port_text = rest[1:] if rest else None
    elif target.count(":") == 1:
        host, port_text = target.split(":", 1)
    elif ":" in target:
        host, port_text = target, None  # a bare IPv6 address
    else:
        host, port_text = target, None
    if port_text is None:
        port = default_port
    else:
        # ASCII digits only: `'¹²'.isdigit()` is true and int() refuses it
        if not (port_text.isascii() and port_text.isdigit() and len(port_text) <= 5) or not 0 < int(port_text) < 65536:
            return None, None
        port = int(port_text)
    host = normalise_host(host)
    return (host or None), port


def valid_host(host: str) -> bool:
    """An IP literal or a DNS name a resolver accepts (no over-long or non-ASCII label)."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    return len(host) <= 253 and all(_LABEL.fullmatch(label) for label in host.split("."))


class ProxyServer(Protocol):
    """What RecordingProxy needs of the server that accepts its connections: to stop it. A socketserver
    of its own, or what run/netwatch.py serves a listener bound in the sandbox's namespace with."""

    def shutdown(self) -> None: ...

    def server_close(self) -> None: ...


class RecordingProxy:
    """The proxy. Use as a context manager, or start() / stop().

    `allow`: allowlist entries (see Allowlist). `events`: a list the events
    are appended to (a new one if omitted; also `proxy.events`).
    `events_path`: a JSONL file the events are appended to as they happen.
    `unix_path`: listen on this Unix socket instead of TCP. `host`/`port`:
    the TCP address; loopback only, port 0 picks a free one.
    """

    def __init__(
        self,
        allow: Iterable[str],
        *,
        events: list[dict[str, Any]] | None = None,
        events_path: str | os.PathLike[str] | None = None,
        unix_path: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        default_ports: Iterable[int] = (443,),
        max_connections: int = 32,
        header_timeout: float = 10.0,
        connect_timeout: float = 10.0,
        idle_timeout: float = 120.0,
        stop_timeout: float = 5.0,
        covered: Iterable[tuple[str, int]] = (),
    ):
        self.allowlist = Allowlist(allow, default_ports)
        #: (host, port) the harness's model gateway covers (run/modelgateway.py): a tunnel to one
        #: would carry model calls the harness cannot see, so it is refused
        self.covered = frozenset((normalise_host(h), p) for h, p in covered)
        if unix_path is None and not _is_loopback(host):
            raise ValueError(
                f"proxy host {host!r} is not a loopback address: the proxy must never listen beyond this machine"
            )
        self.events: list[dict[str, Any]] = events if events is not None else []
        self.dropped = 0  # events over MAX_EVENTS, counted only
        self.events_path = Path(events_path) if events_path is not None else None
        self.unix_path = Path(unix_path) if unix_path is not None else None
        self._bind = (host, port)
        self.max_connections = max_connections
        self.header_timeout = header_timeout
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.stop_timeout = stop_timeout
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_connections)
        self._stopping = threading.Event()
        self._threads: set[threading.Thread] = set()
        self._sockets: set[socket.socket] = set()
        self._server: ProxyServer | None = None
        self._serve_thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------

    def start(self) -> RecordingProxy:
        if self._server is not None:
            raise RuntimeError("proxy already started")
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            pass  # never used: process_request below takes the socket itself

        if self.unix_path is not None:
            if self.unix_path.exists() or self.unix_path.is_symlink():
                raise FileExistsError(f"{self.unix_path}: refusing to replace an existing file with the proxy socket")
            server: socketserver.BaseServer = _UnixServer(str(self.unix_path), Handler, proxy)
            os.chmod(self.unix_path, 0o600)  # only this user (and what it forwards) may connect
        else:
            family = socket.AF_INET6 if ":" in self._bind[0] else socket.AF_INET
            server = _TCPServer(self._bind, Handler, proxy, family)
        self._server = server
        self._serve_thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": _ACCEPT_POLL_S}, name="agentdrift-proxy", daemon=True
        )
        self._serve_thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, close every open tunnel, join threads (bounded)."""
        server = self._server
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        with self._lock:
            for sock in list(self._sockets):
                _close(sock)
            threads = list(self._threads)
        deadline = time.monotonic() + self.stop_timeout
        for thread in [self._serve_thread, *threads]:
            if thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
        if self.unix_path is not None:
            try:
                self.unix_path.unlink()
            except FileNotFoundError:
                pass
        self._server = None

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int] | str:
        """(host, port) for TCP, the socket path for a Unix socket."""
        if self._server is None:
            raise RuntimeError("proxy not started")
        if self.unix_path is not None:
            return str(self.unix_path)
        if not isinstance(self._server, socketserver.BaseServer):
            raise RuntimeError("the proxy serves a listener bound elsewhere: it has no address of its own")
        addr = self._server.server_address  # (host, port), and flow and scope ids for IPv6
        if isinstance(addr, tuple) and isinstance(addr[0], str) and isinstance(addr[1], int):
            return addr[0], addr[1]
        raise RuntimeError(f"the proxy's TCP server is bound to no (host, port): {addr!r}")

    @property
    def url(self) -> str:
        """The HTTPS_PROXY value for a TCP proxy (`http://127.0.0.1:PORT`)."""
        addr = self.address
        if isinstance(addr, str):
            raise RuntimeError("a Unix-socket proxy has no URL; forward a loopback port to it")
        host, port = addr
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def describe(self) -> dict[str, Any]:
        """What the manifest records about the network policy."""
        return {
            "allowlist": list(self.allowlist.entries),
            "default_ports": sorted(self.allowlist.default_ports),
            "mode": "connect-tunnel-only",
            "enforced_by": "harness proxy",
        }

    # -- recording -------------------------------------------------------

    def _record(self, host: str, port: int, allowed: bool, **extra: Any) -> dict[str, Any]:
        from pytest_agentdrift.safetext import escape_path

        # the host and the method are what the client sent: any byte but a line end, up to the whole
        # request head; each is cut before escaping so that an event stays small (events are capped
        # by count, and escaping can grow a control character six-fold)
        event: dict[str, Any] = {
            "type": "network_attempt",
            "host": escape_path(_cut(host)),
            "port": port,
            "allowed": allowed,
            "source": "harness",
        }
        event.update({k: escape_path(_cut(v)) if isinstance(v, str) else v for k, v in extra.items() if v is not None})
        with self._lock:
            if len(self.events) >= MAX_EVENTS:
                self.dropped += 1
                return event
            self.events.append(event)
            if self.events_path is not None:
                # Append-and-flush per event: a killed run keeps what it did.
                with open(self.events_path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(event, sort_keys=True) + "\n")
        return event

    # -- connections -----------------------------------------------------

    def _accept(self, sock: socket.socket) -> None:
        if self._stopping.is_set():
            _close(sock)
            return
        if not self._slots.acquire(blocking=False):
            self._record("?", 0, False, reason="too many connections")
            _reply(sock, 503, "Too Many Connections")
            _close(sock)
            return
        thread = threading.Thread(target=self._serve, args=(sock,), name="agentdrift-proxy-conn", daemon=True)
        with self._lock:
            self._threads.add(thread)
            self._sockets.add(sock)
        thread.start()

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            request = self._connect_request(client)
            if request is None:
                return
            method, host, port, rest = request
            try:
                upstream = socket.create_connection((host, port), timeout=self.connect_timeout)
            except OSError as exc:
                self._record(
                    host, port, True, method=method, error=f"upstream connect failed: {exc.__class__.__name__}"
                )
                _reply(client, 502, "Bad Gateway")
                return
            self._record(host, port, True, method=method)
            with self._lock:
                self._sockets.add(upstream)
            client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
            self._relay(client, upstream)
        except OSError:
            pass  # a peer went away; the attempt is already recorded
        except Exception as exc:  # whatever the target, a refused attempt on record, never a dead handler
            self._record("?", 0, False, reason=f"proxy error: {type(exc).__name__}")
            _reply(client, 400, "Bad Request")
        finally:
            with self._lock:
                self._sockets.discard(client)
                if upstream is not None:
                    self._sockets.discard(upstream)
                self._threads.discard(threading.current_thread())
            if upstream is not None:
                _close(upstream)
            _close(client)
            self._slots.release()

    def _connect_request(self, client: socket.socket) -> tuple[str, str, int, bytes] | None:
        """(method, host, port, bytes read past the head) of an allowed CONNECT; else the refusal
        is recorded and answered, and None."""
        head, rest = self._read_head(client)
        if head is None:
            self._record("?", 0, False, reason="no complete request head")
            _reply(client, 400, "Bad Request")
            return None
        method, target = _request_line(head)
        if method is None or target is None:
            self._record("?", 0, False, reason="malformed request line")
            _reply(client, 400, "Bad Request")
            return None
        if method != "CONNECT":
            host, port = _absolute_target(target)
            self._record(host or "?", port or 0, False, method=method, reason="only CONNECT tunnels are allowed")
            _reply(client, 403, "Forbidden")
            return None
        host, port = split_host_port(target, None)
        if host is None or port is None or not valid_host(host):
            self._record(target[:200], 0, False, method=method, reason="unreadable CONNECT target")
            _reply(client, 400, "Bad Request")
            return None
        if (host, port) in self.covered:
            self._record(
                host, port, False, method=method, reason="covered by the harness's model gateway (use the base URL)"
            )
            _reply(client, 403, "Forbidden")
            return None
        if not self.allowlist.allows(host, port):
            self._record(host, port, False, method=method, reason="not in allowlist")
            _reply(client, 403, "Forbidden")
            return None
        return method, host, port, rest

    def _read_head(self, client: socket.socket) -> tuple[bytes | None, bytes]:
        client.settimeout(_POLL_S)
        buf = b""
        deadline = time.monotonic() + self.header_timeout
        while b"\r\n\r\n" not in buf:
            if self._stopping.is_set() or time.monotonic() > deadline or len(buf) > _MAX_HEADER_BYTES:
                return None, b""
            try:
                chunk = client.recv(4096)
            except socket.timeout:
                continue
            if not chunk:
                return None, b""
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        return head, rest

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        peers = {client: upstream, upstream: client}
        open_reads = {client, upstream}
        for sock in peers:
            sock.settimeout(self.connect_timeout)  # bounds a blocked sendall
        last_activity = time.monotonic()
        while open_reads and not self._stopping.is_set():
            if time.monotonic() - last_activity > self.idle_timeout:
                return
            try:
                ready, _, _ = select.select(list(open_reads), [], [], _POLL_S)
            except (OSError, ValueError):
                return
            for sock in ready:
                try:
                    data = sock.recv(_RELAY_CHUNK)
                except (socket.timeout, BlockingIOError):
                    continue
                if not data:
                    # Half-close: pass the EOF on, keep reading the other way.
                    open_reads.discard(sock)
                    try:
                        peers[sock].shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    continue
                peers[sock].sendall(data)
                last_activity = time.monotonic()


class _ProxyServerMixin:
    proxy: RecordingProxy

    def process_request(self, request: object, client_address: object) -> None:  # noqa: ARG002
        # a stream server's request is the connected socket (socketserver's stubs type a datagram's too)
        if not isinstance(request, socket.socket):
            raise TypeError(f"a stream server's request is its connected socket, not {type(request).__name__}")
        # Our own bounded threads instead of ThreadingMixIn's unbounded ones.
        self.proxy._accept(request)

    def shutdown_request(self, request: object) -> None:
        pass  # the connection thread owns the socket and closes it


class _TCPServer(_ProxyServerMixin, socketserver.TCPServer):
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type, proxy: RecordingProxy, family: int):
        self.address_family = family
        self.proxy = proxy
        super().__init__(address, handler)


class _UnixServer(_ProxyServerMixin, socketserver.UnixStreamServer):
    def __init__(self, path: str, handler: type, proxy: RecordingProxy):
        self.proxy = proxy
        super().__init__(path, handler)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _request_line(head: bytes) -> tuple[str | None, str | None]:
    line = head.split(b"\r\n", 1)[0].decode("latin-1", "replace")
    parts = line.split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return None, None
    return parts[0].upper(), parts[1]


def _absolute_target(target: str) -> tuple[str | None, int | None]:
    """Host and port of a plain-proxy request (`GET http://host:port/path`)."""
    for scheme, port in (("http://", 80), ("https://", 443)):
        if target.lower().startswith(scheme):
            authority = target[len(scheme) :].split("/", 1)[0].rsplit("@", 1)[-1]
            return split_host_port(authority, port)
    return None, None


def _reply(sock: socket.socket, code: int, reason: str) -> None:
    body = f"{code} {reason}: pytest-agentdrift network policy\n".encode()
    try:
        sock.sendall(
            f"HTTP/1.1 {code} {reason}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
        )
    except OSError:
        pass


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
