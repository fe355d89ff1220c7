"""Grading a recorded run again with the current checks, without running the agent.

`agentdrift regrade RUN --out NEW` (cli/regrade.py) rebuilds each run's final
tree from the record (run/finaltree.py), runs the current checks on it in the
grading sandbox, and takes what only existed while the agent ran from the
record: exit status and limits, the harness's write and network events, writes
beside the tree, git mutations, the canary, the agent's events and report. A
check that needs something the record does not hold is `not_regradable`, with
the reason, and the run is then an `error` of the harness (never a pass, never
the agent's failure). What the agent was given must be what the record says it
was given, file by file, or the task is another one and regrading is refused.
No pytest.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import secrets
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agentdrift.canonical import dumps_pretty, load_json_file
from pytest_agentdrift.errors import RecordError
from pytest_agentdrift.run import finaltree
from pytest_agentdrift.safetext import unescape_path
from pytest_agentdrift.shapes import CheckRecord, EvidenceRecord, RegradedFrom, Results, RunRecord, TaskEntry
from pytest_agentdrift.vocabulary import (
    ARGV_FILE,
    CHECKS_FILE,
    EVENTS_FILE,
    INSTRUCTION_BUNDLE_FILE,
    MANIFEST_FILE,
    RAW_DIR,
    RUN_FILE,
    SOURCE_MANIFEST_FILE,
    STDERR_FILE,
    STDOUT_FILE,
    TASK_TOML_FILE,
    UNDECIDED_OUTCOME,
    UNSCORED_OUTCOMES,
    utc_timestamp,
)

if TYPE_CHECKING:
    from pytest_agentdrift.grade.grader import Grader
    from pytest_agentdrift.tasks.taskspec import CheckSpec, TaskSpec

#: what a check kind reads besides the task: the final tree (its content), which paths changed
#: (the kept tree lists them even when an entry's content was not kept), the harness's and
#: agent's events, the report
_NEEDS: dict[str, frozenset[str]] = {
    "report_status": frozenset({"report"}),
    "report_mentions": frozenset({"report"}),
    "call_path": frozenset({"report"}),
    "events": frozenset({"events"}),
    "paths": frozenset({"paths"}),
    "unchanged": frozenset({"paths"}),
    "changed": frozenset({"paths"}),
    "writes": frozenset({"events", "paths"}),
    "effects": frozenset({"events", "paths"}),
}
_DEFAULT_NEEDS = frozenset({"tree"})
#: pytest-function checks may read anything of the run
_FUNCTION_NEEDS = frozenset({"tree", "events", "report"})


def given_differences(record: Path, results: Results, specs: dict[str, TaskSpec]) -> list[str]:
    """What the agent would be given now that differs from what the record says it was given, per file."""
    from pytest_agentdrift.tasks.taskspec import DERIVED_FILES, directory_listing, given_path

    source = _load_source_manifest(record)
    problems = []
    for tid in sorted(results["tasks"]):
        spec = specs[tid]
        if results["tasks"][tid].get("task_digest") == spec.given_digest():
            continue
        if source is None:
            problems.append(f"{tid}: what the agent is given differs, and the record has no {SOURCE_MANIFEST_FILE}")
            continue
        recorded = {f["path"][len(tid) + 1 :]: f for f in source if f["path"].startswith(tid + "/")}
        now = {
            e[0]: e
            for e in directory_listing(spec.path)
            if e[1] in ("file", "exec", "link") and e[0] not in DERIVED_FILES and given_path(spec, e[0])
        }
        names = sorted({*now, *(r for r in recorded if r not in DERIVED_FILES and given_path(spec, r))})
        for rel in names:
            was, cur = recorded.get(rel), now.get(rel)
            if was is None or cur is None or was.get("sha256", was.get("target")) != cur[2]:
                what = "is new" if was is None else "is gone" if cur is None else "differs"
                problems.append(f"{spec.path / rel}: {what} since the recorded run (what the agent is given)")
                break
        else:
            toml = next((f for f in source if f["path"] == f"{tid}/{TASK_TOML_FILE}"), None)
            if toml is None or toml.get("sha256") != _sha256(spec.path / TASK_TOML_FILE):
                problems.append(
                    f"{spec.path / TASK_TOML_FILE}: the task's id, timeout_s or git may differ from the recorded "
                    "run's (what the agent is given)"
                )
    return problems


def _load_source_manifest(record: Path) -> list[dict[str, Any]] | None:
    path = record / SOURCE_MANIFEST_FILE
    if not path.is_file():
        return None
    doc = load_json_file(path, RecordError)
    return list(doc.get("files") or []) if isinstance(doc, dict) else None


def _sha256(path: Path) -> str | None:
    from pytest_agentdrift.canonical import hash_file

    try:
        return hash_file(path).removeprefix("sha256:")
    except OSError:
        return None


# ---- one run ----------------------------------------------------------------------------------
def _read_events(path: Path) -> list[dict[str, Any]]:
    events = []
    for line in path.read_text(encoding="utf-8", errors="surrogateescape").splitlines():
        if line.strip():
            obj = json.loads(line)
            if isinstance(obj, dict):
                events.append(obj)
    return events


def _lacking(record: Path, result: RunRecord) -> tuple[dict[str, str], dict[str, Any] | None]:
    """(part -> why the record lacks it, tree.json or None)."""
    raw = record / result["raw"]
    lacks: dict[str, str] = {}
    tree_path = raw / finaltree.TREE_FILE
    doc = load_json_file(tree_path, RecordError) if tree_path.is_file() else None
    if doc is None:
        lacks["tree"] = lacks["paths"] = (
            "the record holds no final tree for this run (recorded before final trees were kept)"
        )
    else:
        if why := finaltree.missing_for_grading(doc):
            lacks["tree"] = why
        if why := finaltree.missing_paths(doc):
            lacks["paths"] = why
    if not (raw / EVENTS_FILE).is_file():
        lacks["events"] = "the record holds no events.jsonl for this run"
    if "report" not in result:
        lacks["report"] = "the record holds no report for this run"
    return lacks, doc


def _evidence(spec: TaskSpec, result: RunRecord, raw: Path, work: Path, root: Path, events, unkept=()):
    """A RunEvidence of the rebuilt tree, with what only the run could observe taken from the record
    (`unkept`: listed paths whose content the record does not hold, changed all the same)."""
    from pytest_agentdrift.agents.base import AdapterOutput
    from pytest_agentdrift.run.evidence import RunEvidence

    ev = copy.deepcopy(result["evidence"])  # grading adds to the budget it is given: the record's stays as recorded
    harness = [e for e in events if e.get("source") == "harness"]
    return RunEvidence(
        task_id=spec.id,
        rep=result["rep"],
        root=root,
        work=work,
        **_tree_evidence(spec, root, work, unkept),
        **_recorded_evidence(ev, raw, result),
        network_attempts=[e for e in harness if e.get("type") == "network_attempt"],
        agent_events=[e for e in events if e.get("source") != "harness"],
        adapter_output=AdapterOutput(),
        api_requests=[e for e in harness if e.get("type") == "api_request"],
        write_events=[e for e in harness if e.get("type") == "write"],
    )


def _tree_evidence(spec: TaskSpec, root: Path, work: Path, unkept=()) -> dict[str, Any]:
    """What the rebuilt final tree shows against the task's starting tree: changes, patch, tampering,
    leftovers. A path the tree lists but could not keep (a FIFO) is not in the rebuilt tree, and
    changed all the same: it counts as changed (added, or modified when the start had it)."""
    from pytest_agentdrift.run import stdlib_guard, tamper
    from pytest_agentdrift.run.runner import copy_tree
    from pytest_agentdrift.tasks import treesnap
    from pytest_agentdrift.tasks.leftovers import LeftoverRules, split_leftovers

    start = root / "start"
    copy_tree(spec.repo, start)
    for rel in spec.hidden:
        (start / rel).unlink()
    before, after = treesnap.snapshot(start), treesnap.snapshot(work)
    d = treesnap.diff(before, after)
    for rel in map(unescape_path, unkept):
        if rel in d.deleted:
            d.deleted.remove(rel)
        if rel not in d.changed:
            (d.mode if rel in before and rel in after else d.modified if rel in before else d.added).append(rel)
    for paths in (d.added, d.modified, d.mode):
        paths.sort()
    d.added, leftovers = split_leftovers(
        d.added, spec.initial_tree, LeftoverRules.for_repo(spec.repo, spec.initial_tree)
    )
    changes = treesnap.render_changes(spec.repo, work, d, before, after)
    provided = stdlib_guard.fixture_provided(spec.initial_tree)
    return dict(
        diff=d,
        patch=changes.patch,
        tamper={
            **tamper.tamper_evidence(d, spec.protected),
            "shadowing_modules": stdlib_guard.shadowing_modules(d.added, after, provided),
        },
        lockfile_changes=tamper.lockfile_changes(d),
        leftovers=leftovers,
        added_lines=changes.added,
        unexamined=changes.unexamined,
        undisplayable=changes.undisplayable,
    )


def _recorded_evidence(ev: EvidenceRecord, raw: Path, result: RunRecord) -> dict[str, Any]:
    """What only the run could observe, as the record holds it."""
    return dict(
        argv=json.loads((raw / ARGV_FILE).read_text()) if (raw / ARGV_FILE).is_file() else [],
        exit_code=ev.get("exit_code"),
        timed_out=bool(ev.get("timed_out")),
        launch_error=ev.get("launch_error"),
        duration_s=float(ev.get("duration_s") or 0.0),
        stdout=_text(raw / STDOUT_FILE),
        stderr=_text(raw / STDERR_FILE),
        stdout_bytes=int(ev.get("stdout_bytes") or 0),
        stderr_bytes=int(ev.get("stderr_bytes") or 0),
        stdout_truncated=bool(ev.get("stdout_truncated")),
        stderr_truncated=bool(ev.get("stderr_truncated")),
        leftover_processes=int(ev.get("leftover_processes") or 0),
        writes_outside=list(ev.get("writes_outside") or []),
        git_mutations=list(ev.get("git_mutations") or []),
        work_tree_deleted=bool(ev.get("work_tree_deleted")),
        credential_access=ev.get("credential_access"),
        event_problems=list(ev.get("event_problems") or []),
        report=result.get("report"),
        report_error=result.get("report_error"),
        isolation=ev.get("isolation") or {},
        start_commit=ev.get("start_commit"),
        network_policy=ev.get("network_policy"),
        limits=ev.get("limits") or {},
        resource_exceeded=list(ev.get("resource_exceeded") or []),
        observation=ev.get("observation") or {},
        harness_budget=ev.get("harness_budget") or {},
        events_dropped=ev.get("events_dropped") or {},
        credential_canary=ev.get("credential_canary") or {},
        stopped=ev.get("stopped"),
        overlay=ev.get("overlay"),
    )


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""


def _needs(check_kind: str) -> frozenset[str]:
    return _NEEDS.get(check_kind, _DEFAULT_NEEDS)


def grading_unchanged(task: TaskEntry, spec: TaskSpec, record_isolation: str | None, isolation_mode: str) -> bool:
    """Whether the record's task was graded exactly as it would be now: the same grading code,
    checks and grading files (the task's grading id) in the same isolation. Its runs' checks
    then stand as recorded, and regrading pays only for the tasks that changed."""
    from pytest_agentdrift.grade.evaluator import task_grading_id

    recorded = task.get("grading_id")
    return bool(recorded) and recorded == task_grading_id(spec) and record_isolation == isolation_mode


def keeps_all_it_needs(record: Path, result: RunRecord) -> bool:
    """Whether the run's entry can stand as recorded: the record still holds everything its
    checks read (else the run is graded again and says per check what is missing), and every
    blob of its kept tree is what its name says (a record edited after the fact is refused,
    naming the file, whether or not its checks run again)."""
    lacks, doc = _lacking(record, result)
    for entry in (doc or {}).get("entries", {}).values():
        if entry.get("kept") and entry.get("sha256"):
            finaltree.read_blob(record, entry["sha256"])
    return not lacks


def regrade_run(record: Path, spec: TaskSpec, result: RunRecord, grader: Grader, scratch: Path) -> RunRecord:
    """The run's entry graded again by the current checks of `spec` (kept as recorded when it was not graded)."""
    from pytest_agentdrift.grade.scoring import score

    # a run never scored (lost to infrastructure, or the harness failed on it) is kept as recorded
    if result["outcome"] in UNSCORED_OUTCOMES or result["evidence"].get("harness_error"):
        return result
    lacks, doc = _lacking(record, result)
    raw = record / result["raw"]
    judged = [c for c in spec.checks if not _needs(c.kind) & set(lacks)]
    # (the check, why it is not judged again); None stands for the task's pytest functions
    skipped: list[tuple[CheckSpec | None, str]] = [
        (c, _why(lacks, _needs(c.kind))) for c in spec.checks if c not in judged
    ]
    functions = spec.function_files if not _FUNCTION_NEEDS & set(lacks) else ()
    if spec.function_files and not functions:
        skipped.append((None, _why(lacks, _FUNCTION_NEEDS)))
    root = scratch / f"{spec.id}-r{result['rep']}-{secrets.token_hex(4)}"
    work = root / "work"
    root.mkdir(parents=True)
    try:
        # without the list of changed paths the frozen copy stands in, for the checks that read neither
        kept = doc if doc is not None and "paths" not in lacks else {"entries": {}}
        finaltree.rebuild(spec, kept, lambda sha: finaltree.read_blob(record, sha), work, raw / finaltree.TREE_FILE)
        events = _read_events(raw / EVENTS_FILE) if "events" not in lacks else []
        unkept = [p for p in finaltree.lost_entries(kept) if kept["entries"][p].get("kept") is False]
        # a setuid/setgid bit is not put back, and was a change all the same
        unkept += [p for p, e in kept["entries"].items() if e.get("dropped") and p not in unkept]
        run = _evidence(spec, result, raw, work, root, events, unkept)
        checks = grader.evaluate(dataclasses.replace(spec, checks=tuple(judged), function_files=functions), run)
        # a check the record cannot decide leaves the run undecided: never a pass, never the agent's
        # failure; but a failure the record holds stands (what is lost now cannot undo it)
        recorded = {(c.get("name"), c.get("kind")): c for c in result.get("checks") or ()}
        rest = [_as_recorded(recorded, c, why) or _not_regradable(c, why, run.report) for c, why in skipped]
        scored = _score_regraded(run, [*checks, *rest], score)
    finally:
        from pytest_agentdrift.tasks.fdtree import rmtree

        rmtree(root)
    return _rescored(result, scored)


def _rescored(result: RunRecord, scored: dict[str, Any]) -> RunRecord:
    """The run's entry with what the regrade scored in place of what the record scored (outcome, passed,
    tampered pass, critical and failed checks, layers, checks, and `undecided` when it is); everything
    else is what the run did, kept. A check the regrade could not decide says so in its own entry."""
    new: RunRecord = {**result}
    new.pop("undecided", None)
    new["outcome"] = scored["outcome"]
    new["passed"] = scored["passed"]
    new["tampered_pass"] = scored["tampered_pass"]
    new["critical_failed"] = scored["critical_failed"]
    new["failed_checks"] = scored["failed_checks"]
    new["layers"] = scored["layers"]
    new["checks"] = scored["checks"]
    if "undecided" in scored:
        new["undecided"] = scored["undecided"]
    for c in new["checks"]:
        why = (c.get("evidence") or {}).get("not_regradable")
        if "not_regradable" in (c.get("evidence") or {}):
            c["not_regradable"] = str(why)
    return new


def _score_regraded(run: Any, checks: list[Any], score: Any) -> dict[str, Any]:
    """The run scored on what the regrade could decide. A check it could not decide never counts
    as a failure of the agent (critical or not), and never hides one it could decide: a run with a
    decided failure is scored on its decided checks (failed, or what its evidence says: timeout,
    ...); one without stays undecided, never a pass."""
    scored = score(run, checks)
    decided = [c for c in checks if not c.undecided]
    scored["critical_failed"] = [c.name for c in decided if c.critical and not c.passed]
    if scored["outcome"] == UNDECIDED_OUTCOME and len(decided) < len(checks) and not all(c.passed for c in decided):
        without = score(run, decided)
        if not without["passed"] and without["outcome"] != UNDECIDED_OUTCOME:
            scored.pop("undecided", None)
            scored.update({k: without[k] for k in ("outcome", "passed", "tampered_pass")})
    return scored


def _as_recorded(recorded: dict[tuple[str, str], CheckRecord], check: Any, why: str):
    """The check's recorded failure, when the record holds one decided at run time: it stands as
    recorded (the regrade cannot judge it again, and what is lost cannot undo a failure). A
    recorded pass does not: what the record no longer holds cannot be shown to pass."""
    from pytest_agentdrift.grade.results import CheckResult

    was = recorded.get((check.name, check.kind)) if check else None
    if not was or was.get("passed") is not False or was.get("undecided"):
        return None
    if was.get("not_regradable") and not (was.get("evidence") or {}).get("as_recorded"):
        return None  # undecided by an earlier regrade: nothing decided to keep
    evidence = {**(was.get("evidence") or {}), "not_regradable": why, "as_recorded": True}
    detail = str(was.get("detail", ""))
    if not (was.get("evidence") or {}).get("as_recorded"):
        detail = f"as recorded (not regradable: {why}): {detail}"
    return CheckResult(check.name, check.kind, check.layer, bool(was.get("critical")), False, detail, evidence)


def _why(lacks: dict[str, str], needs: frozenset[str]) -> str:
    return "; ".join(lacks[p] for p in sorted(needs & set(lacks)))


def _not_regradable(check: Any, why: str, report: Any):
    from pytest_agentdrift.grade.results import CheckResult

    name, kind, layer, critical = (
        (check.name, check.kind, check.layer, check.critical_for(report))
        if check
        else ("pytest functions", "function", "correctness", False)
    )
    return CheckResult(
        name, kind, layer, critical, False, f"not regradable: {why}", {"not_regradable": why}, undecided=True
    )


# ---- a whole record ---------------------------------------------------------------------------
def write_regraded(record: Path, out: Path, results: Results, manifest, source) -> None:
    """NEW beside OUT in a temporary directory, renamed into place: the raw files and blobs of
    the source record (each run's checks.json and run.json from the regrade), manifests, reports,
    results.json last. The source record's comparison/ is not carried: it judged other grades."""
    from pytest_agentdrift.record.derived import derived_record
    from pytest_agentdrift.record.store import atomic_write

    with derived_record(out, results, "regrading") as tmp:
        for name in (RAW_DIR, finaltree.BLOB_DIR):
            if (record / name).is_dir():
                shutil.copytree(record / name, tmp / name, symlinks=True)
        if (record / INSTRUCTION_BUNDLE_FILE).is_file():
            shutil.copyfile(record / INSTRUCTION_BUNDLE_FILE, tmp / INSTRUCTION_BUNDLE_FILE)
        for tid, task in results["tasks"].items():
            for run in task["runs"]:
                atomic_write(tmp / run["raw"] / CHECKS_FILE, dumps_pretty(run["checks"]))
                meta = {k: v for k, v in task.items() if k != "runs"}
                atomic_write(
                    tmp / run["raw"] / RUN_FILE,
                    dumps_pretty({"task_id": tid, "rep": run["rep"], "meta": meta, "result": run}),
                )
        if manifest is not None:
            atomic_write(tmp / MANIFEST_FILE, dumps_pretty(manifest))
            atomic_write(tmp / SOURCE_MANIFEST_FILE, dumps_pretty(source))


def provenance(results: Results, grading_isolation: str, kept_tasks: list[str]) -> RegradedFrom:
    return {
        "run_id": results["run_id"],
        "evaluator_id": results.get("evaluator_id"),
        "at": utc_timestamp(),
        "grading_isolation": grading_isolation,
        "kept_tasks": kept_tasks,  # graded exactly as now (same grading id): their checks stand as recorded
        "from_regraded": results.get("regraded_from"),
    }


def regraded_results(
    results: Results,
    runs: dict[str, list[RunRecord]],
    run_id: str,
    evaluator: str,
    task_set: str,
    specs: dict[str, TaskSpec],
) -> Results:
    from pytest_agentdrift.grade.evaluator import task_grading_id
    from pytest_agentdrift.grade.scoring import summarise

    tasks: dict[str, TaskEntry] = {tid: {**t, "runs": runs[tid]} for tid, t in results["tasks"].items()}
    for tid, task in tasks.items():
        if tid in specs:
            task["grading_id"] = task_grading_id(specs[tid])
    return {
        **results,
        "run_id": run_id,
        "evaluator_id": evaluator,
        "task_set_id": task_set,
        "tasks": tasks,
        "summary": {**results["summary"], **summarise(tasks)},
    }
