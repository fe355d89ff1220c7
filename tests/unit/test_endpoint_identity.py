"""The model endpoint and what the product reports about itself are identity.

The endpoint a preset's product is pointed at (its environment, Codex's
config.toml, else the product's built-in endpoint) is the identity field
`model_endpoint`, with no credential in it; the model Claude Code's init
record asks for fills `model_id` after the runs when no option or file named
it; fields a preset's product cannot report are accepted by default.
"""

from __future__ import annotations

import json

import pytest

from pytest_agentdrift.agents.base import endpoint_label
from pytest_agentdrift.agents.claude_code import ClaudeCodeAdapter
from pytest_agentdrift.agents.codex import CodexAdapter
from pytest_agentdrift.manifest import capture as mf
from pytest_agentdrift.manifest.accept import accept_tokens, resolve_for
from pytest_agentdrift.manifest.identity import compare_manifests, render_refusal
from pytest_agentdrift.vocabulary import ENVELOPE_FIELDS, UNOBSERVED


@pytest.mark.parametrize(
    ("url", "label"),
    [
        ("https://api.anthropic.com", "https://api.anthropic.com"),
        ("https://API.Anthropic.com:443/", "https://api.anthropic.com"),
        ("https://user:sk-secret@gw.example:8443/anthropic/?key=sk-q#frag", "https://gw.example:8443/anthropic"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("http://[::1]:4000", "http://[::1]:4000"),
        ("ftp://host/x", None),
        ("not a url", None),
        ("https://host:notaport", None),
        ("", None),
    ],
)
def test_endpoint_label_keeps_no_credential(url, label):
    assert endpoint_label(url) == label


def manifest_for(adapter, tmp_path, env=None, home_files=None, options=None):
    home = tmp_path / "home"
    for rel, text in (home_files or {}).items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    home.mkdir(parents=True, exist_ok=True)
    (tmp_path / "proj").mkdir(exist_ok=True)
    (tmp_path / "task" / "repo").mkdir(parents=True, exist_ok=True)
    (tmp_path / "task" / "task.md").write_text("Fix it.\n")
    ctx = mf.ManifestContext(
        adapter=adapter.describe(),
        agent_argv=adapter.argv_template(),
        version_argv=None,
        home=home,
        project_root=tmp_path / "proj",
        env={"PATH": "/nonexistent", **(env or {})},
        options={"permission_mode": "acceptEdits", "retry_policy": {"max_retries": 0}, **(options or {})},
        isolation={"enforced": "bwrap"},
        task_dirs={"T1": tmp_path / "task"},
        system_root=None,
        task_set_id="sha256:t",
        evaluator_id="sha256:e",
        harness_version="0",
    )
    return mf.capture_manifest(ctx)


def test_claude_endpoint_from_its_environment_without_the_key(tmp_path):
    env = {"ANTHROPIC_BASE_URL": "https://u:sk-planted-999@gw.internal:8443/v1?token=sk-planted-999"}
    m = manifest_for(ClaudeCodeAdapter(), tmp_path, env)
    assert m["identity"]["model_endpoint"] == "https://gw.internal:8443/v1"
    assert m["evidence"]["model_endpoint"] == {"source": "ANTHROPIC_BASE_URL"}
    assert "sk-planted-999" not in json.dumps(m)


def test_claude_without_a_base_url_talks_to_its_built_in_endpoint(tmp_path):
    m = manifest_for(ClaudeCodeAdapter(), tmp_path)
    assert m["identity"]["model_endpoint"] == "https://api.anthropic.com"
    assert m["evidence"]["model_endpoint"] == {"source": "the product's built-in endpoint"}


def test_claude_base_url_that_is_no_url_is_unobserved(tmp_path):
    m = manifest_for(ClaudeCodeAdapter(), tmp_path, {"ANTHROPIC_BASE_URL": "gw.internal"})
    assert m["identity"]["model_endpoint"] == UNOBSERVED
    assert "ANTHROPIC_BASE_URL does not name one http(s) URL" in m["reasons"]["model_endpoint"]


CODEX_GATEWAY = (
    'model_provider = "gw"\n[model_providers.gw]\nname = "gateway"\n'
    'base_url = "https://gw.internal/openai/v1?api-key=sk-planted"\nenv_key = "GW_KEY"\n'
)


def test_codex_endpoint_is_its_selected_providers_base_url(tmp_path):
    m = manifest_for(CodexAdapter(), tmp_path, home_files={".codex/config.toml": CODEX_GATEWAY})
    assert m["identity"]["model_endpoint"] == "https://gw.internal/openai/v1"
    assert "sk-planted" not in json.dumps(m["identity"])


def test_codex_endpoint_of_the_built_in_provider(tmp_path):
    base_url = manifest_for(
        CodexAdapter(), tmp_path / "a", home_files={".codex/config.toml": 'openai_base_url = "http://127.0.0.1:9/v1"\n'}
    )
    assert base_url["identity"]["model_endpoint"] == "http://127.0.0.1:9/v1"
    api_key = manifest_for(CodexAdapter(), tmp_path / "b", {"OPENAI_API_KEY": "sk-x"})
    assert api_key["identity"]["model_endpoint"] == "https://api.openai.com/v1"
    # signed in with ChatGPT (no key, no configured URL): where it goes is not readable
    chatgpt = manifest_for(CodexAdapter(), tmp_path / "c")
    assert chatgpt["identity"]["model_endpoint"] == UNOBSERVED


def test_codex_caps_its_own_retries_for_a_provider_of_the_users(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text(CODEX_GATEWAY)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    argv = CodexAdapter().argv_template()
    assert argv[argv.index("exec") :][:9] == [
        "exec",
        "--json",
        "--skip-git-repo-check",
        "-c",
        "model_providers.gw.request_max_retries=0",
        "-c",
        "model_providers.gw.stream_max_retries=0",
        "--sandbox",
        "workspace-write",
    ]
    # Codex refuses settings for its built-in providers: nothing is added for them
    (home / ".codex" / "config.toml").write_text('openai_base_url = "http://127.0.0.1:9/v1"\n')
    assert "-c" not in CodexAdapter().argv_template()


def test_another_endpoint_blocks_unless_it_is_the_experiment(tmp_path):
    base = manifest_for(ClaudeCodeAdapter(), tmp_path / "a", {"ANTHROPIC_BASE_URL": "https://gw-a.internal"})
    cur = manifest_for(ClaudeCodeAdapter(), tmp_path / "b", {"ANTHROPIC_BASE_URL": "https://gw-b.internal"})
    accepted = resolve_for(accept_tokens(None, None), base, cur).fields
    refused = compare_manifests(base, cur, pre_run=True, accept_unobserved=accepted)
    assert not refused.comparable
    assert [b[0] for b in refused.blocks] == ["model_endpoint"]
    assert refused.change_class == "model_candidate"
    lines = render_refusal(refused)
    assert "BLOCK model_endpoint: https://gw-a.internal != https://gw-b.internal" in lines
    assert "--agent-vary model_endpoint" in lines[-1]
    varied = compare_manifests(base, cur, ["model_endpoint"], pre_run=True, accept_unobserved=accepted)
    assert varied.comparable and varied.varied == ["model_endpoint"]


def test_same_endpoint_compares_with_the_default_accept_list_alone(tmp_path):
    """No --agent-model: the model the product asks for is deferred before the runs and filled from
    its init record after them; the envelope it cannot report is accepted by default."""
    base = manifest_for(ClaudeCodeAdapter(), tmp_path / "a")
    cur = manifest_for(ClaudeCodeAdapter(), tmp_path / "b")
    accepted = resolve_for(accept_tokens(None, None), base, cur)
    assert set(ENVELOPE_FIELDS) <= set(accepted.groups["unreportable"])
    pre = compare_manifests(base, cur, pre_run=True, accept_unobserved=accepted.fields)
    assert pre.comparable, pre.blocks
    assert {"model_id", "built_in_tools", "sandbox", "model_stamp"} <= set(pre.deferred)
    reported = {
        "model_id": "claude-opus-5-5",
        "built_in_tools": ["Bash", "Edit"],
        "sandbox": {"sandbox_enabled": False},
    }
    runs = {"T02/r1": dict(reported), "T07/r1": dict(reported)}
    done_base = mf.finalize_manifest(base, {"T02/r1": "claude-answer"}, reported=runs)
    done_cur = mf.finalize_manifest(cur, {"T02/r1": "claude-answer"}, reported=runs)
    assert done_cur["identity"]["model_id"] == "claude-opus-5-5"
    assert done_cur["evidence"]["post_run"]["model_id"]["source"] == "the product's own report at run time"
    post = compare_manifests(done_base, done_cur, accept_unobserved=accepted.fields)
    assert post.comparable, post.blocks
    other = mf.finalize_manifest(
        cur, {"T02/r1": "claude-answer"}, reported={"T02/r1": {**reported, "model_id": "claude-haiku"}}
    )
    moved = compare_manifests(done_base, other, accept_unobserved=accepted.fields)
    assert [b[0] for b in moved.blocks] == ["model_id"]


def test_an_option_wins_over_what_the_product_reports(tmp_path):
    m = manifest_for(ClaudeCodeAdapter(), tmp_path, options={"model": "opus"})
    done = mf.finalize_manifest(m, {}, reported={"T02/r1": {"model_id": "claude-opus-5-5"}})
    assert done["identity"]["model_id"] == "opus"
    assert done["evidence"]["post_run"]["model_id"] == {"reported": ["claude-opus-5-5"], "kept": "opus"}


def test_a_command_agents_endpoint_is_observed_at_run_time_never_accepted_as_unobservable(tmp_path):
    """The harness's model gateway sees a command agent's endpoint, the model it asks for and the
    model that answered: none of them is in a group that accepts the unobservable, so no word hides
    a model swap; what a black box never shows (its envelope, options, tools) is accepted by default."""
    from pytest_agentdrift.agents.base import CommandAdapter

    m = manifest_for(CommandAdapter("python agent.py"), tmp_path)
    assert m["identity"]["model_endpoint"] == UNOBSERVED
    assert {"model_id", "model_endpoint"} <= set(m["evidence"]["run_reported_fields"])
    assert not {"model_id", "model_endpoint", "model_stamp"} & set(m["evidence"]["unobservable_fields"])
    accepted = resolve_for(accept_tokens(None, None), m, m)
    assert not {"model_id", "model_endpoint", "model_stamp"} & set(accepted.fields)
    assert "temperature" in accepted.groups["unreportable"] and "cli_version" not in accepted.groups["unreportable"]
    everything = resolve_for(["unobservable", "unreportable"], m, m)
    assert not {"model_id", "model_endpoint", "model_stamp"} & set(everything.fields)
