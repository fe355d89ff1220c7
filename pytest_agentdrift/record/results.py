"""results.json as a session builds it, and the record written around it. No pytest.

The controller gathers run payloads (session/state.RunCollector) and hands
them here: each run's files as it arrives (`write_run`, its run.json last),
the identity digests (`evaluator_id`, `task_set_id`), the document
(`results_document`) and, at the end, everything else of the record with
results.json last (`write_record`), which marks it complete.
"""

from __future__ import annotations

import datetime as _dt
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from pytest_agentdrift import EVALUATOR_VERSION, __version__
from pytest_agentdrift.shapes import (
    AgentRecord,
    IsolationRecord,
    Results,
    RunRecord,
    SettingsRecord,
    TaskEntry,
    TaskMeta,
    WorkerRecord,
)

if TYPE_CHECKING:
    from pytest_agentdrift.agents.base import AgentAdapter
    from pytest_agentdrift.record.store import RunRecorder
    from pytest_agentdrift.run.sandbox import Isolation
    from pytest_agentdrift.shapes import JsonObject, JsonValue
    from pytest_agentdrift.tasks.taskspec import TaskSpec
from pytest_agentdrift.vocabulary import (
    EXIT_STATUS_KEY,
    INSTRUCTION_BUNDLE_FILE,
    MANIFEST_FILE,
    REPORT_HTML_FILE,
    REPORT_MD_FILE,
    RUN_FILE,
    SCHEMA_VERSION,
    SOURCE_MANIFEST_FILE,
    utc_timestamp,
)


def utc_now() -> str:
    return utc_timestamp()


def new_run_id() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(4)


# -- identity digests ----------------------------------------------------------------------
def evaluator_id(specs: list[TaskSpec]) -> str:
    """What decides how the tasks' runs are graded: the grading code, the checks, the grading files."""
    from pytest_agentdrift.canonical import digest
    from pytest_agentdrift.grade.evaluator import evaluator_components

    ordered = sorted(specs, key=lambda s: s.id)
    # Grading code by logical component (see evaluator.py): moving a file keeps the id.
    return digest(
        {
            "evaluator_version": EVALUATOR_VERSION,
            "code": evaluator_components(),
            "checks": {s.id: [c.to_dict() for c in s.checks] for s in ordered},
            # the grading part of each task: checks, hidden tests, golden files, solutions (tasks/taskspec.split_task)
            "tasks": {s.id: s.grading_digest() for s in ordered},
        }
    )


def task_set_id(specs: list[TaskSpec]) -> str:
    from pytest_agentdrift.canonical import digest

    # what the agent is given only: a fixed check changes evaluator_id, never the task set
    return digest({s.id: s.given_digest() for s in sorted(specs, key=lambda s: s.id)})


def identity_field(
    manifest: Mapping[str, JsonValue] | None, name: str, compute: Callable[[list[TaskSpec]], str], specs: list[TaskSpec]
) -> str | None:
    """From the manifest when captured (it saw every selected task), else from the specs run here."""
    identity = (manifest or {}).get("identity")
    value = identity.get(name) if isinstance(identity, dict) else None
    if isinstance(value, str) and value.startswith("sha256:"):
        return value
    return compute(specs) if specs else None


# -- the document --------------------------------------------------------------------------
def incomplete_reasons(
    expected: set[str], received: set[str], workers: Mapping[str, WorkerRecord], interrupted: str | None, ran: bool
) -> list[str]:
    """Why the record is not complete: runs that never reported, crashed workers, an interruption."""
    reasons = []
    missing = sorted(expected - received)
    if missing:
        reasons.append(f"{len(missing)} run(s) never reported: " + ", ".join(missing[:10]))
    reasons += [f"worker {wid} crashed: {w['error']}" for wid, w in sorted(workers.items()) if w.get("error")]
    if interrupted:
        reasons.append(f"session interrupted: {interrupted}")
    if not expected and not received and not ran:
        reasons.append("no task was run")
    return reasons


def settings_record(settings: Any) -> SettingsRecord:
    """The session settings results.json records (a resumed session must share them). `settings` is
    options.Settings, which a stage may not import (options reads the manifest stage)."""
    from pytest_agentdrift.run.limits import DEFAULT_LIMITS, GRADING_LIMITS

    return {
        "k": settings.k,
        "timeout_s": settings.timeout,
        "fail_on": settings.fail_on,
        "gate": settings.gate,
        "isolation": settings.isolation,
        "agent_options": settings.agent_options,
        "limits": dict(settings.limits) or dict(DEFAULT_LIMITS),
        "grading_limits": dict(settings.grade_limits) or dict(GRADING_LIMITS),
    }


def agent_record(adapter: AgentAdapter | None, agent_options: JsonObject, version: str) -> AgentRecord:
    """The agent the session ran (`none` when it ran none)."""
    return {
        "name": adapter.name if adapter else "none",
        "argv": adapter.argv_template(agent_options) if adapter else [],
        "version": version,
        "product": adapter.product if adapter else "none",
        "surface": adapter.surface if adapter else "none",
    }


def isolation_record(isolation: Isolation, requested: str) -> IsolationRecord:
    """The enforced isolation and what it leaves visible."""
    from pytest_agentdrift.run.mountplan import not_hidden

    enforced: IsolationRecord = isolation.to_dict(requested)
    return {**enforced, "not_hidden": not_hidden(isolation.mode)}


def results_document(
    *,
    run_id: str,
    started_at: str,
    reasons: list[str],
    agent: AgentRecord,
    isolation: IsolationRecord,
    settings: SettingsRecord,
    identity: tuple[str | None, str | None, str | None],
    runs: Mapping[str, Mapping[int, RunRecord]],
    task_meta: Mapping[str, TaskMeta],
    workers: Mapping[str, WorkerRecord],
) -> Results:
    """results.json. `identity` is (runtime_id, task_set_id, evaluator_id); `runs` every task's
    results by repetition, `task_meta` its facts (record/payload.task_meta)."""
    from pytest_agentdrift.grade.scoring import summarise

    tasks: dict[str, TaskEntry] = {
        tid: {**task_meta[tid], "runs": [runs[tid][rep] for rep in sorted(runs[tid])]} for tid in sorted(runs)
    }
    runtime_id, task_set, evaluator = identity
    return {
        "schema_version": SCHEMA_VERSION,
        "plugin_version": __version__,
        "run_id": run_id,
        "started_at": started_at,
        "finished_at": utc_now(),
        "complete": not reasons,
        "incomplete_reasons": reasons,
        "agent": agent,
        "isolation": isolation,
        "settings": settings,
        "runtime_id": runtime_id,
        "task_set_id": task_set,
        "evaluator_id": evaluator,
        "tasks": tasks,
        "workers": {
            wid: {"exitstatus": w.get("exitstatus"), "error": w.get("error")} for wid, w in sorted(workers.items())
        },
        "summary": summarise(tasks),
    }


# -- writing -------------------------------------------------------------------------------
def write_session_files(
    rec: RunRecorder, manifest: object, instruction_bundle: object, source_manifest: object
) -> None:
    """The runtime manifest, the instruction bundle and the source manifest, those the session has."""
    for name, doc in (
        (MANIFEST_FILE, manifest),
        (INSTRUCTION_BUNDLE_FILE, instruction_bundle),
        (SOURCE_MANIFEST_FILE, source_manifest),
    ):
        if doc is not None:
            rec.write_json(name, doc)


def write_run(
    rec: RunRecorder, payload: Mapping[str, JsonValue], result: RunRecord, raw: dict[str, str], tree: JsonObject | None
) -> None:
    """One run's files as it arrives; run.json last: it means every file of this run is on disk
    (record/resume.py)."""
    if tree is not None:
        raw = {**raw, **rec.write_tree(tree)}
    if raw:
        rec.write_raw(result["raw"], raw)
    doc = {"task_id": payload["task_id"], "rep": payload["rep"], "meta": payload["meta"], "result": result}
    rec.write_json(f"{result['raw']}/{RUN_FILE}", doc)


def write_record(
    rec: RunRecorder,
    results: Results,
    *,
    session_files: tuple[object, object, object],
    comparison_files: Mapping[str, object],
    comparison_lines: list[str],
    closing: str,
) -> None:
    """Manifest files and comparison first, the reports, results.json last (it marks completeness).

    `session_files` are the manifest, instruction bundle and source manifest (write_session_files)."""
    from pytest_agentdrift.record.html import record_page
    from pytest_agentdrift.record.report import markdown

    write_session_files(rec, *session_files)
    for name, doc in sorted(comparison_files.items()):
        if isinstance(doc, str):
            rec.write_raw(str(Path(name).parent), {Path(name).name: doc})
        else:
            rec.write_json(name, doc, lead=(EXIT_STATUS_KEY,))  # decision.json opens with the closing line
    rec.write_raw(".", {REPORT_MD_FILE: markdown(results, comparison_lines or None, closing=closing)})
    rec.write_raw(".", {REPORT_HTML_FILE: record_page(rec.path, results, closing)})
    rec.finish(results)


__all__ = [
    "agent_record",
    "evaluator_id",
    "identity_field",
    "incomplete_reasons",
    "isolation_record",
    "new_run_id",
    "results_document",
    "settings_record",
    "task_set_id",
    "utc_now",
    "write_record",
    "write_run",
    "write_session_files",
]
