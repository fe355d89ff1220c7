"""GitHub Copilot CLI in programmatic mode (`copilot -p PROMPT`).

Invocation (GitHub docs, "GitHub Copilot CLI programmatic reference" and
"CLI command reference"): `-p PROMPT` runs one prompt and exits;
`--output-format=json` "outputs JSONL: one JSON object per line";
`--model=MODEL`; permissions through `--allow-all-tools` (documented as
required for programmatic use), `--allow-all`, `--allow-tool=...` and
`--deny-tool=...` (deny wins over allow); `--no-ask-user` stops the agent
waiting for answers; `--no-auto-update` keeps the binary from changing under
an experiment; `-v/--version` shows the version (`copilot version` would
also check for updates over the network, so it is not used).

The CLI docs do not describe the JSONL records. The nearest published schema
is the Copilot SDK's session events (github/copilot-sdk,
session-events.schema.json): {id, timestamp, parentId, type, data} with types
such as session.start {selectedModel}, session.model_change {newModel},
assistant.message {content, toolRequests}, tool.execution_start {toolCallId,
toolName, arguments}, tool.execution_complete {toolCallId, success, result,
error}, assistant.usage {model, inputTokens, outputTokens, cacheReadTokens},
session.error {message}, session.shutdown {modelMetrics, currentModel}. This
parser reads those shapes defensively (payload under `data` or inline,
unknown types ignored) and says in parse_errors when the stream does not
look like that at all.

Not observable: cost in USD (Copilot counts premium requests, not dollars),
approval requests (none in -p mode), and whether a failed tool call was a
permission refusal (only guessed from the error text; see `_looks_denied`).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pytest_agentdrift.agents.base import AdapterOutput, ProductAdapter, RunContext, Usage
from pytest_agentdrift.agents.common import (
    add_counts,
    as_dict,
    as_int,
    as_str,
    cap_errors,
    clip,
    extract_report,
    final_event,
    option_list,
    read_jsonl,
)

_SHELL_TOOLS = frozenset({"bash", "powershell"})
_READ_TOOLS = frozenset({"view"})
_EDIT_TOOLS = frozenset({"edit", "create"})
_PATCH_TOOLS = frozenset({"apply_patch"})
#: record types after which the run counts as finished, not cut off
_TERMINAL_TYPES = frozenset({"session.shutdown", "session.idle", "assistant.turn_end", "result"})
_PATCH_PATH = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
_DENIED = re.compile(r"\b(denied|not permitted|not allowed|permission|rejected by the user)\b", re.IGNORECASE)

#: permission presets -> documented flags
_PERMISSION_FLAGS: dict[str, list[str]] = {
    "allow-all-tools": ["--allow-all-tools"],
    "allow-all": ["--allow-all"],
    "default": [],
}


def _payload(rec: dict[str, Any]) -> dict[str, Any]:
    # SDK events carry their fields under `data`; accept them inline too.
    data = rec.get("data")
    return data if isinstance(data, dict) else rec


def _looks_denied(error: dict[str, Any]) -> bool:
    code = as_str(error.get("code")) or ""
    return code.lower() in {"denied", "permission_denied", "rejected"} or bool(
        _DENIED.search(as_str(error.get("message")) or "")
    )


class CopilotAdapter(ProductAdapter):
    name = "copilot"
    product = "github/copilot-cli"
    surface = "cli"
    binary: ClassVar[str] = "copilot"

    # The documented token variables, in precedence order. COPILOT_HOME is not
    # forwarded (it would point back at the real config dir); COPILOT_MODEL and
    # COPILOT_ALLOW_ALL are not either: the run's options decide those.
    env_allowlist = ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN")
    # Copilot allowlist reference: sign-in and user management on github.com /
    # api.github.com, the model service on *.githubcopilot.com and
    # copilot-proxy.githubusercontent.com. Telemetry and experimentation hosts
    # (collector.github.com, copilot-telemetry..., default.exp-tas.com) are not
    # allowed: they are refused and recorded.
    api_hosts = (
        "github.com",
        "api.github.com",
        "api.githubcopilot.com",
        "*.githubcopilot.com",
        "copilot-proxy.githubusercontent.com",
    )
    home_files = (
        ".copilot/settings.json",
        ".copilot/config.json",
        ".copilot/copilot-instructions.md",
        ".copilot/mcp-config.json",
        ".copilot/lsp-config.json",
        ".copilot/permissions-config.json",
    )
    # Where no system keychain exists the CLI can store the token in plain
    # text in its config file (settings.json; config.json before the rename),
    # so both are credential files: copied, labelled, never hashed.
    credential_files = (".copilot/settings.json", ".copilot/config.json")
    home_dirs: ClassVar[tuple[str, ...]] = (
        ".copilot/instructions",
        ".copilot/agents",
        ".copilot/skills",
        ".copilot/hooks",
    )
    config_home_env: ClassVar[dict[str, str]] = {"COPILOT_HOME": ".copilot"}
    defaults: ClassVar[dict[str, Any]] = {"permission_mode": "allow-all-tools"}

    option_keys = ("model", "permission_mode", "allowed_tools", "denied_tools")
    output_format = "json (JSONL)"

    def build_argv(self, ctx: RunContext) -> list[str]:
        opts = self.effective_options(ctx.options)
        mode = str(opts.get("permission_mode") or "default")
        if mode not in _PERMISSION_FLAGS:
            from pytest_agentdrift.errors import AgentDriftError

            raise AgentDriftError(
                f"copilot: unknown permission_mode {mode!r}; known: {', '.join(sorted(_PERMISSION_FLAGS))}"
            )
        argv = [self.binary, "-p", ctx.task_text, "--output-format=json", "--no-ask-user", "--no-auto-update"]
        argv += _PERMISSION_FLAGS[mode]
        allowed = option_list(opts.get("allowed_tools"))
        if allowed:
            argv.append("--allow-tool=" + ",".join(allowed))
        denied = option_list(opts.get("denied_tools"))
        if denied:
            argv.append("--deny-tool=" + ",".join(denied))
        if opts.get("model"):
            argv.append(f"--model={opts['model']}")
        return argv

    # -- parsing ---------------------------------------------------------

    def parse_output(self, stdout: bytes, stderr: bytes) -> AdapterOutput:
        stream = read_jsonl(stdout)
        out = AdapterOutput()
        errors = list(stream.errors)
        events = out.events
        pending: dict[str, tuple[dict[str, Any], str, list[str]]] = {}  # call id -> (tool_call, tool, paths)
        commands: dict[str, dict[str, Any]] = {}
        models = {"usage": None, "shutdown": None, "change": None, "start": None}
        usage_stream = Usage()
        usage_shutdown: Usage | None = None
        last_text: str | None = None
        terminal = False
        failed = False
        typed = 0
        infra_signal: dict[str, Any] | None = None  # the last error the CLI itself reported
        answered = False

        for lineno, rec in stream.records:
            kind = as_str(rec.get("type"))
            if kind is None:
                errors.append(f"stdout line {lineno}: object without a 'type'")
                continue
            typed += 1
            data = _payload(rec)
            if kind in _TERMINAL_TYPES:
                terminal = True
            if kind == "session.start":
                models["start"] = as_str(data.get("selectedModel")) or models["start"]
            elif kind == "session.model_change":
                models["change"] = as_str(data.get("newModel")) or models["change"]
            elif kind == "assistant.message":
                text = as_str(data.get("content"))
                answered = answered or bool(text) or bool(data.get("toolRequests"))
                if text:
                    events.append({"type": "message", "text": clip(text)})
                    if not data.get("parentToolCallId"):
                        last_text = text
            elif kind == "tool.execution_start":
                answered = True
                self._tool_start(data, events, pending, commands)
            elif kind == "tool.execution_complete":
                call_id = as_str(data.get("toolCallId")) or ""
                success = data.get("success") is True
                started = pending.pop(call_id, None)
                if started is None:
                    continue
                call, tool, paths = started
                call["ok"] = success
                if call_id in commands:
                    commands.pop(call_id)["ok"] = success
                error = as_dict(data.get("error"))
                if success:
                    for path in paths:
                        events.append({"type": "file_edit", "path": path, "tool_call_id": call_id})
                elif _looks_denied(error):
                    events.append(
                        {
                            "type": "denial",
                            "action": tool,
                            "path": paths[0] if paths else None,
                            "reason": clip(as_str(error.get("message")) or "denied", 500),
                            "tool_call_id": call_id,
                        }
                    )
            elif kind == "assistant.usage":
                if not data.get("parentToolCallId"):
                    models["usage"] = as_str(data.get("model")) or models["usage"]
                usage_stream.input_tokens = add_counts(usage_stream.input_tokens, as_int(data.get("inputTokens")))
                usage_stream.output_tokens = add_counts(usage_stream.output_tokens, as_int(data.get("outputTokens")))
                usage_stream.cached_tokens = add_counts(usage_stream.cached_tokens, as_int(data.get("cacheReadTokens")))
            elif kind == "session.shutdown":
                models["shutdown"] = as_str(data.get("currentModel")) or models["shutdown"]
                if as_str(data.get("shutdownType")) == "error":
                    failed = True
                    events.append(
                        {
                            "type": "error",
                            "message": clip(as_str(data.get("errorReason")) or "session shut down with an error"),
                        }
                    )
                    infra_signal = (
                        _copilot_infra(data, "session.shutdown", as_str(data.get("errorReason"))) or infra_signal
                    )
                metrics = as_dict(data.get("modelMetrics"))
                if metrics:
                    usage_shutdown = Usage()
                    for metric in metrics.values():
                        u = as_dict(as_dict(metric).get("usage"))
                        usage_shutdown.input_tokens = add_counts(
                            usage_shutdown.input_tokens, as_int(u.get("inputTokens"))
                        )
                        usage_shutdown.output_tokens = add_counts(
                            usage_shutdown.output_tokens, as_int(u.get("outputTokens"))
                        )
                        usage_shutdown.cached_tokens = add_counts(
                            usage_shutdown.cached_tokens, as_int(u.get("cacheReadTokens"))
                        )
            elif kind in ("session.error", "abort", "subagent.failed"):
                failed = failed or kind != "subagent.failed"
                message = as_str(data.get("message")) or as_str(data.get("reason")) or as_str(data.get("error")) or kind
                events.append({"type": "error", "message": clip(message), "source": kind})
                if kind == "session.error":
                    infra_signal = _copilot_infra(data, kind, message) or infra_signal
            # other types (deltas, reasoning, hooks, info) carry nothing we map

        plain_text = not stream.records and bool(stdout and stdout.strip())
        if plain_text:
            # A CLI without --output-format json prints plain text: line-level
            # errors would only be noise. Keep what can be read (a report block
            # in the text) and say once why the events are missing.
            text = stdout.decode("utf-8", "replace") if isinstance(stdout, bytes) else str(stdout)
            errors = [
                "stdout holds no JSON records, only text (does this copilot version support "
                "--output-format=json?): no events could be read"
            ]
            last_text = text.strip() or None
        elif stream.records and not typed:
            errors.append("stdout JSON records carry no 'type': not the documented session-event shape")
        # The shutdown totals are authoritative; per-call usage is the fallback.
        out.usage = usage_shutdown or usage_stream
        out.final_report = extract_report(last_text)
        if terminal or failed:
            events.append(final_event(out.final_report, "error" if failed else "success"))
        elif not plain_text:  # from plain text, whether the run finished cannot be told
            errors.append(
                "stream ended without a terminal event (turn end, idle or shutdown): the agent exited or was killed mid-stream"
            )
        if failed and infra_signal is not None:
            out.infra_error = infra_signal
        out.answered = answered if stream.records else None
        out.model_stamp = models["usage"] or models["shutdown"] or models["change"] or models["start"]
        out.parse_errors = cap_errors(errors)
        return out

    def live_record(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """Progress and running usage from one session event."""
        kind = as_str(record.get("type"))
        data = _payload(record)
        if kind == "tool.execution_start":
            args = as_dict(data.get("arguments"))
            detail = as_str(args.get("command")) or as_str(args.get("path")) or ""
            return {"event": f"{as_str(data.get('toolName')) or 'tool'}: {detail}".rstrip(": ")}
        if kind == "assistant.message" and as_str(data.get("content")):
            return {"event": "message"}
        if kind == "assistant.usage":
            return {
                "event": "usage",
                "input_tokens": as_int(data.get("inputTokens")),
                "output_tokens": as_int(data.get("outputTokens")),
            }
        if kind == "session.error":
            return {"event": f"error: {as_str(data.get('message')) or kind}"}
        return None

    @staticmethod
    def _tool_start(
        data: dict[str, Any],
        events: list[dict[str, Any]],
        pending: dict[str, tuple[dict[str, Any], str, list[str]]],
        commands: dict[str, dict[str, Any]],
    ) -> None:
        tool = as_str(data.get("toolName")) or "unknown"
        call_id = as_str(data.get("toolCallId")) or ""
        args = as_dict(data.get("arguments"))
        server = as_str(data.get("mcpServerName"))
        name = f"mcp:{server}/{as_str(data.get('mcpToolName')) or tool}" if server else tool
        call = {"type": "tool_call", "name": name, "tool_call_id": call_id, "input": clip(args, 500)}
        events.append(call)
        paths: list[str] = []
        path = as_str(args.get("path")) or as_str(args.get("file_path"))
        if tool in _SHELL_TOOLS:
            command = {
                "type": "command",
                "command": clip(as_str(args.get("command")) or ""),
                "exit_code": None,
                "tool_call_id": call_id,
            }
            events.append(command)
            commands[call_id] = command
        elif tool in _READ_TOOLS and path:
            events.append({"type": "file_read", "path": path, "tool_call_id": call_id})
        elif tool in _EDIT_TOOLS and path:
            paths = [path]
        elif tool in _PATCH_TOOLS:
            patch = as_str(args.get("input")) or as_str(args.get("patch")) or ""
            paths = [p.strip() for p in _PATCH_PATH.findall(patch)]
        if call_id:
            pending[call_id] = (call, tool, paths)


# -- infrastructure errors (agents/infra.py) --------------------------------------
# session.error carries {errorType, message, statusCode} in the SDK's session
# events; a session.shutdown of type error carries errorReason. Only those
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


def _copilot_infra(data: dict[str, Any], where: str, message: str | None) -> dict[str, Any] | None:
    from pytest_agentdrift.agents.infra import classify_message, classify_status, infra_error

    cls = classify_status(data.get("statusCode")) or _ERROR_TYPES.get((as_str(data.get("errorType")) or "").lower())
    cls = cls or classify_message(message)
    if cls is None:
        return None
    return infra_error(
        cls,
        message or where,
        "copilot",
        signal=f"{where}" + (f" errorType={data.get('errorType')}" if data.get("errorType") else ""),
    )
