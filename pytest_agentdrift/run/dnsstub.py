"""A logging DNS stub: answers every query NXDOMAIN and records the name asked. No pytest.

The harness binds its sockets inside the sandbox's network namespace
(127.0.0.1:53, UDP and TCP; see netwatch.py) and the sandbox's
/etc/resolv.conf names it, so every program's lookups reach it, curl's as
much as Python's. Nothing is ever resolved: the sandbox has no network,
and a name that does not exist makes a client fail fast instead of
waiting for a timeout.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeAlias, TypeVar

from pytest_agentdrift.safetext import escape_path

QTYPES = {
    1: "A",
    2: "NS",
    5: "CNAME",
    6: "SOA",
    12: "PTR",
    15: "MX",
    16: "TXT",
    28: "AAAA",
    33: "SRV",
    65: "HTTPS",
    255: "ANY",
}
RCODE_FORMERR, RCODE_NXDOMAIN = 1, 3
_MAX_TCP_CLIENTS = 16

#: the address of the socket a lookup came from, as recvfrom and accept give it on the stub's IPv4 sockets
ClientAddress: TypeAlias = tuple[str, int]

_T = TypeVar("_T")


class Query:
    __slots__ = ("flags", "id", "name", "qclass", "qtype", "question")

    def __init__(self, id_: int, flags: int, name: str, qtype: int, qclass: int, question: bytes):
        self.id, self.flags, self.name, self.qtype, self.qclass, self.question = (
            id_,
            flags,
            name,
            qtype,
            qclass,
            question,
        )

    @property
    def qtype_name(self) -> str:
        return QTYPES.get(self.qtype, str(self.qtype))


def parse_query(msg: bytes) -> Query:
    """The first question of a DNS query; ValueError when it is not one."""
    if len(msg) < 12:
        raise ValueError("shorter than a DNS header")
    id_, flags, qdcount = struct.unpack_from("!HHH", msg)
    if flags & 0x8000:
        raise ValueError("a response, not a query")
    if qdcount < 1:
        raise ValueError("no question")
    labels: list[str] = []
    off = 12
    while True:
        if off >= len(msg):
            raise ValueError("truncated name")
        n = msg[off]
        if n & 0xC0:
            raise ValueError("compressed name in a question")
        off += 1
        if n == 0:
            break
        if off + n > len(msg) or len(labels) > 127:
            raise ValueError("truncated name")
        labels.append(msg[off : off + n].decode("ascii", "backslashreplace"))
        off += n
    if off + 4 > len(msg):
        raise ValueError("truncated question")
    qtype, qclass = struct.unpack_from("!HH", msg, off)
    return Query(id_, flags, ".".join(labels), qtype, qclass, msg[12 : off + 4])


def nxdomain(q: Query) -> bytes:
    """The answer: this name does not exist (recursion 'available', so clients do not retry elsewhere)."""
    flags = 0x8000 | (q.flags & 0x7900) | 0x0080 | RCODE_NXDOMAIN  # QR, opcode+RD kept, RA, NXDOMAIN
    return struct.pack("!HHHHHH", q.id, flags, 1, 0, 0, 0) + q.question


def formerr(msg: bytes) -> bytes | None:
    if len(msg) < 12:
        return None
    id_, flags = struct.unpack_from("!HH", msg)
    return struct.pack("!HHHHHH", id_, 0x8000 | (flags & 0x7900) | RCODE_FORMERR, 0, 0, 0, 0)


class DnsStub:
    """Serves given UDP and TCP sockets (already bound) in harness threads.

    `record(event)` gets one `network_attempt` event per lookup: the A and
    AAAA queries a resolver sends together from one socket count once.
    `attribute(proto, client_addr)` names the program that asked, or None.
    """

    def __init__(
        self,
        udp: socket.socket | None,
        tcp: socket.socket | None,
        record: Callable[[dict[str, Any]], None],
        attribute: Callable[[str, ClientAddress], str | None] = lambda proto, addr: None,
        clock: Callable[[], float] = time.monotonic,
        dedupe_s: float = 2.0,
    ):
        self.udp, self.tcp = udp, tcp
        self.record = record
        self.attribute = attribute
        self.clock = clock
        self.dedupe_s = dedupe_s
        self.queries = 0
        self._recent: dict[tuple[str, ClientAddress, str], float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe()  # stop() wakes the serving threads at once, no polling delay
        self._threads: list[threading.Thread] = []
        self._tcp_slots = threading.BoundedSemaphore(_MAX_TCP_CLIENTS)

    def start(self) -> DnsStub:
        for target, sock in ((self._serve_udp, self.udp), (self._serve_tcp, self.tcp)):
            if sock is not None:
                t = threading.Thread(target=target, args=(sock,), name="agentdrift-dns", daemon=True)
                t.start()
                self._threads.append(t)
        return self

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        os.write(self._wake_w, b"x")
        for t in self._threads:
            t.join(2)
        for sock in (self.udp, self.tcp):
            if sock is not None:
                sock.close()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)

    def answer(self, msg: bytes, proto: str, client: ClientAddress) -> bytes | None:
        try:
            q = parse_query(msg)
        except ValueError:
            return formerr(msg)
        self._note(q, proto, client)
        return nxdomain(q)

    def _note(self, q: Query, proto: str, client: ClientAddress) -> None:
        now = self.clock()
        key = (proto, client, q.name.lower().rstrip("."))
        with self._lock:
            self.queries += 1
            self._recent = {k: t for k, t in self._recent.items() if now - t < self.dedupe_s}
            if key in self._recent:
                return
            self._recent[key] = now
        program = self.attribute(proto, client)  # before the answer: the asking socket is still open
        self.record(
            {
                "source": "harness",
                "type": "network_attempt",
                "host": escape_path(q.name.rstrip(".") or "."),  # a label can hold any byte, ESC included
                "port": None,
                "program": program,
                "allowed": False,
                "via": "dns",
                "qtype": q.qtype_name,
            }
        )

    def _arrivals(self, sock: socket.socket, take: Callable[[], _T]) -> Iterator[_T]:
        """What `take` returns each time `sock` is ready, until the stub stops (the wake pipe
        ends a wait at once); a socket error in between is skipped."""
        while not self._stop.is_set():
            try:
                waits: list[socket.socket | int] = [sock, self._wake_r]
                ready, _, _ = select.select(waits, [], [], 0.2)
                if sock not in ready:
                    continue
                got = take()
            except OSError:
                if self._stop.is_set():
                    return
                continue
            yield got

    def _serve_udp(self, sock: socket.socket) -> None:
        for msg, client in self._arrivals(sock, lambda: sock.recvfrom(4096)):
            reply = self.answer(msg, "udp", client)
            if reply is not None:
                try:
                    sock.sendto(reply, client)
                except OSError:
                    pass

    def _serve_tcp(self, sock: socket.socket) -> None:
        for conn, client in self._arrivals(sock, sock.accept):
            if not self._tcp_slots.acquire(blocking=False):
                conn.close()
                continue
            threading.Thread(target=self._one_tcp, args=(conn, client), daemon=True).start()

    def _one_tcp(self, conn: socket.socket, client: ClientAddress) -> None:
        try:
            conn.settimeout(2.0)
            for _ in range(8):  # a client may ask A and AAAA on one connection
                head = _recv_exact(conn, 2)
                if head is None:
                    return
                (n,) = struct.unpack("!H", head)
                msg = _recv_exact(conn, n)
                if msg is None:
                    return
                reply = self.answer(msg, "tcp", client)
                if reply is None:
                    return
                conn.sendall(struct.pack("!H", len(reply)) + reply)
        except OSError:
            pass
        finally:
            conn.close()
            self._tcp_slots.release()


def _recv_exact(conn: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf
