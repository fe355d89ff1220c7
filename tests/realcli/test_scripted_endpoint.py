"""The scripted model endpoint itself: each wire format, turns read from the request, errors, TLS, the log.

These talk to the endpoint with the standard library's client over TLS with
the test-time CA, so they check what a real client sees on the wire.
"""

from __future__ import annotations

import http.client
import json
import ssl

import pytest
import trustme  # noqa: F401
from scripted_endpoint import ScriptedEndpoint, call_id, cwd_of, load_script, turn_of

TOOLS = [{"name": "Bash", "input_schema": {"type": "object"}}]
SCRIPT = [
    {"tools": [{"name": "Bash", "input": {"command": "ls"}}], "usage": {"input": 120, "output": 7, "cache_write": 50}},
    {"text": "done", "model": "answering-model", "usage": {"input": 200, "output": 9, "cache_read": 50}},
]


def post(ep: ScriptedEndpoint, path: str, body: dict) -> tuple[int, dict, bytes]:
    ctx = ssl.create_default_context(cafile=str(ep.ca_pem))
    conn = http.client.HTTPSConnection("127.0.0.1", ep.port, context=ctx, timeout=10)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", "x-api-key": "sk-PLANTED"})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), data


def sse_events(data: bytes) -> list[tuple[str | None, object]]:
    out = []
    for frame in data.decode().split("\n\n"):
        if not frame.strip():
            continue
        event = None
        payload = None
        for line in frame.splitlines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                payload = line[6:]
        out.append((event, payload if payload == "[DONE]" else json.loads(payload)))
    return out


def test_turn_is_read_from_the_tool_call_ids_in_the_history():
    assert turn_of(b'{"messages": []}') == 0
    body = json.dumps({"messages": [{"content": [{"tool_use_id": call_id("anthropic", 0, 0)}]}]}).encode()
    assert turn_of(body) == 1
    assert turn_of(f'"{call_id("chat", 0, 1)}" "{call_id("chat", 3, 0)}"'.encode()) == 4


def test_anthropic_stream_then_plain(tmp_path):
    with ScriptedEndpoint(SCRIPT, tmp_path) as ep:
        status, headers, data = post(
            ep, "/v1/messages", {"model": "m-req", "stream": True, "tools": TOOLS, "messages": []}
        )
        assert status == 200 and headers["Content-Type"] == "text/event-stream"
        events = sse_events(data)
        assert [e for e, _ in events] == [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
        block = events[1][1]["content_block"]
        assert block["type"] == "tool_use" and block["id"] == "toolu_agd0x0" and block["name"] == "Bash"
        assert json.loads(events[2][1]["delta"]["partial_json"]) == {"command": "ls"}
        assert events[0][1]["message"]["model"] == "m-req"
        assert events[4][1]["usage"]["cache_creation_input_tokens"] == 50
        history = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": block["id"]}]}]
        status, _, data = post(ep, "/v1/messages", {"model": "m-req", "tools": TOOLS, "messages": history})
        msg = json.loads(data)
        assert (
            status == 200 and msg["model"] == "answering-model" and msg["content"] == [{"type": "text", "text": "done"}]
        )
        assert msg["usage"]["cache_read_input_tokens"] == 50 and msg["stop_reason"] == "end_turn"
    assert ep.results_of("") == {"toolu_agd0x0": {"id": "toolu_agd0x0", "is_error": False, "text": "null"}}
    assert [(r["turn"], r["status"], r["stream"], r["answered_model"]) for r in ep.main_calls()] == [
        (0, 200, True, "m-req"),
        (1, 200, False, "answering-model"),
    ]
    # header names are logged, never their values
    assert "x-api-key" in ep.log[0]["headers"] and "sk-PLANTED" not in json.dumps(ep.log)


def test_side_calls_do_not_use_up_turns(tmp_path):
    with ScriptedEndpoint(SCRIPT, tmp_path) as ep:
        _, _, data = post(ep, "/v1/messages", {"model": "haiku", "messages": []})
        assert json.loads(data)["content"] == [{"type": "text", "text": "ok"}]
        _, _, data = post(ep, "/v1/messages", {"model": "m", "tools": TOOLS, "messages": []})
        assert json.loads(data)["content"][0]["id"] == "toolu_agd0x0"
    assert [r["kind"] for r in ep.log] == ["side", "turn"]
    assert ep.served_usage(("side",)).input == 10 and ep.served_usage(("turn",)).cache_write == 50


def test_errors_with_status_and_headers_then_the_turn(tmp_path):
    script = [{"errors": [{"status": 529}, {"status": 429, "headers": {"retry-after": "0"}}], "text": "hi"}]
    with ScriptedEndpoint(script, tmp_path) as ep:
        status, _, data = post(ep, "/v1/messages", {"model": "m", "tools": TOOLS, "messages": []})
        assert status == 529 and json.loads(data)["error"]["type"] == "overloaded_error"
        status, headers, data = post(ep, "/v1/messages", {"model": "m", "tools": TOOLS, "messages": []})
        assert status == 429 and headers["retry-after"] == "0"
        status, _, data = post(ep, "/v1/messages", {"model": "m", "tools": TOOLS, "messages": []})
        assert status == 200 and json.loads(data)["content"][0]["text"] == "hi"
    assert [r["status"] for r in ep.log] == [529, 429, 200]


def test_a_permanent_error_on_every_attempt(tmp_path):
    with ScriptedEndpoint([{"error": {"status": 401}}], tmp_path) as ep:
        for _ in range(3):
            status, _, data = post(ep, "/chat/completions", {"model": "m", "tools": TOOLS, "messages": []})
            assert status == 401 and json.loads(data)["error"]["code"] == "invalid_api_key"
    assert [r["kind"] for r in ep.log] == ["error"] * 3


def test_responses_sse_function_and_custom_tools(tmp_path):
    script = [
        {
            "text": "patching",
            "tools": [
                {"name": "shell", "input": {"command": ["ls"]}},
                {"name": "apply_patch", "input": "*** Begin Patch"},
            ],
            "usage": {"input": 100, "output": 10, "cache_read": 40, "reasoning": 5},
        }
    ]
    tools = [{"type": "function", "name": "shell"}, {"type": "custom", "name": "apply_patch"}]
    with ScriptedEndpoint(script, tmp_path) as ep:
        status, _, data = post(ep, "/v1/responses", {"model": "gpt-x", "stream": True, "tools": tools, "input": []})
    events = sse_events(data)
    assert events[0][0] == "response.created" and events[-1][0] == "response.completed"
    done = events[-1][1]["response"]
    assert [i["type"] for i in done["output"]] == ["message", "function_call", "custom_tool_call"]
    assert (
        json.loads(done["output"][1]["arguments"]) == {"command": ["ls"]}
        and done["output"][1]["call_id"] == "call_agd0x0"
    )
    assert done["output"][2]["input"] == "*** Begin Patch"
    assert done["usage"] == {
        "input_tokens": 140,
        "input_tokens_details": {"cached_tokens": 40},
        "output_tokens": 15,
        "output_tokens_details": {"reasoning_tokens": 5},
        "total_tokens": 155,
    }


def test_chat_completions_sse_tool_calls_and_usage(tmp_path):
    script = [{"tools": [{"name": "bash", "input": {"command": "pytest"}}], "usage": {"input": 30, "output": 4}}]
    with ScriptedEndpoint(script, tmp_path, model="served-model") as ep:
        status, _, data = post(
            ep,
            "/v1/chat/completions",
            {
                "model": "m",
                "stream": True,
                "tools": [{"type": "function", "function": {"name": "bash"}}],
                "messages": [],
            },
        )
    events = [p for _, p in sse_events(data)]
    assert events[-1] == "[DONE]"
    calls = [c for e in events[:-1] for ch in e["choices"] for c in ch["delta"].get("tool_calls", [])]
    assert calls == [
        {
            "index": 0,
            "id": "call_agd0x0",
            "type": "function",
            "function": {"name": "bash", "arguments": '{"command": "pytest"}'},
        }
    ]
    assert events[-3]["choices"][0]["finish_reason"] == "tool_calls"
    assert events[-2]["usage"]["prompt_tokens"] == 30 and events[-2]["model"] == "served-model"


def test_plain_http_and_unknown_routes(tmp_path):
    with ScriptedEndpoint(SCRIPT, tmp_path, tls=False) as ep:
        conn = http.client.HTTPConnection("127.0.0.1", ep.port, timeout=10)
        conn.request("GET", "/v1/models")
        assert json.loads(conn.getresponse().read())["data"][0]["id"] == "scripted-model"
        conn.request("POST", "/v2/else", "{}")
        assert conn.getresponse().status == 404
    assert ep.base_url.startswith("http://127.0.0.1:") and [r["kind"] for r in ep.log] == ["models", "unknown"]


def test_untrusted_without_the_ca(tmp_path):
    with ScriptedEndpoint(SCRIPT, tmp_path) as ep:
        conn = http.client.HTTPSConnection("127.0.0.1", ep.port, context=ssl.create_default_context(), timeout=10)
        with pytest.raises(ssl.SSLCertVerificationError):
            conn.request("GET", "/v1/models")
        conn.close()


def test_load_script(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"turns": SCRIPT}))
    assert load_script(tmp_path / "a.json") == SCRIPT
    (tmp_path / "b.json").write_text("[1]")
    with pytest.raises(ValueError, match="b.json"):
        load_script(tmp_path / "b.json")


def test_cwd_from_each_cli_and_filled_into_tool_input(tmp_path):
    assert cwd_of(b'"text": " - Primary working directory: /tmp/box/work\\n - Is a git"') == "/tmp/box/work"
    assert cwd_of(b"<environment_context>\\n  <cwd>/tmp/x y/work</cwd>") == "/tmp/x y/work"
    assert cwd_of(b"nothing here") is None
    script = [{"tools": [{"name": "Read", "input": {"file_path": "{cwd}/a.py", "n": 1}}]}]
    body = {"model": "m", "tools": TOOLS, "system": "Primary working directory: /w/k\n", "messages": []}
    with ScriptedEndpoint(script, tmp_path) as ep:
        _, _, data = post(ep, "/v1/messages", body)
    assert json.loads(data)["content"][0]["input"] == {"file_path": "/w/k/a.py", "n": 1}
    assert json.loads(ep.bodies[0].read_text())["system"] == body["system"]


def test_one_script_per_task_chosen_by_the_request_text(tmp_path):
    scripts = {"Fix the bug": [{"text": "fixed"}], "Explain it": [{"text": "explained", "errors": [{"status": 529}]}]}
    with ScriptedEndpoint(scripts, tmp_path) as ep:
        for task in ("Explain it", "Fix the bug", "Explain it", "Something else"):
            body = {"model": "m", "tools": TOOLS, "messages": [{"role": "user", "content": task}]}
            status, _, data = post(ep, "/v1/messages", body)
    assert [(r["script"], r["kind"], r["status"]) for r in ep.log] == [
        ("Explain it", "error", 529),
        ("Fix the bug", "turn", 200),
        ("Explain it", "turn", 200),
        (None, "unscripted", 200),
    ]
    assert [r["script"] for r in ep.main_calls("Explain it")] == ["Explain it"]


def test_a_toolless_conversation_is_at_the_turn_its_history_says(tmp_path):
    """Aider declares no tools: its turns are read from the assistant messages after the task,
    examples before the task do not count, a retry gets its turn again, other text is a side call."""
    scripts = {"Fix the bug": [{"text": "look at a.py", "errors": [{"status": 429}]}, {"text": "edit a.py"}]}
    examples = [{"role": "user", "content": "example"}, {"role": "assistant", "content": "example answer"}]
    task = [*examples, {"role": "user", "content": "Fix the bug"}]
    with ScriptedEndpoint(scripts, tmp_path, toolless=True) as ep:
        answers = []
        for messages in (
            task,  # 429
            task,  # the retry: the first turn
            [*task, {"role": "assistant", "content": "look at a.py"}, {"role": "user", "content": "a.py added"}],
            [{"role": "user", "content": "summarise this chat"}],
        ):
            status, _, data = post(ep, "/chat/completions", {"model": "m", "messages": messages})
            answers.append((status, json.loads(data)["choices"][0]["message"]["content"] if status == 200 else None))
    assert answers == [(429, None), (200, "look at a.py"), (200, "edit a.py"), (200, "ok")]
    assert [(r["kind"], r["turn"]) for r in ep.log] == [("error", 0), ("turn", 0), ("turn", 1), ("side", -1)]
