"""OpenAI Codex CLI in non-interactive mode (`codex exec --json`).

Invocation (Codex docs, "Non-interactive mode" and the CLI reference):
`codex exec --json PROMPT`, with `--model`, `--sandbox`
(read-only | workspace-write | danger-full-access), `--skip-git-repo-check`,
and the global approval flag `--ask-for-approval/-a`
(untrusted | on-request | never), which goes before the subcommand.
`codex exec` runs read-only by default, so the preset asks for
workspace-write unless told otherwise. Codex reads stdin when it is not a
terminal: the runner must give it /dev/null.

Output with --json: one event per line.
  thread.started {thread_id}; turn.started;
  item.started / item.updated / item.completed {item: {id, type, ...}} with
  item types agent_message {text}, reasoning {text}, command_execution
  {command, aggregated_output, exit_code, status}, file_change
  {changes: [{path, kind}], status}, mcp_tool_call {server, tool, status},
  web_search {query}, todo_list {items}, error {message};
  turn.completed {usage: {input_tokens, cached_input_tokens, output_tokens}};
  turn.failed {error: {message}}; error {message}.

What the stream does not show: the model id (no event carries it, so
`model_stamp` stays None: unobserved), cost, and approval requests (exec
runs with a fixed approval policy and emits no approval event). A
command_execution with status `declined` is mapped to a denial; other
sandbox refusals look like a failed command and cannot be told apart.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pytest_agentdrift.agents.base import AdapterOutput, LiveNote, ProductAdapter, RunContext, Usage
from pytest_agentdrift.agents.common import as_dict, as_int, as_list, as_str, clip, close_report, parse_stream
from pytest_agentdrift.agents.infra import InfraError
from pytest_agentdrift.shapes import JsonObject, JsonValue

#: completed item types that show the model answered (reasoning is its narration, errors are the CLI's)
_ANSWER_ITEMS = frozenset(
    {"agent_message", "command_execution", "file_change", "mcp_tool_call", "web_search", "todo_list"}
)


class CodexAdapter(ProductAdapter):
    name = "codex"
    product = "openai/codex"
    surface = "cli"
    binary: ClassVar[str] = "codex"

    # API-key sign-in (CODEX_API_KEY is the exec-only variable). CODEX_HOME is
    # not forwarded: it would lead the agent back to the user's real config.
    env_allowlist = ("OPENAI_API_KEY", "CODEX_API_KEY")
    # The Responses API for API keys; ChatGPT sign-in talks to chatgpt.com and
    # refreshes tokens at auth.openai.com.
    api_hosts = ("api.openai.com", "chatgpt.com", "auth.openai.com")
    home_files = (
        ".codex/config.toml",
        ".codex/AGENTS.md",
        ".codex/AGENTS.override.md",
        ".codex/auth.json",
    )
    credential_files = (".codex/auth.json",)
    home_dirs: ClassVar[tuple[str, ...]] = (".codex/prompts", ".codex/rules")
    config_home_env: ClassVar[dict[str, str]] = {"CODEX_HOME": ".codex"}
    defaults: ClassVar[dict[str, object]] = {"sandbox": "workspace-write", "permission_mode": "never"}
    # workspace-write starts Codex's own bubblewrap, which creates /tmp/codex-daemon-<uid> and
    # maps a user namespace of its own: a private /tmp, and an unprivileged uid in a user
    # namespace of ours (a process that is root without capabilities cannot map one)
    private_tmp = True
    sandbox_user = 1000
    # ... which binds its protected directories read-only over mount points it makes in the tree
    sandbox_dirs = (".agents", ".aws", ".codex")
    # what Codex 0.171 reaches for on its own in every run (measured under the harness proxy):
    # GitHub (its git probe of the work tree's remotes, and api.github.com) and its
    # experiments host
    background_hosts = ("github.com", "api.github.com", "ab.chatgpt.com")
    background_programs = ("codex", "git-remote-http")
    # Codex (Rust) reads its extra CA from CODEX_CA_CERTIFICATE, then SSL_CERT_FILE
    ca_env: ClassVar[tuple[str, ...]] = ("CODEX_CA_CERTIFICATE", "SSL_CERT_FILE", "SSL_CERT_DIR")

    option_keys = ("model", "permission_mode", "sandbox")
    output_format = "exec --json"
    usage_input_includes_cached = True  # turn.completed input_tokens counts cached_input_tokens too

    def endpoint_hosts(self, environ: dict[str, str]) -> list[str]:
        """The model endpoint the user's config.toml points Codex at (`openai_base_url`, or the
        `base_url` of the selected `model_providers` entry): 0.171 ignores OPENAI_BASE_URL."""
        from pytest_agentdrift.agents.base import url_host_port

        url = codex_base_url(environ)
        hp = url_host_port(url)
        return [hp] if hp else []

    def path_links(self, env: dict[str, str]) -> dict[str, str]:
        """`codex-linux-sandbox`: Codex runs its own sandbox by re-executing its native binary
        under that name, from links it makes in CODEX_HOME, and makes none when CODEX_HOME lies
        under /tmp (as the private home does); the link comes from the harness instead."""
        native = _native_binary(shutil.which(self.binary, path=env.get("PATH")))
        return {"codex-linux-sandbox": native} if native else {}

    def build_argv(self, ctx: RunContext) -> list[str]:
        opts = self.effective_options(ctx.options)
        argv = [self.binary]
        if opts.get("permission_mode"):
            # The approval policy is a global flag: it precedes `exec`.
            argv += ["--ask-for-approval", str(opts["permission_mode"])]
        # The harness makes the work tree a git repository unless the task says
        # git = false; the check would then abort the run before it starts.
        argv += ["exec", "--json", "--skip-git-repo-check"]
        provider = custom_provider(dict(os.environ))
        if provider:
            # one retry policy, the harness's (--agent-retries): Codex retries a failed request and
            # reconnects a cut stream on its own, per provider (Codex refuses these settings for
            # its built-in providers, whose own retries therefore stay)
            argv += [arg for key in _RETRY_KEYS for arg in ("-c", f"model_providers.{provider}.{key}=0")]
        if opts.get("sandbox"):
            argv += ["--sandbox", str(opts["sandbox"])]
        if opts.get("model"):
            argv += ["--model", str(opts["model"])]
        # `--` so a task text starting with '-' is never read as a flag.
        argv += ["--", ctx.task_text]
        return argv

    # -- parsing ---------------------------------------------------------

    def parse_output(self, stdout: bytes, stderr: bytes) -> AdapterOutput:
        return parse_stream(stdout, _ExecParse, "no JSONL events on stdout (was --json honoured?)")

    def classify_ending(
        self, out: AdapterOutput, exit_code: int | None, stdout: bytes, stderr: bytes, timed_out: bool
    ) -> InfraError | None:
        # the banner Codex prints on every run is never the reason it stopped
        kept = b"\n".join(ln for ln in stderr.splitlines() if not ln.strip().startswith(_STDIN_BANNERS))
        return super().classify_ending(out, exit_code, stdout, kept, timed_out)

    def live_record(self, record: JsonObject) -> LiveNote | None:
        """Progress from one exec --json event; usage arrives only with turn.completed."""
        kind = record.get("type")
        if kind in ("item.started", "item.completed"):
            item = as_dict(record.get("item"))
            itype = as_str(item.get("type")) or "item"
            detail = as_str(item.get("command")) or as_str(item.get("query")) or ""
            if itype == "file_change":
                detail = ", ".join(as_str(as_dict(c).get("path")) or "" for c in as_list(item.get("changes")))
            return {"event": f"{itype}: {detail}".rstrip(": ")}
        if kind == "turn.completed":
            u = as_dict(record.get("usage"))
            return {
                "event": "turn completed",
                "input_tokens": as_int(u.get("input_tokens")),
                "output_tokens": as_int(u.get("output_tokens")),
            }
        if kind in ("turn.failed", "error"):
            message = as_str(as_dict(record.get("error")).get("message")) or as_str(record.get("message")) or kind
            return {"event": f"error: {message}"}
        return None


@dataclass
class _ExecParse:
    """One `codex exec --json` transcript being read: the events so far and what the end needs."""

    errors: list[str]
    out: AdapterOutput = field(default_factory=AdapterOutput)
    usage: Usage = field(default_factory=Usage)
    last_message: str | None = None
    ended: str | None = None  # "success" / "error" once a turn closed
    open_items: dict[str, str] = field(default_factory=dict)  # item id -> type, started but not completed
    started: dict[str, JsonObject] = field(default_factory=dict)  # item id -> the started item, until it completes
    last_error: tuple[str, str] | None = None  # (where, message) of the CLI's last error record
    answered: bool = False

    def completed(self, item: JsonObject) -> None:
        self.open_items.pop(as_str(item.get("id")) or "", None)
        _item_events(item, self.out.events)
        if item.get("type") in _ANSWER_ITEMS:
            self.answered = True
        elif item.get("type") == "error":
            self.last_error = ("item error", as_str(item.get("message")) or "error")
        text = as_str(item.get("text"))
        if item.get("type") == "agent_message" and text:
            self.last_message = text

    def started_item(self, item: JsonObject) -> None:
        item_id = as_str(item.get("id"))
        if item_id:
            self.open_items[item_id] = as_str(item.get("type")) or "?"
            self.started[item_id] = item

    def turn_completed(self, u: JsonObject) -> None:
        self.usage.add_tokens(
            Usage(
                input_tokens=as_int(u.get("input_tokens")),
                cached_tokens=as_int(u.get("cached_input_tokens")),
                output_tokens=as_int(u.get("output_tokens")),
                reasoning_tokens=as_int(u.get("reasoning_output_tokens")),
            )
        )
        self.ended = self.ended or "success"
        self.answered = True

    def error_record(self, message: str) -> None:
        self.last_error = ("error", message)
        event = {"type": "error", "message": clip(message), "source": "error"}
        if message.startswith("Reconnecting"):
            # Codex reports stream retries as error lines; the turn goes on.
            event["transient"] = True
        self.out.events.append(event)

    def record(self, kind: JsonValue, rec: JsonObject) -> None:
        """One typed record of the stream."""
        if kind == "item.completed":
            self.completed(as_dict(rec.get("item")))
        elif kind == "item.started":
            self.started_item(as_dict(rec.get("item")))
        elif kind == "turn.completed":
            self.turn_completed(as_dict(rec.get("usage")))
        elif kind == "turn.failed":
            message = as_str(as_dict(rec.get("error")).get("message")) or "turn failed"
            self.out.events.append({"type": "error", "message": clip(message), "source": "turn.failed"})
            self.ended = "error"
            self.last_error = ("turn.failed", message)
        elif kind == "error":
            self.error_record(as_str(rec.get("message")) or "error")
        # thread.started, turn.started, item.updated: nothing to map

    def end(self) -> None:
        """Commands left unfinished, the final report, and why a stream without a closed turn stopped."""
        out = self.out
        for item_id, itype in self.open_items.items():
            if itype == "command_execution":
                # 0.171 in code mode can end a turn without completing a command it started (seen
                # with a command that failed): the command ran, its exit code was never reported
                _item_events({**self.started[item_id], "status": "unfinished", "exit_code": None}, out.events)
        out.usage = self.usage
        close_report(out, self.last_message, self.ended)
        if self.ended is None:
            self.errors.append(
                "stream ended without turn.completed or turn.failed: the agent exited or was killed mid-stream"
            )
            if self.open_items:
                kinds = ", ".join(f"{i} ({t})" for i, t in sorted(self.open_items.items()))
                self.errors.append(f"items started but never completed: {kinds}")

    def close(self) -> AdapterOutput:
        out = self.out
        if self.ended != "success" and self.last_error is not None:
            # a failed turn, or a stream that stopped while the CLI was still reporting errors
            # (reconnecting to an unreachable provider): the last error record says why
            from pytest_agentdrift.agents.infra import classify_message, infra_error

            cls = classify_message(self.last_error[1])
            if cls is not None:
                out.infra_error = infra_error(cls, self.last_error[1], "codex", signal=self.last_error[0])
        out.answered = self.answered
        out.model_stamp = None  # codex exec --json does not report the model
        return out


def _item_events(item: JsonObject, events: list[JsonObject]) -> None:
    """The events one completed item stands for."""
    itype = item.get("type")
    status = as_str(item.get("status"))
    if itype == "agent_message":
        text = as_str(item.get("text"))
        if text:
            events.append({"type": "message", "text": clip(text)})
    elif itype == "command_execution":
        _command_events(item, status, events)
    elif itype == "file_change":
        _file_change_events(item, status, events)
    elif itype == "mcp_tool_call":
        server = as_str(item.get("server")) or "?"
        tool = as_str(item.get("tool")) or "?"
        events.append(
            {"type": "tool_call", "name": f"mcp:{server}/{tool}", "status": status, "item_id": item.get("id")}
        )
    elif itype == "web_search":
        events.append({"type": "tool_call", "name": "web_search", "query": clip(as_str(item.get("query")) or "", 500)})
    elif itype == "error":
        events.append({"type": "error", "message": clip(as_str(item.get("message")) or "error"), "source": "item"})
    # reasoning and todo_list are the agent's own narration: not evidence


def _command_events(item: JsonObject, status: str | None, events: list[JsonObject]) -> None:
    command = as_str(item.get("command")) or ""
    events.append({"type": "tool_call", "name": "command_execution", "item_id": item.get("id")})
    events.append(
        {"type": "command", "command": clip(command), "exit_code": as_int(item.get("exit_code")), "status": status}
    )
    if status == "declined":
        events.append(
            {"type": "denial", "action": "command_execution", "path": clip(command, 500), "reason": "declined"}
        )


def _file_change_events(item: JsonObject, status: str | None, events: list[JsonObject]) -> None:
    # a failed or declined patch keeps its status: it changed nothing the model meant it to
    events.append({"type": "tool_call", "name": "file_change", "item_id": item.get("id"), "status": status})
    if status == "completed":
        for change in as_list(item.get("changes")):
            change = as_dict(change)
            path = as_str(change.get("path"))
            if path:
                events.append({"type": "file_edit", "path": path, "kind": as_str(change.get("kind"))})
    elif status == "declined":
        for change in as_list(item.get("changes")):
            path = as_str(as_dict(change).get("path"))
            events.append({"type": "denial", "action": "file_change", "path": path, "reason": "declined"})


def _native_binary(launcher: str | None) -> str | None:
    """The platform binary the npm launcher (`<package>/bin/codex.js`) runs: `vendor/<triple>/bin/codex`
    of the platform package (`@openai/codex-linux-x64`, ...) installed inside the package or
    beside it in the same scope directory."""
    if not launcher:
        return None
    package = Path(os.path.realpath(launcher)).parent.parent
    for pattern in ("node_modules/@openai/codex-*/vendor/*/bin/codex", "../codex-*/vendor/*/bin/codex"):
        for found in sorted(package.glob(pattern)):
            if os.access(found, os.X_OK):
                return os.path.normpath(found)
    return None


#: what `codex exec` prints on stderr as it starts, whatever happens next (0.171)
_STDIN_BANNERS = (b"Reading additional input from stdin", b"Reading prompt from stdin")
#: Codex's own retry settings of a model provider (config.toml `model_providers.<id>`)
_RETRY_KEYS = ("request_max_retries", "stream_max_retries")
#: a provider id that can be named in a dotted `-c` key as it is
_PLAIN_ID = re.compile(r"^[A-Za-z0-9_-]+$")


def _user_config(environ: dict[str, str]) -> JsonObject:
    import tomllib

    home = environ.get("CODEX_HOME") or os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".codex")
    try:
        return tomllib.loads(Path(home, "config.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def custom_provider(environ: dict[str, str]) -> str | None:
    """The id of the provider the user's config.toml selects when it defines that provider itself
    (a gateway, a local model server), else None (the built-in providers)."""
    config = _user_config(environ)
    provider = config.get("model_provider")
    providers = config.get("model_providers")
    if (
        not isinstance(provider, str)
        or not isinstance(providers, dict)
        or not isinstance(providers.get(provider), dict)
    ):
        return None
    return provider if _PLAIN_ID.match(provider) else None


def codex_base_url(environ: dict[str, str]) -> str | None:
    """The base URL of the provider the user's config.toml selects, when it names one."""
    config = _user_config(environ)
    provider = config.get("model_provider")
    providers = config.get("model_providers")
    chosen = providers.get(provider) if isinstance(provider, str) and isinstance(providers, dict) else None
    if isinstance(chosen, dict):
        url = chosen.get("base_url")
        return url if isinstance(url, str) else None
    url = config.get("openai_base_url")
    return url if isinstance(url, str) else None
