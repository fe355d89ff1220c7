"""Bad input: each case is one clear error naming the file and the problem, no
traceback, nothing written, and the right exit code.

A malformed task directory is a collection error (pytest exit 2, "error during
collection") naming the file; bad options and unusable record / baseline
directories are usage errors (exit 4). Every session here asks to record
(`--agent-record runs/r`): refusing bad input must not create the record.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import fixture_group, nested_session_env, run_pytest

from pytest_agentdrift.testing import agent_cmd, agent_script, freeze, make_task
from pytest_agentdrift.vocabulary import SEAL_FILE

pytestmark = pytest.mark.slow  # every test here starts pytest sessions with agents


def xdist_group_of(item: pytest.Item) -> str | None:
    # the module's shared sessions are made once, by the worker that runs their readers
    return fixture_group(item, "bad-input", "malformed_session", "recorded_run")


BAD = "B01"
GOOD = "Z99"


def make_tasks(root: Path) -> Path:
    """A task to break (B01) and a good one beside it (Z99); returns B01's directory."""
    bad = make_task(root / "tasks", BAD)
    make_task(root / "tasks", GOOD)
    return bad


def snapshot(root: Path) -> dict[str, str]:
    """relpath -> sha256 of every file below root (to prove nothing was touched)."""
    if not root.exists():
        return {}
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def run(pytester: pytest.Pytester, *args: str, agent: str | None = None, record: str | None = "runs/r"):
    argv = ["tasks", "--agent-cmd", agent or f"{sys.executable} -c pass"]
    if record:
        argv += ["--agent-record", record]
    result = run_pytest(pytester, *argv, *args, timeout=60)
    return result, result.stdout.str() + "\n" + result.stderr.str()


def assert_clean_error(out: str) -> None:
    assert "Traceback" not in out, out
    assert "INTERNALERROR" not in out, out


# ---- malformed task directories: collection errors ------------------------------------------
def _rm(rel: str) -> Callable[[Path], None]:
    return lambda task: (task / rel).unlink()


def _write(rel: str, text: str | bytes, refreeze: bool = False) -> Callable[[Path], None]:
    def mutate(task: Path) -> None:
        p = task / rel
        p.write_bytes(text) if isinstance(text, bytes) else p.write_text(text)
        if refreeze:
            freeze(task)

    return mutate


def _sub_toml(old: str, new: str) -> Callable[[Path], None]:
    def mutate(task: Path) -> None:
        p = task / "task.toml"
        text = p.read_text()
        assert old in text
        p.write_text(text.replace(old, new))

    return mutate


def _symlink(target: str) -> Callable[[Path], None]:
    def mutate(task: Path) -> None:
        (task.parent.parent / "outside.txt").write_text("not part of the task\n")
        os.symlink(target, task / "repo" / "link.txt")
        freeze(task)  # a correctly frozen fixture: the symlink itself is the problem

    return mutate


def _edit_after_freeze(task: Path) -> None:
    with open(task / "repo" / "README.md", "a") as fh:
        fh.write("edited after freezing\n")


MALFORMED = {
    # case: (mutation, file named in the error (task-relative), problem words)
    "missing-task-md": (_rm("task.md"), "task.md", "missing"),
    "missing-task-toml": (_rm("task.toml"), "task.toml", "missing"),
    "invalid-toml": (_write("task.toml", 'id = "B01"\ntitle = \n'), "task.toml", "invalid TOML"),
    "invalid-json": (_write("expected-events.json", '{"require": [\n'), "expected-events.json", "invalid JSON"),
    "duplicate-json-keys": (
        _write("forbidden-effects.json", '{"network": true, "network": false}'),
        "forbidden-effects.json",
        "duplicate key 'network'",
    ),
    "unknown-check-kind": (
        _sub_toml('kind = "unchanged"', 'kind = "vibes_check"'),
        "task.toml",
        "unknown check kind 'vibes_check'",
    ),
    "unknown-layer": (_sub_toml('layer = "scope"', 'layer = "vibes"'), "task.toml", "unknown layer 'vibes'"),
    "allowed-path-dotdot": (_write("allowed-paths.txt", "src/*.py\n../x\n"), "allowed-paths.txt", "'../x'"),
    "allowed-path-absolute": (_write("allowed-paths.txt", "/etc/passwd\n"), "allowed-paths.txt", "absolute"),
    "symlink-outside-relative": (_symlink("../../../outside.txt"), "repo/link.txt", "outside the task"),
    "symlink-outside-absolute": (_symlink("/etc/passwd"), "repo/link.txt", "outside the task"),
    "tree-mismatch": (_edit_after_freeze, "initial-tree.sha256", "does not match"),
    "non-utf8-task-md": (_write("task.md", b"Fix the caf\xe9 menu.\n"), "task.md", "UTF-8"),
}


@pytest.fixture(scope="module")
def malformed_session(tmp_path_factory) -> dict:
    """Every malformed case as a task of its own (B01.. in the cases' order) beside the good Z99, in
    one session: each case's test reads its task's error from it."""
    root = tmp_path_factory.mktemp("malformed")
    tasks = {}
    for i, case in enumerate(sorted(MALFORMED), start=1):
        tasks[case] = make_task(root / "tasks", f"B{i:02d}")
        MALFORMED[case][0](tasks[case])
    make_task(root / "tasks", GOOD)
    before = snapshot(root / "tasks")
    args = ("tasks", "--agent-cmd", f"{sys.executable} -c pass", "--agent-record", "runs/r")
    proc = run_pytest(root, *args, timeout=60, stdin=subprocess.DEVNULL)
    return {"root": root, "tasks": tasks, "before": before, "ret": proc.returncode, "out": proc.stdout + proc.stderr}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_task_is_one_collection_error_naming_the_file(malformed_session, case):
    _, rel, problem = MALFORMED[case]
    root, out, task = malformed_session["root"], malformed_session["out"], malformed_session["tasks"][case]
    assert malformed_session["ret"] == 2, out  # pytest's "interrupted: errors during collection"
    assert f"{len(MALFORMED)} errors during collection" in out, out
    assert out.count(f"ERROR collecting tasks/{task.name} ") == 1, out  # one error for this task
    assert out.count("ERROR collecting") == len(MALFORMED), out  # and one for each broken task only
    path = str(task / rel)
    lines = [line for line in out.splitlines() if path in line]
    assert lines, f"no error names {path}:\n{out}"
    assert any(problem in line for line in lines), f"the error naming {path} does not say {problem!r}:\n{out}"
    assert_clean_error(out)
    assert snapshot(root / "tasks") == malformed_session["before"], "the task directories were modified"
    assert not (root / "runs").exists(), "a record was written for a session refused at collection: " + ", ".join(
        sorted(snapshot(root / "runs"))
    )


def test_changed_fixture_is_refused_before_the_agent_runs(pytester):
    """A repo/ edited after freezing is refused, not run: the agent never starts on it."""
    task = make_tasks(pytester.path)
    _edit_after_freeze(task)
    markers = pytester.path / "markers"
    markers.mkdir()
    agent = agent_script(
        pytester.path / "agent.py",
        f"""
        Path({str(markers)!r}, "ran-" + os.environ["AGENTDRIFT_TASK_ID"]).write_text("ran")
        report("complete", summary="ran")
    """,
    )
    # unisolated, so the agent could leave the marker on the host if it ever started
    result, out = run(pytester, "--agent-isolation", "none", agent=agent_cmd(agent), record=None)
    assert not (markers / f"ran-{BAD}").exists(), "the agent ran on a fixture that does not match initial-tree.sha256"
    assert str(task / "initial-tree.sha256") in out
    assert "README.md" in out and "does not match" in out
    assert_clean_error(out)
    assert result.ret == 2, out


def test_task_dirs_that_are_fine_collect_without_error(pytester):
    """The control: the same two tasks, unbroken, record a complete run (exit 0)."""
    make_tasks(pytester.path)
    result, out = run(pytester)
    assert result.ret == 0, out
    assert json.loads((pytester.path / "runs" / "r" / "results.json").read_text())["complete"] is True


# ---- usage errors: exit 4 -------------------------------------------------------------------
@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_agent_k_below_one_is_a_usage_error(pytester, value):
    make_tasks(pytester.path)
    result, out = run(pytester, f"--agent-k={value}")
    assert result.ret == 4, out
    assert "--agent-k" in out
    assert "Traceback" not in out
    assert not (pytester.path / "runs").exists()


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory) -> Path:
    """One complete recorded run (of the same two tasks), made once."""
    root = tmp_path_factory.mktemp("recorded")
    make_tasks(root)
    args = ("tasks", "--agent-cmd", f"{sys.executable} -c pass", "--agent-record", "runs/r", "-q")
    proc = run_pytest(root, *args, env=nested_session_env(), timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = root / "runs" / "r"
    assert json.loads((run_dir / "results.json").read_text())["complete"] is True
    return run_dir


def test_recording_into_a_complete_run_is_refused_and_leaves_it_untouched(pytester, recorded_run):
    make_tasks(pytester.path)
    target = pytester.path / "runs" / "r"
    shutil.copytree(recorded_run, target)
    before = snapshot(target)
    results_bytes = (target / "results.json").read_bytes()
    mtime = (target / "results.json").stat().st_mtime_ns
    result, out = run(pytester)
    assert result.ret == 4, out
    assert "runs/r" in out and "already holds a complete run" in out, out
    assert "Traceback" not in out
    assert (target / "results.json").read_bytes() == results_bytes
    assert (target / "results.json").stat().st_mtime_ns == mtime
    assert snapshot(target) == before, "the complete run was modified"
    assert not (target / "INCOMPLETE").exists()


def _truncate(run_dir: Path) -> str:
    """A record without a seal (older, or made by hand) is read, and its JSON found broken."""
    (run_dir / SEAL_FILE).unlink()
    data = (run_dir / "results.json").read_bytes()
    (run_dir / "results.json").write_bytes(data[: len(data) // 2])
    return "results.json: invalid JSON"


def _changed_after_sealing(run_dir: Path) -> str:
    """A sealed record whose results.json changed is refused before it is read at all."""
    data = (run_dir / "results.json").read_bytes()
    (run_dir / "results.json").write_bytes(data.replace(b'"passed"', b'"failed"', 1))
    return "no longer matches its seal"


def _interrupted(run_dir: Path) -> str:
    (run_dir / "results.json").unlink()
    (run_dir / "INCOMPLETE").write_text("recording started\n")
    return "interrupted"


def _marked_incomplete(run_dir: Path) -> str:
    (run_dir / SEAL_FILE).unlink()  # made by hand: a closed record is never rewritten
    p = run_dir / "results.json"
    doc = json.loads(p.read_text())
    doc["complete"] = False
    doc["incomplete_reasons"] = ["session interrupted: KeyboardInterrupt"]
    p.write_text(json.dumps(doc, indent=2))
    return "incomplete"


BASELINES = {
    "missing-dir": None,
    "truncated-results": _truncate,
    "changed-after-sealing": _changed_after_sealing,
    "interrupted-run": _interrupted,
    "incomplete-run": _marked_incomplete,
}


@pytest.mark.parametrize("case", sorted(BASELINES))
def test_unusable_baseline_is_refused_with_exit_4(pytester, recorded_run, case):
    make_tasks(pytester.path)
    baseline = pytester.path / "base"
    spoil = BASELINES[case]
    if spoil is None:
        problem = "no such run directory"
    else:
        shutil.copytree(recorded_run, baseline)
        problem = spoil(baseline)
    before = snapshot(baseline)
    result, out = run(pytester, "--agent-baseline", "base")
    assert result.ret == 4, out
    assert "base" in out and problem in out, out
    assert "Traceback" not in out
    assert snapshot(baseline) == before, "the baseline was modified"
    assert not (pytester.path / "runs").exists(), "a record was started for a refused session"
