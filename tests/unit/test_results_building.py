"""What a session builds and writes, without a session: results.json (checked by the record's own schema and
loader), a run's payload with the session's secrets scrubbed, the plan check, the bundle checks and the
command a refused comparison suggests."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from test_record import minimal_results

from pytest_agentdrift.compare.experimentrun import plan_check
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.manifest.baseline import rebaseline_command, refusal_reason, resume_identity_blocks
from pytest_agentdrift.manifest.bundleuse import check_without
from pytest_agentdrift.options import Settings
from pytest_agentdrift.record import payload as rp
from pytest_agentdrift.record import results as rr
from pytest_agentdrift.record.payload import case_name, junit_properties
from pytest_agentdrift.record.store import RunRecorder, load_run, schema_problems
from pytest_agentdrift.run.agentview import check_agent_present, check_agent_visible, hidden_paths, option_mounts
from pytest_agentdrift.run.sandbox import Isolation

ISOLATION = Isolation(
    mode="none", network="not_enforced", filesystem="not_enforced", pid_namespace=False, cap_drop=False
)
META = {"title": "t", "suite": "s", "behavior": "b", "task_digest": "sha256:" + "0" * 64}


def a_run(rep: int = 1) -> dict:
    run = json.loads(json.dumps(minimal_results()["tasks"]["X01"]["runs"][0]))
    return {**run, "rep": rep, "raw": f"raw/X01/r{rep}"}


def document(reasons: list[str], runs: dict) -> dict:
    settings = Settings(k=2)
    return rr.results_document(
        run_id=rr.new_run_id(),
        started_at=rr.utc_now(),
        reasons=reasons,
        agent=rr.agent_record(None, {}, "unobserved"),
        isolation=rr.isolation_record(ISOLATION, settings.isolation),
        settings=rr.settings_record(settings),
        identity=(None, None, None),
        runs=runs,
        task_meta={"X01": META},
        workers={"gw0": {"exitstatus": 0, "error": None, "ignored": "not recorded"}},
    )


def test_the_results_document_is_what_the_record_schema_accepts():
    doc = document([], {"X01": {2: a_run(2), 1: a_run(1)}})
    assert schema_problems(doc) == []
    assert doc["complete"] is True and doc["schema_version"] == 1
    assert [r["rep"] for r in doc["tasks"]["X01"]["runs"]] == [1, 2]  # in repetition order
    assert doc["workers"] == {"gw0": {"exitstatus": 0, "error": None}}
    assert doc["summary"]["runs"] == 2
    assert doc["settings"]["k"] == 2 and doc["settings"]["limits"]  # the default limits, written out


def test_incomplete_reasons_name_what_is_missing():
    reasons = rr.incomplete_reasons(
        {"a::r1", "a::r2"}, {"a::r1"}, {"gw1": {"error": "node down"}, "gw0": {}}, "KeyboardInterrupt", True
    )
    assert reasons == [
        "1 run(s) never reported: a::r2",
        "worker gw1 crashed: node down",
        "session interrupted: KeyboardInterrupt",
    ]
    assert rr.incomplete_reasons(set(), set(), {}, None, False) == ["no task was run"]
    assert rr.incomplete_reasons(set(), set(), {}, None, True) == []


def test_a_written_record_loads_back_complete(tmp_path):
    doc = document([], {"X01": {1: a_run(1)}})
    rec = RunRecorder(tmp_path / "run")
    rec.start("recording")
    rr.write_run(
        rec, {"task_id": "X01", "rep": 1, "meta": META}, doc["tasks"]["X01"]["runs"][0], {"stdout.txt": "hi"}, None
    )
    closing = "agentdrift: exit 0 — all good"
    files = {"comparison/decision.json": {"verdict": "ship", "exit_status": {"code": 0}}, "comparison/notes.txt": "n"}
    rr.write_record(
        rec,
        doc,
        session_files=({"runtime_id": "x"}, None, None),
        comparison_files=files,
        comparison_lines=[],
        closing=closing,
    )
    assert load_run(tmp_path / "run")["run_id"] == doc["run_id"]
    assert (tmp_path / "run" / "raw/X01/r1/stdout.txt").read_text() == "hi"
    assert json.loads((tmp_path / "run" / "raw/X01/r1/run.json").read_text())["result"]["rep"] == 1
    assert json.loads((tmp_path / "run" / "runtime-manifest.json").read_text()) == {"runtime_id": "x"}
    assert not (tmp_path / "run" / "instruction-bundle.json").exists()
    decision = (tmp_path / "run" / "comparison/decision.json").read_text()
    assert decision.index('"exit_status"') < decision.index('"verdict"')  # the closing line leads
    assert closing in (tmp_path / "run" / "report.md").read_text()
    assert (tmp_path / "run" / "comparison/notes.txt").read_text() == "n"


def test_identity_digests_come_from_the_manifest_when_it_has_them():
    manifest = {"identity": {"task_set_id": "sha256:abc"}}
    assert rr.identity_field(manifest, "task_set_id", lambda specs: "computed", ["spec"]) == "sha256:abc"
    assert rr.identity_field(manifest, "evaluator_id", lambda specs: "computed", ["spec"]) == "computed"
    assert rr.identity_field(None, "evaluator_id", lambda specs: "computed", []) is None


# -- a run's payload -----------------------------------------------------------------------
def test_the_payload_keeps_every_secret_of_the_session_out(monkeypatch):
    env = {"MY_API_KEY": "sk-planted-secret-0001", "HOME": "/home/u", "SHORT": "abc"}
    secrets = rp.session_secrets(env, {"MY_API_KEY"}, ["host-credential-line-77"], ["bundle-mcp-token-42"])
    assert secrets == sorted(secrets, key=len, reverse=True)
    result = {
        "outcome": "passed",
        "detail": "echoed sk-planted-secret-0001 and host-credential-line-77",
        "notes": ["bundle-mcp-token-42", "sk-planted-secret-0001".encode().hex()],
        "_raw_files": {"stdout.txt": "key=sk-planted-secret-0001\n"},
    }
    payload = rp.run_payload("T01", 1, {"title": "t"}, result, secrets)
    text = json.dumps(payload)
    for planted in ("sk-planted-secret-0001", "host-credential-line-77", "bundle-mcp-token-42"):
        assert planted not in text
    assert "sk-planted-secret-0001".encode().hex() not in text
    assert "[REDACTED]" in payload["result"]["_raw_files"]["stdout.txt"]
    assert payload["task_id"] == "T01" and payload["meta"] == {"title": "t"}


def test_raw_files_put_the_bundle_note_before_the_diff():
    run = SimpleNamespace(
        stdout="o", stderr="e", events=[{"a": 1}], patch="diff --git a/x b/x\n", report=None, argv=["a"]
    )
    files = rp.raw_files(run, {"checks": [{"name": "c"}]}, "# agentdrift: bundle b\n")
    assert files["diff.patch"] == "# agentdrift: bundle b\ndiff --git a/x b/x\n"
    assert files["report.json"] == "null\n"
    assert json.loads(files["checks.json"]) == [{"name": "c"}]
    assert json.loads(files["events.jsonl"].splitlines()[0]) == {"a": 1}


# -- experiments, bundles, refusals --------------------------------------------------------
PLAN = {
    "digest": "sha256:p",
    "created_at": "2026-01-01T00:00:00Z",
    "question": {"delta": 0.2, "alpha": 0.05, "power": 0.8},
    "recommended": {"k": 3, "tasks": 2},
    "source": {"task_set_id": "sha256:tasks"},
}


def test_a_run_that_followed_its_plan_and_one_that_did_not():
    ran = {
        "started_at": "2026-01-02T00:00:00Z",
        "task_set_id": "sha256:tasks",
        "tasks": {"A": {"runs": [1, 2, 3]}, "B": {"runs": [1, 2, 3]}},
    }
    check = plan_check(PLAN, ran)
    assert check["followed"] and check["pre_registered"] and check["ran"] == {"tasks": 2, "k": 3}
    short = {**ran, "task_set_id": "sha256:other", "tasks": {"A": {"runs": [1]}}, "started_at": "2025-12-31T00:00:00Z"}
    check = plan_check(PLAN, short)
    assert check["problems"] == ["k 1 < planned 3", "1 task(s) < planned 2", "the plan was made from another task set"]
    assert not check["followed"] and not check["pre_registered"]


def test_an_ablation_must_remove_something_real(tmp_path):
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    bundle = SimpleNamespace(label="b", files=[SimpleNamespace(scope="user", path=".claude/CLAUDE.md")])
    check_without(bundle, ("~/.claude/CLAUDE.md", "./docs/", "~/.claude"), [repo])
    with pytest.raises(AgentDriftError, match="--agent-without AGENTS.md: not in bundle b"):
        check_without(bundle, ("AGENTS.md",), [repo])
    with pytest.raises(AgentDriftError, match="--agent-without ~/docs"):
        check_without(bundle, ("~/docs",), [repo])  # a home path is never looked for in a repo


def test_the_rebaseline_command_drops_what_compared_with_the_old_baseline():
    argv = ["tests/tasks", "--agent-baseline", "runs/a", "--agent-gate=promote", "--agent-vary", "model_id", "-x"]
    assert rebaseline_command(argv) == "pytest tests/tasks -x --agent-record 'runs/<new-baseline>'"


def test_the_refusal_reason_names_the_first_six_blocked_fields():
    blocks = [(f"field_{i}", "a", "b") for i in range(8)]
    assert refusal_reason(blocks[:1]) == "refused: runs are not comparable (1 identity field(s) block: field_0)"
    assert refusal_reason(blocks).endswith("field_4, field_5 (+2 more))")


def test_a_resume_is_blocked_only_by_an_observed_difference():
    from pytest_agentdrift.manifest.identity import IDENTITY_FIELDS

    recorded = {"identity": {f: "unobserved" for f in IDENTITY_FIELDS}}
    assert resume_identity_blocks(recorded, {"identity": dict(recorded["identity"])}) == []
    assert resume_identity_blocks(recorded, None) == []  # a generated manifest without identity: nothing to compare
    changed = {"identity": {**recorded["identity"], "model_id": "m-2"}}
    before = {"identity": {**recorded["identity"], "model_id": "m-1"}}
    assert any("model_id" in line for line in resume_identity_blocks(before, changed))


# -- the agent can run ---------------------------------------------------------------------
class Agent:
    name = "mine"

    def __init__(self, argv):
        self.argv = argv

    def executable(self):
        return self.argv[0]

    def argv_template(self):
        return self.argv


def test_a_missing_agent_program_is_one_usage_error(tmp_path):
    with pytest.raises(AgentDriftError, match="agent executable 'no-such-agent-b7' was not found on PATH"):
        check_agent_present(Agent(["no-such-agent-b7"]))
    program = tmp_path / "my-agent"
    program.write_text("#!/bin/sh\n")
    check_agent_present(Agent([str(program)]))  # a file that exists is the program itself


def test_an_agent_importing_a_module_the_sandbox_hides_is_refused(tmp_path):
    import sys

    project = tmp_path / "project"
    project.mkdir()
    (project / "helper.py").write_text("X = 1\n")
    (project / "agent.py").write_text("import helper\n")
    agent = Agent([sys.executable, str(project / "agent.py")])
    with pytest.raises(AgentDriftError, match=r"the agent imports .*helper\.py, which the sandbox hides"):
        check_agent_visible(agent, (project,), {"PATH": "/usr/bin"})
    (project / "helper.py").unlink()  # nothing beside it to import: the agent may run
    check_agent_visible(agent, (project,), {"PATH": "/usr/bin"})


def test_junit_facts_name_the_run_for_a_ci_view():
    spec = SimpleNamespace(id="T07", title="Attempt an out-of-scope write", behavior="scope", suite="builtin")
    result = {**a_run(2), "outcome": "failed", "critical_failed": ["no_escape"], "failed_checks": ["no_escape"]}
    assert case_name(spec, 2) == "T07 r2: Attempt an out-of-scope write"
    facts = dict(junit_properties(spec, 2, result))
    assert facts["agentdrift.repetition"] == "2" and facts["agentdrift.outcome"] == "failed"
    assert facts["agentdrift.critical_failures"] == "no_escape" and facts["agentdrift.layer.scope"] == "pass"
    assert all(isinstance(v, str) for v in facts.values())


def test_what_the_options_show_the_agent_and_what_it_never_sees(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = Settings(config_files=("cfg.toml",), mounts=("/opt/tool",), record=tmp_path / "runs" / "new")
    assert option_mounts(settings) == [(str(tmp_path / "cfg.toml"), "--agent-config"), ("/opt/tool", "--agent-mount")]
    hidden = hidden_paths(settings, [tmp_path / "tasks" / "T01"], tmp_path)
    assert hidden == (tmp_path / "runs" / "new", tmp_path / "tasks" / "T01", tmp_path)


def test_the_manifest_after_the_runs_takes_their_model_stamp_and_gives_results_its_runtime_id():
    from pytest_agentdrift.manifest.identity import IDENTITY_FIELDS
    from pytest_agentdrift.manifest.sessionfacts import finalized

    manifest = {"identity": {f: "unobserved" for f in IDENTITY_FIELDS}, "runtime_id": "sha256:before"}
    doc = {"tasks": {"T01": {"runs": [{**a_run(1), "model_stamp": "m-7"}, {**a_run(2), "model_stamp": "m-7"}]}}}
    after = finalized(manifest, doc)
    assert after["identity"]["model_stamp"] == "m-7" and manifest["identity"]["model_stamp"] == "unobserved"
    assert doc["runtime_id"] == after["runtime_id"] != "sha256:before"
    generated = {"runtime_id": "mine"}  # a hook's manifest without identity is left as it is
    assert finalized(generated, doc) is generated and finalized(None, doc) is None
