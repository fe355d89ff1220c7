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
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from realcli_helpers import PATIENCE, PATIENCE_S, PLANTED_KEY, bwrap_reason
from scripted_endpoint import ScriptedEndpoint

from pytest_agentdrift.testing import load_results

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bwrap_reason() is not None, reason=bwrap_reason() or ""),
    pytest.mark.xdist_group("realcli-model-gateway"),
]

AGENT = Path(__file__).with_name("agents") / "messages_agent.py"
ANSWERING = "claude-gateway-answer-1"
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
SCRIPT = "volume-discount test"


def turns(model: str = ANSWERING, errors_on_first: list[dict] | None = None) -> dict[str, list[dict]]:
    out = [dict(t, model=model) for t in FIX]
    if errors_on_first:
        out[0] = dict(out[0], error=errors_on_first[0])
    return {SCRIPT: out}


def session(root: Path, ep: ScriptedEndpoint, *args: str, agent_env: dict[str, str] | None = None):
    """One session of the home-made agent on builtin T02 (exit status, output, seconds)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "home").mkdir(exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "ANTHROPIC_", "OPENAI_", "GOOGLE_", "SSL_CERT", "AGENT_"))
    }
    env.update(
        HOME=str(root / "home"),
        ANTHROPIC_BASE_URL=ep.base_url,
        ANTHROPIC_API_KEY=PLANTED_KEY,
        SSL_CERT_FILE=str(ep.ca_pem),
    )
    env.update({"AGENT_CLAIM_MODEL": "0", **(agent_env or {})})
    # the base URL and the CA stay the host's: the harness routes an allowed endpoint itself
    passed = [f"--agent-env={name}" for name in sorted({"ANTHROPIC_API_KEY", "AGENT_CLAIM_MODEL", *(agent_env or {})})]
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "-p",
        "no:benchmark",
        "--agent-cmd",
        f"{sys.executable} {AGENT}",
        "--agent-suite",
        "builtin",
        "-k",
        "T02",
        "--agent-isolation",
        "bwrap",
        f"--agent-allow-host={ep.host_port}",
        *passed,
        *args,
    ]
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start


def only_run(record: Path) -> dict:
    (run,) = load_results(record)["tasks"]["T02"]["runs"]
    return run


def assert_no_planted_key(*places: Path, out: str = "") -> None:
    assert PLANTED_KEY not in out
    for place in places:
        for path in place.rglob("*"):
            if path.is_file():
                assert PLANTED_KEY.encode() not in path.read_bytes(), path


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """A recorded session and a second one compared with it, against the same endpoint."""
    root = tmp_path_factory.mktemp("gateway")
    with ScriptedEndpoint(turns(), root / "endpoint") as ep:
        ret, out, _ = session(root, ep, "--agent-record", "runs/base")
        log = list(ep.log)
        # the same agent claiming another model: the harness's own reading decides, the claim is noted
        ret2, out2, _ = session(
            root,
            ep,
            "--agent-record",
            "runs/again",
            "--agent-baseline",
            "runs/base",
            agent_env={"AGENT_CLAIM_MODEL": "1"},
        )
        # the endpoint starts answering with another model
        ep.scripts = turns(model="claude-swapped-in-2")
        ret3, out3, _ = session(root, ep, "--agent-record", "runs/swapped", "--agent-baseline", "runs/base")
        # the provider rate-limits every attempt of the first call
        ep.scripts = turns(errors_on_first=[{"status": 429, "message": "slow down"}])
        ret4, out4, took4 = session(root, ep, "--agent-record", "runs/limited", *PATIENCE)
        # a product that would retry for an hour: the harness stops it once the provider failed long enough
        ret5, out5, took5 = session(
            root,
            ep,
            "--agent-record",
            "runs/forever",
            *PATIENCE,
            agent_env={"AGENT_ATTEMPTS": "1000", "AGENT_BACKOFF_S": "2"},
        )
        label = ep.base_url
    return {
        "ret5": ret5,
        "out5": out5,
        "took5": took5,
        "root": root,
        "ret": ret,
        "out": out,
        "log": log,
        "ret2": ret2,
        "out2": out2,
        "ret3": ret3,
        "out3": out3,
        "ret4": ret4,
        "out4": out4,
        "took4": took4,
        "endpoint": label,
    }


def test_the_record_holds_what_the_endpoint_served(baseline):
    root, out, log = baseline["root"], baseline["out"], baseline["log"]
    assert baseline["ret"] == 0, out[-4000:]
    run = only_run(root / "runs" / "base")
    assert run["outcome"] == "passed", out[-4000:]
    served = [e for e in log if e.get("kind") == "turn"]
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
    endpoint = baseline["endpoint"]
    assert traffic["routes"] == [{"variable": "ANTHROPIC_BASE_URL", "api": "anthropic_messages", "endpoint": endpoint}]
    # the agent's calls to the gateway are not network attempts of its own
    assert run["evidence"]["network_attempts"] == 0, out[-3000:]
    manifest = json.loads((root / "runs" / "base" / "runtime-manifest.json").read_text())
    assert manifest["identity"]["model_stamp"] == ANSWERING
    assert manifest["identity"]["model_id"] == "claude-home-made"
    assert manifest["identity"]["model_endpoint"] == endpoint
    assert_no_planted_key(root / "runs", out=out)


def test_two_identical_sessions_compare_without_an_accept_flag(baseline):
    out2 = baseline["out2"]
    assert baseline["ret2"] == 0, out2[-4000:]
    closing = next(ln for ln in out2.splitlines() if ln.startswith("agentdrift: exit"))
    assert "refused" not in closing, out2[-3000:]


def test_the_agents_own_word_is_a_second_witness(baseline):
    run = only_run(baseline["root"] / "runs" / "again")
    assert run["model_stamp"] == ANSWERING, baseline["out2"][-3000:]
    traffic = run["evidence"]["model_traffic"]
    assert traffic["agent_reported"]["model_stamp"] == "claude-claimed-by-the-agent"
    assert traffic["disagreement"] == [
        f"model: the agent reported claude-claimed-by-the-agent, the endpoint answered {ANSWERING}"
    ]


def test_an_endpoint_answering_with_another_model_is_refused_naming_model_stamp(baseline):
    out3 = baseline["out3"]
    assert baseline["ret3"] == 6, out3[-4000:]
    closing = next(ln for ln in out3.splitlines() if ln.startswith("agentdrift: exit"))
    assert closing.startswith("agentdrift: exit 6") and "model_stamp" in closing, closing
    assert "claude-swapped-in-2" in out3


def test_a_provider_429_is_infrastructure_in_bounded_time(baseline):
    out4 = baseline["out4"]
    assert baseline["ret4"] == 4, out4[-4000:]
    assert baseline["took4"] < 120
    run = only_run(baseline["root"] / "runs" / "limited")
    assert run["outcome"] == "infra_error", out4[-3000:]
    infra = run["infra_error"]
    assert infra["class"] == "rate_limited" and infra["source"] == "harness model gateway", infra
    # the agent's three attempts: one call and two retries, each answered 429 by the endpoint
    assert infra["status"] == 429 and infra["retries"] == 2, infra
    assert [c["status"] for c in run["evidence"]["model_calls"]] == [429, 429, 429]
    assert run["evidence"]["model_traffic"]["usage"]["input_tokens"] == 0  # nothing was answered
    assert_no_planted_key(baseline["root"] / "runs", out=out4)


def test_a_product_retrying_a_failing_provider_is_stopped_as_infrastructure_in_bounded_time(baseline):
    out5 = baseline["out5"]
    assert baseline["ret5"] == 4, out5[-4000:]
    assert baseline["took5"] < PATIENCE_S + 60  # its own retries would take over half an hour
    run = only_run(baseline["root"] / "runs" / "forever")
    assert run["outcome"] == "infra_error", out5[-3000:]
    assert run["infra_error"]["class"] == "rate_limited" and run["infra_error"]["retries"] >= 2
    assert "stopped as infrastructure" in run["evidence"]["stopped"]
