"""Each product's knowledge lives in its own folder; the registry dispatches to it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import write

from pytest_agentdrift.agents import discovery_base, products
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.manifest import discovery


def kinds(disc: discovery_base.Discovery) -> dict[str, tuple[str, str]]:
    return {e.path: (e.kind, e.load) for e in disc.entries}


def test_every_product_module_has_the_same_interface():
    for name in products.PRODUCT_PACKAGES:
        module = products.rules_module(name)
        assert module.RULES == name
        for attribute in ("discover", "facts", "BUNDLE_TREES", "NON_SECRET_ENV_VALUES", "PATHLIKE_ENV"):
            assert hasattr(module, attribute), (name, attribute)
    assert products.rules_module("generic") is None
    with pytest.raises(AgentDriftError, match="unknown surface rules 'cursor'"):
        products.rules_module("cursor")


def test_product_knowledge_reaches_the_manifest_from_the_product_folders():
    # (the sandbox never mounts the real home, so no product lists home entries to mask)
    from pytest_agentdrift.manifest.environment import NON_SECRET_ENV_VALUES

    assert {"CLAUDE_CODE_MAX_OUTPUT_TOKENS", "CODEX_SANDBOX", "COPILOT_MODEL"} <= NON_SECRET_ENV_VALUES
    assert {"CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME"} <= products.pathlike_env()


def test_claude_skills_subagents_and_commands_are_on_demand_instruction_entries(tmp_path):
    home, proj = tmp_path / "home", tmp_path / "proj"
    write(home / ".claude" / "skills" / "pdf" / "SKILL.md", "---\nname: pdf\n---\nUse pypdf.\n")
    write(home / ".claude" / "skills" / "pdf" / "scripts" / "extract.py", "print('x')\n")
    write(proj / ".claude" / "agents" / "reviewer.md", "You review diffs.\n")
    write(proj / ".claude" / "commands" / "release" / "notes.md", "Write release notes.\n")
    disc = discovery.discover("claude-code", home, proj, proj, {})
    found = kinds(disc)
    assert found["~/.claude/skills/pdf/SKILL.md"] == ("skill", "on_demand")
    assert found["project:.claude/agents/reviewer.md"] == ("subagent", "on_demand")
    assert found["project:.claude/commands/release/notes.md"] == ("command", "on_demand")
    # a skill's scripts are not instruction text (a bundle snapshot still takes them)
    assert not any("extract.py" in p for p in found)


def test_a_new_skill_changes_the_instruction_hash(tmp_path):
    home, proj = tmp_path / "home", tmp_path / "proj"
    proj.mkdir(parents=True)
    home.mkdir()
    before = discovery_base.instruction_hash(
        discovery_base.instruction_bundle(discovery.discover("claude-code", home, proj, proj, {}))
    )
    write(proj / ".claude" / "skills" / "terse" / "SKILL.md", "Answer tersely.\n")
    after = discovery_base.instruction_hash(
        discovery_base.instruction_bundle(discovery.discover("claude-code", home, proj, proj, {}))
    )
    assert before != after


def test_codex_and_copilot_skills_are_found_where_their_docs_put_them(tmp_path):
    home, repo = tmp_path / "home", tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(repo / ".agents" / "skills" / "lint" / "SKILL.md", "Run ruff.\n")
    write(home / ".codex" / "prompts" / "ship.md", "Ship it.\n")
    codex = kinds(discovery.discover("codex", home, repo, repo, {}))
    assert codex["project:.agents/skills/lint/SKILL.md"] == ("skill", "on_demand")
    assert codex["~/.codex/prompts/ship.md"] == ("command", "on_demand")
    write(repo / ".github" / "skills" / "web" / "SKILL.md", "Test the web app.\n")
    write(repo / ".github" / "agents" / "docs.agent.md", "You write docs.\n")
    copilot = kinds(discovery.discover("copilot", home, repo, repo, {}))
    assert copilot["project:.github/skills/web/SKILL.md"] == ("skill", "on_demand")
    assert copilot["project:.agents/skills/lint/SKILL.md"] == ("skill", "on_demand")
    assert copilot["project:.github/agents/docs.agent.md"] == ("subagent", "on_demand")


def test_the_generic_machinery_imports_no_product():
    # the generic machinery sits in the agents stage (agents/discovery_base.py) so a product's rules never
    # import a later stage; neither it nor manifest.discovery imports a product or the dispatcher
    products_ = (
        "pytest_agentdrift.agents.products",
        "pytest_agentdrift.agents.claude_code",
        "pytest_agentdrift.agents.codex",
        "pytest_agentdrift.agents.copilot",
    )
    code = (
        "import sys; import pytest_agentdrift.manifest.discovery; "
        f"print(any(m.startswith({products_!r}) for m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert out.stdout.strip() == "False"


def test_the_preset_modules_still_import_as_before(capsys):
    from pytest_agentdrift.agents import reference
    from pytest_agentdrift.agents.base import builtin_adapters
    from pytest_agentdrift.agents.claude_code import ClaudeCodeAdapter

    presets = builtin_adapters()
    assert presets["claude-code"] is ClaudeCodeAdapter
    assert {"codex", "copilot", "reference", "reference-drifted"} <= set(presets)
    # the module the reference preset runs (the sessions of tests/integration run it as a program)
    assert reference.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "reference-1.0.0"
