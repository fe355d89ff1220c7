"""Reading what the Copilot CLI wrote: its JSONL session events and its usage summary.

The events of `copilot -p ... --output-format=json` (1.0.102, read from real
runs against a scripted endpoint): `session.tools_updated {model}`,
`model.call_start {model}`, `model.call_finished {outcome}`,
`model.call_failure {statusCode}`, `assistant.message {content, toolRequests,
model}`, `tool.execution_start {toolCallId, toolName, arguments}` (a freeform
tool such as `apply_patch` has its raw text as `arguments`),
`tool.execution_complete {toolCallId, success, error, shellExecution:
{exitCode}, fileEdits: [{path, kind}]}`, `session.error {errorType, message,
statusCode}`, then `assistant.idle` and a last record `result {exitCode}`: the
run is over only with those two, a stream cut after a turn is not.
`assistant.turn_end` ends one model turn, not the run.

The Copilot SDK's event shapes (`session.start {selectedModel}`,
`assistant.usage {model, inputTokens, ...}`, `session.shutdown {modelMetrics,
currentModel}`) are read too, defensively (payload under `data` or inline).

Every `model` field of 1.0.102 names the model the CLI asked for, never the
one that answered (a gateway may route elsewhere): it is the requested model,
and `model_stamp` stays unobserved unless a per-call `assistant.usage` names
the model. Tokens are not in the stream: the CLI writes them at exit to the
file `--usage-output-file` names (`modelMetrics`: per model, its request count
and `usage {inputTokens (cached included), outputTokens (reasoning included),
cacheReadTokens, cacheWriteTokens, reasoningTokens}`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_agentdrift.agents.base import AdapterOutput, Usage, add_counts
from pytest_agentdrift.agents.common import as_dict, as_int, as_list, as_str, cap_errors, clip, close_report
from pytest_agentdrift.agents.infra import InfraError
from pytest_agentdrift.shapes import JsonObject

if TYPE_CHECKING:
    from pytest_agentdrift.agents.common import JsonlStream

#: the file the harness asks the CLI to write its usage summary to (in RunContext.scratch)
USAGE_FILE = "usage.json"

_SHELL_TOOLS = frozenset({"bash", "powershell"})
_READ_TOOLS = frozenset({"view"})
_EDIT_TOOLS = frozenset({"edit", "create"})
_PATCH_TOOLS = frozenset({"apply_patch"})
#: records after which the run is over (SDK: session.shutdown / session.idle; CLI: assistant.idle, result)
_TERMINAL_TYPES = frozenset({"session.shutdown", "session.idle", "assistant.idle", "result"})
_PATCH_PATH = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
_DENIED = re.compile(r"\b(denied|not permitted|not allowed|permission|rejected by the user)\b", re.IGNORECASE)


@dataclass
class CopilotOutput(AdapterOutput):
    """AdapterOutput with what the usage summary is checked against."""

    #: model calls the stream shows answered (model.call_finished with outcome success); None: no such record
    model_calls: int | None = None
    #: whether the stream itself carried tokens (SDK assistant.usage / session.shutdown)
    usage_from_stream: bool = False
    #: the model the CLI asked for, as its own events name it
    requested_model: str | None = None


def payload(rec: JsonObject) -> JsonObject:
    # session events carry their fields under `data`; `result` and older shapes have them inline
    data = rec.get("data")
    return data if isinstance(data, dict) else rec


def _looks_denied(error: JsonObject) -> bool:
    code = as_str(error.get("code")) or ""
    return code.lower() in {"denied", "permission_denied", "rejected"} or bool(
        _DENIED.search(as_str(error.get("message")) or "")
    )


def _usage_of(u: JsonObject) -> Usage:
    return Usage(
        input_tokens=as_int(u.get("inputTokens")),
        output_tokens=as_int(u.get("outputTokens")),
        cached_tokens=as_int(u.get("cacheReadTokens")),
        cache_write_tokens=as_int(u.get("cacheWriteTokens")),
        reasoning_tokens=as_int(u.get("reasoningTokens")),
    )


def metrics_usage(metrics: JsonObject) -> tuple[Usage, int | None]:
    """Tokens and model requests summed over `modelMetrics` ({model: {requests, usage}})."""
    total, requests = Usage(), None
    for metric in metrics.values():
        metric = as_dict(metric)
        total.add_tokens(_usage_of(as_dict(metric.get("usage"))))
        requests = add_counts(requests, as_int(as_dict(metric.get("requests")).get("count")))
    return total, requests


def usage_summary(data: bytes) -> tuple[Usage, int | None, str | None]:
    """(tokens, model requests, problem) of a `--usage-output-file` summary."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return Usage(), None, f"not JSON ({str(exc)[:100]})"
    if not isinstance(obj, dict) or not isinstance(obj.get("modelMetrics"), dict):
        return Usage(), None, "no modelMetrics object"
    usage, requests = metrics_usage(obj["modelMetrics"])
    if not obj["modelMetrics"]:
        # no model answered: zero tokens spent, which is an observation, not a gap
        usage = Usage(input_tokens=0, output_tokens=0, cached_tokens=0, cache_write_tokens=0, reasoning_tokens=0)
        requests = 0
    return usage, requests, None


class StreamParser:
    """One pass over the session events; `finish` turns what was seen into a CopilotOutput."""

    def __init__(self) -> None:
        self.out = CopilotOutput()
        self.events = self.out.events
        self.pending: dict[str, tuple[JsonObject, str, list[str], JsonObject | None]] = {}
        self.stamp: str | None = None  # the model a per-call usage record names
        self.usage_stream = Usage()
        self.usage_shutdown: Usage | None = None
        self.last_text: str | None = None
        self.terminal = False
        self.failed = False
        self.answered = False
        self.typed = 0
        self.errors: list[str] = []
        self.infra_signal: InfraError | None = None  # the last error the CLI itself reported
        self.last_failure: JsonObject | None = None  # the last model.call_failure
        self.retries = 0  # the CLI's own retries of a failed model call (assistant.turn_retry)

    def feed(self, kind: str, data: JsonObject) -> None:
        self.typed += 1
        if kind in _TERMINAL_TYPES:
            self.terminal = True
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, data)
        # other types (deltas, reasoning, hooks, info, background tasks) carry nothing we map

    # -- handlers ------------------------------------------------------------------

    def requested(self, data: JsonObject, key: str = "model") -> None:
        self.out.requested_model = as_str(data.get(key)) or self.out.requested_model

    def on_model_change(self, data: JsonObject) -> None:
        self.requested(data, "newModel")

    def on_session_start(self, data: JsonObject) -> None:
        self.requested(data, "selectedModel")

    def on_call_finished(self, data: JsonObject) -> None:
        if as_str(data.get("outcome")) == "success":
            self.out.model_calls = (self.out.model_calls or 0) + 1
        elif self.out.model_calls is None:
            self.out.model_calls = 0

    def on_call_failure(self, data: JsonObject) -> None:
        self.requested(data)
        self.last_failure = data

    def on_retry(self, data: JsonObject) -> None:
        self.retries += 1
        status = as_int(as_dict(self.last_failure).get("statusCode"))
        self.events.append(
            {"type": "api_retry", "attempt": self.retries, "error_status": status, "error": as_str(data.get("reason"))}
        )

    def on_message(self, data: JsonObject) -> None:
        self.requested(data)
        text = as_str(data.get("content"))
        self.answered = self.answered or bool(text) or bool(data.get("toolRequests"))
        if text:
            self.events.append({"type": "message", "text": clip(text)})
            if not data.get("parentToolCallId"):
                self.last_text = text

    def on_tool_start(self, data: JsonObject) -> None:
        self.answered = True
        tool = as_str(data.get("toolName")) or "unknown"
        call_id = as_str(data.get("toolCallId")) or ""
        raw = data.get("arguments")
        args = as_dict(raw)
        server = as_str(data.get("mcpServerName"))
        name = f"mcp:{server}/{as_str(data.get('mcpToolName')) or tool}" if server else tool
        call = {"type": "tool_call", "name": name, "tool_call_id": call_id, "input": clip(raw if raw else args, 500)}
        self.events.append(call)
        paths: list[str] = []
        command = None
        path = as_str(args.get("path")) or as_str(args.get("file_path"))
        if tool in _SHELL_TOOLS:
            command = {"type": "command", "command": clip(as_str(args.get("command")) or ""), "exit_code": None}
            command["tool_call_id"] = call_id
            self.events.append(command)
        elif tool in _READ_TOOLS and path:
            self.events.append({"type": "file_read", "path": path, "tool_call_id": call_id})
        elif tool in _EDIT_TOOLS and path:
            paths = [path]
        elif tool in _PATCH_TOOLS:
            # a freeform tool: the patch is the raw argument text (or {"input": ...} as a function)
            patch = as_str(raw) or as_str(args.get("input")) or as_str(args.get("patch")) or ""
            paths = [p.strip() for p in _PATCH_PATH.findall(patch)]
        if call_id:
            self.pending[call_id] = (call, tool, paths, command)

    def on_tool_complete(self, data: JsonObject) -> None:
        call_id = as_str(data.get("toolCallId")) or ""
        started = self.pending.pop(call_id, None)
        if started is None:
            return
        call, tool, paths, command = started
        success = data.get("success") is True
        if command is not None:
            # a shell tool "succeeds" whatever its command's exit status: the status is the command's
            code = as_int(as_dict(data.get("shellExecution")).get("exitCode"))
            command["exit_code"] = code
            success = success and code in (None, 0)
            command["ok"] = success
        call["ok"] = success
        error = as_dict(data.get("error"))
        if data.get("success") is True:
            # what the CLI says it edited (fileEdits); the paths in the arguments only when it says nothing
            edits = [as_dict(e) for e in as_list(data.get("fileEdits"))]
            edited = [(as_str(e.get("path")), as_str(e.get("kind"))) for e in edits if as_str(e.get("path"))]
            for path, kind in edited or [(p, None) for p in paths]:
                event: JsonObject = {"type": "file_edit", "path": path, "tool_call_id": call_id}
                if kind:
                    event["kind"] = kind
                self.events.append(event)
        elif _looks_denied(error):
            self.events.append(
                {
                    "type": "denial",
                    "action": tool,
                    "path": paths[0] if paths else None,
                    "reason": clip(as_str(error.get("message")) or "denied", 500),
                    "tool_call_id": call_id,
                }
            )

    def on_usage(self, data: JsonObject) -> None:
        if not data.get("parentToolCallId"):
            self.stamp = as_str(data.get("model")) or self.stamp
        self.usage_stream.add_tokens(_usage_of(data))
        self.out.usage_from_stream = True

    def on_shutdown(self, data: JsonObject) -> None:
        self.requested(data, "currentModel")
        if as_str(data.get("shutdownType")) == "error":
            reason = as_str(data.get("errorReason"))
            self.failed = True
            self.events.append({"type": "error", "message": clip(reason or "session shut down with an error")})
            self.infra_signal = copilot_infra(data, "session.shutdown", reason) or self.infra_signal
        metrics = as_dict(data.get("modelMetrics"))
        if metrics:
            self.usage_shutdown = metrics_usage(metrics)[0]
            self.out.usage_from_stream = True

    def on_error(self, data: JsonObject, kind: str) -> None:
        self.failed = self.failed or kind != "subagent.failed"
        message = as_str(data.get("message")) or as_str(data.get("reason")) or as_str(data.get("error")) or kind
        self.events.append({"type": "error", "message": clip(message), "source": kind})
        if kind == "session.error":
            self.infra_signal = copilot_infra(data, kind, message) or self.infra_signal

    def on_result(self, data: JsonObject) -> None:
        code = as_int(data.get("exitCode"))
        if code not in (None, 0):
            self.failed = True
            if self.infra_signal is None and self.last_failure is not None:
                # the run ended on the provider's refusals: the last failed call's status says why
                status = self.last_failure.get("statusCode")
                self.infra_signal = copilot_infra({"statusCode": status}, "model.call_failure", f"HTTP {status}")

    # -- the end ---------------------------------------------------------------------

    def finish(self, stream: JsonlStream, stdout: bytes, errors: list[str]) -> CopilotOutput:
        out = self.out
        errors = [*errors, *self.errors]
        if not stream.records and stdout and stdout.strip():
            # plain text instead of events: line-level errors would only be noise; say once why
            errors = [
                "stdout holds no JSON records, only text (does this copilot version support "
                "--output-format=json?): no events could be read"
            ]
            self.last_text = stdout.decode("utf-8", "replace").strip() or None
        elif stream.records and not self.typed:
            errors.append("stdout JSON records carry no 'type': not the documented session-event shape")
        # the shutdown totals are authoritative; per-call usage is the fallback (the SDK's shapes)
        out.usage = self.usage_shutdown or self.usage_stream
        ended = "error" if self.failed else "success" if self.terminal else None
        close_report(out, self.last_text, ended)
        if ended is None and stream.records:
            errors.append(
                "stream ended without assistant.idle or result (or the SDK's session.idle / shutdown): "
                "the agent exited or was killed mid-run"
            )
        if self.failed and self.infra_signal is not None:
            out.infra_error = self.infra_signal
            if self.retries:
                out.infra_error["product_retries"] = self.retries
        if out.requested_model:
            out.run_identity["model_id"] = out.requested_model
        out.answered = self.answered if stream.records else None
        out.model_stamp = self.stamp
        out.parse_errors = cap_errors(errors)
        return out


_HANDLERS: dict[str, Callable[[StreamParser, JsonObject], None]] = {
    "session.start": StreamParser.on_session_start,
    "session.model_change": StreamParser.on_model_change,
    "session.tools_updated": StreamParser.requested,
    "model.call_start": StreamParser.requested,
    "model.call_finished": StreamParser.on_call_finished,
    "model.call_failure": StreamParser.on_call_failure,
    "assistant.turn_retry": StreamParser.on_retry,
    "assistant.message": StreamParser.on_message,
    "tool.execution_start": StreamParser.on_tool_start,
    "tool.execution_complete": StreamParser.on_tool_complete,
    "assistant.usage": StreamParser.on_usage,
    "session.shutdown": StreamParser.on_shutdown,
    "session.error": lambda p, d: p.on_error(d, "session.error"),
    "abort": lambda p, d: p.on_error(d, "abort"),
    "subagent.failed": lambda p, d: p.on_error(d, "subagent.failed"),
    "result": StreamParser.on_result,
}


# -- infrastructure errors (agents/infra.py) ----------------------------------------------
# session.error carries {errorType, message, statusCode}; a session.shutdown of type error
# carries errorReason; model.call_failure the HTTP status of a refused call. Only those
# fields are read, and only when the session ended in error.

_ERROR_TYPES = {
    "authentication": "authentication",
    "auth": "authentication",
    "rate_limit": "rate_limited",
    "ratelimit": "rate_limited",
    "quota": "billing",
    "billing": "billing",
    "network": "network",
    "server": "server_error",
    "overloaded": "overloaded",
}

#: the CLI's own words for a provider it could not reach (session.error errorType "query")
_UNREACHABLE = re.compile(r"could not connect|cannot connect|failed to connect", re.I)

#: what the CLI prints, before any event, when its configuration cannot work (it will on every run)
_REFUSALS = re.compile(r"require[sd]? an explicit model|unknown option|invalid value|not a valid|unsupported", re.I)


def copilot_infra(data: JsonObject, where: str, message: str | None) -> InfraError | None:
    from pytest_agentdrift.agents.infra import classify_message, classify_status, infra_error

    cls = classify_status(data.get("statusCode")) or _ERROR_TYPES.get((as_str(data.get("errorType")) or "").lower())
    cls = cls or classify_message(message) or ("network" if _UNREACHABLE.search(message or "") else None)
    if cls is None:
        return None
    return infra_error(
        cls,
        message or where,
        "copilot",
        signal=f"{where}" + (f" errorType={data.get('errorType')}" if data.get("errorType") else ""),
    )


def no_events(exit_code: int | None, stdout: bytes, stderr: bytes) -> InfraError | None:
    """A CLI that printed no JSON event: not signed in, a configuration it refuses, a version
    without the JSON format. None of it is the agent's; what will repeat on every run (all of
    it but a crash by signal) stops the session."""
    from pytest_agentdrift.agents.infra import classify_message, infra_error, stderr_tail

    if exit_code is not None and exit_code < 0:
        return infra_error("crashed", f"killed by signal {-exit_code} before any event", "copilot", exit_code=exit_code)
    lines = stderr_tail(stderr, 40) or stderr_tail(stdout, 40)
    first = next((ln.strip() for ln in lines if ln.strip()), "")
    text = "\n".join(lines)
    cls = classify_message(text)
    if cls is None or (cls not in ("authentication", "billing") and _REFUSALS.search(text)):
        cls = "configuration"
    why = first or (f"exit {exit_code}, no output" if exit_code else "no output")
    return infra_error(cls, f"copilot printed no JSON events (exit {exit_code}): {why}", "copilot", exit_code=exit_code)
