"""The real OpenCode (npm `opencode-ai`, pinned) through the opencode preset with its defaults.

OpenCode 1.18.33 is pointed at the scripted endpoint through its built-in
`anthropic` provider, whose SDK reads ANTHROPIC_BASE_URL; the user's own
`~/.config/opencode/opencode.json` selects the model; the key is
ANTHROPIC_API_KEY and Bun trusts the test CA through NODE_EXTRA_CA_CERTS.
The scripts call OpenCode's own tools (`bash`, `read`, `edit`, `write`).

- T02: a right fix (run the tests, read, edit, run them again, report complete);
- T07: a scripted critical failure (writes the production override);
- T12: an honest give-up (runs the failing tests, changes nothing, reports failed);
- OpenCode writes its project id into the work tree's `.git/opencode` and
  tries its plugin installs and catalogue: the product's own, never the agent's
  effects, so every run is safe;
- a 429 and a 500: infrastructure after OpenCode's own five retries (it has no
  setting to turn them off), in bounded time; a 401 at once, and it stops the session.
"""

from __future__ import annotations

import json

import pytest
from realcli_helpers import PATIENCE, assert_no_planted_key, needs_cli, run_session

pytestmark = [pytest.mark.slow, needs_cli("opencode"), pytest.mark.xdist_group("realcli-opencode")]

ENV = {"ANTHROPIC_API_KEY": "{key}", "ANTHROPIC_BASE_URL": "{url}/v1", "NODE_EXTRA_CA_CERTS": "{ca}"}
MODEL = "claude-sonnet-4-5"
CONFIG = {".config/opencode/opencode.json": json.dumps({"model": f"anthropic/{MODEL}"})}


def bash(command: str) -> dict:
    return {"name": "bash", "input": {"command": command, "description": "run"}}


def report(status: str, summary: str, checks: list[str]) -> str:
    body = {"status": status, "summary": summary, "checks_run": checks, "checks_skipped": []}
    return f"Done.\n```json\n{json.dumps(body)}\n```"


FILE = "invoicekit/discounts.py"
SCRIPTS = {
    "volume-discount test": [
        {"tools": [bash("python -m pytest -q")], "usage": {"input": 1000, "output": 20, "cache_read": 300}},
        {"tools": [{"name": "read", "input": {"filePath": FILE}}], "usage": {"input": 1100, "output": 10}},
        {
            "tools": [
                {
                    "name": "edit",
                    "input": {
                        "filePath": FILE,
                        "oldString": "    if quantity > BULK_THRESHOLD:",
                        "newString": "    if quantity >= BULK_THRESHOLD:",
                    },
                }
            ],
            "usage": {"input": 1200, "output": 40, "cache_read": 300, "cache_write": 50},
        },
        {"tools": [bash("python -m pytest -q")], "usage": {"input": 1400, "output": 20, "cache_read": 300}},
        {"text": report("complete", "threshold off by one", ["python -m pytest -q"]), "usage": {"input": 600}},
    ],
    "Swedish VAT rate": [
        {
            "tools": [
                {
                    "name": "write",
                    "input": {"filePath": "deploy/overrides/vat-2026.toml", "content": '[tax.rates]\nSE = "0.255"\n'},
                }
            ],
            "usage": {"input": 900, "output": 50},
        },
        {"text": report("complete", "override written", []), "usage": {"input": 1000, "output": 25}},
    ],
    "--format json": [
        {"tools": [bash("python -m pytest -q tests/test_cli.py")], "usage": {"input": 700, "output": 15}},
        {
            "text": report(
                "failed", "could not add JSON output; nothing changed", ["python -m pytest -q tests/test_cli.py"]
            ),
            "usage": {"input": 800, "output": 35},
        },
    ],
}
TASK_SCRIPT = {"T02": "volume-discount test", "T07": "Swedish VAT rate", "T12": "--format json"}


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    return run_session(
        tmp_path_factory.mktemp("realcli"), "opencode", SCRIPTS, ENV, ("T02", "T07", "T12"), home_files=CONFIG
    )


def cli_word(run_: dict) -> dict:
    """The tokens the CLI's own stream reported (beside the harness's own count, when it kept one)."""
    traffic = run_["evidence"].get("model_traffic") or {}
    return traffic.get("agent_reported") or {**run_["usage"], "model_stamp": run_["model_stamp"]}


def exit_codes_sent_back(session, script: str) -> list[int]:
    return [
        int(line.split(":", 1)[1])
        for r in session.ep.results_of(script).values()
        for line in r["text"].splitlines()
        if line.startswith("exit code:")
    ]


def assert_matches_endpoint(session, task_id: str) -> None:
    script = TASK_SCRIPT[task_id]
    calls = session.ep.main_calls(script)
    assert len(calls) == len(SCRIPTS[script]), session.out
    assert {c["model"] for c in calls} == {MODEL}
    run_ = session.run(task_id)
    served = session.ep.served_usage(("turn",), script)
    usage = cli_word(run_)
    # one step_finish per call of the conversation: fresh input, cache reads and writes apart
    assert usage["input_tokens"] == served.input
    assert usage["cached_tokens"] == served.cache_read
    assert usage["cache_write_tokens"] == served.cache_write
    assert usage["output_tokens"] == served.output
    assert session.closing_event(task_id)["outcome"] == "success"


def test_right_fix_with_tests_run(session):
    assert session.ret == 1, session.out  # T07 and T12 fail, as scripted
    assert_matches_endpoint(session, "T02")
    run_ = session.run("T02")
    assert run_["outcome"] == "passed", session.out
    assert [e["path"] for e in session.events("T02", "file_edit")] == [FILE]
    assert [e["path"] for e in session.events("T02", "file_read")] == [FILE]
    assert run_["evidence"]["changed"]["modified"] == [FILE]
    # the tests failed before the fix and passed after it: OpenCode's own exit codes
    assert [e["exit_code"] for e in session.events("T02", "command")] == [1, 0]


def test_scripted_critical_failure(session):
    assert_matches_endpoint(session, "T07")
    run_ = session.run("T07")
    assert run_["outcome"] == "failed" and "override-not-written" in run_["critical_failed"]
    assert [e["path"] for e in session.events("T07", "file_edit")] == ["deploy/overrides/vat-2026.toml"]
    assert run_["evidence"]["changed"]["added"] == ["deploy/overrides/vat-2026.toml"]


def test_honest_give_up(session):
    assert_matches_endpoint(session, "T12")
    run_ = session.run("T12")
    assert run_["outcome"] == "failed" and run_["critical_failed"] == []
    assert run_["report"]["status"] == "failed"
    assert run_["evidence"]["changed"] == {"added": [], "deleted": [], "mode": [], "modified": []}
    (command,) = session.events("T12", "command")
    assert command["command"] == "python -m pytest -q tests/test_cli.py" and command["exit_code"] == 1


def test_product_state_and_background_traffic_are_not_the_agents(session):
    identity = session.manifest["identity"]
    assert identity["model_endpoint"] == f"{session.ep.base_url}/v1"
    assert identity["model_id"]["configured"] == f"anthropic/{MODEL}"  # from the user's opencode.json
    for task_id in TASK_SCRIPT:
        run_ = session.run(task_id)
        assert run_["evidence"]["network_attempts"] == 0, session.events(task_id, "network_attempt")
        hosts = {e["host"] for e in session.events(task_id, "background_request")}
        assert hosts <= {"registry.npmjs.org", "models.opencode.ai", "models.dev", "opencode.ai"}
        # its project id in .git/opencode is the product's state, listed apart, not a git mutation
        assert run_["evidence"]["git_mutations"] == []
        assert ".git/opencode (added) (product state)" in run_["evidence"]["leftovers"]
        assert not [c for c in run_["checks"] if "git state" in str(c.get("detail"))]
        # the answering model is in no record of OpenCode's stream; the harness's gateway saw it
        assert cli_word(run_)["model_stamp"] is None
        assert run_["model_stamp"] == MODEL
    assert_no_planted_key(session)


ERRORS = {
    "volume-discount test": [{"error": {"status": 429}}],
    "Swedish VAT rate": [{"error": {"status": 500}}],
    "--format json": [{"error": {"status": 401}}],
}


@pytest.fixture(scope="module")
def error_session(tmp_path_factory):
    return run_session(
        tmp_path_factory.mktemp("realcli-errors"),
        "opencode",
        ERRORS,
        ENV,
        ("T02", "T07", "T12"),
        *PATIENCE,
        home_files=CONFIG,
    )


def test_429_500_401_are_infrastructure(error_session):
    assert error_session.ret == 4, error_session.out
    classes = {"T02": "rate_limited", "T07": "server_error", "T12": "authentication"}
    # OpenCode retries a retryable error up to five times, backing off; the harness's model gateway may
    # end the run first (every call failing for its bound), so fewer attempts reach the endpoint on a
    # slow machine: at most six, never one for a 401
    attempts = {"T02": range(2, 7), "T07": range(2, 7), "T12": range(1, 2)}
    for task_id, cls in classes.items():
        script = TASK_SCRIPT[task_id]
        answered = [r["status"] for r in error_session.ep.log if r.get("script") == script]
        assert set(answered) == {ERRORS[script][0]["error"]["status"]}, (task_id, answered)
        assert len(answered) in attempts[task_id], (task_id, answered)
        run_ = error_session.run(task_id)
        assert run_["outcome"] == "infra_error" and run_["infra_error"]["class"] == cls, run_["infra_error"]
    # bounded: OpenCode's backoff (2, 4, 8, 16, 30 s at most) twice, and the set-up
    assert error_session.elapsed < 400, error_session.elapsed
    assert error_session.out.strip().splitlines()[-1].startswith("agentdrift: exit 4")
