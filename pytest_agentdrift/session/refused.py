"""A refused session still reports: a small record and one failing JUnit case naming the blocked fields.

The controller calls ``report_refusal`` just before it stops a session whose
baseline is not comparable (exit 6). With ``--agent-record DIR`` it writes
record/refusal.py's refusal.json and report.md there; with ``--junitxml`` it
adds one failing test case, ``agentdrift::refusal``, whose message names the
blocked fields, so a CI job's test annotations, summary and comment steps
have the same thing to say as its closing line.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest

from pytest_agentdrift.compare.outcome import Verdict
from pytest_agentdrift.errors import AgentDriftError

NODEID = "agentdrift::refusal"


def report_refusal(config: pytest.Config, settings: Any, stamps: Any, verdict: Verdict, lines: list[str]) -> list[str]:
    """Write what can be written; returns lines to print (where the refusal was recorded, or why not)."""
    from pytest_agentdrift.record.refusal import blocked_names, refusal_document, write_refusal_record

    doc = refusal_document(stamps, verdict.to_dict(), settings.baseline, lines)
    out = []
    if settings.record is not None:
        try:
            write_refusal_record(settings.record, doc)
            out.append(f"refusal recorded: {settings.record} (refusal.json, report.md)")
        except (AgentDriftError, OSError) as exc:
            out.append(f"refusal not recorded in {settings.record}: {getattr(exc, 'message', exc)}")
    _junit_case(config, verdict, blocked_names(doc), lines)
    return out


def _junit_case(config: pytest.Config, verdict: Verdict, fields: list[str], lines: list[str]) -> None:
    """One failing test case in pytest's JUnit file (the session has not started: only the JUnit
    writer is told, the terminal's own report is the refusal's lines and closing line)."""
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    message = f"{verdict.line}\nblocked fields: {', '.join(fields)}\n" + "\n".join(lines)
    location = ("agentdrift", None, "refusal")
    phases: tuple[tuple[Literal["setup", "call", "teardown"], Literal["passed", "failed"]], ...] = (
        ("setup", "passed"),
        ("call", "failed"),
        ("teardown", "passed"),
    )
    for when, outcome in phases:
        report = pytest.TestReport(
            nodeid=NODEID,
            location=location,
            keywords={},
            outcome=outcome,
            longrepr=message if outcome == "failed" else None,
            when=when,
        )
        xml.pytest_runtest_logreport(report)
    # pytest writes the JUnit file at the session's finish, which a session stopped in its start never
    # reaches: write it now (the writer's own start and finish, once)
    if not hasattr(xml, "suite_start"):
        xml.pytest_sessionstart()
    xml.pytest_sessionfinish()
