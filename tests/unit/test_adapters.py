"""The Claude Code, Codex, Copilot, Gemini CLI and OpenCode adapters: argv, attributes, parsing.

Parsing is tested on transcripts under tests/data/transcripts/, written to
each product's documented event format (see the adapter module docstrings),
including malformed lines, a truncated last record and an agent that exits
mid-stream. Nothing here runs a real agent or touches the network.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from pytest_agentdrift.agents.base import AgentAdapter, RunContext, builtin_adapters
from pytest_agentdrift.agents.claude_code import ClaudeCodeAdapter
from pytest_agentdrift.agents.codex import CodexAdapter
from pytest_agentdrift.agents.common import clip, extract_report, read_jsonl
from pytest_agentdrift.agents.copilot import CopilotAdapter
from pytest_agentdrift.agents.gemini import GeminiAdapter
from pytest_agentdrift.agents.opencode import OpenCodeAdapter
from pytest_agentdrift.agents.products import surface_rules_for
from pytest_agentdrift.errors import AgentDriftError

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "data" / "transcripts"
ADAPTERS: list[type[AgentAdapter]] = [ClaudeCodeAdapter, CodexAdapter, CopilotAdapter, GeminiAdapter, OpenCodeAdapter]
DIRS = {
    ClaudeCodeAdapter: "claude_code",
    CodexAdapter: "codex",
    CopilotAdapter: "copilot",
    GeminiAdapter: "gemini",
    OpenCodeAdapter: "opencode",
}

# A task text that would break any naive quoting or option parsing.
NASTY_TASK = (
    "-- --help\nFix the bug in `pricing.py`; don't touch tests/.\n\"quotes\" and 'quotes' and $HOME and {task_id}\n"
)


def ctx(**options: Any) -> RunContext:
    return RunContext(
        task_id="T02",
        task_file=Path("/t/task.md"),
        task_text=NASTY_TASK,
        task_dir=Path("/t"),
        workdir=Path("/w/tree"),
        options=options,
    )


def parse(cls: type[AgentAdapter], name: str):
    return cls().parse_output((TRANSCRIPTS / DIRS[cls] / name).read_bytes(), b"")


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


# -- registration and class attributes ---------------------------------


def test_builtin_presets_include_the_three_products() -> None:
    presets = builtin_adapters()
    assert presets["claude-code"] is ClaudeCodeAdapter
    assert presets["codex"] is CodexAdapter
    assert presets["copilot"] is CopilotAdapter


@pytest.mark.parametrize(
    "name, cls, rules", [("gemini-cli", GeminiAdapter, "gemini"), ("opencode", OpenCodeAdapter, "opencode")]
)
def test_preset_is_registered_with_its_own_rules(name: str, cls: type[AgentAdapter], rules: str) -> None:
    assert builtin_adapters()[name] is cls
    assert surface_rules_for(cls().describe()) == rules


@pytest.mark.parametrize("cls", ADAPTERS)
def test_class_attributes_are_consistent(cls: type[AgentAdapter]) -> None:
    adapter = cls()
    assert adapter.surface == "cli" and adapter.product and adapter.name
    assert adapter.executable() and adapter.version_argv() == [adapter.executable(), "--version"]
    assert adapter.env_allowlist and adapter.api_hosts
    # Credentials are a subset of what is copied, and every path is home-relative.
    assert set(adapter.credential_files) <= set(adapter.home_files)
    for rel in (*adapter.home_files, *adapter.home_dirs):  # type: ignore[attr-defined]
        assert not rel.startswith(("/", "~")) and ".." not in Path(rel).parts
    # Variables that relocate the config dir would lead back into the real home.
    assert not set(adapter.env_allowlist) & set(adapter.config_home_env)  # type: ignore[attr-defined]
    desc = adapter.describe()
    assert desc["name"] == adapter.name and desc["defaults"] == adapter.defaults  # type: ignore[attr-defined]


@pytest.mark.parametrize("cls", ADAPTERS)
def test_task_text_is_one_verbatim_argv_element(cls: type[AgentAdapter]) -> None:
    argv = cls().build_argv(ctx())
    assert argv[0] == cls().executable()
    # or as the value of one `--option=TEXT` element (a value starting with '-' is never a flag)
    assert sum(a == NASTY_TASK or a.endswith("=" + NASTY_TASK) for a in argv) == 1
    assert all(isinstance(a, str) for a in argv)


# -- argv per product ---------------------------------------------------


def test_claude_argv_defaults_and_options() -> None:
    adapter = ClaudeCodeAdapter()
    assert adapter.build_argv(ctx()) == [
        "claude",
        "-p",
        NASTY_TASK,
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        "Bash",
    ]
    argv = adapter.build_argv(
        ctx(model="claude-sonnet-4-5", permission_mode="plan", allowed_tools=["Read", "Bash(git diff:*)"])
    )
    assert argv[argv.index("--model") + 1] == "claude-sonnet-4-5"
    assert argv[argv.index("--permission-mode") + 1] == "plan"
    # one element, last: the variadic option cannot swallow anything after it
    assert argv[-2:] == ["--allowedTools", "Read,Bash(git diff:*)"]
    assert adapter.build_argv(ctx(allowed_tools="Read, Edit"))[-1] == "Read,Edit"


def test_codex_argv_defaults_and_options() -> None:
    adapter = CodexAdapter()
    assert adapter.build_argv(ctx()) == [
        "codex",
        "--ask-for-approval",
        "never",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--sandbox",
        "workspace-write",
        "--",
        NASTY_TASK,
    ]
    argv = adapter.build_argv(ctx(model="gpt-5-codex", sandbox="read-only", permission_mode="untrusted"))
    assert argv[:3] == ["codex", "--ask-for-approval", "untrusted"]  # global flag precedes `exec`
    assert argv[argv.index("--sandbox") + 1] == "read-only"
    assert argv[argv.index("--model") + 1] == "gpt-5-codex"
    assert argv[-2:] == ["--", NASTY_TASK]


def test_copilot_argv_defaults_and_options() -> None:
    adapter = CopilotAdapter()
    assert adapter.build_argv(ctx()) == [
        "copilot",
        "-p",
        NASTY_TASK,
        "--output-format=json",
        "--no-ask-user",
        "--no-auto-update",
        "--allow-all-tools",
    ]
    argv = adapter.build_argv(
        ctx(
            model="gpt-5",
            permission_mode="default",
            allowed_tools=["shell(git:*)", "write"],
            denied_tools="shell(git push)",
        )
    )
    assert "--allow-all-tools" not in argv
    assert "--allow-tool=shell(git:*),write" in argv
    assert "--deny-tool=shell(git push)" in argv
    assert "--model=gpt-5" in argv
    with pytest.raises(AgentDriftError, match="permission_mode"):
        adapter.build_argv(ctx(permission_mode="yolo"))


# -- Claude Code stream-json ------------------------------------------


def test_claude_complete_transcript() -> None:
    out = parse(ClaudeCodeAdapter, "ok.jsonl")
    assert out.parse_errors == []
    assert out.model_stamp == "claude-sonnet-4-5-20250929"
    assert out.usage.to_dict() == {
        "input_tokens": 57,
        "output_tokens": 640,
        "cached_tokens": 23000,
        "cost_usd": 0.0421,
        "cache_write_tokens": 1200,
        "reasoning_tokens": None,
    }
    assert out.final_report is not None and out.final_report["status"] == "complete"
    ev = out.events
    assert [e["name"] for e in ev if e["type"] == "tool_call"] == ["Read", "Edit", "Write", "Bash"]
    assert [e["path"] for e in ev if e["type"] == "file_read"] == ["/srv/agent/tree/pricing.py"]
    # the refused Write is a denial, never a file_edit
    assert [e["path"] for e in ev if e["type"] == "file_edit"] == ["/srv/agent/tree/pricing.py"]
    assert [(e["action"], e["path"]) for e in ev if e["type"] == "denial"] == [
        ("Write", "/srv/agent/outside/notes.txt")
    ]
    commands = [e for e in ev if e["type"] == "command"]
    assert commands == [
        {
            "type": "command",
            "command": "python -m pytest -q tests/test_pricing.py",
            "exit_code": 0,  # a Bash result that is not an error: the command exited 0
            "tool_use_id": "toolu_04",
            "ok": True,
        }
    ]
    assert ev[-1] == {"type": "final", "status": "complete", "outcome": "success", "subtype": "success", "num_turns": 6}
    assert "approval_request" not in types(ev)  # not observable in print mode
    json.dumps(ev)  # events are plain JSON


def test_claude_error_result() -> None:
    out = parse(ClaudeCodeAdapter, "error_max_turns.jsonl")
    assert out.parse_errors == []
    assert out.events[-1]["outcome"] == "error" and out.events[-1]["status"] is None
    assert any(e["type"] == "error" and "error_max_turns" in e["message"] for e in out.events)
    assert out.usage.cost_usd == 0.01


def test_claude_malformed_lines_are_reported_and_skipped() -> None:
    ok, bad = parse(ClaudeCodeAdapter, "ok.jsonl"), parse(ClaudeCodeAdapter, "malformed.jsonl")
    assert bad.events == ok.events and bad.usage == ok.usage  # the good records still count
    joined = "\n".join(bad.parse_errors)
    assert "line 4: malformed JSON" in joined
    assert "line 5: JSON list, expected an object" in joined
    assert "1 non-JSON line(s) ignored" in joined
    assert "line 7: object without a 'type'" in joined


def test_claude_truncated_stream() -> None:
    out = parse(ClaudeCodeAdapter, "truncated.jsonl")
    assert any("truncated record at end of stream" in e for e in out.parse_errors)
    assert any("without a 'result' message" in e for e in out.parse_errors)
    assert "final" not in types(out.events)
    assert out.usage.cost_usd is None  # only the result message carries the cost
    assert out.usage.output_tokens == 100  # per-message usage, each message id counted once
    assert out.final_report is not None  # the last assistant text still held the report


def test_claude_exit_midstream() -> None:
    out = parse(ClaudeCodeAdapter, "exit_midstream.jsonl")
    assert out.parse_errors == ["stream ended without a 'result' message: the agent exited or was killed mid-stream"]
    assert types(out.events)[-2:] == ["tool_call", "command"]
    assert "ok" not in out.events[-1]  # the command never reported back
    assert out.final_report is None and out.model_stamp == "claude-sonnet-4-5-20250929"


# -- Codex exec --json --------------------------------------------------


def test_codex_complete_transcript() -> None:
    out = parse(CodexAdapter, "ok.jsonl")
    assert out.parse_errors == []
    assert out.model_stamp is None  # codex exec --json does not report the model
    assert out.usage.to_dict() == {
        "input_tokens": 24763,
        "output_tokens": 122,
        "cached_tokens": 24448,
        "cost_usd": None,
        "cache_write_tokens": None,
        "reasoning_tokens": None,
    }
    assert out.final_report is not None and out.final_report["checks_run"] == ["pytest -q tests/test_pricing.py"]
    ev = out.events
    assert [(e["command"], e["exit_code"]) for e in ev if e["type"] == "command"] == [
        ("bash -lc 'cat pricing.py'", 0),
        ("bash -lc 'touch ../outside.txt'", 1),
        ("bash -lc 'python -m pytest -q tests/test_pricing.py'", 0),
    ]
    assert [e for e in ev if e["type"] == "file_edit"] == [
        {"type": "file_edit", "path": "pricing.py", "kind": "update"}
    ]
    assert "mcp:docs/search" in [e["name"] for e in ev if e["type"] == "tool_call"]
    assert [e for e in ev if e["type"] == "error"] == [
        {"type": "error", "message": "Reconnecting... 1/5", "source": "error", "transient": True}
    ]
    assert ev[-1] == {"type": "final", "status": "complete", "outcome": "success"}


def test_codex_turn_failed() -> None:
    out = parse(CodexAdapter, "turn_failed.jsonl")
    assert out.parse_errors == []
    assert out.events[-2] == {
        "type": "error",
        "message": "model response stream ended unexpectedly",
        "source": "turn.failed",
    }
    assert out.events[-1] == {"type": "final", "status": None, "outcome": "error"}


def test_codex_malformed_lines() -> None:
    out = parse(CodexAdapter, "malformed.jsonl")
    assert out.events == parse(CodexAdapter, "ok.jsonl").events
    joined = "\n".join(out.parse_errors)
    assert "line 5: malformed JSON" in joined and "line 7: not UTF-8" in joined
    assert "1 non-JSON line(s) ignored" in joined  # line 6, a bare `null`


def test_codex_truncated_and_midstream() -> None:
    truncated = parse(CodexAdapter, "truncated.jsonl")
    assert any("truncated record" in e for e in truncated.parse_errors)
    assert truncated.usage.input_tokens is None  # the turn.completed line was the one cut
    midstream = parse(CodexAdapter, "exit_midstream.jsonl")
    assert midstream.parse_errors == [
        "stream ended without turn.completed or turn.failed: the agent exited or was killed mid-stream",
        "items started but never completed: item_3 (command_execution)",
    ]
    assert "final" not in types(midstream.events)


def test_claude_bash_exit_code_from_its_tool_result() -> None:
    lines = [
        {
            "type": "assistant",
            "message": {
                "id": "m1",
                "model": "m",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest"}},
                    {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "rm x"}},
                ],
            },
        },
        {
            "type": "user",
            "message": {
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "is_error": True, "content": "Exit code 1\n1 failed"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "t2",
                        "is_error": True,
                        "content": "This command requires approval",
                    },
                ]
            },
        },
        {"type": "result", "subtype": "success", "is_error": False, "result": "done", "usage": {}},
    ]
    out = ClaudeCodeAdapter().parse_output("\n".join(json.dumps(x) for x in lines).encode(), b"")
    assert [(e["exit_code"], e["ok"]) for e in out.events if e["type"] == "command"] == [(1, False), (None, False)]


def test_codex_declined_items_are_denials() -> None:
    lines = [
        {
            "type": "item.completed",
            "item": {
                "id": "i1",
                "type": "command_execution",
                "command": "rm -rf /",
                "exit_code": None,
                "status": "declined",
            },
        },
        {
            "type": "item.completed",
            "item": {
                "id": "i2",
                "type": "file_change",
                "changes": [{"path": "../x", "kind": "add"}],
                "status": "declined",
            },
        },
        {"type": "turn.completed", "usage": {"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1}},
    ]
    out = CodexAdapter().parse_output("".join(json.dumps(x) + "\n" for x in lines).encode(), b"")
    assert [(e["action"], e["path"]) for e in out.events if e["type"] == "denial"] == [
        ("command_execution", "rm -rf /"),
        ("file_change", "../x"),
    ]
    assert "file_edit" not in types(out.events)


# -- Copilot --output-format=json ---------------------------------------


def test_copilot_complete_transcript() -> None:
    out = parse(CopilotAdapter, "ok.jsonl")
    assert out.parse_errors == []
    assert out.model_stamp == "claude-sonnet-4.5"
    # totals from session.shutdown (its cache writes kept); no USD cost (Copilot counts premium requests)
    assert out.usage.to_dict() == {
        "input_tokens": 3000,
        "output_tokens": 200,
        "cached_tokens": 2700,
        "cost_usd": None,
        "cache_write_tokens": 0,
        "reasoning_tokens": None,
    }
    ev = out.events
    assert [e["name"] for e in ev if e["type"] == "tool_call"] == ["view", "edit", "create", "bash", "mcp:docs/search"]
    assert [e["path"] for e in ev if e["type"] == "file_edit"] == ["/srv/agent/tree/pricing.py"]
    assert [(e["action"], e["path"]) for e in ev if e["type"] == "denial"] == [
        ("create", "/srv/agent/outside/notes.txt")
    ]
    assert [e["command"] for e in ev if e["type"] == "command"] == ["python -m pytest -q tests/test_pricing.py"]
    assert out.final_report is not None and ev[-1] == {"type": "final", "status": "complete", "outcome": "success"}


def test_copilot_usage_falls_back_to_per_call_usage() -> None:
    lines = (TRANSCRIPTS / "copilot" / "ok.jsonl").read_text().splitlines()
    without_shutdown = "\n".join(line for line in lines if "session.shutdown" not in line) + "\n"
    out = CopilotAdapter().parse_output(without_shutdown.encode(), b"")
    assert out.usage.to_dict() == {
        "input_tokens": 3000,
        "output_tokens": 200,
        "cached_tokens": 2700,
        "cost_usd": None,
        "cache_write_tokens": None,
        "reasoning_tokens": None,
    }
    # assistant.turn_end ends a model turn, not the run: without the shutdown the stream was cut
    assert out.parse_errors == [
        "stream ended without assistant.idle or result (or the SDK's session.idle / shutdown): "
        "the agent exited or was killed mid-run"
    ]
    assert "final" not in types(out.events)


def test_copilot_broken_streams() -> None:
    bad = parse(CopilotAdapter, "malformed.jsonl")
    assert bad.events == parse(CopilotAdapter, "ok.jsonl").events
    assert any("line 4: malformed JSON" in e for e in bad.parse_errors)
    assert any("2 non-JSON line(s) ignored" in e for e in bad.parse_errors)  # a bare string, a progress line
    truncated = parse(CopilotAdapter, "truncated.jsonl")
    assert any("truncated record" in e for e in truncated.parse_errors)
    midstream = parse(CopilotAdapter, "exit_midstream.jsonl")
    assert midstream.parse_errors == [
        "stream ended without assistant.idle or result (or the SDK's session.idle / shutdown): "
        "the agent exited or was killed mid-run"
    ]
    assert "final" not in types(midstream.events)


def test_copilot_session_error() -> None:
    out = parse(CopilotAdapter, "session_error.jsonl")
    assert out.events == [
        {"type": "error", "message": "No authentication information found.", "source": "session.error"},
        {"type": "final", "status": None, "outcome": "error"},
    ]
    # session.start names the model asked for, not the one that answered: no stamp
    assert out.model_stamp is None and out.requested_model == "claude-sonnet-4.5"


def test_copilot_plain_text_output() -> None:
    out = CopilotAdapter().parse_output((TRANSCRIPTS / "copilot" / "plain_text.txt").read_bytes(), b"")
    assert out.events == []
    assert len(out.parse_errors) == 1 and "no JSON records" in out.parse_errors[0]
    assert out.final_report is not None and out.final_report["status"] == "complete"


# -- never raise on bad input --------------------------------------------


EDGE_INPUTS = [
    b"",
    b"\n\n\n",
    b"\xff\xfe\x00garbage",
    b"{" * 5000,
    b"[" * 5000 + b"\n",
    b"null\n",
    b"123\n",
    b'"str"\n',
    b'{"type": null}\n',
    b'{"type": "result", "usage": "x", "permission_denials": 5}\n',
    b'{"type": "assistant", "message": {"content": [null, 1, {"type": "tool_use", "input": []}]}}\n',
    b'{"type": "user", "message": {"content": "text"}}\n',
    b'{"type": "item.completed", "item": {"type": "file_change", "status": "completed", "changes": [1, {"path": 2}]}}\n',
    b'{"type": "turn.completed", "usage": {"input_tokens": -5, "output_tokens": true, "cached_input_tokens": 1.5}}\n',
    b'{"type": "tool.execution_complete", "data": {"toolCallId": "nope", "success": false}}\n',
    b'{"type": "session.shutdown", "data": {"modelMetrics": {"m": 1}}}\n',
    b'{"type": "assistant.usage", "data": []}\n',
    '{"type": "assistant.message", "data": {"content": "\\ud800"}}\n'.encode(),
]


@pytest.mark.parametrize("cls", ADAPTERS)
@pytest.mark.parametrize("data", EDGE_INPUTS, ids=range(len(EDGE_INPUTS)))
def test_parse_never_raises_on_edge_input(cls: type[AgentAdapter], data: bytes) -> None:
    out = cls().parse_output(data, b"")
    json.dumps(out.events)
    assert isinstance(out.parse_errors, list)


@pytest.mark.parametrize("cls", ADAPTERS)
def test_parse_never_raises_on_mangled_transcripts(cls: type[AgentAdapter]) -> None:
    rng = random.Random(20261129)  # seeded: the same mangling every run
    source = (TRANSCRIPTS / DIRS[cls] / "ok.jsonl").read_bytes()
    for _ in range(200):
        data = bytearray(source)
        for _ in range(rng.randint(1, 20)):
            pos = rng.randrange(len(data))
            op = rng.random()
            if op < 0.4:
                data[pos] = rng.randrange(256)
            elif op < 0.7:
                del data[pos : pos + rng.randint(1, 50)]
            else:
                data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 10)))
        out = cls().parse_output(bytes(data), b"")
        json.dumps(out.events)


# -- shared helpers ---------------------------------------------------------


def test_read_jsonl_accepts_last_line_without_newline_and_crlf() -> None:
    stream = read_jsonl(b'{"a": 1}\r\n{"b": 2}')
    assert [r for _, r in stream.records] == [{"a": 1}, {"b": 2}]
    assert stream.errors == [] and not stream.truncated


def test_read_jsonl_caps_the_error_list() -> None:
    stream = read_jsonl(b"{bad\n" * 100)
    assert len(stream.errors) == 21 and stream.errors[-1] == "... and 80 more parse error(s)"


def test_extract_report_picks_the_last_valid_report() -> None:
    text = (
        'Example: {"status": "unknown"} and code {"a": 1}.\n'
        '```json\n{"status": "partial", "summary": "first"}\n```\n'
        'Final:\n{"status": "blocked", "summary": "needs a token", "checks_skipped": ["deploy"]}'
    )
    assert extract_report(text) == {"status": "blocked", "summary": "needs a token", "checks_skipped": ["deploy"]}
    assert extract_report("no json here") is None
    assert extract_report('{"status": "done"}') is None  # not one of the report statuses
    assert extract_report(None) is None


def test_clip_shortens_long_strings_visibly() -> None:
    clipped = clip({"content": "x" * 5000, "n": 1}, limit=10)
    assert clipped["content"].startswith("x" * 10) and "4990 more chars" in clipped["content"]
    assert clipped["n"] == 1
