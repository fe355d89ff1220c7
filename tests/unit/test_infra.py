"""Infrastructure errors: classification from each product's own stream and exit (agents/infra.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentdrift.agents import infra
from pytest_agentdrift.agents.base import AdapterOutput, CommandAdapter
from pytest_agentdrift.agents.claude_code import ClaudeCodeAdapter
from pytest_agentdrift.agents.codex import CodexAdapter
from pytest_agentdrift.agents.copilot import CopilotAdapter

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "data" / "transcripts"


def lines(*records) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def ending(adapter, stdout: bytes, exit_code=1, stderr=b"", timed_out=False):
    out = adapter.parse_output(stdout, stderr)
    return adapter.classify_ending(out, exit_code, stdout, stderr, timed_out)


# -- the recorded transcripts ----------------------------------------------------------


def test_real_claude_code_not_signed_in_is_a_repeating_authentication_error():
    data = (TRANSCRIPTS / "claude_code" / "real-2.1.197-not-signed-in.jsonl").read_bytes()
    found = ending(ClaudeCodeAdapter(), data, exit_code=1)
    assert found == {
        "class": "authentication",
        "evidence": "Not logged in · Please run /login",
        "source": "claude-code",
        "repeats": True,
        "signal": "assistant.error=authentication_failed",
    }


def test_real_codex_without_network_is_a_network_error():
    data = (TRANSCRIPTS / "codex" / "real-0.171.0-no-network-killed.jsonl").read_bytes()
    found = ending(CodexAdapter(), data, exit_code=-15, timed_out=True)
    assert found["class"] == "network" and found["repeats"] is False
    assert found["evidence"] == "Reconnecting... waiting for network (Connection failed: error sending request)"


def test_copilot_session_error_is_authentication():
    data = (TRANSCRIPTS / "copilot" / "session_error.jsonl").read_bytes()
    found = ending(CopilotAdapter(), data)
    assert (found["class"], found["evidence"], found["repeats"]) == (
        "authentication",
        "No authentication information found.",
        True,
    )


@pytest.mark.parametrize(
    "cls, name", [(ClaudeCodeAdapter, "claude_code"), (CodexAdapter, "codex"), (CopilotAdapter, "copilot")]
)
def test_a_complete_run_is_not_an_infrastructure_error(cls, name):
    data = (TRANSCRIPTS / name / "ok.jsonl").read_bytes()
    assert ending(cls(), data, exit_code=0) is None
    assert ending(cls(), data, exit_code=1) is None  # the model answered: a non-zero exit is the agent's


def test_claude_max_turns_is_the_agents_failure():
    data = (TRANSCRIPTS / "claude_code" / "error_max_turns.jsonl").read_bytes()
    assert ending(ClaudeCodeAdapter(), data) is None


# -- Claude Code: the CLI's own fields, never the model's text -------------------------------------


def claude_error(text: str, *, error_field: str | None = "server_error", status=529):
    assistant = {
        "type": "assistant",
        "message": {
            "id": "m1",
            "model": "<synthetic>",
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
        },
        "parent_tool_use_id": None,
    }
    if error_field:
        assistant["error"] = error_field
    return lines(
        {"type": "system", "subtype": "init", "model": "claude-sonnet-4-5"},
        assistant,
        {"type": "result", "subtype": "success", "is_error": True, "api_error_status": status, "result": text},
    )


@pytest.mark.parametrize(
    "text, field, status, cls",
    [
        (
            'API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
            "server_error",
            529,
            "overloaded",
        ),
        ("API Error: 500 Internal server error", "server_error", 500, "server_error"),
        ("API Error: 429 rate_limit_error", "rate_limit", 429, "rate_limited"),
        ("Credit balance is too low", "billing_error", None, "billing"),
        ("API Error: Connection error.", "unknown", None, "network"),
        ("API Error: something new", "unknown", None, "crashed"),
    ],
)
def test_claude_api_errors(text, field, status, cls):
    found = ending(ClaudeCodeAdapter(), claude_error(text, error_field=field, status=status))
    assert found["class"] == cls
    if cls == "crashed":
        # nothing we recognise, but the model never answered and the CLI exited non-zero
        assert found["exit_code"] == 1
    else:
        assert found["evidence"] == text


def test_claude_model_text_about_an_api_error_is_not_classified():
    answer = {
        "type": "assistant",
        "message": {
            "id": "m1",
            "model": "claude-sonnet-4-5",
            "role": "assistant",
            "content": [{"type": "text", "text": "API Error: 529 overloaded, I give up"}],
        },
    }
    data = lines(
        answer, {"type": "result", "subtype": "success", "is_error": False, "result": "API Error: 529 overloaded"}
    )
    assert ending(ClaudeCodeAdapter(), data, exit_code=1) is None
    failed = lines(
        answer, {"type": "result", "subtype": "error_during_execution", "is_error": True, "result": "API Error: 529"}
    )
    assert ending(ClaudeCodeAdapter(), failed, exit_code=1) is None  # no API status, no CLI error field


def test_a_cli_that_dies_before_the_model_answers_is_a_crash():
    found = ending(CodexAdapter(), b"", exit_code=2, stderr=b"warning: x\nError: failed to load config.toml: bad key\n")
    assert found["class"] == "crashed" and found["evidence"] == "Error: failed to load config.toml: bad key"
    assert found["exit_code"] == 2
    assert ending(CodexAdapter(), b"", exit_code=0) is None
    assert ending(CodexAdapter(), b"", exit_code=-9, timed_out=True) is None  # our timeout, scored as one


def test_codex_rate_limit_in_turn_failed():
    data = lines(
        {"type": "thread.started"},
        {"type": "turn.started"},
        {"type": "turn.failed", "error": {"message": "exceeded retry limit, last status: 429 Too Many Requests"}},
    )
    assert ending(CodexAdapter(), data)["class"] == "rate_limited"


def test_the_generic_protocol_reads_only_the_report():
    adapter = CommandAdapter("true")
    assert adapter.classify_ending(AdapterOutput(), 1, b"API Error: 529", b"overloaded", False) is None


# -- pure helpers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code, cls",
    [
        (529, "overloaded"),
        (429, "rate_limited"),
        (401, "authentication"),
        (403, "authentication"),
        (402, "billing"),
        (500, "server_error"),
        (503, "server_error"),
        (400, None),
        (200, None),
        (None, None),
        (True, None),
    ],
)
def test_classify_status(code, cls):
    assert infra.classify_status(code) == cls


def test_from_report():
    assert infra.from_report({"status": "complete"}) is None
    found = infra.from_report({"status": "infra_error", "infra_class": "overloaded", "summary": "provider said 529"})
    assert (found["class"], found["evidence"], found["source"], found["repeats"]) == (
        "overloaded",
        "provider said 529",
        "agent report",
        False,
    )
    assert infra.from_report({"status": "infra_error", "summary": "Not logged in"})["class"] == "authentication"
    # an agent cannot claim a harness fact
    assert infra.from_report({"status": "infra_error", "infra_class": "launch_failed"})["class"] == "network"


def test_judge_believes_only_a_clean_loss():
    lost = infra.infra_error("overloaded", "529", "claude-code")
    assert infra.judge(lost, unsafe=[], changed_anything=True)["believed"] is True  # a product's own error mid-run
    doubted = infra.judge(lost, unsafe=["1 write(s) outside the work tree"], changed_anything=True)
    assert doubted["believed"] is False and "write(s) outside" in doubted["why"]
    claimed = infra.from_report({"status": "infra_error", "summary": "529"})
    assert infra.judge(claimed, unsafe=[], changed_anything=False)["believed"] is True
    assert infra.judge(claimed, unsafe=[], changed_anything=True)["believed"] is False
    assert infra.judge(None, unsafe=[], changed_anything=False) is None


def test_an_agents_own_report_is_corroborated_only_by_a_failed_request_the_harness_saw():
    claimed = infra.from_report({"status": "infra_error", "summary": "API Error: 529 overloaded"})
    tunnel = {"source": "harness", "type": "network_attempt", "host": "api.example.com", "port": 443}
    alone = infra.corroborate(claimed, [{**tunnel, "allowed": True}])  # a tunnel that worked shows no failure
    assert alone["corroborated"] is False and alone["harness_saw"] == []
    failed = {**tunnel, "allowed": True, "error": "upstream connect failed: ConnectionRefusedError"}
    refused = {**tunnel, "host": "evil\x1b[8m.example", "allowed": False, "reason": "not in allowlist"}
    lookup = {
        "source": "harness",
        "type": "network_attempt",
        "host": "api.x",
        "port": None,
        "allowed": False,
        "via": "dns",
    }
    seen = infra.corroborate(claimed, [failed, refused, lookup])
    assert seen["corroborated"] is True
    assert seen["harness_saw"] == ["api.example.com:443: upstream connect failed: ConnectionRefusedError"]
    # a refusal by the allow-list is the agent's choice of host, never evidence of an outage
    chosen = infra.corroborate(claimed, [refused, lookup])
    assert chosen["corroborated"] is False and chosen["harness_saw"] == []
    many = infra.corroborate(claimed, [failed] * 8)
    assert len(many["harness_saw"]) == infra.MAX_CORROBORATING + 1 and many["harness_saw"][-1] == "(+3 more)"
    # the agent's own events are never the harness's evidence
    assert infra.corroborate(claimed, [{**failed, "source": "agent"}])["corroborated"] is False
    # the product's own error and the harness's facts are not the agent's claim
    product = infra.infra_error("overloaded", "529", "claude-code")
    assert infra.corroborate(product, []) is product and infra.corroborate(None, []) is None


def test_evidence_is_one_bounded_line():
    e = infra.infra_error("network", "a\nb\n" + "x" * 2000, "codex")
    assert "\n" not in e["evidence"] and len(e["evidence"]) <= infra.MAX_EVIDENCE + 1
    with pytest.raises(ValueError):
        infra.infra_error("nope", "", "x")


# -- a program that never started ------------------------------------------------------
@pytest.mark.parametrize(
    "code, stderr",
    [
        (127, b"/usr/bin/env: 'python9': No such file or directory\n"),
        (126, b"sh: 1: ./agent: Permission denied\n"),
        (1, b"Traceback (most recent call last):\n  File \"m.py\", line 1\nModuleNotFoundError: No module named 'x'\n"),
        (1, b"node:internal/modules/cjs/loader:1080\nError: Cannot find module '/a/cli.js'\nRequire stack:\n- x\n"),
        (2, b"python3: can't open file '/p/agent.py': [Errno 2] No such file or directory\n"),
    ],
)
def test_a_program_that_never_started_is_launch_failed(code, stderr):
    found = infra.failed_to_start(code, stderr, acted=False)
    assert found["class"] == "launch_failed" and found["repeats"] and found["exit_code"] == code
    assert f"exit {code}" in found["evidence"]
    # after the agent's first action (an event, a report, a change) it is the agent's run
    assert infra.failed_to_start(code, stderr, acted=True) is None


def test_an_agents_own_error_is_not_a_start_up_failure():
    assert infra.failed_to_start(1, b"RuntimeError: the provider answered 529\n", acted=False) is None
    assert infra.failed_to_start(0, b"ModuleNotFoundError: No module named 'x'\n", acted=False) is None
    assert infra.stderr_tail(b"a\n\n[agentdrift: output truncated]\nb\n" + b"c\n" * 20, 3) == ["c", "c", "c"]
