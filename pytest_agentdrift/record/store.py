"""Recorded runs on disk: atomic writes, never rewriting a complete run. No pytest.

Only the controller process writes here. Every file is written to a temp
file in the same directory and renamed into place, so a reader sees either
the old bytes or the new, never half. While a session records, the run
directory holds an `INCOMPLETE` marker; `results.json` is written last, and
after it its seal (`results.json.sha256`, its digest): every reader (`load_results`)
refuses a results.json that no longer matches its seal. The seal catches a
partial or accidental rewrite; it cannot stop a forger who runs as the
harness's user (who could write a new seal too), which is why nothing the
agent gave the harness runs as that user after the session (docs/security.md).
"""

from __future__ import annotations

import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence, TypeGuard

from pytest_agentdrift.canonical import dumps_pretty, load_json_file
from pytest_agentdrift.errors import RecordError
from pytest_agentdrift.shapes import Results
from pytest_agentdrift.tasks.shard import item_key
from pytest_agentdrift.vocabulary import BLOB_DIR, FINAL_TREE_FILE, RAW_DIR, RESULTS_FILE, SEAL_FILE

INCOMPLETE_MARKER = "INCOMPLETE"


def raw_path(task_id: str, rep: int) -> str:
    """Where a run's raw files live, relative to its record (results.json's `raw`)."""
    return f"{RAW_DIR}/{item_key(task_id, rep)}"


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


@lru_cache(maxsize=None)
def schema_validator(name: str):
    """One jsonschema validator per schema in record/schema/ (built once per process).

    The schemas are the package's own and are checked against their metaschema by the test
    suite (tests/unit/test_schemas.py), not here: that check costs more than the validation
    of a whole record, in every session that writes one."""
    import jsonschema

    schema = json.loads((Path(__file__).parent / "schema" / name).read_text(encoding="utf-8"))
    return jsonschema.validators.validator_for(schema)(schema)


def results_validator():
    """The one jsonschema validator for results.json."""
    return schema_validator("results.schema.json")


def schema_problems(results: object) -> list[str]:
    errors = sorted(results_validator().iter_errors(results), key=lambda e: list(e.path))
    return [f"{'/'.join(str(p) for p in e.path) or '(root)'}: {e.message}" for e in errors[:10]]


def is_results(doc: object) -> TypeGuard[Results]:
    """Whether `doc` matches results.schema.json, whose objects shapes.Results and its parts declare
    field for field (tests/unit/test_shapes.py)."""
    return isinstance(doc, dict) and results_validator().is_valid(doc)


def check_record_target(path: Path) -> None:
    """Refuse to record into a directory that already holds a run (exit 4)."""
    if path.exists() and not path.is_dir():
        raise RecordError("recording target exists and is not a directory", path)
    results = path / RESULTS_FILE
    if results.exists():
        state = "a complete run"
        try:
            if not json.loads(results.read_text()).get("complete"):
                state = "an incomplete run"
        except (OSError, ValueError, AttributeError):
            state = "a recorded run"
        if state == "an incomplete run":
            raise RecordError(
                "already holds an incomplete run: continue it with --agent-resume, or record into a new directory", path
            )
        raise RecordError(
            f"already holds {state}; recorded runs are never rewritten: record into a new directory", path
        )
    if (path / INCOMPLETE_MARKER).exists():
        raise RecordError(
            "holds an interrupted recording; continue it with --agent-resume or record into a new directory", path
        )
    if path.is_dir() and any(path.iterdir()):
        raise RecordError("recording target is not empty; record into a new directory", path)


def lock_run_dir(path: Path) -> int:
    """Hold an exclusive lock on a run directory for this process's lifetime (flock on the
    directory: released by the kernel when the process dies, even by SIGKILL). Two sessions
    never record into, or resume, one directory at once."""
    import fcntl

    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise RecordError("another session is recording into or resuming this directory", path) from None
    return fd


class RunRecorder:
    """Writes one run directory: raw artifacts as runs finish, results last."""

    def __init__(self, path: Path):
        self.path = path
        self.started = False
        self._lock_fd: int | None = None

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
        self._lock_fd = lock_run_dir(self.path)
        self.started = True

    def write_raw(self, rel_dir: str, files: dict[str, str]) -> None:
        for name, text in files.items():
            atomic_write(self.path / rel_dir / name, text)

    def write_json(self, name: str, obj: Any, lead: Sequence[str] = ()) -> None:
        atomic_write(self.path / name, dumps_pretty(obj, lead))

    def write_tree(self, final_tree: dict[str, Any]) -> dict[str, str]:
        """Store a run's final-tree blobs (once per content); returns its tree.json as a raw file.

        A blob whose bytes no longer match their name on the way here (a secret replaced
        in its transport form) is not stored, and its entry says so."""
        import base64
        import hashlib

        tree = final_tree["tree"]
        entries = dict(tree["entries"])
        for path, e in entries.items():
            sha = e.get("sha256")
            if e.get("kind") != "file" or not e.get("kept"):
                continue
            data = base64.b64decode(final_tree["blobs"].get(sha, ""))
            if hashlib.sha256(data).hexdigest() != sha:
                entries[path] = {**e, "kept": False, "why": "its bytes changed on the way to the record"}
                continue
            target = self.path / BLOB_DIR / sha[:2] / sha
            if not target.exists():  # content-addressed: a blob another run left is the same bytes
                atomic_write(target, data)
        complete = tree.get("complete") and all(e.get("kept", True) or e.get("leftover") for e in entries.values())
        return {FINAL_TREE_FILE: dumps_pretty({**tree, "entries": entries, "complete": bool(complete)})}

    def finish(self, results: Results) -> None:
        problems = schema_problems(results)
        if problems:
            # A schema violation is our bug; keep the data, say so, never claim complete.
            results = {
                **results,
                "complete": False,
                "incomplete_reasons": [*results.get("incomplete_reasons", []), *("schema: " + p for p in problems)],
            }
        write_sealed(self.path, dumps_pretty(results))
        if results["complete"]:
            try:
                (self.path / INCOMPLETE_MARKER).unlink()
            except FileNotFoundError:
                pass


def write_sealed(path: Path, text: str) -> None:
    """results.json, then its seal (the digest of exactly those bytes), each written atomically."""
    import hashlib

    data = text.encode("utf-8")
    atomic_write(path / RESULTS_FILE, data)
    atomic_write(path / SEAL_FILE, f"{hashlib.sha256(data).hexdigest()}  {RESULTS_FILE}\n")


def check_seal(path: Path) -> None:
    """RecordError when results.json no longer matches its seal. A record without a seal (made
    before seals, or by hand) has nothing to check against."""
    import hashlib

    seal = path / SEAL_FILE
    if not seal.exists() and not seal.is_symlink():
        return
    try:
        recorded = seal.read_text(encoding="ascii").split()[0]
        actual = hashlib.sha256((path / RESULTS_FILE).read_bytes()).hexdigest()
    except (OSError, UnicodeDecodeError, IndexError) as exc:
        raise RecordError(f"the record's seal cannot be checked: {exc}", seal) from None
    if recorded != actual:
        raise RecordError(
            f"results.json was changed after the record was written: it no longer matches its seal ({SEAL_FILE}); "
            "refused",
            path / RESULTS_FILE,
        )


def load_results(path: Path, require_complete: bool = True) -> Results:
    """Read a recorded run's results.json; a bad or incomplete run is exit 4."""
    if not path.is_dir():
        raise RecordError("no such run directory", path)
    results_path = path / RESULTS_FILE
    if not results_path.exists():
        if (path / INCOMPLETE_MARKER).exists():
            raise RecordError("the run was interrupted before it finished (INCOMPLETE marker, no results.json)", path)
        raise RecordError("not a recorded run (no results.json)", path)
    check_seal(path)
    results = load_json_file(results_path, RecordError)
    if not isinstance(results, dict):
        raise RecordError("results.json is not a JSON object", results_path)
    if not is_results(results):
        problems = schema_problems(results)
        raise RecordError("results.json does not match the schema: " + "; ".join(problems[:3]), results_path)
    if require_complete and not results["complete"]:
        reasons = "; ".join(results["incomplete_reasons"][:3]) or "marked incomplete"
        raise RecordError(f"the run is incomplete ({reasons}) and cannot be used as a baseline", path)
    return results


def load_run(path: Path, require_complete: bool = True) -> dict[str, Any]:
    """load_results as a plain dict, for the readers that do not read it as shapes.Results yet."""
    return dict(load_results(path, require_complete))
