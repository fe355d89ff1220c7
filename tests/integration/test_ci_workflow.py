"""The commands of docs/examples/agentdrift-gate.yml and docs/scale.md's workflow, run as the workflows run them,
on builtin tasks."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# the workflow runs as CI runs it: plugins load as installed
pytestmark = [pytest.mark.slow, pytest.mark.plugin_autoload]

WORKFLOW = Path(__file__).parents[2] / "docs" / "examples" / "agentdrift-gate.yml"
SUITE = Path(__file__).parents[2] / "pytest_agentdrift" / "suite"
#: builtin tasks the drifted reference agent breaks: at the workflow's k of 1, five paired tasks are the
#: fewest for the gate to detect a regression (two cannot); the whole suite's outcomes are test_builtin_suite.py's
DRIFTED_TASKS = ("T06", "T07", "T08", "T09", "T12")
#: four cheap builtin tasks, one per shard of docs/scale.md's four-job matrix
SHARDED_TASKS = ("T01", "T04", "T07", "T12")


JUNIT_XSD = Path(__file__).parents[1] / "data" / "junit-10.xsd"  # the Jenkins xUnit plugin's schema
#: how the workflows pass AGENTDRIFT_ARGS: split once into an array (actionlint's shellcheck wants no bare $VAR)
SPLIT_ARGS = 'read -ra args <<< "$AGENTDRIFT_ARGS"'
ARGS_ARRAY = '"${args[@]}"'


def commands_of(text: str) -> list[str]:
    """Every `pytest ...` / `agentdrift ...` line of a workflow's run blocks, in order."""
    return [line.strip() for line in text.splitlines() if re.match(r"^\s*(?:run:\s*)?(pytest|agentdrift) ", line)]


def workflow_commands() -> tuple[str, list[str]]:
    """AGENTDRIFT_ARGS and the workflow's commands."""
    text = WORKFLOW.read_text()
    args = re.search(r"^\s*AGENTDRIFT_ARGS:\s*(.+?)\s*(#.*)?$", text, re.M).group(1)
    commands = commands_of(text)
    assert all(SPLIT_ARGS in text and ARGS_ARRAY in c for c in commands if c.startswith("pytest"))
    return args, commands


def on_tasks(args: str, cwd: Path, task_ids: tuple[str, ...]) -> str:
    """AGENTDRIFT_ARGS (the workflows' "your agent and tasks" knob) on copies of the given builtin tasks."""
    assert "--agent-suite builtin" in args
    for task in SUITE.iterdir():
        if task.name[:3] in task_ids:
            shutil.copytree(task, cwd / "tasks" / task.name)
    assert len(list((cwd / "tasks").iterdir())) == len(task_ids)
    return args.replace("--agent-suite builtin", "tasks")


def sh(cmd: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    cmd = cmd.removeprefix("run:").strip()
    cmd = cmd.replace(ARGS_ARRAY, env["AGENTDRIFT_ARGS"])
    # the step's environment, as the runner's shell expands it
    argv = shlex.split(re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), m.group(0)), cmd))
    # the workflow's console scripts, from this interpreter
    exe = [sys.executable, "-m", "pytest"] if argv[0] == "pytest" else [sys.executable, "-m", "pytest_agentdrift"]
    return subprocess.run(exe + argv[1:], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_the_workflow_runs_its_commands(tmp_path):
    args, commands = workflow_commands()
    record, compare, summary = commands  # the three commands the workflow runs
    assert "--agent-fail-on none" in record and "--agent-gate regression" in compare
    args = on_tasks(args, tmp_path, DRIFTED_TASKS)
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
    import xmlschema

    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(tmp_path / "runs" / "junit.xml"))

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
    # the closing line names the first blockers; decision.json holds them all
    drifted_decision = json.loads((tmp_path / "runs" / "drifted" / "comparison" / "decision.json").read_text())
    assert any(
        b.startswith("new critical failure T07 override-not-written")
        for b in drifted_decision["regression_gate"]["blockers"]
    )
    small = sh("agentdrift summary runs/drifted --max-bytes 1500 --output runs/small.md", tmp_path, env)
    assert small.returncode == 0
    small_text = (tmp_path / "runs" / "small.md").read_text()
    assert len(small_text.encode()) <= 1500 and "agentdrift: exit 1" in small_text

    # the drifted agent without --agent-vary is refused (6), and the summary step still posts the blocked fields
    refused_cmd = compare.replace("--agent-record runs/candidate", "--agent-record runs/refused")
    env_refused = {**env, "AGENTDRIFT_ARGS": args.replace("--agent reference", "--agent reference-drifted")}
    refused = sh(refused_cmd, tmp_path, env_refused)
    assert refused.returncode == 6, refused.stdout[-3000:]
    line = refused.stdout.strip().splitlines()[-1]
    assert line.startswith("agentdrift: exit 6 — refused: runs are not comparable")
    posted = sh(summary.replace("runs/candidate", "runs/refused"), tmp_path, env)
    assert posted.returncode == 0, posted.stderr
    text = (tmp_path / "runs" / "summary.md").read_text()
    assert f"**{line}**" in text and "| `cli_version` |" in text


def test_the_plugin_installs_from_a_wheel_without_an_index(tmp_path):
    """docs/ci.md's install path: a wheel built from the source (no index, no build isolation), installed
    with pip --no-index into a clean environment, carries the plugin, its suite, schemas and hooks."""
    # a copy of the source, as a clone would be: setuptools builds in the tree it is given
    src = tmp_path / "agentdrift-src"
    shutil.copytree(
        Path(__file__).parents[2],
        src,
        ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", "runs"),
    )
    dist = tmp_path / "vendor"
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["-w", str(dist), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
        env=clean,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = dist.glob("pytest_agentdrift-*-py3-none-any.whl")
    # a clean environment without a pip of its own (ensurepip costs seconds): this pip installs into it
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    inst = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-index", "--no-deps", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        env=clean,
    )
    assert inst.returncode == 0, inst.stderr[-3000:]
    probe = (
        "import importlib.metadata as m, importlib.util as u, pathlib, sys\n"
        "pkg = pathlib.Path(u.find_spec('pytest_agentdrift').origin).parent\n"
        "print(pkg)\n"
        "print(sorted(e.value for e in m.entry_points(group='pytest11')))\n"
        "print(len(list((pkg / 'suite').glob('T*/task.toml'))))\n"
        "print(sorted(p.name for p in (pkg / 'record' / 'schema').glob('*.json')))\n"
    )
    # -I: the clean environment only (no PYTHONPATH pointing at a source tree)
    out = subprocess.run([str(py), "-I", "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    pkg, entry, tasks, schemas = out.stdout.splitlines()
    assert pkg.startswith(str(venv)) and entry == "['pytest_agentdrift.plugin']"
    assert tasks == "12" and schemas == "['atif.schema.json', 'decision.schema.json', 'results.schema.json']"
    assert (venv / "bin" / "agentdrift").is_file()


SCALE = Path(__file__).parents[2] / "docs" / "scale.md"


def scale_workflow() -> dict:
    """The GitHub Actions workflow of docs/scale.md, parsed."""
    import yaml

    blocks = re.findall(r"^```yaml\n(.*?)^```", SCALE.read_text(), re.M | re.S)
    (text,) = [b for b in blocks if b.startswith("# .github/workflows/")]
    return yaml.safe_load(text)


def job_command(job: dict, prefix: str, step_name: str | None = None) -> str:
    """The one `pytest`/`agentdrift` line of a job's steps (of the named step, when given)."""
    found = [
        c
        for step in job["steps"]
        if "run" in step and (step_name is None or step.get("name") == step_name)
        for c in commands_of(step["run"])
        if c.startswith(prefix)
    ]
    assert len(found) == 1, found
    return found[0]


def test_the_scale_workflow_records_balanced_shards_merges_and_compares(tmp_path):
    """docs/scale.md's workflow as written: four matrix jobs record their shards (--agent-shard auto from the
    job index), merge makes one record, compare gates it against a baseline; the reference agent stands in
    for the documented one (AGENTDRIFT_ARGS is the workflow's knob for the agent)."""
    wf = scale_workflow()
    args, _ = workflow_commands()
    record = wf["jobs"]["record"]
    shards = record["strategy"]["matrix"]["shard"]
    shard_command = job_command(record, "pytest", "record the shard")
    assert shards == [1, 2, 3, 4] and "--agent-shard auto" in shard_command
    args = on_tasks(args, tmp_path, SHARDED_TASKS)
    env = {**os.environ, "AGENTDRIFT_ARGS": args, "GITHUB_ACTIONS": "true"}
    env.pop("AGENTDRIFT_SHARD", None)

    # the baseline release asset: the same command unsharded (as docs/scale.md says)
    base = sh(shard_command.replace(" --agent-shard auto", ""), tmp_path, {**env, "OUT": "runs/baseline"})
    assert base.returncode == 0, base.stdout[-3000:] + base.stderr[-2000:]
    sizes = []
    for index, shard in enumerate(shards):
        job_env = {
            **env,
            "AGENTDRIFT_JOB_INDEX": str(index),
            "AGENTDRIFT_JOB_TOTAL": str(len(shards)),
            "OUT": record["env"]["OUT"].replace("${{ matrix.shard }}", str(shard)),
        }
        out = sh(job_command(record, "pytest", "record the shard"), tmp_path, job_env)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
        results = json.loads((tmp_path / "runs" / f"shard-{shard}" / "results.json").read_text())
        assert results["shard"]["index"] == shard and results["shard"]["count"] == 4
        assert results["shard"]["source"].startswith("github-actions matrix")
        sizes.append(sum(len(t["runs"]) for t in results["tasks"].values()))
    assert sizes == [1, 1, 1, 1]  # four tasks, k = 1, four shards

    merged = sh(job_command(wf["jobs"]["merge"], "agentdrift merge"), tmp_path, env)
    assert merged.returncode == 0, merged.stdout[-3000:] + merged.stderr[-2000:]
    whole = json.loads((tmp_path / "runs" / "candidate" / "results.json").read_text())
    assert sorted(whole["tasks"]) == list(SHARDED_TASKS) and whole["complete"] is True

    compare = sh(job_command(wf["jobs"]["compare"], "agentdrift compare"), tmp_path, env)
    assert compare.returncode == 0, compare.stdout[-3000:] + compare.stderr[-2000:]
    assert "gate regression: no regression detected" in compare.stdout.strip().splitlines()[-1]
