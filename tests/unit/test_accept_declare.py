"""The accepted-unobserved resolver, declared facts, identity without machine paths, default checks, summary."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_agentdrift.agents import discovery_base
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.manifest.accept import accept_tokens, expand, resolve_for
from pytest_agentdrift.manifest.agentcmd import agent_files_hash, identity_argv
from pytest_agentdrift.manifest.declare import apply_facts, load_declarations
from pytest_agentdrift.testing import make_task
from pytest_agentdrift.vocabulary import DEFAULT_ACCEPT_UNOBSERVED, ENVELOPE_FIELDS


def test_accept_tokens_add_up_and_none_clears():
    assert accept_tokens(None, None) == list(DEFAULT_ACCEPT_UNOBSERVED)
    assert accept_tokens(None, ["model_id"]) == [*DEFAULT_ACCEPT_UNOBSERVED, "model_id"]
    # the ini adds to the defaults as the command line does (pytest.ini string or pyproject list); none clears
    assert accept_tokens("server_revision\nenvelope", ["model_id"]) == [
        *DEFAULT_ACCEPT_UNOBSERVED,
        *(["server_revision"] if "server_revision" not in DEFAULT_ACCEPT_UNOBSERVED else []),
        "envelope",
        "model_id",
    ]
    assert accept_tokens(["unobservable"], None) == [*DEFAULT_ACCEPT_UNOBSERVED, "unobservable"]
    assert accept_tokens(["none", "model_id"], None) == ["model_id"]
    assert accept_tokens(["server_revision"], ["none", "seed"]) == ["seed"]
    with pytest.raises(AgentDriftError, match="unknown field"):
        accept_tokens(None, ["colour"])


def test_groups_expand_visibly():
    a = expand(["env_image_digest", "envelope", "unobservable"], ["model_id", "sandbox"])
    assert a.groups == {"envelope": list(ENVELOPE_FIELDS), "unobservable": ["model_id", "sandbox"]}
    assert a.fields == ["env_image_digest", *ENVELOPE_FIELDS, "model_id", "sandbox"]
    assert a.lines()[0] == "accept      envelope = " + ", ".join(ENVELOPE_FIELDS)
    m = {"evidence": {"unobservable_fields": ["model_id", "not_a_field"]}}
    assert resolve_for(["unobservable"], m, {"evidence": {"unobservable_fields": ["seed"]}}).fields == [
        "model_id",
        "seed",
    ]


def manifest(**ident):
    return {
        "identity": {"model_id": "unobserved", "temperature": "unobserved", "sandbox": "not_applicable", **ident},
        "reasons": {"model_id": "not observable"},
    }


def test_declarations_fill_only_unobserved_and_observed_wins(tmp_path):
    m = manifest(permission_mode="auto")
    filled = apply_facts(m, {"model_id": "acme-2", "permission_mode": "auto"}, "declared", "agent.toml")
    assert filled == ["model_id"] and m["identity"]["model_id"] == "acme-2"
    assert m["evidence"]["value_sources"]["model_id"] == {"source": "declared", "from": "agent.toml"}
    assert "model_id" not in m["reasons"] and "permission_mode" in m["evidence"]["confirmed"]
    with pytest.raises(AgentDriftError) as exc:
        apply_facts(m, {"sandbox": "none"}, "declared", "agent.toml")
    assert exc.value.message == (
        'agent.toml: sandbox: declared value "none" contradicts the value observed by the harness: "not_applicable"'
    )
    with pytest.raises(AgentDriftError, match="declared by agent.toml"):
        apply_facts(m, {"model_id": "other"}, "agent_reported", "describe")


def test_declare_files_toml_and_json(tmp_path):
    (tmp_path / "a.toml").write_text('model_id = "m"\ntemperature = 0.5\n')
    assert load_declarations(tmp_path / "a.toml") == {"model_id": "m", "temperature": 0.5}
    (tmp_path / "a.json").write_text(json.dumps({"seed": 3}))
    assert load_declarations(tmp_path / "a.json") == {"seed": 3}
    (tmp_path / "bad.toml").write_text('colour = "red"\n')
    with pytest.raises(AgentDriftError, match="bad.toml: unknown field"):
        load_declarations(tmp_path / "bad.toml")
    (tmp_path / "empty.toml").write_text('model_id = "unobserved"\n')
    with pytest.raises(AgentDriftError, match="concrete value"):
        load_declarations(tmp_path / "empty.toml")


def test_identity_holds_no_machine_path(tmp_path):
    script = tmp_path / "proj" / "my_agent.py"
    script.parent.mkdir()
    script.write_text("print(1)\n")
    roots = discovery_base.Roots.build(
        [("~/", tmp_path / "home"), ("project:", script.parent), ("system:/", Path("/"))]
    )
    argv = [sys.executable, str(script), "{task_file}"]
    assert identity_argv(argv, roots)[0].startswith("interpreter:")
    assert identity_argv(argv, roots)[1:] == ["project:my_agent.py", "{task_file}"]
    outside = tmp_path / "elsewhere" / "tool.py"
    outside.parent.mkdir()
    outside.write_text("x = 1\n")
    assert identity_argv([str(outside)], roots) == ["outside:tool.py"]
    reasons: dict = {}
    before = agent_files_hash(argv, [], roots, reasons)
    assert list(before) == ["project:my_agent.py"]
    script.write_text("print(2)\n")
    assert agent_files_hash(argv, [], roots, reasons) != before
    assert agent_files_hash([sys.executable, "-c", "pass"], [], roots, reasons) == "not_applicable"
    # an --agent-config file counts by its canonical form, as config_hash does: key order and CRLF are no change
    config = script.parent / "agent.json"
    config.write_text('{"model": "m", "tools": ["a", "b"]}\n')
    first = agent_files_hash(argv, [config], roots, reasons)
    config.write_bytes(b'{\r\n  "tools": ["a", "b"],\r\n  "model": "m"\r\n}\r\n')
    assert agent_files_hash(argv, [config], roots, reasons) == first
    config.write_text('{"model": "other", "tools": ["a", "b"]}\n')
    assert agent_files_hash(argv, [config], roots, reasons) != first


def test_default_checks_protected_union_and_opt_out(tmp_path):
    from pytest_agentdrift.cli import protected_disagreement
    from pytest_agentdrift.tasks.load import load_task

    d = make_task(
        tmp_path,
        "D1",
        checks=[{"name": "c", "kind": "command", "layer": "correctness", "run": ["true"]}],
        protected=["tests/**"],
        forbidden_effects={"protected_paths": ["deploy/**"]},
    )
    spec = load_task(d)
    assert [c.name for c in spec.checks] == ["c", "default-tamper", "default-scope", "default-effects"]
    assert spec.protected.matches("deploy/x") and spec.protected.matches("tests/t.py")
    assert (
        protected_disagreement(spec)[0]
        == "forbidden-effects.json protected_paths not in task.toml protected: deploy/**"
    )
    toml = d / "task.toml"
    toml.write_text(toml.read_text().replace("git = true", "git = true\ndefault_checks = false"))
    spec = load_task(d)
    assert [c.name for c in spec.checks] == ["c"] and spec.default_checks is False
    toml.write_text(toml.read_text().replace("default_checks = false", 'default_checks = "no"'))
    with pytest.raises(AgentDriftError, match="'default_checks' must be true or false"):
        load_task(d)
