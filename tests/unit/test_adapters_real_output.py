"""Output captured from the real CLIs (installed from the npm registry, run
without credentials and without network), read by the adapters.

claude 2.1.197: `claude -p "Say hi." --output-format stream-json --verbose --permission-mode acceptEdits`
with an empty HOME: the CLI answers itself ("Not logged in"), model `<synthetic>`.
codex 0.171.0: `codex --ask-for-approval never exec --json --skip-git-repo-check --sandbox workspace-write -- "Say hi."`
with no network, killed by a 40 s timeout while it was still reconnecting.
"""

from pathlib import Path

from pytest_agentdrift.agents import get_adapter

DATA = Path(__file__).parents[1] / "data" / "transcripts"


def test_claude_code_not_signed_in():
    out = get_adapter("claude-code").parse_output(
        (DATA / "claude_code" / "real-2.1.197-not-signed-in.jsonl").read_bytes(), b""
    )
    types = [e["type"] for e in out.events]
    assert types == ["message", "error", "final"]
    assert "Not logged in" in out.events[0]["text"]
    assert out.model_stamp is None  # "<synthetic>" is the CLI's own answer, not a model the host reported
    assert (out.usage.input_tokens, out.usage.output_tokens, out.usage.cost_usd) == (0, 0, 0.0)
    assert out.parse_errors == []


def test_codex_killed_while_reconnecting():
    out = get_adapter("codex").parse_output((DATA / "codex" / "real-0.171.0-no-network-killed.jsonl").read_bytes(), b"")
    errors = [e for e in out.events if e["type"] == "error"]
    assert [e["type"] for e in out.events] == ["error"] * 8
    assert errors[0]["message"].startswith("Reconnecting... 2/5") and errors[0]["transient"] is True
    assert errors[4]["message"].startswith("Falling back from WebSockets to HTTPS transport")
    assert out.model_stamp is None
    assert out.usage.input_tokens is None
    assert any("mid-stream" in p for p in out.parse_errors)
