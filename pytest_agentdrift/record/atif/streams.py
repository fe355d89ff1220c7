"""What a product's own stream (raw stdout.txt) adds to the common events: tool results, full tool
arguments, which API message each block belongs to, and the token usage per message and in total."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from pytest_agentdrift.shapes import JsonObject, JsonValue

_CLIP = 2000


def _clip(value: JsonValue) -> JsonValue:
    from pytest_agentdrift.agents.common import clip

    return clip(value, _CLIP)


def _clip_text(text: str) -> str:
    clipped = _clip(text)
    return clipped if isinstance(clipped, str) else text  # a string clips to a string


def _clip_object(value: JsonObject) -> JsonObject:
    clipped = _clip(value)
    return clipped if isinstance(clipped, dict) else value  # an object clips to an object


class ToolResult(TypedDict):
    """What a tool call returned, as the product's stream states it."""

    content: str
    is_error: bool
    extra: NotRequired[JsonObject]


@dataclass
class StreamIndex:
    """Facts from the product's raw stream, keyed by the ids the common events carry."""

    results: dict[str, ToolResult] = field(default_factory=dict)  # call id -> what the call returned
    arguments: dict[str, JsonObject] = field(default_factory=dict)  # call id -> full arguments
    call_step: dict[str, str] = field(default_factory=dict)  # call id -> API message id
    text_step: dict[str, str] = field(default_factory=dict)  # (clipped) message text -> API message id
    metrics: dict[str, JsonObject] = field(default_factory=dict)  # API message id -> ATIF metrics
    models: dict[str, str] = field(default_factory=dict)  # API message id -> model
    totals: JsonObject | None = None  # final usage as the stream states it
    notes: list[str] = field(default_factory=list)


def _text_of(content: JsonValue) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(c.get("text") if isinstance(c, dict) and "text" in c else c) for c in content)
    if isinstance(content, dict):
        for key in ("content", "text", "detailedContent"):
            value = content.get(key)
            if isinstance(value, str):
                return value
    return "" if content is None else json.dumps(content, sort_keys=True, default=str)


def count(value: object) -> int | None:
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


def _claude_record(rec: JsonObject, idx: StreamIndex) -> None:
    kind = rec.get("type")
    msg = rec.get("message")
    if not isinstance(msg, dict):
        msg = {}
    if kind == "assistant":
        _claude_assistant(msg, idx)
    elif kind == "user":
        content = msg.get("content")
        for block in content if isinstance(content, list) else []:
            call = block.get("tool_use_id") if isinstance(block, dict) else None
            if isinstance(block, dict) and block.get("type") == "tool_result" and isinstance(call, str):
                idx.results[call] = {
                    "content": _clip_text(_text_of(block.get("content"))),
                    "is_error": bool(block.get("is_error")),
                }
    elif kind == "result":
        usage = rec.get("usage")
        if not isinstance(usage, dict):
            usage = {}
        totals, write = _claude_tokens(usage, "total_")
        cost = rec.get("total_cost_usd")
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            totals["total_cost_usd"] = float(cost)
        if write:
            totals["extra"] = {"cache_creation_input_tokens": write}
        idx.totals = totals


def _claude_tokens(usage: JsonObject, prefix: str) -> tuple[JsonObject, int | None]:
    """ATIF's token counts from Claude's usage (names prefixed for the run's totals), and the cache writes."""
    fresh, read, write = (
        count(usage.get(k)) for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )
    tokens: JsonObject = {}
    if fresh is not None:
        # ATIF prompt_tokens counts every input token, cache hits and cache writes included
        tokens[f"{prefix}prompt_tokens"] = fresh + (read or 0) + (write or 0)
    if count(usage.get("output_tokens")) is not None:
        tokens[f"{prefix}completion_tokens"] = usage["output_tokens"]
    if read is not None:
        tokens[f"{prefix}cached_tokens"] = read
    return tokens, write


def _claude_assistant(msg: JsonObject, idx: StreamIndex) -> None:
    """One assistant message: its model, token counts, and which step its text and tool calls belong to."""
    mid = msg.get("id")
    if not isinstance(mid, str) or not mid:
        return
    model = msg.get("model")
    if isinstance(model, str) and model and not model.startswith("<"):
        idx.models[mid] = model
    usage = msg.get("usage")
    if isinstance(usage, dict) and usage:
        metrics, write = _claude_tokens(usage, "")
        if write:
            metrics["extra"] = {"cache_creation_input_tokens": write}
        idx.metrics[mid] = metrics
    content = msg.get("content")
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        text, call, arguments = block.get("text"), block.get("id"), block.get("input")
        if block.get("type") == "text" and isinstance(text, str):
            idx.text_step[_clip_text(text)] = mid
        elif block.get("type") == "tool_use" and isinstance(call, str):
            idx.call_step[call] = mid
            if isinstance(arguments, dict):
                idx.arguments[call] = _clip_object(arguments)


def _codex_record(rec: JsonObject, idx: StreamIndex) -> None:
    item = rec.get("item")
    if rec.get("type") != "item.completed" or not isinstance(item, dict):
        return
    iid = item.get("id")
    given = item.get("status")
    status = given if isinstance(given, str) else None
    if not isinstance(iid, str) or not iid:
        return
    itype = item.get("type")
    if itype == "command_execution":
        idx.arguments[iid] = {"command": _clip_text(str(item.get("command") or ""))}
        exit_code = count(item.get("exit_code"))
        idx.results[iid] = {
            "content": _clip_text(str(item.get("aggregated_output") or "")),
            "is_error": status != "completed" or (exit_code not in (0, None)),
            "extra": {"exit_code": exit_code, "status": status},
        }
    elif itype == "file_change":
        _codex_file_change(iid, item, status, idx)
    elif itype == "mcp_tool_call":
        idx.arguments[iid] = _clip_object({k: item[k] for k in ("server", "tool", "arguments") if k in item})
        outcome = item.get("result") if "result" in item else item.get("error")
        idx.results[iid] = {
            "content": _clip_text(_text_of(outcome)) if outcome is not None else f"status {status}",
            "is_error": status not in ("completed", None),
            "extra": {"status": status},
        }
    elif itype == "web_search":
        idx.arguments[iid] = {"query": _clip_text(str(item.get("query") or ""))}


def _codex_file_change(iid: str, item: JsonObject, status: str | None, idx: StreamIndex) -> None:
    listed = item.get("changes")
    changes: list[JsonValue] = [c for c in (listed if isinstance(listed, list) else []) if isinstance(c, dict)]
    idx.arguments[iid] = {"changes": _clip(changes)}
    idx.results[iid] = {
        "content": f"{status or 'unknown'}: "
        + ", ".join(f"{c.get('kind', '?')} {c.get('path', '?')}" for c in changes if isinstance(c, dict)),
        "is_error": status != "completed",
        "extra": {"status": status},
    }


def _copilot_record(rec: JsonObject, idx: StreamIndex) -> None:
    kind = rec.get("type")
    data = rec.get("data")
    if not isinstance(data, dict):
        data = rec
    if kind == "assistant.message":
        _copilot_message(data, idx)
    elif kind == "tool.execution_start":
        cid = data.get("toolCallId")
        arguments = data.get("arguments")
        if isinstance(cid, str) and isinstance(arguments, dict):
            idx.arguments[cid] = _clip_object(arguments)
    elif kind == "tool.execution_complete":
        _copilot_tool_result(data, idx)


def _copilot_message(data: JsonObject, idx: StreamIndex) -> None:
    """Which API message a text and the tool requests it made belong to."""
    mid = data.get("messageId")
    if not isinstance(mid, str) or not mid:
        return
    content, requests = data.get("content"), data.get("toolRequests")
    if isinstance(content, str) and content:
        idx.text_step[_clip_text(content)] = mid
    for req in requests if isinstance(requests, list) else []:
        call = req.get("toolCallId") if isinstance(req, dict) else None
        if isinstance(call, str):
            idx.call_step[call] = mid


def _copilot_tool_result(data: JsonObject, idx: StreamIndex) -> None:
    cid = data.get("toolCallId")
    if not isinstance(cid, str):
        return
    ok = data.get("success") is True
    error = data.get("error")
    if not isinstance(error, dict):
        error = {}
    content = _text_of(data.get("result")) if ok else str(error.get("message") or "failed")
    idx.results[cid] = {
        "content": _clip_text(content),
        "is_error": not ok,
        "extra": {"error_code": error["code"]} if error.get("code") else {},
    }
