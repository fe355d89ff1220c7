"""Google Gemini CLI in headless mode with its stream-json output.

Invocation (Gemini CLI docs, "Headless mode" and the CLI reference, checked
against 0.61's `--help`): `gemini --prompt=PROMPT --output-format stream-json`,
with `--model`, `--approval-mode` (default | auto_edit | yolo | plan) and
`--skip-trust` (headless runs in a folder not trusted before stop with exit
55; the work tree is the harness's own copy). The preset runs in yolo: tools
run without asking, as nobody can answer. `--debug` makes the shell tool's
result carry the command's exit code (the text the model is sent, "Output:
...\\nExit Code: N"); without it the stream shows only the output.

Settings the preset gives every run, from two files shipped with the preset
(the CLI's documented `GEMINI_CLI_SYSTEM_DEFAULTS_PATH` and
`GEMINI_CLI_SYSTEM_SETTINGS_PATH`): as defaults (the user's own settings win),
API-key sign-in, usage statistics off, auto-update and its notice off; as
system settings (they win), one attempt per model call and no retry of failed
fetches, so a 429 or a 500 ends the run at once and --agent-retries is the one
retry policy. The machine's own system settings file is not read.

Output: one JSON object per line (0.61 `JsonStreamEventType`):
  init {session_id, model}: the model the CLI asks for;
  message {role: user | assistant, content, delta}: assistant text in pieces;
  tool_use {tool_name, tool_id, parameters};
  tool_result {tool_id, status: success | error, output, error {type, message}};
  error {severity: warning | error, message}: the CLI's own notices;
  result {status: success | error, error {type, message}, stats}: the last
  line; `stats.models` holds the tokens per model *that answered* (keyed by
  the `modelVersion` of the responses), input counting cached input.

What the stream does not show: cost, and approval requests (yolo asks for
none). Exit statuses: 0; 41 authentication, 42 input, 44 sandbox, 52
configuration, 53 turn limit, 54 tool failure, 55 untrusted folder, 130
cancelled; an API error exits with its HTTP status modulo 256 (429 -> 173).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pytest_agentdrift.agents.base import AdapterOutput, LiveNote, ProductAdapter, RunContext, Usage
from pytest_agentdrift.agents.common import as_dict, as_int, as_str, clip, close_report, parse_stream
from pytest_agentdrift.agents.infra import InfraError
from pytest_agentdrift.shapes import JsonObject, JsonValue

#: the preset's settings files (package data beside this module)
SETTINGS_DIR = Path(__file__).parent
DEFAULTS_FILE = SETTINGS_DIR / "defaults.json"
SYSTEM_FILE = SETTINGS_DIR / "system.json"

#: tools that change a file (`parameters.file_path`)
_EDIT_TOOLS = frozenset({"replace", "write_file"})
#: tools that read files
_READ_TOOLS = frozenset({"read_file", "read_many_files"})
#: the tool that runs a shell command (`parameters.command`)
_SHELL_TOOLS = frozenset({"run_shell_command"})
#: how the shell tool's result states a non-zero exit (in debug mode, 0.61)
_EXIT_LINE = re.compile(r"^Exit Code: (-?\d+)\s*$", re.M)
#: lines of a shell result that say the command did not simply exit (killed, failed to start)
_NOT_EXITED = re.compile(r"^(?:Signal|Error): ", re.M)


class GeminiAdapter(ProductAdapter):
    name = "gemini-cli"
    product = "google/gemini-cli"
    surface = "cli"
    binary: ClassVar[str] = "gemini"

    # API-key sign-in (Gemini API, or Vertex AI with GOOGLE_API_KEY and the project variables).
    # GEMINI_CLI_HOME is not forwarded: it would lead the agent back to the user's real settings.
    env_allowlist = (
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
    )
    # the Gemini API; sign-in with Google talks to Code Assist and Google's OAuth hosts
    api_hosts = (
        "generativelanguage.googleapis.com",
        "cloudcode-pa.googleapis.com",
        "oauth2.googleapis.com",
        "aiplatform.googleapis.com",
    )
    # a gateway or a local model server speaking the Gemini API
    endpoint_env = ("GOOGLE_GEMINI_BASE_URL",)
    default_endpoint = "https://generativelanguage.googleapis.com"
    home_files = (
        ".gemini/settings.json",
        ".gemini/GEMINI.md",
        ".gemini/.env",
        ".gemini/oauth_creds.json",
        ".gemini/google_accounts.json",
    )
    # ~/.gemini/.env is where the docs tell users to keep GEMINI_API_KEY
    credential_files = (".gemini/.env", ".gemini/oauth_creds.json", ".gemini/google_accounts.json")
    home_dirs: ClassVar[tuple[str, ...]] = (
        ".gemini/commands",
        ".gemini/extensions",
        ".gemini/skills",
        ".gemini/agents",
        ".gemini/policies",
    )
    # the CLI's own sandbox (a container) stays off unless asked for: said by flag, so it is known
    defaults: ClassVar[dict[str, object]] = {"permission_mode": "yolo", "sandbox": False}
    # the headless stream names no tool set (0.61's init record has the model only)
    unreportable: ClassVar[tuple[str, ...]] = (*ProductAdapter.unreportable, "built_in_tools")
    unobservable: ClassVar[tuple[str, ...]] = ("server_revision", *unreportable)
    fixed_env: ClassVar[dict[str, str]] = {
        "GEMINI_CLI_SYSTEM_DEFAULTS_PATH": str(DEFAULTS_FILE),
        "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(SYSTEM_FILE),
    }
    # what the CLI reaches for on its own in headless mode: usage statistics (off by the preset's
    # defaults, on again by a user's settings). Its update check (the npm registry) runs only in
    # interactive mode: an agent's own npm reaching the registry stays the agent's network use
    background_hosts = ("play.googleapis.com",)
    background_programs = ("gemini", "node")
    # the init record names the model the CLI asks for
    run_reported = ("model_id",)
    usage_input_includes_cached = True  # stats input_tokens count the cached input too

    option_keys = ("model", "permission_mode", "sandbox")
    output_format = "stream-json"

    def sandbox_paths(self, env: dict[str, str]) -> list[tuple[str, str]]:
        return [
            *super().sandbox_paths(env),
            (str(DEFAULTS_FILE), "the preset's default settings for Gemini CLI"),
            (str(SYSTEM_FILE), "the preset's system settings for Gemini CLI (its retries)"),
        ]

    def build_argv(self, ctx: RunContext) -> list[str]:
        opts = self.effective_options(ctx.options)
        argv = [self.binary, "--output-format", "stream-json", "--skip-trust", "--debug"]
        if opts.get("permission_mode"):
            argv += ["--approval-mode", str(opts["permission_mode"])]
        if opts.get("model"):
            argv += ["--model", str(opts["model"])]
        if "sandbox" in opts:
            argv.append(f"--sandbox={'true' if _truthy(opts['sandbox']) else 'false'}")
        # one argument with `=`: a task text starting with '-' is never read as a flag
        argv.append(f"--prompt={ctx.task_text}")
        return argv

    # -- parsing ---------------------------------------------------------

    def parse_output(self, stdout: bytes, stderr: bytes) -> AdapterOutput:
        return parse_stream(
            stdout, _StreamParse, "no stream-json records on stdout (was --output-format stream-json honoured?)"
        )

    def classify_ending(
        self, out: AdapterOutput, exit_code: int | None, stdout: bytes, stderr: bytes, timed_out: bool
    ) -> InfraError | None:
        """The stream's own error result first; else the CLI's documented exit statuses for what
        stops it before its model answers (sign-in, configuration, an untrusted folder)."""
        if out.infra_error is not None or timed_out or out.answered:
            return super().classify_ending(out, exit_code, stdout, stderr, timed_out)
        cls = _EXIT_CLASSES.get(exit_code) if exit_code is not None else None
        if cls is None:
            return super().classify_ending(out, exit_code, stdout, stderr, timed_out)
        from pytest_agentdrift.agents.infra import infra_error, last_line

        evidence = last_line(stderr) or f"exit code {exit_code}"
        return infra_error(cls, evidence, self.name, exit_code=exit_code, signal=f"exit {exit_code}")

    def live_record(self, record: JsonObject) -> LiveNote | None:
        """Progress from one stream-json record; tokens arrive only with the result."""
        kind = record.get("type")
        if kind == "tool_use":
            params = as_dict(record.get("parameters"))
            detail = as_str(params.get("command")) or _path_of(params) or ""
            return {"event": f"{as_str(record.get('tool_name')) or 'tool'}: {detail}".rstrip(": ")}
        if kind == "result":
            usage = stats_usage(as_dict(record.get("stats")))[0]
            return {
                "event": "result",
                "total": True,
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
            }
        if kind == "error":
            return {"event": f"error: {as_str(record.get('message')) or 'error'}"}
        if kind == "init":
            return {"event": "started"}
        return None


def _truthy(value: object) -> bool:
    return value is True or str(value).strip().lower() in ("true", "1", "yes", "on", "docker", "podman")


#: exit statuses the CLI documents for what stops it before any model answer (FatalError classes)
_EXIT_CLASSES = {41: "authentication", 44: "configuration", 52: "configuration", 55: "configuration"}


def _path_of(params: JsonObject) -> str | None:
    return as_str(params.get("file_path")) or as_str(params.get("absolute_path")) or as_str(params.get("path"))


def shell_exit_code(output: str | None) -> int | None:
    """The exit code a shell result states (debug mode): its "Exit Code: N" line; a result in
    that format without one is a command that exited 0, unless it says it was killed or did not
    start; any other text (not in debug mode, a refused call) says nothing."""
    text = output or ""
    m = _EXIT_LINE.search(text)
    if m:
        return int(m.group(1))
    if text.startswith("Output: ") and not _NOT_EXITED.search(text):
        return 0
    return None


def stats_usage(stats: JsonObject) -> tuple[Usage, str | None]:
    """Tokens of every model call and the main model that answered, from the result's `stats`.

    `stats.models` is keyed by the model that answered (the responses' `modelVersion`); a
    model with no tokens was asked for and never answered. The main model is the one that
    read the most input (the conversation); the others are the CLI's side calls (routing,
    next-speaker checks, summaries), shown apart. Output counts the model's thoughts
    (`total_tokens` less prompt and candidates), as the Gemini API bills them."""
    models = {name: as_dict(m) for name, m in as_dict(stats.get("models")).items()}
    answered = {name: m for name, m in models.items() if (as_int(m.get("total_tokens")) or 0) > 0}
    total = Usage()
    parts: dict[str, Usage] = {name: _model_usage(m) for name, m in answered.items()}
    for part in parts.values():
        total.add_tokens(part)
    if not parts:
        return total, None
    main = max(parts, key=lambda name: (parts[name].input_tokens or 0, name))
    if len(parts) > 1:
        total.main_thread = parts[main].tokens()
        side = Usage()
        for name, part in parts.items():
            if name != main:
                side.add_tokens(part)
        total.side_calls = side.tokens()
    return total, main


def _model_usage(m: JsonObject) -> Usage:
    prompt = as_int(m.get("input_tokens"))
    candidates = as_int(m.get("output_tokens"))
    whole = as_int(m.get("total_tokens"))
    thoughts = None
    if whole is not None and prompt is not None and candidates is not None:
        thoughts = max(whole - prompt - candidates, 0)
    return Usage(
        input_tokens=prompt,
        cached_tokens=as_int(m.get("cached")),
        output_tokens=None if candidates is None else candidates + (thoughts or 0),
        reasoning_tokens=thoughts,
    )


@dataclass
class _StreamParse:
    """One stream-json transcript being read: the events so far and what the end needs."""

    errors: list[str]
    out: AdapterOutput = field(default_factory=AdapterOutput)
    pending: dict[str, JsonObject] = field(default_factory=dict)  # tool_id -> its tool_use record
    text: list[str] = field(default_factory=list)  # assistant text since the last tool call
    last_message: str | None = None
    result: JsonObject | None = None
    answered: bool = False

    def record(self, kind: JsonValue, rec: JsonObject) -> None:
        if kind == "init":
            model = as_str(rec.get("model"))
            if model:
                self.out.run_identity["model_id"] = model
        elif kind == "message" and rec.get("role") == "assistant":
            self.answered = True
            self.text.append(as_str(rec.get("content")) or "")
        elif kind == "tool_use":
            self.answered = True
            self._flush_text()
            self.tool_use(rec)
        elif kind == "tool_result":
            self.tool_result(rec)
        elif kind == "error":
            event = {"type": "error", "message": clip(as_str(rec.get("message")) or "error"), "source": "error"}
            event["severity"] = as_str(rec.get("severity"))
            self.out.events.append(event)
        elif kind == "result":
            self._flush_text()
            self.result = rec
        # message role user: the prompt itself

    def _flush_text(self) -> None:
        text = "".join(self.text).strip()
        self.text = []
        if text:
            self.last_message = text
            self.out.events.append({"type": "message", "text": clip(text)})

    def tool_use(self, rec: JsonObject) -> None:
        name = as_str(rec.get("tool_name")) or "unknown"
        tool_id = as_str(rec.get("tool_id"))
        params = as_dict(rec.get("parameters"))
        self.out.events.append({"type": "tool_call", "name": name, "tool_use_id": tool_id, "input": clip(params, 500)})
        if name in _READ_TOOLS and _path_of(params):
            self.out.events.append({"type": "file_read", "path": _path_of(params), "tool_use_id": tool_id})
        if tool_id:
            self.pending[tool_id] = rec
        elif name in _SHELL_TOOLS:
            self._command(rec, None, None)

    def tool_result(self, rec: JsonObject) -> None:
        tool_id = as_str(rec.get("tool_id")) or ""
        use = self.pending.pop(tool_id, None)
        if use is None:
            self.errors.append(f"tool_result for {tool_id!r} without its tool_use")
            return
        name = as_str(use.get("tool_name")) or ""
        params = as_dict(use.get("parameters"))
        status = as_str(rec.get("status"))
        if name in _SHELL_TOOLS:
            self._command(use, status, shell_exit_code(as_str(rec.get("output"))) if status == "success" else None)
        elif name in _EDIT_TOOLS and status == "success" and _path_of(params):
            # only an edit the tool reports done is evidence: a refused or failed one changed nothing
            self.out.events.append({"type": "file_edit", "path": _path_of(params), "tool_use_id": tool_id})
        if status == "error":
            error = as_dict(rec.get("error"))
            self.out.events.append(
                {
                    "type": "tool_error",
                    "name": name,
                    "tool_use_id": tool_id,
                    "error_type": as_str(error.get("type")),
                    "message": clip(as_str(error.get("message")) or "", 500),
                }
            )

    def _command(self, use: JsonObject, status: str | None, exit_code: int | None) -> None:
        command = as_str(as_dict(use.get("parameters")).get("command")) or ""
        self.out.events.append(
            {
                "type": "command",
                "command": clip(command),
                "exit_code": exit_code,
                "status": status or "unfinished",
                "tool_use_id": as_str(use.get("tool_id")),
            }
        )

    def end(self) -> None:
        self._flush_text()
        for use in list(self.pending.values()):
            # a call the stream never closed (the CLI was killed, or stopped on an error)
            if as_str(use.get("tool_name")) in _SHELL_TOOLS:
                self._command(use, None, None)
        result = self.result
        outcome = None if result is None else ("success" if result.get("status") == "success" else "error")
        close_report(self.out, self.last_message, outcome)
        if result is None:
            self.errors.append("stream ended without a result record: the CLI exited or was killed mid-stream")

    def close(self) -> AdapterOutput:
        out = self.out
        stats = as_dict((self.result or {}).get("stats"))
        usage, main = stats_usage(stats)
        out.usage = usage
        out.model_stamp = main
        if main is not None:
            self.answered = True
        if self.result is not None and self.result.get("status") == "error":
            error = as_dict(self.result.get("error"))
            message = as_str(error.get("message")) or "error"
            out.events.append({"type": "error", "message": clip(message), "source": "result"})
            from pytest_agentdrift.agents.infra import classify_google_error, infra_error

            cls = classify_google_error(message)
            if cls is not None:
                out.infra_error = infra_error(
                    cls, message, GeminiAdapter.name, signal=f"result.error {error.get('type')}"
                )
        out.answered = self.answered
        return out
