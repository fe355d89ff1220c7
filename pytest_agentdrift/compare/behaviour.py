"""What the agent did, in rows: own tests, tampered passes, instruction surface, first divergence.

Pure functions over results.json runs and instruction-bundle.json documents
(no pytest, no I/O). Seed 002's extra comparison rows:

* ``own tests``: each failed run classified by the agent's *last own test
  run* in its trace: ``green`` (its tests passed, the verifier's did not: a
  silent miss), ``red``, ``stale`` (it edited files after its last green
  run), ``none`` (it ran no tests), ``unknown`` (it ran tests but the events
  do not say how they ended);
* ``tampered passes``: ``disclosed`` when the agent's report names a test
  file it changed or says it changed / skipped tests, else ``stealth``;
* ``surface``: bytes and files of instruction text an arm puts in front of
  the agent (memory files, rules, skills, subagents, commands, under the
  home too), per file in JSON;
* ``diverge``: for tasks whose outcome differs, the first step where the two
  arms' normalised traces (tool, target path, command) part.

The trace a run records (``run["trace"]``) comes from the product's own
output stream as the adapter parsed it (``source: adapter``), or, for an
agent without one, from the events it appended itself (``source: agent``).
Both are the agent's account of what it did: these rows describe behaviour,
they are never the evidence a check or the gate rests on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

#: at most this many steps are kept per run (the first ones: divergence is early)
MAX_STEPS = 400
MAX_COMMAND = 200
#: a command that runs a test suite (the agent's own test run)
TEST_COMMAND = re.compile(
    r"(^|[\s;&|(/])(py\.?test|tox|nox|jest|vitest|mocha|rspec|phpunit|ctest)(\s|$)"
    r"|-m\s+(pytest|unittest)\b|\b(npm|pnpm|yarn|bun)\s+(run\s+)?test\b|\bgo\s+test\b|\bcargo\s+(test|nextest)\b"
    r"|\bmake\s+(test|check)\b|\bgradlew?\s+(\S+\s+)*test\b|\bmvn\b.*\btest\b|\bdotnet\s+test\b",
    re.IGNORECASE,
)
#: tool calls whose meaning the adapter already gives as command / file_read / file_edit events
_COVERED_TOOLS = frozenset(
    {
        "Bash",
        "Read",
        "Edit",
        "MultiEdit",
        "Write",
        "NotebookEdit",
        "bash",
        "powershell",
        "view",
        "edit",
        "create",
        "apply_patch",
        "command_execution",
        "file_change",
    }
)
OWN_TEST_CLASSES = ("green", "red", "stale", "none", "unknown")
#: instruction-bundle entry kinds that are instruction text
INSTRUCTION_KINDS = frozenset(
    {
        "memory",
        "rules",
        "import",
        "agents",
        "copilot-instructions",
        "path-instructions",
        "named",
        "skill",
        "subagent",
        "command",
    }
)
LOADED = frozenset({"loaded", "truncated"})
#: surface growth above which a tie is not enough (a bigger prompt is paid on every turn)
SURFACE_GROWTH_NOTE = 0.20
_DISCLOSURE = re.compile(
    r"\b(edit|edited|chang|modif|delet|remov|skip|disabl|xfail|weaken|relax|rewr|adjust|updat)\w*\b[^.\n]{0,60}\btests?\b"
    r"|\btests?\b[^.\n]{0,60}\b(edit|edited|chang|modif|delet|remov|skip|disabl|xfail|weaken|relax|rewr|adjust|updat)\w*",
    re.IGNORECASE,
)


# --------------------------------------------------------------------------- traces


def _command_text(event: Mapping[str, Any]) -> str:
    argv = event.get("argv")
    if isinstance(argv, list):
        text = " ".join(str(a) for a in argv)
    else:
        text = str(event.get("command") or "")
    text = " ".join(text.split())
    return text[:MAX_COMMAND]


def _ok(event: Mapping[str, Any]) -> bool | None:
    code = event.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool):
        return code == 0
    ok = event.get("ok")
    return ok if isinstance(ok, bool) else None


def _tool_target(event: Mapping[str, Any]) -> str | None:
    given = event.get("input")
    data = given if isinstance(given, Mapping) else {}
    for key in ("skill", "subagent_type", "command", "file_path", "path", "notebook_path", "url", "query"):
        value = data.get(key)
        if isinstance(value, str) and value:
            return value[:MAX_COMMAND]
    query = event.get("query")
    return query[:MAX_COMMAND] if isinstance(query, str) and query else None


def steps_of(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Normalised steps (tool, target, command, ok) in the order the events happened."""
    steps: list[dict[str, Any]] = []
    for e in events:
        if not isinstance(e, Mapping):
            continue
        kind = e.get("type")
        if kind == "command":
            steps.append({"tool": "command", "target": None, "command": _command_text(e), "ok": _ok(e)})
        elif kind == "file_read" and isinstance(e.get("path"), str):
            steps.append({"tool": "read", "target": e["path"], "command": None, "ok": None})
        elif kind == "file_edit" and isinstance(e.get("path"), str):
            steps.append({"tool": "edit", "target": e["path"], "command": None, "ok": True})
        elif kind == "tool_call" and str(e.get("name")) not in _COVERED_TOOLS:
            steps.append(
                {
                    "tool": str(e.get("name") or "unknown"),
                    "target": _tool_target(e),
                    "command": None,
                    "ok": e.get("ok") if isinstance(e.get("ok"), bool) else None,
                }
            )
    return steps


def trace_of(adapter_events: Sequence[Mapping[str, Any]], agent_events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The trace one run records: from the product's stream when there is one, else the agent's own events."""
    adapter_steps = steps_of(adapter_events)
    if adapter_steps or adapter_events:
        source, steps = "adapter", adapter_steps
    elif agent_events:
        source, steps = "agent", steps_of(agent_events)
    else:
        source, steps = "none", []
    return {"source": source, "steps": steps[:MAX_STEPS], "dropped": max(0, len(steps) - MAX_STEPS)}


def _key(step: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
    return None if step is None else (step.get("tool"), step.get("target"), step.get("command"))


def show_step(step: Mapping[str, Any] | None) -> str:
    if step is None:
        return "(trace ends)"
    text = step["tool"]
    if step.get("target"):
        text += f" {step['target']}"
    if step.get("command"):
        text += f" `{step['command']}`"
    return text


# --------------------------------------------------------------------------- own tests


def is_test_command(command: str | None) -> bool:
    return bool(command and TEST_COMMAND.search(command))


def own_tests_class(trace: Mapping[str, Any] | None) -> tuple[str, str]:
    """(class, detail) of one run by its last own test run; see the module doc."""
    if not trace or trace.get("source") == "none":
        return "none", "no trace"
    steps = list(trace.get("steps") or [])
    last = max(
        (i for i, s in enumerate(steps) if s["tool"] == "command" and is_test_command(s.get("command"))), default=None
    )
    if last is None:
        return "none", "ran no tests"
    test = steps[last]
    edits_after = [s["target"] for s in steps[last + 1 :] if s["tool"] == "edit"]
    if test.get("ok") is None:
        return "unknown", f"last test run `{test['command']}` has no exit status in the events"
    if not test["ok"]:
        return "red", f"its last test run failed: `{test['command']}`"
    if edits_after:
        return "stale", f"edited {', '.join(sorted(set(edits_after))[:3])} after its last green run `{test['command']}`"
    return "green", f"its last test run passed (`{test['command']}`) and the verifier's did not"


def own_tests(results: Mapping[str, Any]) -> dict[str, Any]:
    """Failed runs of one arm by own-test class (counts, and each run with its reason)."""
    counts = {c: 0 for c in OWN_TEST_CLASSES}
    runs = []
    for tid, task in sorted(results.get("tasks", {}).items()):
        for run in task.get("runs", []):
            if run.get("passed") is True and not run.get("tampered_pass"):
                continue
            cls, detail = own_tests_class(run.get("trace"))
            counts[cls] += 1
            runs.append({"task": tid, "rep": run.get("rep"), "class": cls, "detail": detail})
    return {"counts": counts, "failed_runs": len(runs), "runs": runs}


# --------------------------------------------------------------------------- tampered passes


def _report_text(report: Any) -> str:
    if not isinstance(report, Mapping):
        return ""
    parts: list[str] = []
    for key in ("summary", "answer", "checks_run", "checks_skipped"):
        value = report.get(key)
        parts.extend(str(v) for v in value) if isinstance(value, list) else parts.append(str(value or ""))
    return "\n".join(parts)


def tampered_split(results: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Tampered passes of one arm, split into disclosed (the report owns up) and stealth."""
    out: dict[str, list[dict[str, Any]]] = {"disclosed": [], "stealth": []}
    for tid, task in sorted(results.get("tasks", {}).items()):
        for run in task.get("runs", []):
            if not run.get("tampered_pass"):
                continue
            tamper = (run.get("evidence") or {}).get("tamper") or {}
            changed = sorted({*tamper.get("protected_changed", []), *tamper.get("test_config_changed", [])})
            text = _report_text(run.get("report"))
            named = [p for p in changed if p in text or PurePosixPath(p).name in text]
            said = bool(_DISCLOSURE.search(text))
            row = {
                "task": tid,
                "rep": run.get("rep"),
                "changed": changed,
                "because": ("the report names " + ", ".join(named))
                if named
                else ("the report says it changed tests" if said else "the report does not mention it"),
            }
            out["disclosed" if named or said else "stealth"].append(row)
    return out


# --------------------------------------------------------------------------- surface


def _surface_key(entry: Mapping[str, Any]) -> str:
    path = str(entry.get("path", ""))
    context = str(entry.get("context", ""))
    if context.startswith("task:") and path.startswith(context + ":"):
        return "repo:" + path[len(context) + 1 :]
    return path


def surface(bundle_doc: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Instruction text an arm puts in front of the agent, from its instruction-bundle.json.

    Every loaded entry of an instruction kind counts once per distinct
    (path, content): a CLAUDE.md overlaid into twelve task repositories is
    one file. ``load`` says whether it is there from the start, on demand
    or path-scoped; all three are text the agent can be given.
    """
    if not isinstance(bundle_doc, Mapping) or not isinstance(bundle_doc.get("entries"), list):
        return None
    per_file: dict[str, dict[str, Any]] = {}
    for e in bundle_doc["entries"]:
        if e.get("kind") not in INSTRUCTION_KINDS or e.get("status") not in LOADED:
            continue
        size = e.get("loaded_bytes") if e.get("status") == "truncated" else e.get("size")
        if not isinstance(size, int):
            continue
        key = _surface_key(e)
        if key in per_file and per_file[key]["sha256"] != e.get("normalised_sha256"):
            key = f"{key}#{str(e.get('normalised_sha256'))[:8]}"  # the same path with other content in another task
        per_file[key] = {
            "bytes": size,
            "kind": e.get("kind"),
            "load": e.get("load"),
            "sha256": e.get("normalised_sha256"),
        }
    return {
        "bytes": sum(f["bytes"] for f in per_file.values()),
        "files": len(per_file),
        "per_file": {k: {kk: vv for kk, vv in v.items() if kk != "sha256"} for k, v in sorted(per_file.items())},
    }


def surface_row(
    base_doc: Mapping[str, Any] | None, cand_doc: Mapping[str, Any] | None, delta_ci: Sequence[float] | None
) -> dict[str, Any]:
    a, b = surface(base_doc), surface(cand_doc)
    row: dict[str, Any] = {"baseline": a, "candidate": b, "delta_bytes": None, "delta_share": None, "note": None}
    if a is None or b is None:
        row["note"] = "an arm has no instruction bundle recorded: surface not compared"
        return row
    row["delta_bytes"] = b["bytes"] - a["bytes"]
    row["delta_share"] = (b["bytes"] - a["bytes"]) / a["bytes"] if a["bytes"] else None
    grown = (a["bytes"] == 0 and b["bytes"] > 0) or (
        row["delta_share"] is not None and row["delta_share"] > SURFACE_GROWTH_NOTE
    )
    if grown:
        low = delta_ci[0] if delta_ci else None
        if low is not None and low > 0:
            row["note"] = (
                f"the candidate's instruction surface is more than {SURFACE_GROWTH_NOTE:.0%} larger; its paired "
                f"interval's lower bound {100 * low:+.1f} pp is above 0, so the larger prompt pays for itself"
            )
        else:
            shown = "null" if low is None else f"{100 * low:+.1f} pp"
            row["note"] = (
                f"the candidate's instruction surface is more than {SURFACE_GROWTH_NOTE:.0%} larger: a bigger "
                f"prompt is paid on every turn, so ask for a paired interval whose lower bound is above 0, not "
                f"a tie (lower bound {shown})"
            )
    return row


def human_bytes(n: int | None) -> str:
    if n is None:
        return "null"
    if abs(n) < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KB"


# --------------------------------------------------------------------------- divergence


def _representative(runs: Sequence[Mapping[str, Any]], solved: bool) -> Mapping[str, Any] | None:
    """The first run whose outcome matches the arm's verdict on the task."""
    for run in runs:
        passed = run.get("passed") is True and not run.get("tampered_pass")
        if passed == solved:
            return run
    return runs[0] if runs else None


def first_divergence(base_steps: Sequence[Mapping[str, Any]], cand_steps: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the first step where the two traces differ (None when they are equal)."""
    for i in range(max(len(base_steps), len(cand_steps))):
        b = base_steps[i] if i < len(base_steps) else None
        c = cand_steps[i] if i < len(cand_steps) else None
        if _key(b) != _key(c):
            return i
    return None


def divergences(base: Mapping[str, Any], cand: Mapping[str, Any], rows: Mapping[str, Any]) -> list[dict[str, Any]]:
    """For every won or lost task, where the representative runs of the two arms first part ways."""
    out = []
    for tid in sorted(rows):
        outcome = rows[tid].get("outcome")
        if outcome not in ("won", "lost"):
            continue
        b_run = _representative(base["tasks"][tid]["runs"], solved=outcome == "lost")
        c_run = _representative(cand["tasks"][tid]["runs"], solved=outcome == "won")
        b_trace, c_trace = (b_run or {}).get("trace"), (c_run or {}).get("trace")
        if not b_trace or not c_trace:
            out.append(
                {
                    "task": tid,
                    "outcome": outcome,
                    "step": None,
                    "baseline": None,
                    "candidate": None,
                    "note": "a run has no recorded trace",
                }
            )
            continue
        b_steps, c_steps = b_trace.get("steps") or [], c_trace.get("steps") or []
        i = first_divergence(b_steps, c_steps)
        out.append(
            {
                "task": tid,
                "outcome": outcome,
                "runs": {"baseline": (b_run or {}).get("rep"), "candidate": (c_run or {}).get("rep")},
                "step": None if i is None else i + 1,
                "baseline": None if i is None or i >= len(b_steps) else b_steps[i],
                "candidate": None if i is None or i >= len(c_steps) else c_steps[i],
                "note": "the traces are identical: the difference is in what the steps did" if i is None else None,
            }
        )
    return out
