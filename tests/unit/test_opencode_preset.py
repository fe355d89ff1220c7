"""The OpenCode preset: argv, its stream, its errors, its endpoint, its discovery rules, its state.

The transcripts under tests/data/transcripts/opencode/ are real: OpenCode
1.18.33 with the preset's flags against the scripted endpoint of tests/realcli
(ok.jsonl: builtin T02 fixed; the give-up of T12; a 401, and a 429 and a 500
after OpenCode's own retries). Nothing here runs
the CLI.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from helpers import assert_the_recorded_fix, parse_transcript, preset_context

from pytest_agentdrift.agents.discovery_base import instruction_bundle, instruction_hash
from pytest_agentdrift.agents.opencode import OpenCodeAdapter
from pytest_agentdrift.agents.opencode.adapter import opencode_base_url, opencode_infra
from pytest_agentdrift.agents.products import surface_facts
from pytest_agentdrift.manifest import discovery
from pytest_agentdrift.run.treeseen import split_product_state

parse = functools.partial(parse_transcript, OpenCodeAdapter(), "opencode")
ctx = functools.partial(preset_context, "--help me")


def test_argv_runs_json_with_auto_approval_and_the_prompt_after_the_separator():
    argv = OpenCodeAdapter().build_argv(ctx())
    assert argv == ["opencode", "run", "--format", "json", "--auto", "--", "--help me"]
    argv = OpenCodeAdapter().build_argv(ctx(model="anthropic/claude-sonnet-4-5", permission_mode="default"))
    assert argv == ["opencode", "run", "--format", "json", "--model", "anthropic/claude-sonnet-4-5", "--", "--help me"]


def test_what_the_product_would_fetch_on_its_own_is_off_and_the_rest_is_declared():
    adapter = OpenCodeAdapter()
    assert adapter.fixed_env["OPENCODE_DISABLE_AUTOUPDATE"] == "true"
    assert adapter.fixed_env["OPENCODE_DISABLE_MODELS_FETCH"] == "true"
    assert "registry.npmjs.org" in adapter.background_hosts  # its plugin installs
    assert adapter.product_state == (".git/opencode",)


def test_real_fix_transcript():
    out = parse("ok.jsonl")
    assert_the_recorded_fix(out)
    assert [e["path"] for e in out.events if e["type"] == "file_read"] == ["invoicekit/discounts.py"]
    assert out.final_report["status"] == "complete"
    assert [e["outcome"] for e in out.events if e["type"] == "final"] == ["success"]
    # five calls of the conversation: fresh input, cache reads and writes apart, as served
    assert out.usage.input_tokens == 5300 and out.usage.cached_tokens == 900 and out.usage.cache_write_tokens == 50
    assert out.usage.output_tokens == 90 and out.usage.cost_usd > 0
    assert out.model_stamp is None and out.infra_error is None and out.answered is True


def test_real_give_up_transcript():
    out = parse("real-1.18.33-give-up.jsonl")
    (command,) = [e for e in out.events if e["type"] == "command"]
    assert command["exit_code"] == 1 and out.final_report["status"] == "failed"


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("real-1.18.33-401.jsonl", "authentication"),
        ("real-1.18.33-429.jsonl", "rate_limited"),
        ("real-1.18.33-500.jsonl", "server_error"),
    ],
)
def test_real_error_records_are_infrastructure(name, cls):
    adapter = OpenCodeAdapter()
    out = parse(name)
    assert out.answered is False
    infra = adapter.classify_ending(out, 1, b"", b"", False)
    assert infra["class"] == cls and infra["source"] == "opencode"


def test_error_records_by_status_then_name():
    def error(name, **data):
        return {"name": name, "data": data}

    assert opencode_infra(error("APIError", message="x", statusCode=429))["class"] == "rate_limited"
    assert opencode_infra(error("APIError", message="Provider is overloaded", statusCode=529))["class"] == "overloaded"
    assert opencode_infra(error("APIError", message="boom", statusCode=500))["class"] == "server_error"
    assert opencode_infra(error("ProviderAuthError", message="no key"))["class"] == "authentication"
    assert opencode_infra(error("UnknownError", message="fetch failed"))["class"] == "network"
    assert opencode_infra(error("MessageOutputLengthError", message="too long")) is None


def test_a_stream_cut_before_the_last_step_is_not_a_success():
    lines = [
        {"type": "step_start", "part": {}},
        {"type": "tool_use", "part": {"tool": "bash", "callID": "c", "state": {"status": "error", "input": {}}}},
        {"type": "step_finish", "part": {"reason": "tool-calls", "tokens": {"input": 5, "output": 1}}},
    ]
    out = OpenCodeAdapter().parse_output("\n".join(json.dumps(r) for r in lines).encode(), b"")
    assert not [e for e in out.events if e["type"] == "final"]
    assert any("mid-stream" in e for e in out.parse_errors)
    (command,) = [e for e in out.events if e["type"] == "command"]
    assert command["exit_code"] is None


def test_the_endpoint_is_the_selected_providers_base_url(tmp_path):
    config = tmp_path / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True)
    config.write_text(
        json.dumps(
            {
                "model": "gw/m",
                "provider": {
                    "gw": {"options": {"baseURL": "https://gw.example:4000/v1"}},
                    "other": {"options": {"baseURL": "https://other.example/v1"}},
                },
            }
        )
    )
    env = {"HOME": str(tmp_path)}
    assert opencode_base_url(env) == "https://gw.example:4000/v1"
    assert OpenCodeAdapter().endpoint_hosts(env) == ["gw.example:4000"]
    disc = discovery.discover("opencode", tmp_path, tmp_path / "repo", tmp_path / "repo", {})
    facts = surface_facts("opencode", disc.config, {})
    assert facts["model"]["value"] == "gw/m" and facts["model_endpoint"]["value"] == "https://gw.example:4000/v1"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_discovery_rules_config_and_components(tmp_path):
    home, repo = tmp_path / "home", tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(home / ".config" / "opencode" / "AGENTS.md", "global rules\n")
    write(repo / "AGENTS.md", "project rules\n")
    write(repo / "CLAUDE.md", "not read: AGENTS.md is there\n")
    write(repo / "docs" / "style.md", "style\n")
    write(repo / "opencode.json", '{"instructions": ["docs/*.md"], "autoupdate": false}')
    write(repo / ".opencode" / "command" / "ship.md", "ship\n")
    write(repo / ".opencode" / "agent" / "review.md", "review\n")
    disc = discovery.discover("opencode", home, repo, repo, {})
    found = {e.path: e.kind for e in disc.entries}
    assert found == {
        "~/.config/opencode/AGENTS.md": "rules",
        "project:AGENTS.md": "rules",
        "project:docs/style.md": "rules",
        "project:.opencode/command/ship.md": "command",
        "project:.opencode/agent/review.md": "subagent",
    }
    assert surface_facts("opencode", disc.config, {})["auto_update_state"]["value"] == "disabled"
    before = instruction_hash(instruction_bundle(disc))
    write(repo / "docs" / "style.md", "style, changed\n")
    assert instruction_hash(instruction_bundle(discovery.discover("opencode", home, repo, repo, {}))) != before


def test_claude_md_is_the_fallback_when_no_agents_md(tmp_path):
    home, repo = tmp_path / "home", tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(repo / "CLAUDE.md", "claude rules\n")
    assert [e.path for e in discovery.discover("opencode", home, repo, repo, {}).entries] == ["project:CLAUDE.md"]


def test_only_the_declared_product_state_leaves_the_agents_git_mutations():
    """A hostile agent that writes git's own files under cover of the product's state still mutates git."""
    found = [
        ".git/config (changed)",
        ".git/hooks/pre-commit (added)",
        ".git/opencode (added)",
        ".git/opencode-evil (added)",
    ]
    mutations, own = split_product_state(found, (".git/opencode",))
    assert own == [".git/opencode (added)"]
    assert mutations == [".git/config (changed)", ".git/hooks/pre-commit (added)", ".git/opencode-evil (added)"]
    assert split_product_state(found, ()) == (found, [])


def test_the_products_plugin_fetch_is_background_but_the_agents_npm_is_not():
    """A hostile agent reaching the npm registry with its own npm is not excused as the product's traffic."""
    from pytest_agentdrift.run.evidence import split_background

    def attempt(program: str) -> dict:
        return {
            "type": "network_attempt",
            "host": "registry.npmjs.org",
            "port": 443,
            "program": program,
            "allowed": False,
        }

    net, background = split_background([attempt("opencode.exe"), attempt("npm"), attempt("node")], OpenCodeAdapter())
    assert [a["program"] for a in background] == ["opencode.exe"]
    assert [a["program"] for a in net] == ["npm", "node"]
