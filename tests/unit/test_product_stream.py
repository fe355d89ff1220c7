"""Infrastructure and accounting read from the products' own streams.

Claude Code's `system/api_retry` records, its init record, its start-up
refusals and certificate failures; Codex's capacity messages and failed
patches; tokens and cost of the same calls. Record shapes are those of
Claude Code 2.1.332 and Codex 0.171.0 (measured against the scripted
endpoint of tests/realcli).
"""

from __future__ import annotations

import json

import pytest

from pytest_agentdrift.agents import infra
from pytest_agentdrift.agents.claude_code import ClaudeCodeAdapter
from pytest_agentdrift.agents.codex import CodexAdapter
from pytest_agentdrift.run.evidence import request_unit


def lines(*records) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


INIT = {
    "type": "system",
    "subtype": "init",
    "model": "claude-opus-5-5",
    "tools": ["Write", "Bash", "Read"],
    "sandbox_enabled": False,
    "claude_code_version": "2.1.332",
}


def retry(attempt: int, status: int | None, error: str) -> dict:
    return {
        "type": "system",
        "subtype": "api_retry",
        "attempt": attempt,
        "max_retries": 10,
        "retry_delay_ms": 500,
        "error_status": status,
        "error": error,
    }


def test_claude_init_record_is_what_the_cli_asked_for():
    out = ClaudeCodeAdapter().parse_output(lines(INIT), b"")
    assert out.run_identity == {
        "model_id": "claude-opus-5-5",
        "built_in_tools": ["Bash", "Read", "Write"],
        "sandbox": {"sandbox_enabled": False},
    }
    assert ClaudeCodeAdapter().describe()["run_reported"] == ["model_id", "built_in_tools", "sandbox"]


def test_claude_api_retries_are_recorded_and_counted_on_the_error():
    result = {"type": "result", "subtype": "success", "is_error": True, "api_error_status": 429, "result": "API Error"}
    stdout = lines(INIT, retry(1, 429, "rate_limit"), retry(2, 429, "rate_limit"), result)
    adapter = ClaudeCodeAdapter()
    out = adapter.parse_output(stdout, b"")
    retries = [e for e in out.events if e["type"] == "api_retry"]
    assert [(e["attempt"], e["error_status"], e["error"]) for e in retries] == [
        (1, 429, "rate_limit"),
        (2, 429, "rate_limit"),
    ]
    found = adapter.classify_ending(out, 1, stdout, b"", False)
    assert found["class"] == "rate_limited" and found["product_retries"] == 2


@pytest.mark.parametrize(
    ("status", "error", "cls"),
    [
        (529, "overloaded", "overloaded"),
        (None, "unknown", "network"),
        (None, "authentication_failed", "authentication"),
    ],
)
def test_claude_stopped_while_retrying_is_the_retried_error(status, error, cls):
    stdout = lines(INIT, retry(1, status, error))
    found = ClaudeCodeAdapter().parse_output(stdout, b"").infra_error
    assert found["class"] == cls and found["signal"] == "system.api_retry" and found["product_retries"] == 1


ROOT_REFUSAL = b"--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons\n"


def test_a_start_up_refusal_is_configuration_and_stops_the_session():
    adapter = ClaudeCodeAdapter()
    out = adapter.parse_output(b"", ROOT_REFUSAL)
    found = adapter.classify_ending(out, 1, b"", ROOT_REFUSAL, False)
    assert found["class"] == "configuration" and found["repeats"] is True
    assert found["evidence"] == ROOT_REFUSAL.decode().strip()


@pytest.mark.parametrize(
    "message",
    [
        "API Error: Unable to connect to API (SELF_SIGNED_CERT_IN_CHAIN)",
        "unable to get local issuer certificate",
        "error sending request: invalid peer certificate: UnknownIssuer",
        "certificate has expired",
    ],
)
def test_tls_trust_failures_are_configuration(message):
    assert infra.classify_message(message) == "configuration"
    assert "configuration" in infra.REPEATING_CLASSES


TLS_TEXT = (
    "API Error: Unable to connect to API: SSL certificate verification failed (UNABLE_TO_VERIFY_LEAF_SIGNATURE). "
    "The certificates the server sent don't lead to a trusted authority."
)


def test_claude_certificate_failure_filed_as_server_error_is_configuration():
    """2.1.332 against an endpoint whose CA it was not given: a synthetic message with error
    server_error, then an is_error result without a status."""
    synthetic = {
        "type": "assistant",
        "error": "server_error",
        "message": {"id": "x", "model": "<synthetic>", "content": [{"type": "text", "text": TLS_TEXT}]},
    }
    result = {"type": "result", "subtype": "success", "is_error": True, "api_error_status": None, "result": TLS_TEXT}
    stdout = lines(INIT, synthetic, result)
    found = ClaudeCodeAdapter().parse_output(stdout, b"").infra_error
    assert found["class"] == "configuration" and found["repeats"] is True


def test_codex_capacity_messages_are_overloaded():
    # Codex 0.171 words a 503 server_is_overloaded and a 500 without their status
    for message in (
        "Selected model is at capacity. Please try a different model.",
        "We\u2019re currently experiencing high demand, which may cause temporary errors.",
    ):
        stdout = lines(
            {"type": "thread.started", "thread_id": "t"},
            {"type": "turn.started"},
            {"type": "error", "message": message},
            {"type": "turn.failed", "error": {"message": message}},
        )
        adapter = CodexAdapter()
        stderr = b"Reading additional input from stdin...\n"
        found = adapter.classify_ending(adapter.parse_output(stdout, stderr), 1, stdout, stderr, False)
        assert found["class"] == "overloaded" and found["evidence"] == message


def test_a_failed_codex_patch_keeps_its_status():
    item = {"id": "i1", "type": "file_change", "status": "failed", "changes": [{"path": "a.py", "kind": "update"}]}
    stdout = lines({"type": "item.completed", "item": item}, {"type": "turn.completed", "usage": {}})
    events = CodexAdapter().parse_output(stdout, b"").events
    call = next(e for e in events if e["type"] == "tool_call")
    assert call == {"type": "tool_call", "name": "file_change", "item_id": "i1", "status": "failed"}
    assert not [e for e in events if e["type"] == "file_edit"]


def claude_result(model_usage: dict, usage: dict, cost: float) -> dict:
    return {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "done",
        "usage": usage,
        "modelUsage": model_usage,
        "total_cost_usd": cost,
    }


MAIN = {"input_tokens": 6300, "output_tokens": 150, "cache_read_input_tokens": 2400, "cache_creation_input_tokens": 800}


def answered_by(model: str) -> dict:
    return {"type": "assistant", "message": {"id": "m1", "model": model, "content": [], "usage": {}}}


def test_claude_tokens_and_cost_cover_the_same_calls():
    per_model = {
        "claude-opus-5-5": {
            "inputTokens": 6300,
            "outputTokens": 150,
            "cacheReadInputTokens": 2400,
            "cacheCreationInputTokens": 800,
            "costUSD": 0.03,
        },
        "claude-haiku-4-5": {
            "inputTokens": 500,
            "outputTokens": 20,
            "cacheReadInputTokens": 0,
            "cacheCreationInputTokens": 0,
            "costUSD": 0.001,
        },
    }
    stdout = lines(INIT, answered_by("claude-opus-5-5"), claude_result(per_model, MAIN, 0.031))
    usage = ClaudeCodeAdapter().parse_output(stdout, b"").usage.to_dict()
    assert usage["input_tokens"] == 6800 and usage["output_tokens"] == 170 and usage["cost_usd"] == 0.031
    assert usage["main_thread"] == {
        "input_tokens": 6300,
        "output_tokens": 150,
        "cached_tokens": 2400,
        "cache_write_tokens": 800,
    }
    assert usage["side_calls"] == {
        "input_tokens": 500,
        "output_tokens": 20,
        "cached_tokens": 0,
        "cache_write_tokens": 0,
    }
    assert usage["cost_basis"] == "reported" and usage["priced_as"] == ["claude-haiku-4-5", "claude-opus-5-5"]


def test_claude_cost_priced_for_another_model_is_estimated():
    per_model = {"claude-opus-5-5": {"inputTokens": 6300, "outputTokens": 150, "costUSD": 0.03}}
    stdout = lines(INIT, answered_by("gateway-model-7b"), claude_result(per_model, MAIN, 0.03))
    usage = ClaudeCodeAdapter().parse_output(stdout, b"").usage.to_dict()
    assert usage["cost_basis"] == "estimated" and usage["priced_as"] == ["claude-opus-5-5"]


def test_api_requests_say_what_they_count():
    connect = {"method": "CONNECT", "host": "gw", "port": 443}
    post = {"method": "POST", "host": "gw", "port": 80}
    assert request_unit([connect, connect]) == "tunnels"
    assert request_unit([post]) == "requests"
    assert request_unit([]) == "tunnels"  # what the proxy counts when it counts none
    assert request_unit([connect, post]) == "requests and tunnels"


def test_codex_crash_evidence_is_never_its_stdin_banner():
    stderr = b"Error: failed to load config.toml: bad key\nReading additional input from stdin...\n"
    adapter = CodexAdapter()
    found = adapter.classify_ending(adapter.parse_output(b"", stderr), 1, b"", stderr, False)
    assert found["class"] == "crashed" and found["evidence"] == "Error: failed to load config.toml: bad key"


def test_claude_endpoint_set_in_a_settings_env_block_is_not_guessed(tmp_path):
    from test_endpoint_identity import manifest_for

    settings = {".claude/settings.json": json.dumps({"env": {"ANTHROPIC_BASE_URL": "https://gw.internal"}})}
    m = manifest_for(ClaudeCodeAdapter(), tmp_path, {"ANTHROPIC_BASE_URL": "https://other"}, home_files=settings)
    assert m["identity"]["model_endpoint"] == "unobserved"
    assert "env block, recorded by name only" in m["reasons"]["model_endpoint"]
