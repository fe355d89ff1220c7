"""The commands of docs/examples/agentdrift-gate.yml, run as the workflow runs them, on the builtin suite."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

WORKFLOW = Path(__file__).parents[2] / "docs" / "examples" / "agentdrift-gate.yml"


def workflow_commands() -> tuple[str, list[str]]:
    """AGENTDRIFT_ARGS and every `pytest ...` / `agentdrift ...` line of the workflow's run blocks, in order."""
    text = WORKFLOW.read_text()
    args = re.search(r"^\s*AGENTDRIFT_ARGS:\s*(.+?)\s*(#.*)?$", text, re.M).group(1)
    commands = [line.strip() for line in text.splitlines() if re.match(r"^\s*(pytest|agentdrift) ", line)]
    return args, commands


def sh(cmd: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    argv = shlex.split(os.path.expandvars(cmd.replace("$AGENTDRIFT_ARGS", env["AGENTDRIFT_ARGS"])))
    # the workflow's console scripts, from this interpreter
    exe = [sys.executable, "-m", "pytest"] if argv[0] == "pytest" else [sys.executable, "-m", "pytest_agentdrift"]
    return subprocess.run(exe + argv[1:], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_the_workflow_runs_its_commands(tmp_path):
    args, commands = workflow_commands()
    record, compare, summary = commands  # the three commands the workflow runs
    assert "--agent-fail-on none" in record and "--agent-gate regression" in compare
    env = {**os.environ, "AGENTDRIFT_ARGS": args, "GITHUB_STEP_SUMMARY": str(tmp_path / "step-summary.md")}

    base = sh(record, tmp_path, env)
    assert base.returncode == 0, base.stdout[-3000:] + base.stderr[-2000:]
    assert base.stdout.strip().splitlines()[-1].startswith("agentdrift: exit 0 — recorded runs/baseline complete")

    gate = sh(compare, tmp_path, env)
    assert gate.returncode == 0, gate.stdout[-3000:] + gate.stderr[-2000:]
    closing = gate.stdout.strip().splitlines()[-1]
    assert re.match(
        r"agentdrift: exit 0 — gate regression: no regression detected \(smallest detectable: \d+ pp\)", closing
    )
    assert (tmp_path / "runs" / "junit.xml").is_file()

    out = sh(summary, tmp_path, env)
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "runs" / "summary.md").read_text()
    assert f"**{closing}**" in text and "Regression gate: **pass**" in text
    assert len(text.encode()) <= 60000

    # the drifted reference agent on the same baseline: the gate fails, naming its new critical failures
    drifted = compare.replace("--agent-record runs/candidate", "--agent-record runs/drifted")
    env_drift = {
        **env,
        "AGENTDRIFT_ARGS": args.replace("--agent reference", "--agent reference-drifted")
        + " --agent-vary cli_version --agent-vary command --agent-vary agent",
    }
    bad = sh(drifted, tmp_path, env_drift)
    assert bad.returncode == 1, bad.stdout[-3000:]
    line = bad.stdout.strip().splitlines()[-1]
    assert line.startswith("agentdrift: exit 1 — gate regression: new critical failure T0")
    assert "T07 " in line and "override-not-written" in line
    small = sh("agentdrift summary runs/drifted --max-bytes 1500 --output runs/small.md", tmp_path, env)
    assert small.returncode == 0
    small_text = (tmp_path / "runs" / "small.md").read_text()
    assert len(small_text.encode()) <= 1500 and "agentdrift: exit 1" in small_text
