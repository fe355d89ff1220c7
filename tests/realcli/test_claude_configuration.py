"""Set-ups that fail the same way on every run stop the session: the real Claude Code CLI (npm, pinned).

- the endpoint's certificate is not trusted (no CA given to the CLI): the CLI's
  own words name the certificate failure;
- the CLI refuses its start-up settings: `--dangerously-skip-permissions`
  (bypassPermissions) as root.

Each is infrastructure of class `configuration`, never the agent's failure and
never retried: the session stops (exit 4) with one closing line naming the
cause, after one run.
"""

from __future__ import annotations

import os

import pytest
from realcli_helpers import needs_cli, run_session
from test_claude_code import ENV, SCRIPTS

# each test makes its own session: no xdist group
pytestmark = [pytest.mark.slow, needs_cli("claude")]

T02_T12 = {k: SCRIPTS[k] for k in ("volume-discount test", "--format json")}


def assert_stopped_on_configuration(session, evidence: str) -> None:
    assert session.ret == 4, session.out
    run = session.run("T02")
    assert run["outcome"] == "infra_error", run["infra_error"]
    assert run["infra_error"]["class"] == "configuration" and run["infra_error"]["repeats"] is True
    assert evidence in run["infra_error"]["evidence"]
    # not retried, and the session stopped: the next task never ran
    assert "attempts" not in run or len(run["attempts"]) == 1
    assert "T12" not in session.results["tasks"] or not session.results["tasks"]["T12"]["runs"]
    last = session.out.strip().splitlines()[-1]
    assert last.startswith("agentdrift: exit 4") and "configuration" in last, last


def test_an_untrusted_endpoint_certificate_stops_the_session(tmp_path):
    env = {k: v for k, v in ENV.items() if k != "NODE_EXTRA_CA_CERTS"}
    session = run_session(tmp_path, "claude-code", T02_T12, env, ("T02", "T12"), "--agent-retries", "2")
    assert_stopped_on_configuration(session, "certificate")
    assert not session.ep.main_calls()  # no request got through the TLS handshake


@pytest.mark.skipif(os.geteuid() != 0, reason="Claude Code refuses --dangerously-skip-permissions only as root")
def test_a_start_up_refusal_stops_the_session(tmp_path):
    session = run_session(
        tmp_path,
        "claude-code",
        T02_T12,
        ENV,
        ("T02", "T12"),
        "--agent-permission-mode",
        "bypassPermissions",
        "--agent-retries",
        "2",
    )
    assert_stopped_on_configuration(session, "cannot be used with root/sudo privileges")
    assert not session.ep.log  # refused before any request
