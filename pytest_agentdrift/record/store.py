"""Recorded runs on disk: atomic writes, never rewriting a complete run. No pytest.

Only the controller process writes here. Every file is written to a temp
file in the same directory and renamed into place, so a reader sees either
the old bytes or the new, never half. While a session records, the run
directory holds an `INCOMPLETE` marker; `results.json` is written last.
"""

from __future__ import annotations

import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from pytest_agentdrift.canonical import dumps_pretty, load_json_file
from pytest_agentdrift.errors import RecordError

SCHEMA_VERSION = 1
INCOMPLETE_MARKER = "INCOMPLETE"
RESULTS = "results.json"


def atomic_write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@lru_cache(maxsize=1)
def results_validator():
    """The one jsonschema validator for results.json (built once per process)."""
    import jsonschema

    schema = json.loads((Path(__file__).parent / "schema" / "results.schema.json").read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def schema_problems(results: dict[str, Any]) -> list[str]:
    errors = sorted(results_validator().iter_errors(results), key=lambda e: list(e.path))
    return [f"{'/'.join(str(p) for p in e.path) or '(root)'}: {e.message}" for e in errors[:10]]


def check_record_target(path: Path) -> None:
    """Refuse to record into a directory that already holds a run (exit 4)."""
    if path.exists() and not path.is_dir():
        raise RecordError("recording target exists and is not a directory", path)
    results = path / RESULTS
    if results.exists():
        state = "a complete run"
        try:
            if not json.loads(results.read_text()).get("complete"):
                state = "an incomplete run"
        except (OSError, ValueError, AttributeError):
            state = "a recorded run"
        raise RecordError(
            f"already holds {state}; recorded runs are never rewritten: record into a new directory", path
        )
    if path.is_dir() and any(p.name != INCOMPLETE_MARKER for p in path.iterdir()):
        raise RecordError("recording target is not empty; record into a new directory", path)
    if (path / INCOMPLETE_MARKER).exists():
        raise RecordError("holds an interrupted recording; record into a new directory", path)


class RunRecorder:
    """Writes one run directory: raw artifacts as runs finish, results last."""

    def __init__(self, path: Path):
        self.path = path
        self.started = False

    def start(self, note: str) -> None:
        check_record_target(self.path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            # exclusive: of two sessions racing for one directory, one gets it
            fd = os.open(self.path / INCOMPLETE_MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise RecordError("another session is recording into this directory", self.path) from None
        except OSError as exc:
            raise RecordError(f"cannot create the run directory: {exc.strerror or exc}", self.path) from None
        with os.fdopen(fd, "w") as fh:
            fh.write(note + "\n")
        self.started = True

    def write_raw(self, rel_dir: str, files: dict[str, str]) -> None:
        for name, text in files.items():
            atomic_write(self.path / rel_dir / name, text)

    def write_json(self, name: str, obj: Any) -> None:
        atomic_write(self.path / name, dumps_pretty(obj))

    def finish(self, results: dict[str, Any]) -> None:
        problems = schema_problems(results)
        if problems:
            # A schema violation is our bug; keep the data, say so, never claim complete.
            results = {
                **results,
                "complete": False,
                "incomplete_reasons": [*results.get("incomplete_reasons", []), *("schema: " + p for p in problems)],
            }
        atomic_write(self.path / RESULTS, dumps_pretty(results))
        if results["complete"]:
            try:
                (self.path / INCOMPLETE_MARKER).unlink()
            except FileNotFoundError:
                pass


def load_run(path: Path, require_complete: bool = True) -> dict[str, Any]:
    """Read a recorded run's results.json; a bad or incomplete run is exit 4."""
    if not path.is_dir():
        raise RecordError("no such run directory", path)
    results_path = path / RESULTS
    if not results_path.exists():
        if (path / INCOMPLETE_MARKER).exists():
            raise RecordError("the run was interrupted before it finished (INCOMPLETE marker, no results.json)", path)
        raise RecordError("not a recorded run (no results.json)", path)
    results = load_json_file(results_path, RecordError)
    if not isinstance(results, dict):
        raise RecordError("results.json is not a JSON object", results_path)
    problems = schema_problems(results)
    if problems:
        raise RecordError("results.json does not match the schema: " + "; ".join(problems[:3]), results_path)
    if require_complete and not results["complete"]:
        reasons = "; ".join(results.get("incomplete_reasons", [])[:3]) or "marked incomplete"
        raise RecordError(f"the run is incomplete ({reasons}) and cannot be used as a baseline", path)
    return results


def merge_results(shards: list[dict[str, Any]], run_id: str) -> dict[str, Any]:
    """One run from shards recorded on several machines (disjoint task sets).

    The caller has already shown the shards' manifests are one runtime; here
    the results must agree on the task set and evaluator and not overlap.
    """
    from pytest_agentdrift.grade.scoring import summarise

    first = shards[0]
    for key in ("task_set_id", "evaluator_id", "runtime_id", "plugin_version"):
        values = {sh.get(key) for sh in shards}
        if len(values) > 1:
            raise RecordError(f"shards differ in {key}: {', '.join(sorted(map(str, values)))}")
    tasks: dict[str, Any] = {}
    for sh in shards:
        overlap = sorted(set(tasks) & set(sh["tasks"]))
        if overlap:
            raise RecordError(f"shards overlap on task(s) {', '.join(overlap)}; each task must come from one shard")
        tasks.update(sh["tasks"])
    tasks = dict(sorted(tasks.items()))
    reasons = [f"shard {sh['run_id']}: {r}" for sh in shards for r in sh["incomplete_reasons"]]
    return {
        **first,
        "run_id": run_id,
        "started_at": min(sh["started_at"] for sh in shards),
        "finished_at": max(sh["finished_at"] for sh in shards),
        "complete": all(sh["complete"] for sh in shards),
        "incomplete_reasons": reasons,
        "tasks": tasks,
        "workers": {f"{sh['run_id']}/{wid}": w for sh in shards for wid, w in sh["workers"].items()},
        "summary": summarise(tasks),
        "merged_from": [sh["run_id"] for sh in shards],
    }
