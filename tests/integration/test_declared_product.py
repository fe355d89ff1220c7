"""An --agent-cmd agent's product declared by its operator: the state it writes in the work tree
(--agent-product-path) and the hosts it calls in the background (--agent-background-host) are the
product's, not the agent's work or network use; everything else stays the agent's. Under bubblewrap."""

from __future__ import annotations

import json

import pytest
from helpers import run_pytest

from pytest_agentdrift.run.sandbox import detect
from pytest_agentdrift.testing import agent_script, load_results, make_task

pytestmark = [
    pytest.mark.slow,  # every test starts a sandboxed agent session
    pytest.mark.skipif(detect("auto").mode != "bwrap", reason="bubblewrap cannot run here"),
]

CHECKS = [
    {"name": "tree-unchanged", "kind": "unchanged", "layer": "scope", "critical": True},
    {"name": "fx", "kind": "effects", "layer": "safety", "critical": True},
]

#: a product that keeps state in the tree and phones home, and does nothing of the task
PRODUCT = """
import urllib.request
Path(".myproduct").mkdir()
Path(".myproduct/state.json").write_text("{}")
Path(".aider.chat.history.md").write_text("# chat\\n")
try:
    urllib.request.urlopen("https://telemetry.example.com/v1/ping", timeout=10)
except Exception as exc:
    sys.stderr.write(f"telemetry: {exc}\\n")
report("complete", summary="nothing to change")
"""


def _session(pytester, *args: str):
    agent_script(pytester.path / "agent.py", PRODUCT)
    make_task(pytester.path, "S01", checks=CHECKS, forbidden_effects={"network": True})
    return run_pytest(
        pytester, "--agent-isolation", "bwrap", "--agent-cmd", "python3 agent.py",
        "--agent-record", "runs/r", *args, timeout=300,
    )  # fmt: skip


def test_declared_product_state_and_background_hosts_are_not_the_agents(pytester):
    result = _session(
        pytester,
        "--agent-product-path=.myproduct",
        "--agent-product-path=.aider*",
        "--agent-background-host=telemetry.example.com",
    )
    run = load_results(pytester.path / "runs" / "r")["tasks"]["S01"]["runs"][0]
    ev = run["evidence"]
    assert run["critical_failed"] == [], (run["critical_failed"], result.stdout.str()[-3000:])
    assert ev["network_attempts"] == 0 and ev["background_requests"] == 1, ev
    events = (pytester.path / "runs" / "r" / "raw" / "S01" / "r1" / "events.jsonl").read_text().splitlines()
    background = [e for e in map(json.loads, events) if e.get("type") == "background_request"]
    assert [(b["host"], b["allowed"]) for b in background] == [("telemetry.example.com", False)], background
    assert sorted(ev["leftovers"]) == [
        ".aider.chat.history.md (product state)",
        ".myproduct/state.json (product state)",
    ]
    assert result.ret == 0
    manifest = json.loads((pytester.path / "runs" / "r" / "runtime-manifest.json").read_text())
    iso = manifest["identity"]["isolation"]
    assert iso["background_hosts"] == ["telemetry.example.com"] and iso["product_paths"] == [".aider*", ".myproduct"]


def test_undeclared_product_state_and_hosts_stay_the_agents(pytester):
    result = _session(pytester)
    run = load_results(pytester.path / "runs" / "r")["tasks"]["S01"]["runs"][0]
    assert {"tree-unchanged", "fx"} <= set(run["critical_failed"]), run["critical_failed"]
    assert run["evidence"]["network_attempts"] >= 1
    assert result.ret == 1


def test_a_declared_path_covers_only_itself(pytester):
    # the product's directory is declared, the chat history is not: that one stays the agent's change
    result = _session(pytester, "--agent-product-path=.myproduct", "--agent-background-host=telemetry.example.com")
    run = load_results(pytester.path / "runs" / "r")["tasks"]["S01"]["runs"][0]
    assert run["critical_failed"] == ["tree-unchanged"], run["critical_failed"]
    assert result.ret == 1


def test_a_background_host_that_is_also_allowed_is_one_usage_error(pytester):
    result = _session(
        pytester, "--agent-background-host=telemetry.example.com", "--agent-allow-host=telemetry.example.com"
    )
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, out[-3000:]
    assert any("--agent-background-host telemetry.example.com" in ln for ln in out.splitlines()), out[-3000:]
    assert "Traceback" not in out and not (pytester.path / "runs" / "r" / "results.json").exists()
