"""What the page is made of: a record's files, read leniently, and its raw artifacts read up to a bound,
never through a link that leaves the record."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentdrift.vocabulary import COMPARISON_FILE, DECISION_FILE, MANIFEST_DIFF_FILE, MANIFEST_FILE


@dataclass
class RawArtifact:
    text: str | None  # None: not recorded / unreadable
    size: int = 0  # bytes on disk
    truncated: bool = False  # only the head was read
    problem: str | None = None


@dataclass
class ReportInput:
    results: dict[str, Any]
    run_dir: Path | None = None
    decision: dict[str, Any] | None = None
    comparison: dict[str, Any] | None = None
    manifest_diff: dict[str, Any] | None = None
    manifest: dict[str, Any] | None = None
    baseline_label: str | None = None
    closing: str | None = None  # the session's closing line (agentdrift: exit N — reason), shown first
    notes: list[str] = field(default_factory=list)  # problems reading the record, shown on the page
    events_cache: dict[int, Any] = field(default_factory=dict, repr=False)  # parsed events.jsonl per run

    def raw(self, run: Mapping[str, Any], name: str, limit: int) -> RawArtifact:
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


def _read_json(path: Path, notes: list[str]) -> Any:
    if not path.exists():
        return None
    from pytest_agentdrift.canonical import load_json_file
    from pytest_agentdrift.errors import AgentDriftError

    try:
        return load_json_file(path)
    except AgentDriftError as exc:
        notes.append(f"{path.name} could not be read: {exc.problem}")
        return None


def load_input(run_dir: Path, results: dict[str, Any] | None = None) -> ReportInput:
    """Everything the page shows, from a record directory.

    `results` is given by the controller, which renders before results.json
    is written (results.json is written last and marks completeness). A
    missing or unreadable comparison file is a note on the page, not an error.
    """
    run_dir = Path(run_dir)
    notes: list[str] = []
    if results is None:
        from pytest_agentdrift.record.store import load_run

        results = load_run(run_dir, require_complete=False)
    inp = ReportInput(
        results=results,
        run_dir=run_dir,
        decision=_read_json(run_dir / DECISION_FILE, notes),
        comparison=_read_json(run_dir / COMPARISON_FILE, notes),
        manifest_diff=_read_json(run_dir / MANIFEST_DIFF_FILE, notes),
        manifest=_read_json(run_dir / MANIFEST_FILE, notes),
        notes=notes,
    )
    for name in ("decision", "comparison", "manifest_diff", "manifest"):
        if getattr(inp, name) is not None and not isinstance(getattr(inp, name), dict):
            notes.append(f"{name.replace('_', '-')} is not a JSON object; not shown")
            setattr(inp, name, None)
    return inp
