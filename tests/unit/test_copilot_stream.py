"""The Copilot adapter on real output of Copilot CLI 1.0.102 in its BYOK mode.

The transcripts under tests/data/transcripts/copilot/real-* were captured
from `copilot -p ... --output-format=json --usage-output-file=...` pointed at
the scripted endpoint (tests/realcli/scripted_endpoint.py, Chat Completions)
with COPILOT_OFFLINE=true; the usage summaries are what the CLI wrote.

- real-byok-patch: gpt-5.1-codex; `nosuchcmd` (exit 127), an apply_patch
  edit, `exit 3`, a final report;
- real-byok-edit: gpt-4.1; view, edit, create;
- real-byok-401 / real-byok-429: the endpoint refuses every call;
- real-not-signed-in.stderr: no BYOK, no GitHub token: no JSON at all;
- real-byok-no-model.stderr: BYOK without a model: no JSON at all.
"""

from __future__ import annotations

from pathlib import Path

from pytest_agentdrift.agents.copilot import CopilotAdapter
from pytest_agentdrift.agents.copilot.stream import USAGE_FILE, CopilotOutput
from pytest_agentdrift.agents.infra import REPEATING_CLASSES

REAL = Path(__file__).resolve().parents[1] / "data" / "transcripts" / "copilot"


def parsed(name: str, usage: bool = True) -> CopilotOutput:
    adapter = CopilotAdapter()
    out = adapter.parse_output((REAL / f"{name}.jsonl").read_bytes(), b"")
    assert isinstance(out, CopilotOutput)
    summary = REAL / f"{name}.usage.json"
    adapter.read_scratch(out, {USAGE_FILE: summary.read_bytes() if usage and summary.exists() else None})
    return out


def of(out: CopilotOutput, kind: str) -> list[dict]:
    return [e for e in out.events if e["type"] == kind]


def test_shell_exit_codes_come_from_shell_execution():
    out = parsed("real-byok-patch")
    # the bash tool "succeeds" whatever the command's exit status; the command does not
    assert [(c["command"], c["exit_code"], c["ok"]) for c in of(out, "command")] == [
        ("nosuchcmd --x", 127, False),
        ("exit 3", 3, False),
    ]
    assert [(c["name"], c["ok"]) for c in of(out, "tool_call")] == [
        ("bash", False),
        ("apply_patch", True),
        ("bash", False),
    ]


def test_apply_patch_edits_come_from_file_edits():
    out = parsed("real-byok-patch")
    assert [(e["path"], e["kind"]) for e in of(out, "file_edit")] == [("/tmp/cp2/tree/a.txt", "edit")]
    edits = parsed("real-byok-edit")
    assert [(e["path"], e["kind"]) for e in of(edits, "file_edit")] == [
        ("/tmp/cp2/tree/a.txt", "edit"),
        ("/tmp/cp2/tree/b.txt", "create"),
    ]
    assert [e["path"] for e in of(edits, "file_read")] == ["/tmp/cp2/tree/a.txt"]


def test_model_requested_never_taken_for_the_answering_one():
    # the endpoint answered as "answer-model-x"; every model field of the stream names the one asked for
    out = parsed("real-byok-patch")
    assert out.model_stamp is None
    assert out.requested_model == "gpt-5.1-codex"
    assert b"answer-model-x" not in (REAL / "real-byok-patch.jsonl").read_bytes()


def test_tokens_from_the_usage_summary():
    out = parsed("real-byok-patch")
    # served: prompt 600+600+100+700 (cached 100 included), completion 25+30+0+10 (reasoning 5 included)
    assert out.usage.to_dict() == {
        "input_tokens": 2000,
        "output_tokens": 65,
        "cached_tokens": 100,
        "cost_usd": None,
        "cache_write_tokens": 0,
        "reasoning_tokens": 5,
    }
    assert out.model_calls == 4 and out.parse_errors == []
    assert CopilotAdapter.usage_input_includes_cached


def test_tokens_unobserved_without_a_summary_and_refused_when_it_disagrees():
    out = parsed("real-byok-patch", usage=False)
    assert out.usage.input_tokens is None
    assert out.parse_errors == ["no usage summary (usage.json): the CLI wrote none, tokens unobserved"]
    adapter = CopilotAdapter()
    other = adapter.parse_output((REAL / "real-byok-edit.jsonl").read_bytes(), b"")
    # a summary whose request count is not the stream's (another run's, or rewritten) is not used
    forged = (REAL / "real-byok-patch.usage.json").read_text().replace('"count": 4', '"count": 9')
    adapter.read_scratch(other, {USAGE_FILE: forged.encode()})
    assert other.usage.input_tokens is None
    assert other.parse_errors == [
        "usage summary (usage.json) not used: it counts 9 model request(s), the stream shows 4"
    ]
    broken = adapter.parse_output((REAL / "real-byok-edit.jsonl").read_bytes(), b"")
    adapter.read_scratch(broken, {USAGE_FILE: b"{not json"})
    assert broken.usage.input_tokens is None and "not JSON" in broken.parse_errors[0]


def test_the_run_ends_with_idle_and_result_not_with_a_turn():
    text = (REAL / "real-byok-patch.jsonl").read_text()
    whole = CopilotAdapter().parse_output(text.encode(), b"")
    assert whole.events[-1] == {"type": "final", "status": "complete", "outcome": "success"}
    # cut right after the first turn ended (the CLI killed, the pipe closed)
    lines = text.splitlines(keepends=True)
    first_turn_end = next(i for i, line in enumerate(lines) if '"type":"assistant.turn_end"' in line)
    cut = CopilotAdapter().parse_output("".join(lines[: first_turn_end + 1]).encode(), b"")
    assert "final" not in [e["type"] for e in cut.events]
    assert cut.parse_errors and "stream ended without assistant.idle or result" in cut.parse_errors[0]
    # idle without the result record is still the end of the run
    no_result = CopilotAdapter().parse_output("".join(lines[:-1]).encode(), b"")
    assert no_result.parse_errors == [] and no_result.events[-1]["outcome"] == "success"


def test_provider_refusals_are_infrastructure():
    adapter = CopilotAdapter()
    for name, cls in (("real-byok-401", "authentication"), ("real-byok-429", "rate_limited")):
        data = (REAL / f"{name}.jsonl").read_bytes()
        out = parsed(name)
        assert out.answered is False and out.model_calls == 0
        infra = adapter.classify_ending(out, 1, data, b"", False)
        assert infra is not None and infra["class"] == cls and infra["source"] == "copilot"
    # a refused run spent nothing: zero tokens, observed
    assert parsed("real-byok-401").usage.input_tokens == 0


def test_a_cli_that_prints_no_json_is_infrastructure_and_names_the_cause():
    adapter = CopilotAdapter()
    for name, cls, words in (
        ("real-not-signed-in", "authentication", "No authentication information found"),
        ("real-byok-no-model", "configuration", "BYOK providers require an explicit model"),
    ):
        stderr = (REAL / f"{name}.stderr").read_bytes()
        out = adapter.parse_output(b"", stderr)
        infra = adapter.classify_ending(out, 1, b"", stderr, False)
        assert infra is not None and infra["class"] == cls, infra
        assert infra["class"] in REPEATING_CLASSES  # it will repeat on every run: the session stops
        assert words in infra["evidence"] and "\n" not in infra["evidence"]
    # plain text where events were asked for (a version without the JSON format): the CLI's, not the agent's
    plain = b"Total usage est: 1 Premium request\n"
    infra = adapter.classify_ending(adapter.parse_output(plain, b""), 0, plain, b"", False)
    assert infra is not None and infra["class"] == "configuration"
    # killed by a signal before any event: a crash, retried, never the session's configuration
    infra = adapter.classify_ending(adapter.parse_output(b"", b""), -9, b"", b"", False)
    assert infra is not None and infra["class"] == "crashed"
    # a timeout is scored as the agent's timeout, as for every agent
    assert adapter.classify_ending(adapter.parse_output(b"", b""), None, b"", b"", True) is None


def test_byok_environment_is_passed_on_and_the_endpoint_let_through():
    adapter = CopilotAdapter()
    env = {"COPILOT_PROVIDER_BASE_URL": "https://gateway.example:4000/v1"}
    assert adapter.endpoint_hosts(env) == ["gateway.example:4000"]
    for name in ("COPILOT_OFFLINE", "COPILOT_PROVIDER_API_KEY", "COPILOT_PROVIDER_WIRE_API", "COPILOT_PROVIDER_TYPE"):
        assert name in adapter.env_allowlist
    # the CLI's own model variable is not: the run's options decide the model
    assert "COPILOT_MODEL" not in adapter.env_allowlist


def test_the_usage_summary_goes_to_the_harness_scratch():
    from pytest_agentdrift.agents.base import RunContext

    ctx = RunContext("T01", Path("t.md"), "do it", Path("task"), Path("work"), {"model": "m"}, scratch=Path("out"))
    argv = CopilotAdapter().build_argv(ctx)
    assert argv[-1] == f"--usage-output-file={Path('out') / USAGE_FILE}"
    # the manifest's argv names the placeholder, never a temporary path
    assert CopilotAdapter().argv_template()[-1] == "--usage-output-file={scratch}/usage.json"


def test_the_recorded_node_is_the_one_the_cli_carries(tmp_path):
    # an ordinary npm install: the launcher (run by the host's node) starts the platform binary,
    # a Node single-executable application with its own runtime
    scope = tmp_path / "node_modules" / "@github"
    (scope / "copilot").mkdir(parents=True)
    (scope / "copilot" / "npm-loader.js").write_text("#!/usr/bin/env node\n")
    import platform as _platform

    from pytest_agentdrift.agents.copilot.adapter import _ARCH

    native = scope / f"copilot-linux-{_ARCH.get(_platform.machine().lower(), 'x64')}" / "copilot"
    native.parent.mkdir()
    native.write_bytes(
        b"\x7fELF" + b"\0" * 5000 + b"https://nodejs.org/download/release/v24.20.0/node-v24.20.0" + b"\0"
    )
    bindir = tmp_path / "node_modules" / ".bin"
    bindir.mkdir()
    (bindir / "copilot").symlink_to("../@github/copilot/npm-loader.js")
    (scope / "copilot" / "npm-loader.js").chmod(0o755)
    assert CopilotAdapter().bundled_runtimes({"PATH": str(bindir)}) == {"node": "v24.20.0 (bundled with copilot)"}
    # a binary without Node's release URL, or no platform package: nothing claimed
    native.write_bytes(b"\x7fELF" + b"\0" * 100)
    assert CopilotAdapter().bundled_runtimes({"PATH": str(bindir)}) == {}
    native.unlink()
    assert CopilotAdapter().bundled_runtimes({"PATH": str(bindir)}) == {}


def test_the_clis_own_retries_are_recorded_and_the_requested_model_is_run_identity():
    out = parsed("real-byok-429")
    retries = of(out, "api_retry")
    assert [r["error_status"] for r in retries] == [429] * 5 and retries[-1]["attempt"] == 5
    infra = CopilotAdapter().classify_ending(out, 1, b"", b"", False)
    assert infra is not None and infra["class"] == "rate_limited" and infra["product_retries"] == 5
    assert out.run_identity == {"model_id": "gpt-4.1"}
    assert "model_id" in CopilotAdapter.run_reported


def test_an_unreachable_provider_is_network_after_the_clis_own_retries():
    data = (REAL / "real-byok-unreachable.jsonl").read_bytes()
    adapter = CopilotAdapter()
    out = adapter.parse_output(data, b"")
    infra = adapter.classify_ending(out, 1, data, b"", False)
    assert infra is not None and infra["class"] == "network" and infra["product_retries"] == 5
    assert infra["evidence"].startswith("Could not connect to local model provider at https://127.0.0.1:1/v1.")
    # an error the CLI reports in words we do not know: still a crash before any answer, with its words
    unknown = data.replace(b"Could not connect to", b"Something odd happened with")
    out = adapter.parse_output(unknown, b"")
    infra = adapter.classify_ending(out, 1, unknown, b"", False)
    assert infra is not None and infra["class"] == "crashed"
    assert infra["evidence"].startswith("Something odd happened with local model provider")
