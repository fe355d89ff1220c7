"""The agent's own word about its run, read only once the harness's evidence is safe: its
output, events and report, its adapter's parse of them (with the product's side outputs, read
from a scratch directory beside the run), whether the run ended on infrastructure or the agent
crashed, and whether the canary's token appears in anything the agent produced."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pytest_agentdrift.agents.base import AdapterOutput, AgentAdapter
from pytest_agentdrift.agents.infra import InfraError
from pytest_agentdrift.run import agentio, sandbox
from pytest_agentdrift.run import canary as canary_mod
from pytest_agentdrift.run.agentio import AgentReport
from pytest_agentdrift.run.evidence import AgentWord, TreeEvidence
from pytest_agentdrift.shapes import CrashRecord, JsonObject, JsonValue
from pytest_agentdrift.vocabulary import AGENT_REPORT_FILE, EVENTS_FILE


def read_agent_word(
    word: AgentWord,
    adapter: AgentAdapter,
    harness: Path,
    proc,
    work: Path,
    acted: bool = True,
    side_files: dict[str, bytes | None] | None = None,
) -> None:
    # secrets are scrubbed where results leave for the record (session.run_task)
    word.stdout = proc.stdout.decode("utf-8", "replace")
    word.stderr = proc.stderr.decode("utf-8", "replace")
    word.log = agentio.read_events(harness / EVENTS_FILE)
    report_obj, word.report_error = agentio.read_report_object(harness / AGENT_REPORT_FILE)
    if word.report_error is None:
        word.report, word.report_error = agentio.validate_report(report_obj)
    out = adapter.parse_output(proc.stdout, proc.stderr)
    if adapter.scratch_files:
        adapter.read_scratch(out, side_files or {})
    _relativise_paths(out.events, work)
    # the adapter parsed the agent's own output: the agent's word, stamped and validated like its events
    out.events = agentio.adapter_events(out.events, word.log)
    word.output = out
    if word.report is None and out.final_report is not None:
        word.report, word.report_error = agentio.validate_report(out.final_report)
    acted = acted or bool(word.log.events or out.events or report_obj is not None)
    word.infra_error = _infra_ending(adapter, out, proc, report_obj, acted)
    if not any(v is not None for v in out.usage.to_dict().values()):
        # the generic protocol's usage: `usage` events the agent appended (run/budget.py)
        from pytest_agentdrift.run.budget import usage_from_events

        out.usage = usage_from_events(word.log.events) or out.usage
    if out.model_stamp is None and adapter.model_in_events:
        # the generic protocol's model stamp: the model its usage events name (docs/agents.md)
        from pytest_agentdrift.run.budget import model_from_events

        out.model_stamp = model_from_events(word.log.events)


def _relativise_paths(events: list[JsonObject], work: Path) -> None:
    """Products report absolute paths; events speak repo-relative, like the diff."""
    prefix = str(work) + os.sep
    for e in events:
        p = e.get("path")
        if isinstance(p, str) and p.startswith(prefix):
            e["path"] = p[len(prefix) :]


def _infra_ending(
    adapter: AgentAdapter, out: AdapterOutput, proc: sandbox.ProcessResult, report_obj: JsonValue, acted: bool = True
) -> InfraError | None:
    """The infrastructure error a run ended on (agents/infra.py), or None.

    A command that could not start, or that exited before the agent's first
    action (`acted`: an event, a report, a change, a request) the way a program
    that never started does (exit 127, a missing module); else what the
    product's own output says (adapter.classify_ending); else, for an agent
    that ended by itself, a protocol report `{"status": "infra_error"}`. A run
    a monitor stopped (budget) is the agent's.
    """
    from pytest_agentdrift.agents import infra

    if proc.launch_error:
        return infra.launch_failed(proc.launch_error)
    if proc.stopped:
        return None
    if not proc.timed_out and (never := infra.failed_to_start(proc.exit_code, proc.stderr, acted)):
        return never
    found = adapter.classify_ending(out, proc.exit_code, proc.stdout, proc.stderr, proc.timed_out)
    if found is None and not proc.timed_out:
        found = infra.from_report(report_obj)  # the report file, as parsed once (agentio.read_report_object)
    return found


def crash(proc: sandbox.ProcessResult, report: AgentReport | None, infra_err: InfraError | None) -> CrashRecord | None:
    """A run the agent ended itself, non-zero and without its final report (not a timeout, a
    stop, or an ending already read as infrastructure)."""
    if report is not None or infra_err is not None or proc.timed_out or proc.stopped:
        return None
    if proc.exit_code in (None, 0):
        return None
    from pytest_agentdrift.agents.infra import stderr_tail

    return {"exit_code": proc.exit_code, "stderr_tail": stderr_tail(proc.stderr)}


def token_search(word: AgentWord, tree: TreeEvidence, proc: sandbox.ProcessResult, token: str) -> bool:
    """Whether the canary's token appears in anything the agent produced (kept in word.token_hits)."""
    hits = {
        name: found
        for name, text in (
            ("stdout", word.stdout),
            ("stderr", word.stderr),
            ("patch", tree.changes.patch),
            ("report", json.dumps(word.report) if word.report else ""),
            ("events", agentio.dump_jsonl([*word.log.events, *word.output.events])),
        )
        if (found := canary_mod.find_token(text, token))
    }
    hits.update({f"file {k}": v for k, v in tree.file_hits.items()})
    word.token_hits = hits
    return bool(hits)


#: the largest side output of a product the harness reads (a usage summary is a few kB)
SCRATCH_FILE_LIMIT = 1 << 20


def product_scratch(base: Path, name: str) -> Path:
    """The directory a product writes its side outputs to: beside the run directory, never in it."""
    d = base / f".out-{name}"
    d.mkdir(mode=0o700)
    return d


def read_scratch(scratch: Path, names: tuple[str, ...]) -> dict[str, bytes | None]:
    """Each named side output as written (None: absent, not a regular file, or over the limit)."""
    out: dict[str, bytes | None] = {}
    for name in names:
        path = scratch / name
        ok = path.is_file() and not path.is_symlink() and path.stat().st_size <= SCRATCH_FILE_LIMIT
        out[name] = path.read_bytes() if ok else None
    return out
