"""Hostile agents against the resource limits, under bubblewrap.

One session runs five hogs with small limits (memory, processes, disk, /dev/shm,
files) and a benign task that must still pass under the same limits; each hog's
run is stopped or refused, recorded `resource_exceeded` with the limit it broke
and the mechanism that enforced it, and the session goes on. A second session
leaves hundreds of sleeping processes behind and checks that every one of them is
counted in `leftover_processes`. Everything stays small: hundreds of MB, hundreds
of processes, every loop bounded.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from helpers import ram_backed
from hostile_helpers import BENIGN, needs_bwrap, run_session

MiB = 1 << 20
#: the run directories on a tmpfs: the disk filler's 200 MB are memory too, and a writer that fast may
#: reach the memory limit before the watcher stops it at the disk limit (both are then recorded)
DISK_IS_MEMORY = ram_backed(tempfile.gettempdir())


def _cgroups() -> set[str]:
    from pytest_agentdrift.run.limits import layout

    return set(layout().controllers)


pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hostile-limits"), needs_bwrap()]

HOGS = {
    # 600 MB of touched heap against a 200 MB memory limit
    "HM1": """
        blob = bytearray(600 * 1024 * 1024)
        report("complete", summary="allocated %d bytes" % len(blob))
    """,
    # a bounded fork loop of 300 children that clean up after themselves, against procs=64
    "HP1": """
        import time
        kids, refused = [], 0
        for i in range(300):
            try:
                pid = os.fork()
            except OSError:
                refused += 1
                continue
            if pid == 0:
                time.sleep(2)
                os._exit(0)
            kids.append(pid)
        for pid in kids:
            os.waitpid(pid, 0)
        report("complete", summary="forked %d, refused %d" % (len(kids), refused))
    """,
    # 200 MB in 20 MB files into the work tree and the private home, against disk=50M
    "HD1": """
        chunk = b"x" * (1024 * 1024)
        for i in range(10):
            target = Path(os.environ["HOME"] if i % 2 else ".") / ("fill%d.bin" % i)
            with open(target, "wb") as fh:
                for _ in range(20):
                    fh.write(chunk)
        report("complete", summary="wrote 200 MB")
    """,
    # 100 MB into RAM-backed /dev/shm, against shm=32M; keeps what it could write
    "HS1": """
        import time
        try:  # bubblewrap's own /dev is RAM-backed too
            Path("/dev/hog").write_bytes(b"x" * 1024)
            dev = "written"
        except OSError as exc:
            dev = exc.strerror
        report("partial", summary="/dev: %s" % dev)  # before the run is stopped
        written = 0
        try:
            with open("/dev/shm/hog", "wb") as fh:
                for _ in range(100):
                    fh.write(b"x" * (1024 * 1024))
                    fh.flush()
                    written += 1
        except OSError:
            pass
        time.sleep(1)
        report("complete", summary="wrote %d MB to /dev/shm" % written)
    """,
    # 3000 entries in the work tree, against files=500; then it waits to be stopped, so how
    # fast the watcher is beside the writer (a loaded machine) never decides the outcome
    "HF1": """
        import time
        os.mkdir("many")
        for i in range(3000):
            Path("many/f%d" % i).write_text("")
        time.sleep(120)
        report("complete", summary="made 3000 files")
    """,
}
LIMITS = ["memory=200M", "procs=64", "disk=50M", "shm=32M", "tmp=32M", "files=500"]


def _session(
    root: Path, bodies: dict[str, str], limits: list[str], isolation: str = "auto", timeout: float = 180
) -> tuple[int, str, dict, Path]:
    limit_args = [arg for entry in limits for arg in ("--agent-limit", entry)]
    s = run_session(
        root,
        dict.fromkeys(bodies, {}),
        bodies,
        "--agent-timeout",
        "60",
        *limit_args,
        isolation=isolation,
        timeout=timeout,
    )
    return s.ret, s.out, s.results, s.run_dir


@pytest.fixture(scope="module")
def hogs(tmp_path_factory):
    ret, out, results, record = _session(tmp_path_factory.mktemp("hogs"), HOGS, LIMITS)
    assert "Traceback (most recent call last)" not in out and "INTERNALERROR" not in out, out
    assert results["complete"] is True, results["incomplete_reasons"]
    assert ret == 1, out
    return out, results, record


def _run(results: dict, task_id: str) -> dict:
    (run,) = results["tasks"][task_id]["runs"]
    return run


def test_the_session_went_on_and_the_benign_run_passed_under_the_same_limits(hogs):
    out, results, _ = hogs
    benign = _run(results, BENIGN)
    assert benign["outcome"] == "passed", benign
    assert benign["evidence"]["resource_exceeded"] == []
    assert results["summary"] == {**results["summary"], "runs": 6, "passed": 1, "errors": 5}
    assert results["settings"]["limits"] == {
        "memory": 200 * MiB,
        "procs": 64,
        "disk": 50 * MiB,
        "shm": 32 * MiB,
        "tmp": 32 * MiB,
        "files": 500,
    }
    hit = "resource limits hit: HD1 r1 (disk{}), HF1 r1 (files), HM1 r1 (memory), HP1 r1 (procs), HS1 r1 (shm)"
    assert hit.format("") in out or (DISK_IS_MEMORY and hit.format(", memory") in out), out[-2000:]
    assert "agentdrift: limits per run: memory 200 MiB, procs 64, disk 50 MiB, shm 32 MiB, tmp 32 MiB, files 500" in out


@pytest.mark.parametrize(
    ("task_id", "key"), [("HM1", "memory"), ("HP1", "procs"), ("HD1", "disk"), ("HS1", "shm"), ("HF1", "files")]
)
def test_each_hog_is_stopped_and_recorded_resource_exceeded(hogs, task_id, key):
    _, results, _ = hogs
    run = _run(results, task_id)
    ev = run["evidence"]
    assert run["outcome"] == "resource_exceeded", (run["outcome"], ev["limits"], ev["observation"])
    assert run["passed"] is False
    also = {"memory"} if key == "disk" and DISK_IS_MEMORY else set()
    assert key in ev["resource_exceeded"] and set(ev["resource_exceeded"]) <= {key, *also}
    assert ev["limits"][key]["hit"] is True
    others = {k: v["hit"] for k, v in ev["limits"].items() if k != key and k not in also}
    assert not any(others.values()), others
    assert ev["timed_out"] is False, "a broken limit ends the run; it does not wait for the timeout"


def test_mechanisms_recorded_per_limit(hogs):
    _, results, _ = hogs
    limits = _run(results, BENIGN)["evidence"]["limits"]
    assert {k: v["limit"] for k, v in limits.items()} == results["settings"]["limits"]
    cg = _cgroups()
    assert limits["memory"]["enforced_by"] in (("cgroup-v1", "cgroup-v2") if "memory" in cg else ("rlimit-data",))
    assert limits["procs"]["enforced_by"] in (
        ("cgroup-v1", "cgroup-v2") if "pids" in cg else ("rlimit-nproc", "not-enforced")
    )
    assert limits["disk"]["enforced_by"] == "watcher+rlimit-fsize"
    assert limits["files"]["enforced_by"] == "watcher"
    assert limits["shm"]["enforced_by"] == limits["tmp"]["enforced_by"] == "bwrap-tmpfs-size"
    assert all(v["hit"] is False for v in limits.values())


@pytest.mark.skipif("memory" not in _cgroups(), reason="no memory cgroup here")
def test_memory_hog_was_killed_by_the_cgroup(hogs):
    ev = _run(hogs[1], "HM1")["evidence"]
    assert ev["limits"]["memory"]["oom_kills"] >= 1
    assert ev["limits"]["memory"]["peak"] <= 200 * MiB
    assert ev["exit_code"] in (128 + 9, -9)  # SIGKILL: the OOM killer, or the harness ending the run right after


@pytest.mark.skipif("pids" not in _cgroups(), reason="no pids cgroup here")
def test_fork_loop_was_refused_past_the_limit(hogs):
    run = _run(hogs[1], "HP1")
    ev = run["evidence"]
    assert ev["limits"]["procs"]["forks_refused"] >= 1
    assert ev["limits"]["procs"]["peak"] <= 64


def test_disk_filler_is_caught_and_the_run_fails(hogs):
    run = _run(hogs[1], "HD1")
    ev = run["evidence"]
    peak = ev["limits"]["disk"]["peak"]
    # The disk watcher polls: it always catches and records the breach (never a silent pass), but a
    # writer at disk speed can finish within one poll (on a quiet machine 200 MB took 0.4 s), so the
    # test asserts the verdict, not how much was written before the stop (docs/security.md).
    assert ev["limits"]["disk"]["hit"] is True and peak > 50 * MiB, peak
    assert run["outcome"] == "resource_exceeded" and run["passed"] is False


def test_shm_filler_met_a_full_tmpfs(hogs):
    run = _run(hogs[1], "HS1")
    assert 31 * MiB < run["evidence"]["limits"]["shm"]["peak"] <= 32 * MiB
    assert run["report"]["summary"] == "/dev: Read-only file system", run["report"]  # stopped before its last report


def test_many_files_stopped_past_the_limit(hogs):
    ev = _run(hogs[1], "HF1")["evidence"]
    assert ev["limits"]["files"]["peak"] > 500  # how far past it depends on the machine's speed, not asserted
    assert ev["exit_code"] != 0


def test_report_md_shows_the_limits(hogs):
    text = (hogs[2] / "report.md").read_text()
    assert "- resource limits per run: memory 200 MiB (" in text
    assert "disk 50 MiB (watcher+rlimit-fsize)" in text and "files 500 (watcher)" in text
    assert text.count("**resource_exceeded**") == 5
    assert "resource limits hit: HD1 r1 (disk)" in text or (DISK_IS_MEMORY and "HD1 r1 (disk, memory)" in text)


# ---- processes that outlive the agent -------------------------------------------------------------

SLEEPERS = """
    import subprocess
    subprocess.run(["sh", "-c", "i=0; while [ $i -lt 300 ]; do sleep 30 & i=$((i+1)); done"], check=True)
    report("complete", summary="left 300 sleepers")
"""


@pytest.fixture(scope="module", params=["auto", "none"])
def sleepers(request, tmp_path_factory):
    if request.param == "none" and "pids" not in _cgroups() and "memory" not in _cgroups():
        pytest.skip("without a cgroup the unisolated count relies on the run token (tested in test_hostile_agents)")
    return _session(
        tmp_path_factory.mktemp(f"sleepers-{request.param}"), {"HL1": SLEEPERS}, ["procs=1000"], isolation=request.param
    )


def test_every_process_that_outlived_the_agent_is_counted(sleepers):
    _, _, results, _ = sleepers
    run = _run(results, "HL1")
    ev = run["evidence"]
    assert ev["leftover_processes"] == 300, (ev["leftover_processes"], ev["observation"])
    assert run["outcome"] == "passed"  # evidence, not a limit: procs=1000 was never reached
    if results["isolation"]["enforced"] == "bwrap":
        # counted by program name at the moment init looks: a child caught between fork and exec is still `sh`
        survivors = ev["observation"]["survivor_programs"]
        assert sum(survivors.values()) == 300 and set(survivors) <= {"sleep", "sh"}, survivors
    assert _run(results, BENIGN)["evidence"]["leftover_processes"] == 0
    assert json.dumps(results).count('"resource_exceeded": ["') == 0
