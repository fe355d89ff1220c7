"""The release-note ledger: the user's triaged release notes against what the
suite observed. Pure functions, no pytest.

Input (``--agent-release-notes FILE``) is a UTF-8 CSV with a header row:

    version,tag,tasks,text,url

* ``version`` (required): the release the note belongs to, e.g. ``1.5.2``;
* ``tag`` (required): one of TAGS (what part of the runtime the note touches);
* ``tasks`` (optional): the task ids whose behaviour this note explains,
  separated by spaces or ``;``. This is the user's triage: a note documents an
  observed change only when it names the task. An empty cell is a note read
  and kept, linked to no task;
* ``text`` (required): the note, or the part of it that matters;
* ``url`` (optional): where the note is published (http or https).

Column order is free; a missing required column, an unknown column, an unknown
tag, an empty required cell or a malformed row is an AgentDriftError naming
the file, the line and the problem.

Output (release-note-ledger.csv, returned as text; the caller writes it
atomically) has one row per observed change and one per note that no observed
change matched; see ledger_csv().
"""

from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from pytest_agentdrift.canonical import read_text_utf8
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.shapes import LedgerRow, ObservedChange

TAGS = (
    "model",
    "instructions",
    "tools",
    "permissions",
    "sandbox",
    "extension",
    "execution",
    "usage",
    "output",
    "security",
)
COLUMNS = ("version", "tag", "tasks", "text", "url")
REQUIRED = ("version", "tag", "text")

DOCUMENTED = "documented_change"
UNCONFIRMED = "observed_unconfirmed"
NOT_OBSERVED = "not_observed"

LEDGER_COLUMNS = ("status", "task", "observed_change", "note_line", "version", "tag", "url", "text")

_TASK_SPLIT = re.compile(r"[;\s]+")


@dataclass(frozen=True)
class ReleaseNote:
    """One row of the user's release-note CSV."""

    line: int
    version: str
    tag: str
    tasks: tuple[str, ...]
    text: str
    url: str

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tasks": list(self.tasks)}


def read_release_notes(path: str | os.PathLike[str]) -> list[ReleaseNote]:
    """Read and validate the release-note CSV; any problem raises AgentDriftError."""
    path = Path(path)
    text = read_text_utf8(path)
    return parse_release_notes(text, path)


def parse_release_notes(text: str, path: str | os.PathLike[str] = "<release notes>") -> list[ReleaseNote]:
    """Parse release-note CSV text (``path`` only names the source in errors)."""
    text = text.removeprefix("\ufeff")  # spreadsheets save UTF-8 with a BOM
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
        if header is None or not any(cell.strip() for cell in header):
            raise AgentDriftError("empty file: expected a header row " + ",".join(COLUMNS), path)
        columns = _header(header, path)
        notes = []
        for row in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in row):
                continue  # blank lines are allowed between entries
            notes.append(_note(row, columns, line, path))
    except csv.Error as exc:
        raise AgentDriftError(f"line {reader.line_num}: malformed CSV ({exc})", path) from None
    return notes


def _header(header: list[str], path: str | os.PathLike[str]) -> dict[str, int]:
    names = [h.strip().lower() for h in header]
    unknown = [n for n in names if n not in COLUMNS]
    if unknown:
        raise AgentDriftError(f"line 1: unknown column {unknown[0]!r} (columns are {', '.join(COLUMNS)})", path)
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise AgentDriftError(f"line 1: column {duplicated[0]!r} appears twice", path)
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise AgentDriftError(f"line 1: missing required column {missing[0]!r}", path)
    return {name: i for i, name in enumerate(names)}


def _note(row: list[str], columns: dict[str, int], line: int, path: str | os.PathLike[str]) -> ReleaseNote:
    if len(row) != len(columns):
        raise AgentDriftError(f"line {line}: {len(row)} fields, the header has {len(columns)}", path)
    cell = {name: row[i].strip() for name, i in columns.items()}
    for name in REQUIRED:
        if not cell[name]:
            raise AgentDriftError(f"line {line}: empty {name!r}", path)
    tag = cell["tag"].lower()
    if tag not in TAGS:
        raise AgentDriftError(f"line {line}: unknown tag {cell['tag']!r} (tags are {', '.join(TAGS)})", path)
    url = cell.get("url", "")
    if url and not url.lower().startswith(("https://", "http://")):
        raise AgentDriftError(f"line {line}: url {url!r} is not an http(s) address", path)
    tasks = tuple(sorted({t for t in _TASK_SPLIT.split(cell.get("tasks", "")) if t}))
    return ReleaseNote(line, cell["version"], tag, tasks, cell["text"], url)


def mark_changes(notes: Sequence[ReleaseNote] | None, changes: Iterable[ObservedChange]) -> list[LedgerRow]:
    """Mark every observed change, and every note, with a ledger status.

    ``changes`` are the comparison's observed changes: ``{"task", "change"}``.

    * a change whose task is named by a note is ``documented_change`` (one row
      per supporting note);
    * a change no note names is ``observed_unconfirmed``: no intent is claimed
      (with no notes at all, every change is unconfirmed: a silent or absent
      release history supports nothing);
    * a note naming no task that changed is ``not_observed``: the suite did
      not reproduce it (which does not prove it had no effect elsewhere).
    """
    notes = list(notes or [])
    rows: list[LedgerRow] = []
    used: set[int] = set()
    for change in sorted(changes, key=lambda c: (c["task"], c["change"])):
        supporting = [n for n in notes if change["task"] in n.tasks]
        if not supporting:
            rows.append(_row(UNCONFIRMED, change, None))
        for note in supporting:
            used.add(note.line)
            rows.append(_row(DOCUMENTED, change, note))
    for note in notes:
        if note.line not in used:
            rows.append(_row(NOT_OBSERVED, None, note))
    return rows


def _row(status: str, change: ObservedChange | None, note: ReleaseNote | None) -> LedgerRow:
    return {
        "status": status,
        "task": change["task"] if change else (" ".join(note.tasks) if note else ""),
        "observed_change": change["change"] if change else "",
        "note_line": note.line if note else None,
        "version": note.version if note else "",
        "tag": note.tag if note else "",
        "url": note.url if note else "",
        "text": note.text if note else "",
    }


def ledger_csv(rows: Sequence[LedgerRow]) -> str:
    """release-note-ledger.csv content: header LEDGER_COLUMNS, rows in order,
    ``\\n`` line ends, every field quoted only when CSV needs it."""
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(LEDGER_COLUMNS)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else row.get(c) for c in LEDGER_COLUMNS])
    return buf.getvalue()
