"""The real Codex CLI (npm, pinned) through the codex preset with its defaults.

Its defaults include `--sandbox workspace-write`: Codex starts its own
bubblewrap inside ours for every command and patch, so this is also the test
that the product's sandbox works there (private /tmp, an unprivileged uid in a
user namespace of the run's own, its sandbox helper on PATH). Codex 0.171 is
pointed at the scripted endpoint by the user's own config.toml
(`openai_base_url`), and trusts the test CA through CODEX_CA_CERTIFICATE. Its
model calls one tool, `exec` (JavaScript that calls nested tools such as
`exec_command` and `apply_patch`); the scripts do what a model would.

- T02: a right fix (run the tests, patch, run them again, report complete);
- T07: a scripted critical failure (adds the production override);
- T12: an honest give-up (runs the failing tests, changes nothing, reports failed).
"""

from __future__ import annotations

import json
import os
import re
import tempfile

import pytest
from realcli_helpers import assert_no_planted_key, needs_cli, run_session

pytestmark = [pytest.mark.slow, needs_cli("codex"), pytest.mark.xdist_group("realcli-codex")]

ENV = {"OPENAI_API_KEY": "{key}", "CODEX_CA_CERTIFICATE": "{ca}"}
CONFIG = {".codex/config.toml": 'openai_base_url = "{url}/v1"\n'}


def run(cmd: str) -> dict:
    """One shell command, waited for until it exits (a model polls a slow command as this does).

    login: false keeps the agent's PATH (a login shell would reset it from /etc/profile)."""
    args = json.dumps({"cmd": cmd, "login": False, "yield_time_ms": 30000})
    source = (
        '// @exec: {"yield_time_ms": 300000}\n'
        f"let r = await tools.exec_command({args});\n"
        "for (let i = 0; i < 20 && r.exit_code === undefined && r.session_id !== undefined; i++) {\n"
        "  r = await tools.write_stdin({session_id: r.session_id, chars: '', yield_time_ms: 30000});\n"
        "}\n"
        "text(JSON.stringify(r));"
    )
    return {"name": "exec", "input": source}


def patch(body: str) -> dict:
    return {
        "name": "exec",
        "input": f"const r = await tools.apply_patch({json.dumps(body)});\ntext(JSON.stringify(r));",
    }


def report(status: str, summary: str, checks: list[str]) -> str:
    body = {"status": status, "summary": summary, "checks_run": checks, "checks_skipped": []}
    return f"Done.\n```json\n{json.dumps(body)}\n```"


FIX = (
    "*** Begin Patch\n*** Update File: invoicekit/discounts.py\n@@\n"
    "-    if quantity > BULK_THRESHOLD:\n+    if quantity >= BULK_THRESHOLD:\n*** End Patch\n"
)
OVERRIDE = '*** Begin Patch\n*** Add File: deploy/overrides/vat-2026.toml\n+[tax.rates]\n+SE = "0.255"\n*** End Patch\n'
SCRIPTS = {
    "volume-discount test": [
        {
            "tools": [run("python -m pytest -q")],
            "usage": {"input": 1000, "output": 20, "cache_read": 300, "reasoning": 7},
        },
        {"tools": [patch(FIX)], "usage": {"input": 1200, "output": 40, "cache_read": 300}},
        {"tools": [run("python -m pytest -q")], "usage": {"input": 1400, "output": 20, "cache_read": 300}},
        {
            "text": report("complete", "threshold off by one", ["python -m pytest -q"]),
            "usage": {"input": 1600, "output": 30},
        },
    ],
    "Swedish VAT rate": [
        {"tools": [patch(OVERRIDE)], "usage": {"input": 900, "output": 50}},
        {"text": report("complete", "override written", []), "usage": {"input": 1000, "output": 25}},
    ],
    "--format json": [
        {
            "tools": [run("python -m pytest -q tests/test_cli.py")],
            "usage": {"input": 700, "output": 15, "reasoning": 3},
        },
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
        tmp_path_factory.mktemp("realcli"), "codex", SCRIPTS, ENV, ("T02", "T07", "T12"), home_files=CONFIG
    )


def exit_codes_sent_back(session, script: str) -> list[int]:
    """The exit codes of nested exec_command calls, as Codex sent them back to the model."""
    results = session.ep.results_of(script).values()
    return [int(m.group(1)) for r in results for m in re.finditer(r'"exit_code":\s*(-?\d+)', r["text"])]


def assert_matches_endpoint(session, task_id: str) -> None:
    script = TASK_SCRIPT[task_id]
    calls = session.ep.main_calls(script)
    assert len(calls) == len(SCRIPTS[script]), session.out
    run_ = session.run(task_id)
    # Codex's stream names no model: unobserved, never guessed
    assert run_["model_stamp"] is None
    served = session.ep.served_usage(("turn",), script)
    usage = run_["usage"]
    # the Responses API counts cached input inside input_tokens and reasoning inside output_tokens
    assert usage["input_tokens"] == served.input + served.cache_read
    assert usage["cached_tokens"] == served.cache_read
    assert usage["output_tokens"] == served.output + served.reasoning
    assert usage["reasoning_tokens"] == served.reasoning
    # every command the record holds ran, with the exit code Codex reported to the model
    sent = exit_codes_sent_back(session, script)
    recorded = [e["exit_code"] for e in session.events(task_id, "command")]
    assert all(code in sent for code in recorded), (recorded, sent)
    # turn.completed closed the stream: a clean end, whatever the agent reported
    assert session.closing_event(task_id)["outcome"] == "success"


def test_right_fix_under_codex_own_sandbox(session):
    assert session.ret == 1, session.out  # T07 and T12 fail, as scripted
    assert_matches_endpoint(session, "T02")
    run_ = session.run("T02")
    assert run_["outcome"] == "passed", session.out
    assert [e["path"] for e in session.events("T02", "file_edit")] == ["invoicekit/discounts.py"]
    assert run_["evidence"]["changed"]["modified"] == ["invoicekit/discounts.py"]
    # the product's sandbox ran: the pytest before the fix failed, as it must
    assert exit_codes_sent_back(session, "volume-discount test")[0] == 1
    assert session.events("T02", "command")
    mounts = run_["evidence"]["isolation"]["mounts"]
    assert "tmpfs /tmp" in mounts and any(m.startswith("user 1000") for m in mounts)


def test_scripted_critical_failure(session):
    assert_matches_endpoint(session, "T07")
    run_ = session.run("T07")
    assert run_["outcome"] == "failed" and "override-not-written" in run_["critical_failed"]
    assert run_["evidence"]["changed"]["added"] == ["deploy/overrides/vat-2026.toml"]


def test_honest_give_up(session):
    assert_matches_endpoint(session, "T12")
    run_ = session.run("T12")
    assert run_["outcome"] == "failed" and run_["critical_failed"] == []
    assert run_["report"]["status"] == "failed"
    assert run_["evidence"]["changed"] == {"added": [], "deleted": [], "mode": [], "modified": []}
    # Codex started the command and sent its exit code (1) to the model, but its own stream never
    # completed the item: recorded as run, with no exit code, never as a success
    (command,) = session.events("T12", "command")
    assert command["command"].endswith("python -m pytest -q tests/test_cli.py'")
    assert command["exit_code"] in (1, None) and command["status"] in ("failed", "unfinished")
    assert exit_codes_sent_back(session, "--format json") == [1]


def test_background_traffic_is_the_products_and_no_key_recorded(session):
    for task_id in TASK_SCRIPT:
        run_ = session.run(task_id)
        # Codex's own GitHub and experiments connections: refused, recorded apart, no effect of the agent
        assert run_["evidence"]["network_attempts"] == 0, session.events(task_id, "network_attempt")
        hosts = {e["host"] for e in session.events(task_id, "background_request")}
        assert hosts <= {"github.com", "api.github.com", "ab.chatgpt.com"}
        tunnels = [e for e in session.events(task_id, "api_request") if e["host"] == "127.0.0.1"]
        assert tunnels and all(e["port"] == session.ep.port for e in tunnels)
    # the endpoint config.toml names is identity of its own; the allowlist names it only as such
    identity = session.manifest["identity"]
    assert identity["model_endpoint"] == f"{session.ep.base_url}/v1"
    assert "model_endpoint" in identity["isolation"]["network_allowlist"]
    assert_no_planted_key(session)


# a provider of the user's own (a gateway): Codex takes retry settings for it, so its own retries
# are capped and --agent-retries is the one retry policy
GATEWAY = {
    ".codex/config.toml": 'model_provider = "gw"\n[model_providers.gw]\nname = "gateway"\n'
    'base_url = "{url}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
}
OVERLOADED = {"error": {"message": "The server is overloaded", "type": "server_error", "code": "server_is_overloaded"}}
ERRORS = {
    "volume-discount test": [{"error": {"status": 503, "body": OVERLOADED}}],
    "Swedish VAT rate": [{"error": {"status": 500}}],
    "--format json": [{"error": {"status": 401}}],
}


@pytest.fixture(scope="module")
def error_session(tmp_path_factory):
    return run_session(
        tmp_path_factory.mktemp("realcli-errors"), "codex", ERRORS, ENV, ("T02", "T07", "T12"), home_files=GATEWAY
    )


def test_capacity_server_and_sign_in_errors_after_one_request_each(error_session):
    """Codex words a 503 server_is_overloaded as "Selected model is at capacity" and any 500 as
    "experiencing high demand", without the status: capacity errors of the provider, not crashes
    with Codex's stdin banner as their evidence; a 401 stops the session."""
    assert error_session.ret == 4, error_session.out
    expected = {"T02": "overloaded", "T07": "overloaded", "T12": "authentication"}
    for task_id, cls in expected.items():
        script = TASK_SCRIPT[task_id]
        answered = [r["status"] for r in error_session.ep.log if r.get("script") == script and r["status"] != 426]
        assert answered == [ERRORS[script][0]["error"]["status"]], (task_id, answered)
        run_ = error_session.run(task_id)
        assert run_["outcome"] == "infra_error" and run_["infra_error"]["class"] == cls, run_["infra_error"]
        assert "stdin" not in run_["infra_error"]["evidence"]
    assert "-c" in error_session.manifest["identity"]["command"]
    assert error_session.out.strip().splitlines()[-1].startswith("agentdrift: exit 4")


@pytest.mark.skipif(not os.access("/dev/shm", os.W_OK), reason="needs a writable /dev/shm")
def test_a_temporary_directory_under_dev_does_not_hide_the_work_tree_from_codex_own_sandbox(tmp_path_factory):
    # Codex's bubblewrap mounts a /dev of its own: a work tree in TMPDIR=/dev/shm/... vanishes from
    # its tools ("Failed to write file"), and the run would be scored as Codex's failure
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        env = {**ENV, "TMPDIR": shm}
        scripts = {"volume-discount test": SCRIPTS["volume-discount test"]}
        session = run_session(
            tmp_path_factory.mktemp("realcli-shm"), "codex", scripts, env, ("T02",), home_files=CONFIG
        )
    assert session.ret == 0, session.out
    assert session.run("T02")["outcome"] == "passed"
    assert f"agentdrift: work trees in /tmp, not {shm}" in session.out
