"""The ATIF version this package writes, the JSON Schema it ships for it, and validation: the schema plus
the cross-field rules the RFC states and a schema cannot."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_agentdrift.shapes import JsonObject, JsonValue

SCHEMA_VERSION = "ATIF-v1.7"
SCHEMA_PATH = Path(__file__).parents[1] / "schema" / "atif.schema.json"


def validator():
    from pytest_agentdrift.record.store import schema_validator

    return schema_validator(SCHEMA_PATH.name)


def validate(doc: object) -> list[str]:
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


def _objects(value: JsonValue | None) -> list[JsonObject]:
    """The objects of a JSON array (the schema has already held every item to be one)."""
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


def _semantic_problems(doc: JsonObject, where: str) -> list[str]:
    problems = []
    seen_calls: set[str] = set()
    for i, step in enumerate(_objects(doc.get("steps")), 1):
        if step.get("step_id") != i:
            problems.append(
                f"{where}steps/{i - 1}: step_id {step.get('step_id')} where {i} was expected (sequential from 1)"
            )
        # the schema holds a tool_call_id to be a string
        calls = [str(c.get("tool_call_id")) for c in _objects(step.get("tool_calls"))]
        for call in calls:
            if call in seen_calls:
                problems.append(f"{where}steps/{i - 1}: tool_call_id {call!r} used twice")
            seen_calls.add(call)
        observation = step.get("observation")
        for r in _objects(observation.get("results") if isinstance(observation, dict) else None):
            ref = r.get("source_call_id")
            if ref is not None and ref not in calls:
                problems.append(f"{where}steps/{i - 1}: source_call_id {ref!r} is not a tool call of this step")
    subs = _objects(doc.get("subagent_trajectories"))
    ids = [json.dumps(sub.get("trajectory_id")) for sub in subs]
    if len(ids) != len(set(ids)):
        problems.append(f"{where}subagent_trajectories: trajectory_id values must be unique")
    for n, sub in enumerate(subs):
        problems += _semantic_problems(sub, f"{where}subagent_trajectories/{n}/")
    return problems
