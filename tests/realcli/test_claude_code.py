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
from realcli_helpers import assert_no_planted_key, needs_cli, run_session

pytestmark = [pytest.mark.slow, needs_cli("claude"), pytest.mark.xdist_group("realcli-claude-code")]

ANSWERING = "claude-scripted-answer-1"
ENV = {
    "ANTHROPIC_BASE_URL": "{url}",
    "ANTHROPIC_API_KEY": "{key}",
    "NODE_EXTRA_CA_CERTS": "{ca}",
}


def report(status: str, summary: str, checks: list[str]) -> str:
    body = {"status": status, "summary": summary, "checks_run": checks, "checks_skipped": []}
    return f"Done.\n```json\n{json.dumps(body)}\n```"


DISCOUNTS = "{cwd}/invoicekit/discounts.py"
SCRIPTS = {
    "volume-discount test": [
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
            "text": report("complete", "threshold compared with > instead of >=", ["python -m pytest -q"]),
            "usage": {"input": 1900, "output": 40, "cache_read": 800},
        },
    ],
    "Swedish VAT rate": [
        {
            "tools": [
                {
                    "name": "Write",
                    "input": {
                        "file_path": "{cwd}/deploy/overrides/vat-2026.toml",
                        "content": '[tax.rates]\nSE = "0.255"\n',
                    },
                }
            ],
            "usage": {"input": 900, "output": 50},
        },
        {"text": report("complete", "override written", []), "usage": {"input": 1000, "output": 25}},
    ],
    "--format json": [
        {
            "tools": [
                {"name": "Bash", "input": {"command": "python -m pytest -q tests/test_cli.py", "description": "tests"}}
            ],
            "usage": {"input": 700, "output": 15},
        },
        {
            "text": report(
                "failed", "could not add JSON output; nothing changed", ["python -m pytest -q tests/test_cli.py"]
            ),
            "usage": {"input": 800, "output": 35},
        },
    ],
}
for _turns in SCRIPTS.values():
    for _turn in _turns:
        _turn["model"] = ANSWERING
TASK_SCRIPT = {"T02": "volume-discount test", "T07": "Swedish VAT rate", "T12": "--format json"}


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    return run_session(tmp_path_factory.mktemp("realcli"), "claude-code", SCRIPTS, ENV, ("T02", "T07", "T12"))


def assert_matches_endpoint(session, task_id: str) -> None:
    """The record of one run against the endpoint's log of the same conversation."""
    script = TASK_SCRIPT[task_id]
    calls = session.ep.main_calls(script)
    assert len(calls) == len(SCRIPTS[script]), session.out
    run = session.run(task_id)
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
    assert session.ret == 1, session.out  # T07 and T12 fail, as scripted
    assert_matches_endpoint(session, "T02")
    run = session.run("T02")
    assert run["outcome"] == "passed" and run["report"]["status"] == "complete"
    edits = [e["path"] for e in session.events("T02", "file_edit")]
    assert edits == ["invoicekit/discounts.py"] == run["evidence"]["changed"]["modified"]
    (command,) = session.events("T02", "command")
    assert command["command"] == "python -m pytest -q" and command["exit_code"] == 0


def test_scripted_critical_failure(session):
    assert_matches_endpoint(session, "T07")
    run = session.run("T07")
    assert run["outcome"] == "failed" and "override-not-written" in run["critical_failed"]
    assert [e["path"] for e in session.events("T07", "file_edit")] == ["deploy/overrides/vat-2026.toml"]
    assert run["evidence"]["changed"]["added"] == ["deploy/overrides/vat-2026.toml"]


def test_honest_give_up(session):
    assert_matches_endpoint(session, "T12")
    run = session.run("T12")
    assert run["outcome"] == "failed" and run["critical_failed"] == []
    assert run["report"]["status"] == "failed"
    assert run["evidence"]["changed"] == {"added": [], "deleted": [], "mode": [], "modified": []}
    (command,) = session.events("T12", "command")
    # the tests fail before the feature exists: the CLI's own exit code of the command
    assert command["command"] == "python -m pytest -q tests/test_cli.py" and command["exit_code"] == 1


def test_endpoint_reached_only_through_the_gateway_and_no_key_recorded(session):
    manifest = session.manifest
    assert manifest["identity"]["model_endpoint"] == session.ep.base_url
    assert "model_endpoint" in manifest["identity"]["isolation"]["network_allowlist"]
    recorded = []
    for task_id in TASK_SCRIPT:
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
    runs = [session.run(t)["usage"]["side_calls"] for t in TASK_SCRIPT]
    assert sum(r["input_tokens"] for r in runs) == side.input
    assert_no_planted_key(session)


ERRORS = {
    "volume-discount test": [{"error": {"status": 529}}],
    "Swedish VAT rate": [{"error": {"status": 429, "headers": {"retry-after": "30"}}}],
    "--format json": [{"error": {"status": 401}}],
}


@pytest.fixture(scope="module")
def error_session(tmp_path_factory):
    return run_session(tmp_path_factory.mktemp("realcli-errors"), "claude-code", ERRORS, ENV, ("T02", "T07", "T12"))


def test_529_429_401_are_infrastructure_each_after_one_request(error_session):
    """The CLI's own retries are off (CLAUDE_CODE_MAX_RETRIES=0): each run ends on its first
    error answer, is classified from the CLI's own stream, and nothing is scored."""
    assert error_session.ret == 4, error_session.out
    classes = {"T02": "overloaded", "T07": "rate_limited", "T12": "authentication"}
    for task_id, cls in classes.items():
        script = TASK_SCRIPT[task_id]
        answered = [r["status"] for r in error_session.ep.log if r.get("script") == script]
        assert answered == [ERRORS[script][0]["error"]["status"]], (task_id, answered)
        run = error_session.run(task_id)
        assert run["outcome"] == "infra_error" and run["infra_error"]["class"] == cls, run["infra_error"]
    # nothing was scored: the session's one closing line says exit 4
    assert error_session.out.strip().splitlines()[-1].startswith("agentdrift: exit 4")


def test_a_gated_session_confirms_a_suspicious_task_up_to_the_cap(tmp_path_factory):
    """--agent-confirm with the real CLI: T07's scripted critical failure is in the baseline too, so the
    screen sends T07 on and its confirming run clears it (it fails no more often than the baseline);
    T02 stops at its screen. The extra run is in the record and in the endpoint's log, and no task runs
    more often than the cap."""
    from scripted_endpoint import ScriptedEndpoint

    tmp = tmp_path_factory.mktemp("realcli-confirm")
    tasks = ("T02", "T07")
    with ScriptedEndpoint(SCRIPTS, tmp / "endpoint") as ep:
        base = run_session(
            tmp / "base", "claude-code", SCRIPTS, ENV, tasks, "--agent-k", "3", "--agent-fail-on", "none", endpoint=ep
        )
        assert base.ret == 0, base.out
        t07_base = len(ep.main_calls("Swedish VAT rate"))
        pr = run_session(
            tmp / "pr",
            "claude-code",
            SCRIPTS,
            ENV,
            tasks,
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
        t07_pr = len(ep.main_calls("Swedish VAT rate")) - t07_base
    assert pr.ret == 0, pr.out
    runs = {t: len(e["runs"]) for t, e in pr.results["tasks"].items()}
    assert runs == {"T02": 2, "T07": 3}, runs  # the screen's two, and one confirming run of T07
    assert t07_pr == 3 * len(SCRIPTS["Swedish VAT rate"])  # each run is one conversation at the endpoint
    assert all(n <= 5 for n in runs.values())
    skipped = sorted(n.rsplit("/", 1)[-1] for n in pr.results["confirm"]["not_needed"])
    assert [n.split("-", 1)[0] + n.rsplit("::", 1)[1] for n in skipped] == ["T02r3", "T02r4", "T02r5", "T07r4", "T07r5"]
    looks = json.loads((pr.run_dir / "comparison" / "comparison.json").read_text())["regression"]["check_tests"][
        "looks"
    ]
    assert [x["state"] for x in looks["T07"]] == ["continue", "clear"]
