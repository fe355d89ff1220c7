"""docs/ci.md's pooled-gate workflow, its run scripts executed by bash as the runner would: two nights
recorded into the pool, a pull request gated against it, and a re-run of that job, which decides again
on the commit's record instead of drawing new runs."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_ci_workflow import on_tasks

from conftest import DRIFTED_VARY

# the workflow runs as CI runs it: plugins load as installed
pytestmark = [pytest.mark.slow, pytest.mark.plugin_autoload]

CI_DOC = Path(__file__).parents[2] / "docs" / "ci.md"


def pooled_workflow() -> dict:
    blocks = re.findall(r"^```ya?ml\n(.*?)^```", CI_DOC.read_text(), re.M | re.S)
    (text,) = [b for b in blocks if b.startswith("name: agentdrift pooled gate")]
    return yaml.safe_load(text)


def step(workflow: dict, starts: str) -> str:
    (found,) = [s for s in workflow["jobs"]["agentdrift"]["steps"] if s.get("name", "").startswith(starts)]
    return found["run"]


def bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def test_a_rerun_of_a_red_pull_request_job_decides_again_on_the_same_record(tmp_path):
    workflow = pooled_workflow()
    # one task, T07, the one the drifted agent breaks: its new critical failure against the pool's six runs is
    # detectable alone
    args = on_tasks(workflow["env"]["AGENTDRIFT_ARGS"], tmp_path, ("T07",))
    # the workflow's console scripts (pytest, agentdrift) from this interpreter's environment
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "AGENTDRIFT_ARGS": args, "PATH": path}

    nightly = step(workflow, "Record tonight's run")
    for _ in range(2):
        night = bash(nightly, tmp_path, env)
        assert night.returncode == 0, night.stdout[-3000:] + night.stderr[-2000:]
    assert len(list((tmp_path / "runs" / "nightly").iterdir())) == 2

    # the pull request: the drifted reference agent, which writes what T07 forbids, its changes declared
    # in the ini, where the re-run's `agentdrift compare` reads them as the session did
    varied = [v for v in DRIFTED_VARY if v != "--agent-vary"]
    (tmp_path / "pytest.ini").write_text("[pytest]\nagent_vary =\n" + "".join(f"    {v}\n" for v in varied))
    env = {**env, "AGENTDRIFT_ARGS": args.replace("--agent reference", "--agent reference-drifted")}
    gate = step(workflow, "Gate the pull request")
    first = bash(gate, tmp_path, env)
    assert first.returncode == 1, first.stdout[-3000:] + first.stderr[-2000:]
    closing = first.stdout.strip().splitlines()[-1]
    assert closing.startswith("agentdrift: exit 1 — gate regression: new critical failure T07"), closing
    record = tmp_path / "runs" / "candidate"
    before = tree_digest(record)

    again = bash(gate, tmp_path, env)  # the job re-run, its record restored from the cache
    assert again.returncode == 1, again.stdout[-3000:] + again.stderr[-2000:]
    assert again.stdout.strip().splitlines()[-1] == closing  # the same decision, in the same words
    assert tree_digest(record) == before  # no run drawn afresh, nothing in the record rewritten
