"""Continuing an incomplete record (`--agent-resume DIR`). No pytest.

What a recording leaves on disk as it goes, so that even a controller killed
with SIGKILL can be continued:

* `INCOMPLETE`: the marker, holding the session's state as JSON (run id,
  start time, the items the session was to run, its settings and shard, the
  notes of earlier resumes), written when the first run reports;
* `runtime-manifest.json` (and the instruction bundle and source manifest),
  written at the same moment and rewritten, finalised, at the end;
* for every finished run, its raw files and then `raw/<task>/r<rep>/run.json`
  (the run's result as it will appear in results.json). A run.json exists
  only once everything of its run was written.

Resuming reads those, refuses a record that is complete (records are
immutable once complete), holds the directory's lock (flock: released when a
process dies, so a killed session never blocks its own resume), and hands
the session the finished runs to keep. The session then runs only the
missing items and finishes the same record: results.json replaced
atomically, INCOMPLETE removed when everything is there. A run that was lost
to infrastructure (the agent never got to work: not signed in, provider
down) counts as missing and is run again; the resume note keeps what it
ended on.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from pytest_agentdrift.canonical import dumps_pretty, load_json_file
from pytest_agentdrift.errors import RecordError
from pytest_agentdrift.record.store import INCOMPLETE_MARKER, RunRecorder, atomic_write, lock_run_dir, raw_path
from pytest_agentdrift.shapes import ResumeNote, SettingsRecord
from pytest_agentdrift.tasks.shard import item_key, split_key
from pytest_agentdrift.vocabulary import INFRA_OUTCOME, MANIFEST_FILE, RAW_DIR, RESULTS_FILE, RUN_FILE

STATE_FORMAT = 1


def state_document(
    *,
    run_id: str,
    started_at: str,
    expected: list[str],
    settings: SettingsRecord,
    shard: dict[str, Any] | None,
    note: str,
    resumed: list[ResumeNote] | None = None,
) -> dict[str, Any]:
    return {
        "format": STATE_FORMAT,
        "note": note,
        "run_id": run_id,
        "started_at": started_at,
        "expected": sorted(expected),
        "settings": settings,
        "shard": shard,
        "resumed": list(resumed or []),
    }


def write_state(path: Path, state: dict[str, Any]) -> None:
    atomic_write(path / INCOMPLETE_MARKER, dumps_pretty(state))


def read_state(path: Path) -> dict[str, Any]:
    marker = path / INCOMPLETE_MARKER
    try:
        text = marker.read_text(encoding="utf-8")
    except OSError as exc:
        raise RecordError(f"cannot read the INCOMPLETE marker: {exc.strerror or exc}", marker) from None
    try:
        state = json.loads(text)
    except ValueError:
        state = None
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise RecordError(
            "the INCOMPLETE marker holds no session state (recorded by an older version, or the session "
            "stopped before its first run reported): nothing to resume; record into a new directory",
            marker,
        )
    for key, kind in (("run_id", str), ("started_at", str), ("expected", list), ("settings", dict)):
        if not isinstance(state.get(key), kind):
            raise RecordError(f"the INCOMPLETE marker's session state lacks {key!r}", marker)
    return state


@lru_cache(maxsize=1)
def _run_validator():
    from pytest_agentdrift.record.store import results_validator

    schema = results_validator().schema
    sub = {"$schema": schema["$schema"], "$ref": "#/$defs/run", "$defs": schema["$defs"]}
    return type(results_validator())(sub)


def _meta_ok(meta: Any) -> bool:
    return (
        isinstance(meta, dict)
        and all(isinstance(meta.get(k), str) for k in ("title", "suite", "behavior", "task_digest"))
        and meta["task_digest"].startswith("sha256:")
    )


def read_run_files(path: Path, expected: set[str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """{item key: payload} of every finished run on disk, and notes on files that could not be kept."""
    kept: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    raw = path / RAW_DIR
    if not raw.is_dir():
        return kept, notes
    for run_file in sorted(raw.glob(f"*/r*/{RUN_FILE}")):
        rel = run_file.relative_to(path).as_posix()
        try:
            doc = json.loads(run_file.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            notes.append(f"{rel}: unreadable; the run is run again")
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("task_id"), str) or not isinstance(doc.get("rep"), int):
            notes.append(f"{rel}: not a run file; the run is run again")
            continue
        key = item_key(doc["task_id"], doc["rep"])
        result = doc.get("result")
        if (
            not isinstance(result, dict)
            or list(_run_validator().iter_errors(result))
            or not _meta_ok(doc.get("meta"))
            or result.get("raw") != raw_path(doc["task_id"], doc["rep"])
            or run_file.parent.relative_to(path).as_posix() != result.get("raw")
        ):
            notes.append(f"{rel}: does not match the results schema; the run is run again")
            continue
        if key not in expected:
            notes.append(f"{rel}: {key} is not one of the record's items; ignored")
            continue
        kept[key] = {"task_id": doc["task_id"], "rep": doc["rep"], "meta": doc["meta"], "result": result}
    return kept, notes


@dataclass
class ResumeState:
    path: Path
    state: dict[str, Any]
    manifest: dict[str, Any]
    kept: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: runs lost to infrastructure: they never really ran, so a resume runs them again
    #: (the note of the resume keeps what they ended on)
    infra_lost: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def expected(self) -> list[str]:
        return list(self.state["expected"])

    @property
    def missing(self) -> list[str]:
        return sorted(set(self.state["expected"]) - set(self.kept))


def load_for_resume(path: Path, validate_manifest: Callable[[Any, Path], dict[str, Any]] | None = None) -> ResumeState:
    """Everything needed to continue the record in `path`, or RecordError (exit 4).

    `validate_manifest` (manifest.capture's, passed by the session: the record stage does not
    import the manifest stage) checks the recorded runtime manifest; without it the manifest
    only has to be a JSON object."""

    if not path.is_dir():
        raise RecordError("no such record to resume (record with --agent-record first)", path)
    results_path = path / RESULTS_FILE
    if results_path.exists():
        from pytest_agentdrift.record.store import check_seal

        check_seal(path)
        try:
            done = json.loads(results_path.read_text(encoding="utf-8")).get("complete") is True
        except (OSError, ValueError, AttributeError):
            done = False
        if done:  # (a session killed between results.json and removing the marker is complete too)
            raise RecordError(
                "the record is complete; complete records are never rewritten: record into a new directory", path
            )
    if not (path / INCOMPLETE_MARKER).exists():
        if results_path.exists():
            raise RecordError(
                "the record is complete; complete records are never rewritten: record into a new directory", path
            )
        raise RecordError("not an incomplete recording (no INCOMPLETE marker): nothing to resume", path)
    state = read_state(path)
    mpath = path / MANIFEST_FILE
    if not mpath.is_file():
        raise RecordError(
            "the record has no runtime manifest: it cannot be checked against this session's runtime", mpath
        )
    manifest = load_json_file(mpath, RecordError)
    if validate_manifest is not None:
        manifest = validate_manifest(manifest, mpath)
    elif not isinstance(manifest, dict):
        raise RecordError("the runtime manifest is not a JSON object", mpath)
    found, notes = read_run_files(path, set(state["expected"]))
    kept = {k: p for k, p in found.items() if p["result"]["outcome"] != INFRA_OUTCOME}
    lost = {k: p for k, p in found.items() if p["result"]["outcome"] == INFRA_OUTCOME}
    return ResumeState(path=path, state=state, manifest=manifest, kept=kept, notes=notes, infra_lost=lost)


def settings_differences(
    recorded: Mapping[str, object], current: Mapping[str, object]
) -> list[tuple[str, object, object]]:
    """Settings of the recorded session that this one does not share: each makes its runs different."""
    keys = sorted(set(recorded) | set(current))
    return [(k, recorded.get(k), current.get(k)) for k in keys if recorded.get(k) != current.get(k)]


class ResumedRecorder(RunRecorder):
    """Records into an existing incomplete run directory (already started)."""

    def __init__(self, path: Path, resume: ResumeState):
        super().__init__(path)
        self._lock_fd = lock_run_dir(path)
        self.started = True
        self.resume = resume

    def start(self, note: str) -> None:  # the record was started by the session that is resumed
        return None

    def clear_partial(self, keys: list[str]) -> None:
        """Raw files a killed session left for runs it never finished (or whose run.json is
        damaged): those runs are run again, into a clean directory."""
        for key in keys:
            d = self.path / raw_path(*split_key(key))
            if d.is_dir():
                shutil.rmtree(d)


def _shard_text(shard: Mapping[str, object] | None) -> str:
    return "none" if not shard else f"{shard['index']}/{shard['count']}"


def resume_refusal(
    res: ResumeState, identity_lines: list[str], settings: SettingsRecord, shard: dict[str, Any] | None
) -> list[str] | None:
    """Why this session cannot continue the record (the session exits 6 with these lines), or None.

    `identity_lines` are the identity comparison's BLOCK lines (the manifest stage compares, the
    session hands them in); `settings` is this session's settings record, `shard` its shard."""
    lines = list(identity_lines)
    lines += [
        f"BLOCK settings.{k}: {before!r} != {now!r}"
        for k, before, now in settings_differences(res.state["settings"], settings)
    ]
    recorded = res.state.get("shard")
    current = {"index": shard["index"], "count": shard["count"]} if shard else None
    if (recorded and {k: recorded[k] for k in ("index", "count")}) != current:
        lines.append(f"BLOCK shard: {_shard_text(recorded)} != {_shard_text(current)}")
    if not lines:
        return None
    return [f"agentdrift: cannot resume {res.path}: this session is not the recorded run", *lines]


def continue_record(res: ResumeState, *, at: str, argv: Sequence[str]) -> ResumedRecorder:
    """Take the record: its lock, the raw files of unfinished runs cleared, and this resume's note
    (when, how many runs kept, the command, what the runs lost to infrastructure ended on) in its state."""
    from pytest_agentdrift.agents.infra import describe

    recorder = ResumedRecorder(res.path, res)
    recorder.clear_partial(res.missing)
    note: ResumeNote = {"at": at, "kept_runs": len(res.kept), "ran_runs": 0, "pytest_argv": list(argv)}
    if res.infra_lost:
        note["rerun_infra_errors"] = [
            f"{k}: {describe(p['result']['infra_error'])}" for k, p in sorted(res.infra_lost.items())
        ]
    res.state = {**res.state, "resumed": [*res.state.get("resumed", []), note]}
    write_state(res.path, res.state)
    return recorder


__all__ = [
    "resume_refusal",
    "continue_record",
    "ResumeState",
    "ResumedRecorder",
    "load_for_resume",
    "read_state",
    "write_state",
    "state_document",
    "read_run_files",
    "settings_differences",
    "STATE_FORMAT",
]
