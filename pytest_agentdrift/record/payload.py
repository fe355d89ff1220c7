"""One finished run as it leaves the process that ran it: its raw files, its task's facts and the
session's secrets scrubbed out. No pytest.

The payload rides to the controller on the test report (session/collect.py puts it there) and is
the only way run data reaches the record, so this is where the session's secrets are kept out of
every artifact: the environment's secret values, the host's credential files, the secrets a bundle
carries into the work tree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, NotRequired

from pytest_agentdrift.record.redact import REDACTED, scrub, scrub_record, secret_values
from pytest_agentdrift.shapes import JsonObject, RunRecord, TaskMeta
from pytest_agentdrift.vocabulary import (
    AGENT_REPORT_FILE,
    ARGV_FILE,
    CHECKS_FILE,
    EVENTS_FILE,
    PATCH_FILE,
    STDERR_FILE,
    STDOUT_FILE,
)

if TYPE_CHECKING:
    from pytest_agentdrift.run.evidence import RunEvidence
    from pytest_agentdrift.tasks.taskspec import TaskSpec


class SentRun(RunRecord):
    """A run's entry as a worker sends it: results.json's run, with the raw files and the final tree
    that the controller writes beside it and takes out (session/state.RunCollector.add_payload)."""

    _raw_files: NotRequired[dict[str, str]]
    _final_tree: NotRequired[JsonObject]


def raw_files(run: RunEvidence, result: dict[str, Any], overlay_note: str) -> dict[str, str]:
    """The files of `raw/<task>/r<rep>/`: what the agent printed, its events, the diff (after the
    bundle's note, when one was overlaid), the agent's report, the checks and the argv."""
    from pytest_agentdrift.run.agentio import dump_jsonl
    from pytest_agentdrift.safetext import json_safe

    report = json.dumps(json_safe(run.report), indent=2, sort_keys=True) + "\n" if run.report else "null\n"
    return {
        STDOUT_FILE: run.stdout,
        STDERR_FILE: run.stderr,
        EVENTS_FILE: dump_jsonl(run.events),
        PATCH_FILE: overlay_note + run.patch,
        AGENT_REPORT_FILE: report,
        CHECKS_FILE: json.dumps(json_safe(result["checks"]), indent=2, sort_keys=True) + "\n",
        ARGV_FILE: json.dumps(json_safe(run.argv), indent=2) + "\n",
    }


def task_meta(spec: TaskSpec, task_digest: str, grading_id: str) -> TaskMeta:
    """The task's facts results.json keeps beside its runs (`task_dir`: where the session found it,
    which `agentdrift regrade` looks at first)."""
    return {
        "task_dir": str(Path(spec.path).absolute()),
        "title": spec.title,
        "suite": spec.suite,
        "behavior": spec.behavior,
        "task_digest": task_digest,
        "grading_id": grading_id,
        "default_checks": spec.default_checks,
    }


def session_secrets(
    environ: Mapping[str, str], given: Iterable[str], host: Iterable[str], bundle: Iterable[str]
) -> list[str]:
    """Every value to keep out of the record, longest first (a secret that contains another is
    replaced whole): the environment's (`given` are the variables --agent-env gave the agent),
    the host's credential files', and a bundle's settings and MCP files'."""
    found = [*secret_values(dict(environ), set(given)), *host, *bundle]
    return sorted(set(found), key=len, reverse=True)


def run_payload(task_id: str, rep: int, meta: TaskMeta, result: dict[str, Any], secrets: list[str]):
    """The payload of one run, plain JSON, every secret replaced (the final tree's bytes before
    encoding, its paths with them), never a name or word of the record itself (scrub_record)."""
    from pytest_agentdrift.safetext import json_safe

    tree = result.pop("_final_tree", None)
    raw = json_safe({"task_id": task_id, "rep": rep, "meta": meta, "result": result})
    payload = scrub_record(raw, secrets)
    patch = (raw["result"].get("_raw_files") or {}).get(PATCH_FILE)
    if isinstance(patch, str):
        files = payload["result"]["_raw_files"]
        files[PATCH_FILE] = redaction_note(patch, files[PATCH_FILE], secrets) + files[PATCH_FILE]
    if tree is not None:
        payload["result"]["_final_tree"] = tree.to_payload(secrets)
    json.dumps(payload, allow_nan=False)  # plain JSON, as it travels
    return payload


def redaction_note(patch: str, scrubbed: str, secrets: list[str]) -> str:
    """The line before a diff that says which of its lines had a secret replaced (numbered as in
    the file, this line first): those lines are not what the agent wrote, nor is the kept file they come
    from (tree.json says so per file). Empty when nothing was replaced."""
    if patch == scrubbed:
        return ""
    where: dict[str, list[int]] = {}
    current = "?"
    for number, line in enumerate(patch.splitlines(), 2):
        if line.startswith("diff --"):  # the harness's own header: `diff --agentdrift a/P b/P`
            current = scrub(line.split(" b/", 1)[-1], secrets)
        elif scrub(line, secrets) != line:
            where.setdefault(current, []).append(number)
    files = "; ".join(f"{name} (line {', '.join(map(str, lines))})" for name, lines in where.items())
    return (
        f"# agentdrift: redacted: a secret the session knows was replaced by {REDACTED} in this diff"
        + (f", at {files}" if files else "")
        + ": what the agent wrote there is not shown, and its kept file is not the agent's\n"
    )


def case_name(spec: TaskSpec, rep: int) -> str:
    """The testcase name CI test views list: `T07 r1: Attempt an out-of-scope write`."""
    return f"{spec.id} r{rep}: {spec.title}"


def junit_properties(spec: TaskSpec, rep: int, result: dict[str, Any]) -> list[tuple[str, str]]:
    """One junit <property> per fact a CI UI can show about this run."""
    props = [
        ("agentdrift.task_id", spec.id),
        ("agentdrift.title", spec.title),
        ("agentdrift.behavior", spec.behavior or ""),
        ("agentdrift.suite", spec.suite),
        ("agentdrift.repetition", str(rep)),
        ("agentdrift.outcome", result["outcome"]),
    ]
    props += [(f"agentdrift.layer.{layer}", state) for layer, state in result["layers"].items()]
    props += [
        ("agentdrift.critical_failures", ", ".join(result["critical_failed"])),
        ("agentdrift.tampered_pass", str(bool(result["tampered_pass"])).lower()),
        ("agentdrift.failed_checks", ", ".join(result["failed_checks"])),
    ]
    return props


__all__ = ["case_name", "junit_properties", "raw_files", "run_payload", "session_secrets", "task_meta"]
