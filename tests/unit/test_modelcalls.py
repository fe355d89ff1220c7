"""The harness's reading of model traffic (agents/modelcalls.py) and its gateway (run/modelgateway.py),
on loopback: what each wire format's answer says of the model and the tokens, how a run's calls
add up (main, side and fallback calls; a provider error as the last word), and that a key in a
query string or a header never reaches a call's record."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pytest_agentdrift.agents import modelcalls as mc
from pytest_agentdrift.run.modelgateway import ModelGateway, agent_env, covered, plan_routes
from pytest_agentdrift.run.netproxy import RecordingProxy

KEY = "AIzaPLANTEDplantedPLANTEDplanted0123456"


def read(api: str, content_type: str, body: bytes) -> mc.AnswerReader:
    reader = mc.AnswerReader(api, content_type)
    for i in range(0, len(body), 7):  # in small pieces, as a stream arrives
        reader.feed(body[i : i + 7])
    reader.finish()
    return reader


def sse(*events: dict) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)


def test_gemini_answers_name_the_model_version_and_usage_metadata():
    chunk = {"candidates": [{"content": {"parts": [{"text": "hi"}]}}], "modelVersion": "gemini-2.5-pro-002"}
    last = {**chunk, "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 9, "thoughtsTokenCount": 4}}
    streamed = read(mc.API_GEMINI, "text/event-stream", sse(chunk, last))
    assert streamed.model == "gemini-2.5-pro-002"
    assert streamed.usage["input_tokens"] == 120 and streamed.usage["output_tokens"] == 9
    assert streamed.usage["reasoning_tokens"] == 4
    # without alt=sse Gemini streams one JSON array
    arrayed = read(mc.API_GEMINI, "application/json", json.dumps([chunk, last]).encode())
    assert (arrayed.model, arrayed.usage) == (streamed.model, streamed.usage)
    assert mc.gemini_answer({"modelVersion": "models/gemini-x"}) == ("gemini-x", None)
    assert mc.requested_model(mc.API_GEMINI, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", b"") == (
        "gemini-2.5-pro"
    )


def test_each_openai_and_anthropic_form_is_read():
    start = {
        "type": "message_start",
        "message": {"model": "claude-a", "usage": {"input_tokens": 50, "output_tokens": 1}},
    }
    delta = {"type": "message_delta", "usage": {"output_tokens": 30}}
    anthropic = read(mc.API_ANTHROPIC, "text/event-stream", sse(start, delta))
    assert anthropic.model == "claude-a" and anthropic.usage["input_tokens"] == 50
    assert anthropic.usage["output_tokens"] == 30  # the final count, not the first
    done = {
        "type": "response.completed",
        "response": {"model": "gpt-r", "usage": {"input_tokens": 7, "output_tokens": 3}},
    }
    responses = read(mc.API_RESPONSES, "text/event-stream", sse({"type": "response.created", "response": {}}, done))
    assert (responses.model, responses.usage["input_tokens"], responses.usage["output_tokens"]) == ("gpt-r", 7, 3)
    chat = read(
        mc.API_CHAT,
        "application/json",
        json.dumps({"model": "qwen-c", "usage": {"prompt_tokens": 11, "completion_tokens": 2}}).encode(),
    )
    assert (chat.model, chat.usage["input_tokens"], chat.usage["output_tokens"]) == ("qwen-c", 11, 2)


def test_a_stream_without_usage_is_unobserved_never_zero():
    chunks = sse({"model": "qwen-c", "choices": [{"delta": {"content": "x"}}]}) + b"data: [DONE]\n\n"
    reader = read(mc.API_CHAT, "text/event-stream", chunks)
    assert reader.model == "qwen-c" and reader.usage is None
    calls = [
        {
            "api": mc.API_CHAT,
            "status": 200,
            "requested_model": "q",
            "answered_model": "qwen-c",
            "input_tokens": 5,
            "output_tokens": 1,
        },
        {
            "api": mc.API_CHAT,
            "status": 200,
            "requested_model": "q",
            "answered_model": "qwen-c",
            "input_tokens": None,
            "output_tokens": None,
        },
    ]
    summary = mc.summarise(calls)
    assert summary["usage"]["input_tokens"] is None and summary["usage"]["output_tokens"] is None


def call(model: str, status: int = 200, answered: str | None = None, tokens: int = 10) -> dict:
    return {
        "api": mc.API_ANTHROPIC,
        "status": status,
        "requested_model": model,
        "answered_model": (answered or model) if status == 200 else None,
        "input_tokens": tokens if status == 200 else None,
        "output_tokens": 1 if status == 200 else None,
    }


def test_side_calls_and_a_fallback_after_a_429_do_not_flip_the_main_model():
    calls = [
        call("haiku"),  # a title, first
        call("sonnet", answered="sonnet-2026"),
        call("sonnet", 429),
        call("opus", answered="opus-2026"),  # the product's fallback after the rate limit
        call("opus", answered="opus-2026"),
        call("opus", answered="opus-2026"),
        call("sonnet", answered="sonnet-2026"),
        call("haiku"),
    ]
    summary = mc.summarise(calls)
    assert summary["main_model"] == "sonnet" and summary["model_stamp"] == "sonnet-2026"
    assert [c["role"] for c in calls] == ["side", "main", "main", "fallback", "fallback", "fallback", "main", "side"]
    assert summary["fallback_models"] == ["opus"]
    assert summary["side_calls"]["input_tokens"] == 50 and summary["main_thread"]["input_tokens"] == 20
    assert summary["usage"]["input_tokens"] == 70 and summary["final_failure"] is None


def test_a_provider_error_as_the_last_word_counts_its_retries():
    calls = [call("sonnet"), call("sonnet", 500), call("sonnet", 529), call("sonnet", 529)]
    summary = mc.summarise(calls)
    assert summary["final_failure"] == {
        "status": 529,
        "error": None,
        "requested_model": "sonnet",
        "attempts": 3,
        "retries": 2,
    }
    # a side call failing last did not end the agent's conversation
    assert mc.summarise([call("sonnet"), call("sonnet"), call("haiku", 429)])["final_failure"] is None


class _Gemini(BaseHTTPRequestHandler):
    seen: list[str] = []

    def log_message(self, *a):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        _Gemini.seen.append(self.path)
        body = json.dumps(
            {"modelVersion": "gemini-answered-7", "usageMetadata": {"promptTokenCount": 33, "candidatesTokenCount": 4}}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_the_gateway_forwards_and_records_no_key(tmp_path):
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Gemini)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = upstream.server_address[1]
    env = {"GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{port}"}
    routes = plan_routes(env, lambda h, p: (h, p) == ("127.0.0.1", port))
    assert [r.var for r in routes] == ["GOOGLE_GEMINI_BASE_URL"]
    gateway = ModelGateway(routes, env, log_path=tmp_path / "calls.jsonl")
    try:
        base = agent_env(routes, gateway.start_local())["GOOGLE_GEMINI_BASE_URL"]
        req = urllib.request.Request(
            f"{base}/v1beta/models/gemini-2.5-pro:generateContent?key={KEY}",
            data=b'{"contents": []}',
            headers={"x-goog-api-key": KEY, "Content-Type": "application/json"},
        )
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=10) as resp:
            assert json.loads(resp.read())["modelVersion"] == "gemini-answered-7"
    finally:
        gateway.stop()
        upstream.shutdown()
    assert _Gemini.seen == [f"/v1beta/models/gemini-2.5-pro:generateContent?key={KEY}"]  # forwarded whole
    (rec,) = gateway.calls
    assert rec["path"] == "/v1beta/models/gemini-2.5-pro:generateContent" and rec["status"] == 200
    assert (rec["requested_model"], rec["answered_model"]) == ("gemini-2.5-pro", "gemini-answered-7")
    assert (rec["input_tokens"], rec["output_tokens"]) == (33, 4)
    assert KEY not in json.dumps(gateway.calls) and KEY not in (tmp_path / "calls.jsonl").read_text()


def test_a_direct_tunnel_to_a_covered_host_is_refused():
    routes = plan_routes({"ANTHROPIC_BASE_URL": "https://127.0.0.1:9"}, lambda h, p: True)
    with RecordingProxy(["127.0.0.1:9"], covered=covered(routes)) as proxy:
        with socket.create_connection(proxy.address, timeout=5) as s:
            s.sendall(b"CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 403")
    (event,) = proxy.events
    assert event["allowed"] is False and "model gateway" in event["reason"]


def test_the_refusal_hint_offers_to_accept_only_what_cannot_be_observed():
    from pytest_agentdrift.manifest.baseline import unobserved_hint

    # a command agent (its adapter's unobservable list has no model field the gateway sees)
    lines = unobserved_hint(["model_stamp", "model_id"], None, ["server_revision", "model_options"])
    text = "\n".join(lines)
    assert "observable by the harness, unobserved on both sides: model_stamp, model_id" in text
    assert "--agent-allow-host" in text and "ANTHROPIC_BASE_URL" in text
    assert "agent_accept_unobserved" not in text and "--agent-accept-unobserved" not in text
    assert "unobservable" not in text.replace("unobserved", "")  # no group word
    assert '    model_id = "..."' in text  # the operator may still vouch for it
    # a field its adapter can never observe is offered, by name
    other = "\n".join(unobserved_hint(["auto_update_state"], None, ["auto_update_state"]))
    assert "--agent-accept-unobserved auto_update_state" in other and "in one word" not in other
    # a product whose adapter cannot observe its model stamp (no gateway covers it) is offered it
    product = "\n".join(unobserved_hint(["model_stamp"], None, ["model_stamp", "server_revision"]))
    assert "--agent-accept-unobserved model_stamp" in product


def test_the_sandbox_relay_forwards_each_gateway_port_to_its_socket(tmp_path):
    """Without root the sandbox's relay (run/forwarder.py) is the agent's only way out: each
    `--relay PORT=SOCK` is one more loopback port to one of the harness's Unix sockets."""
    import subprocess
    import sys

    def free_port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    sockets = []
    for name in ("proxy.sock", "gateway-0.sock"):
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(tmp_path / name))
        server.listen(1)
        sockets.append(server)

    def answer(server: socket.socket, word: bytes) -> None:
        conn, _ = server.accept()
        conn.recv(100)
        conn.sendall(word)
        conn.close()

    for server, word in zip(sockets, (b"proxy", b"gateway"), strict=True):
        threading.Thread(target=answer, args=(server, word), daemon=True).start()
    proxy_port, gateway_port = free_port(), free_port()
    client = (
        "import socket, time, sys\n"
        "out = []\n"
        f"for port in ({proxy_port}, {gateway_port}):\n"
        "    for _ in range(100):\n"
        "        try:\n"
        "            s = socket.create_connection(('127.0.0.1', port), timeout=5); break\n"
        "        except OSError:\n"
        "            time.sleep(0.05)\n"
        "    s.sendall(b'hi'); out.append(s.recv(100).decode())\n"
        "print(' '.join(out))\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_agentdrift.run.forwarder",
            "--port",
            str(proxy_port),
            "--unix",
            str(tmp_path / "proxy.sock"),
            "--relay",
            f"{gateway_port}={tmp_path / 'gateway-0.sock'}",
            "--",
            sys.executable,
            "-c",
            client,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.split() == ["proxy", "gateway"], done.stderr


def test_an_endpoint_certificate_the_agent_was_not_told_to_trust_is_a_configuration_error(tmp_path):
    """The gateway's TLS handshake fails the same way on every run: `configuration` (the session stops),
    from the harness's own seeing, whatever the product made of the gateway's stand-in answer."""
    import ssl

    import trustme

    from pytest_agentdrift.agents.base import AdapterOutput
    from pytest_agentdrift.run.modelgateway import observed

    ca = trustme.CA()
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Gemini)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    upstream.socket = ctx.wrap_socket(upstream.socket, server_side=True)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = upstream.server_address[1]
    env = {"ANTHROPIC_BASE_URL": f"https://127.0.0.1:{port}"}  # no CA file named: not trusted
    routes = plan_routes(env, lambda h, p: True)
    gateway = ModelGateway(routes, env)
    try:
        base = agent_env(routes, gateway.start_local())["ANTHROPIC_BASE_URL"]
        req = urllib.request.Request(f"{base}/v1/messages", data=b'{"model": "m"}')
        try:
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=10)
        except urllib.error.HTTPError as exc:
            assert exc.code == 502
    finally:
        gateway.stop()
        upstream.shutdown()
    (rec,) = gateway.calls
    assert rec["status"] is None and rec["error"].startswith("upstream certificate not trusted")
    product_word = {"class": "server_error", "source": "claude-code", "evidence": "API Error: 502"}
    _, infra = observed(gateway, [dict(c) for c in gateway.calls], AdapterOutput(), product_word)
    assert infra["class"] == "configuration" and infra["repeats"] is True
    assert infra["source"] == "harness model gateway" and "certificate" in infra["evidence"]


def test_the_gateway_gives_up_after_its_patience_with_provider_errors_only():
    """--agent-provider-patience: a streak of provider errors (at least three calls) lasting the patience
    ends the run as infrastructure; an answer in between starts the streak again."""
    gateway = ModelGateway([], {}, patience_s=5.0)
    t0 = time.monotonic()
    for i in range(3):
        gateway.record({"api": "anthropic-messages", "status": 429}, started=t0 - 6 + i)
    assert "3 model call(s) in a row with provider errors" in gateway.give_up()
    gateway.record({"api": "anthropic-messages", "status": 200})
    assert gateway.give_up() is None
    patient = ModelGateway([], {})  # the default: a minute
    for _ in range(3):
        patient.record({"api": "anthropic-messages", "status": 429}, started=t0 - 6)
    assert patient.give_up() is None
