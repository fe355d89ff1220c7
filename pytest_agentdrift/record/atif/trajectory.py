"""One ATIF trajectory built from the common events and the stream's index: one agent step per model
inference, tool calls with their results, system steps for denials and errors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_agentdrift.record.atif.schema import SCHEMA_VERSION
from pytest_agentdrift.record.atif.streams import StreamIndex, count, index_stream

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
    events: Iterable[Mapping[str, Any]],
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
    deterministic = product in DETERMINISTIC_PRODUCTS
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
