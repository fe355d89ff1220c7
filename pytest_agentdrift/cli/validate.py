"""agentdrift validate: does each task decide? Untouched fails, the reference solution passes k of k,
every wrong solution fails as its wrong.toml says."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_agentdrift.cli.common import out as _out
from pytest_agentdrift.vocabulary import EXIT_FAILED, EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    from pytest_agentdrift.agents.base import CommandAdapter, get_adapter
    from pytest_agentdrift.grade.grader import Grader
    from pytest_agentdrift.options import resolve_cli_flags
    from pytest_agentdrift.run import sandbox, scratch
    from pytest_agentdrift.run.runsettings import RunSettings
    from pytest_agentdrift.tasks import fdtree
    from pytest_agentdrift.tasks.load import load_task
    from pytest_agentdrift.tasks.taskdirs import find_task_dirs

    dirs = [d for p in args.tasks for d in (find_task_dirs(Path(p)) or [Path(p)])]
    iso = sandbox.detect(resolve_cli_flags(args, "isolation")["isolation"])
    failures = 0
    base = scratch.make("validate")  # marked: what a killed validation leaves, the next session removes
    try:
        grader = Grader(iso, base / "grading", hide=base / "runs", cache_dir=_grading_cache(args))
        settings = RunSettings(isolation=iso)
        noop = CommandAdapter(f"{sys.executable} -c pass")
        ref = get_adapter(args.agent)
        for d in dirs:
            spec = load_task(d)  # every file validated; initial-tree verified on each copy
            failures += not _validate_task(args, spec, noop, ref, settings, grader, base)
    finally:
        fdtree.drain_removals()  # the scratch trees under base the background remover still holds
        fdtree.rmtree(base)
    _out(f"{len(dirs) - failures} of {len(dirs)} task(s) valid")
    return EXIT_FAILED if failures else EXIT_OK


def _grading_cache(args: argparse.Namespace) -> Path | None:
    """The grading cache the plugin's option names (flag, ini or variable, resolved as the plugin
    resolves them): validating again does not grade the untouched fixtures again. None without one."""
    from pytest_agentdrift.grade.fixturecache import named_directory
    from pytest_agentdrift.options import resolve_cli_flags

    chosen = resolve_cli_flags(args, "grading_cache")["grading_cache"]
    return named_directory(chosen, Path.cwd()) if chosen else None


def _validate_task(args: argparse.Namespace, spec, noop, ref, settings, grader, base: Path) -> bool:
    """One task: fails untouched, the reference solution passes k of k, every wrong solution fails; print why not."""
    from pytest_agentdrift.grade.attempt import attempt

    problems = []
    for warning in protected_disagreement(spec):
        _out(f"warn {spec.id}: {warning}")
    # the same run -> grade -> score the plugin's items use
    _, untouched = attempt(spec, 0, noop, settings, grader, base / "runs")
    if untouched["passed"]:
        problems.append("passes on the untouched repo with an agent that does nothing: the checks decide nothing")
    passes = 0
    for rep in range(1, args.k + 1):
        _, solved = attempt(spec, rep, ref, settings, grader, base / "runs")
        if solved["passed"]:
            passes += 1
        else:
            detail = "; ".join(f"{c['name']}: {c['detail']}" for c in solved["checks"] if not c["passed"])
            problems.append(f"reference solution failed repetition {rep}: {detail}")
    wrong_lines = []
    if not args.skip_wrong:
        wrong_lines = _validate_wrong(spec, grader, settings, base, problems)
    status = "ok" if not problems else "FAIL"
    _out(
        f"{status:4} {spec.id} {spec.title}: untouched fails ({', '.join(untouched['failed_checks']) or 'none'}); "
        f"solution passes {passes}/{args.k}" + (f"; {len(wrong_lines)} wrong solution(s) played" if wrong_lines else "")
    )
    for line in wrong_lines:
        _out(f"     {line}")
    for p in problems:
        _out(f"     - {p}")
    return not problems


def protected_disagreement(spec) -> list[str]:
    """task.toml `protected` and forbidden-effects `protected_paths` should name the same paths."""
    toml, effects = set(spec.protected_toml), set(spec.protected_effects)
    if toml == effects:
        return []
    out = []
    if effects - toml:
        out.append(
            "forbidden-effects.json protected_paths not in task.toml protected: " + ", ".join(sorted(effects - toml))
        )
    if toml - effects:
        out.append(
            "task.toml protected not in forbidden-effects.json protected_paths: " + ", ".join(sorted(toml - effects))
        )
    out.append("both are protected (the union); list them in both files to say so")
    return out


def _validate_wrong(spec, grader, settings, base: Path, problems: list[str]) -> list[str]:
    """Play each of the task's wrong solutions (solution/wrong/NAME/) and judge it against its wrong.toml."""
    from pytest_agentdrift.agents.base import ReferenceAdapter
    from pytest_agentdrift.grade.attempt import attempt
    from pytest_agentdrift.tasks.wrongsolutions import judge, wrong_solutions

    lines = []
    for wrong in wrong_solutions(spec):  # a malformed wrong.toml is a TaskError naming the file
        _, result = attempt(spec, 1, ReferenceAdapter(play=wrong.name), settings, grader, base / "runs")
        verdict, why = judge(wrong, result)
        mark = {True: "ok  ", False: "FAIL", None: "n/a "}[verdict]
        lines.append(f"{mark} {wrong.name} ({wrong.kind}): {why}")
        if verdict is False:
            problems.append(f"{wrong.name} did not fail as wrong.toml says: {why}")
    return lines
