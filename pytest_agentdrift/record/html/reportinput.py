"""What the page is made of: a record's files, read leniently, and its raw artifacts read up to a bound,
never through a link that leaves the record."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pytest_agentdrift.shapes import JsonObject, JsonValue, Results, RunRecord
from pytest_agentdrift.vocabulary import COMPARISON_FILE, DECISION_FILE, MANIFEST_DIFF_FILE, MANIFEST_FILE


@dataclass
class RawArtifact:
    text: str | None  # None: not recorded / unreadable
    size: int = 0  # bytes on disk
    truncated: bool = False  # only the head was read
    problem: str | None = None


@dataclass
class ReportInput:
    results: Results
    run_dir: Path | None = None
    # the files beside results.json are read leniently, not against a schema: their values are narrowed
    # where they are shown
    decision: JsonObject | None = None
    comparison: JsonObject | None = None
    manifest_diff: JsonObject | None = None
    manifest: JsonObject | None = None
    baseline_label: str | None = None
    closing: str | None = None  # the session's closing line (agentdrift: exit N — reason), shown first
    notes: list[str] = field(default_factory=list)  # problems reading the record, shown on the page
    #: events.jsonl per run (by the run's id()): its objects, the artifact read, the lines that were not objects
    events_cache: dict[int, tuple[list[JsonObject], RawArtifact, int]] = field(default_factory=dict, repr=False)

    def raw(self, run: RunRecord, name: str, limit: int) -> RawArtifact:
        """The head of one raw artifact of a run, read without following links."""
        rel = run.get("raw")
        if self.run_dir is None or not isinstance(rel, str) or not rel:
            return RawArtifact(None, problem="not recorded")
        parts = Path(rel).parts
        if Path(rel).is_absolute() or ".." in parts:
            return RawArtifact(None, problem=f"raw path {rel!r} leaves the record; not read")
        path = self.run_dir.joinpath(*parts, name)
        if not inside(path, self.run_dir):
            return RawArtifact(None, problem="reached through a link that leaves the record; not read")
        from pytest_agentdrift.canonical import open_regular

        try:
            fd = open_regular(path)
        except FileNotFoundError:
            return RawArtifact(None, problem="not recorded")
        except OSError as exc:
            return RawArtifact(None, problem=f"not read: {exc.strerror or exc}")
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            data = fh.read(limit)
        return RawArtifact(data.decode("utf-8", "surrogateescape"), size, size > len(data))


def inside(path: Path, root: Path) -> bool:
    """Whether `path`'s directory resolves inside `root` (a record copied from elsewhere may hold links)."""
    parent = os.path.realpath(path.parent)
    top = os.path.realpath(root)
    return parent == top or parent.startswith(top + os.sep)


def _read_json(path: Path, notes: list[str]) -> JsonValue:
    if not path.exists():
        return None
    from pytest_agentdrift.canonical import load_json_file
    from pytest_agentdrift.errors import AgentDriftError

    try:
        value: JsonValue = load_json_file(path)
    except AgentDriftError as exc:
        notes.append(f"{path.name} could not be read: {exc.problem}")
        return None
    return value


def load_input(run_dir: Path, results: Results | None = None) -> ReportInput:
    """Everything the page shows, from a record directory.

    `results` is given by the controller, which renders before results.json
    is written (results.json is written last and marks completeness). A
    missing or unreadable comparison file is a note on the page, not an error.
    """
    run_dir = Path(run_dir)
    notes: list[str] = []
    if results is None:
        from pytest_agentdrift.record.store import load_results

        results = load_results(run_dir, require_complete=False)
    files = {
        name: _read_json(run_dir / file, notes)
        for name, file in (
            ("decision", DECISION_FILE),
            ("comparison", COMPARISON_FILE),
            ("manifest_diff", MANIFEST_DIFF_FILE),
            ("manifest", MANIFEST_FILE),
        )
    }
    objects: dict[str, JsonObject | None] = {}
    for name, value in files.items():
        if value is not None and not isinstance(value, dict):
            notes.append(f"{name.replace('_', '-')} is not a JSON object; not shown")
        objects[name] = value if isinstance(value, dict) else None
    return ReportInput(
        results=results,
        run_dir=run_dir,
        decision=objects["decision"],
        comparison=objects["comparison"],
        manifest_diff=objects["manifest_diff"],
        manifest=objects["manifest"],
        notes=notes,
    )
