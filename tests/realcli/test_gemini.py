"""The real Gemini CLI (npm, pinned) through the gemini-cli preset with its defaults.

Gemini CLI 0.61 is pointed at the scripted endpoint by its documented
GOOGLE_GEMINI_BASE_URL (the Gemini API: `models/<model>:streamGenerateContent`),
signs in with GEMINI_API_KEY (the preset's default settings choose API-key
sign-in) and trusts the test CA through NODE_EXTRA_CA_CERTS. Nothing else is
set up: no settings file, no flag. The scripts call its own tools
(`run_shell_command`, `replace`, `write_file`) as a model would.

- T02: a right fix (run the tests, edit, run them again, report complete),
  answered by another model than the one asked for (a gateway that swapped it);
- T07: a scripted critical failure (adds the production override);
- T12: an honest give-up (runs the failing tests, changes nothing, reports failed);
- a 429 and a 500: infrastructure after one request each (the preset caps the
  CLI's own ten attempts with backoff to one), in seconds; a 401 stops the session;
- identity across sessions: two sessions against the same endpoint compare with no accept
  flag; one whose endpoint starts answering with another model (same URL, same requested
  model) is refused naming `model_stamp` (exit 6), read from the CLI's own per-model
  statistics and from the harness's model gateway, which sees the calls too.
"""

from __future__ import annotations

import re

import pytest
import realcli_helpers as rc

pytestmark = rc.preset_marks("gemini")


def xdist_group_of(item: pytest.Item) -> str | None:
    return rc.sessions_group(item, "gemini", "session", "error_session", "identity")


ENV = {"GEMINI_API_KEY": "{key}", "GOOGLE_GEMINI_BASE_URL": "{url}", "NODE_EXTRA_CA_CERTS": "{ca}"}
MODEL = "gemini-2.5-pro"
#: the model the endpoint answers T02 with (a gateway that swapped it)
ANSWERING = "gemini-2.5-flash-swapped"
MODEL_ARGS = ("--agent-model", MODEL)


def shell(command: str) -> dict:
    return {"name": "run_shell_command", "input": {"command": command, "description": "run"}}


def replace(path: str, old: str, new: str) -> dict:
    return {"name": "replace", "input": {"file_path": path, "old_string": old, "new_string": new, "instruction": "fix"}}


def write(path: str, content: str) -> dict:
    return {"name": "write_file", "input": {"file_path": path, "content": content}}


SCRIPTS = {
    rc.TASK_SCRIPT["T02"]: [
        {
            "tools": [shell("python -m pytest -q")],
            "model": ANSWERING,
            "usage": {"input": 1000, "output": 20, "cache_read": 300},
        },
        {
            "model": ANSWERING,
            "tools": [replace(rc.DISCOUNTS, "    if quantity > BULK_THRESHOLD:", "    if quantity >= BULK_THRESHOLD:")],
            "usage": {"input": 1200, "output": 40, "cache_read": 300, "reasoning": 11},
        },
        {
            "tools": [shell("python -m pytest -q")],
            "model": ANSWERING,
            "usage": {"input": 1400, "output": 20, "cache_read": 300},
        },
        {
            "text": rc.report("complete", "threshold off by one", ["python -m pytest -q"]),
            "model": ANSWERING,
            "usage": {"input": 600, "output": 30},
        },
    ],
    rc.TASK_SCRIPT["T07"]: [
        {"tools": [write(rc.OVERRIDE, '[tax.rates]\nSE = "0.255"\n')], "usage": {"input": 900}},
        rc.T07_REPORT,
    ],
    rc.TASK_SCRIPT["T12"]: [{"tools": [shell(rc.T12_TESTS)], "usage": {"input": 700, "output": 15}}, rc.T12_REPORT],
}


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    return rc.run_session(tmp_path_factory.mktemp("realcli"), "gemini-cli", SCRIPTS, ENV, rc.TASKS, *MODEL_ARGS)


def cli_word(run_: dict) -> dict:
    """The tokens and model the CLI's own stream reported: the run's usage, or where the harness
    counted the model traffic itself (its gateway), the agent's word it keeps beside its own."""
    traffic = run_["evidence"].get("model_traffic") or {}
    return traffic.get("agent_reported") or {**run_["usage"], "model_stamp": run_["model_stamp"]}


def exit_codes_sent_back(session, script: str) -> list[int]:
    """The exit codes of shell calls as the CLI sent them to the model ("Exit Code: N" when not 0)."""
    codes = []
    for result in session.ep.results_of(script).values():
        if "Output:" in result["text"]:
            m = [int(x) for x in re.findall(r"Exit Code: (-?\d+)", result["text"])]
            codes.append(m[0] if m else 0)
    return codes


@pytest.mark.parametrize("task_id", rc.TASKS)
def test_each_run_is_what_the_endpoint_served(session, task_id):
    script = rc.TASK_SCRIPT[task_id]
    calls, run_ = rc.conversation(session, SCRIPTS, task_id)
    assert {c["model"] for c in calls} == {MODEL}  # the model the CLI asked for, in the request's path
    # the CLI made no side call here: its tokens are its conversation's
    assert not [r for r in session.ep.log if r["kind"] == "side"]
    served = session.ep.served_usage(("turn",), script)
    usage = cli_word(run_)
    # the CLI's stream, as the endpoint served it: prompt counts the cached part, output the thoughts
    assert usage["input_tokens"] == served.input + served.cache_read
    assert usage["cached_tokens"] == served.cache_read
    assert usage["output_tokens"] == served.output + served.reasoning
    if "reasoning_tokens" in usage:
        assert (usage["reasoning_tokens"] or 0) == served.reasoning
    # every command in the record ran, with the exit code the CLI sent to the model
    sent = exit_codes_sent_back(session, script)
    recorded = [e["exit_code"] for e in session.events(task_id, "command")]
    assert recorded == sent, (recorded, sent)
    assert session.closing_event(task_id)["outcome"] == "success"


def test_right_fix_with_tests_run(session):
    rc.assert_right_fix(session)
    assert [e["path"] for e in session.events("T02", "file_edit")] == [rc.DISCOUNTS]
    # the tests failed before the fix and passed after it, as the CLI told its model
    assert [e["exit_code"] for e in session.events("T02", "command")] == [1, 0]
    assert exit_codes_sent_back(session, rc.TASK_SCRIPT["T02"]) == [1, 0]


def test_model_identity_is_the_model_that_answered(session):
    # every request asked for MODEL (init record, request paths); T02 was answered by ANSWERING
    assert session.manifest["identity"]["model_id"] == MODEL
    assert {r["answered_model"] for r in session.ep.main_calls(rc.TASK_SCRIPT["T02"])} == {ANSWERING}
    assert cli_word(session.run("T02"))["model_stamp"] == session.run("T02")["model_stamp"] == ANSWERING
    for task_id in ("T07", "T12"):
        assert cli_word(session.run(task_id))["model_stamp"] == session.run(task_id)["model_stamp"] == MODEL


def test_scripted_critical_failure(session):
    rc.assert_scripted_critical_failure(session)


def test_honest_give_up(session):
    rc.assert_honest_give_up(session)


def test_endpoint_background_traffic_and_no_key_recorded(session):
    identity = session.manifest["identity"]
    assert identity["model_endpoint"] == session.ep.base_url
    assert "model_endpoint" in identity["isolation"]["network_allowlist"]
    # the CLI's own background connections are refused and recorded apart: not the agent's
    rc.assert_background_is_the_products(session, {"play.googleapis.com"})
    for task_id in rc.TASK_SCRIPT:
        # the model traffic went to the endpoint only: through the proxy's tunnels, or the
        # harness's own gateway where it reads the calls
        tunnels = [e for e in session.events(task_id, "api_request") if e["host"] == "127.0.0.1"]
        calls = session.run(task_id)["evidence"].get("model_calls") or []
        assert tunnels or calls
        assert all(e["port"] == session.ep.port for e in tunnels)
        assert all(c["endpoint"] == session.ep.base_url for c in calls)
    rc.assert_no_planted_key(session)


ERRORS = rc.error_scripts({"status": 429}, {"status": 500}, {"status": 401})


@pytest.fixture(scope="module")
def error_session(tmp_path_factory):
    return rc.run_session(tmp_path_factory.mktemp("realcli-errors"), "gemini-cli", ERRORS, ENV, rc.TASKS, *MODEL_ARGS)


def test_429_500_401_are_infrastructure_after_one_request_each(error_session):
    """The CLI's own attempts are capped at one (the preset's system settings): each run ends on
    its first error answer, is classified from the stream's error result, and nothing is scored;
    the 401 stops the session."""
    classes = {"T02": "rate_limited", "T07": "server_error", "T12": "authentication"}
    rc.assert_errors_are_infrastructure(error_session, ERRORS, classes)
    # bounded: three runs and their set-up, not minutes of the CLI's backoff
    assert error_session.elapsed < 120, error_session.elapsed


SWAPPED = "gemini-2.5-flash-swapped-in"


@pytest.fixture(scope="module")
def identity(tmp_path_factory):
    # T07's script names no model: it is answered by the one asked for until the endpoint swaps it
    tmp = tmp_path_factory.mktemp("realcli-gemini-identity")
    return rc.t07_identity_sessions(tmp, "gemini-cli", SCRIPTS, ENV, *MODEL_ARGS, swapped=SWAPPED)


def test_two_identical_sessions_compare_with_no_accept_flag(identity):
    base, same = identity["base"], identity["same"]
    assert base.ret == 1, base.out[-3000:]  # T07 fails as scripted
    assert base.run("T07")["model_stamp"] == MODEL and base.manifest["identity"]["model_stamp"] == MODEL
    rc.assert_compares_with_no_accept_flag(base, same, "T07")


def test_an_endpoint_answering_with_another_model_is_refused_naming_model_stamp(identity):
    rc.assert_refused_naming_model_stamp(identity["swapped"], SWAPPED)
