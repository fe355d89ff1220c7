"""The harness sees a home-made agent's model traffic itself (run/modelgateway.py).

A small Python agent (tests/realcli/agents/messages_agent.py) reads ANTHROPIC_BASE_URL from its
environment and talks to the scripted endpoint (HTTPS on loopback, a throw-away CA) under
bubblewrap, through `--agent-cmd` with the endpoint's host allowed. The harness points the base URL
at its gateway; the record's model, tokens and statuses are compared with what the endpoint
served, field by field. Nothing here trusts the agent's word: it reports a `usage` event, and one
test has it claim another model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from realcli_helpers import (
    PATIENCE,
    PATIENCE_S,
    TASK_SCRIPT,
    RealSession,
    assert_compares_with_no_accept_flag,
    assert_no_planted_key,
    assert_refused_naming_model_stamp,
    bwrap_reason,
    run_session,
    sessions_group,
)
from scripted_endpoint import ScriptedEndpoint

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bwrap_reason() is not None, reason=bwrap_reason() or ""),
]


def xdist_group_of(item: pytest.Item) -> str | None:
    return sessions_group(item, "model-gateway", "sessions")


AGENT = Path(__file__).with_name("agents") / "messages_agent.py"
COMMAND = f"{sys.executable} {AGENT}"
#: the host's environment: the base URL and the CA stay the host's (the harness routes an allowed
#: endpoint itself); the key is passed to the agent
ENV = {"ANTHROPIC_BASE_URL": "{url}", "ANTHROPIC_API_KEY": "{key}", "SSL_CERT_FILE": "{ca}"}
ANSWERING = "claude-gateway-answer-1"
SWAPPED = "claude-swapped-in-2"
DISCOUNTS = "{cwd}/invoicekit/discounts.py"
FIX = [
    {
        "tools": [
            {
                "name": "Bash",
                "input": {
                    "command": f"sed -i 's/if quantity > BULK_THRESHOLD:/if quantity >= BULK_THRESHOLD:/' {DISCOUNTS}"
                },
            }
        ],
        "usage": {"input": 1200, "output": 30},
    },
    {"tools": [{"name": "Bash", "input": {"command": "python -m pytest -q"}}], "usage": {"input": 1500, "output": 20}},
    {
        "text": "Done.\n```json\n"
        + json.dumps({"status": "complete", "summary": "threshold fixed", "checks_run": ["python -m pytest -q"]})
        + "\n```",
        "usage": {"input": 1700, "output": 40},
    },
]


def turns(model: str = ANSWERING, error_on_first: dict | None = None) -> dict[str, list[dict]]:
    out = [dict(t, model=model) for t in FIX]
    if error_on_first:
        out[0] = dict(out[0], error=error_on_first)
    return {TASK_SCRIPT["T02"]: out}


def session(tmp: Path, name: str, ep: ScriptedEndpoint, *args: str, agent_env: dict[str, str] | None = None):
    """One session of the home-made agent on builtin T02, its endpoint log in extra["log"]."""
    agent_env = {"AGENT_CLAIM_MODEL": "0", **(agent_env or {})}
    passed = [f"--agent-env={name}" for name in sorted({"ANTHROPIC_API_KEY", *agent_env})]
    start = len(ep.log)
    out = run_session(
        tmp / name,
        "home-made",
        ep.scripts,
        {**ENV, **agent_env},
        ("T02",),
        *passed,
        *args,
        endpoint=ep,
        command=COMMAND,
    )
    out.extra["log"] = ep.log[start:]
    return out


@pytest.fixture(scope="module")
def sessions(tmp_path_factory) -> dict[str, RealSession]:
    """A recorded session, and against the same endpoint: one compared with it, one whose endpoint
    answers with another model, one whose provider fails every call."""
    tmp = tmp_path_factory.mktemp("gateway")
    with ScriptedEndpoint(turns(), tmp / "endpoint") as ep:
        out = {"base": session(tmp, "base", ep)}
        baseline = ("--agent-baseline", str(out["base"].run_dir))
        # the same agent claiming another model: the harness's own reading decides, the claim is noted
        out["again"] = session(tmp, "again", ep, *baseline, agent_env={"AGENT_CLAIM_MODEL": "1"})
        ep.scripts = turns(model=SWAPPED)  # the endpoint starts answering with another model
        out["swapped"] = session(tmp, "swapped", ep, *baseline)
        # the provider rate-limits every attempt of the first call, and the product would retry for
        # an hour: the harness stops it once the provider failed long enough
        ep.scripts = turns(error_on_first={"status": 429, "message": "slow down"})
        forever = {"AGENT_ATTEMPTS": "1000", "AGENT_BACKOFF_S": "1"}
        out["forever"] = session(tmp, "forever", ep, *PATIENCE, agent_env=forever)
    return out


def test_the_record_holds_what_the_endpoint_served(sessions):
    base = sessions["base"]
    assert base.ret == 0, base.out[-4000:]
    run = base.run("T02")
    assert run["outcome"] == "passed", base.out[-4000:]
    served = [e for e in base.extra["log"] if e.get("kind") == "turn"]
    assert len(served) == len(FIX)
    calls = run["evidence"]["model_calls"]
    # call by call: the path, the status, the model asked for and the one that answered, the tokens
    assert [(c["path"], c["status"], c["requested_model"], c["answered_model"]) for c in calls] == [
        (e["path"], e["status"], e["model"], e["answered_model"]) for e in served
    ]
    assert [(c["input_tokens"], c["output_tokens"]) for c in calls] == [
        (e["usage"]["input"], e["usage"]["output"]) for e in served
    ]
    assert all(c["source"] == "harness" and c["role"] == "main" for c in calls)
    assert run["model_stamp"] == ANSWERING
    assert run["usage"]["input_tokens"] == sum(e["usage"]["input"] for e in served)
    assert run["usage"]["output_tokens"] == sum(e["usage"]["output"] for e in served)
    traffic = run["evidence"]["model_traffic"]
    assert traffic["statuses"] == {"200": len(FIX)}
    assert traffic["disagreement"] == []  # the agent's usage events say the same
    endpoint = base.ep.base_url
    assert traffic["routes"] == [{"variable": "ANTHROPIC_BASE_URL", "api": "anthropic_messages", "endpoint": endpoint}]
    # the agent's calls to the gateway are not network attempts of its own
    assert run["evidence"]["network_attempts"] == 0, base.out[-3000:]
    identity = base.manifest["identity"]
    assert (identity["model_stamp"], identity["model_id"], identity["model_endpoint"]) == (
        ANSWERING,
        "claude-home-made",
        endpoint,
    )
    assert_no_planted_key(base)


def test_two_identical_sessions_compare_without_an_accept_flag(sessions):
    assert_compares_with_no_accept_flag(sessions["base"], sessions["again"], "T02")


def test_the_agents_own_word_is_a_second_witness(sessions):
    again = sessions["again"]
    run = again.run("T02")
    assert run["model_stamp"] == ANSWERING, again.out[-3000:]
    traffic = run["evidence"]["model_traffic"]
    assert traffic["agent_reported"]["model_stamp"] == "claude-claimed-by-the-agent"
    assert traffic["disagreement"] == [
        f"model: the agent reported claude-claimed-by-the-agent, the endpoint answered {ANSWERING}"
    ]


def test_an_endpoint_answering_with_another_model_is_refused_naming_model_stamp(sessions):
    assert_refused_naming_model_stamp(sessions["swapped"], SWAPPED)


def test_a_product_retrying_a_failing_provider_is_stopped_as_infrastructure_in_bounded_time(sessions):
    """Every call answered 429: the run is infrastructure, each of the product's attempts is in the
    record as the endpoint served it, and the harness stopped the retries (they would take over
    half an hour) once the provider failed for PATIENCE_S."""
    forever = sessions["forever"]
    assert forever.ret == 4, forever.out[-4000:]
    assert forever.elapsed < PATIENCE_S + 60
    run = forever.run("T02")
    assert run["outcome"] == "infra_error", forever.out[-3000:]
    infra = run["infra_error"]
    assert (infra["class"], infra["source"], infra["status"]) == ("rate_limited", "harness model gateway", 429)
    served = [e["status"] for e in forever.extra["log"]]
    assert len(served) >= 3 and set(served) == {429}, served  # the gateway's floor: three failed calls
    assert [c["status"] for c in run["evidence"]["model_calls"]] == served
    assert infra["retries"] == len(served) - 1, infra
    assert run["evidence"]["model_traffic"]["usage"]["input_tokens"] == 0  # nothing was answered
    assert "stopped as infrastructure" in run["evidence"]["stopped"]
    assert_no_planted_key(forever)
