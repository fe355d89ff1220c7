"""Every exit path of an agentdrift session ends with one line naming what set the status."""

from __future__ import annotations

import pytest
from helpers import last_line, run_pytest

from pytest_agentdrift.testing import agent_cmd, agent_script, make_task

pytestmark = pytest.mark.slow


def test_operational_error_at_session_start_is_4_with_its_line(pytester):
    make_task(pytester.path, "E01")
    (pytester.path / "runs" / "r").mkdir(parents=True)
    (pytester.path / "runs" / "r" / "results.json").write_text("{}")
    result = run_pytest(pytester, "--agent", "reference", "--agent-record", "runs/r")
    assert result.ret == 4
    assert last_line(result).startswith("agentdrift: exit 4 — runs/r: ")
    assert "!!!" not in result.stdout.str()


def test_collection_error_is_2_with_its_line(pytester):
    d = make_task(pytester.path, "E02")
    (d / "task.toml").write_text('id = "E02"\n')  # no title, no checks
    result = run_pytest(pytester, "--agent", "reference")
    assert result.ret == 2
    assert last_line(result).startswith("agentdrift: exit 2 — interrupted (a collection error")


def test_no_task_collected_is_5_with_its_line(pytester):
    pytester.mkdir("empty")
    result = run_pytest(pytester, "--agent", "reference", "empty")
    assert result.ret == 5
    assert last_line(result) == "agentdrift: exit 5 — no task collected"


def test_failed_and_passed_items_without_a_gate(pytester):
    make_task(
        pytester.path,
        "E03",
        checks=[{"name": "must-change", "kind": "paths", "layer": "scope", "must_change": ["notes.txt"]}],
        allowed=["notes.txt"],
    )
    lazy = agent_script(pytester.path / "lazy.py", "report('complete')\n")
    result = run_pytest(pytester, "--agent-cmd", agent_cmd(lazy))
    assert result.ret == 1
    assert last_line(result) == "agentdrift: exit 1 — 1 of 1 run(s) failed: E03 r1"
    busy = agent_script(pytester.path / "busy.py", "Path('notes.txt').write_text('x')\nreport('complete')\n")
    ok = run_pytest(pytester, "--agent-cmd", agent_cmd(busy))
    assert ok.ret == 0 and last_line(ok) == "agentdrift: exit 0 — all 1 run(s) passed"


def test_an_incomplete_record_is_4_in_every_mode(pytester):
    make_task(pytester.path, "K01")
    make_task(pytester.path, "K02")
    script = agent_script(pytester.path / "agent.py", "report('complete')\n")
    pytester.makeconftest(
        "import os\ndef pytest_runtest_call(item):\n    if 'K01' in item.nodeid:\n        os._exit(1)\n"
    )
    result = run_pytest(
        pytester, "--agent-cmd", agent_cmd(script), "--agent-record", "runs/r", "--agent-fail-on", "none", "-n", "2"
    )
    assert result.ret == 4
    assert last_line(result).startswith("agentdrift: exit 4 — the run is incomplete: ")
    assert "agentdrift: exit 4 — the run is incomplete" in (pytester.path / "runs" / "r" / "report.md").read_text()
