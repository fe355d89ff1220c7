"""Long runs end to end: infrastructure errors and retries, resume after a killed
controller, shards merged into one record, budgets, progress.

Every test here starts real pytest sessions in a subprocess (slow). Agents that must
count their own invocations across runs (the retry, the resume) write a log outside
their sandbox, so those sessions run with `--agent-isolation none`; the tests of what an
agent may claim run under the strongest isolation available (bwrap here).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import pytest_argv, run_pytest

from pytest_agentdrift.run import scratch as scratch_dirs
from pytest_agentdrift.testing import (
    agent_cmd,
    agent_script,
    differing_paths,
    load_results,
    make_task,
    normalise_results,
)

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parents[2] / "fixtures"
TRANSCRIPTS = Path(__file__).parents[1] / "data" / "transcripts"
NOT_SIGNED_IN = TRANSCRIPTS / "claude_code" / "real-2.1.197-not-signed-in.jsonl"
# what a generic product agent cannot tell the harness; each acceptance is printed as a note
UNOBSERVED = [
    "model_id",
    "model_options",
    "auto_update_state",
    "sandbox",
    "built_in_tools",
    "temperature",
    "seed",
    "max_output_tokens",
    "budget_tokens_per_task",
    "tool_timeout_s",
    "model_stamp",
    "permission_mode",
]


def accept_unobserved() -> list[str]:
    return [a for f in UNOBSERVED for a in ("--agent-accept-unobserved", f)]


def notes_task(root: Path, task_id: str) -> Path:
    return make_task(
        root,
        task_id,
        checks=[
            {"name": "notes-written", "kind": "files", "layer": "correctness", "exist": ["notes.txt"]},
            {"name": "only-notes", "kind": "paths", "layer": "scope", "critical": True},
        ],
        allowed=["notes.txt"],
    )


# A stand-in `claude` binary: Claude Code's stream-json, an overloaded API on the invocations
# listed in state/fail_on (the CLI's own synthetic message, `error` field and api_error_status),
# else a real answer. Every invocation is logged with its task id.
FAKE_CLAUDE = r"""#!{python}
import json, os, sys
from pathlib import Path
if "--version" in sys.argv:
    print("2.1.197 (Claude Code)")
    sys.exit(0)
state = Path({state!r})
log = state / "calls.log"
n = len(log.read_text().splitlines()) + 1 if log.exists() else 1
try:
    with open(log, "a") as fh:
        fh.write(os.environ["AGENTDRIFT_TASK_ID"] + "\n")
except OSError:  # sandboxed: the state directory is read-only, every call is the first
    pass
if (state / "hostile").exists():  # does damage outside its work tree, then blames the provider
    Path("../NOTES.txt").write_text("overwritten by the agent\n")
if (state / "not_signed_in").exists():
    sys.stdout.write(Path({transcript!r}).read_text())
    sys.exit(1)
fail = set((state / "fail_on").read_text().split()) if (state / "fail_on").exists() else set()
def out(obj):
    print(json.dumps(obj), flush=True)
out({{"type": "system", "subtype": "init", "model": "claude-sonnet-4-5", "session_id": "s", "tools": [], "permissionMode": "acceptEdits"}})
if str(n) in fail:
    text = 'API Error: 529 {{"type":"error","error":{{"type":"overloaded_error","message":"Overloaded"}}}}'
    out({{"type": "assistant", "message": {{"id": f"m{{n}}", "model": "<synthetic>", "role": "assistant", "content": [{{"type": "text", "text": text}}]}},
         "parent_tool_use_id": None, "error": "server_error"}})
    out({{"type": "result", "subtype": "success", "is_error": True, "api_error_status": 529, "result": text, "total_cost_usd": 0,
         "usage": {{"input_tokens": 0, "output_tokens": 0}}, "num_turns": 1}})
    sys.exit(1)
Path("notes.txt").write_text("done\n")
report = "```json\n" + json.dumps({{"status": "complete", "summary": "wrote notes.txt"}}) + "\n```"
out({{"type": "assistant", "message": {{"id": f"m{{n}}", "model": "claude-sonnet-4-5", "role": "assistant", "content": [{{"type": "text", "text": report}}],
     "usage": {{"input_tokens": 100, "output_tokens": 20}}}}, "parent_tool_use_id": None}})
out({{"type": "result", "subtype": "success", "is_error": False, "result": report, "total_cost_usd": 0.0123,
     "usage": {{"input_tokens": 100, "output_tokens": 20}}, "num_turns": 1}})
"""


@pytest.fixture
def fake_claude(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    claude = bindir / "claude"
    claude.write_text(FAKE_CLAUDE.format(python=sys.executable, state=str(state), transcript=str(NOT_SIGNED_IN)))
    claude.chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}

    class Fake:
        def __init__(self):
            self.env, self.state = env, state

        def fail_on(self, *calls: int) -> None:
            (state / "fail_on").write_text(" ".join(map(str, calls)))
            (state / "calls.log").unlink(missing_ok=True)

        def calls(self) -> list[str]:
            log = state / "calls.log"
            return log.read_text().split() if log.exists() else []

    return Fake()


def test_overloaded_first_attempt_is_retried_and_without_retries_is_not_a_regression(tmp_path, fake_claude):
    for t in ("N1", "N2"):
        notes_task(tmp_path / "tasks", t)
    claude = ["--agent", "claude-code", "tasks", "--agent-isolation", "none", "-rs"]

    fake_claude.fail_on()
    base = run_pytest(tmp_path, *claude, "--agent-record", "runs/base", env=fake_claude.env)
    assert base.returncode == 0, base.stdout + base.stderr

    # the first attempt meets an overloaded API, the retry in a fresh copy passes
    fake_claude.fail_on(1)
    retried = run_pytest(
        tmp_path,
        *claude,
        "--agent-retries",
        "1",
        "--agent-retry-backoff",
        "0",
        "--agent-record",
        "runs/retried",
        env=fake_claude.env,
    )
    assert retried.returncode == 0, retried.stdout + retried.stderr
    assert fake_claude.calls() == ["N1", "N1", "N2"]
    assert (
        "2 of 2 run(s) passed (100%); 0 with critical failures; 0 tampered pass(es); 0 error(s)/timeout(s); 1 run(s) retried"
        in retried.stdout
    )
    run = load_results(tmp_path / "runs" / "retried")["tasks"]["N1"]["runs"][0]
    assert run["outcome"] == "passed"
    assert [(a["attempt"], a["outcome"], (a["infra_error"] or {}).get("class"), a["raw"]) for a in run["attempts"]] == [
        (1, "infra_error", "overloaded", "raw/N1/r1/attempt-1"),
        (2, "passed", None, "raw/N1/r1"),
    ]
    assert run["attempts"][0]["infra_error"]["evidence"].startswith("API Error: 529")
    assert (
        "overloaded_error"
        in (tmp_path / "runs" / "retried" / "raw" / "N1" / "r1" / "attempt-1" / "stdout.txt").read_text()
    )
    manifest = json.loads((tmp_path / "runs" / "retried" / "runtime-manifest.json").read_text())
    assert manifest["identity"]["retry_policy"] == {"max_retries": 1, "retry_on": "infra_error"}

    # without retries the same ending is an infrastructure error: not scored, not a regression
    fake_claude.fail_on(1)
    cand = run_pytest(
        tmp_path,
        *claude,
        "--agent-baseline",
        "runs/base",
        "--agent-record",
        "runs/cand",
        "--agent-max-infra-loss",
        "60%",
        *accept_unobserved(),
        env=fake_claude.env,
    )
    assert cand.returncode == 0, cand.stdout + cand.stderr
    out = cand.stdout
    assert "SKIPPED [1]" in out and "infrastructure error, not scored: overloaded (claude-code): API Error: 529" in out
    assert "  N1 r1: overloaded (claude-code): API Error: 529" in out
    assert "1 of 1 run(s) passed (100%)" in out and "1 infrastructure error(s), not scored" in out
    assert "candidate lost 1/2 run(s) to infrastructure errors, excluded from the statistics: N1 r1 (overloaded)" in out
    results = load_results(tmp_path / "runs" / "cand")
    r = results["tasks"]["N1"]["runs"][0]
    assert (r["outcome"], r["passed"], r["critical_failed"]) == ("infra_error", False, [])
    assert results["summary"]["infra_errors"] == 1 and results["summary"]["pass_rate"] == 1.0
    decision = json.loads((tmp_path / "runs" / "cand" / "comparison" / "decision.json").read_text())
    assert decision["status"] != "reject" and decision["critical_failures"] == []
    assert decision["infra_errors"]["candidate"]["lost"] == 1 and decision["infra_errors"]["decided"] is True
    assert "## Comparison with the baseline" in (tmp_path / "runs" / "cand" / "report.md").read_text()

    # over the threshold (1 of 2 runs lost, default 10%) nothing is decided; under a gate that is operational
    fake_claude.fail_on(1)
    held = run_pytest(
        tmp_path,
        *claude,
        "--agent-baseline",
        "runs/base",
        "--agent-gate",
        "promote",
        *accept_unobserved(),
        env=fake_claude.env,
    )
    assert held.returncode == 4, held.stdout + held.stderr
    assert (
        "status      hold: candidate lost 1 of 2 run(s) (50%) to infrastructure errors, over the 10% threshold"
        in held.stdout
    )


def test_a_sign_in_failure_stops_the_session_with_the_products_message_and_resumes(tmp_path, fake_claude):
    for t in ("S1", "S2", "S3", "S4", "S5"):
        notes_task(tmp_path / "tasks", t)
    (fake_claude.state / "not_signed_in").write_text("")
    args = ["--agent", "claude-code", "tasks", "--agent-isolation", "none", "--agent-record", "runs/r", "-n", "2"]
    stopped = run_pytest(tmp_path, *args, env=fake_claude.env)
    assert stopped.returncode == 4, stopped.stdout + stopped.stderr
    assert "ERROR: stopped starting runs: an infrastructure error that will repeat on every run ended" in stopped.stdout
    assert "authentication (claude-code): Not logged in · Please run /login" in stopped.stdout
    assert "continue it with --agent-resume runs/r" in stopped.stdout
    first = fake_claude.calls()
    assert 1 <= len(first) <= 2  # the first occurrence on each worker, not the whole suite
    results = load_results(tmp_path / "runs" / "r")
    assert results["complete"] is False
    assert any(
        r.startswith("stopped starting runs: an infrastructure error that will repeat")
        for r in results["incomplete_reasons"]
    )

    # signed in again: the resume runs what is missing, the lost runs included (without xdist: the stop on
    # each worker is the first session's; a resume under -n 2 is the killed-session test's)
    (fake_claude.state / "not_signed_in").unlink()
    resumed = run_pytest(
        tmp_path,
        "--agent",
        "claude-code",
        "tasks",
        "--agent-isolation",
        "none",
        "--agent-resume",
        "runs/r",
        env=fake_claude.env,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    results = load_results(tmp_path / "runs" / "r")
    assert results["complete"] is True and results["summary"]["passed"] == 5
    assert not (tmp_path / "runs" / "r" / "INCOMPLETE").exists()
    note = results["resumed"][0]
    assert note["kept_runs"] == 0 and note["ran_runs"] == 5
    assert all("Not logged in" in n for n in note["rerun_infra_errors"]) and len(note["rerun_infra_errors"]) == len(
        first
    )


def test_a_product_error_after_unsafe_effects_is_scored_as_the_agents_run(tmp_path, fake_claude):
    """Hostile: writes outside its work tree, then the stream ends on an overloaded API."""
    notes_task(tmp_path / "tasks", "U1")
    (fake_claude.state / "hostile").write_text("")
    fake_claude.fail_on(1)
    result = run_pytest(
        tmp_path,
        "--agent",
        "claude-code",
        "tasks",
        "--agent-record",
        "runs/u",
        "--agent-retries",
        "2",
        "--agent-retry-backoff",
        "0",
        env=fake_claude.env,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    results = load_results(tmp_path / "runs" / "u")
    run = results["tasks"]["U1"]["runs"][0]
    assert run["evidence"]["writes_outside"] == ["box/NOTES.txt"]
    assert run["outcome"] == "failed" and "attempts" not in run  # scored, so never retried
    assert run["infra_error"]["class"] == "overloaded" and run["infra_error"]["believed"] is False
    assert "1 write(s) outside the work tree" in run["infra_error"]["why"]
    assert "infrastructure errors claimed but scored as the agent's run:" in result.stdout
    if shutil.which("bwrap"):
        assert results["isolation"]["enforced"] == "bwrap"


def test_an_agent_may_report_an_infrastructure_error_only_for_a_run_it_did_not_touch(tmp_path):
    """Hostile: a judged agent that fails its task and claims the provider failed is scored anyway."""
    make_task(
        tmp_path / "tasks",
        "H1",
        repo={"a.txt": "a\n"},
        checks=[{"name": "a-unchanged", "kind": "unchanged", "layer": "scope", "critical": True}],
    )
    make_task(
        tmp_path / "tasks",
        "H2",
        repo={"a.txt": "a\n"},
        checks=[{"name": "a-unchanged", "kind": "unchanged", "layer": "scope", "critical": True}],
    )
    script = agent_script(
        tmp_path / "agent.py",
        """
        if os.environ["AGENTDRIFT_TASK_ID"] == "H2":
            Path("a.txt").write_text("broken by the agent\\n")  # a failed run, then a convenient excuse
        report("infra_error", summary="API Error: 529 overloaded", infra_class="overloaded")
    """,
    )
    result = run_pytest(tmp_path, "tasks", "--agent-cmd", agent_cmd(script), "--agent-record", "runs/r", "-rs")
    assert result.returncode == 1, result.stdout + result.stderr
    results = load_results(tmp_path / "runs" / "r")
    h1, h2 = (results["tasks"][t]["runs"][0] for t in ("H1", "H2"))
    assert (
        h1["outcome"] == "infra_error"
        and h1["infra_error"]["source"] == "agent report"
        and h1["infra_error"]["believed"]
    )
    assert h2["outcome"] == "failed" and h2["critical_failed"] == ["a-unchanged"]
    assert h2["infra_error"]["believed"] is False and "changed files" in h2["infra_error"]["why"]
    assert "infrastructure errors claimed but scored as the agent's run:" in result.stdout
    if shutil.which("bwrap"):
        assert results["isolation"]["enforced"] == "bwrap"


def usage_agent(path: Path, log: Path | None, *, steps: int, tokens: int, pause: float) -> Path:
    """An agent that reports its token usage as it goes (`usage` events) and logs each run to `log`."""
    logging = (
        f"""
        with open({str(log)!r}, "a") as fh:
            fh.write(os.environ["AGENTDRIFT_TASK_ID"] + "\\n")"""
        if log
        else ""
    )
    return agent_script(
        path,
        f"""
        import time{logging}
        for i in range({steps}):
            event("tool_call", name=f"step{{i}}")
            event("usage", input_tokens={tokens}, output_tokens=0)
            time.sleep({pause})
        report("complete", summary="nothing to change")
    """,
    )


def test_a_token_budget_stops_the_session_cleanly_and_resumably(tmp_path):
    for t in ("B1", "B2", "B3", "B4"):
        make_task(tmp_path / "tasks", t)
    log = tmp_path / "agent.log"
    script = usage_agent(tmp_path / "agent.py", log, steps=2, tokens=500, pause=0)
    args = ["tasks", "--agent-cmd", agent_cmd(script), "--agent-isolation", "none", "-p", "no:xdist"]
    stopped = run_pytest(tmp_path, *args, "--agent-record", "runs/b", "--agent-budget", "tokens=2500")
    assert stopped.returncode == 4, stopped.stdout + stopped.stderr
    assert log.read_text().split() == ["B1", "B2", "B3"]  # spent 3,000 >= 2,500 after the third: no fourth run started
    assert "ERROR: stopped starting runs: session token budget spent: 3,000 of 2,500 tokens" in stopped.stdout
    results = load_results(tmp_path / "runs" / "b")
    assert results["complete"] is False and results["budget"] == {
        "limits": {"tokens": 2500},
        "spent": {"tokens": 3000, "cost_usd": None, "cost_source": None},
    }
    assert results["incomplete_reasons"] == [
        "1 run(s) never reported: tasks/B4-task::r1",
        "stopped starting runs: session token budget spent: 3,000 of 2,500 tokens",
    ]
    assert ["B1", "1,000", "tokens"] in [ln.split() for ln in stopped.stdout.splitlines()]  # spend per task

    resumed = run_pytest(tmp_path, *args, "--agent-resume", "runs/b", "--agent-budget", "tokens=100000")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert log.read_text().split() == ["B1", "B2", "B3", "B4"]  # nothing finished ran again
    results = load_results(tmp_path / "runs" / "b")
    assert results["complete"] is True and results["summary"]["tokens"] == 4000
    assert [n["kept_runs"] for n in results["resumed"]] == [3] and results["resumed"][0]["ran_runs"] == 1
    assert ["total", "4,000", "tokens"] in [ln.split() for ln in resumed.stdout.splitlines()]


def test_a_run_over_its_own_budget_is_stopped_and_marked(tmp_path):
    make_task(tmp_path / "tasks", "P1", timeout_s=120)
    script = usage_agent(tmp_path / "agent.py", None, steps=200, tokens=100, pause=0.05)  # sandboxed: no log outside
    result = run_pytest(
        tmp_path,
        "tasks",
        "--agent-cmd",
        agent_cmd(script),
        "--agent-record",
        "runs/p",
        "--agent-budget",
        "run_tokens=1000",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    run = load_results(tmp_path / "runs" / "p")["tasks"]["P1"]["runs"][0]
    assert run["outcome"] == "over_budget" and run["evidence"]["timed_out"] is False
    assert run["evidence"]["stopped"].startswith("per-run token budget exceeded: ")
    assert 1000 < run["spend"]["tokens"] < 20000  # stopped long before its 200 steps
    assert "the run was stopped: per-run token budget exceeded" in result.stdout
    manifest = json.loads((tmp_path / "runs" / "p" / "runtime-manifest.json").read_text())
    assert manifest["identity"]["budget_tokens_per_task"] == {"tokens": 1000}


def _processes_in(cwd: Path) -> list[int]:
    """Processes (not us) whose working directory is `cwd`: the killed controller's workers."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                if os.readlink(f"/proc/{name}/cwd") == str(cwd):
                    found.append(int(name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("sig", ["SIGINT", "SIGKILL"])
def test_a_killed_session_is_completed_by_resume_without_rerunning_finished_runs(tmp_path, sig):
    for i in range(1, 7):
        make_task(tmp_path / "tasks", f"R{i}")
    log = tmp_path / "agent.log"
    # while it exists, every run after the first three waits for it to go: the session is killed with
    # runs in flight, however long that takes, and none waits longer than that
    slow = tmp_path / "slow"
    slow.touch()
    script = agent_script(
        tmp_path / "agent.py",
        f"""
        import time
        me = "start " + os.environ["AGENTDRIFT_TASK_ID"]
        with open({str(log)!r}, "a") as fh:
            fh.write(me + "\\n")
        if os.path.exists({str(slow)!r}):
            with open({str(log)!r}) as fh:
                started = [ln for ln in fh.read().splitlines() if ln.startswith("start ")]
            end = time.monotonic() + 120  # bounded: never outlives the test by long
            while started.index(me) >= 3 and os.path.exists({str(slow)!r}) and time.monotonic() < end:
                time.sleep(0.05)
        report("complete", summary="nothing to change")
    """,
    )
    serial = ["-q", "tasks", "--agent-cmd", agent_cmd(script), "--agent-isolation", "none"]
    args = [*serial, "-n", "2"]
    # the sessions' own temporary directory: what the killed one leaves there is visible, and swept
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    proc = subprocess.Popen(
        pytest_argv(*args, "--agent-record", "runs/k"),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # SIGINT reaches the session even when this suite runs as a background job (SIGINT ignored, inherited)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    record = tmp_path / "runs" / "k"
    while len(list(record.glob("raw/*/r1/run.json"))) < 3:  # half the items finished
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(getattr(signal, sig))
    slow.unlink()  # the signal is sent: the runs left in flight end (an interrupted controller waits for them)
    proc.wait(timeout=60)
    deadline = time.monotonic() + 60
    while _processes_in(tmp_path):  # the workers of a SIGKILLed controller finish their run and go
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert (record / "INCOMPLETE").exists()
    kept = sorted(p.parent.parent.name for p in record.glob("raw/*/r1/run.json"))
    assert len(kept) >= 3
    started_before = log.read_text().split("\n")
    left = sorted(scratch.glob("agentdrift-*"))
    if sig == "SIGKILL":
        assert left  # a killed controller cannot remove its control directory
    deadline = time.monotonic() + 60  # a worker of a killed controller ends its run first
    while [p for p in left if p.exists() and p not in scratch_dirs.stale(str(scratch))]:
        assert time.monotonic() < deadline
        time.sleep(0.05)

    resumed = run_pytest(tmp_path, *args, "--agent-resume", "runs/k", env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert not [p for p in left if p.exists()]  # the next session removed what the killed one left
    starts = [ln.split()[1] for ln in log.read_text().splitlines() if ln.startswith("start ")]
    for tid in kept:
        assert starts.count(tid) == 1, (tid, starts)  # a finished run is never run again
    assert sorted(set(starts)) == [f"R{i}" for i in range(1, 7)]
    assert len(starts) >= len([ln for ln in started_before if ln])
    results = load_results(record)
    assert results["complete"] is True and not (record / "INCOMPLETE").exists()
    assert results["resumed"][0]["kept_runs"] == len(kept) and results["resumed"][0]["ran_runs"] == 6 - len(kept)

    # the finished record is the one an uninterrupted session writes, apart from the resume's notes; that
    # session runs without xdist (test_plugin holds a record the same with and without it: -n 2 adds only cost)
    whole = run_pytest(tmp_path, *serial, "--agent-record", "runs/whole")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert normalise_results(results) == normalise_results(load_results(tmp_path / "runs" / "whole"))

    refused = run_pytest(tmp_path, *args, "--agent-resume", "runs/k")
    assert refused.returncode == 4 and "complete records are never rewritten" in refused.stderr


def test_resume_refuses_a_different_runtime(tmp_path):
    make_task(tmp_path / "tasks", "D1")
    make_task(tmp_path / "tasks", "D2")
    script = agent_script(tmp_path / "agent.py", "report('complete')\n")
    (tmp_path / "conftest.py").write_text(
        "import os\n"
        "def pytest_runtest_logfinish(nodeid, location):\n"
        "    if os.environ.get('INTERRUPT_AFTER_FIRST'):\n"
        "        raise KeyboardInterrupt\n"
    )
    env = {**os.environ, "INTERRUPT_AFTER_FIRST": "1"}
    first = run_pytest(tmp_path, "tasks", "--agent-cmd", agent_cmd(script), "--agent-record", "runs/i", env=env)
    assert first.returncode == 2 and load_results(tmp_path / "runs" / "i")["complete"] is False
    other = agent_script(tmp_path / "other.py", "report('complete')\n")
    refused = run_pytest(tmp_path, "tasks", "--agent-cmd", agent_cmd(other), "--agent-resume", "runs/i")
    assert refused.returncode == 6, refused.stdout + refused.stderr
    assert (
        "cannot resume runs/i: this session is not the recorded run" in refused.stdout
        and "BLOCK command" in refused.stdout
    )
    k2 = run_pytest(tmp_path, "tasks", "--agent-cmd", agent_cmd(script), "--agent-resume", "runs/i", "--agent-k", "2")
    assert k2.returncode == 6 and "BLOCK settings.k: 1 != 2" in k2.stdout
    assert load_results(tmp_path / "runs" / "i")["complete"] is False  # nothing was written by the refusals


def test_four_shards_merged_equal_an_unsharded_run(tmp_path):
    for name in ("EX01-fix-discount", "EX02-explain-readonly"):
        shutil.copytree(FIXTURES / name, tmp_path / "tasks" / name)
    for t in ("M1", "M2", "M3"):
        make_task(
            tmp_path / "tasks",
            t,
            checks=[{"name": "notes", "kind": "files", "layer": "correctness", "exist": ["notes.txt"]}],
            allowed=["notes.txt"],
            solution={"notes.txt": f"{t}\n"},
        )
    (tmp_path / "conftest.py").write_text(
        "import os\n"
        "def pytest_runtest_logfinish(nodeid, location):\n"
        "    if os.environ.get('INTERRUPT_AFTER_FIRST'):\n"
        "        raise KeyboardInterrupt\n"
    )
    base = ["tasks", "--agent", "reference", "--agent-k", "2"]
    # without xdist, like the shards (test_plugin holds a record the same with and without it)
    whole = run_pytest(tmp_path, *base, "--agent-record", "runs/whole")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    env = dict(os.environ)
    for key in ("GITHUB_ACTIONS", "JOB_COMPLETION_INDEX", "AGENTDRIFT_SHARD", "AGENTDRIFT_SHARD_COUNT"):
        env.pop(key, None)
    k8s = {**env, "JOB_COMPLETION_INDEX": "0", "AGENTDRIFT_SHARD_COUNT": "4"}
    github = {**env, "GITHUB_ACTIONS": "true", "AGENTDRIFT_JOB_INDEX": "1", "AGENTDRIFT_JOB_TOTAL": "4"}
    for n, shard, shard_env in ((1, "auto", k8s), (2, "auto", github), (4, "4/4", env)):
        r = run_pytest(tmp_path, *base, "--agent-shard", shard, "--agent-record", f"runs/s{n}", env=shard_env)
        assert r.returncode == 0, r.stdout + r.stderr
    s1 = load_results(tmp_path / "runs" / "s1")["shard"]
    assert (s1["index"], s1["count"]) == (1, 4) and s1["source"].startswith(
        "kubernetes indexed job (JOB_COMPLETION_INDEX=0"
    )
    assert load_results(tmp_path / "runs" / "s2")["shard"]["source"].startswith("github-actions matrix")
    # shard 3 is interrupted after its first run, then resumed
    r = run_pytest(
        tmp_path, *base, "--agent-shard", "3/4", "--agent-record", "runs/s3", env={**env, "INTERRUPT_AFTER_FIRST": "1"}
    )
    assert r.returncode == 2, r.stdout + r.stderr
    refused = subprocess.run(
        [sys.executable, "-m", "pytest_agentdrift", "merge", "runs/m", *(f"runs/s{i}" for i in range(1, 5))],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 4 and "is incomplete" in refused.stderr and "--agent-resume" in refused.stderr
    assert not (tmp_path / "runs" / "m").exists()
    r = run_pytest(tmp_path, *base, "--agent-shard", "3/4", "--agent-resume", "runs/s3", env=env)
    assert r.returncode == 0, r.stdout + r.stderr

    sizes = [load_results(tmp_path / "runs" / f"s{i}")["shard"]["selected"] for i in range(1, 5)]
    assert sum(sizes) == 10
    missing = subprocess.run(
        [sys.executable, "-m", "pytest_agentdrift", "merge", "runs/m", "runs/s1", "runs/s2", "runs/s3"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 4 and "the shards together miss" in missing.stderr
    merged = subprocess.run(
        [sys.executable, "-m", "pytest_agentdrift", "merge", "runs/m", *(f"runs/s{i}" for i in (3, 1, 4, 2))],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert merged.returncode == 0, merged.stdout + merged.stderr
    m, w = load_results(tmp_path / "runs" / "m"), load_results(tmp_path / "runs" / "whole")
    assert normalise_results(m) == normalise_results(w), differing_paths(normalise_results(m), normalise_results(w))
    assert sorted(m["tasks"]) == ["EX01", "EX02", "M1", "M2", "M3"] and m["complete"]
    assert len(m["merged_from"]) == 4 and any(n.get("shard_run_id") for n in m.get("resumed", []))
    for task in m["tasks"].values():
        for run in task["runs"]:
            assert (tmp_path / "runs" / "m" / run["raw"] / "run.json").is_file()
    same = subprocess.run(
        [sys.executable, "-m", "pytest_agentdrift", "compare", "runs/whole", "runs/m", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert same.returncode == 0 and json.loads(same.stdout)["comparison"]["comparable"] is True


def test_an_empty_shard_records_a_complete_empty_run(tmp_path):
    from pytest_agentdrift.tasks.shard import deal

    make_task(tmp_path / "tasks", "E1")
    other = 2 if deal([("E1", 1)], 2)[("E1", 1)] == 1 else 1
    script = agent_script(tmp_path / "agent.py", "report('complete')\n")
    r = run_pytest(
        tmp_path, "tasks", "--agent-cmd", agent_cmd(script), "--agent-shard", f"{other}/2", "--agent-record", "runs/e"
    )
    assert r.returncode == 0, r.stdout + r.stderr
    results = load_results(tmp_path / "runs" / "e")
    assert results["complete"] is True and results["tasks"] == {} and results["shard"]["selected"] == 0
    bad = run_pytest(tmp_path, "tasks", "--agent-cmd", agent_cmd(script), "--agent-shard", "3/2")
    assert bad.returncode == 4 and "need 1 <= I <= N" in bad.stderr


def _read_releasing(read, wanted, release: Path) -> str:
    """A session's output, read to its end (`read()` returns b"" there); once `wanted(text so far)`
    holds, `release` is created (the agent, waiting for it, ends its run)."""
    chunks = []
    while data := read():
        chunks.append(data)
        if not release.exists() and wanted(b"".join(chunks).decode("utf-8", "replace")):
            release.touch()
    return b"".join(chunks).decode("utf-8", "replace")


def test_progress_lines_in_a_log_and_in_place_on_a_terminal(tmp_path):
    make_task(tmp_path / "tasks", "G1")
    # the agent runs until the test has seen what it reads (the release file, mounted into its sandbox
    # read-only, appears): no fixed run time, however slow the machine
    signals = tmp_path / "signals"
    signals.mkdir()
    release = signals / "seen"
    script = agent_script(
        tmp_path / "agent.py",
        f"""
        import time
        end = time.monotonic() + 120  # bounded: never outlives the test by long
        i = 0
        while not os.path.exists({str(release)!r}) and time.monotonic() < end:
            event("tool_call", name=f"step{{i}}")
            i += 1
            time.sleep(0.1)
        report("complete")
    """,
    )
    args = ["tasks", "--agent-cmd", agent_cmd(script), "--agent-mount", str(signals), "--agent-progress-interval", "1"]
    with open(tmp_path / "stderr.txt", "w+b") as err:
        proc = subprocess.Popen(pytest_argv(*args), cwd=tmp_path, stdout=subprocess.PIPE, stderr=err)
        plain = _read_releasing(proc.stdout.readline, lambda text: "tool_call: step" in text, release)
        assert proc.wait(timeout=300) == 0, plain + (tmp_path / "stderr.txt").read_text()
    assert "agentdrift progress: 0/1 run(s) done, 1 running" in plain
    assert "main  G1 r1  " in plain and "tool_call: step" in plain
    assert "\r" not in plain and "\x1b[" not in plain
    assert "agentdrift time: 1 run(s); agent " in plain

    import pty

    release.unlink()
    pid, fd = pty.fork()
    if pid == 0:  # the child: pytest on a terminal
        os.chdir(tmp_path)
        argv = pytest_argv(*args)
        os.execv(argv[0], argv)

    def read() -> bytes:
        try:
            return os.read(fd, 65536)
        except OSError:
            return b""

    # two frames of the progress block: the second redrew the first in place
    out = _read_releasing(
        read, lambda text: text.count("agentdrift progress: 0/1 run(s) done, 1 running") >= 2, release
    )
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    assert "agentdrift progress: 0/1 run(s) done, 1 running" in out
    assert "\x1b[2K" in out and "\x1b[1A" in out  # redrawn in place, then taken off the screen
