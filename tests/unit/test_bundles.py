"""Instruction bundles: snapshot read-only, content-addressed, immutable, derivable."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import write

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.inifile import read_ini
from pytest_agentdrift.manifest import bundles

SECRET = "sk-ant-PLANTED-0123456789abcdef"


@pytest.fixture
def team(tmp_path):
    """A project and a home with a Claude Code setup (and credentials that must never be copied)."""
    project, home = tmp_path / "project", tmp_path / "home"
    write(project / "CLAUDE.md", "# Team rules\n- Run the tests before you say done.\n")
    write(project / ".claude" / "settings.json", json.dumps({"permissions": {"allow": ["Bash(pytest:*)"]}}))
    write(project / ".claude" / "skills" / "pdf" / "SKILL.md", "---\nname: pdf\n---\nUse pypdf.\n")
    write(project / ".claude" / "skills" / "pdf" / "scripts" / "extract.py", "print('extract')\n")
    write(
        project / ".mcp.json",
        json.dumps({"mcpServers": {"docs": {"command": "docs-mcp", "args": ["--token", SECRET]}}}),
    )
    write(project / "src" / "CLAUDE.md", "Nested rules.\n")
    write(project / "src" / "app.py", "print('not part of a bundle')\n")
    write(home / ".claude" / "CLAUDE.md", "# My rules\n")
    write(home / ".claude" / ".credentials.json", json.dumps({"token": SECRET}))
    write(home / ".claude.json", json.dumps({"oauthAccount": SECRET}))
    write(home / ".claude" / "commands" / "ship.md", "Ship it.\n")
    os.symlink(project / "CLAUDE.md", home / ".claude" / "commands" / "link.md")
    return project, home, tmp_path / "store"


def snap(team, name="team", **kw):
    project, home, store = team
    return bundles.snapshot(store, name, agent="claude-code", project=project, home=home, env={}, **kw)


def test_snapshot_takes_what_claude_code_reads_and_nothing_else(team):
    bundle, created = snap(team, model="claude-sonnet-4-5")
    assert created
    files = {(f.scope, f.path): f for f in bundle.files}
    assert set(files) == {
        ("project", "CLAUDE.md"),
        ("project", ".claude/settings.json"),
        ("project", ".mcp.json"),
        ("project", ".claude/skills/pdf/SKILL.md"),
        ("project", ".claude/skills/pdf/scripts/extract.py"),
        ("user", ".claude/CLAUDE.md"),
        ("user", ".claude/commands/ship.md"),
    }
    assert files[("project", "CLAUDE.md")].category == "instructions"
    assert files[("project", ".claude/settings.json")].category == "config"
    assert files[("project", ".claude/skills/pdf/scripts/extract.py")].kind == "skill"
    assert bundle.model == "claude-sonnet-4-5"
    skipped = {s["path"]: s["reason"] for s in bundle.doc["provenance"]["skipped"]}
    assert "nested" in skipped["project:src/CLAUDE.md"]
    assert "credential" in skipped["~/.claude.json"]
    assert "symlink" in skipped["~/.claude/commands/link.md"]
    # the credentials file is never even listed as a candidate file of the bundle
    assert not (bundle.root / "files" / "user" / ".claude" / ".credentials.json").exists()
    # the document holds no private path; the store holds no credential
    doc = (bundle.root / "bundle.json").read_text()
    assert str(team[0]) not in doc and str(team[1]) not in doc
    stored = b"".join(p.read_bytes() for p in bundle.root.rglob("*") if p.is_file())
    assert b"oauthAccount" not in stored


def test_snapshot_is_read_only(team):
    project, home, _ = team
    before = {
        p: (p.stat().st_mtime_ns, p.read_bytes())
        for p in [*project.rglob("*"), *home.rglob("*")]
        if p.is_file() and not p.is_symlink()
    }
    snap(team)
    after = {
        p: (p.stat().st_mtime_ns, p.read_bytes())
        for p in [*project.rglob("*"), *home.rglob("*")]
        if p.is_file() and not p.is_symlink()
    }
    assert before == after


def test_content_addressed_and_immutable_names(team):
    project, home, store = team
    first, _ = snap(team)
    again, created = snap(team)
    assert not created and again.digest == first.digest
    other, _ = snap(team, name="team-copy")
    assert other.digest == first.digest  # same content, same object
    write(project / "CLAUDE.md", "# Team rules\n- Run the tests before you say done.\n- Keep diffs small.\n")
    with pytest.raises(AgentDriftError, match="already names .*immutable"):
        snap(team)
    changed, created = snap(team, name="team-v2")
    assert created and changed.digest != first.digest
    # one CLAUDE.md line: only the instruction part moves
    assert changed.doc["digests"]["instructions"] != first.doc["digests"]["instructions"]
    assert changed.doc["digests"]["config"] == first.doc["digests"]["config"]
    listed = {row["name"]: row["digest"] for row in bundles.list_bundles(store)}
    assert listed == {"team": first.digest, "team-copy": first.digest, "team-v2": changed.digest}


def test_a_crlf_resave_keeps_the_instruction_digest(team):
    project, _, _ = team
    first, _ = snap(team)
    write(project / "CLAUDE.md", "# Team rules\r\n- Run the tests before you say done.   \r\n")
    resaved, _ = snap(team, name="resaved")
    assert resaved.digest != first.digest  # other bytes: another object
    assert resaved.doc["digests"]["instructions"] == first.doc["digests"]["instructions"]


def test_load_by_name_digest_prefix_and_directory_and_refuse_edits(team):
    bundle, _ = snap(team)
    store = team[2]
    assert bundles.load(store, "team").digest == bundle.digest
    assert bundles.load(store, bundle.digest).digest == bundle.digest
    assert bundles.load(store, bundle.short).digest == bundle.digest
    assert bundles.load(store, str(bundle.root)).digest == bundle.digest
    with pytest.raises(AgentDriftError, match="no bundle 'nope'.*known: team"):
        bundles.load(store, "nope")
    target = bundle.root / "files" / "project" / "CLAUDE.md"
    os.chmod(target, 0o644)
    target.write_text("# Edited in place\n")
    with pytest.raises(AgentDriftError, match="CLAUDE.md differs from what was recorded; bundles are immutable"):
        bundles.load(store, "team")


def test_an_added_file_in_a_stored_object_is_refused(team):
    bundle, _ = snap(team)
    os.chmod(bundle.root / "files" / "project", 0o755)
    write(bundle.root / "files" / "project" / "AGENTS.md", "smuggled\n")
    with pytest.raises(AgentDriftError, match="added to the stored bundle"):
        bundles.load(team[2], "team")


def test_derive_without_and_with(team, tmp_path):
    base, _ = snap(team)
    store = team[2]
    b = bundles.derive(store, base, without=["CLAUDE.md", ".claude/skills/pdf"], cwd=team[0], home=team[1])
    paths = {(f.scope, f.path) for f in b.files}
    assert ("project", "CLAUDE.md") not in paths and not any("skills/pdf" in p for _, p in paths)
    assert b.identity["derived_from"] == base.digest
    assert b.removes == ["CLAUDE.md", ".claude/skills/pdf"]
    # findable again by its derived name
    assert bundles.load(store, b.name).digest == b.digest
    assert b.name == "team--without-CLAUDE.md--without-.claude_skills_pdf"
    plugin = tmp_path / "terse"
    write(plugin / "skills" / "terse" / "SKILL.md", "Answer in one line.\n")
    write(plugin / "hooks" / "hooks.json", "{}")
    write(plugin / ".claude-plugin" / "plugin.json", json.dumps({"name": "terse"}))
    c = bundles.derive(store, base, with_=[f"plugin:{plugin}"], cwd=team[0], home=team[1])
    assert ("project", ".claude/skills/terse/SKILL.md") in {(f.scope, f.path) for f in c.files}
    added = c.identity["derivation"]["added"][0]
    assert added["not_installed"] == [".claude-plugin", "hooks"]
    with pytest.raises(AgentDriftError, match="installed plugins are not looked up"):
        bundles.derive(store, base, with_=["plugin:terse"], cwd=team[0], home=team[1])
    with pytest.raises(AgentDriftError, match="without '..'"):
        bundles.derive(store, base, without=["../etc/passwd"], cwd=team[0], home=team[1])


def test_bad_names_and_agents_are_one_clear_error(team):
    project, home, store = team
    with pytest.raises(AgentDriftError, match="bundle name '../x'"):
        bundles.snapshot(store, "../x", agent="claude-code", project=project, home=home, env={})
    with pytest.raises(AgentDriftError, match="no documented discovery rules"):
        bundles.snapshot(store, "ref", agent="reference", project=project, home=home, env={})
    with pytest.raises(AgentDriftError, match="unknown agent 'cursor'"):
        bundles.snapshot(store, "c", agent="cursor", project=project, home=home, env={})
    assert not (store / "names" / "c.json").exists()


def test_project_only_leaves_the_home_out(team):
    bundle, _ = snap(team, name="proj", project_only=True)
    assert {f.scope for f in bundle.files} == {"project"}


def test_claude_config_dir_is_read_and_stored_at_the_default_place(team, tmp_path):
    project, home, store = team
    moved = tmp_path / "moved-claude"
    write(moved / "CLAUDE.md", "# Moved rules\n")
    bundle, _ = bundles.snapshot(
        store, "moved", agent="claude-code", project=project, home=home, env={"CLAUDE_CONFIG_DIR": str(moved)}
    )
    user = {f.path for f in bundle.scoped("user")}
    assert ".claude/CLAUDE.md" in user
    assert (
        bundle.source(next(f for f in bundle.files if f.path == ".claude/CLAUDE.md")).read_text() == "# Moved rules\n"
    )


def test_store_resolution_order(tmp_path):
    root = tmp_path
    assert bundles.resolve_store(None, None, {}, root) == root / ".agentdrift" / "bundles"
    assert bundles.resolve_store(None, None, {"AGENTDRIFT_BUNDLES": "/b/env"}, root) == Path("/b/env")
    assert bundles.resolve_store("rel", None, {}, root) == Path.cwd() / "rel"  # a command-line path: from here
    assert bundles.resolve_store(None, "ini-dir", {"AGENTDRIFT_BUNDLES": "/b/env"}, root) == root / "ini-dir"
    assert bundles.resolve_store("/b/cli", "ini-dir", {"AGENTDRIFT_BUNDLES": "/b/env"}, root) == Path("/b/cli")
    write(root / "proj" / "pyproject.toml", '[tool.pytest.ini_options]\nagent_bundles = "shared/bundles"\n')
    (root / "proj" / "sub").mkdir()
    declared = {"agent_bundles": ("string", None)}
    found = read_ini(declared, start=root / "proj" / "sub")
    assert (found.rootdir, found.values) == (root / "proj", {"agent_bundles": "shared/bundles"})
    write(root / "other" / "pytest.ini", "[pytest]\n")
    found = read_ini(declared, start=root / "other")
    assert (found.rootdir, found.values) == (root / "other", {"agent_bundles": None})


def test_secrets_in_the_bundles_configuration_are_found_for_scrubbing(team):
    project, home, store = team
    write(
        project / ".claude" / "settings.json",
        json.dumps(
            {
                "env": {"API_BASE": "https://api.example.invalid", "MY_TOKEN": "tok-envvalue-123"},
                "apiKeyHelper": "/usr/local/bin/get-key",
                "permissions": {"allow": ["Bash(pytest:*)"]},
            }
        ),
    )
    write(
        project / ".mcp.json",
        json.dumps(
            {
                "mcpServers": {
                    "docs": {"command": "docs-mcp", "args": ["--token", SECRET, "--port", "8080"]},
                    "web": {
                        "url": "https://bob:hunter2hunter2@mcp.example.invalid/x",
                        "headers": {"Authorization": "Bearer abcdefgh1234"},
                    },
                    "gh": {"command": "gh-mcp", "args": ["--auth=ghp_0123456789abcdef"], "model": "claude-sonnet-4-5"},
                }
            }
        ),
    )
    bundle, _ = snap(team, name="with-secrets")
    found = set(bundles.secret_strings(bundle))
    for value in (
        SECRET,
        "tok-envvalue-123",
        "hunter2hunter2",
        "Bearer abcdefgh1234",
        "ghp_0123456789abcdef",
        "https://api.example.invalid",
    ):
        assert value in found, value
    assert SECRET.encode().hex() in found  # smuggled as hex is scrubbed too
    # what selects behaviour is left alone
    assert not found & {"docs-mcp", "8080", "--port", "claude-sonnet-4-5", "Bash(pytest:*)", "gh-mcp"}
