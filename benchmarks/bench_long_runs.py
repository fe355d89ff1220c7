"""What long runs cost: ratios on this machine, printed; nothing asserted about time.

1. per item: N tasks with a no-op agent (`--agent-cmd true`, isolation `auto`)
   against N trivial pytest tests, both as one pytest session: the harness's
   per-item cost as a ratio;
2. `-n 2` against `-n 0` with agents that sleep (the speedup xdist gives when
   the agent, not the harness, takes the time);
3. `agentdrift merge` of 10 shards that hold N tasks together (synthetic
   records with raw files, no agent run), and the shard balance of N tasks;
4. resuming a session stopped when 90 % of N tasks were done, against a full
   session: what the resume costs beyond running the missing 10 %.

    python benchmarks/bench_long_runs.py [--tasks 1000] [--sleep-tasks 8] [--sleep 2] [--resume-tasks 200] [--skip 1,2,3,4]

The defaults take a few minutes on two cores; --tasks 100 is a quick look.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_agentdrift.tasks.taskspec import LAYERS  # noqa: E402
from pytest_agentdrift.testing import agent_cmd, agent_script, make_task  # noqa: E402

PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q"]


def timed(argv: list[str], cwd: Path, ok=(0,)) -> float:
    if argv[:3] == PYTEST[:3]:
        # a basetemp of its own: pytest's clean-up of other sessions' temporary directories is not what is measured
        argv = [*argv, f"--basetemp={tempfile.mkdtemp(prefix='bt-', dir=cwd)}"]
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(
            f"{' '.join(argv[:8])} ... exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
        )
    return elapsed


def make_tasks(root: Path, n: int, prefix: str = "T") -> None:
    for i in range(n):
        make_task(root, f"{prefix}{i:04d}", checks=[{"name": "same", "kind": "unchanged", "layer": "scope"}])


def bench_per_item(work: Path, n: int) -> None:
    d = work / "per-item"
    make_tasks(d / "tasks", n)
    (d / "test_trivial.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('i', range(%d))\ndef test_trivial(i):\n    assert i >= 0\n" % n
    )
    plain = timed([*PYTEST, "test_trivial.py"], d)
    harness = timed(
        [*PYTEST, "tasks", "--agent-cmd", shutil.which("true") or "/bin/true", "--agent-progress", "off"], d
    )
    print(f"1. per item, {n} items, one session each (startup included)")
    print(f"   {n} trivial pytest tests     {plain:8.1f} s   {plain / n * 1000:8.2f} ms/item")
    print(f"   {n} tasks, no-op agent       {harness:8.1f} s   {harness / n * 1000:8.2f} ms/item")
    print(f"   ratio harness / plain item  {harness / plain:8.1f}x   (+{(harness - plain) / n * 1000:.1f} ms per item)")


def bench_xdist(work: Path, n: int, sleep: float) -> None:
    d = work / "xdist"
    make_tasks(d / "tasks", n, "S")
    script = agent_script(d / "agent.py", f"import time\ntime.sleep({sleep})\nreport('complete')\n")
    args = [*PYTEST, "tasks", "--agent-cmd", agent_cmd(script), "--agent-progress", "off"]
    serial = timed([*args, "-n", "0"], d)
    parallel = timed([*args, "-n", "2"], d)
    print(f"2. {n} agents sleeping {sleep:g} s each ({n * sleep:g} s of agent time)")
    print(f"   -n 0  {serial:7.1f} s      -n 2  {parallel:7.1f} s      speedup {serial / parallel:4.2f}x (ideal 2.00x)")


def _run(tid: str, rep: int) -> dict:
    return {
        "rep": rep,
        "outcome": "passed",
        "passed": True,
        "tampered_pass": False,
        "critical_failed": [],
        "failed_checks": [],
        "layers": {k: "n/a" for k in LAYERS},
        "checks": [
            {
                "name": "same",
                "kind": "unchanged",
                "layer": "scope",
                "critical": False,
                "passed": True,
                "detail": "unchanged",
            }
        ],
        "evidence": {
            "exit_code": 0,
            "timed_out": False,
            "duration_s": 0.1,
            "changed": {"added": [], "modified": [], "deleted": [], "mode": []},
            "writes_outside": [],
            "git_mutations": [],
            "network_attempts": 0,
            "tamper": {},
        },
        "usage": {"input_tokens": None, "output_tokens": None, "cached_tokens": None, "cost_usd": None},
        "spend": {"tokens": None, "cost_usd": None, "cost_source": None},
        "raw": f"raw/{tid}/r{rep}",
    }


def bench_merge(work: Path, n: int, shards: int = 10) -> None:
    from pytest_agentdrift.grade.scoring import summarise
    from pytest_agentdrift.manifest.capture import runtime_id
    from pytest_agentdrift.manifest.identity import IDENTITY_FIELDS
    from pytest_agentdrift.tasks.shard import Shard, select
    from pytest_agentdrift.vocabulary import SCHEMA_VERSION

    d = work / "merge"
    tasks = [f"T{i:04d}" for i in range(n)]
    identity = {f: "x" for f in IDENTITY_FIELDS}
    manifest = {"schema_version": SCHEMA_VERSION, "identity": identity, "runtime_id": runtime_id(identity)}
    sizes = []
    for i in range(1, shards + 1):
        chosen = select([(t, 1) for t in tasks], Shard(i, shards, "option"))
        sizes.append(len(chosen))
        sd = d / f"shard-{i}"
        results = {
            "schema_version": 1,
            "plugin_version": "0.1.0",
            "run_id": f"run-{i}",
            "started_at": "2026-01-01T00:00:00Z",
            "finished_at": "2026-01-01T01:00:00Z",
            "complete": True,
            "incomplete_reasons": [],
            "agent": {"name": "cmd", "argv": ["true"], "version": "unobserved"},
            "isolation": {
                "requested": "auto",
                "enforced": "none",
                "network": "not_enforced",
                "filesystem": "not_enforced",
            },
            "settings": {"k": 1},
            "runtime_id": manifest["runtime_id"],
            "task_set_id": "sha256:t",
            "evaluator_id": "sha256:e",
            "tasks": {},
            "workers": {},
            "summary": {},
            "shard": {"index": i, "count": shards, "source": "option", "selected": len(chosen)},
        }
        sd.mkdir(parents=True)  # a shard may select no task when there are fewer tasks than shards
        for tid, rep in chosen:
            run = _run(tid, rep)
            results["tasks"][tid] = {
                "title": tid,
                "suite": "s",
                "behavior": "b",
                "task_digest": "sha256:" + "0" * 64,
                "runs": [run],
            }
            raw = sd / run["raw"]
            raw.mkdir(parents=True)
            for name in (
                "stdout.txt",
                "stderr.txt",
                "events.jsonl",
                "diff.patch",
                "report.json",
                "checks.json",
                "argv.json",
            ):
                (raw / name).write_text("x\n")
            (raw / "run.json").write_text(json.dumps({"task_id": tid, "rep": rep, "result": run}))
        results["summary"] = summarise(results["tasks"])
        (sd / "results.json").write_text(json.dumps(results))
        (sd / "runtime-manifest.json").write_text(json.dumps(manifest))
        (sd / "source-manifest.json").write_text(json.dumps({"tasks": tasks, "files": []}))
    files = n * 8
    elapsed = timed(
        [sys.executable, "-m", "pytest_agentdrift", "merge", "merged", *(f"shard-{i}" for i in range(1, shards + 1))], d
    )
    merged = json.loads((d / "merged" / "results.json").read_text())
    assert merged["summary"]["runs"] == n
    print(f"3. merge {shards} shards of {n} tasks together ({files} raw files)")
    print(
        f"   {elapsed:6.2f} s   {elapsed / n * 1000:6.2f} ms per task   shard sizes {min(sizes)}..{max(sizes)} (mean {n / shards:g})"
    )


def bench_resume(work: Path, n: int) -> None:
    d = work / "resume"
    make_tasks(d / "tasks", n, "R")
    script = agent_script(d / "agent.py", "event('usage', input_tokens=1, output_tokens=0)\nreport('complete')\n")
    args = [*PYTEST, "tasks", "--agent-cmd", agent_cmd(script), "--agent-progress", "off", "-p", "no:xdist"]
    full = timed([*args, "--agent-record", "runs/full"], d)
    done = int(n * 0.9)
    partial = timed([*args, "--agent-record", "runs/part", "--agent-budget", f"tokens={done}"], d, ok=(4,))
    resumed = timed([*args, "--agent-resume", "runs/part"], d)
    results = json.loads((d / "runs" / "part" / "results.json").read_text())
    assert results["complete"] and results["resumed"][0]["kept_runs"] == done
    share = (n - done) / n
    print(f"4. resume after {done} of {n} runs ({share:.0%} missing)")
    print(f"   full session {full:6.1f} s   stopped at 90 % {partial:6.1f} s   resume {resumed:6.1f} s")
    print(
        f"   resume / ({share:.0%} of the full session) = {resumed / (full * share):4.2f}x   "
        f"(startup and {done} kept runs read: {resumed - full * share:+.1f} s)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1000, help="tasks for benchmarks 1 and 3")
    ap.add_argument("--sleep-tasks", type=int, default=8)
    ap.add_argument("--sleep", type=float, default=2.0)
    ap.add_argument("--resume-tasks", type=int, default=200)
    ap.add_argument("--skip", default="", help="comma-separated benchmark numbers to skip")
    args = ap.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    from pytest_agentdrift.run.sandbox import detect

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPU(s), isolation auto = {detect('auto').mode}")
    with tempfile.TemporaryDirectory(prefix="agentdrift-bench-long-") as tmp:
        work = Path(tmp)
        if "1" not in skip:
            bench_per_item(work, args.tasks)
        if "2" not in skip:
            bench_xdist(work, args.sleep_tasks, args.sleep)
        if "3" not in skip:
            bench_merge(work, args.tasks)
        if "4" not in skip:
            bench_resume(work, args.resume_tasks)


if __name__ == "__main__":
    main()
