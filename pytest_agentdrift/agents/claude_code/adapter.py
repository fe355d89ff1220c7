"""Claude Code (Anthropic) in print mode with stream-json output.

Invocation (Claude Code CLI docs, "Run Claude Code programmatically" and the
CLI reference): `claude -p PROMPT --output-format stream-json --verbose`,
with `--model`, `--permission-mode` and `--allowedTools`. `--verbose` is
required: print mode refuses stream-json without it.

Output: one JSON object per line. Documented message types:
  - `system` / subtype `init`: session metadata (`model`, `tools`,
    `mcp_servers`, `permissionMode`, `cwd`, `session_id`, ...);
  - `assistant`: an API message (`message.model`, `message.content[]` of
    `text` and `tool_use` blocks {id, name, input}, `message.usage`);
  - `user`: tool results (`message.content[]` of `tool_result` blocks
    {tool_use_id, content, is_error});
  - `result`: the last line (`subtype` success / error_*, `is_error`,
    `result` = final text, `usage`, `total_cost_usd`, `num_turns`,
    `permission_denials[]` = {tool_name, tool_use_id, tool_input}).

What print mode does not show: there is no interactive approval, so a tool
that needs permission is refused and listed in `permission_denials`; we emit
`denial` events from those, and never `approval_request` (unobserved). The
exit code of a Bash command is not a structured field (the result is text),
so `command.exit_code` is None; `ok` says whether the tool reported an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from pytest_agentdrift.agents.base import AdapterOutput, LiveNote, ProductAdapter, RunContext, Usage, add_counts
from pytest_agentdrift.agents.common import (
    as_dict,
    as_float,
    as_int,
    as_list,
    as_str,
    clip,
    close_report,
    option_list,
    parse_stream,
)
from pytest_agentdrift.shapes import JsonObject, JsonValue

if TYPE_CHECKING:
    from pytest_agentdrift.agents.infra import InfraError, InfraSignal

#: tools whose `input.file_path` (or `notebook_path`) names a file they change
_EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
#: tools whose input names a file they read
_READ_TOOLS = frozenset({"Read"})
#: tools that run a shell command (`input.command`)
_SHELL_TOOLS = frozenset({"Bash"})


#: how the Bash tool's result states a non-zero exit (2.1.332: "Exit code 1\n<output>")
_EXIT_LINE = re.compile(r"\AExit code (\d+)\b")


def _bash_exit_code(block: JsonObject, is_error: bool) -> int | None:
    """The exit code of a Bash call from its tool_result: a result that is not an error is a
    command that exited 0; an error result states its code on its first line (else unknown:
    a refused or interrupted command has none)."""
    if not is_error:
        return 0
    content = block.get("content")
    if isinstance(content, list):
        content = " ".join(as_str(as_dict(c).get("text")) or "" for c in content)
    m = _EXIT_LINE.match(as_str(content) or "")
    return int(m.group(1)) if m else None


def _path_of(tool_input: JsonObject) -> str | None:
    return (
        as_str(tool_input.get("file_path")) or as_str(tool_input.get("notebook_path")) or as_str(tool_input.get("path"))
    )


class ClaudeCodeAdapter(ProductAdapter):
    name = "claude-code"
    product = "anthropic/claude-code"
    surface = "cli"
    binary: ClassVar[str] = "claude"

    # Credentials only: API key, bearer token for a gateway, or the long-lived
    # token `claude setup-token` prints. CLAUDE_CONFIG_DIR is deliberately not
    # forwarded: it would point the agent back at the user's real config dir.
    env_allowlist = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
    # Model API and sign-in (network-config docs). Telemetry and error
    # reporting hosts are left out on purpose: they are refused and recorded.
    api_hosts = ("api.anthropic.com", "claude.ai", "platform.claude.com", "console.anthropic.com")
    # User scope: settings, user memory, ~/.claude.json (preferences, user and
    # local-scope MCP servers, account info) and the Linux credentials file.
    home_files = (
        ".claude/settings.json",
        ".claude/CLAUDE.md",
        ".claude.json",
        ".claude/.credentials.json",
    )
    # ~/.claude.json can hold account details and MCP server env (tokens), so
    # it is treated as a credential file: copied, labelled, never hashed.
    credential_files = (".claude/.credentials.json", ".claude.json")
    #: user-scope directories the product reads (agents, commands, skills)
    home_dirs: ClassVar[tuple[str, ...]] = (".claude/agents", ".claude/commands", ".claude/skills")
    #: env var that relocates the user config dir -> the dir it replaces
    config_home_env: ClassVar[dict[str, str]] = {"CLAUDE_CONFIG_DIR": ".claude"}
    #: option defaults applied when the user gives none (recorded via describe())
    # acceptEdits lets print mode edit files; shell commands still need a rule, and
    # bypassPermissions is refused as root (as CI runs): Bash is allowed by name instead.
    defaults: ClassVar[dict[str, object]] = {"permission_mode": "acceptEdits", "allowed_tools": ("Bash",)}
    # ANTHROPIC_BASE_URL points the CLI at a gateway or a local model server
    endpoint_env = ("ANTHROPIC_BASE_URL",)
    default_endpoint = "https://api.anthropic.com"
    # the init record names the model the CLI asks for, its tools and whether its own sandbox is on
    run_reported = ("model_id", "built_in_tools", "sandbox")
    # one retry policy, the harness's (--agent-retries): the CLI's own retries (10 by default,
    # with backoff) would turn a 429 or a 401 into minutes of waiting inside one run
    fixed_env: ClassVar[dict[str, str]] = {"CLAUDE_CODE_MAX_RETRIES": "0"}

    option_keys = ("model", "permission_mode", "allowed_tools")
    output_format = "stream-json"

    def build_argv(self, ctx: RunContext) -> list[str]:
        opts = self.effective_options(ctx.options)
        # The prompt goes right after -p, as documented: --allowedTools takes a
        # variadic list and would swallow a prompt placed after it.
        argv = [self.binary, "-p", ctx.task_text, "--output-format", "stream-json", "--verbose"]
        if opts.get("model"):
            argv += ["--model", str(opts["model"])]
        if opts.get("permission_mode"):
            argv += ["--permission-mode", str(opts["permission_mode"])]
        tools = option_list(opts.get("allowed_tools"))
        if tools:
            # One comma-separated element (a documented form), so the variadic
            # option cannot take anything after it by accident.
            argv += ["--allowedTools", ",".join(tools)]
        return argv

    # -- parsing ---------------------------------------------------------

    def parse_output(self, stdout: bytes, stderr: bytes) -> AdapterOutput:
        return parse_stream(
            stdout, _StreamParse, "no stream-json records on stdout (was --output-format stream-json honoured?)"
        )

    @staticmethod
    def _usage(usage: JsonObject, cost: float | None) -> Usage:
        # Anthropic reports fresh input, cache reads and cache writes apart;
        # input_tokens is kept verbatim (it excludes cached reads).
        return Usage(
            input_tokens=as_int(usage.get("input_tokens")),
            output_tokens=as_int(usage.get("output_tokens")),
            cached_tokens=as_int(usage.get("cache_read_input_tokens")),
            cost_usd=cost,
            cache_write_tokens=as_int(usage.get("cache_creation_input_tokens")),
        )

    def live_record(self, record: JsonObject) -> LiveNote | None:
        """Progress and running usage from one stream-json record (per-run budgets)."""
        kind = record.get("type")
        if kind == "assistant":
            msg = as_dict(record.get("message"))
            note: LiveNote = {}
            for block in as_list(msg.get("content")):
                block = as_dict(block)
                if block.get("type") == "tool_use":
                    tool_input = as_dict(block.get("input"))
                    detail = as_str(tool_input.get("command")) or _path_of(tool_input) or ""
                    note["event"] = f"{as_str(block.get('name')) or 'tool'}: {detail}".rstrip(": ")
                elif block.get("type") == "text" and "event" not in note:
                    note["event"] = "message"
            usage = as_dict(msg.get("usage"))
            msg_id = as_str(msg.get("id"))
            if usage and msg_id:
                u = self._usage(usage, None)
                note["usage_key"] = msg_id
                note["input_tokens"] = u.input_tokens
                note["output_tokens"] = u.output_tokens
            return note or None
        if kind == "result":
            u = _result_usage(record, None)
            # the result's totals (every call, side calls too, as the cost) replace the per-message figures
            return {
                "event": "result",
                "total": True,
                "input_tokens": u.input_tokens,
                "output_tokens": u.output_tokens,
                "cost_usd": u.cost_usd,
            }
        if kind == "system" and record.get("subtype") == "init":
            return {"event": "started"}
        return None


@dataclass
class _StreamParse:
    """One stream-json transcript being read: the events so far and what the end needs."""

    errors: list[str]
    out: AdapterOutput = field(default_factory=AdapterOutput)
    pending: dict[str, list[JsonObject]] = field(default_factory=dict)  # tool_use_id -> events awaiting a result
    edits: dict[str, str] = field(default_factory=dict)  # tool_use_id -> path of an edit tool call
    main_model: str | None = None
    last_text: str | None = None
    result: JsonObject | None = None
    usage_by_message: dict[str, JsonObject] = field(default_factory=dict)
    infra_signal: InfraSignal | None = None  # the last error the CLI itself reported
    retries: list[JsonObject] = field(default_factory=list)  # the CLI's own api_retry records
    answered: bool = False

    def assistant(self, rec: JsonObject) -> None:
        msg = as_dict(rec.get("message"))
        model = as_str(msg.get("model"))
        # "<synthetic>" marks a message the CLI made up itself (no API call, e.g. not
        # signed in): it is not a model the host reported
        real_model = model is not None and not model.startswith("<")
        if real_model:
            self.answered = True
        signal = _assistant_infra(rec, msg, model)
        if signal is not None:
            self.infra_signal = signal
        if real_model and rec.get("parent_tool_use_id") is None and self.main_model is None:
            self.main_model = model
        msg_id = as_str(msg.get("id"))
        usage = msg.get("usage")
        if msg_id and isinstance(usage, dict):
            # stream-json repeats the same message (and its usage) once
            # per content block; keep one usage per message id.
            self.usage_by_message[msg_id] = usage
        for block in as_list(msg.get("content")):
            block = as_dict(block)
            btype = block.get("type")
            if btype == "text":
                text = as_str(block.get("text"))
                if text:
                    self.last_text = text
                    self.out.events.append({"type": "message", "text": clip(text)})
            elif btype == "tool_use":
                self._tool_use(block)

    def _tool_use(self, block: JsonObject) -> None:
        events = self.out.events
        name = as_str(block.get("name")) or "unknown"
        tool_id = as_str(block.get("id"))
        tool_input = as_dict(block.get("input"))
        call: JsonObject = {"type": "tool_call", "name": name, "tool_use_id": tool_id, "input": clip(tool_input, 500)}
        events.append(call)
        waiting = [call]
        if name in _SHELL_TOOLS:
            command: JsonObject = {
                "type": "command",
                "command": clip(as_str(tool_input.get("command")) or ""),
                "exit_code": None,
                "tool_use_id": tool_id,
            }
            events.append(command)
            waiting.append(command)
        elif name in _READ_TOOLS and _path_of(tool_input):
            events.append({"type": "file_read", "path": _path_of(tool_input), "tool_use_id": tool_id})
        elif name in _EDIT_TOOLS and _path_of(tool_input) and tool_id:
            # The edit is only evidence once the tool result says it worked;
            # a refused Write must not show up as a file_edit.
            self.edits[tool_id] = _path_of(tool_input) or ""
        if tool_id:
            self.pending[tool_id] = waiting

    def tool_results(self, msg: JsonObject) -> None:
        """A `user` record: tool results settle the calls waiting for them."""
        for block in as_list(msg.get("content")):
            block = as_dict(block)
            if block.get("type") != "tool_result":
                continue
            tool_id = as_str(block.get("tool_use_id"))
            is_error = bool(block.get("is_error"))
            for waiting in self.pending.pop(tool_id, []) if tool_id else []:
                waiting["ok"] = not is_error
                if waiting["type"] == "command":
                    waiting["exit_code"] = _bash_exit_code(block, is_error)
            if tool_id in self.edits and not is_error:
                self.out.events.append({"type": "file_edit", "path": self.edits.pop(tool_id), "tool_use_id": tool_id})
            elif tool_id in self.edits:
                self.edits.pop(tool_id)

    def finish(self, result: JsonObject) -> None:
        """The result record: denials, the closing error, the final report and the usage."""
        events = self.out.events
        events.extend(_denials(result))
        is_error = bool(result.get("is_error")) or str(result.get("subtype", "")).startswith("error")
        final_text = as_str(result.get("result")) or self.last_text
        if is_error:
            self.out.infra_error = _result_infra(result, self.infra_signal)
            # Only the result's own text explains the error; an earlier
            # assistant message would be misleading here.
            reason = as_str(result.get("result"))
            detail = f": {clip(reason, 500)}" if reason else ""
            events.append(
                {"type": "error", "message": f"claude-code result {result.get('subtype') or 'error'}{detail}"}
            )
        close_report(
            self.out,
            final_text,
            "error" if is_error else "success",
            subtype=as_str(result.get("subtype")),
            num_turns=as_int(result.get("num_turns")),
        )
        self.out.usage = _result_usage(result, self.main_model)

    def record(self, kind: JsonValue, rec: JsonObject) -> None:
        """One typed record of the stream."""
        if kind == "assistant":
            self.assistant(rec)
        elif kind == "user":
            self.tool_results(as_dict(rec.get("message")))
        elif kind == "system":
            _system_record(rec, self.out, self.retries)
        elif kind == "result":
            self.result = rec
        # other types (stream_event, compact boundaries, ...) carry nothing we map

    def end(self) -> None:
        """The stream is over: finish from its result record, or say it never came."""
        if self.result is not None:
            self.finish(self.result)
        else:
            self.finish_without_result()

    def finish_without_result(self) -> None:
        """A stream cut short: the last text, and the per-message usage seen so far (no cost; the
        total is only in the result message)."""
        self.errors.append("stream ended without a 'result' message: the agent exited or was killed mid-stream")
        close_report(self.out, self.last_text, None)
        usage = Usage()
        for part in self.usage_by_message.values():
            usage.add_tokens(ClaudeCodeAdapter._usage(as_dict(part), None))
        self.out.usage = usage
        if self.infra_signal is None and self.retries:
            # the CLI was still retrying a provider error when its stream stopped
            self.infra_signal = _retry_signal(self.retries[-1])
        if self.infra_signal is not None:
            # the CLI reported a provider error and then stopped (or was stopped) before its result
            self.out.infra_error = _infra_from_signal(self.infra_signal)

    def close(self) -> AdapterOutput:
        out = self.out
        if out.infra_error is not None and self.retries:
            out.infra_error["product_retries"] = len(self.retries)
        out.answered = self.answered
        # only what the API answered with is a stamp; the init record names the
        # model the client asked for, which the host may route elsewhere
        out.model_stamp = self.main_model
        return out


def _denials(result: JsonObject) -> list[JsonObject]:
    """One `denial` event per tool call print mode refused (listed once per tool_use_id)."""
    events: list[JsonObject] = []
    denied_ids: set[str] = set()
    for denial in as_list(result.get("permission_denials")):
        denial = as_dict(denial)
        tool_input = as_dict(denial.get("tool_input"))
        tool_id = as_str(denial.get("tool_use_id"))
        if tool_id and tool_id in denied_ids:
            continue
        if tool_id:
            denied_ids.add(tool_id)
        events.append(
            {
                "type": "denial",
                "action": as_str(denial.get("tool_name")) or "unknown",
                "path": _path_of(tool_input) or as_str(tool_input.get("command")),
                "reason": "permission_denied",
                "tool_use_id": tool_id,
            }
        )
    return events


#: modelUsage's names for the token figures (per model the CLI priced)
_MODEL_USAGE_KEYS = {
    "input_tokens": "inputTokens",
    "output_tokens": "outputTokens",
    "cached_tokens": "cacheReadInputTokens",
    "cache_write_tokens": "cacheCreationInputTokens",
}


def _result_usage(result: JsonObject, answering: str | None) -> Usage:
    """Tokens and cost of the same calls. The result's `usage` is the main conversation only;
    `modelUsage` (per model the CLI priced) covers every call, side calls included, and is what
    `total_cost_usd` adds up: the totals come from it, with the main thread and the side calls
    shown apart. The cost is `estimated` when the CLI priced the main thread as a model other
    than the one that answered."""
    main = ClaudeCodeAdapter._usage(as_dict(result.get("usage")), as_float(result.get("total_cost_usd")))
    per_model = {k: as_dict(v) for k, v in as_dict(result.get("modelUsage")).items()}
    if not per_model:
        return main
    total = Usage(cost_usd=main.cost_usd, reasoning_tokens=main.reasoning_tokens)
    for name, key in _MODEL_USAGE_KEYS.items():
        value: int | None = None
        for figures in per_model.values():
            value = add_counts(value, as_int(figures.get(key)))
        setattr(total, name, value)
    total.main_thread = main.tokens()
    main_figures = main.tokens()
    total.side_calls = {
        name: None if value is None or (in_main := main_figures[name]) is None else max(value - in_main, 0)
        for name, value in total.tokens().items()
    }
    total.priced_as = sorted(per_model)
    if total.cost_usd is not None:
        total.cost_basis = "estimated" if answering and answering not in per_model else "reported"
    return total


# -- infrastructure errors (agents/infra.py) --------------------------------------
#
# Claude Code marks a message it made up itself, without an API answer, with
# the model "<synthetic>" and, for API failures, a top-level `error` field on
# the assistant record (the Agent SDK's SDKAssistantMessageError:
# authentication_failed, billing_error, rate_limit, invalid_request,
# server_error, unknown, max_output_tokens). The result record carries
# `api_error_status` (the HTTP status, or null) and `is_error`. Measured with
# 2.1.197 not signed in: a "<synthetic>" message "Not logged in · Please run
# /login" with "error": "authentication_failed", then an is_error result.
# Only these fields are read: the model's own text is never classified.

_ERROR_FIELD_CLASSES = {
    "authentication_failed": "authentication",
    "billing_error": "billing",
    "rate_limit": "rate_limited",
    "server_error": "server_error",
}


def _text_of(msg: JsonObject) -> str:
    return " ".join(as_str(as_dict(b).get("text")) or "" for b in as_list(msg.get("content"))).strip()


def _assistant_infra(rec: JsonObject, msg: JsonObject, model: str | None) -> InfraSignal | None:
    """An infrastructure signal on one assistant record, or None."""
    from pytest_agentdrift.agents.infra import classify_message

    field = as_str(rec.get("error"))
    synthetic = model is not None and model.startswith("<")
    if field is None and not synthetic:
        return None
    text = _text_of(msg)
    if field in _ERROR_FIELD_CLASSES:
        # 2.1.332 files a certificate it does not trust under server_error; its words say which
        cls = classify_message(text) if field == "server_error" else None
        cls = cls if cls in ("overloaded", "server_error", "configuration") else _ERROR_FIELD_CLASSES[field]
    elif field == "invalid_request":
        # a bad request is usually the run's own doing (a prompt too long); only a model
        # the account cannot use is configuration
        cls = "configuration" if classify_message(text) == "configuration" else None
    elif field == "max_output_tokens":
        cls = None
    else:  # "unknown", a field value we do not know yet, or a synthetic message without one
        cls = classify_message(text)
    if cls is None:
        return None
    return {
        "class": cls,
        "evidence": text or f"assistant error {field}",
        "signal": f"assistant.error={field}" if field else "<synthetic> message",
    }


#: api_retry `error` categories (2.1.332's schema) -> infrastructure class
_RETRY_ERROR_CLASSES = {
    "authentication_failed": "authentication",
    "oauth_org_not_allowed": "authentication",
    "account_on_hold": "authentication",
    "verification_required": "authentication",
    "cloud_credential_error": "authentication",
    "billing_error": "billing",
    "rate_limit": "rate_limited",
    "overloaded": "overloaded",
    "model_not_found": "configuration",
    "server_error": "server_error",
}


def _system_record(rec: JsonObject, out: AdapterOutput, retries: list[JsonObject]) -> None:
    """`system` records: `init` says what the CLI asked for (model, tools, its own sandbox);
    `api_retry` is the CLI retrying a failed API request itself (one record per retry)."""
    subtype = rec.get("subtype")
    if subtype == "init":
        model = as_str(rec.get("model"))
        if model:
            out.run_identity["model_id"] = model
        tools = rec.get("tools")
        if isinstance(tools, list):
            names = [t for t in tools if isinstance(t, str)]
            if len(names) == len(tools):
                out.run_identity["built_in_tools"] = [*sorted(names)]
        sandbox_enabled = rec.get("sandbox_enabled")
        if isinstance(sandbox_enabled, bool):
            out.run_identity["sandbox"] = {"sandbox_enabled": sandbox_enabled}
    elif subtype == "api_retry":
        retries.append(rec)
        out.events.append(
            {
                "type": "api_retry",
                "attempt": as_int(rec.get("attempt")),
                "max_retries": as_int(rec.get("max_retries")),
                "error_status": as_int(rec.get("error_status")),
                "error": as_str(rec.get("error")),
                "retry_delay_ms": as_int(rec.get("retry_delay_ms")),
            }
        )


def _retry_signal(rec: JsonObject) -> InfraSignal | None:
    """The infrastructure signal of the CLI's last api_retry record (None: a category we do not know)."""
    from pytest_agentdrift.agents.infra import classify_status

    status = as_int(rec.get("error_status"))
    cls = classify_status(status) or _RETRY_ERROR_CLASSES.get(as_str(rec.get("error")) or "")
    if cls is None and status is None:
        cls = "network"  # no HTTP response at all: a connection error or a timeout
    if cls is None:
        return None
    return {
        "class": cls,
        "evidence": f"api_retry attempt {rec.get('attempt')}: status {status}, error {rec.get('error')}",
        "signal": "system.api_retry",
    }


def _infra_from_signal(signal: InfraSignal) -> InfraError:
    from pytest_agentdrift.agents.infra import infra_error

    return infra_error(signal["class"], signal["evidence"], "claude-code", signal=signal["signal"])


def _result_infra(result: JsonObject, signal: InfraSignal | None) -> InfraError | None:
    """The infrastructure error an is_error result ends on, or None (an ordinary failed run)."""
    from pytest_agentdrift.agents.infra import classify_status, infra_error

    status = result.get("api_error_status")
    cls = classify_status(status)
    if cls is not None:
        evidence = (
            (signal["evidence"] if signal else None) or as_str(result.get("result")) or f"API error status {status}"
        )
        return infra_error(cls, evidence, "claude-code", signal=f"result.api_error_status={status}")
    if signal is not None:
        return _infra_from_signal(signal)
    return None
