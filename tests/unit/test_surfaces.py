"""Product-surface discovery on fixture homes and repositories built in tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import write

from pytest_agentdrift.agents import discovery_base, products
from pytest_agentdrift.agents.claude_code import discovery as claude
from pytest_agentdrift.agents.codex import discovery as codex
from pytest_agentdrift.agents.copilot import discovery as copilot
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.manifest import discovery

PLANTED = "sk-PLANTED-0123456789abcdef"


def entries(disc: discovery_base.Discovery) -> list[dict]:
    return discovery_base.instruction_bundle(disc)["entries"]


def by_path(disc: discovery_base.Discovery) -> dict[str, dict]:
    return {e["path"]: e for e in entries(disc)}


# --------------------------------------------------------------------------- normalisation


def test_normalisation_ignores_line_endings_and_trailing_whitespace():
    a = b"# Rules\n- use tabs\n\n"
    b = b"\xef\xbb\xbf# Rules  \r\n- use tabs\t\r\n\r\n\r\n"
    assert discovery_base.normalise_text(a) == discovery_base.normalise_text(b) == b"# Rules\n- use tabs\n"
    assert discovery_base.normalise_text(b"# Rules\n- use spaces\n") != discovery_base.normalise_text(a)
    assert discovery_base.normalise_text(b"") == b""


def test_labels_never_hold_the_temporary_directory(tmp_path):
    roots = discovery_base.Roots.build(
        [
            ("~/", tmp_path / "home"),
            ("project:", tmp_path / "proj"),
            ("task:T05:", tmp_path / "proj" / "suite" / "T05" / "repo"),
        ]
    )
    assert roots.label(tmp_path / "home" / ".claude" / "CLAUDE.md") == "~/.claude/CLAUDE.md"
    assert roots.label(tmp_path / "proj" / "CLAUDE.md") == "project:CLAUDE.md"
    # most specific root wins
    assert roots.label(tmp_path / "proj" / "suite" / "T05" / "repo" / "a" / "AGENTS.md") == "task:T05:a/AGENTS.md"
    outside = roots.label(Path("/somewhere/private/alice/notes.md"))
    assert outside.startswith("outside:") and "alice" not in outside and outside.endswith("/notes.md")


# --------------------------------------------------------------------------- Claude Code


@pytest.fixture
def claude_world(tmp_path):
    home = tmp_path / "home"
    top = tmp_path / "work"
    proj = top / "proj"
    cwd = proj / "pkg"
    write(home / ".claude" / "CLAUDE.md", "# user memory\n@~/.claude/personal.md\n")
    write(home / ".claude" / "personal.md", "personal prefs\n")
    write(home / ".claude" / "rules" / "style.md", "user rule\n")
    write(top / "CLAUDE.md", "# workspace above the project\n")
    write(
        proj / "CLAUDE.md", "# project\nSee @docs/one.md and `@not/an/import.md`\n```\n@also/not.md\n```\n@missing.md\n"
    )
    # an import chain one hop longer than the documented maximum (5)
    write(proj / "docs" / "one.md", "@two.md\n")
    write(proj / "docs" / "two.md", "@three.md\n")
    write(proj / "docs" / "three.md", "@four.md\n")
    write(proj / "docs" / "four.md", "@five.md\n")
    write(proj / "docs" / "five.md", "@six.md\n@one.md\n")  # six is beyond depth; one.md is a cycle
    write(proj / "docs" / "six.md", "too deep\n")
    write(proj / "CLAUDE.local.md", "local notes\n")
    write(proj / ".claude" / "rules" / "api.md", '---\npaths:\n  - "src/api/**/*.py"\n---\nAPI rule\n')
    write(proj / ".claude" / "rules" / "all.md", "always\n")
    write(cwd / "CLAUDE.md", "# package\n")
    write(cwd / "deep" / "CLAUDE.md", "# nested below cwd\n")
    write(cwd / "node_modules" / "x" / "CLAUDE.md", "# vendored, never an instruction\n")
    return home, top, proj, cwd


def test_claude_discovery_order_scopes_and_imports(claude_world, tmp_path):
    home, top, proj, cwd = claude_world
    roots = discovery_base.Roots.build([("~/", home), ("project:", proj), ("ws:", top)])
    disc = claude.discover_claude_code(home, proj, cwd, {}, roots=roots, upward_limit=top)
    order = [e["path"] for e in entries(disc)]
    assert order[:3] == ["~/.claude/CLAUDE.md", "~/.claude/personal.md", "~/.claude/rules/style.md"]
    # ancestors outermost first, down to cwd; imports right after their importer
    assert order.index("ws:CLAUDE.md") < order.index("project:CLAUDE.md") < order.index("project:pkg/CLAUDE.md")
    assert order[order.index("project:CLAUDE.md") + 1] == "project:docs/one.md"
    got = by_path(disc)
    assert got["project:CLAUDE.local.md"]["scope"] == "local"
    assert got["project:.claude/rules/api.md"]["load"] == "conditional"
    assert got["project:.claude/rules/api.md"]["apply_to"] == ["src/api/**/*.py"]
    assert got["project:.claude/rules/all.md"]["load"] == "startup"
    assert got["project:pkg/deep/CLAUDE.md"]["load"] == "on_demand"
    assert not any("node_modules" in p for p in order)
    # code spans and fenced blocks are not imports
    assert got["project:CLAUDE.md"]["imports"] == ["project:docs/one.md", "project:missing.md"]
    # depth: one(1) two(2) three(3) four(4) five(5); six would be hop 6
    assert got["project:docs/five.md"]["depth"] == 5
    assert "project:docs/six.md" not in got
    missing = {(m["path"], m["reason"]) for m in discovery_base.instruction_bundle(disc)["missing"]}
    assert ("project:missing.md", "missing") in missing
    assert ("project:docs/six.md", "beyond max import depth 5") in missing
    # the cycle back to one.md is an edge in the graph, not a second entry
    assert order.count("project:docs/one.md") == 1
    graph = discovery_base.instruction_bundle(disc)["import_graph"]
    assert "project:docs/one.md" in graph["session|project:docs/five.md"]


def test_claude_import_depth_five_is_loaded_six_is_not(tmp_path):
    home, proj = tmp_path / "h", tmp_path / "p"
    write(proj / "CLAUDE.md", "@d1.md\n")
    for i in range(1, 7):
        write(proj / f"d{i}.md", f"@d{i + 1}.md\n" if i < 6 else "end\n")
    disc = claude.discover_claude_code(home, proj, proj, {}, upward_limit=proj)
    depths = {e["path"]: e["depth"] for e in entries(disc)}
    assert depths["project:d5.md"] == 5
    assert "project:d6.md" not in depths


def test_claude_settings_scopes_precedence_and_list_merge(tmp_path):
    home, proj = tmp_path / "h", tmp_path / "p"
    sysroot = tmp_path / "sys"
    write(
        home / ".claude" / "settings.json", json.dumps({"model": "user-model", "permissions": {"allow": ["Bash(ls)"]}})
    )
    write(
        proj / ".claude" / "settings.json",
        json.dumps({"permissions": {"allow": ["Bash(make)"], "defaultMode": "plan"}}),
    )
    write(proj / ".claude" / "settings.local.json", json.dumps({"model": "local-model"}))
    write(
        sysroot / "etc" / "claude-code" / "managed-settings.json", json.dumps({"permissions": {"deny": ["WebFetch"]}})
    )
    disc = claude.discover_claude_code(home, proj, proj, {}, system_root=sysroot, upward_limit=proj)
    scopes = {s["scope"]: s for s in disc.config if s["status"] == "present"}
    assert (
        scopes["managed"]["precedence"]
        > scopes["local"]["precedence"]
        > scopes["project"]["precedence"]
        > scopes["user"]["precedence"]
    )
    facts = products.surface_facts("claude-code", disc.config, {})
    assert facts["model"] == {"value": "local-model", "source": "project:.claude/settings.local.json"}
    assert facts["permission_mode"]["value"] == "plan"
    merged = facts["documented_merge"]["value"]
    assert merged["permissions"]["allow"] == ["Bash(ls)", "Bash(make)"]  # arrays merge across scopes
    assert merged["permissions"]["deny"] == ["WebFetch"]
    assert merged["model"] == "local-model"


def test_claude_mcp_sources_keep_no_secret(tmp_path):
    home, proj = tmp_path / "h", tmp_path / "p"
    write(
        home / ".claude.json",
        json.dumps(
            {
                "oauthAccount": {"emailAddress": "planted@example.com", "accessToken": PLANTED},
                "mcpServers": {
                    "gh": {
                        "command": "npx",
                        "args": ["-y", "server", "--token", PLANTED],
                        "env": {"GITHUB_TOKEN": PLANTED},
                        "headers": {"Authorization": PLANTED},
                    }
                },
                "projects": {
                    str(proj): {
                        "mcpServers": {"local-db": {"url": f"https://user:{PLANTED}@db.example/mcp?key={PLANTED}"}},
                        "history": [{"display": "secret prompt " + PLANTED}],
                    }
                },
            }
        ),
    )
    write(proj / ".mcp.json", json.dumps({"mcpServers": {"docs": {"type": "http", "url": "https://docs.example/mcp"}}}))
    disc = claude.discover_claude_code(home, proj, proj, {}, upward_limit=proj)
    blob = json.dumps(disc.config)
    assert PLANTED not in blob and "planted@example.com" not in blob and "secret prompt" not in blob
    user = next(s for s in disc.config if s["scope"] == "user-mcp")
    gh = user["content"]["mcpServers"]["gh"]
    assert gh["command"] == "npx" and gh["env"] == ["GITHUB_TOKEN"] and set(gh["args"]) == {"sha256"}
    assert "oauthAccount" in user["unrecorded_keys"]
    local = next(s for s in disc.config if s["scope"] == "local-mcp")
    assert local["content"]["mcpServers"]["local-db"]["url"] == "https://db.example/mcp"
    assert "history" in local["unrecorded_keys"]


# --------------------------------------------------------------------------- Codex


@pytest.fixture
def codex_world(tmp_path):
    home = tmp_path / "home"
    proj = tmp_path / "proj"
    cwd = proj / "services" / "api"
    (proj / ".git").mkdir(parents=True)
    write(home / ".codex" / "AGENTS.override.md", "")  # empty: skipped, AGENTS.md is used
    write(home / ".codex" / "AGENTS.md", "global guidance\n")
    write(proj / "AGENTS.md", "root guidance\n")
    write(proj / "services" / "AGENTS.override.md", "services override\n")
    write(proj / "services" / "AGENTS.md", "shadowed by the override\n")
    write(cwd / "AGENTS.md", "x" * 100)
    write(cwd / "deeper" / "AGENTS.md", "below cwd: not in the chain\n")
    return home, proj, cwd


def test_codex_chain_one_file_per_directory_root_to_cwd(codex_world):
    home, proj, cwd = codex_world
    disc = codex.discover_codex(home, proj, cwd, {}, upward_limit=proj.parent)
    got = [(e["path"], e["status"]) for e in entries(disc)]
    assert got == [
        ("~/.codex/AGENTS.override.md", "empty_skipped"),
        ("~/.codex/AGENTS.md", "loaded"),
        ("project:AGENTS.md", "loaded"),
        ("project:services/AGENTS.override.md", "loaded"),
        ("project:services/AGENTS.md", "shadowed"),
        ("project:services/api/AGENTS.md", "loaded"),
    ]


def test_codex_size_cap_truncates_then_skips(codex_world):
    home, proj, cwd = codex_world
    write(
        home / ".codex" / "config.toml", f'project_doc_max_bytes = 20\n[projects."{proj}"]\ntrust_level = "trusted"\n'
    )
    disc = codex.discover_codex(home, proj, cwd, {}, upward_limit=proj.parent)
    got = {e["path"]: e for e in entries(disc)}
    assert (got["project:AGENTS.md"]["status"], got["project:AGENTS.md"]["loaded_bytes"]) == ("loaded", 14)
    over = got["project:services/AGENTS.override.md"]  # 18 bytes, 6 left under the cap
    assert (over["status"], over["loaded_bytes"], over["size"]) == ("truncated", 6, 18)
    assert got["project:services/api/AGENTS.md"]["status"] == "over_cap"
    assert discovery_base.instruction_bundle(disc)["limits"]["codex:session"]["project_doc_max_bytes"] == 20
    # the default cap is 32 KiB: everything fits
    write(home / ".codex" / "config.toml", f'[projects."{proj}"]\ntrust_level = "trusted"\n')
    disc = codex.discover_codex(home, proj, cwd, {}, upward_limit=proj.parent)
    assert all(e["status"] != "over_cap" for e in entries(disc))


def test_codex_home_env_profiles_trust_and_mcp(codex_world):
    home, proj, cwd = codex_world
    codex_home = home / "alt-codex"
    write(codex_home / "AGENTS.md", "alt global\n")
    write(codex_home / "auth.json", json.dumps({"OPENAI_API_KEY": PLANTED}))
    write(
        codex_home / "config.toml",
        "\n".join(
            [
                'model = "root-model"',
                'approval_policy = "on-request"',
                'profile = "fast"',
                "[profiles.fast]",
                'model = "fast-model"',
                "[mcp_servers.tracker]",
                'command = "tracker-mcp"',
                f'args = ["--key", "{PLANTED}"]',
                f'env = {{ TRACKER_TOKEN = "{PLANTED}" }}',
                "[model_providers.corp]",
                f'base_url = "https://u:{PLANTED}@llm.corp/v1"',
                'env_key = "CORP_KEY"',
                "",
                f'[projects."{proj}"]',
                'trust_level = "trusted"',
                "",
            ]
        ),
    )
    write(proj / ".codex" / "config.toml", 'sandbox_mode = "workspace-write"\n')
    env = {"CODEX_HOME": str(codex_home)}
    disc = codex.discover_codex(home, proj, cwd, env, upward_limit=proj.parent)
    assert entries(disc)[0]["path"] == "$CODEX_HOME/AGENTS.md"
    blob = json.dumps(disc.config)
    assert PLANTED not in blob and "auth.json" not in blob
    facts = products.surface_facts("codex", disc.config, env)
    assert facts["model"]["value"] == "fast-model" and facts["model"]["source"] == "profile:fast"
    assert facts["permission_mode"]["value"] == "on-request"
    assert facts["sandbox"]["value"] == "workspace-write"  # trusted project layer applies
    user = next(s for s in disc.config if s["scope"] == "user")
    assert user["content"]["mcp_servers"]["tracker"]["env"] == ["TRACKER_TOKEN"]
    assert user["content"]["model_providers"]["corp"]["base_url"] == "https://llm.corp/v1"
    assert "projects" in user["unrecorded_keys"]  # absolute private paths stay out
    project = next(s for s in disc.config if s["scope"] == "project" and s["status"] == "present")
    assert project["trusted"] is True


def test_codex_untrusted_project_config_does_not_apply(codex_world):
    home, proj, cwd = codex_world
    write(proj / ".codex" / "config.toml", 'sandbox_mode = "danger-full-access"\n')
    disc = codex.discover_codex(home, proj, cwd, {}, upward_limit=proj.parent)
    project = next(s for s in disc.config if s["scope"] == "project" and s["status"] == "present")
    assert project["applies"] is False
    assert "sandbox" not in products.surface_facts("codex", disc.config, {})


# --------------------------------------------------------------------------- Copilot


def test_copilot_instructions_apply_to_and_settings(tmp_path):
    home, repo = tmp_path / "home", tmp_path / "repo"
    cwd = repo / "web"
    (repo / ".git").mkdir(parents=True)
    write(home / ".copilot" / "copilot-instructions.md", "user-wide\n")
    write(home / ".copilot" / "instructions" / "tone.instructions.md", "be brief\n")
    write(home / ".copilot" / "config.json", json.dumps({"loggedInUsers": [{"token": PLANTED}]}))
    write(repo / ".github" / "copilot-instructions.md", "repo-wide\n")
    write(
        repo / ".github" / "instructions" / "py.instructions.md",
        '---\napplyTo: "**/*.py,**/*.pyi"\n---\nPython rules\n',
    )
    write(repo / ".github" / "instructions" / "all.instructions.md", '---\napplyTo: "**"\n---\neverything\n')
    write(repo / "AGENTS.md", "primary\n")
    write(cwd / "AGENTS.md", "additional\n")
    write(repo / "CLAUDE.md", "also read by copilot at the root\n")
    write(
        home / ".copilot" / "settings.json",
        '// user settings (JSONC)\n{\n  "model": "user-model", /* inline */\n  "autoUpdate": false,\n}\n',
    )
    write(repo / ".github" / "copilot" / "settings.json", json.dumps({"model": "repo-model"}))
    write(
        home / ".copilot" / "mcp-config.json",
        json.dumps({"mcpServers": {"s": {"command": "srv", "env": {"K": PLANTED}}}}),
    )
    disc = copilot.discover_copilot(home, repo, cwd, {}, upward_limit=tmp_path)
    got = by_path(disc)
    assert got["~/.copilot/copilot-instructions.md"]["scope"] == "user"
    assert got["project:.github/copilot-instructions.md"]["scope"] == "repository"
    assert got["project:AGENTS.md"]["scope"] == "primary"
    assert got["project:web/AGENTS.md"]["scope"] == "additional"
    py = got["project:.github/instructions/py.instructions.md"]
    assert py["apply_to"] == ["**/*.py", "**/*.pyi"] and py["load"] == "conditional"
    assert discovery_base.applies_to(py, "src/app.py") and not discovery_base.applies_to(py, "web/app.ts")
    assert got["project:.github/instructions/all.instructions.md"]["load"] == "startup"
    assert "project:CLAUDE.md" in got
    blob = json.dumps(disc.config) + json.dumps(discovery_base.instruction_bundle(disc))
    assert PLANTED not in blob
    assert not any(src["path"].endswith(".copilot/config.json") for src in disc.config)  # auth state: never opened
    facts = products.surface_facts("copilot", disc.config, {})
    assert facts["model"]["value"] == "repo-model"
    assert facts["auto_update_state"]["value"] == "disabled"


def test_copilot_home_env_and_custom_dirs(tmp_path):
    home, repo = tmp_path / "home", tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    alt = tmp_path / "alt"
    extra = tmp_path / "shared-instructions"
    write(alt / "copilot-instructions.md", "alt\n")
    write(extra / "AGENTS.md", "shared\n")
    env = {"COPILOT_HOME": str(alt), "COPILOT_CUSTOM_INSTRUCTIONS_DIRS": str(extra)}
    disc = copilot.discover_copilot(home, repo, repo, env, upward_limit=tmp_path)
    paths = [e["path"] for e in entries(disc)]
    assert "$COPILOT_HOME/copilot-instructions.md" in paths
    assert "$COPILOT_CUSTOM_INSTRUCTIONS_DIRS[0]/AGENTS.md" in paths
    assert not any(str(tmp_path) in p for p in paths)


# --------------------------------------------------------------------------- generic + config hashing


def test_generic_named_files_record_digests_only(tmp_path):
    cfg = write(tmp_path / "proj" / "agent.json", json.dumps({"token": PLANTED, "mode": "auto"}))
    ins = write(tmp_path / "proj" / "PROMPT.md", "be careful\n")
    disc = discovery.discover(
        "generic",
        tmp_path / "home",
        tmp_path / "proj",
        tmp_path / "proj",
        {},
        config_paths=[cfg, tmp_path / "proj" / "absent.toml"],
        instruction_paths=[ins, Path("missing.md")],
    )
    blob = json.dumps(disc.config) + json.dumps(discovery_base.instruction_bundle(disc))
    assert PLANTED not in blob and "auto" not in blob
    assert [s["status"] for s in disc.config] == ["present", "absent"]
    assert disc.config[0]["content"] == "not_recorded" and disc.config[0]["canonical_sha256"].startswith("sha256:")
    assert [m["path"] for m in discovery_base.instruction_bundle(disc)["missing"]] == ["project:missing.md"]


def _claude_hash(tmp_path: Path, settings: bytes) -> str:
    home, proj = tmp_path / "h", tmp_path / "p"
    write(home / ".claude" / "settings.json", settings)
    disc = claude.discover_claude_code(home, proj, proj, {}, upward_limit=proj)
    return discovery_base.config_hash(disc.config)


def test_config_hash_ignores_key_order_and_line_endings(tmp_path):
    a = _claude_hash(tmp_path / "a", b'{"model": "m", "permissions": {"allow": ["A", "B"], "deny": []}}\n')
    b = _claude_hash(
        tmp_path / "b", b'{\r\n  "permissions": {"deny": [], "allow": ["A", "B"]},\r\n  "model": "m"\r\n}\r\n'
    )
    assert a == b
    # array order is kept
    c = _claude_hash(tmp_path / "c", b'{"model": "m", "permissions": {"allow": ["B", "A"], "deny": []}}')
    assert c != a


def test_config_hash_explicit_null_differs_from_absent(tmp_path):
    absent = _claude_hash(tmp_path / "a", b'{"model": "m"}')
    null = _claude_hash(tmp_path / "b", b'{"model": "m", "outputStyle": null}')
    assert absent != null


def test_config_hash_changes_with_unknown_key_name_but_not_its_value(tmp_path):
    one = _claude_hash(tmp_path / "a", json.dumps({"model": "m", "customThing": PLANTED}).encode())
    two = _claude_hash(tmp_path / "b", json.dumps({"model": "m", "customThing": "rotated"}).encode())
    none = _claude_hash(tmp_path / "c", json.dumps({"model": "m"}).encode())
    assert one == two != none


@pytest.mark.parametrize(
    "discover, where, rel, text",
    [
        pytest.param(codex.discover_codex, "h", ".codex/config.toml", 'model = "a"\nmodel = "b"\n', id="codex-toml"),
        pytest.param(
            claude.discover_claude_code,
            "p",
            ".claude/settings.json",
            '{"model": "a", "permissions": {}, "model": "b"}',
            id="claude-code-json",
        ),
    ],
)
def test_duplicate_key_names_file_and_key(tmp_path, discover, where, rel, text):
    home, proj = tmp_path / "h", tmp_path / "p"
    bad = write(tmp_path / where / rel, text)
    with pytest.raises(AgentDriftError) as exc:
        discover(home, proj, proj, {}, upward_limit=proj)
    assert exc.value.path == str(bad) and "'model'" in exc.value.problem and exc.value.exit_code == 4


def test_duplicate_jsonc_key_is_rejected_too(tmp_path):
    home, repo = tmp_path / "h", tmp_path / "r"
    write(home / ".copilot" / "settings.json", '{\n // c\n "model": "a",\n "model": "b"\n}')
    with pytest.raises(AgentDriftError, match="duplicate key 'model'"):
        copilot.discover_copilot(home, repo, repo, {}, upward_limit=repo)


def test_unreadable_config_makes_hash_unobserved(tmp_path):
    src = [
        {
            "surface": "x",
            "context": "s",
            "path": "~/a",
            "scope": "user",
            "precedence": 1,
            "format": "json",
            "status": "unreadable",
        }
    ]
    assert discovery_base.config_hash(src) == "unobserved"


def test_task_repositories_get_their_own_project_scope(tmp_path):
    home = tmp_path / "home"
    suite = tmp_path / "proj" / "suite"
    write(home / ".claude" / "CLAUDE.md", "user\n")
    write(tmp_path / "proj" / "CLAUDE.md", "project root: the agent never sees it\n")
    write(suite / "T01" / "repo" / "CLAUDE.md", "t1\n")
    write(suite / "T05" / "repo" / "pkg" / "CLAUDE.md", "nested t5\n")
    disc = discovery.discover(
        "claude-code",
        home,
        tmp_path / "proj",
        tmp_path / "proj",
        {},
        task_repos={"T01": suite / "T01" / "repo", "T05": suite / "T05" / "repo"},
    )
    got = [(e["context"], e["path"], e["load"]) for e in entries(disc)]
    assert got == [
        ("user", "~/.claude/CLAUDE.md", "startup"),
        ("task:T01", "task:T01:CLAUDE.md", "startup"),
        ("task:T05", "task:T05:pkg/CLAUDE.md", "on_demand"),
    ]
    assert discovery_base.instruction_bundle(disc)["discovery_roots"] == {
        "task:T01": "task:T01:",
        "task:T05": "task:T05:",
        "user": "~/",
    }


def test_surface_rules_for_adapters():
    assert products.surface_rules_for({"name": "claude-code", "product": "anthropic/claude-code"}) == "claude-code"
    assert products.surface_rules_for({"name": "codex", "product": "openai/codex"}) == "codex"
    assert products.surface_rules_for({"name": "copilot", "product": "github/copilot-cli"}) == "copilot"
    assert products.surface_rules_for({"name": "cmd", "product": "generic"}) == "generic"
    with pytest.raises(AgentDriftError):
        discovery.discover("cursor", Path("/nonexistent"), Path("/nonexistent"), Path("/nonexistent"), {})
