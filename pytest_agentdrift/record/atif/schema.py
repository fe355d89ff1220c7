"""The ATIF version this package writes, the JSON Schema it ships for it, and validation: the schema plus
the cross-field rules the RFC states and a schema cannot."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

SCHEMA_VERSION = "ATIF-v1.7"


SCHEMA_PATH = Path(__file__).parents[1] / "schema" / "atif.schema.json"


def validator():
    from pytest_agentdrift.record.store import schema_validator

    return schema_validator(SCHEMA_PATH.name)


def validate(doc: Any) -> list[str]:
    """Problems with an ATIF document: the JSON Schema, then the rules a schema cannot say
    (step_id runs 1..n in order; every source_call_id names a tool call of its own step;
    tool call ids are unique)."""
    problems = [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
        for e in sorted(validator().iter_errors(doc), key=lambda e: list(e.absolute_path))
    ]
    if problems or not isinstance(doc, dict):
        return problems
    return _semantic_problems(doc, "")


def _semantic_problems(doc: Mapping[str, Any], where: str) -> list[str]:
    problems = []
    seen_calls: set[str] = set()
    for i, step in enumerate(doc.get("steps", []), 1):
        if step.get("step_id") != i:
            problems.append(
                f"{where}steps/{i - 1}: step_id {step.get('step_id')} where {i} was expected (sequential from 1)"
            )
        calls = {c["tool_call_id"] for c in step.get("tool_calls") or []}
        for c in step.get("tool_calls") or []:
            if c["tool_call_id"] in seen_calls:
                problems.append(f"{where}steps/{i - 1}: tool_call_id {c['tool_call_id']!r} used twice")
            seen_calls.add(c["tool_call_id"])
        for r in (step.get("observation") or {}).get("results", []):
            ref = r.get("source_call_id")
            if ref is not None and ref not in calls:
                problems.append(f"{where}steps/{i - 1}: source_call_id {ref!r} is not a tool call of this step")
    ids = [s.get("trajectory_id") for s in doc.get("subagent_trajectories") or []]
    if len(ids) != len(set(ids)):
        problems.append(f"{where}subagent_trajectories: trajectory_id values must be unique")
    for n, sub in enumerate(doc.get("subagent_trajectories") or []):
        problems += _semantic_problems(sub, f"{where}subagent_trajectories/{n}/")
    return problems
