"""The Gemini CLI preset: argv, its settings, its stream, its errors, its discovery rules.

The transcripts under tests/data/transcripts/gemini/ are real: Gemini CLI
0.61.0 with the preset's flags against the scripted endpoint of
tests/realcli (ok.jsonl: builtin T02 fixed, answered by another model than
the one asked for; 401/429/500: the endpoint's error answers) and against a
closed port (unreachable). Nothing here runs the CLI.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from helpers import assert_the_recorded_fix, parse_transcript, preset_context

from pytest_agentdrift.agents.discovery_base import instruction_bundle, instruction_hash
from pytest_agentdrift.agents.gemini import GeminiAdapter
from pytest_agentdrift.agents.gemini.adapter import shell_exit_code, stats_usage
from pytest_agentdrift.agents.gemini.discovery import preset_settings
from pytest_agentdrift.agents.infra import classify_google_error
from pytest_agentdrift.agents.products import surface_facts
from pytest_agentdrift.manifest import discovery

parse = functools.partial(parse_transcript, GeminiAdapter(), "gemini")
ctx = functools.partial(preset_context, "-y fix it")


def test_argv_runs_headless_trusted_in_yolo_with_the_prompt_in_one_element():
    argv = GeminiAdapter().build_argv(ctx())
    assert argv[:5] == ["gemini", "--output-format", "stream-json", "--skip-trust", "--debug"]
    assert argv[argv.index("--approval-mode") + 1] == "yolo"
    assert argv[-1] == "--prompt=-y fix it" and "--model" not in argv
    assert "--sandbox=false" in argv  # its own container sandbox: off, and said so
    argv = GeminiAdapter().build_argv(ctx(model="gemini-2.5-pro", permission_mode="auto_edit"))
    assert argv[argv.index("--model") + 1] == "gemini-2.5-pro"
    assert argv[argv.index("--approval-mode") + 1] == "auto_edit"


def test_preset_settings_cap_retries_and_turn_off_background_traffic():
    settings = preset_settings()
    assert settings["system"]["general"] == {"maxAttempts": 1, "retryFetchErrors": False}
    assert settings["defaults"]["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["defaults"]["privacy"]["usageStatisticsEnabled"] is False
    assert settings["defaults"]["general"]["enableAutoUpdate"] is False
    adapter = GeminiAdapter()
    shown = {path for path, _ in adapter.sandbox_paths({})}
    assert set(adapter.fixed_env.values()) <= shown and all(Path(p).is_file() for p in shown)
    # the files ship with the package (package data), or an installed preset would point nowhere
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"agents/*/*.json"' in pyproject


def test_real_fix_transcript():
    out = parse("ok.jsonl")
    assert_the_recorded_fix(out)
    assert out.final_report["status"] == "complete"
    assert [e["outcome"] for e in out.events if e["type"] == "final"] == ["success"]
    # asked for gemini-2.5-pro (init), answered by the swapped model (stats keyed by modelVersion)
    assert out.run_identity == {"model_id": "gemini-2.5-pro"}
    assert out.model_stamp == "gemini-2.5-flash-swapped"
    assert out.usage.input_tokens == 5100 and out.usage.cached_tokens == 900
    assert out.usage.output_tokens == 121 and out.usage.reasoning_tokens == 11
    assert out.answered is True and out.infra_error is None


@pytest.mark.parametrize(
    ("name", "cls", "exit_code"),
    [
        ("real-0.61.0-429.jsonl", "rate_limited", 173),
        ("real-0.61.0-500.jsonl", "server_error", 244),
        ("real-0.61.0-401.jsonl", "authentication", 145),
        ("real-0.61.0-unreachable.jsonl", "network", 1),
    ],
)
def test_error_results_are_infrastructure(name, cls, exit_code):
    adapter = GeminiAdapter()
    out = parse(name)
    assert out.answered is False and out.model_stamp is None
    infra = adapter.classify_ending(out, exit_code, b"", b"", False)
    assert infra["class"] == cls and infra["source"] == "gemini-cli", infra


def test_the_cli_exit_statuses_before_any_answer():
    adapter = GeminiAdapter()
    out = adapter.parse_output(b"", b"")
    stderr = b"Gemini CLI is not running in a trusted directory. To proceed, either use `--skip-trust`\n"
    assert adapter.classify_ending(out, 55, b"", stderr, False)["class"] == "configuration"
    assert adapter.classify_ending(out, 41, b"", b"auth failed\n", False)["class"] == "authentication"
    # any other exit before an answer is a crash of the CLI, never the agent's failure
    assert adapter.classify_ending(out, 3, b"", b"boom\n", False)["class"] == "crashed"


def test_a_model_text_that_looks_like_an_error_is_not_classified():
    lines = [
        {"type": "init", "model": "m"},
        {"type": "message", "role": "assistant", "content": "[API Error: 429] Please wait and try again later"},
        {"type": "result", "status": "success", "stats": {"models": {"m": {"total_tokens": 5, "input_tokens": 4}}}},
    ]
    out = GeminiAdapter().parse_output("\n".join(json.dumps(r) for r in lines).encode(), b"")
    assert out.infra_error is None and GeminiAdapter().classify_ending(out, 0, b"", b"", False) is None


def test_google_error_shapes():
    assert classify_google_error('[API Error: {"error":{"code":503,"status":"UNAVAILABLE"}}]') == "server_error"
    assert classify_google_error("[API Error: The model is overloaded. (Status: UNAVAILABLE)]") == "overloaded"
    assert classify_google_error("[API Error: quota (Status: RESOURCE_EXHAUSTED)]") == "rate_limited"
    assert classify_google_error("[API Error: API key not valid. (Status: INVALID_ARGUMENT)]") == "authentication"
    assert classify_google_error("[API Error: models/x is not found (Status: NOT_FOUND)]") == "configuration"
    assert classify_google_error("") is None


def test_shell_exit_codes_from_the_debug_result():
    assert shell_exit_code("Output: hi\nExit Code: 3\nProcess Group PGID: 9") == 3
    assert shell_exit_code("Output: hi\nProcess Group PGID: 9") == 0
    assert shell_exit_code("Output: (empty)\nSignal: 9\nProcess Group PGID: 9") is None
    assert shell_exit_code("hi") is None  # not the debug format: unknown, never 0


def test_failed_edit_and_unclosed_command_are_not_evidence_of_work():
    lines = [
        {"type": "tool_use", "tool_name": "replace", "tool_id": "r1", "parameters": {"file_path": "a.py"}},
        {"type": "tool_result", "tool_id": "r1", "status": "error", "error": {"type": "edit_no_occurrence_found"}},
        {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "s1", "parameters": {"command": "make"}},
    ]
    out = GeminiAdapter().parse_output("\n".join(json.dumps(r) for r in lines).encode(), b"")
    assert not [e for e in out.events if e["type"] == "file_edit"]
    (command,) = [e for e in out.events if e["type"] == "command"]
    assert command["exit_code"] is None and command["status"] == "unfinished"
    assert [e["error_type"] for e in out.events if e["type"] == "tool_error"] == ["edit_no_occurrence_found"]
    assert any("without a result record" in e for e in out.parse_errors)


def test_side_models_are_recorded_apart_from_the_main_one():
    stats = {
        "models": {
            "gemini-2.5-pro": {"total_tokens": 1100, "input_tokens": 1000, "output_tokens": 90, "cached": 100},
            "gemini-2.5-flash-lite": {"total_tokens": 55, "input_tokens": 50, "output_tokens": 5, "cached": 0},
            "asked-never-answered": {"total_tokens": 0, "input_tokens": 0, "output_tokens": 0},
        }
    }
    usage, main = stats_usage(stats)
    assert main == "gemini-2.5-pro"
    assert usage.input_tokens == 1050 and usage.output_tokens == 105 and usage.reasoning_tokens == 10
    assert usage.main_thread["input_tokens"] == 1000 and usage.side_calls["input_tokens"] == 50


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def kinds(disc) -> dict[str, str]:
    return {e.path: e.kind for e in disc.entries}


def test_discovery_finds_context_files_settings_and_components(tmp_path):
    home, repo = tmp_path / "home", tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(home / ".gemini" / "GEMINI.md", "user memory\n")
    write(
        home / ".gemini" / "settings.json",
        '{"model": {"name": "gemini-2.5-pro"}, "general": {"enableAutoUpdate": true}}',
    )
    write(repo / "GEMINI.md", "project\n")
    write(repo / "pkg" / "GEMINI.md", "below cwd\n")
    write(repo / ".gemini" / "settings.json", '{"tools": {"sandbox": false}}')
    write(repo / ".gemini" / "commands" / "ship.toml", 'prompt = "ship"\n')
    write(repo / ".gemini" / "skills" / "lint" / "SKILL.md", "lint\n")
    disc = discovery.discover("gemini", home, repo, repo, {})
    found = kinds(disc)
    assert found["~/.gemini/GEMINI.md"] == "context"
    assert found["project:GEMINI.md"] == "context" and found["project:pkg/GEMINI.md"] == "context"
    assert found["project:.gemini/commands/ship.toml"] == "command"
    assert found["project:.gemini/skills/lint/SKILL.md"] == "skill"
    scopes = {s["path"]: s["scope"] for s in disc.config}
    assert scopes["~/.gemini/settings.json"] == "user" and scopes["project:.gemini/settings.json"] == "workspace"
    facts = surface_facts("gemini", disc.config, {})
    assert facts["model"]["value"] == "gemini-2.5-pro" and facts["auto_update_state"]["value"] == "enabled"


def test_context_file_name_setting_and_instruction_hash(tmp_path):
    home, repo = tmp_path / "home", tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(repo / "GEMINI.md", "gemini\n")
    write(repo / "AGENTS.md", "agents\n")
    before = discovery.discover("gemini", home, repo, repo, {})
    assert set(kinds(before)) == {"project:GEMINI.md"}
    write(home / ".gemini" / "settings.json", '{"context": {"fileName": ["AGENTS.md", "GEMINI.md"]}}')
    after = discovery.discover("gemini", home, repo, repo, {})
    assert set(kinds(after)) == {"project:AGENTS.md", "project:GEMINI.md"}
    h1 = instruction_hash(instruction_bundle(after))
    write(repo / "AGENTS.md", "agents, changed\n")
    assert instruction_hash(instruction_bundle(discovery.discover("gemini", home, repo, repo, {}))) != h1


def test_gemini_cli_home_moves_the_home_that_holds_dot_gemini(tmp_path):
    home, other, repo = tmp_path / "home", tmp_path / "other", tmp_path / "repo"
    repo.mkdir()
    write(other / ".gemini" / "GEMINI.md", "moved\n")
    disc = discovery.discover("gemini", home, repo, repo, {"GEMINI_CLI_HOME": str(other)})
    assert [e.kind for e in disc.entries] == ["context"]


def test_an_agents_npm_reaching_the_registry_is_its_own_network_use():
    from pytest_agentdrift.run.evidence import split_background

    attempts = [
        {"host": "play.googleapis.com", "port": 443, "program": "node", "allowed": False},
        {"host": "registry.npmjs.org", "port": 443, "program": "node", "allowed": False},
    ]
    net, background = split_background(attempts, GeminiAdapter())
    assert [a["host"] for a in background] == ["play.googleapis.com"]
    assert [a["host"] for a in net] == ["registry.npmjs.org"]
