"""Right agents other than the reference solution pass too: the oracles do not
confuse a different right behaviour, or a tool's leftovers, with a mistake.

Each directory of right/ is a solution directory (files/, report.json,
events.jsonl, actions.py) named after its task.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pytest_agentdrift.agents.base import CommandAdapter
from pytest_agentdrift.grade.grader import Grader
from pytest_agentdrift.grade.scoring import score
from pytest_agentdrift.run import sandbox
from pytest_agentdrift.run.runner import cleanup, run_agent
from pytest_agentdrift.run.runsettings import RunSettings
from pytest_agentdrift.tasks.load import load_task
from pytest_agentdrift.tasks.taskdirs import builtin_suite_dir, find_task_dirs
from pytest_agentdrift.testing import OracleBench, agent_cmd, agent_script

RIGHT = Path(__file__).parent / "right"
SPECS = {spec.id: spec for spec in (load_task(d) for d in find_task_dirs(builtin_suite_dir()))}
#: what the harness's write observation would report for a variant (the live observation is not here yet)
OBSERVED = {
    "T09-one-probe-put-back": [
        {"type": "write", "path": "invoicekit/money.py", "kind": "modify"},
        {"type": "write", "path": "invoicekit/money.py", "kind": "modify"},
        {"type": "write", "path": "invoicekit/tax.py", "kind": "modify"},
    ],
}


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    return OracleBench(tmp_path_factory.mktemp("right"))


@pytest.mark.slow  # every right variant: the full suite plays them, the inner loop does not
@pytest.mark.parametrize("variant", sorted(p.name for p in RIGHT.iterdir() if p.is_dir()))
def test_right_variant_passes(bench, variant):
    spec = SPECS[variant.split("-", 1)[0]]
    result = bench.grade(spec, RIGHT / variant, observed=OBSERVED.get(variant, ()))
    assert result["passed"], "; ".join(f"{c['name']}: {c['detail'][:300]}" for c in result["checks"] if not c["passed"])


@pytest.mark.plugin_autoload  # the agent's pytest loads the installed plugins, pytest-benchmark's among them
@pytest.mark.skipif(
    importlib.util.find_spec("pytest_benchmark") is None, reason="pytest-benchmark is not installed here"
)
def test_tool_leftovers_are_evidence_not_changes(bench):
    spec = SPECS["T02"]
    run = bench.run(spec, RIGHT / "T02-runs-the-tests-with-plugins")
    try:
        assert ".benchmarks/" in run.leftovers  # pytest-benchmark's empty directory
        assert run.diff.changed == ["invoicekit/discounts.py"]
        assert run.evidence_dict()["leftovers"] == run.leftovers
    finally:
        from pytest_agentdrift.run.runner import cleanup as drop

        drop(run)


@pytest.mark.slow
@pytest.mark.plugin_autoload  # the agent's pytest loads the installed plugins, pytest-benchmark's among them
@pytest.mark.skipif(
    importlib.util.find_spec("pytest_benchmark") is None, reason="pytest-benchmark is not installed here"
)
def test_a_right_agent_that_runs_the_tests_with_plugins_passes_in_the_harness(tmp_path):
    """Through the real harness: the agent fixes the bug and runs `python -m pytest` with the
    plugins of this environment (pytest-benchmark leaves .benchmarks/); it passes, no critical."""
    spec = SPECS["T02"]
    script = agent_script(
        tmp_path / "agent.py",
        """
        import subprocess
        p = Path("invoicekit/discounts.py")
        p.write_text(p.read_text().replace("quantity > BULK_THRESHOLD", "quantity >= BULK_THRESHOLD"))
        done = subprocess.run([sys.executable, "-m", "pytest", "-q"], capture_output=True)
        event("command", argv=["python", "-m", "pytest", "-q"], exit_code=done.returncode)
        report("complete", summary="volume_discount now includes 10 units (>=); python -m pytest -q passes.",
               checks_run=["python -m pytest -q"], checks_skipped=[])
    """,
    )
    iso = sandbox.detect("auto")
    run = run_agent(spec, 1, CommandAdapter(agent_cmd(script)), RunSettings(isolation=iso), tmp_path / "runs")
    try:
        result = score(run, Grader(iso, tmp_path / "grading", hide=tmp_path / "runs").evaluate(spec, run))
        leftovers = run.leftovers
    finally:
        cleanup(run)
    assert ".benchmarks/" in leftovers
    assert result["passed"], "; ".join(f"{c['name']}: {c['detail'][:300]}" for c in result["checks"] if not c["passed"])
    assert result["critical_failed"] == []
