"""`agentdrift regrade RUN --out NEW`: a recorded run graded again by the current checks (record/regrade.py)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agentdrift.cli.common import add_ini_args
from pytest_agentdrift.cli.common import out as _out
from pytest_agentdrift.errors import AgentDriftError, RecordError
from pytest_agentdrift.options import add_cli_flags, resolve_cli_flags
from pytest_agentdrift.run import scratch as scratch_dirs
from pytest_agentdrift.shapes import Results, RunRecord
from pytest_agentdrift.vocabulary import EXIT_OK, EXIT_REFUSED, SOURCE_MANIFEST_FILE

if TYPE_CHECKING:
    from pytest_agentdrift.tasks.taskspec import TaskSpec


class NotRegradable(AgentDriftError):
    """The agent was given something else than the record says: another task (exit 6, refused)."""

    exit_code = EXIT_REFUSED


def _specs(paths: list[str], wanted: list[str]) -> dict:
    from pytest_agentdrift.tasks.load import load_task
    from pytest_agentdrift.tasks.taskdirs import builtin_suite_dir, session_task_dirs

    dirs = session_task_dirs(paths or [str(builtin_suite_dir())])
    missing = [t for t in wanted if t not in dirs]
    if missing:
        where = ", ".join(paths) if paths else "the builtin suite"
        raise AgentDriftError(f"task(s) {', '.join(missing)} of the record not found in {where} (--tasks DIR)")
    return {t: load_task(dirs[t]) for t in wanted}


def _recorded_dirs(results: Results) -> list[str]:
    """The task directories the record names (`task_dir`), when each still holds its task (the
    same id): where --tasks defaults to. Empty when one does not (then the builtin suite)."""
    from pytest_agentdrift.tasks.taskdirs import session_task_dirs

    dirs = []
    for tid, task in sorted(results["tasks"].items()):
        where = task.get("task_dir")
        if not isinstance(where, str) or session_task_dirs([where]).get(tid) is None:
            return []
        dirs.append(where)
    return dirs


def _id_specs(record: Path, specs: dict, paths: list[str]) -> list:
    """The tasks the new record's task-set and evaluator ids are over: every task the recording
    session saw (its source manifest lists them, whatever -k selected), as a fresh session over
    the same directories computes them; the record's own tasks when one of those is not found."""
    from pytest_agentdrift.canonical import load_json_file
    from pytest_agentdrift.tasks.load import load_task
    from pytest_agentdrift.tasks.taskdirs import session_task_dirs

    source = record / SOURCE_MANIFEST_FILE
    seen = (load_json_file(source, RecordError) or {}).get("tasks") if source.is_file() else None
    if not isinstance(seen, list) or set(seen) <= set(specs):
        return list(specs.values())
    roots = dict.fromkeys([*paths, *(str(s.path.absolute().parent) for s in specs.values())])
    dirs = session_task_dirs(list(roots))
    if not all(isinstance(t, str) and t in dirs for t in seen):
        return list(specs.values())
    out = dict(specs)
    try:
        out.update({t: load_task(dirs[t]) for t in seen if t not in out})
    except AgentDriftError:
        return list(specs.values())
    return list(out.values())


def _regrade_runs(
    record: Path, out: Path, results: Results, specs: dict, isolation
) -> tuple[dict[str, list[RunRecord]], list[str]]:
    """Every run of the record graded again, in a scratch directory removed at the end; a task
    graded exactly as it would be now keeps its recorded checks (its blobs still verified).
    Returns (runs by task, the tasks kept)."""
    from pytest_agentdrift.grade.grader import Grader
    from pytest_agentdrift.record import regrade as rg
    from pytest_agentdrift.tasks.fdtree import drain_removals, rmtree

    scratch = scratch_dirs.make("regrade")
    # graded code runs under the recorded session's grading limits (a record older than them: the defaults)
    limits = results["settings"].get("grading_limits")
    grader = Grader(
        isolation,
        scratch / "grading",
        hide=scratch / "runs",
        hidden=(record.absolute(), out.absolute()),
        limits=dict(limits) if isinstance(limits, dict) else None,
    )
    recorded_isolation = results["isolation"]["enforced"]
    kept = [
        tid
        for tid, task in sorted(results["tasks"].items())
        if rg.grading_unchanged(task, specs[tid], recorded_isolation, isolation.mode)
    ]
    runs: dict[str, list[RunRecord]] = {}
    try:
        for tid, task in sorted(results["tasks"].items()):
            runs[tid] = [
                r
                if tid in kept and rg.keeps_all_it_needs(record, r)
                else rg.regrade_run(record, specs[tid], r, grader, scratch / "runs")
                for r in task["runs"]
            ]
        return runs, kept
    finally:
        drain_removals()
        rmtree(scratch)


def cmd_regrade(args: argparse.Namespace) -> int:
    from pytest_agentdrift.canonical import load_json_file
    from pytest_agentdrift.manifest.capture import validate_manifest
    from pytest_agentdrift.record import regrade as rg
    from pytest_agentdrift.record.results import evaluator_id, new_run_id, task_set_id
    from pytest_agentdrift.record.store import check_record_target, load_results
    from pytest_agentdrift.run import sandbox

    started = time.monotonic()
    record, out = Path(args.run), Path(args.out)
    check_record_target(out)
    results = load_results(record)
    paths = args.tasks or _recorded_dirs(results)  # the record's own tasks, where it found them
    specs = _specs(paths, sorted(results["tasks"]))
    problems = rg.given_differences(record, results, specs)
    if problems:
        for p in problems[1:]:
            _out(f"  also: {p}")
        raise NotRegradable(
            f"not regradable: {problems[0]}; a task whose agent was given something else is another task: run it again"
        )
    manifest = None
    if (record / rg.MANIFEST_FILE).is_file():
        manifest = validate_manifest(load_json_file(record / rg.MANIFEST_FILE, RecordError), record / rg.MANIFEST_FILE)
    isolation = sandbox.detect(resolve_cli_flags(args, "isolation")["isolation"])
    spec_list = _id_specs(record, specs, paths)  # a -k record's ids are over every task its session saw
    evaluator, task_set = evaluator_id(spec_list), task_set_id(spec_list)
    runs, kept = _regrade_runs(record, out, results, specs, isolation)
    new = rg.regraded_results(results, runs, new_run_id(), evaluator, task_set, specs)
    new["regraded_from"] = rg.provenance(results, isolation.mode, kept)
    if manifest is not None:
        manifest, source = _regraded_manifest(manifest, spec_list, evaluator, task_set)
        manifest["regraded_from"] = new["regraded_from"]
    else:
        source = None
    rg.write_regraded(record, out, new, manifest, source)
    changed = sum(
        1
        for tid in runs
        for old, now in zip(results["tasks"][tid]["runs"], runs[tid], strict=True)
        if old["outcome"] != now["outcome"]
    )
    unjudged = sum(1 for r in (x for rs in runs.values() for x in rs) for c in r["checks"] if "not_regradable" in c)
    s = new["summary"]
    _out(
        f"regraded {s['runs']} run(s) of {record} into {out}: {s['passed']} passed, {changed} outcome(s) changed, "
        f"{unjudged} check(s) not regradable; {len(kept)} task(s) graded as now kept as recorded; evaluator {results.get('evaluator_id')} -> {evaluator} "
        f"({time.monotonic() - started:.1f}s)"
    )
    return EXIT_OK


def _regraded_manifest(manifest: dict[str, Any], specs: list[TaskSpec], evaluator: str, task_set: str) -> tuple:
    """(manifest with the current evaluator, task set and source ids, source-manifest.json)."""
    from pytest_agentdrift.manifest.capture import runtime_id
    from pytest_agentdrift.manifest.source import build_source_manifest

    source, _lockfiles = build_source_manifest({s.id: s.path for s in specs})
    out = json.loads(json.dumps(manifest))
    ident = out["identity"]
    ident["evaluator_id"], ident["task_set_id"] = evaluator, task_set
    if isinstance(ident.get("source_id"), str) and ident["source_id"].startswith("sha256:"):
        ident["source_id"] = source["digest"]
    out["runtime_id"] = runtime_id(ident)
    return out, source


def register(sub) -> None:
    r = sub.add_parser("regrade", help="grade a recorded run again with the current checks, without the agent")
    r.add_argument("run")
    r.add_argument("--out", required=True, help="the new record (must not exist)")
    r.add_argument(
        "--tasks",
        action="append",
        default=[],
        help="a task directory or a directory of tasks holding the record's tasks (default: the directories the "
        "record names when they still hold its tasks, else the builtin suite)",
    )
    add_cli_flags(r, "isolation")
    add_ini_args(r)
    r.set_defaults(fn=cmd_regrade)
