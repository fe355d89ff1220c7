"""The recording CONNECT proxy, tested on loopback only.

The "allowed upstream" is a plain TCP echo server on 127.0.0.1 (no TLS: the
proxy only tunnels bytes, so what flows through the tunnel does not matter).
Refused hosts are never resolved or contacted: the proxy decides on the name.
Every socket has a timeout, every loop is bounded.
"""

from __future__ import annotations

import json
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_agentdrift.run import netproxy
from pytest_agentdrift.run.netproxy import Allowlist, RecordingProxy, split_host_port, valid_host

TIMEOUT = 5.0


@pytest.fixture
def echo_server() -> Iterator[int]:
    """A loopback TCP server that echoes what it receives, one client at a time."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conn.settimeout(TIMEOUT)
            with conn:
                for _ in range(1000):  # bounded
                    try:
                        data = conn.recv(4096)
                    except OSError:
                        break
                    if not data:
                        break
                    conn.sendall(data)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield srv.getsockname()[1]
    stop.set()
    thread.join(TIMEOUT)
    srv.close()


def _connect(proxy: RecordingProxy) -> socket.socket:
    addr = proxy.address
    if isinstance(addr, str):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(TIMEOUT)
        sock.connect(addr)
        return sock
    return socket.create_connection(addr, timeout=TIMEOUT)


def _read_head(sock: socket.socket) -> bytes:
    buf = b""
    for _ in range(100):
        if b"\r\n\r\n" in buf:
            break
        chunk = sock.recv(4096)
        if not chunk:
            break
        buf += chunk
    return buf


def _tunnel_roundtrip(proxy: RecordingProxy, target: str, payload: bytes) -> tuple[bytes, bytes]:
    with _connect(proxy) as sock:
        sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = _read_head(sock)
        if not head.startswith(b"HTTP/1.1 200"):
            return head, b""
        sock.sendall(payload)
        got = b""
        for _ in range(100):
            if len(got) >= len(payload):
                break
            chunk = sock.recv(4096)
            if not chunk:
                break
            got += chunk
        return head, got


def test_allowed_connect_is_tunnelled_and_recorded(echo_server: int, tmp_path: Path) -> None:
    events_file = tmp_path / "events.jsonl"
    with RecordingProxy([f"127.0.0.1:{echo_server}"], events_path=events_file) as proxy:
        head, echoed = _tunnel_roundtrip(proxy, f"127.0.0.1:{echo_server}", b"hello through the tunnel")
    assert head.startswith(b"HTTP/1.1 200")
    assert echoed == b"hello through the tunnel"
    event = {
        "type": "network_attempt",
        "host": "127.0.0.1",
        "port": echo_server,
        "allowed": True,
        "source": "harness",
        "method": "CONNECT",
    }
    assert proxy.events == [event]
    assert [json.loads(line) for line in events_file.read_text().splitlines()] == [event]


def test_refused_host_gets_403_and_is_recorded(echo_server: int) -> None:
    events: list[dict] = []
    with RecordingProxy([f"127.0.0.1:{echo_server}"], events=events) as proxy:
        head, _ = _tunnel_roundtrip(proxy, "pypi.org:443", b"x")
        # the right host on a port the allowlist does not name is refused too
        head2, _ = _tunnel_roundtrip(proxy, "127.0.0.1:1", b"x")
    assert head.startswith(b"HTTP/1.1 403")
    assert head2.startswith(b"HTTP/1.1 403")
    assert events == [
        {
            "type": "network_attempt",
            "host": "pypi.org",
            "port": 443,
            "allowed": False,
            "source": "harness",
            "method": "CONNECT",
            "reason": "not in allowlist",
        },
        {
            "type": "network_attempt",
            "host": "127.0.0.1",
            "port": 1,
            "allowed": False,
            "source": "harness",
            "method": "CONNECT",
            "reason": "not in allowlist",
        },
    ]


def test_plain_http_request_is_refused_even_for_allowed_host(echo_server: int) -> None:
    with RecordingProxy([f"127.0.0.1:{echo_server}", "api.anthropic.com"]) as proxy:
        with _connect(proxy) as sock:
            sock.sendall(b"GET http://api.anthropic.com/v1/messages HTTP/1.1\r\nHost: api.anthropic.com\r\n\r\n")
            head = _read_head(sock)
    assert head.startswith(b"HTTP/1.1 403")
    assert proxy.events == [
        {
            "type": "network_attempt",
            "host": "api.anthropic.com",
            "port": 80,
            "allowed": False,
            "source": "harness",
            "method": "GET",
            "reason": "only CONNECT tunnels are allowed",
        }
    ]


def test_garbage_request_is_answered_and_recorded() -> None:
    with RecordingProxy(["example.com"], header_timeout=1.0) as proxy:
        with _connect(proxy) as sock:
            sock.sendall(b"hello\r\n\r\n")
            head = _read_head(sock)
    assert head.startswith(b"HTTP/1.1 400")
    assert proxy.events[0]["allowed"] is False and proxy.events[0]["host"] == "?"


def test_allowed_but_unreachable_upstream_is_502() -> None:
    # Find a loopback port with nothing listening on it.
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    with RecordingProxy([f"127.0.0.1:{port}"], connect_timeout=2.0) as proxy:
        head, _ = _tunnel_roundtrip(proxy, f"127.0.0.1:{port}", b"x")
    assert head.startswith(b"HTTP/1.1 502")
    assert proxy.events[0]["allowed"] is True and "upstream connect failed" in proxy.events[0]["error"]


def test_unix_socket_listener(echo_server: int) -> None:
    # A short directory: Unix socket paths are limited to ~100 bytes.
    with tempfile.TemporaryDirectory(prefix="adp") as tmp:
        path = Path(tmp) / "p.sock"
        with RecordingProxy([f"127.0.0.1:{echo_server}"], unix_path=path) as proxy:
            assert proxy.address == str(path)
            assert (path.stat().st_mode & 0o777) == 0o600
            head, echoed = _tunnel_roundtrip(proxy, f"127.0.0.1:{echo_server}", b"via unix socket")
        assert not path.exists()
    assert head.startswith(b"HTTP/1.1 200") and echoed == b"via unix socket"


def test_stop_closes_open_tunnels_within_the_deadline(echo_server: int) -> None:
    before = set(threading.enumerate())  # earlier tests' proxies may still be winding down
    proxy = RecordingProxy([f"127.0.0.1:{echo_server}"], stop_timeout=3.0).start()
    sock = _connect(proxy)
    sock.sendall(f"CONNECT 127.0.0.1:{echo_server} HTTP/1.1\r\n\r\n".encode())
    assert _read_head(sock).startswith(b"HTTP/1.1 200")
    mine = [t for t in threading.enumerate() if t.name.startswith("agentdrift-proxy") and t not in before]
    assert mine
    proxy.stop()  # the tunnel is still open: stop must not hang on it
    sock.settimeout(TIMEOUT)
    assert sock.recv(10) == b""  # closed by the proxy
    sock.close()
    # every thread of this proxy has ended
    assert not [t for t in mine if t.is_alive()]


def test_connection_cap_answers_503() -> None:
    with RecordingProxy(["example.com"], max_connections=1, header_timeout=3.0) as proxy:
        first = _connect(proxy)  # holds the only slot while it sends nothing
        try:
            with _connect(proxy) as second:
                head = _read_head(second)
        finally:
            first.close()
    assert head.startswith(b"HTTP/1.1 503")
    assert any(e.get("reason") == "too many connections" for e in proxy.events)


def test_proxy_refuses_non_loopback_bind_and_reports_url() -> None:
    with pytest.raises(ValueError, match="loopback"):
        RecordingProxy(["example.com"], host="0.0.0.0")
    with RecordingProxy(["example.com"]) as proxy:
        host, port = proxy.address  # type: ignore[misc]
        assert host == "127.0.0.1" and port > 0
        assert proxy.url == f"http://127.0.0.1:{port}"
    assert proxy.describe()["allowlist"] == ["example.com"]


@pytest.mark.parametrize(
    ("host", "port", "allowed"),
    [
        ("api.anthropic.com", 443, True),
        ("API.Anthropic.com.", 443, True),  # case and trailing dot are normalised
        ("api.anthropic.com", 80, False),  # no port in the entry: 443 only
        ("evil-api.anthropic.com", 443, False),
        ("api.individual.githubcopilot.com", 443, True),
        ("githubcopilot.com", 443, False),  # *.suffix never matches the apex
        ("xgithubcopilot.com", 443, False),
        ("localhost", 8080, True),
        ("localhost", 8081, False),
        ("::1", 9000, True),
        ("", 443, False),
    ],
)
def test_allowlist_matching(host: str, port: int, allowed: bool) -> None:
    allow = Allowlist(["api.anthropic.com", "*.githubcopilot.com", "localhost:8080", "[::1]:9000"])
    assert allow.allows(host, port) is allowed


@pytest.mark.parametrize("entry", ["", "https://api.openai.com", "a b", "*", "*.", "foo.*.com", "host:99999", "[::1"])
def test_allowlist_rejects_bad_entries(entry: str) -> None:
    with pytest.raises(ValueError):
        Allowlist([entry])


def test_split_host_port() -> None:
    assert split_host_port("example.com:8443", None) == ("example.com", 8443)
    assert split_host_port("[::1]:443", None) == ("::1", 443)
    assert split_host_port("example.com", 443) == ("example.com", 443)
    assert split_host_port("example.com:http", None) == (None, None)
    assert split_host_port("localhost:\u00b9\u00b2", None) == (None, None)  # digits, but not ASCII ones
    assert split_host_port("localhost:0443", None) == ("localhost", 443)
    assert valid_host("api.example.com") and valid_host("::1") and valid_host("10.0.0.1")
    assert not valid_host("x" * 64 + ".example.com") and not valid_host("caf\u00e9.example.com")


@pytest.mark.parametrize(
    "target",
    ["localhost:\u00b9\u00b2", "x" * 70 + ".example.com:443", "[::1:443", "a..b:443", "\u00e9.example.com:443"],
)
def test_any_connect_target_is_a_recorded_refusal_never_a_dead_handler(target: str) -> None:
    with RecordingProxy(["*.example.com", "localhost"], header_timeout=1.0) as proxy:
        with _connect(proxy) as sock:
            sock.sendall(f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
            head = _read_head(sock)
        # the proxy still serves: the next request is answered too
        head2, _ = _tunnel_roundtrip(proxy, "other.test:443", b"x")
    assert head.startswith(b"HTTP/1.1 400"), head
    assert head2.startswith(b"HTTP/1.1 403")
    assert proxy.events[0]["allowed"] is False and proxy.events[0]["reason"] == "unreadable CONNECT target"


def test_proxy_events_are_capped_and_the_rest_counted(monkeypatch) -> None:
    monkeypatch.setattr(netproxy, "MAX_EVENTS", 5)
    with RecordingProxy(["example.com"], header_timeout=1.0) as proxy:
        for _ in range(8):
            _tunnel_roundtrip(proxy, "refused.test:443", b"x")
    assert len(proxy.events) == 5 and proxy.dropped == 3


def test_an_event_stays_small_whatever_the_client_sent() -> None:
    # a plain-HTTP request with a 12 KiB absolute target and method of control characters
    big = "\x1b" * 6000
    with RecordingProxy(["example.com"], header_timeout=1.0) as proxy:
        with _connect(proxy) as sock:
            sock.sendall(f"{big} http://{big}.test/ HTTP/1.1\r\n\r\n".encode())
            _read_head(sock)
    (event,) = proxy.events
    assert len(json.dumps(event)) < 4 * netproxy.FIELD_MAX * 6 + 500, len(json.dumps(event))
    assert "more)" in event["host"]
