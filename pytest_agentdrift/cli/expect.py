"""agentdrift task expect: record what a task's reference solution observes, for the harness to hold.

A pytest check with `expected = "FILE"` is decided by the harness: its tests
call `observe(name, value)` and the harness compares each value with FILE,
which lives beside task.toml, outside every tree graded code can read. This
command plays the reference solution (solution/) under the same grading and
writes FILE from what its tests observed.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from pytest_agentdrift.cli.common import out as _out
from pytest_agentdrift.vocabulary import EXIT_FAILED, EXIT_OK


def cmd_task_expect(args: argparse.Namespace) -> int:
    from pytest_agentdrift.options import resolve_cli_flags
    from pytest_agentdrift.run import sandbox
    from pytest_agentdrift.tasks.load import load_task
    from pytest_agentdrift.tasks.taskdirs import find_task_dirs

    dirs = [d for p in args.tasks for d in (find_task_dirs(Path(p)) or [Path(p)])]
    iso = sandbox.detect(resolve_cli_flags(args, "isolation")["isolation"])
    failures = 0
    for d in dirs:
        spec = load_task(d, recording_expectations=True)
        lines, ok = record_expectations(spec, iso)
        failures += not ok
        for line in lines:
            _out(line)
    return EXIT_FAILED if failures else EXIT_OK


def record_expectations(spec, isolation) -> tuple[list[str], bool]:
    """Play the reference solution once and write each `expected` file from its observations.
    Nothing is written for a check whose tests did not all pass or observed nothing."""
    from pytest_agentdrift.agents.base import ReferenceAdapter
    from pytest_agentdrift.grade.attempt import attempt
    from pytest_agentdrift.grade.grader import Grader
    from pytest_agentdrift.record.store import atomic_write
    from pytest_agentdrift.run.runsettings import RunSettings
    from pytest_agentdrift.tasks.fdtree import drain_removals

    wanted = [c for c in spec.checks if c.kind == "pytest" and "expected" in c.params]
    if not wanted:
        return [f"n/a  {spec.id}: no pytest check names an `expected` file"], True
    with tempfile.TemporaryDirectory(prefix="agentdrift-expect-") as tmp:
        base = Path(tmp)
        grader = Grader(isolation, base / "grading", hide=base / "runs")
        grader.recording_expectations = True
        _, result = attempt(spec, 1, ReferenceAdapter(), RunSettings(isolation=isolation), grader, base / "runs")
        drain_removals()  # the scratch trees under base the background remover still holds
    by_name = {c["name"]: c for c in result["checks"]}
    lines, ok = [], True
    for c in wanted:
        graded = by_name.get(c.name, {})
        observed = grader.observed.get(c.name) or {}
        if not graded.get("passed") or not observed:
            why = graded.get("detail") or "not graded"
            lines.append(
                f"FAIL {spec.id} {c.name}: not recorded: the reference solution's run says {why!r}"
                + ("" if observed else "; its tests observed nothing")
            )
            ok = False
            continue
        atomic_write(spec.path / c.params["expected"], expectations_text(c.name, observed))
        count = sum(len(v) for v in observed.values())
        lines.append(f"ok   {spec.id} {c.name}: {count} value(s) of {len(observed)} test(s) -> {c.params['expected']}")
    return lines, ok


def register(tsub, parser_class) -> None:
    from pytest_agentdrift.options import add_cli_flags

    ex = tsub.add_parser("expect", help="record the values a task's reference solution observes (`expected` files)")
    ex.add_argument("tasks", nargs="+", help="task directories, or directories of them")
    add_cli_flags(ex, "isolation")
    ex.set_defaults(fn=cmd_task_expect)


def expectations_text(check: str, observed: dict[str, list[list[str]]]) -> str:
    """JSON with one test per line, sorted, so a re-recording shows in review as the lines that moved."""
    rows = [
        f"  {json.dumps(n, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}"
        for n, v in sorted(observed.items())
    ]
    return "{\n" + f' "check": {json.dumps(check)},\n "observations": {{\n' + ",\n".join(rows) + "\n }\n}\n"
