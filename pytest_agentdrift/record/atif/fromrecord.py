"""Trajectories of a recorded run: its raw files, the instruction found by its recorded bytes, the agent
as the record names it, the grade beside the steps; every run of a record exported, validated first."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from pytest_agentdrift.canonical import json_lines_objects
from pytest_agentdrift.record.atif.schema import SCHEMA_PATH, validate
from pytest_agentdrift.record.atif.trajectory import DETERMINISTIC_PRODUCTS, build
from pytest_agentdrift.shapes import JsonObject, Results, RunRecord
from pytest_agentdrift.tasks.shard import item_key
from pytest_agentdrift.vocabulary import (
    EVENTS_FILE,
    MANIFEST_FILE,
    SOURCE_MANIFEST_FILE,
    STDOUT_FILE,
    TASK_MD_FILE,
    is_concrete,
)


def _model_name(value: object) -> bool:
    """Whether `value` can be ATIF's model_name: a concrete value, and text (the schema's type)."""
    return isinstance(value, str) and is_concrete(value)


def _read(path: Path, root: Path, limit: int = 16 << 20) -> str | None:
    from pytest_agentdrift.canonical import read_regular
    from pytest_agentdrift.record.html import inside

    if not inside(path, root):
        return None  # a record copied from elsewhere may hold links out of it
    try:
        return read_regular(path, limit).decode("utf-8", "surrogateescape")
    except OSError:
        return None


def find_instruction(
    task_id: str, source_manifest: JsonObject | None, task_dirs: Iterable[Path] = ()
) -> tuple[str | None, JsonObject]:
    """The instruction text the run was given, when a task directory with the same
    task.md bytes (by the record's source manifest) can be found; else None and why."""

    want = None
    files = (source_manifest or {}).get("files")
    for f in files if isinstance(files, list) else []:
        if isinstance(f, dict) and f.get("path") == f"{task_id}/{TASK_MD_FILE}":
            want = f.get("sha256")
    info: JsonObject = {"task_id": task_id, "instruction_file": TASK_MD_FILE, "task_md_sha256": want}
    if not want:
        info["instruction_text"] = "not recorded: the record's source manifest does not list this task's task.md"
        return None, info
    from pytest_agentdrift.tasks.taskdirs import find_task_dirs

    for root in task_dirs:
        for d in find_task_dirs(Path(root)) if Path(root).is_dir() else []:
            md = d / TASK_MD_FILE
            try:
                data = md.read_bytes()
            except OSError:
                continue
            if hashlib.sha256(data).hexdigest() == want:
                info["instruction_text"] = f"from {d.name}/{TASK_MD_FILE} (same sha256 as recorded)"
                return data.decode("utf-8", "replace"), info
    info["instruction_text"] = (
        "not included: no task directory with the recorded task.md bytes was found (agentdrift export atif --tasks DIR)"
    )
    return None, info


def _raw_events(run_dir: Path, raw_rel: object) -> tuple[list[JsonObject], str | None, list[str]]:
    """The run's events.jsonl and stdout.txt from its raw artifacts, with a note on what is missing."""
    raw = (
        Path(run_dir).joinpath(*Path(raw_rel).parts)
        if isinstance(raw_rel, str) and ".." not in Path(raw_rel).parts
        else None
    )
    if raw is None:
        return [], None, ["the run has no raw artifacts: only the instruction and the outcome are known."]
    notes: list[str] = []
    text = _read(raw / EVENTS_FILE, Path(run_dir))
    events = json_lines_objects(text or "")[0]
    stdout = _read(raw / STDOUT_FILE, Path(run_dir))
    if text is None:
        notes.append("events.jsonl was not recorded: the steps are incomplete.")
    return events, stdout, notes


def agent_schema(results: Results, run: RunRecord, manifest: JsonObject | None) -> dict[str, object]:
    """ATIF's agent object: the recorded agent, the model that answered, the identity it ran under."""
    agent: Mapping[str, object] = results.get("agent") or {}
    given = (manifest or {}).get("identity")
    identity: JsonObject = given if isinstance(given, dict) else {}
    model = (
        run.get("model_stamp")
        if _model_name(run.get("model_stamp"))
        else (identity.get("model_id") if _model_name(identity.get("model_id")) else None)
    )
    agent_extra = {
        "product": agent.get("product"),
        "surface": agent.get("surface"),
        "config_hash": identity.get("config_hash") if manifest else "not recorded",
        "instruction_hash": identity.get("instruction_hash") if manifest else "not recorded",
        "runtime_id": results.get("runtime_id"),
        "model_id_requested": identity.get("model_id"),
        "model_stamp": run.get("model_stamp"),
        "exported_by": f"pytest-agentdrift {results.get('plugin_version', '?')}",
    }
    return {
        "name": str(agent.get("name") or "unknown"),
        "version": str(agent.get("version") or "unobserved"),
        "model_name": model,
        "extra": {k: v for k, v in agent_extra.items() if v is not None},
    }


def _grade_extra(results: Results, task_id: str, run: RunRecord) -> dict[str, object]:
    """extra.agentdrift: the harness's evidence and the grade, beside the agent's own account."""
    return {
        "agentdrift": {
            "run_id": results.get("run_id"),
            "task_id": task_id,
            "rep": run.get("rep"),
            "outcome": run.get("outcome"),
            "passed": run.get("passed"),
            "tampered_pass": run.get("tampered_pass"),
            "critical_failed": run.get("critical_failed"),
            "failed_checks": run.get("failed_checks"),
            "layers": run.get("layers"),
            "report_error": run.get("report_error"),
            "evidence": run.get("evidence"),
            "raw": run.get("raw"),
        }
    }


def run_trajectory(
    run_dir: Path,
    results: Results,
    task_id: str,
    run: RunRecord,
    manifest: JsonObject | None = None,
    source_manifest: JsonObject | None = None,
    task_dirs: Iterable[Path] = (),
) -> dict[str, object]:
    """The trajectory of one recorded run."""
    raw_rel = run.get("raw")
    events, stdout, notes = _raw_events(run_dir, raw_rel)
    agent_doc = agent_schema(results, run, manifest)
    instruction, instruction_info = find_instruction(task_id, source_manifest, task_dirs)
    product = (results.get("agent") or {}).get("product")
    if product in DETERMINISTIC_PRODUCTS:
        notes.append(
            "The reference agent calls no model: its steps replay the task's scripted solution (llm_call_count 0)."
        )
    notes.append(
        "Steps are the agent's and its adapter's account (events.jsonl, and the product's own stream for "
        "tool results and usage); the harness's evidence and the grade are in extra.agentdrift."
    )
    return build(
        session_id=f"{results.get('run_id', 'run')}/{item_key(task_id, run['rep'])}",
        agent=agent_doc,
        events=events,
        product=product,
        stdout=stdout,
        instruction=instruction,
        instruction_extra=instruction_info,
        usage=run.get("usage"),
        report=run.get("report"),
        extra=_grade_extra(results, task_id, run),
        notes=notes,
    )


_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def trajectory_filename(task_id: str, rep: object) -> str:
    return f"{_SAFE.sub('_', task_id)}-r{_SAFE.sub('_', str(rep))}.json"


def export_run(
    run_dir: Path, out_dir: Path, task_dirs: Iterable[Path] = (), results: Results | None = None
) -> list[Path]:
    """Write one validated ATIF file per run of a record; nothing is written unless all validate.

    `results`: the record's results.json when the caller already loaded it."""
    from pytest_agentdrift.canonical import load_json_file
    from pytest_agentdrift.errors import AgentDriftError, RecordError
    from pytest_agentdrift.record.store import atomic_write, load_results

    run_dir = Path(run_dir)
    if results is None:
        results = load_results(run_dir, require_complete=False)

    def optional(name: str) -> JsonObject | None:
        path = run_dir / name
        value = load_json_file(path, RecordError) if path.is_file() else None
        return value if isinstance(value, dict) else None

    manifest, source_manifest = optional(MANIFEST_FILE), optional(SOURCE_MANIFEST_FILE)
    from pytest_agentdrift.tasks.taskdirs import builtin_suite_dir

    dirs = [*task_dirs, builtin_suite_dir()]
    docs: list[tuple[str, dict[str, object]]] = []
    for tid in sorted(results["tasks"]):
        for run in results["tasks"][tid]["runs"]:
            doc = run_trajectory(run_dir, results, tid, run, manifest, source_manifest, dirs)
            problems = validate(doc)
            if problems:
                raise AgentDriftError(
                    f"the trajectory of {tid} r{run.get('rep')} does not validate against "
                    f"{SCHEMA_PATH.name} (a bug in pytest-agentdrift): " + "; ".join(problems[:3])
                )
            docs.append((trajectory_filename(tid, run.get("rep")), doc))
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise AgentDriftError("exists and is not a directory", out_dir)
    written = []
    for name, doc in docs:
        path = out_dir / name
        # ensure_ascii: a lone surrogate (a file name that was not UTF-8) stays valid JSON text
        atomic_write(path, json.dumps(doc, indent=2, sort_keys=False, ensure_ascii=True) + "\n")
        written.append(path)
    return written
