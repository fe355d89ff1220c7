"""One ATIF trajectory built from the common events and the stream's index: one agent step per model
inference, tool calls with their results, system steps for denials and errors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NotRequired, TypedDict

from pytest_agentdrift.record.atif.schema import SCHEMA_VERSION
from pytest_agentdrift.record.atif.streams import StreamIndex, count, index_stream
from pytest_agentdrift.shapes import JsonObject, JsonValue

#: products whose stream reports input tokens *including* cache reads (OpenAI style);
#: Anthropic reports fresh input, cache reads and cache writes apart
_INPUT_INCLUDES_CACHED = {"openai/codex": True, "github/copilot-cli": True, "anthropic/claude-code": False}


#: agents known to make no model call (ATIF llm_call_count = 0: deterministic dispatch)
DETERMINISTIC_PRODUCTS = ("pytest-agentdrift/reference",)


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


# The parts of a trajectory the builder fills in, as ATIF names them (schema/atif.schema.json)
class ToolCall(TypedDict):
    tool_call_id: str
    function_name: str
    arguments: JsonObject
    extra: NotRequired[JsonObject]


class ObservationResult(TypedDict, total=False):
    source_call_id: str
    content: str
    extra: JsonObject


class Observation(TypedDict):
    results: list[ObservationResult]


class Step(TypedDict, total=False):
    step_id: int
    source: str
    model_name: str
    message: str
    tool_calls: list[ToolCall]
    observation: Observation
    metrics: JsonObject
    llm_call_count: int
    extra: JsonObject


def _call_id(event: JsonObject) -> str | None:
    for key in ("tool_use_id", "tool_call_id", "item_id"):
        value = event.get(key)
        if isinstance(value, str) and value:
            return value
    return None


class _Builder:
    def __init__(self, idx: StreamIndex, deterministic: bool):
        self.idx = idx
        self.deterministic = deterministic
        self.steps: list[Step] = []
        self.calls: dict[str, tuple[Step, ToolCall]] = {}  # call id -> (step, tool call)
        self.last_call: tuple[Step, ToolCall] | None = None
        self.generated = 0
        self.current: Step | None = None  # the open agent step
        self.current_key: str | None = None
        self.observed: list[JsonValue] = []
        self.unmapped: list[JsonValue] = []
        self.messages = 0
        self.commanded: set[str] = set()  # calls a command event already reported on

    def new_id(self) -> str:
        self.generated += 1
        return f"call-{self.generated}"

    def agent_step(self, key: str | None, message: str = "") -> Step:
        step: Step = {"source": "agent", "message": message}
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

    def step_for(self, key: str | None, fresh: bool) -> Step:
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
        step: Step,
        call_id: str | None,
        name: str,
        arguments: JsonObject,
        extra: JsonObject | None = None,
    ) -> ToolCall:
        cid = call_id if call_id and call_id not in self.calls else self.new_id()
        call: ToolCall = {
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

    def result_for(self, call_id: str) -> ObservationResult:
        step, _ = self.calls[call_id]
        results = step.setdefault("observation", {"results": []})["results"]
        for r in results:
            if r.get("source_call_id") == call_id:
                return r
        new: ObservationResult = {"source_call_id": call_id}
        results.append(new)
        return new

    def note_on(self, call_id: str, **facts: JsonValue) -> None:
        r = self.result_for(call_id)
        extra = r.setdefault("extra", {})
        for k, v in facts.items():
            if v is None:
                continue
            if k in ("file_reads", "file_edits"):
                listed = extra.setdefault(k, [])
                if isinstance(listed, list):  # only this method writes these keys
                    listed.append(v)
            else:
                extra[k] = v

    def known_call(self, event: JsonObject, names: Iterable[str] = ()) -> str | None:
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

    def event(self, e: JsonObject) -> None:
        etype = e.get("type")
        if etype == "message":
            self.on_message(e)
        elif etype == "tool_call":
            self.on_tool_call(e)
        elif etype == "command":
            self.on_command(e)
        elif etype in ("file_read", "file_edit"):
            self.on_file_event(etype, e)
        elif etype == "approval_request":
            self.on_approval_request(e)
        elif etype == "denial":
            self.on_denial(e)
        elif etype == "error":
            self.system(f"error: {e.get('message', '')}", e)
        elif etype == "final":
            pass  # the run's outcome and the agent's report are in extra.agentdrift
        elif etype in ("network_attempt", "write_outside", "api_request"):
            self.observed.append(dict(e))
        else:
            self.unmapped.append(dict(e))

    def on_file_event(self, etype: str, e: JsonObject) -> None:
        """A file read or edit: a note on the file-change call that made it, else an action of its own."""
        cid = self.known_call(e, ("file_change",))
        if cid:
            self.note_on(cid, **{f"{etype}s": e.get("path")})
            return
        step = self.step_for(None, fresh=True)
        args = {k: e[k] for k in ("path", "kind") if e.get(k) is not None}
        self.add_call(step, None, etype, args)

    def on_approval_request(self, e: JsonObject) -> None:
        """An approval the agent asked for: an action of its own, with every field of the event."""
        step = self.step_for(None, fresh=True)
        self.add_call(step, None, "approval_request", {k: v for k, v in e.items() if k != "type"})

    def on_denial(self, e: JsonObject) -> None:
        """A denial: a note on the call it refused, else a system step."""
        cid = self.known_call(e, ("command_execution", "file_change"))
        if cid:
            self.note_on(cid, denied=str(e.get("reason") or "denied"))
            return
        self.system(f"denied: {e.get('action', '?')} {e.get('path') or ''}".rstrip(), e)

    def on_message(self, e: JsonObject) -> None:
        text = str(e.get("text") or "")
        self.messages += 1
        key = self.idx.text_step.get(text)
        cur = self.current
        if cur is not None and not cur.get("message") and not cur.get("tool_calls") and key == self.current_key:
            cur["message"] = text
        else:
            self.agent_step(key, text)

    def on_tool_call(self, e: JsonObject) -> None:
        cid = _call_id(e)
        key = self.idx.call_step.get(cid) if cid else None
        step = self.step_for(key, fresh=False)
        given = e.get("input")
        args = given if isinstance(given, dict) else {k: v for k, v in e.items() if k in ("query", "server", "tool")}
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

    def on_command(self, e: JsonObject) -> None:
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

    def system(self, message: str, e: JsonObject) -> None:
        self.steps.append({"source": "system", "message": message, "extra": {"event": dict(e)}})
        self.current, self.current_key = None, None


def _final_metrics(usage: Mapping[str, object] | None, product: str | None, idx: StreamIndex, steps: int) -> JsonObject:
    out: JsonObject = {}
    usage = usage or {}
    fresh, cached, completion = (count(usage.get(k)) for k in ("input_tokens", "cached_tokens", "output_tokens"))
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
    # the recorded usage is JSON (numbers, text): a value of another type is not in a record
    reported: JsonObject = {
        k: v for k, v in usage.items() if v is not None and isinstance(v, (bool, int, float, str, list, dict))
    }
    if reported:
        given = out.get("extra")
        usage_extra: JsonObject = given if isinstance(given, dict) else {}
        usage_extra["usage_as_recorded"] = reported
        out["extra"] = usage_extra
    return out


def _numbered_steps(b: _Builder, report: JsonObject | None) -> list[dict[str, object]]:
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
    return [dict(sorted(((k, v) for k, v in s.items() if k in _STEP_ORDER), key=_step_order)) for s in b.steps]


def _step_order(item: tuple[str, object]) -> int:
    return _STEP_ORDER.index(item[0])


def _root_extra(b: _Builder, extra: Mapping[str, object] | None, report: JsonObject | None) -> dict[str, object]:
    root_extra = dict(extra or {})
    given = root_extra.get("agentdrift")
    ad: dict[str, object] = given if isinstance(given, dict) else {}
    root_extra["agentdrift"] = ad
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
    agent: Mapping[str, object],
    events: Iterable[JsonObject],
    product: str | None = None,
    stdout: str | bytes | None = None,
    instruction: str | None = None,
    instruction_extra: JsonObject | None = None,
    usage: Mapping[str, object] | None = None,
    report: JsonObject | None = None,
    extra: Mapping[str, object] | None = None,
    notes: Iterable[str] = (),
) -> dict[str, object]:
    """One ATIF trajectory. `agent` is the AgentSchema object (name, version, model_name, extra)."""
    idx = index_stream(product, stdout)
    deterministic = product in DETERMINISTIC_PRODUCTS
    b = _Builder(idx, deterministic)
    user: Step = {"source": "user", "message": instruction or ""}
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
    doc: dict[str, object] = {
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
