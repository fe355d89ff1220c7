"""How a record came about, in one sentence each (report.md, report.html, comparisons). No pytest."""

from __future__ import annotations

from typing import Any, Mapping


def regraded_line(src: Mapping[str, Any]) -> str:
    """The provenance of a regraded record: whose runs, which grading they had, when they were graded again."""
    return (
        f"regraded {src.get('at', '?')} from run `{src.get('run_id')}` (graded then by evaluator "
        f"`{src.get('evaluator_id')}`): the agent's runs are that record's, the checks are today's"
    )
