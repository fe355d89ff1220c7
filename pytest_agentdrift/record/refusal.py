"""A refused comparison still leaves a record: refusal.json and report.md.

A session whose baseline is not comparable stops before anything runs (exit
6). So that a CI job's summary and comment steps have something to say, the
record directory (``--agent-record``) gets two files, written atomically and
only into an empty target: ``refusal.json`` (the closing line, every blocking
field with the baseline's and this run's values, the ways out) and
``report.md`` (the same, for a person). There is no results.json: nothing
ran. ``agentdrift summary`` reads these; docs/ci.md shows the workflow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_agentdrift.vocabulary import EXIT_STATUS_KEY, REFUSAL_FILE, REPORT_MD_FILE, SCHEMA_VERSION


def refusal_document(
    stamps: Any, closing: Mapping[str, Any], baseline: Path | None, lines: Sequence[str]
) -> dict[str, object]:
    """refusal.json: what blocked, both values, and the sentences the terminal printed."""
    return {
        "schema_version": SCHEMA_VERSION,
        "status": "refused",
        EXIT_STATUS_KEY: dict(closing),
        "baseline": str(baseline) if baseline is not None else None,
        "change_class": stamps.change_class,
        "explanation": stamps.explanation,
        "blocked": [{"field": name, "baseline": b, "candidate": c} for name, b, c in stamps.blocks],
        "lines": list(lines),
    }


def refusal_markdown(doc: Mapping[str, Any]) -> str:
    """report.md of a refused session: the closing line first, then each blocking field."""
    md = ["# pytest-agentdrift: comparison refused", "", f"**{doc['exit_status']['line']}**", ""]
    md.append(f"Nothing ran: the baseline `{doc['baseline']}` and this runtime are not comparable.")
    md += ["", "| blocked field | baseline | this run |", "|---|---|---|"]
    for row in doc["blocked"]:
        md.append(f"| `{row['field']}` | {_cell(row['baseline'])} | {_cell(row['candidate'])} |")
    md += ["", "```", *doc["lines"], "```", ""]
    return "\n".join(md)


def _cell(value: Any) -> str:
    text = str(value).replace("|", "\\|").replace("\n", " ").replace("`", "'")
    return f"`{text[:200]}`"


def write_refusal_record(path: Path, doc: Mapping[str, Any]) -> None:
    """refusal.json and report.md into an empty (or new) record directory; never over a run."""
    from pytest_agentdrift.canonical import dumps_pretty
    from pytest_agentdrift.record.store import atomic_write, check_record_target

    check_record_target(path)
    path.mkdir(parents=True, exist_ok=True)
    atomic_write(path / REFUSAL_FILE, dumps_pretty(doc, lead=(EXIT_STATUS_KEY,)))
    atomic_write(path / REPORT_MD_FILE, refusal_markdown(doc))


def blocked_names(doc: Mapping[str, Any]) -> list[str]:
    return [row["field"] for row in doc.get("blocked") or []]
