"""Agent trajectories in ATIF (Harbor's Agent Trajectory Interchange Format). No pytest.

One ATIF-v1.7 document per run (task x repetition), from what the record holds:

    build(...)                    -> dict     a trajectory from events, the raw stream and the run's facts
    run_trajectory(run_dir, ...)  -> dict     the same, read from a recorded run's files
    export_run(run_dir, out_dir)  -> [Path]   every run of a record, validated, written atomically
    validate(doc)                 -> [str]    the shipped JSON Schema plus the RFC's cross-field rules

Specification: Harbor RFC 0001 "Agent Trajectory Interchange Format (ATIF)",
v1.7 (April 2026); the schema in schema/atif.schema.json is written from it.

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
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentdrift.canonical import json_lines_objects
from pytest_agentdrift.tasks.shard import item_key
from pytest_agentdrift.vocabulary import (
    EVENTS_FILE,
    MANIFEST_FILE,
    SOURCE_MANIFEST_FILE,
    STDOUT_FILE,
    TASK_MD_FILE,
    is_concrete,
)

SCHEMA_VERSION = "ATIF-v1.7"
SCHEMA_PATH = Path(__file__).parent / "schema" / "atif.schema.json"

#: products whose stream reports input tokens *including* cache reads (OpenAI style);
#: Anthropic reports fresh input, cache reads and cache writes apart
_INPUT_INCLUDES_CACHED = {"openai/codex": True, "github/copilot-cli": True, "anthropic/claude-code": False}
#: agents known to make no model call (ATIF llm_call_count = 0: deterministic dispatch)
_DETERMINISTIC_PRODUCTS = ("pytest-agentdrift/reference",)
_CLIP = 2000
_STEP_ORDER = (
    "step_id",
    "timestamp",
    "source",
    "model_name",
    "reasoning_effort",
    "message",
    "reasoning_content",
    "tool_calls",
    "observation",
    "metrics",
    "llm_call_count",
    "is_copied_context",
    "extra",
)
_SHELL_CALLS = frozenset({"Bash", "bash", "powershell", "command_execution"})


def _clip(value: Any, limit: int = _CLIP) -> Any:
    from pytest_agentdrift.agents.common import clip

    return clip(value, limit)


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# What the product's own stream adds
# ---------------------------------------------------------------------------


@dataclass
class StreamIndex:
    """Facts from the product's raw stream, keyed by the ids the common events carry."""

    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # call id -> {content, is_error, extra}
    arguments: dict[str, dict[str, Any]] = field(default_factory=dict)  # call id -> full arguments
    call_step: dict[str, str] = field(default_factory=dict)  # call id -> API message id
    text_step: dict[str, str] = field(default_factory=dict)  # (clipped) message text -> API message id
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)  # API message id -> ATIF metrics
    models: dict[str, str] = field(default_factory=dict)  # API message id -> model
    totals: dict[str, Any] | None = None  # final usage as the stream states it
    notes: list[str] = field(default_factory=list)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(c.get("text") if isinstance(c, dict) and "text" in c else c) for c in content)
    if isinstance(content, dict):
        for key in ("content", "text", "detailedContent"):
            if isinstance(content.get(key), str):
                return content[key]
    return "" if content is None else json.dumps(content, sort_keys=True, default=str)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def index_stream(product: str | None, stdout: str | bytes | None) -> StreamIndex:
    """Read what the common events leave out from a product's stream; unknown products give nothing."""
    idx = StreamIndex()
    if not stdout or product not in ("anthropic/claude-code", "openai/codex", "github/copilot-cli"):
        return idx
    from pytest_agentdrift.agents.common import read_jsonl

    stream = read_jsonl(stdout)
    if stream.truncated:
        idx.notes.append("the recorded stream ends mid-record: the last step may be incomplete")
    for _, rec in stream.records:
        if product == "anthropic/claude-code":
            _claude_record(rec, idx)
        elif product == "openai/codex":
            _codex_record(rec, idx)
        else:
            _copilot_record(rec, idx)
    return idx


def _claude_record(rec: dict[str, Any], idx: StreamIndex) -> None:
    kind = rec.get("type")
    msg = rec.get("message") if isinstance(rec.get("message"), dict) else {}
    if kind == "assistant":
        _claude_assistant(msg, idx)
    elif kind == "user":
        for block in msg.get("content") or []:
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_result"
                and isinstance(block.get("tool_use_id"), str)
            ):
                idx.results[block["tool_use_id"]] = {
                    "content": _clip(_text_of(block.get("content"))),
                    "is_error": bool(block.get("is_error")),
                }
    elif kind == "result":
        usage = rec.get("usage") if isinstance(rec.get("usage"), dict) else {}
        totals, write = _claude_tokens(usage, "total_")
        cost = rec.get("total_cost_usd")
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            totals["total_cost_usd"] = float(cost)
        if write:
            totals["extra"] = {"cache_creation_input_tokens": write}
        idx.totals = totals


def _claude_tokens(usage: Mapping[str, Any], prefix: str) -> tuple[dict[str, Any], int | None]:
    """ATIF's token counts from Claude's usage (names prefixed for the run's totals), and the cache writes."""
    fresh, read, write = (
        _int(usage.get(k)) for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )
    tokens: dict[str, Any] = {}
    if fresh is not None:
        # ATIF prompt_tokens counts every input token, cache hits and cache writes included
        tokens[f"{prefix}prompt_tokens"] = fresh + (read or 0) + (write or 0)
    if _int(usage.get("output_tokens")) is not None:
        tokens[f"{prefix}completion_tokens"] = usage["output_tokens"]
    if read is not None:
        tokens[f"{prefix}cached_tokens"] = read
    return tokens, write


def _claude_assistant(msg: dict[str, Any], idx: StreamIndex) -> None:
    """One assistant message: its model, token counts, and which step its text and tool calls belong to."""
    mid = msg.get("id") if isinstance(msg.get("id"), str) else None
    if not mid:
        return
    model = msg.get("model")
    if isinstance(model, str) and model and not model.startswith("<"):
        idx.models[mid] = model
    usage = msg.get("usage") if isinstance(msg.get("usage"), dict) else None
    if usage:
        metrics, write = _claude_tokens(usage, "")
        if write:
            metrics["extra"] = {"cache_creation_input_tokens": write}
        idx.metrics[mid] = metrics
    for block in msg.get("content") or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            idx.text_step[_clip(block["text"])] = mid
        elif block.get("type") == "tool_use" and isinstance(block.get("id"), str):
            idx.call_step[block["id"]] = mid
            if isinstance(block.get("input"), dict):
                idx.arguments[block["id"]] = _clip(block["input"])


def _codex_record(rec: dict[str, Any], idx: StreamIndex) -> None:
    if rec.get("type") != "item.completed" or not isinstance(rec.get("item"), dict):
        return
    item = rec["item"]
    iid = item.get("id") if isinstance(item.get("id"), str) else None
    itype = item.get("type")
    status = item.get("status") if isinstance(item.get("status"), str) else None
    if not iid:
        return
    if itype == "command_execution":
        idx.arguments[iid] = {"command": _clip(str(item.get("command") or ""))}
        exit_code = _int(item.get("exit_code"))
        idx.results[iid] = {
            "content": _clip(str(item.get("aggregated_output") or "")),
            "is_error": status != "completed" or (exit_code not in (0, None)),
            "extra": {"exit_code": exit_code, "status": status},
        }
    elif itype == "file_change":
        changes = [c for c in item.get("changes") or [] if isinstance(c, dict)]
        idx.arguments[iid] = {"changes": _clip(changes)}
        idx.results[iid] = {
            "content": f"{status or 'unknown'}: "
            + ", ".join(f"{c.get('kind', '?')} {c.get('path', '?')}" for c in changes),
            "is_error": status != "completed",
            "extra": {"status": status},
        }
    elif itype == "mcp_tool_call":
        idx.arguments[iid] = _clip({k: item[k] for k in ("server", "tool", "arguments") if k in item})
        outcome = item.get("result") if "result" in item else item.get("error")
        idx.results[iid] = {
            "content": _clip(_text_of(outcome)) if outcome is not None else f"status {status}",
            "is_error": status not in ("completed", None),
            "extra": {"status": status},
        }
    elif itype == "web_search":
        idx.arguments[iid] = {"query": _clip(str(item.get("query") or ""))}


def _copilot_record(rec: dict[str, Any], idx: StreamIndex) -> None:
    kind = rec.get("type")
    data = rec.get("data") if isinstance(rec.get("data"), dict) else rec
    if kind == "assistant.message":
        mid = data.get("messageId") if isinstance(data.get("messageId"), str) else None
        if not mid:
            return
        if isinstance(data.get("content"), str) and data["content"]:
            idx.text_step[_clip(data["content"])] = mid
        for req in data.get("toolRequests") or []:
            if isinstance(req, dict) and isinstance(req.get("toolCallId"), str):
                idx.call_step[req["toolCallId"]] = mid
    elif kind == "tool.execution_start":
        cid = data.get("toolCallId")
        if isinstance(cid, str) and isinstance(data.get("arguments"), dict):
            idx.arguments[cid] = _clip(data["arguments"])
    elif kind == "tool.execution_complete":
        cid = data.get("toolCallId")
        if not isinstance(cid, str):
            return
        ok = data.get("success") is True
        error = data.get("error") if isinstance(data.get("error"), dict) else {}
        content = _text_of(data.get("result")) if ok else str(error.get("message") or "failed")
        idx.results[cid] = {
            "content": _clip(content),
            "is_error": not ok,
            "extra": {"error_code": error["code"]} if error.get("code") else {},
        }


# ---------------------------------------------------------------------------
# Building a trajectory
# ---------------------------------------------------------------------------


def _call_id(event: Mapping[str, Any]) -> str | None:
    for key in ("tool_use_id", "tool_call_id", "item_id"):
        value = event.get(key)
        if isinstance(value, str) and value:
            return value
    return None


class _Builder:
    def __init__(self, idx: StreamIndex, deterministic: bool):
        self.idx = idx
        self.deterministic = deterministic
        self.steps: list[dict[str, Any]] = []
        self.calls: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}  # call id -> (step, tool call)
        self.last_call: tuple[dict[str, Any], dict[str, Any]] | None = None
        self.generated = 0
        self.current: dict[str, Any] | None = None  # the open agent step
        self.current_key: str | None = None
        self.observed: list[dict[str, Any]] = []
        self.unmapped: list[dict[str, Any]] = []
        self.messages = 0
        self.commanded: set[str] = set()  # calls a command event already reported on

    def new_id(self) -> str:
        self.generated += 1
        return f"call-{self.generated}"

    def agent_step(self, key: str | None, message: str = "") -> dict[str, Any]:
        step: dict[str, Any] = {"source": "agent", "message": message}
        if self.deterministic:
            step["llm_call_count"] = 0
        elif key is not None:
            step["llm_call_count"] = 1
            if key in self.idx.models:
                step["model_name"] = self.idx.models[key]
            if self.idx.metrics.get(key):
                step["metrics"] = self.idx.metrics[key]
            step["extra"] = {"api_message_id": key}
        self.steps.append(step)
        self.current, self.current_key = step, key
        return step

    def step_for(self, key: str | None, fresh: bool) -> dict[str, Any]:
        """The open step when this event belongs to it, else a new one."""
        cur = self.current
        if cur is None or fresh or self.deterministic:
            return self.agent_step(key)
        if key is not None and key != self.current_key:
            return self.agent_step(key)
        if key is None and self.current_key is not None:
            return self.agent_step(key)
        return cur

    def add_call(
        self,
        step: dict[str, Any],
        call_id: str | None,
        name: str,
        arguments: Mapping[str, Any],
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        cid = call_id if call_id and call_id not in self.calls else self.new_id()
        call: dict[str, Any] = {
            "tool_call_id": cid,
            "function_name": name or "unknown",
            "arguments": dict(self.idx.arguments.get(cid) or arguments),
        }
        if extra:
            call["extra"] = dict(extra)
        step.setdefault("tool_calls", []).append(call)
        self.calls[cid] = (step, call)
        self.last_call = (step, call)
        return call

    def result_for(self, call_id: str) -> dict[str, Any]:
        step, _ = self.calls[call_id]
        results = step.setdefault("observation", {"results": []})["results"]
        for r in results:
            if r.get("source_call_id") == call_id:
                return r
        r = {"source_call_id": call_id}
        results.append(r)
        return r

    def note_on(self, call_id: str, **facts: Any) -> None:
        r = self.result_for(call_id)
        extra = r.setdefault("extra", {})
        for k, v in facts.items():
            if v is None:
                continue
            if k in ("file_reads", "file_edits"):
                extra.setdefault(k, []).append(v)
            else:
                extra[k] = v

    def known_call(self, event: Mapping[str, Any], names: Iterable[str] = ()) -> str | None:
        """The tool call this event reports on: by id, or the call just made (codex carries no id)."""
        cid = _call_id(event)
        if cid and cid in self.calls:
            return cid
        if cid is None and self.last_call and self.last_call[1]["function_name"] in set(names):
            last = self.last_call[1]["tool_call_id"]
            if event.get("type") == "command" and last in self.commanded:
                return None  # one command per call: a second one is an action of its own
            return last
        return None

    def event(self, e: Mapping[str, Any]) -> None:  # noqa: C901 (known debt: split by job when next touched)
        etype = e.get("type")
        if etype == "message":
            self.on_message(e)
        elif etype == "tool_call":
            self.on_tool_call(e)
        elif etype == "command":
            self.on_command(e)
        elif etype in ("file_read", "file_edit"):
            cid = self.known_call(e, ("file_change",))
            if cid:
                self.note_on(cid, **{f"{etype}s": e.get("path")})
                return
            step = self.step_for(None, fresh=True)
            args = {k: e[k] for k in ("path", "kind") if e.get(k) is not None}
            self.add_call(step, None, etype, args)
        elif etype == "approval_request":
            step = self.step_for(None, fresh=True)
            self.add_call(step, None, "approval_request", {k: v for k, v in e.items() if k != "type"})
        elif etype == "denial":
            cid = self.known_call(e, ("command_execution", "file_change"))
            if cid:
                self.note_on(cid, denied=str(e.get("reason") or "denied"))
                return
            self.system(f"denied: {e.get('action', '?')} {e.get('path') or ''}".rstrip(), e)
        elif etype == "error":
            self.system(f"error: {e.get('message', '')}", e)
        elif etype == "final":
            pass  # the run's outcome and the agent's report are in extra.agentdrift
        elif etype in ("network_attempt", "write_outside", "api_request"):
            self.observed.append(dict(e))
        else:
            self.unmapped.append(dict(e))

    def on_message(self, e: Mapping[str, Any]) -> None:
        text = str(e.get("text") or "")
        self.messages += 1
        key = self.idx.text_step.get(text)
        cur = self.current
        if cur is not None and not cur.get("message") and not cur.get("tool_calls") and key == self.current_key:
            cur["message"] = text
        else:
            self.agent_step(key, text)

    def on_tool_call(self, e: Mapping[str, Any]) -> None:
        cid = _call_id(e)
        key = self.idx.call_step.get(cid) if cid else None
        step = self.step_for(key, fresh=False)
        args = (
            e.get("input")
            if isinstance(e.get("input"), dict)
            else {k: v for k, v in e.items() if k in ("query", "server", "tool")}
        )
        extra = {k: e[k] for k in ("status",) if e.get(k) is not None}
        call = self.add_call(step, cid, str(e.get("name") or "unknown"), args, extra)
        if cid is None or call["tool_call_id"] != cid:
            cid = call["tool_call_id"]
        if cid in self.idx.results:
            r = self.result_for(cid)
            res = self.idx.results[cid]
            r["content"] = res["content"]
            extra_r = {"is_error": res.get("is_error"), **(res.get("extra") or {})}
            r.setdefault("extra", {}).update({k: v for k, v in extra_r.items() if v is not None})
        elif e.get("ok") is not None:
            self.note_on(cid, is_error=not e["ok"])

    def on_command(self, e: Mapping[str, Any]) -> None:
        """A command the harness saw: the result of the shell call that ran it, else an action of its own."""
        cid = self.known_call(e, _SHELL_CALLS)
        if cid:
            step, call = self.calls[cid]
            self.commanded.add(cid)
            if "command" not in call["arguments"] and e.get("command"):
                call["arguments"]["command"] = e["command"]
            self.note_on(cid, exit_code=e.get("exit_code"), status=e.get("status"))
            return
        step = self.step_for(None, fresh=True)
        args = {k: e[k] for k in ("argv", "command") if e.get(k) is not None}
        call = self.add_call(step, None, "command", args)
        r = self.result_for(call["tool_call_id"])
        if e.get("exit_code") is not None:
            r["content"] = f"exit code {e['exit_code']}"
            r["extra"] = {"exit_code": e["exit_code"], "is_error": e["exit_code"] != 0}

    def system(self, message: str, e: Mapping[str, Any]) -> None:
        self.steps.append({"source": "system", "message": message, "extra": {"event": dict(e)}})
        self.current, self.current_key = None, None


def _final_metrics(
    usage: Mapping[str, Any] | None, product: str | None, idx: StreamIndex, steps: int
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    usage = usage or {}
    fresh, cached, completion = (_int(usage.get(k)) for k in ("input_tokens", "cached_tokens", "output_tokens"))
    cost = usage.get("cost_usd")
    if idx.totals:
        out.update(idx.totals)
    else:
        if fresh is not None:
            included = _INPUT_INCLUDES_CACHED.get(product or "")
            out["total_prompt_tokens"] = fresh if included in (True, None) else fresh + (cached or 0)
        if completion is not None:
            out["total_completion_tokens"] = completion
        if cached is not None:
            out["total_cached_tokens"] = cached
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            out["total_cost_usd"] = float(cost)
    out["total_steps"] = steps
    reported = {k: v for k, v in usage.items() if v is not None}
    if reported:
        out.setdefault("extra", {})["usage_as_recorded"] = reported
    return out


def _numbered_steps(b: _Builder, report: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The builder's steps, the final report as the last word of a silent agent, numbered and in ATIF order."""
    if report and not b.messages:
        # The agent said nothing in its stream (the reference agent, most --agent-cmd agents):
        # its final report is its last word.
        text = str(report.get("summary") or "")
        if report.get("answer"):
            text += ("\n\n" if text else "") + str(report["answer"])
        step = b.agent_step(None, text)
        step.setdefault("extra", {})["final_report"] = dict(report)
    for i, step in enumerate(b.steps, 1):
        step["step_id"] = i
    return [{k: s[k] for k in _STEP_ORDER if k in s} for s in b.steps]


def _root_extra(b: _Builder, extra: Mapping[str, Any] | None, report: Mapping[str, Any] | None) -> dict[str, Any]:
    root_extra = dict(extra or {})
    ad = root_extra.setdefault("agentdrift", {})
    if b.observed:
        ad["observed_events"] = b.observed
    if b.unmapped:
        ad["unmapped_events"] = b.unmapped
    if report:
        ad["final_report"] = dict(report)
    return root_extra


def build(
    *,
    session_id: str,
    agent: Mapping[str, Any],
    events: list[Mapping[str, Any]],
    product: str | None = None,
    stdout: str | bytes | None = None,
    instruction: str | None = None,
    instruction_extra: Mapping[str, Any] | None = None,
    usage: Mapping[str, Any] | None = None,
    report: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    notes: Iterable[str] = (),
) -> dict[str, Any]:
    """One ATIF trajectory. `agent` is the AgentSchema object (name, version, model_name, extra)."""
    idx = index_stream(product, stdout)
    deterministic = product in _DETERMINISTIC_PRODUCTS
    b = _Builder(idx, deterministic)
    user: dict[str, Any] = {"source": "user", "message": instruction or ""}
    if instruction_extra:
        user["extra"] = dict(instruction_extra)
    b.steps.append(user)
    for e in events:
        if isinstance(e, Mapping):
            b.event(e)
    steps = _numbered_steps(b, report)
    agent_doc = {k: v for k, v in agent.items() if v is not None}
    root_extra = _root_extra(b, extra, report)
    all_notes = [*notes, *idx.notes]
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "session_id": session_id,
        "trajectory_id": session_id,
        "agent": agent_doc,
        "steps": steps,
        "final_metrics": _final_metrics(usage, product, idx, len(steps)),
        "extra": root_extra,
    }
    if all_notes:
        doc["notes"] = " ".join(all_notes)
    return doc


# ---------------------------------------------------------------------------
# From a recorded run
# ---------------------------------------------------------------------------


def _model_name(value: Any) -> bool:
    """Whether `value` can be ATIF's model_name: a concrete value, and text (the schema's type)."""
    return isinstance(value, str) and is_concrete(value)


def _read(path: Path, root: Path, limit: int = 16 << 20) -> str | None:
    from pytest_agentdrift.canonical import read_regular
    from pytest_agentdrift.record.html import inside

    if not inside(path, root):
        return None  # a record copied from elsewhere may hold links out of it
    try:
        return read_regular(path, limit).decode("utf-8", "surrogateescape")
    except OSError:
        return None


def find_instruction(
    task_id: str, source_manifest: Mapping[str, Any] | None, task_dirs: Iterable[Path] = ()
) -> tuple[str | None, dict[str, Any]]:
    """The instruction text the run was given, when a task directory with the same
    task.md bytes (by the record's source manifest) can be found; else None and why."""
    import hashlib

    want = None
    for f in (source_manifest or {}).get("files") or []:
        if isinstance(f, dict) and f.get("path") == f"{task_id}/{TASK_MD_FILE}":
            want = f.get("sha256")
    info: dict[str, Any] = {"task_id": task_id, "instruction_file": TASK_MD_FILE, "task_md_sha256": want}
    if not want:
        info["instruction_text"] = "not recorded: the record's source manifest does not list this task's task.md"
        return None, info
    from pytest_agentdrift.tasks.load import find_task_dirs

    for root in task_dirs:
        for d in find_task_dirs(Path(root)) if Path(root).is_dir() else []:
            md = d / TASK_MD_FILE
            try:
                data = md.read_bytes()
            except OSError:
                continue
            if hashlib.sha256(data).hexdigest() == want:
                info["instruction_text"] = f"from {d.name}/{TASK_MD_FILE} (same sha256 as recorded)"
                return data.decode("utf-8", "replace"), info
    info["instruction_text"] = (
        "not included: no task directory with the recorded task.md bytes was found (agentdrift export atif --tasks DIR)"
    )
    return None, info


def _raw_events(run_dir: Path, raw_rel: Any) -> tuple[list[dict[str, Any]], str | None, list[str]]:
    """The run's events.jsonl and stdout.txt from its raw artifacts, with a note on what is missing."""
    raw = (
        Path(run_dir).joinpath(*Path(raw_rel).parts)
        if isinstance(raw_rel, str) and ".." not in Path(raw_rel).parts
        else None
    )
    if raw is None:
        return [], None, ["the run has no raw artifacts: only the instruction and the outcome are known."]
    notes: list[str] = []
    text = _read(raw / EVENTS_FILE, Path(run_dir))
    events = json_lines_objects(text or "")[0]
    stdout = _read(raw / STDOUT_FILE, Path(run_dir))
    if text is None:
        notes.append("events.jsonl was not recorded: the steps are incomplete.")
    return events, stdout, notes


def _agent_schema(
    results: Mapping[str, Any], run: Mapping[str, Any], manifest: Mapping[str, Any] | None
) -> dict[str, Any]:
    """ATIF's agent object: the recorded agent, the model that answered, the identity it ran under."""
    agent = results.get("agent") or {}
    identity = (manifest or {}).get("identity") or {}
    model = (
        run.get("model_stamp")
        if _model_name(run.get("model_stamp"))
        else (identity.get("model_id") if _model_name(identity.get("model_id")) else None)
    )
    agent_extra = {
        "product": agent.get("product"),
        "surface": agent.get("surface"),
        "config_hash": identity.get("config_hash") if manifest else "not recorded",
        "instruction_hash": identity.get("instruction_hash") if manifest else "not recorded",
        "runtime_id": results.get("runtime_id"),
        "model_id_requested": identity.get("model_id"),
        "model_stamp": run.get("model_stamp"),
        "exported_by": f"pytest-agentdrift {results.get('plugin_version', '?')}",
    }
    return {
        "name": str(agent.get("name") or "unknown"),
        "version": str(agent.get("version") or "unobserved"),
        "model_name": model,
        "extra": {k: v for k, v in agent_extra.items() if v is not None},
    }


def _grade_extra(results: Mapping[str, Any], task_id: str, run: Mapping[str, Any]) -> dict[str, Any]:
    """extra.agentdrift: the harness's evidence and the grade, beside the agent's own account."""
    return {
        "agentdrift": {
            "run_id": results.get("run_id"),
            "task_id": task_id,
            "rep": run.get("rep"),
            "outcome": run.get("outcome"),
            "passed": run.get("passed"),
            "tampered_pass": run.get("tampered_pass"),
            "critical_failed": run.get("critical_failed"),
            "failed_checks": run.get("failed_checks"),
            "layers": run.get("layers"),
            "report_error": run.get("report_error"),
            "evidence": run.get("evidence"),
            "raw": run.get("raw"),
        }
    }


def run_trajectory(
    run_dir: Path,
    results: Mapping[str, Any],
    task_id: str,
    run: Mapping[str, Any],
    manifest: Mapping[str, Any] | None = None,
    source_manifest: Mapping[str, Any] | None = None,
    task_dirs: Iterable[Path] = (),
) -> dict[str, Any]:
    """The trajectory of one recorded run."""
    raw_rel = run.get("raw")
    events, stdout, notes = _raw_events(run_dir, raw_rel)
    agent_doc = _agent_schema(results, run, manifest)
    instruction, instruction_info = find_instruction(task_id, source_manifest, task_dirs)
    product = (results.get("agent") or {}).get("product")
    if product in _DETERMINISTIC_PRODUCTS:
        notes.append(
            "The reference agent calls no model: its steps replay the task's scripted solution (llm_call_count 0)."
        )
    notes.append(
        "Steps are the agent's and its adapter's account (events.jsonl, and the product's own stream for "
        "tool results and usage); the harness's evidence and the grade are in extra.agentdrift."
    )
    return build(
        session_id=f"{results.get('run_id', 'run')}/{item_key(task_id, run.get('rep'))}",
        agent=agent_doc,
        events=events,
        product=product,
        stdout=stdout,
        instruction=instruction,
        instruction_extra=instruction_info,
        usage=run.get("usage"),
        report=run.get("report"),
        extra=_grade_extra(results, task_id, run),
        notes=notes,
    )


_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def trajectory_filename(task_id: str, rep: Any) -> str:
    return f"{_SAFE.sub('_', task_id)}-r{_SAFE.sub('_', str(rep))}.json"


def export_run(
    run_dir: Path, out_dir: Path, task_dirs: Iterable[Path] = (), results: dict[str, Any] | None = None
) -> list[Path]:
    """Write one validated ATIF file per run of a record; nothing is written unless all validate.

    `results`: the record's results.json when the caller already loaded it."""
    from pytest_agentdrift.canonical import load_json_file
    from pytest_agentdrift.errors import AgentDriftError, RecordError
    from pytest_agentdrift.record.store import atomic_write, load_run

    run_dir = Path(run_dir)
    if results is None:
        results = load_run(run_dir, require_complete=False)

    def optional(name: str) -> Any:
        path = run_dir / name
        return load_json_file(path, RecordError) if path.is_file() else None

    manifest, source_manifest = optional(MANIFEST_FILE), optional(SOURCE_MANIFEST_FILE)
    from pytest_agentdrift.tasks.load import builtin_suite_dir

    dirs = [*task_dirs, builtin_suite_dir()]
    docs: list[tuple[str, dict[str, Any]]] = []
    for tid in sorted(results["tasks"]):
        for run in results["tasks"][tid]["runs"]:
            doc = run_trajectory(run_dir, results, tid, run, manifest, source_manifest, dirs)
            problems = validate(doc)
            if problems:
                raise AgentDriftError(
                    f"the trajectory of {tid} r{run.get('rep')} does not validate against "
                    f"{SCHEMA_PATH.name} (a bug in pytest-agentdrift): " + "; ".join(problems[:3])
                )
            docs.append((trajectory_filename(tid, run.get("rep")), doc))
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise AgentDriftError("exists and is not a directory", out_dir)
    written = []
    for name, doc in docs:
        path = out_dir / name
        # ensure_ascii: a lone surrogate (a file name that was not UTF-8) stays valid JSON text
        atomic_write(path, json.dumps(doc, indent=2, sort_keys=False, ensure_ascii=True) + "\n")
        written.append(path)
    return written
