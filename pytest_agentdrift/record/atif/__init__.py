"""Agent trajectories in ATIF (Harbor's Agent Trajectory Interchange Format). No pytest.

One ATIF-v1.7 document per run (task x repetition), from what the record holds:

    build(...)                    -> dict     a trajectory from events, the raw stream and the run's facts
    run_trajectory(run_dir, ...)  -> dict     the same, read from a recorded run's files
    export_run(run_dir, out_dir)  -> [Path]   every run of a record, validated, written atomically
    validate(doc)                 -> [str]    the shipped JSON Schema plus the RFC's cross-field rules

Specification: Harbor RFC 0001 "Agent Trajectory Interchange Format (ATIF)",
v1.7 (April 2026); the schema in record/schema/atif.schema.json is written from it.

Where the steps come from. The adapter's common events (events.jsonl) give
the order and the actions: messages, tool calls, commands, file reads and
edits, denials, errors. The product's own stream (raw stdout.txt), when the
product is known, adds what the common events leave out: the tool results
(observations), the full tool arguments, and which API message each block
belongs to, so one ATIF step is one model inference with its token usage, as
the RFC recommends. What the harness observed itself (network attempts,
writes outside the work tree) and the run's grade are evidence, not steps:
they travel in ``extra.agentdrift``. docs/agents.md lists, per product, what
its stream cannot fill in.

One module a job: `schema` (the version, the shipped schema, validation),
`streams` (what a product's stream adds), `trajectory` (building one
document), `fromrecord` (a recorded run's files in, files of a record out).
"""

from pytest_agentdrift.record.atif.fromrecord import export_run, find_instruction, run_trajectory, trajectory_filename
from pytest_agentdrift.record.atif.schema import SCHEMA_PATH, SCHEMA_VERSION, validate, validator
from pytest_agentdrift.record.atif.streams import StreamIndex, index_stream
from pytest_agentdrift.record.atif.trajectory import build

__all__ = [
    "SCHEMA_PATH",
    "SCHEMA_VERSION",
    "StreamIndex",
    "build",
    "export_run",
    "find_instruction",
    "index_stream",
    "run_trajectory",
    "trajectory_filename",
    "validate",
    "validator",
]
