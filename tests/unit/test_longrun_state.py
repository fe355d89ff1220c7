"""Long-run state without pytest sessions: the infrastructure stop rule, the xdist handover, shard and
resume selection, the STOP file shared by processes, retries, the results facts and closing lines, and
resume acceptance."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import results_doc

from pytest_agentdrift.agents.infra import SAME_INFRA_STREAK, InfraStopRule, infra_error
from pytest_agentdrift.options import Settings
from pytest_agentdrift.record.longrun import STOP_FILE, LongRun, WorkerInput
from pytest_agentdrift.record.resume import ResumeState, continue_record, read_state, resume_refusal, state_document
from pytest_agentdrift.record.store import INCOMPLETE_MARKER
from pytest_agentdrift.vocabulary import INFRA_OUTCOME


def lost(cls: str, evidence: str = "API Error: 529") -> dict:
    return {"outcome": INFRA_OUTCOME, "infra_error": infra_error(cls, evidence, "claude-code")}


PASSED = {"outcome": "passed"}


# -- the infrastructure stop rule ----------------------------------------------------------
def test_an_error_that_will_repeat_stops_at_once():
    rule = InfraStopRule()
    reason = rule.observe("T01/r1", lost("authentication", "Invalid API key"))
    assert reason is not None and "will repeat on every run ended T01/r1" in reason
    assert "Invalid API key" in reason


def test_the_same_transient_error_stops_only_after_the_streak():
    rule = InfraStopRule()
    reasons = [rule.observe(f"T01/r{i}", lost("overloaded")) for i in range(1, SAME_INFRA_STREAK + 1)]
    assert reasons[:-1] == [None] * (SAME_INFRA_STREAK - 1)
    assert f"ended {SAME_INFRA_STREAK} runs in a row" in reasons[-1]


def test_a_scored_run_or_other_evidence_breaks_the_streak():
    rule = InfraStopRule()
    for _ in range(SAME_INFRA_STREAK - 1):
        assert rule.observe("T01/r1", lost("overloaded")) is None
    assert rule.observe("T02/r1", PASSED) is None
    for _ in range(SAME_INFRA_STREAK - 1):
        assert rule.observe("T01/r1", lost("overloaded")) is None
    assert rule.observe("T01/r1", lost("overloaded", "HTTP 529 from another line")) is None
    # an outcome that is not infra_error never counts, whatever its infra_error field says
    assert rule.observe("T03/r1", {"outcome": "failed", "infra_error": lost("billing")["infra_error"]}) is None


# -- the xdist handover --------------------------------------------------------------------
def test_worker_input_survives_xdists_plain_dict():
    handed = WorkerInput(
        run_id="20260101T000000Z-abcd",
        started_at="2026-01-01T00:00:00Z",
        manifest={"runtime_id": "sha256:x"},
        control_dir="/tmp/ctl",
        shard={"index": 2, "count": 4, "source": "--agent-shard"},
        resume_skip=("T02/r1", "T01/r1"),
        resume_only=("T01/r1", "T02/r1", "T03/r1"),
    )
    plain = json.loads(json.dumps(handed.to_dict()))  # what execnet carries: builtins only
    assert all(key.startswith("agentdrift_") for key in plain)
    back = WorkerInput.from_dict({**plain, "workerid": "gw3"})
    assert back == WorkerInput(**{**handed.__dict__, "resume_skip": ("T01/r1", "T02/r1"), "worker_id": "gw3"})


def test_a_worker_the_controller_sent_nothing_keeps_the_defaults():
    handed = WorkerInput.from_dict({"workerid": "gw0"})
    assert (handed.run_id, handed.manifest, handed.control_dir, handed.shard) == (None, None, None, None)
    assert handed.resume_only is None and handed.resume_skip == ()
    lr = LongRun(SimpleNamespace(settings=Settings()), handed)
    assert lr.worker_id == "gw0" and lr.control_dir is None and lr.shard is None
    assert lr.keep("T01", 1)


def longrun(tmp_path: Path | None = None, **settings) -> LongRun:
    lr = LongRun(SimpleNamespace(settings=Settings(**settings)))
    if tmp_path is not None:
        lr.control_dir = tmp_path
    return lr


def test_resume_and_shard_decide_which_items_a_worker_runs():
    handed = WorkerInput(
        shard={"index": 1, "count": 2, "source": "--agent-shard"},
        resume_skip=("T01/r1",),
        resume_only=("T01/r1", "T01/r2", "T02/r1", "T02/r2"),
    )
    lr = LongRun(SimpleNamespace(settings=Settings()), handed)
    keys = [("T01", 1), ("T01", 2), ("T02", 1), ("T02", 2), ("T03", 1)]
    lr.deal(keys)
    kept = [k for k in keys if lr.keep(*k)]
    assert ("T01", 1) not in kept and ("T03", 1) not in kept  # finished, and not in the resumed record
    other = LongRun(SimpleNamespace(settings=Settings()), WorkerInput(shard={"index": 2, "count": 2, "source": "x"}))
    other.deal(keys)
    # the two shards split the items between them, each item once
    assert {k for k in keys if other.keep(*k)} | {k for k in keys if lr._dealt.get(k) == 1} == set(keys)
    assert not {k for k in keys if other.keep(*k)} & {k for k in keys if lr._dealt.get(k) == 1}


# -- stopping, across processes ------------------------------------------------------------
def test_a_stop_decided_by_the_controller_reaches_every_worker_through_the_control_dir(tmp_path):
    controller = longrun(tmp_path)
    worker = LongRun(SimpleNamespace(settings=Settings()), WorkerInput(control_dir=str(tmp_path), worker_id="gw1"))
    assert worker.stop_requested() is None
    controller.on_payload({"task_id": "T01", "rep": 1, "result": lost("billing", "credit balance too low")}, "n1")
    assert controller.stop_reason and "credit balance too low" in controller.stop_reason
    assert (tmp_path / STOP_FILE).read_text().strip() == controller.stop_reason
    assert worker.stop_requested() == controller.stop_reason
    controller.request_stop("a second reason")  # the first reason stands
    assert worker.stop_requested() == controller.stop_reason


def test_a_spent_session_budget_stops_the_session():
    lr = longrun(budget=("tokens=100",))
    result = {"outcome": "passed", "spend": {"tokens": 150, "cost_usd": None}}
    lr.on_payload({"task_id": "T01", "rep": 1, "result": result}, "n1")
    assert lr.stop_reason is not None and lr.stop_requested() == lr.stop_reason


def test_run_item_retries_a_run_lost_to_infrastructure_and_times_it():
    lr = longrun(retries=2, retry_backoff=0.0)
    outcomes = [lost("overloaded"), {"outcome": "passed"}]

    def once():
        result = {**outcomes.pop(0), "raw": "raw/T01/r1", "evidence": {"duration_s": 1.5}}
        return {"task_id": "T01", "rep": 1, "result": result}

    payload = lr.run_item(once, "T01", 1, timeout_s=60)
    assert payload["result"]["outcome"] == "passed"
    assert [a["outcome"] for a in payload["result"]["attempts"]] == [INFRA_OUTCOME, "passed"]
    assert payload["timing"]["attempts"] == 2 and payload["timing"]["agent_s"] == 3.0


# -- the end of the session ----------------------------------------------------------------
def collector(expected=(), received=(), interrupted=None):
    started = []
    rec = SimpleNamespace(started=False)
    return SimpleNamespace(
        expected_nodeids=set(expected),
        received_nodeids=set(received),
        interrupted=interrupted,
        recorder=rec,
        start_record=lambda: started.append(True),
        started=started,
    )


def results(reasons=()):
    # completeness is the long run's to decide: nothing decided it yet
    return results_doc({}, complete=None, incomplete_reasons=list(reasons), summary={"tokens": None, "cost_usd": None})


def test_a_stopped_session_is_incomplete_and_says_how_to_continue(tmp_path):
    lr = longrun(tmp_path)
    lr.request_stop("the same infrastructure error ended 3 runs in a row")
    doc = results()
    lr.complete_results(doc, collector(expected={"a::r1"}, received={"a::r1"}))
    assert doc["complete"] is False
    assert doc["incomplete_reasons"] == ["stopped starting runs: the same infrastructure error ended 3 runs in a row"]
    lines = lr.final_lines(doc, Path("runs/x"))
    assert lines[-1] == (
        "ERROR: stopped starting runs: the same infrastructure error ended 3 runs in a row; "
        "the record is incomplete: continue it with --agent-resume runs/x"
    )


def test_an_empty_shard_is_a_complete_empty_record_and_starts_it():
    lr = LongRun(SimpleNamespace(settings=Settings()), WorkerInput(shard={"index": 3, "count": 4, "source": "x"}))
    c = collector()
    doc = results(["no task was run"])
    lr.complete_results(doc, c)
    assert doc["complete"] is True and doc["shard"]["selected"] == 0
    assert c.started == [True]


def test_a_budget_is_recorded_with_what_was_spent():
    lr = longrun(budget=("tokens=1000",))
    lr.on_payload({"task_id": "T01", "rep": 1, "result": {"outcome": "passed", "spend": {"tokens": 10}}}, "n1")
    doc = results()
    lr.complete_results(doc, collector(expected={"n1"}, received={"n1"}))
    assert doc["budget"]["spent"]["tokens"] == 10 and doc["complete"] is True
    assert "of 1,000 tokens" in lr.final_lines(doc, None)[0]


# -- resume acceptance (record/resume.py) --------------------------------------------------
SETTINGS = {"k": 2, "fail_on": "any"}


def resume_state(path: Path, shard=None) -> ResumeState:
    state = state_document(
        run_id="r", started_at="s", expected=["T01/r1", "T01/r2"], settings=SETTINGS, shard=shard, note="n"
    )
    (path / INCOMPLETE_MARKER).write_text(json.dumps(state))
    return ResumeState(path=path, state=state, manifest={})


def test_a_session_with_the_recorded_settings_and_runtime_may_resume(tmp_path):
    assert resume_refusal(resume_state(tmp_path), [], dict(SETTINGS), None) is None


def test_resume_refuses_other_settings_another_shard_or_runtime(tmp_path):
    res = resume_state(tmp_path, shard={"index": 1, "count": 2, "source": "--agent-shard"})
    lines = resume_refusal(res, ["BLOCK model_id: a != b"], {**SETTINGS, "k": 3}, {"index": 2, "count": 2})
    assert lines[0] == f"agentdrift: cannot resume {tmp_path}: this session is not the recorded run"
    assert lines[1:] == ["BLOCK model_id: a != b", "BLOCK settings.k: 2 != 3", "BLOCK shard: 1/2 != 2/2"]


def test_continuing_a_record_notes_the_resume_and_clears_unfinished_runs(tmp_path):
    res = resume_state(tmp_path)
    res.kept = {"T01/r1": {"task_id": "T01", "rep": 1, "meta": {}, "result": {"outcome": "passed"}}}
    res.infra_lost = {"T01/r2": {"result": lost("overloaded")}}
    partial = tmp_path / "raw" / "T01" / "r2"
    partial.mkdir(parents=True)
    (partial / "stdout.txt").write_text("half")
    recorder = continue_record(res, at="2026-01-02T00:00:00Z", argv=["--agent-resume", str(tmp_path)])
    assert recorder.started and not partial.exists()
    (note,) = read_state(tmp_path)["resumed"]
    assert note["kept_runs"] == 1 and note["pytest_argv"] == ["--agent-resume", str(tmp_path)]
    assert note["rerun_infra_errors"] == ["T01/r2: overloaded (claude-code): API Error: 529"]


@pytest.mark.parametrize("count", [0, 1])
def test_progress_counts_include_the_runs_a_resume_kept(tmp_path, count):
    lr = longrun()
    lr.resume = resume_state(tmp_path)
    lr.resume.kept = {f"T01/r{i}": {} for i in range(1, count + 1)}
    assert lr.progress_counts(received=1, expected=1) == (1 + count, 1 + count, None)
