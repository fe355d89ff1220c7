"""Check kinds that run code in a graded copy: `pytest`, `command` and `golden`
(docs/task-format.md). Each asks the Grader (grade/grader.py) for the untouched fixture's result
and a graded copy, runs the harness's own pytest or the command there, and judges what the
signed channel reported. No pytest."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from pytest_agentdrift.grade.commandline import pytest_args
from pytest_agentdrift.grade.gradedcopy import real_parents
from pytest_agentdrift.grade.results import CheckUndecided, ExecResult, Grading, Outcome
from pytest_agentdrift.run.evidence import RunEvidence
from pytest_agentdrift.run.runner import copy_tree
from pytest_agentdrift.safetext import escape_text
from pytest_agentdrift.tasks.checkparams import read_expectations
from pytest_agentdrift.tasks.initialtree import walk_files
from pytest_agentdrift.tasks.taskspec import CheckSpec, TaskSpec

EVALUATOR_COMPONENT = "kinds.commands"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)


def _summarise(data: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for outcome in data["outcomes"].values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def check_pytest(g: Grading, spec: TaskSpec, run: RunEvidence, c: CheckSpec) -> Outcome:
    args = list(c.params.get("args", []))
    timeout = float(c.params.get("timeout_s", 120))
    before = g.before(spec, f"pytest:{c.name}", lambda tree: g.run_pytest(tree, args, timeout))
    expected_nodes = list(before["collected"])
    if before.get("missing_report") or not expected_nodes:
        return (
            False,
            "the untouched fixture collects no tests for " + " ".join(args) + " (task is broken)",
            {"before": before["exec"].tail()},
        )
    recording = g.recording_expectations and "expected" in c.params
    expected = None if recording else held_expectations(spec, c)
    expect_before = "any" if recording else c.params.get("expect_before", "any")
    before_failed = before["exitstatus"] != 0 or bool(expected and observation_problems(expected, before))
    if expect_before == "fail" and not before_failed:
        return False, "the tests already pass on the untouched fixture, so they decide nothing (task is broken)", {}
    if expect_before == "pass" and before_failed:
        return False, "the tests fail on the untouched fixture (task is broken)", {"before": before["exec"].tail()}

    graded = g.graded_copy(spec, run)
    after = g.run_pytest(graded, args, timeout)
    res: ExecResult = after["exec"]
    outcomes = after["outcomes"]
    not_passed, problems = _not_passed(after, expected_nodes, "frozen test(s)")
    g.observed[c.name] = after.get("observed", {})
    if expected is not None:
        problems.extend(observation_problems(expected, after))
    if not after.get("missing_report") and after["exitstatus"] != 0 and not not_passed:
        problems.append(f"pytest exited {after['exitstatus']}")
    evidence: dict[str, Any] = {
        "outcomes": _summarise(after),
        "not_passed": not_passed,
        "forged": after.get("forged", []),
        **g.copy_evidence(graded),
    }
    new_nodes = [n for n in after["collected"] if n not in set(expected_nodes)]
    if c.params.get("reference_fix"):
        # the check is about the new tests alone: whether the patch passes the suite is another check's question
        problems = [p for p in problems if p.startswith("reports say passed")]
    if c.params.get("new_tests") == "fail_before":
        problem = _new_tests_demonstrate(
            g, spec, run, new_nodes, outcomes, timeout, evidence, c.params.get("reference_fix")
        )
        if problem:
            problems.append(problem)
    if problems:
        return False, "; ".join(problems), {**evidence, "tail": res.tail()}
    held = f"; {len(expected)} test(s) observed the values the harness holds" if expected else ""
    return (
        True,
        f"{len(expected_nodes)} frozen test(s) passed" + (f", {len(new_nodes)} new" if new_nodes else "") + held,
        evidence,
    )


def held_expectations(spec: TaskSpec, c: CheckSpec) -> dict[str, list[list[str]]] | None:
    """The values a pytest check's `observe()` calls must produce, from the file the harness
    holds outside every graded tree; None for a check without one."""
    rel = c.params.get("expected")
    if rel is None:
        return None
    path = spec.path / rel
    if not path.is_file():
        raise CheckUndecided(
            f"{rel} is missing from the task: record it with `agentdrift task expect {spec.path.name}` (task is broken)"
        )
    return read_expectations(path)


def observation_problems(expected: dict[str, list[list[str]]], data: dict[str, Any]) -> list[str]:
    """Where the observed values differ from the expected ones, test by test. The harness
    decides this, so a reporter the tested code rewrote cannot say what the right values were."""
    observed = data.get("observed") or {}
    wrong = []
    for nodeid, values in expected.items():
        got = observed.get(nodeid)
        if got == values:
            continue
        if not got:
            wrong.append(f"{nodeid} observed nothing")
            continue
        shown = dict(map(tuple, got))
        for name, text in values:
            if shown.get(name) != text:
                wrong.append(f"{nodeid} {name}: expected {text}, observed {shown.get(name, 'nothing')}")
                break
        else:
            wrong.append(f"{nodeid} observed other values than the {len(values)} expected")
    if not wrong:
        return []
    listed = "; ".join(escape_text(w if len(w) <= 300 else w[:300] + "…") for w in wrong[:5])
    return [f"{len(wrong)} of {len(expected)} test(s) observed values the harness does not expect: {listed}"]


def _new_test_files(new_nodes: list[str], run: RunEvidence) -> list[str]:
    """The files of the new tests, with the files the agent added beside them (a helper module,
    test data), sorted."""
    files = sorted({n.split("::", 1)[0] for n in new_nodes})
    dirs = {f.rpartition("/")[0] for f in files}
    return sorted(set(files) | {p for p in run.diff.added if p.rpartition("/")[0] in dirs})


def _tree_with_new_tests(tree: Path, spec: TaskSpec, overlay: Path | None, graded: Path, files: list[str]) -> Path:
    """`tree`, made: the untouched fixture, then the `overlay` directory's files, then `files` from
    the graded copy."""
    tree.parent.mkdir()
    copy_tree(spec.repo, tree)
    if overlay is not None:
        for rel, full in walk_files(overlay):
            shutil.copyfile(full, real_parents(tree, rel))
    for rel in files:
        src = graded / rel  # the harness's copy: a plain file, or it is not used
        if src.is_file() and not src.is_symlink():
            shutil.copyfile(src, real_parents(tree, rel))
    return tree


def _why_none_demonstrates(
    new_nodes: list[str], demo: dict[str, str], fixed: dict[str, str], exc_types: dict[str, Any]
) -> str:
    """Why no new test shows the bug against a reference fix, from the tests' outcomes on the
    untouched code (`demo`) and on the reference fix (`fixed`)."""
    if all(o == "missing" for o in demo.values()):
        return (
            "the new tests cannot even be collected on the untouched code (they import something only the patch adds?): "
            "they never demonstrate the bug"
        )
    if not any(o in ("failed", "error") for o in demo.values()):
        return "no new test fails on the untouched code: the test never demonstrates the bug"
    reasons = []
    for n in new_nodes:
        if demo[n] not in ("failed", "error"):
            continue
        if exc_types.get(n) != "AssertionError":
            reasons.append(f"{n} fails on the untouched code with {exc_types.get(n) or demo[n]}, not an assertion")
        elif fixed[n] != "passed":
            reasons.append(f"{n} also {fixed[n]} on the reference fix")
    return "no new test fails on the untouched code because of the bug: " + "; ".join(reasons[:3])


def _new_tests_demonstrate(
    g: Grading,
    spec: TaskSpec,
    run: RunEvidence,
    new_nodes: list[str],
    outcomes: dict[str, str],
    timeout: float,
    evidence: dict[str, Any],
    reference_fix: str | None = None,
) -> str | None:
    """T03's rule: an added test must fail on the untouched code and pass with the patch.

    With a reference fix (a task-relative directory of files that fix only
    the bug), the test must show the bug itself: it fails on the untouched
    code *by an assertion* and passes on the untouched code plus the
    reference fix. A test that fails for another reason (a helper the
    agent's own patch adds, an `assert False`) shows nothing about the bug.
    """
    if not new_nodes:
        return "no new test was added"
    failing_after = [n for n in new_nodes if outcomes.get(n) != "passed"]
    if failing_after and reference_fix is None:
        return "new test(s) do not pass with the patch: " + ", ".join(failing_after[:5])
    files = _new_test_files(new_nodes, run)
    graded = g.graded_copy(spec, run)
    scratch = g._scratch
    if scratch is None:  # Grader.evaluate sets it for the run it grades
        raise RuntimeError("a check graded outside Grader.evaluate")

    untouched_tree = _tree_with_new_tests(scratch / "demonstrate" / "repo", spec, None, graded, files)
    on_untouched = g.run_pytest(untouched_tree, new_nodes, timeout)
    demo = {n: on_untouched["outcomes"].get(n, "missing") for n in new_nodes}
    evidence["new_tests_on_untouched_code"] = demo
    if reference_fix is None:
        if not any(o in ("failed", "error") for o in demo.values()):
            return "no new test fails on the untouched code: the test never demonstrates the bug"
        return None
    fixed_tree = _tree_with_new_tests(
        scratch / "reference-fix" / "repo", spec, spec.path / reference_fix, graded, files
    )
    on_fixed = g.run_pytest(fixed_tree, new_nodes, timeout)
    fixed = {n: on_fixed["outcomes"].get(n, "missing") for n in new_nodes}
    exc_types = on_untouched.get("exc_types", {})
    evidence["new_tests_on_reference_fix"] = fixed
    evidence["new_tests_failure_on_untouched_code"] = {
        n: exc_types.get(n) for n in new_nodes if demo[n] in ("failed", "error")
    }
    shown = [
        n for n in new_nodes if demo[n] == "failed" and exc_types.get(n) == "AssertionError" and fixed[n] == "passed"
    ]
    evidence["demonstrating_tests"] = shown
    if shown:
        return None
    return _why_none_demonstrates(new_nodes, demo, fixed, exc_types)


def check_command(g: Grading, spec: TaskSpec, run: RunEvidence, c: CheckSpec) -> Outcome:
    argv, timeout = list(c.params["run"]), float(c.params.get("timeout_s", 60))
    args = pytest_args(argv)
    if args is not None:
        return _check_pytest_command(g, spec, run, c, args, timeout)
    if c.params.get("fails_before"):
        before, _ = g.before(spec, f"command:{c.name}", lambda tree: g.run_python(argv, tree, timeout), "command")
        if before.exit_code == 0:
            return False, "the command already succeeds on the untouched fixture (task is broken)", {}
    graded = g.graded_copy(spec, run)
    res, untrusted = g.run_python(argv, graded, timeout)
    extra = g.copy_evidence(graded)
    if res.timed_out:
        return False, f"timed out after {timeout:g}s", {"tail": res.tail(), **extra}
    if untrusted:
        return False, "; ".join(untrusted), {"tail": res.tail(), **extra}
    ok = res.exit_code == 0
    return ok, f"exit {res.exit_code}", extra if ok else {"tail": res.tail(), **extra}


def _not_passed(after: dict[str, Any], nodes: list[str], what: str) -> tuple[dict[str, str], list[str]]:
    """Which of `nodes` did not pass in `after` (node -> outcome), and the problems of the result:
    the report's own, those nodes, and outcomes forged as passed."""
    outcomes = after["outcomes"]
    problems = _result_problems(after)
    not_passed = {
        n: outcomes.get(n, "deselected" if n in after["deselected"] else "missing")
        for n in nodes
        if outcomes.get(n) != "passed"
    }
    if not_passed:
        shown = ", ".join(f"{n} {o}" for n, o in list(not_passed.items())[:8])
        problems.append(f"{len(not_passed)} of {len(nodes)} {what} did not pass: {shown}")
    if after.get("forged"):
        problems.append("reports say passed while the test raised (forged outcome): " + ", ".join(after["forged"][:5]))
    return not_passed, problems


def _check_pytest_command(
    g: Grading, spec: TaskSpec, run: RunEvidence, c: CheckSpec, args: list[str], timeout: float
) -> Outcome:
    """A `command` that runs pytest passes only as the harness's own pytest does: on the
    graded copy (tests and configuration restored), every node the untouched fixture
    collects passes, and the report arrives over the signed channel with exit status 0.
    An exit code alone (`os._exit(0)` during collection) is not a pass."""
    before = g.before(spec, f"pytest-command:{c.name}", lambda tree: g.run_pytest(tree, args, timeout))
    if c.params.get("fails_before") and before["exitstatus"] == 0:
        return False, "the command already succeeds on the untouched fixture (task is broken)", {}
    graded = g.graded_copy(spec, run)
    after = g.run_pytest(graded, args, timeout)
    res: ExecResult = after["exec"]
    expected = [] if before.get("missing_report") else list(before["collected"])
    not_passed, problems = _not_passed(after, expected, "test(s) of the untouched fixture")
    if not problems and after["exitstatus"] != 0:
        problems.append(f"pytest exited {after['exitstatus']}")
    evidence = {
        "pytest": True,
        "outcomes": _summarise(after),
        "not_passed": not_passed,
        "forged": after.get("forged", []),
        **g.copy_evidence(graded),
    }
    if res.timed_out:
        problems.append(f"timed out after {timeout:g}s")
    if problems:
        return False, "; ".join(problems), {**evidence, "tail": res.tail()}
    return True, f"exit 0 (pytest: {sum(1 for o in after['outcomes'].values() if o == 'passed')} passed)", evidence


def check_golden(g: Grading, spec: TaskSpec, run: RunEvidence, c: CheckSpec) -> Outcome:
    argv, timeout = list(c.params["run"]), float(c.params.get("timeout_s", 60))
    expected = (spec.path / c.params["expected"]).read_text(encoding="utf-8")
    graded = g.graded_copy(spec, run)
    res, untrusted = g.run_python(argv, graded, timeout)
    extra = g.copy_evidence(graded)
    if res.exit_code != 0:
        return False, f"the command exited {res.exit_code}", {"tail": res.tail(), **extra}
    if untrusted:
        return False, "; ".join(untrusted), {"tail": res.tail(), **extra}
    if res.stdout == expected:
        return True, "output equals " + c.params["expected"], extra
    import difflib

    delta = escape_text(
        "".join(
            list(difflib.unified_diff(expected.splitlines(True), res.stdout.splitlines(True), "expected", "actual"))[
                :40
            ]
        )
    )
    return False, "output differs from " + c.params["expected"], {"diff": delta, **extra}


def _result_problems(after: dict[str, Any]) -> list[str]:
    """What makes a grading pytest's report untrustworthy, whatever its outcomes say."""
    res: ExecResult = after["exec"]
    problems = []
    if after.get("channel_problems"):
        problems.append("forged result: " + "; ".join(after["channel_problems"]))
    elif after.get("missing_report"):
        problems.append(
            "pytest produced no result (killed, timed out or exited early)"
            + (" after a timeout" if res.timed_out else "")
        )
    elif res.exit_code != after.get("exitstatus"):
        problems.append(f"pytest reported exit status {after.get('exitstatus')} but the process exited {res.exit_code}")
    return problems
