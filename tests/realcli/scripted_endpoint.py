"""A scripted model endpoint on loopback: the real CLI talks to it as to its provider.

One stdlib HTTPS server speaks four wire formats, chosen by the request path:

- Anthropic Messages (`POST /v1/messages`), streaming SSE or one JSON message;
- OpenAI Responses (`POST .../responses`), SSE;
- OpenAI Chat Completions (`POST .../chat/completions`), SSE chunks (tool calls
  as `delta.tool_calls`) or one JSON completion;
- Gemini (`POST .../models/MODEL:generateContent` and `:streamGenerateContent`, SSE
  with `?alt=sse`): the model is named by the path, tool calls are `functionCall` parts
  carrying the endpoint's ids, which the client sends back in its `functionResponse` parts.

It plays a script: a list of turns, one per model call of the agent's main
conversation. A turn is a dict with any of

    {"tools": [{"name": "Bash", "input": {...}}, ...],   # tool calls to make
     "text": "...",                                       # assistant text
     "usage": {"input": 100, "output": 20, "cache_read": 0, "cache_write": 0, "reasoning": 0},
     "model": "answering-model-id",                       # else the requested model
     "errors": [{"status": 529, "headers": {...}, "body": {...}}, ...],  # served first, one per attempt
     "error": {"status": 401, ...}}                       # served on every attempt

Which turn a request is at is read from the request itself, not from a
counter: every tool call id the endpoint hands out carries its turn number
(`toolu_agd<turn>x<i>`, `call_agd<turn>x<i>`), and a request whose history
holds ids up to turn k is at turn k+1. A retried request therefore gets the
same turn again, and the CLI's side calls (titles, summaries: requests that
declare no tools) are answered with a short text without using up a turn.

An agent that declares no tools at all (Aider: its edits are text in its
answers, applied by the CLI) is played with `toolless=True`: a request that
holds a script's marker is at the turn its history says, one past the number
of assistant messages after the first message that holds the marker (the
task), so a retry gets the same turn again here too.

Every request is logged (`log`): method, path, the model asked for, whether
it streamed, which turn and kind it was, the status served, the usage served,
and the header names (never values: a gateway key must not reach a test's
output). TLS uses a CA made at test time (`trustme`); `ca_pem` is its
certificate for the client's trust store.
"""

from __future__ import annotations

import json
import re
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_TURN_ID = re.compile(rb"(?:toolu|call)_agd(\d+)x\d+")
#: where each CLI tells its model the working directory (Claude Code's system prompt, Codex's
#: environment context, Copilot's): a script writes {cwd} for it
_CWD = (
    re.compile(r"Primary working directory: (/[^\s\\]+)"),
    re.compile(r"<cwd>(/[^<\\]+)</cwd>"),
    re.compile(r"[Cc]urrent working directory(?: is|:)\s*(/[^\s\\<]+?)[.]?(?:\s|\\|<)"),
    # Qwen Code's environment context
    re.compile(r"currently working in the directory: (/[^\s\\]+)"),
)

#: Anthropic error `type` per HTTP status (the Messages API's error shapes)
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
SIDE_TEXT = "ok"
#: a Gemini model call: `/v1beta/models/<model>:<method>`
_GEMINI_PATH = re.compile(r"/models/([^/:]+):(generateContent|streamGenerateContent|countTokens)$")
#: the Gemini API's error `status` per HTTP status (google.rpc codes)
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def load_script(path: str | Path) -> list[dict[str, Any]]:
    """A script from a JSON file: a list of turns, or {"turns": [...]}."""
    data = json.loads(Path(path).read_text())
    turns = data["turns"] if isinstance(data, dict) else data
    if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
        raise ValueError(f"{path}: a script is a list of turn objects")
    return turns


def turn_of(body: bytes) -> int:
    """The turn a request is at: one past the newest turn whose tool call ids its history holds."""
    seen = [int(m.group(1)) for m in _TURN_ID.finditer(body)]
    return max(seen) + 1 if seen else 0


def toolless_turn_of(body: bytes, marker: str) -> int:
    """The turn of a conversation without tools: the assistant messages after the task (the first
    message holding `marker`) in the request's history."""
    try:
        messages = json.loads(body).get("messages") or []
    except (ValueError, AttributeError):
        return 0
    start = next((i for i, m in enumerate(messages) if marker in json.dumps(m)), len(messages))
    return sum(1 for m in messages[start:] if isinstance(m, dict) and m.get("role") == "assistant")


def cwd_of(body: bytes) -> str | None:
    """The working directory the CLI told its model about, if the request names one."""
    text = body.decode("utf-8", "replace")
    for pattern in _CWD:
        m = pattern.search(text)
        if m:
            return m.group(1).rstrip(".")
    return None


def fill_cwd(value: Any, cwd: str | None) -> Any:
    """A tool input with every "{cwd}" replaced by the working directory."""
    if isinstance(value, str):
        return value.replace("{cwd}", cwd) if cwd else value
    if isinstance(value, list):
        return [fill_cwd(v, cwd) for v in value]
    if isinstance(value, dict):
        return {k: fill_cwd(v, cwd) for k, v in value.items()}
    return value


def tool_results(wire: str, request: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results a request sends back: {"id", "is_error" (Anthropic only, else None), "text"}."""
    if wire == "gemini":
        return _gemini_results(request)
    out = []
    text_of = _text_of
    for item in request.get("messages") or request.get("input") or []:
        if not isinstance(item, dict):
            continue
        if wire == "anthropic" and isinstance(item.get("content"), list):
            for block in item["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    text = text_of(block.get("content"))
                    out.append({"id": block.get("tool_use_id"), "is_error": bool(block.get("is_error")), "text": text})
        elif wire == "responses" and item.get("type") in ("function_call_output", "custom_tool_call_output"):
            out.append({"id": item.get("call_id"), "is_error": None, "text": text_of(item.get("output"))})
        elif wire == "chat" and item.get("role") == "tool":
            out.append({"id": item.get("tool_call_id"), "is_error": None, "text": text_of(item.get("content"))})
    return out


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(c.get("text", "")) if isinstance(c, dict) else str(c) for c in content)
    return content if isinstance(content, str) else json.dumps(content)


def _gemini_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Gemini: the `functionResponse` parts of the request's contents."""
    out = []
    for content in request.get("contents") or []:
        for part in (content.get("parts") or []) if isinstance(content, dict) else []:
            response = part.get("functionResponse") if isinstance(part, dict) else None
            if isinstance(response, dict):
                out.append({"id": response.get("id"), "is_error": None, "text": _text_of(response.get("response"))})
    return out


def call_id(wire: str, turn: int, i: int) -> str:
    return f"{'toolu' if wire == 'anthropic' else 'call'}_agd{turn}x{i}"


@dataclass
class Usage:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0

    @classmethod
    def of(cls, spec: dict[str, Any] | None, default_input: int = 0) -> Usage:
        spec = spec or {}
        return cls(**{"input": default_input, **{k: int(v) for k, v in spec.items()}})


@dataclass
class Reply:
    """What one request is answered with, before it is put on a wire."""

    model: str
    text: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)  # {"id", "name", "input"}
    usage: Usage = field(default_factory=Usage)


class ScriptedEndpoint:
    """Start with `with ScriptedEndpoint(turns, tmp_path) as ep:`; `ep.base_url`, `ep.log`."""

    def __init__(
        self,
        turns: list[dict[str, Any]] | dict[str, list[dict[str, Any]]],
        scratch: Path,
        *,
        tls: bool = True,
        model: str | None = None,
        toolless: bool = False,
    ):
        # several scripts at once (one per task of a session): {marker: turns}, the script whose
        # marker the request's text holds (the task's own words) is played
        self.scripts = turns if isinstance(turns, dict) else {"": turns}
        self.model = model
        self.toolless = toolless
        self.log: list[dict[str, Any]] = []
        self.bodies: list[Path] = []
        self._attempts: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        self._scratch = Path(scratch)
        self._tls = tls
        self.ca_pem: Path | None = None
        self._server: ThreadingHTTPServer | None = None
        self._port: int | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------

    def __enter__(self) -> ScriptedEndpoint:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        endpoint = self

        class Handler(_Handler):
            ep = endpoint

        server = _Server(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        if self._tls:
            server.socket = self._tls_context().wrap_socket(server.socket, server_side=True)
        self._server = server
        self._port = server.server_address[1]
        # stop() waits for the loop to look at its flag again: a short poll, not the default half second
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="scripted-endpoint", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _tls_context(self) -> ssl.SSLContext:
        import trustme

        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1", "localhost")
        self._scratch.mkdir(parents=True, exist_ok=True)
        self.ca_pem = self._scratch / "endpoint-ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_pem))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        cert.configure_cert(ctx)
        return ctx

    @property
    def port(self) -> int:
        assert self._port is not None, "the endpoint was never started"
        return self._port

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{'https' if self._tls else 'http'}://{self.host_port}"

    # -- what the log says -----------------------------------------------------

    def main_calls(self, script: str | None = None) -> list[dict[str, Any]]:
        """The logged requests of the agent's main conversation that were answered with a turn."""
        return [
            r
            for r in self.log
            if r["kind"] == "turn" and r["status"] == 200 and (script is None or r["script"] == script)
        ]

    def results_of(self, script: str) -> dict[str, dict[str, Any]]:
        """Tool call id -> the result the CLI sent back for it (from the conversation's last request)."""
        out: dict[str, dict[str, Any]] = {}
        for r in self.log:
            if r.get("script") == script:
                out.update({t["id"]: t for t in r.get("tool_results", [])})
        return out

    def served_usage(self, kinds: tuple[str, ...] = ("turn", "side"), script: str | None = None) -> Usage:
        total = Usage()
        for r in self.log:
            if r["kind"] in kinds and r["status"] == 200 and (script is None or r.get("script") == script):
                for k, v in r["usage"].items():
                    setattr(total, k, getattr(total, k) + v)
        return total

    def keep_body(self, body: bytes) -> None:
        """Each request body as received, in order, under scratch/requests/ (for reading what the CLI sent)."""
        with self._lock:
            n = len(self.bodies)
            path = self._scratch / "requests" / f"{n:03d}.json"
            self.bodies.append(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)

    # -- choosing a reply ------------------------------------------------------

    def script_for(self, body: bytes) -> str | None:
        text = body.decode("utf-8", "replace")
        return next((marker for marker in self.scripts if marker in text), None)

    def decide(self, body: bytes, declares_tools: bool) -> tuple[str, str | None, int, Any]:
        """(kind, script, turn, spec): kind 'turn', 'side', 'error', 'exhausted' or 'unscripted'."""
        if not declares_tools and not self.toolless:
            return "side", None, -1, None
        script = self.script_for(body)
        if script is None:
            return ("side" if not declares_tools else "unscripted"), None, -1, None
        turn = toolless_turn_of(body, script) if self.toolless else turn_of(body)
        with self._lock:
            attempt = self._attempts.get((script, turn), 0)
            self._attempts[(script, turn)] = attempt + 1
        turns = self.scripts[script]
        if turn >= len(turns):
            return "exhausted", script, turn, None
        spec = turns[turn]
        errors = spec.get("errors") or []
        if attempt < len(errors):
            return "error", script, turn, errors[attempt]
        if spec.get("error"):
            return "error", script, turn, spec["error"]
        return "turn", script, turn, spec

    def reply(self, wire: str, kind: str, turn: int, spec: Any, requested: str | None, cwd: str | None = None) -> Reply:
        model = (spec or {}).get("model") or self.model or requested or "scripted-model"
        if kind == "side":
            return Reply(model=model, text=SIDE_TEXT, usage=Usage(input=10, output=1))
        if kind in ("exhausted", "unscripted"):
            return Reply(model=model, text="(the script has no more turns)", usage=Usage(input=10, output=5))
        tools = [
            {"id": call_id(wire, turn, i), "name": t["name"], "input": fill_cwd(t.get("input", {}), cwd)}
            for i, t in enumerate(spec.get("tools") or [])
        ]
        return Reply(model=model, text=spec.get("text"), tools=tools, usage=Usage.of(spec.get("usage"), 100))


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that hung up or refused our certificate: the request log shows what was served
        pass


class _Handler(BaseHTTPRequestHandler):
    ep: ScriptedEndpoint
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # the request log is self.ep.log
        pass

    def do_GET(self) -> None:
        self._drain()
        if (self.headers.get("Upgrade") or "").lower() == "websocket":
            # no WebSocket transport here: a client that tries it first falls back to HTTPS
            self._record({"kind": "websocket", "status": 426})
            self._json(426, {"error": {"message": "websocket transport not supported"}})
            return
        if self.path.rstrip("/").endswith("/models"):
            self._record({"kind": "models", "status": 200})
            model = self.ep.model or "scripted-model"
            self._json(200, {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "agentdrift"}]})
            return
        self._record({"kind": "unknown", "status": 404})
        self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_HEAD(self) -> None:
        self._record({"kind": "unknown", "status": 200})
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        body = self._drain()
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            request = {}
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.endswith("/messages/count_tokens"):
            self._record({"kind": "count_tokens", "status": 200, "model": request.get("model")})
            self._json(200, {"input_tokens": 100})
            return
        gemini = _GEMINI_PATH.search(path)
        if gemini is not None and gemini.group(2) == "countTokens":
            self._record({"kind": "count_tokens", "status": 200, "model": gemini.group(1)})
            self._json(200, {"totalTokens": 100})
            return
        wire = (
            "anthropic"
            if path.endswith("/messages")
            else "responses"
            if path.endswith("/responses")
            else "chat"
            if path.endswith("/chat/completions")
            else "gemini"
            if gemini is not None
            else None
        )
        if wire is None:
            self._record({"kind": "unknown", "status": 404, "model": request.get("model")})
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        requested = request.get("model") if isinstance(request.get("model"), str) else None
        stream = bool(request.get("stream"))
        if gemini is not None:
            requested, stream = gemini.group(1), gemini.group(2) == "streamGenerateContent"
        self.ep.keep_body(body)
        kind, script, turn, spec = self.ep.decide(body, bool(declared_tools(request)))
        entry = {
            "wire": wire,
            "kind": kind,
            "script": script,
            "turn": turn,
            "model": requested,
            "stream": stream,
            "tool_results": tool_results(wire, request),
        }
        if kind == "error":
            status = int(spec.get("status", 500))
            self._record({**entry, "status": status, "usage": {}})
            self._error(wire, status, spec)
            return
        reply = self.ep.reply(wire, kind, turn, spec, requested, cwd_of(body))
        self._record(
            {
                **entry,
                "status": 200,
                "answered_model": reply.model,
                "tool_calls": [{"id": t["id"], "name": t["name"]} for t in reply.tools],
                "usage": vars(reply.usage).copy(),
            }
        )
        if wire == "anthropic":
            _send_anthropic(self, reply, stream)
        elif wire == "responses":
            _send_responses(self, reply, request)
        elif wire == "gemini":
            _send_gemini(self, reply, stream)
        else:
            _send_chat(self, reply, stream, request)

    # -- plumbing --------------------------------------------------------------

    def _drain(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            return self.rfile.read(length)
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        return b""

    def _record(self, entry: dict[str, Any]) -> None:
        with self.ep._lock:
            self.ep.log.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": sorted(k.lower() for k in self.headers.keys()),
                    "at": time.time(),
                    **entry,
                }
            )

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, wire: str, status: int, spec: dict[str, Any]) -> None:
        message = spec.get("message") or f"scripted error {status}"
        if "body" in spec:
            body = spec["body"]
        elif wire == "anthropic":
            body = {
                "type": "error",
                "error": {"type": _ANTHROPIC_ERROR_TYPES.get(status, "api_error"), "message": message},
            }
        elif wire == "gemini":
            body = {"error": {"code": status, "message": message, "status": _GEMINI_STATUS.get(status, "INTERNAL")}}
        else:
            code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status, "server_error")
            body = {"error": {"message": message, "type": code, "code": code}}
        self._json(status, body, spec.get("headers"))

    def sse_start(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def sse(self, event: str | None, data: Any) -> None:
        head = f"event: {event}\n" if event else ""
        payload = data if isinstance(data, str) else json.dumps(data)
        self.wfile.write(f"{head}data: {payload}\n\n".encode())
        self.wfile.flush()


# -- Anthropic Messages --------------------------------------------------------------


def _anthropic_usage(u: Usage, output: int) -> dict[str, int]:
    return {
        "input_tokens": u.input,
        "output_tokens": output,
        "cache_read_input_tokens": u.cache_read,
        "cache_creation_input_tokens": u.cache_write,
    }


def _anthropic_blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    for t in reply.tools:
        blocks.append({"type": "tool_use", "id": t["id"], "name": t["name"], "input": t["input"]})
    return blocks


def _send_anthropic(h: _Handler, reply: Reply, stream: bool) -> None:
    msg_id = f"msg_agd{len(h.ep.log)}"
    stop = "tool_use" if reply.tools else "end_turn"
    blocks = _anthropic_blocks(reply)
    if not stream:
        h._json(
            200,
            {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": reply.model,
                "content": blocks,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": _anthropic_usage(reply.usage, reply.usage.output),
            },
        )
        return
    h.sse_start()
    start = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": _anthropic_usage(reply.usage, 1),
    }
    h.sse("message_start", {"type": "message_start", "message": start})
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            h.sse(
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": {**block, "text": ""}},
            )
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            h.sse(
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": {**block, "input": {}}},
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        h.sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta})
        h.sse("content_block_stop", {"type": "content_block_stop", "index": i})
    h.sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": _anthropic_usage(reply.usage, reply.usage.output),
        },
    )
    h.sse("message_stop", {"type": "message_stop"})


# -- OpenAI Responses ----------------------------------------------------------------


def declared_tools(request: dict[str, Any]) -> dict[str, str]:
    """Tool name -> its declared type ('function', 'custom', ...): the request's `tools`, and for
    the Responses API also tools declared in `additional_tools` input items (Codex 0.171 sends
    its tools there, in namespaces)."""
    out: dict[str, str] = {}

    def walk(tools: Any) -> None:
        for tool in tools if isinstance(tools, list) else []:
            if not isinstance(tool, dict):
                continue
            if tool.get("type") == "namespace":
                walk(tool.get("tools"))
                continue
            # Responses: {"name"}; Chat Completions: {"function": {"name"}} or {"custom": {"name"}}
            name = tool.get("name") or (tool.get("function") or tool.get("custom") or {}).get("name")
            if name:
                out[name] = tool.get("type", "function")
            # Gemini: {"functionDeclarations": [{"name"}, ...]}
            walk(tool.get("functionDeclarations"))

    walk(request.get("tools"))
    for item in request.get("input") if isinstance(request.get("input"), list) else []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            walk(item.get("tools"))
    return out


def _responses_items(reply: Reply, request: dict[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text:
        items.append(
            {
                "type": "message",
                "id": f"msg_{len(items)}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    declared = declared_tools(request)
    for t in reply.tools:
        if declared.get(t["name"]) == "custom":
            # a freeform tool (Codex's apply_patch): the input is the raw text
            raw = t["input"] if isinstance(t["input"], str) else json.dumps(t["input"])
            items.append(
                {
                    "type": "custom_tool_call",
                    "id": f"ctc_{t['id']}",
                    "call_id": t["id"],
                    "name": t["name"],
                    "input": raw,
                    "status": "completed",
                }
            )
        else:
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{t['id']}",
                    "call_id": t["id"],
                    "name": t["name"],
                    "arguments": json.dumps(t["input"]),
                    "status": "completed",
                }
            )
    return items


def _send_responses(h: _Handler, reply: Reply, request: dict[str, Any]) -> None:
    resp_id = f"resp_agd{len(h.ep.log)}"
    items = _responses_items(reply, request)
    u = reply.usage
    usage = {
        "input_tokens": u.input + u.cache_read,
        "input_tokens_details": {"cached_tokens": u.cache_read},
        "output_tokens": u.output + u.reasoning,
        "output_tokens_details": {"reasoning_tokens": u.reasoning},
        "total_tokens": u.input + u.cache_read + u.output + u.reasoning,
    }
    base = {"id": resp_id, "object": "response", "created_at": int(time.time()), "model": reply.model}
    h.sse_start()
    h.sse("response.created", {"type": "response.created", "response": {**base, "status": "in_progress", "output": []}})
    for i, item in enumerate(items):
        h.sse("response.output_item.added", {"type": "response.output_item.added", "output_index": i, "item": item})
        if item["type"] == "message":
            h.sse(
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": i,
                    "content_index": 0,
                    "delta": reply.text,
                },
            )
        h.sse("response.output_item.done", {"type": "response.output_item.done", "output_index": i, "item": item})
    done = {**base, "status": "completed", "output": items, "usage": usage}
    h.sse("response.completed", {"type": "response.completed", "response": done})


# -- OpenAI Chat Completions ---------------------------------------------------------


def _chat_usage(u: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": u.input + u.cache_read,
        "completion_tokens": u.output + u.reasoning,
        "total_tokens": u.input + u.cache_read + u.output + u.reasoning,
        "prompt_tokens_details": {"cached_tokens": u.cache_read},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning},
    }


def _chat_call(tool: dict[str, Any], declared: str | None) -> dict[str, Any]:
    if declared == "custom":
        # a freeform tool (Copilot's apply_patch for GPT-5 models): the input is the raw text
        raw = tool["input"] if isinstance(tool["input"], str) else json.dumps(tool["input"])
        return {"id": tool["id"], "type": "custom", "custom": {"name": tool["name"], "input": raw}}
    return {
        "id": tool["id"],
        "type": "function",
        "function": {"name": tool["name"], "arguments": json.dumps(tool["input"])},
    }


def _send_chat(h: _Handler, reply: Reply, stream: bool, request: dict[str, Any]) -> None:
    cid = f"chatcmpl-agd{len(h.ep.log)}"
    created = int(time.time())
    finish = "tool_calls" if reply.tools else "stop"
    declared = declared_tools(request)
    calls = [_chat_call(t, declared.get(t["name"])) for t in reply.tools]
    if not stream:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if calls:
            message["tool_calls"] = calls
        h._json(
            200,
            {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": reply.model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": _chat_usage(reply.usage),
            },
        )
        return
    base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": reply.model}
    h.sse_start()
    h.sse(
        None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
    )
    if reply.text:
        h.sse(None, {**base, "choices": [{"index": 0, "delta": {"content": reply.text}, "finish_reason": None}]})
    for i, call in enumerate(calls):
        delta = {"tool_calls": [{"index": i, **call}]}
        h.sse(None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    h.sse(None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if (request.get("stream_options") or {}).get("include_usage", True):
        h.sse(None, {**base, "choices": [], "usage": _chat_usage(reply.usage)})
    h.sse(None, "[DONE]")


# -- Gemini generateContent ----------------------------------------------------------


def _gemini_usage(u: Usage) -> dict[str, int]:
    # promptTokenCount counts the cached part too; thoughts are counted apart from the candidates
    usage = {
        "promptTokenCount": u.input + u.cache_read,
        "candidatesTokenCount": u.output,
        "totalTokenCount": u.input + u.cache_read + u.output + u.reasoning,
    }
    if u.cache_read:
        usage["cachedContentTokenCount"] = u.cache_read
    if u.reasoning:
        usage["thoughtsTokenCount"] = u.reasoning
    return usage


def _send_gemini(h: _Handler, reply: Reply, stream: bool) -> None:
    parts: list[dict[str, Any]] = []
    if reply.text:
        parts.append({"text": reply.text})
    for t in reply.tools:
        parts.append({"functionCall": {"id": t["id"], "name": t["name"], "args": t["input"]}})
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
    body = {
        "candidates": [candidate],
        "usageMetadata": _gemini_usage(reply.usage),
        "modelVersion": reply.model,
        "responseId": f"resp_agd{len(h.ep.log)}",
    }
    if not stream:
        h._json(200, body)
        return
    h.sse_start()
    h.sse(None, body)
