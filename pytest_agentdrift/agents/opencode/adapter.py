"""OpenCode (`opencode run`) with its JSON event output.

Invocation (OpenCode docs, "CLI" and "Config", checked against 1.18.33's
`opencode run --help`): `opencode run --format json [--model PROVIDER/MODEL]
[--auto] -- PROMPT`. `--auto` approves every permission that the
configuration does not deny (a headless run cannot answer a question); the
preset's default. The product is one compiled binary (Bun) in the npm
package `opencode-ai`.

The model endpoint is the user's own: ANTHROPIC_BASE_URL or OPENAI_BASE_URL
for the built-in providers (their SDKs read them), or a provider in
`opencode.json` (`provider.<id>.options.baseURL`), its key in the provider's
variable such as ANTHROPIC_API_KEY or OPENAI_API_KEY, and the model (`model`
or `--model`).
The preset turns off what the product would fetch on its own in every run:
its model catalogue (models.opencode.ai; the catalogue built into the binary
is used), its auto-update, session sharing and language-server downloads
(OPENCODE_DISABLE_* variables). What stays is the product's, not the agent's:
its project id file in the work tree's `.git/opencode`, its state under the
private home (`~/.local/share/opencode`, `~/.cache/opencode`), and its
plugin installs from the npm registry, refused and recorded apart.

Output with --format json: one JSON object per line, each with `type`,
`timestamp`, `sessionID` and a `part`:
  step_start; text {part.text}; reasoning {part.text};
  tool_use {part: {tool, callID, state: {status: completed | error, input,
  output, metadata: {exit (bash), ...}, error}}};
  step_finish {part: {reason, tokens: {input, output, reasoning, cache:
  {read, write}}, cost}}: one per model call of the conversation;
  error {error: {name: APIError | ProviderAuthError | UnknownError | ...,
  data: {message, statusCode, isRetryable, responseBody}}}.

What the stream does not show: the model that answered (no record names a
model: `model_stamp` stays unobserved), the CLI's side calls (titles, with the
provider's small model) and their tokens, and approval requests. OpenCode
retries a retryable provider error (408, 409, 429, 5xx, "overloaded") five
times with backoff (2 s doubling, 30 s at most; a `retry-after` header is
honoured) and no setting turns that off: a 429 ends the run after about a
minute and a half.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pytest_agentdrift.agents.base import AdapterOutput, LiveNote, ProductAdapter, RunContext, Usage
from pytest_agentdrift.agents.common import as_dict, as_float, as_int, as_str, clip, close_report, parse_stream
from pytest_agentdrift.agents.infra import InfraError
from pytest_agentdrift.shapes import JsonObject, JsonValue

#: tools that change files (`input.filePath`)
_EDIT_TOOLS = frozenset({"edit", "write", "multiedit"})
#: tools that read a file
_READ_TOOLS = frozenset({"read"})
#: the tool that runs a shell command (`input.command`, `metadata.exit`)
_SHELL_TOOLS = frozenset({"bash"})
#: step_finish reasons that end the conversation (else the model asked for tools)
_FINAL_REASONS = frozenset({"stop", "length", "content-filter", "end_turn"})


class OpenCodeAdapter(ProductAdapter):
    name = "opencode"
    product = "sst/opencode"
    surface = "cli"
    binary: ClassVar[str] = "opencode"

    # the provider keys OpenCode reads from the environment for its built-in providers; the
    # config variables are not forwarded (they would lead the agent back to the user's setup)
    env_allowlist = (
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_GENERATIVE_AI_API_KEY",
        "OPENROUTER_API_KEY",
        "OPENCODE_API_KEY",
    )
    # OpenCode Zen and the built-in providers' APIs
    api_hosts = ("opencode.ai", "api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com")
    home_files = (
        ".config/opencode/opencode.json",
        ".config/opencode/opencode.jsonc",
        ".config/opencode/config.json",
        ".config/opencode/AGENTS.md",
        ".local/share/opencode/auth.json",
    )
    # `opencode auth login` keeps provider keys there
    credential_files = (".local/share/opencode/auth.json",)
    home_dirs: ClassVar[tuple[str, ...]] = (
        ".config/opencode/agent",
        ".config/opencode/agents",
        ".config/opencode/command",
        ".config/opencode/commands",
        ".config/opencode/skills",
        ".config/opencode/plugin",
        ".config/opencode/plugins",
    )
    defaults: ClassVar[dict[str, object]] = {"permission_mode": "auto"}
    # no record of the JSON stream names the tool set, and OpenCode has no sandbox of its own
    unreportable: ClassVar[tuple[str, ...]] = (*ProductAdapter.unreportable, "built_in_tools", "sandbox")
    unobservable: ClassVar[tuple[str, ...]] = ("server_revision", *unreportable)
    # what the product would fetch on its own in every run, off: the agent's network is the agent's
    fixed_env: ClassVar[dict[str, str]] = {
        "OPENCODE_DISABLE_AUTOUPDATE": "true",
        "OPENCODE_DISABLE_MODELS_FETCH": "true",
        "OPENCODE_DISABLE_SHARE": "true",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "true",
    }
    # its plugin installs (npm), its model catalogue and its own service: refused, recorded apart
    background_hosts = ("registry.npmjs.org", "models.opencode.ai", "models.dev", "opencode.ai")
    # the binary itself installs them (measured: `opencode.exe`); an npm or node the agent runs
    # reaching the registry is the agent's own network use
    background_programs = ("opencode", "opencode.exe")
    #: the product's own state in the work tree: the project id it caches in the repository
    product_state = (".git/opencode",)
    usage_input_includes_cached = False  # step_finish input excludes cache reads and writes

    option_keys = ("model", "permission_mode")
    output_format = "json"

    # the built-in Anthropic and OpenAI providers read their SDK's base-URL variable when the
    # config names no baseURL: a gateway set so is one the harness's model gateway can see through
    endpoint_env = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL")

    def endpoint_hosts(self, environ: dict[str, str]) -> list[str]:
        """The model endpoint the user's opencode.json points the selected provider at, and the
        base-URL variables set."""
        from pytest_agentdrift.agents.base import url_host_port

        hp = url_host_port(opencode_base_url(environ))
        return list(dict.fromkeys([*([hp] if hp else []), *super().endpoint_hosts(environ)]))

    def build_argv(self, ctx: RunContext) -> list[str]:
        opts = self.effective_options(ctx.options)
        argv = [self.binary, "run", "--format", "json"]
        if opts.get("model"):
            argv += ["--model", str(opts["model"])]
        if opts.get("permission_mode") == "auto":
            argv.append("--auto")
        # `--` so a task text starting with '-' is never read as a flag
        argv += ["--", ctx.task_text]
        return argv

    def parse_output(self, stdout: bytes, stderr: bytes) -> AdapterOutput:
        return parse_stream(stdout, _RunParse, "no JSON events on stdout (was --format json honoured?)")

    def live_record(self, record: JsonObject) -> LiveNote | None:
        """Progress and running usage from one event (one step_finish per model call)."""
        kind = record.get("type")
        part = as_dict(record.get("part"))
        if kind == "tool_use":
            state = as_dict(part.get("state"))
            tool_input = as_dict(state.get("input"))
            detail = as_str(tool_input.get("command")) or as_str(tool_input.get("filePath")) or ""
            return {"event": f"{as_str(part.get('tool')) or 'tool'}: {detail}".rstrip(": ")}
        if kind == "step_finish":
            u = step_usage(part)
            return {
                "event": "step finished",
                "usage_key": as_str(part.get("id")),
                "input_tokens": u.input_tokens,
                "output_tokens": u.output_tokens,
                "cost_usd": u.cost_usd,
            }
        if kind == "error":
            return {"event": f"error: {error_message(as_dict(record.get('error')))}"}
        return None


def step_usage(part: JsonObject) -> Usage:
    """One model call's tokens and cost from a step_finish part."""
    tokens = as_dict(part.get("tokens"))
    cache = as_dict(tokens.get("cache"))
    reasoning = as_int(tokens.get("reasoning"))
    output = as_int(tokens.get("output"))
    return Usage(
        input_tokens=as_int(tokens.get("input")),
        # reasoning is counted apart by OpenCode; the record's output includes it
        output_tokens=None if output is None else output + (reasoning or 0),
        cached_tokens=as_int(cache.get("read")),
        cache_write_tokens=as_int(cache.get("write")),
        reasoning_tokens=reasoning,
        cost_usd=as_float(part.get("cost")),
    )


def error_message(error: JsonObject) -> str:
    data = as_dict(error.get("data"))
    return as_str(data.get("message")) or as_str(error.get("name")) or "error"


@dataclass
class _RunParse:
    """One `opencode run --format json` transcript being read."""

    errors: list[str]
    out: AdapterOutput = field(default_factory=AdapterOutput)
    usage: Usage = field(default_factory=Usage)
    last_text: str | None = None
    last_reason: str | None = None
    error: JsonObject | None = None
    steps: int = 0
    answered: bool = False

    def record(self, kind: JsonValue, rec: JsonObject) -> None:
        part = as_dict(rec.get("part"))
        if kind == "text":
            text = as_str(part.get("text"))
            if text:
                self.answered = True
                self.last_text = text
                self.out.events.append({"type": "message", "text": clip(text)})
        elif kind == "tool_use":
            self.answered = True
            self.tool(part)
        elif kind == "step_finish":
            self.steps += 1
            self.answered = True
            cost = self.usage.cost_usd
            step = step_usage(part)
            self.usage.add_tokens(step)
            if step.cost_usd is not None:
                self.usage.cost_usd = (cost or 0.0) + step.cost_usd
            self.last_reason = as_str(part.get("reason"))
        elif kind == "error":
            self.error = as_dict(rec.get("error"))
            self.out.events.append({"type": "error", "message": clip(error_message(self.error)), "source": "error"})
        # step_start, reasoning: nothing to map

    def tool(self, part: JsonObject) -> None:
        name = as_str(part.get("tool")) or "unknown"
        call_id = as_str(part.get("callID"))
        state = as_dict(part.get("state"))
        status = as_str(state.get("status"))
        tool_input = as_dict(state.get("input"))
        path = as_str(tool_input.get("filePath"))
        events = self.out.events
        events.append({"type": "tool_call", "name": name, "tool_use_id": call_id, "input": clip(tool_input, 500)})
        if name in _SHELL_TOOLS:
            exit_code = as_int(as_dict(state.get("metadata")).get("exit")) if status == "completed" else None
            events.append(
                {
                    "type": "command",
                    "command": clip(as_str(tool_input.get("command")) or ""),
                    "exit_code": exit_code,
                    "status": status,
                    "tool_use_id": call_id,
                }
            )
        elif name in _READ_TOOLS and path and status == "completed":
            events.append({"type": "file_read", "path": path, "tool_use_id": call_id})
        elif name in _EDIT_TOOLS and path and status == "completed":
            # only an edit the tool reports done is evidence: a failed one changed nothing
            events.append({"type": "file_edit", "path": path, "tool_use_id": call_id})
        if status == "error":
            events.append(
                {
                    "type": "tool_error",
                    "name": name,
                    "tool_use_id": call_id,
                    "message": clip(as_str(state.get("error")) or "", 500),
                }
            )

    def end(self) -> None:
        self.out.usage = self.usage
        ended = None
        if self.error is not None:
            ended = "error"
        elif self.last_reason in _FINAL_REASONS:
            ended = "success"
        close_report(self.out, self.last_text, ended)
        if ended is None:
            self.errors.append(
                "stream ended without a final step or an error: the agent exited or was killed mid-stream"
            )

    def close(self) -> AdapterOutput:
        out = self.out
        if self.error is not None:
            infra = opencode_infra(self.error)
            if infra is not None:
                out.infra_error = infra
        out.answered = self.answered
        out.model_stamp = None  # no record of `opencode run --format json` names the answering model
        return out


#: error names OpenCode gives what is not a provider's HTTP answer
_ERROR_NAMES = {"ProviderAuthError": "authentication", "ProviderModelNotFoundError": "configuration"}


def opencode_infra(error: JsonObject) -> InfraError | None:
    """An error record the CLI wrote: its HTTP status, else its name, else its message."""
    from pytest_agentdrift.agents.infra import classify_message, classify_status, infra_error

    data = as_dict(error.get("data"))
    name = as_str(error.get("name")) or "error"
    message = error_message(error)
    cls = classify_status(data.get("statusCode")) or _ERROR_NAMES.get(name) or classify_message(message)
    if cls is None:
        return None
    return infra_error(
        cls,
        message,
        OpenCodeAdapter.name,
        signal=f"error {name}" + (f" status {data['statusCode']}" if isinstance(data.get("statusCode"), int) else ""),
    )


def _config_files(environ: dict[str, str]) -> list[Path]:
    """The user's OpenCode config files, lowest precedence first (global, then OPENCODE_CONFIG)."""
    home = environ.get("HOME") or os.path.expanduser("~")
    base = Path(environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")) / "opencode"
    files = [base / "config.json", base / "opencode.json", base / "opencode.jsonc"]
    if environ.get("OPENCODE_CONFIG"):
        files.append(Path(environ["OPENCODE_CONFIG"]))
    return files


def user_config(environ: dict[str, str]) -> JsonObject:
    """The user's OpenCode configuration merged (later files win, key by key at the top level)."""
    from pytest_agentdrift.agents.discovery_base import strip_jsonc

    merged: JsonObject = {}
    for path in _config_files(environ):
        try:
            data = json.loads(strip_jsonc(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            for key, value in data.items():
                below = merged.get(key)
                if isinstance(value, dict) and isinstance(below, dict):
                    merged[key] = {**below, **value}
                else:
                    merged[key] = value
    return merged


def opencode_base_url(environ: dict[str, str]) -> str | None:
    """The base URL the configuration gives the provider of the selected model (`model` is
    `provider/model`); with no model selected, the only provider that names one."""
    config = user_config(environ)
    providers = as_dict(config.get("provider"))
    urls = {
        pid: as_str(as_dict(as_dict(p).get("options")).get("baseURL"))
        for pid, p in providers.items()
        if as_str(as_dict(as_dict(p).get("options")).get("baseURL"))
    }
    model = as_str(config.get("model"))
    if model and "/" in model:
        return urls.get(model.split("/", 1)[0])
    return next(iter(urls.values())) if len(urls) == 1 else None
