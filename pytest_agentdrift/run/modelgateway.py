"""The model gateway: the harness sees an agent's model traffic itself (stdlib only, no pytest).

A tunnel through the recording proxy (run/netproxy.py) shows only that an agent opened TLS to its
model host. For every base-URL variable the harness knows (agents/modelcalls.BASE_URL_VARS) whose
host the run may reach, the harness instead points the variable at a gateway of its own on the
sandbox's loopback (plain HTTP: the sandbox holds nothing but the harness's sockets) and forwards
each request to the real endpoint over TLS, with the trust the agent was given (the system's and
the CA files its environment names). Per call it keeps the wire format, the path without its query
string (Gemini's `?key=` never reaches the record), the HTTP status, the model asked for, the model
that answered and the answer's token figures (agents/modelcalls.py reads them as the bytes pass):
never a body, a header or a credential. A direct tunnel to a host a gateway covers is refused by
the proxy, so the agent cannot go round it.

The listening socket is bound where the agent can reach it: in the sandbox's own network namespace
(run/netwatch.py, fixed ports from GATEWAY_PORT), on a Unix socket the sandbox's relay forwards
(run/forwarder.py), or on the host's loopback when nothing is isolated.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import socketserver
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pytest_agentdrift.agents import modelcalls
from pytest_agentdrift.run.agentview import CA_ENV
from pytest_agentdrift.vocabulary import DEFAULT_PROVIDER_PATIENCE_S

if TYPE_CHECKING:
    from pytest_agentdrift.agents.base import AdapterOutput
    from pytest_agentdrift.agents.infra import InfraError
    from pytest_agentdrift.run.sandbox import Monitor

#: an answer whose usage the gateway did not see: its token figures are unobserved, never 0
_NO_TOKENS: modelcalls.Tokens = {
    "input_tokens": None,
    "output_tokens": None,
    "cached_tokens": None,
    "cache_write_tokens": None,
    "reasoning_tokens": None,
}

#: the first port a gateway listens on inside the sandbox (the proxy has 3128, the DNS stub 53)
GATEWAY_PORT = 3130
#: the largest request body forwarded (a long conversation with images stays well under it)
MAX_REQUEST_BYTES = 64 << 20
#: calls kept per gateway; the rest are counted in `dropped`
MAX_CALLS = 10_000
#: how long a run's model calls may fail with provider errors (429, 5xx, unreachable), with no
#: answer in between, before the harness stops it as infrastructure (--agent-provider-patience's
#: default); and how many such calls at least
PROVIDER_PATIENCE_S = DEFAULT_PROVIDER_PATIENCE_S
PROVIDER_ATTEMPTS = 3
#: loopback names the agent reaches the gateway by without its proxy
NO_PROXY = "127.0.0.1,localhost,::1"
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
        "expect",  # answered here (100 Continue); the body goes upstream whole
    }
)
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Route:
    """One base-URL variable pointed at a gateway, and the real endpoint behind it."""

    var: str
    api: str
    scheme: str
    host: str
    port: int
    path: str  # the base URL's path, forwarded unchanged

    @property
    def netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == {"https": 443, "http": 80}[self.scheme] else f"{host}:{self.port}"

    @property
    def label(self) -> str:
        """The endpoint as identity (agents.base.endpoint_label's form: no credential)."""
        return f"{self.scheme}://{self.netloc}{self.path}"

    @property
    def host_port(self) -> tuple[str, int]:
        return self.host, self.port


def plan_routes(env: Mapping[str, str], allows: Callable[[str, int], bool]) -> list[Route]:
    """The routes of a run: each known base-URL variable `env` sets whose endpoint `allows(host,
    port)` (the proxy's allow-list) lets through. An unset variable is left alone: a product may
    name its endpoint elsewhere (a configuration file), and pointing a variable it reads over that
    would send its calls somewhere else."""
    routes = []
    for var, api in modelcalls.BASE_URL_VARS.items():
        value = (env.get(var) or "").strip()
        if not value:
            continue
        try:
            parts = urlsplit(value)
            port = parts.port or {"https": 443, "http": 80}.get(parts.scheme.lower())
        except ValueError:
            continue
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname or port is None or parts.username:
            continue
        if not allows(parts.hostname, port):
            continue
        routes.append(Route(var, api, scheme, parts.hostname.lower(), port, parts.path.rstrip("/")))
    return routes


def host_base_urls(environ: Mapping[str, str]) -> dict[str, str]:
    """The known base-URL variables the host's environment sets: a model endpoint the operator
    named and allowed is routed through the gateway without being passed on (--agent-env)."""
    return {k: environ[k] for k in modelcalls.BASE_URL_VARS if environ.get(k)}


def agent_env(routes: list[Route], addresses: list[str]) -> dict[str, str]:
    """The variables that point the agent at its gateways (`addresses`: `host:port` per route)."""
    if not routes:
        return {}
    env = {r.var: f"http://{addr}{r.path}" for r, addr in zip(routes, addresses, strict=True)}
    env.update(NO_PROXY=NO_PROXY, no_proxy=NO_PROXY, AGENTDRIFT_GATEWAY_ADDRS=",".join(addresses))
    return env


def trust_context(env: Mapping[str, str]) -> ssl.SSLContext:
    """TLS towards the real endpoint: the system's trust plus the CA files the agent's environment
    names (a private gateway's CA the operator gave the agent): the same variables whose files the
    sandbox shows the agent (run/agentview.CA_ENV), a file or a directory of certificates."""
    ctx = ssl.create_default_context()
    for name in CA_ENV:
        path = env.get(name)
        if not path or not os.path.exists(path):
            continue
        try:
            ctx.load_verify_locations(**({"capath": path} if os.path.isdir(path) else {"cafile": path}))
        except (ssl.SSLError, OSError):
            continue
    return ctx


class ModelGateway:
    """The gateways of one run (one listener per route). `calls`: what each request was, in order."""

    def __init__(
        self,
        routes: list[Route],
        env: Mapping[str, str],
        *,
        log_path: str | os.PathLike[str] | None = None,
        connect_timeout: float = 15.0,
        idle_timeout: float = 300.0,
        patience_s: float = PROVIDER_PATIENCE_S,
    ):
        self.routes = list(routes)
        self.context = trust_context(env)
        self.log_path = Path(log_path) if log_path is not None else None
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.patience_s = patience_s
        self.calls: list[modelcalls.ModelCall] = []
        self.dropped = 0
        self._failing_since: float | None = None  # when the current streak of provider errors began
        self._failures = 0
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._servers: list[socketserver.BaseServer] = []
        self._threads: list[threading.Thread] = []

    # -- lifecycle ---------------------------------------------------------------------

    def serve(self, listeners: list[socket.socket]) -> ModelGateway:
        """Serve one bound, listening socket per route (TCP or Unix)."""
        for route, sock in zip(self.routes, listeners, strict=True):
            server = _Server(self, route, sock)
            self._servers.append(server)
            t = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="agentdrift-gateway", daemon=True
            )
            t.start()
            self._threads.append(t)
        return self

    def start_local(self) -> list[str]:
        """Listen on the host's loopback (no isolation): the `host:port` of each route."""
        socks = []
        for _ in self.routes:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            s.listen(64)
            socks.append(s)
        self.serve(socks)
        return [f"127.0.0.1:{s.getsockname()[1]}" for s in socks]

    def start_unix(self, directory: Path) -> list[Path]:
        """Listen on Unix sockets in `directory` (the sandbox's relay forwards a port to each)."""
        paths, socks = [], []
        for i, _ in enumerate(self.routes):
            path = directory / f"gateway-{i}.sock"
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(str(path))
            os.chmod(path, 0o600)
            s.listen(64)
            paths.append(path)
            socks.append(s)
        self.serve(socks)
        return paths

    def stop(self, timeout: float = 3.0) -> None:
        """Stop accepting; answers still passing end as `incomplete` (bounded)."""
        self.stopping.set()
        for server in self._servers:
            server.shutdown()
            server.server_close()
        deadline = time.monotonic() + timeout
        for server in self._servers:
            for t in list(server.handlers):  # type: ignore[attr-defined]
                t.join(max(0.0, deadline - time.monotonic()))
        self._servers = []

    # -- recording ---------------------------------------------------------------------

    def record(self, call: modelcalls.ModelCall, started: float | None = None) -> None:
        """Keep one call; `started` (monotonic) times a streak of provider errors (`give_up`)."""
        with self._lock:
            if call.get("api"):
                failed = modelcalls.provider_failure(call.get("status")) or call.get("status") is None
                if not failed:
                    self._failing_since, self._failures = None, 0
                else:
                    self._failures += 1
                    if self._failing_since is None:
                        self._failing_since = started if started is not None else time.monotonic()
            if len(self.calls) >= MAX_CALLS:
                self.dropped += 1
                return
            self.calls.append(call)
            if self.log_path is not None:
                with open(self.log_path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(call, sort_keys=True) + "\n")

    def give_up(self) -> str | None:
        """Why the run should stop: every model call for ``patience_s`` (at least
        PROVIDER_ATTEMPTS of them) was a provider error or found no endpoint, and none was
        answered since. A product's own retries can last minutes; the run is infrastructure's
        either way, so the harness ends it in bounded time."""
        with self._lock:
            since, failures = self._failing_since, self._failures
        if since is None or failures < PROVIDER_ATTEMPTS:
            return None
        waited = time.monotonic() - since
        if waited < self.patience_s:
            return None
        return (
            f"the model endpoint answered {failures} model call(s) in a row with provider errors over "
            f"{waited:.0f} s: stopped as infrastructure (the product was still retrying)"
        )

    def describe(self) -> list[dict[str, str]]:
        """What the manifest and the record say of the routes (never a credential)."""
        return [{"variable": r.var, "api": r.api, "endpoint": r.label} for r in self.routes]


#: what socketserver hands a server for one request (a stream server's is the connected socket)
_Request = socket.socket | tuple[bytes, socket.socket]


class _Server(socketserver.ThreadingMixIn, socketserver.BaseServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, gateway: ModelGateway, route: Route, sock: socket.socket):
        super().__init__(sock.getsockname(), _Handler)
        self.socket = sock
        self.gateway = gateway
        self.route = route
        self.handlers: set[threading.Thread] = set()

    def fileno(self) -> int:
        return self.socket.fileno()

    def get_request(self) -> tuple[socket.socket, tuple[str, int]]:
        return self.socket.accept()

    def process_request_thread(self, request: _Request, client_address: object) -> None:
        self.handlers.add(threading.current_thread())
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.handlers.discard(threading.current_thread())

    def shutdown_request(self, request: _Request) -> None:
        sock = request if isinstance(request, socket.socket) else request[1]  # a stream server's: the socket
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def server_close(self) -> None:
        self.socket.close()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # the calls are the log
        pass

    def address_string(self) -> str:
        return "agent"

    def do_POST(self) -> None:
        self._forward()

    do_GET = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_POST

    def _forward(self) -> None:
        self.close_connection = True  # one request per connection: every answer ends cleanly
        gw, route = self.server.gateway, self.server.route
        path = self.path if self.path.startswith("/") else "/" + self.path
        api = modelcalls.api_of(path) if self.command == "POST" else None
        call: modelcalls.ModelCall = {
            "type": "model_call",
            "source": "harness",
            "api": api,
            "method": self.command,
            "endpoint": route.label,
            "path": _path_label(path),
        }
        started = time.monotonic()
        try:
            body = self._body()
        except ValueError as exc:
            self._refuse(call, 413 if "large" in str(exc) else 400, str(exc))
            return
        call["requested_model"] = modelcalls.requested_model(api, path, body) if api else None
        if "upgrade" in (self.headers.get("Connection") or "").lower() or self.headers.get("Upgrade"):
            # a WebSocket transport would hide its calls in frames: the client falls back to HTTPS
            self._refuse(call, 426, "the harness's model gateway relays HTTP requests, not upgrades")
            return
        try:
            self._relay(call, path, body)
        finally:
            call["duration_s"] = round(time.monotonic() - started, 3)
            gw.record(call, started)

    def _body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is not None:
            n = int(length) if length.strip().isdigit() else -1
            if n < 0:
                raise ValueError("unreadable Content-Length")
            if n > MAX_REQUEST_BYTES:
                raise ValueError("request body too large for the harness's model gateway")
            return self.rfile.read(n)
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            total = 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                total += size
                if total > MAX_REQUEST_BYTES:
                    raise ValueError("request body too large for the harness's model gateway")
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return b""

    def _refuse(self, call: modelcalls.ModelCall, status: int, why: str) -> None:
        call.update({"status": status, "error": why, "forwarded": False})
        self.server.gateway.record(call)
        _reply(self, status, why)

    def _upstream(self) -> http.client.HTTPConnection:
        gw, route = self.server.gateway, self.server.route
        if route.scheme == "https":
            return http.client.HTTPSConnection(route.host, route.port, timeout=gw.connect_timeout, context=gw.context)
        return http.client.HTTPConnection(route.host, route.port, timeout=gw.connect_timeout)

    def _relay(self, call: modelcalls.ModelCall, path: str, body: bytes) -> None:
        gw, route = self.server.gateway, self.server.route
        conn = self._upstream()
        try:
            try:
                conn.putrequest(self.command, path, skip_host=True, skip_accept_encoding=True)
                conn.putheader("Host", route.netloc)
                # identity: the answer is read as it passes, so it must not be compressed
                conn.putheader("Accept-Encoding", "identity")
                for name, value in self.headers.items():
                    if name.lower() not in _HOP:
                        conn.putheader(name, value)
                if body or self.command in ("POST", "PUT", "PATCH"):
                    conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body or None)
                if conn.sock is not None:
                    conn.sock.settimeout(gw.idle_timeout)
                resp = conn.getresponse()
            except ssl.SSLCertVerificationError as exc:
                # the same on every run: the endpoint's certificate is not one the agent was told to trust
                call.update({"status": None, "error": f"upstream certificate not trusted: {exc.verify_message}"})
                _reply(self, 502, "the harness's model gateway does not trust the model endpoint's certificate")
                return
            except (OSError, http.client.HTTPException) as exc:
                call.update({"status": None, "error": f"upstream unreachable: {type(exc).__name__}"})
                _reply(self, 502, "the harness's model gateway could not reach the model endpoint")
                return
            call["status"] = resp.status
            self._answer(call, resp)
        finally:
            conn.close()

    def _answer(self, call: modelcalls.ModelCall, resp: http.client.HTTPResponse) -> None:
        reader = modelcalls.AnswerReader(
            call.get("api") if resp.status == HTTPStatus.OK else None, resp.getheader("Content-Type", "")
        )
        self.send_response_only(resp.status, resp.reason)
        for name, value in resp.getheaders():
            if name.lower() not in _HOP:
                self.send_header(name, value)
        if resp.length is not None:
            self.send_header("Content-Length", str(resp.length))
        self.send_header("Connection", "close")
        self.end_headers()
        complete = self._pass_body(call, resp, reader)
        reader.finish()
        call["stream"] = reader.stream
        if call.get("api") is not None and resp.status == HTTPStatus.OK:
            call["answered_model"] = reader.model
            call.update(reader.usage or _NO_TOKENS)
            if reader.usage is None:
                call["usage_seen"] = False  # a stream without usage: its tokens are unobserved, never 0
        if not complete:
            call.setdefault("error", "the run ended while the answer was passing")

    def _pass_body(
        self, call: modelcalls.ModelCall, resp: http.client.HTTPResponse, reader: modelcalls.AnswerReader
    ) -> bool:
        """Relay the answer's body as it arrives, read on the way; False when it was cut."""
        try:
            while True:
                if self.server.gateway.stopping.is_set():
                    return False
                chunk = resp.read1(_CHUNK) if self.command != "HEAD" else b""
                if not chunk:
                    return True
                reader.feed(chunk)
                self.wfile.write(chunk)
                self.wfile.flush()
        except (OSError, http.client.HTTPException) as exc:
            call["error"] = f"answer cut: {type(exc).__name__}"
            return False


class ProviderWatch:
    """A run's monitor (run/sandbox.py: `feed`, `poll`) that also stops the run when its gateway
    gives up on the provider (`ModelGateway.give_up`); `inner`: the run's other monitor, or None."""

    def __init__(self, inner: Monitor | None, gateway: ModelGateway):
        self.inner = inner
        self.gateway = gateway

    def feed(self, chunk: bytes) -> None:
        if self.inner is not None:
            self.inner.feed(chunk)

    def poll(self) -> str | None:
        return (self.inner.poll() if self.inner is not None else None) or self.gateway.give_up()


def _path_label(path: str) -> str:
    """The request path as recorded: no query string (where keys travel), escaped, short."""
    from pytest_agentdrift.safetext import escape_path

    bare = path.split("?", 1)[0].split("#", 1)[0]
    return escape_path(bare[:300])


def _reply(handler: BaseHTTPRequestHandler, status: int, why: str) -> None:
    data = json.dumps({"error": {"type": "agentdrift_gateway", "message": why}}).encode()
    try:
        handler.send_response_only(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(data)
    except OSError:
        pass


def observed(
    gateway: ModelGateway, calls: list[modelcalls.ModelCall], out: AdapterOutput, infra: InfraError | None
) -> tuple[modelcalls.ModelTraffic, InfraError | None]:
    """The run's model evidence from its gateway's calls: (the record's `model_traffic`, the run's
    infrastructure error).

    What the harness saw replaces the agent's word (`out`, agents.base.AdapterOutput) where it saw
    a value: the model stamp, each token figure, the model asked for and the endpoint (identity
    facts that fill what capture left unobserved). The agent's word is kept beside it, and a
    disagreement is said. A provider error the agent's conversation ended on (its last model call
    answered 429 or 5xx, or the host unreachable, after its retries) is an infrastructure error of
    the harness's own seeing, which outranks an agent's report and a crash."""
    summary: modelcalls.ModelTraffic = modelcalls.summarise(calls) or {"calls": 0}
    summary["routes"] = gateway.describe()
    if gateway.dropped:
        summary["calls_dropped"] = gateway.dropped
    if not summary["calls"]:
        return summary, infra
    summary["agent_reported"] = {"model_stamp": out.model_stamp, **out.usage.tokens()}
    summary["disagreement"] = _disagreement(summary, out)
    if summary["model_stamp"]:
        out.model_stamp = summary["model_stamp"]
    for name, value in summary["usage"].items():
        if value is not None:
            setattr(out.usage, name, value)
    side = summary.get("side_calls")
    if side:
        out.usage.main_thread, out.usage.side_calls = _figures(summary["main_thread"]), _figures(side)
    endpoints = {c.get("endpoint") for c in calls if c.get("api")}
    if summary["main_model"]:
        out.run_identity.setdefault("model_id", summary["main_model"])
    if len(endpoints) == 1:
        out.run_identity.setdefault("model_endpoint", endpoints.pop())
    return summary, _provider_ending(summary, infra)


def _figures(tokens: modelcalls.Tokens) -> dict[str, int | None]:
    """A sum of calls' token figures as Usage keeps a split (main thread, side calls)."""
    return {
        "input_tokens": tokens["input_tokens"],
        "output_tokens": tokens["output_tokens"],
        "cached_tokens": tokens["cached_tokens"],
        "cache_write_tokens": tokens["cache_write_tokens"],
        "reasoning_tokens": tokens["reasoning_tokens"],
    }


def _disagreement(summary: modelcalls.ModelTraffic, out: AdapterOutput) -> list[str]:
    """Where the agent's own word and the harness's observation differ (both present)."""
    lines = []
    said, saw = out.model_stamp, summary["model_stamp"]
    if said and saw and said != saw:
        lines.append(f"model: the agent reported {said}, the endpoint answered {saw}")
    usage = summary["usage"]
    for name, reported, counted in (
        ("input_tokens", out.usage.input_tokens, usage["input_tokens"]),
        ("output_tokens", out.usage.output_tokens, usage["output_tokens"]),
    ):
        if reported is not None and counted is not None and reported != counted:
            lines.append(f"{name}: the agent reported {reported}, the harness counted {counted}")
    return lines


def _provider_ending(summary: modelcalls.ModelTraffic, infra: InfraError | None) -> InfraError | None:
    from pytest_agentdrift.agents.infra import classify_status, infra_error

    last = summary.get("final_failure")
    if last is None:
        return infra
    status = last["status"]
    # the gateway's own failure (no answer from the endpoint) is known only to the harness: the
    # product saw the gateway's stand-in answer, so its word about it outranks nothing
    own = infra is not None and infra.get("source") != "agent report" and infra.get("class") != "crashed"
    if infra is not None and own and (status is not None or infra.get("class") == "launch_failed"):
        return infra  # the product's own structured word, or the harness's launch failure
    if status is not None:
        cls = classify_status(status)
    else:
        cls = "configuration" if "certificate" in str(last.get("error")) else "network"
    attempts = f"({last['attempts']} failed attempt(s) in a row, {last['retries']} retries)"
    if status is not None:
        evidence = f"the model endpoint answered HTTP {status} to the agent's last model call {attempts}"
    else:
        evidence = f"no answer to the agent's last model call: {last.get('error') or 'unknown'} {attempts}"
    return infra_error(
        cls or "server_error",
        evidence,
        "harness model gateway",
        status=status,
        retries=last["retries"],
        agent_said=infra.get("class") if infra is not None else None,
    )


def covered(routes: Iterable[Route]) -> frozenset[tuple[str, int]]:
    """(host, port) pairs a gateway covers: the proxy refuses a direct tunnel to them."""
    return frozenset(r.host_port for r in routes)


__all__ = ["GATEWAY_PORT", "ModelGateway", "Route", "agent_env", "covered", "observed", "plan_routes", "trust_context"]
