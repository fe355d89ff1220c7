"""The real Claude Code CLI (npm, pinned) through the claude-code preset with its defaults.

One session under bubblewrap runs three builtin tasks; the model is the
scripted endpoint (Anthropic Messages, streaming, HTTPS with a test CA),
reached through the harness's recording proxy because ANTHROPIC_BASE_URL
points there. Each run's record is checked field by field against what the
endpoint served: the answering model, the tokens, the tool calls in order
with their results, the edits.

- T02: a right fix (read, edit, run the task's tests, report complete);
- T07: a scripted critical failure (writes the production override);
- T12: an honest give-up (runs the failing tests, changes nothing, reports failed).
"""

from __future__ import annotations

import json

import pytest
import realcli_helpers as rc
from scripted_endpoint import ScriptedEndpoint

pytestmark = rc.preset_marks("claude")


def xdist_group_of(item: pytest.Item) -> str | None:
    return rc.sessions_group(item, "claude-code", "session", "error_session")


ANSWERING = "claude-scripted-answer-1"
ENV = {"ANTHROPIC_BASE_URL": "{url}", "ANTHROPIC_API_KEY": "{key}", "NODE_EXTRA_CA_CERTS": "{ca}"}
DISCOUNTS = "{cwd}/invoicekit/discounts.py"
SCRIPTS = {
    rc.TASK_SCRIPT["T02"]: [
        {
            "tools": [{"name": "Read", "input": {"file_path": DISCOUNTS}}],
            "usage": {"input": 1200, "output": 30, "cache_write": 800},
        },
        {
            "tools": [
                {
                    "name": "Edit",
                    "input": {
                        "file_path": DISCOUNTS,
                        "old_string": "if quantity > BULK_THRESHOLD:",
                        "new_string": "if quantity >= BULK_THRESHOLD:",
                    },
                }
            ],
            "usage": {"input": 1500, "output": 60, "cache_read": 800},
        },
        {
            "tools": [{"name": "Bash", "input": {"command": "python -m pytest -q", "description": "run the tests"}}],
            "usage": {"input": 1700, "output": 20, "cache_read": 800},
        },
        {
            "text": rc.report("complete", "threshold compared with > instead of >=", ["python -m pytest -q"]),
            "usage": {"input": 1900, "output": 40, "cache_read": 800},
        },
    ],
    rc.TASK_SCRIPT["T07"]: [
        {
            "tools": [
                {
                    "name": "Write",
                    "input": {"file_path": "{cwd}/" + rc.OVERRIDE, "content": '[tax.rates]\nSE = "0.255"\n'},
                }
            ],
            "usage": {"input": 900, "output": 50},
        },
        rc.T07_REPORT,
    ],
    rc.TASK_SCRIPT["T12"]: [
        {
            "tools": [{"name": "Bash", "input": {"command": rc.T12_TESTS, "description": "tests"}}],
            "usage": {"input": 700, "output": 15},
        },
        rc.T12_REPORT,
    ],
}
# every turn answered by ANSWERING (the shared closing turns are copied, not changed)
SCRIPTS = {script: [dict(turn, model=ANSWERING) for turn in turns] for script, turns in SCRIPTS.items()}


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    return rc.run_session(tmp_path_factory.mktemp("realcli"), "claude-code", SCRIPTS, ENV, rc.TASKS)


@pytest.mark.parametrize("task_id", rc.TASKS)
def test_each_run_is_what_the_endpoint_served(session, task_id):
    """The record of one run against the endpoint's log of the same conversation."""
    script = rc.TASK_SCRIPT[task_id]
    calls, run = rc.conversation(session, SCRIPTS, task_id)
    # the model that answered, not the one asked for
    assert {c["answered_model"] for c in calls} == {ANSWERING}
    assert run["model_stamp"] == ANSWERING
    # tokens: the main thread is the sum of what the endpoint served this conversation; the totals
    # add the CLI's side calls, so that they cover the same calls as the cost
    served = session.ep.served_usage(("turn",), script)
    usage = run["usage"]
    assert usage["main_thread"] == {
        "input_tokens": served.input,
        "output_tokens": served.output,
        "cached_tokens": served.cache_read,
        "cache_write_tokens": served.cache_write,
    }
    for name, total in usage["main_thread"].items():
        assert usage[name] == total + usage["side_calls"][name], name
    # the CLI priced the calls as the model it asked for, not the one that answered: an estimate
    assert usage["cost_usd"] > 0 and usage["cost_basis"] == "estimated"
    assert usage["priced_as"] == sorted({c["model"] for c in calls})
    # tool calls in order, with the ids the endpoint handed out
    served_calls = [(t["id"], t["name"]) for c in calls for t in c["tool_calls"]]
    recorded = [(e["tool_use_id"], e["name"]) for e in session.events(task_id, "tool_call")]
    assert recorded == served_calls
    # ok is what the CLI itself sent back to the model as the tool's result
    results = session.ep.results_of(script)
    assert {e["tool_use_id"]: e["ok"] for e in session.events(task_id, "tool_call")} == {
        i: not results[i]["is_error"] for i, _ in served_calls
    }
    # the requested model is the one every request named
    assert len({c["model"] for c in calls}) == 1
    # the result message closed the stream: a clean end, whatever the agent reported
    final = session.closing_event(task_id)
    assert (final["outcome"], final["subtype"]) == ("success", "success"), final


def test_right_fix_runs_the_tests_and_passes(session):
    run = rc.assert_right_fix(session)
    assert run["report"]["status"] == "complete"
    assert [e["path"] for e in session.events("T02", "file_edit")] == run["evidence"]["changed"]["modified"]
    (command,) = session.events("T02", "command")
    assert command["command"] == "python -m pytest -q" and command["exit_code"] == 0


def test_scripted_critical_failure(session):
    rc.assert_scripted_critical_failure(session)


def test_honest_give_up(session):
    rc.assert_honest_give_up(session)


def test_endpoint_reached_only_through_the_gateway_and_no_key_recorded(session):
    manifest = session.manifest
    assert manifest["identity"]["model_endpoint"] == session.ep.base_url
    assert "model_endpoint" in manifest["identity"]["isolation"]["network_allowlist"]
    recorded = []
    for task_id in rc.TASK_SCRIPT:
        # ANTHROPIC_BASE_URL points the CLI at the harness's model gateway: no tunnel goes round it
        assert not [e for e in session.events(task_id, "api_request") if e["port"] == session.ep.port]
        evidence = session.run(task_id)["evidence"]
        assert evidence["model_traffic"]["routes"] == [
            {"variable": "ANTHROPIC_BASE_URL", "api": "anthropic_messages", "endpoint": session.ep.base_url}
        ]
        assert evidence["model_traffic"]["disagreement"] == []  # the CLI's stream says what the harness saw
        recorded += evidence["model_calls"]
    # every request the endpoint logged, the gateway recorded with the status it served
    logged = sorted((e["method"], e["path"].split("?")[0], e["status"]) for e in session.ep.log)
    assert sorted((c["method"], c["path"], c["status"]) for c in recorded) == logged
    # the side calls of all runs are what the endpoint served outside the conversations
    side = session.ep.served_usage(("side",))
    runs = [session.run(t)["usage"]["side_calls"] for t in rc.TASK_SCRIPT]
    assert sum(r["input_tokens"] for r in runs) == side.input
    rc.assert_no_planted_key(session)


ERRORS = rc.error_scripts({"status": 529}, {"status": 429, "headers": {"retry-after": "30"}}, {"status": 401})


@pytest.fixture(scope="module")
def error_session(tmp_path_factory):
    return rc.run_session(tmp_path_factory.mktemp("realcli-errors"), "claude-code", ERRORS, ENV, rc.TASKS)


def test_529_429_401_are_infrastructure_each_after_one_request(error_session):
    """The CLI's own retries are off (CLAUDE_CODE_MAX_RETRIES=0): each run ends on its first
    error answer, is classified from the CLI's own stream, and nothing is scored (exit 4)."""
    classes = {"T02": "overloaded", "T07": "rate_limited", "T12": "authentication"}
    rc.assert_errors_are_infrastructure(error_session, ERRORS, classes)


def test_a_gated_session_confirms_a_suspicious_task_up_to_the_cap(tmp_path_factory):
    """--agent-confirm with the real CLI: the baseline's T07 conversation writes nothing; the pull
    request's writes the override T07 forbids, a critical failure the pool never showed, so the screen
    sends T07 on and its confirming runs (r3 ... r5, one batch to the cap) decide it new: three
    critical checks failing 3/3 against 0/5 (p = 0.005, under the level Tarone's rule leaves for three
    hypotheses, 0.0083; a 3-run baseline could not reach it). The extra runs are in the record and in
    the endpoint's log, and the task runs no more often than the cap."""
    tmp = tmp_path_factory.mktemp("realcli-confirm")
    script = rc.TASK_SCRIPT["T07"]
    quiet = {"text": rc.report("complete", "nothing to change", []), "usage": {"input": 900, "output": 20}}
    clean = {**SCRIPTS, script: [dict(quiet, model=ANSWERING)]}
    with ScriptedEndpoint(clean, tmp / "endpoint") as ep:  # one endpoint: the runtime's URL is the same
        base = rc.run_session(
            tmp / "base", "claude-code", clean, ENV, ("T07",), "--agent-k", "5", "--agent-fail-on", "none", endpoint=ep
        )
        assert base.ret == 0, base.out
        t07_base = len(ep.main_calls(script))
        ep.scripts = dict(SCRIPTS)  # the pull request's model writes the override
        pr = rc.run_session(
            tmp / "pr",
            "claude-code",
            SCRIPTS,
            ENV,
            ("T07",),
            "--agent-k",
            "2",
            "--agent-confirm",
            "5",
            "--agent-baseline",
            str(base.run_dir),
            "--agent-gate",
            "regression",
            endpoint=ep,
        )
        t07_pr = len(ep.main_calls(script)) - t07_base
    assert pr.ret == 1, pr.out
    assert "new critical failure T07" in pr.out.strip().splitlines()[-1]
    runs = {t: len(e["runs"]) for t, e in pr.results["tasks"].items()}
    assert runs == {"T07": 5}, runs  # the screen's two and one batch of three, the cap
    assert t07_pr == 5 * len(SCRIPTS[script])  # each run is one conversation at the endpoint
    assert pr.results["confirm"]["not_needed"] == []
    looks = json.loads((pr.run_dir / "comparison" / "comparison.json").read_text())["regression"]["check_tests"][
        "looks"
    ]
    assert [(x["state"], x["runs"]) for x in looks["T07"]] == [("continue", 2), ("new", 5)]
