"""Benchmark: the nightly pool and the confirming gate end to end, with real sessions under -n 2.

A flaky home-made agent (the reference agent run through --agent-cmd, which leaves a stray file behind
at the flake rate, failing a critical scope check of any task that forbids writes) is recorded on
--nights nights of --k runs each into one directory, the pool. Then --prs unchanged pull requests (the
same agent) and --prs changed ones (on T07 the agent also writes the override T07 forbids, in half its
runs: a critical behaviour that appeared) are gated against the pool with --agent-confirm. It prints,
per arm: how many PRs were blocked (for the changed ones: blocked naming T07 and the new check), the
mean agent runs, wall time and pooled runs per task, and beside them what compare/nullsim.py predicts
for the same design (same tasks, flake rate, pool size, k and cap) over 2,000 simulated PRs: the
sessions' rates should sit within their binomial error of the simulation's. Prints, asserts nothing.

    python benchmarks/bench_pooled_gate_sessions.py [--nights 10] [--prs 10] [--flake 0.05] [--cap 30]
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

SUITE = Path(__file__).resolve().parents[1] / "pytest_agentdrift" / "suite"

AGENT = '''"""The reference agent, plus a stray file at the flake rate, plus (AGENT_MODE=changed) the override
T07 forbids in half its runs."""
import os
import random
import subprocess
import sys
from pathlib import Path

rc = subprocess.call([sys.executable, "-m", "pytest_agentdrift.agents.reference", "--task-dir", sys.argv[1]])
draw = random.SystemRandom()
if draw.random() < float(os.environ["AGENT_FLAKE"]):
    Path("scratch.txt").write_text("left behind\\n")
if os.environ["AGENT_MODE"] == "changed" and os.environ["AGENTDRIFT_TASK_ID"] == "T07" and draw.random() < 0.5:
    Path("deploy/overrides").mkdir(parents=True, exist_ok=True)
    Path("deploy/overrides/vat-2026.toml").write_text("rate = 0.25\\n")
sys.exit(rc)
'''

#: what the harness cannot observe of this agent, declared (docs/agents.md, a home-made agent)
DECLARE = """model_id = "reference"
model_options = {}
permission_mode = "auto"
sandbox = "workspace-write"
built_in_tools = ["edit", "shell"]
temperature = 0.0
seed = 0
max_output_tokens = 4096
budget_tokens_per_task = 100000
tool_timeout_s = 60
model_endpoint = "none"
"""
INI = """[pytest]
agent_declare = agent.toml
agent_accept_unobserved =
    env_image_digest
    server_revision
    model_stamp
    auto_update_state
"""


def project(root: Path, tasks: list[str]) -> list[str]:
    """The tasks, the agent, its declaration and the ini in ``root``; the sessions' common arguments."""
    for task in SUITE.iterdir():
        if task.name[:3] in tasks:
            shutil.copytree(task, root / "tasks" / task.name)
    (root / "flaky_agent.py").write_text(AGENT)
    (root / "agent.toml").write_text(DECLARE)
    (root / "pytest.ini").write_text(INI)
    agent = f"{sys.executable} {root / 'flaky_agent.py'} {{task_dir}}"
    return ["tasks", "--agent-cmd", agent, "--agent-env", "AGENT_FLAKE", "--agent-env", "AGENT_MODE", "-n", "2"]


def session(root: Path, args: list[str], mode: str, flake: float) -> tuple[int, str, float, str]:
    env = {**os.environ, "AGENT_FLAKE": str(flake), "AGENT_MODE": mode}
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q", *args]
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=1800)
    lines = done.stdout.strip().splitlines()
    variation = next((x.strip() for x in lines if "night-to-night variation" in x), "")
    return done.returncode, lines[-1] if lines else done.stderr[-500:], time.perf_counter() - t0, variation


def runs_in(record: Path) -> int:
    doc = json.loads((record / "results.json").read_text())
    return sum(len(t["runs"]) for t in doc["tasks"].values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=10)
    parser.add_argument("--prs", type=int, default=10)
    parser.add_argument("--flake", type=float, default=0.05)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--cap", type=int, default=30)
    parser.add_argument("--tasks", nargs="+", default=["T01", "T07"])
    parser.add_argument("--sim-prs", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentdrift-pool-e2e-") as tmp:
        root = Path(tmp)
        common = project(root, args.tasks)
        t0 = time.perf_counter()
        for night in range(args.nights):
            rec = ["--agent-k", str(args.k), "--agent-fail-on", "none", "--agent-record", f"runs/nightly/n{night:02d}"]
            code, line, _, _ = session(root, common + rec, "same", args.flake)
            if code != 0:
                raise SystemExit(f"night {night}: exit {code}: {line}")
        nights_s = time.perf_counter() - t0
        gate = ["--agent-baseline", "runs/nightly", "--agent-gate", "regression", "--agent-k", str(args.k)]
        gate += ["--agent-confirm", str(args.cap)]
        rows, variation = {}, ""
        for mode in ("same", "changed"):
            blocked, named, runs, wall, lines = 0, 0, 0, 0.0, []
            for i in range(args.prs):
                record = root / "runs" / f"pr-{mode}-{i:02d}"
                code, line, secs, variation = session(
                    root, common + gate + ["--agent-record", str(record)], mode, args.flake
                )
                if code not in (0, 1):
                    raise SystemExit(f"{mode} PR {i}: exit {code}: {line}")
                blocked += code == 1
                named += code == 1 and "T07 override-not-written" in line
                runs += runs_in(record)
                wall += secs
                lines.append(line)
            rows[mode] = (blocked, named, runs / args.prs, wall / args.prs, lines)
    print(
        f"{len(args.tasks)} tasks ({', '.join(args.tasks)}), flake {args.flake:g}, {args.nights} nights of k {args.k}"
    )
    print(f"(a pool of {args.nights * args.k} runs per task, recorded in {nights_s:.0f} s), PRs: k {args.k} to a cap")
    print(f"of {args.cap}, -n 2, {args.prs} unchanged and {args.prs} changed; every PR faces the same pool:")
    print(f"  {variation}")
    print()
    from pytest_agentdrift.compare.nullsim import PoolDesign, pool_rates

    design = PoolDesign(len(args.tasks), args.flake, args.nights * args.k, k=args.k, cap=args.cap)
    sim_null = pool_rates(design, args.sim_prs)
    sim_new = pool_rates(PoolDesign(**{**design.__dict__, "change": "new"}), args.sim_prs)
    print("| pull requests | blocked (sessions) | simulated | runs per PR (sessions) | simulated | wall per PR |")
    print("|---|---|---|---|---|---|")
    b, _, r, w, _ = rows["same"]
    print(
        f"| unchanged | {b}/{args.prs} | {100 * sim_null['rate']:.1f} % | {r:.1f} | {sim_null['runs']:.1f} | {w:.0f} s |"
    )
    b, n, r, w, _ = rows["changed"]
    print(
        f"| changed (T07, half its runs) | {n}/{args.prs} naming T07 ({b} blocked) | {100 * sim_new['rate']:.0f} % "
        f"| {r:.1f} | {sim_new['runs']:.1f} | {w:.0f} s |"
    )
    print()
    for mode in ("same", "changed"):
        print(f"closing lines, {mode}:")
        for line in rows[mode][4]:
            print(f"  {line}")


if __name__ == "__main__":
    main()
