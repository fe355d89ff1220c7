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

`--usage-output-file=PATH` writes the run's usage summary at exit: the
harness points it into RunContext.scratch (outside the work tree and the
private home) and reads it after the run.

Bring-your-own-key mode ("copilot help environment"): COPILOT_PROVIDER_BASE_URL
points the CLI at any OpenAI-compatible, Azure or Anthropic endpoint (a
gateway, a local model server), COPILOT_PROVIDER_TYPE / _WIRE_API choose the
wire, COPILOT_PROVIDER_API_KEY / _BEARER_TOKEN the key, and COPILOT_OFFLINE=true
stops every GitHub call (sign-in, telemetry, update checks). BYOK requires an
explicit model (`--agent-model`). The records are read in `stream.py`.

Not observable: cost in USD (Copilot counts premium requests, not dollars),
the model that answered (every `model` field names the one asked for),
approval requests (none in -p mode), and whether a failed tool call was a
permission refusal (only guessed from the error text).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import sys
from functools import lru_cache
from typing import TYPE_CHECKING, ClassVar

from pytest_agentdrift.agents.base import AdapterOutput, LiveNote, ProductAdapter, RunContext
from pytest_agentdrift.agents.common import as_dict, as_int, as_str, option_list, read_jsonl
from pytest_agentdrift.agents.copilot.stream import (
    USAGE_FILE,
    CopilotOutput,
    StreamParser,
    no_events,
    payload,
    usage_summary,
)
from pytest_agentdrift.shapes import JsonObject

if TYPE_CHECKING:
    from pytest_agentdrift.agents.infra import InfraError

#: permission presets -> documented flags
_PERMISSION_FLAGS: dict[str, list[str]] = {
    "allow-all-tools": ["--allow-all-tools"],
    "allow-all": ["--allow-all"],
    "default": [],
}


class CopilotAdapter(ProductAdapter):
    name = "copilot"
    product = "github/copilot-cli"
    surface = "cli"
    binary: ClassVar[str] = "copilot"

    # The documented token variables, in precedence order. COPILOT_HOME is not
    # forwarded (it would point back at the real config dir); COPILOT_MODEL and
    # COPILOT_ALLOW_ALL are not either: the run's options decide those.
    # BYOK: the provider's key, wire and limits, and offline mode (all documented variables).
    env_allowlist = (
        "COPILOT_GITHUB_TOKEN",
        "GH_TOKEN",
        "GITHUB_TOKEN",
        "COPILOT_OFFLINE",
        "COPILOT_PROVIDER_TYPE",
        "COPILOT_PROVIDER_WIRE_API",
        "COPILOT_PROVIDER_TRANSPORT",
        "COPILOT_PROVIDER_API_KEY",
        "COPILOT_PROVIDER_BEARER_TOKEN",
        "COPILOT_PROVIDER_HEADERS",
        "COPILOT_PROVIDER_MODEL_ID",
        "COPILOT_PROVIDER_WIRE_MODEL",
        "COPILOT_PROVIDER_MAX_PROMPT_TOKENS",
        "COPILOT_PROVIDER_MAX_OUTPUT_TOKENS",
        "COPILOT_PROVIDER_AZURE_API_VERSION",
    )
    # a gateway or a local model server in bring-your-own-key mode; else GitHub's model service
    endpoint_env = ("COPILOT_PROVIDER_BASE_URL",)
    default_endpoint = "https://api.githubcopilot.com"
    # every record names the model the CLI asks for (model.call_start, assistant.message)
    run_reported = ("model_id",)
    # the usage summary (--usage-output-file): tokens are in no event of the stream
    scratch_files: ClassVar[tuple[str, ...]] = (USAGE_FILE,)
    # modelMetrics inputTokens count the cached prompt tokens too (measured against an endpoint)
    usage_input_includes_cached = True
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
    defaults: ClassVar[dict[str, object]] = {"permission_mode": "allow-all-tools"}

    option_keys = ("model", "permission_mode", "allowed_tools", "denied_tools")
    output_format = "json (JSONL)"

    def bundled_runtimes(self, env: dict[str, str]) -> dict[str, str]:
        """The Node the CLI runs on: the platform binary carries its own (the npm launcher's
        host `node` only starts it)."""
        native = platform_binary(shutil.which(self.binary, path=env.get("PATH")))
        if native is None:
            return {}
        try:
            st = os.stat(native)
        except OSError:
            return {}
        version = bundled_node(native, st.st_size, st.st_mtime_ns)
        return {"node": f"{version} (bundled with {self.binary})"} if version else {}

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
        if ctx.scratch is not None:
            # tokens are not in the stream: the CLI writes them here at exit, outside the work tree
            argv.append(f"--usage-output-file={ctx.scratch / USAGE_FILE}")
        return argv

    # -- parsing ---------------------------------------------------------

    def parse_output(self, stdout: bytes, stderr: bytes) -> AdapterOutput:
        stream = read_jsonl(stdout)
        parser = StreamParser()
        errors = list(stream.errors)
        for lineno, rec in stream.records:
            kind = as_str(rec.get("type"))
            if kind is None:
                errors.append(f"stdout line {lineno}: object without a 'type'")
                continue
            parser.feed(kind, payload(rec))
        return parser.finish(stream, stdout, errors)

    def read_scratch(self, out: AdapterOutput, files: dict[str, bytes | None]) -> None:
        """Tokens from the usage summary the CLI wrote at exit (`--usage-output-file`): its
        stream carries none. The summary counts model requests; a count other than the calls
        the stream shows is said in parse_errors and the tokens are not taken."""
        if not isinstance(out, CopilotOutput):
            return
        data = files.get(USAGE_FILE)
        if data is None:
            if not out.usage_from_stream:
                out.parse_errors.append(f"no usage summary ({USAGE_FILE}): the CLI wrote none, tokens unobserved")
            return
        usage, requests, problem = usage_summary(data)
        calls = out.model_calls
        if problem is None and calls is not None and requests is not None and requests != calls:
            problem = f"it counts {requests} model request(s), the stream shows {calls}"
        if problem is not None:
            out.parse_errors.append(f"usage summary ({USAGE_FILE}) not used: {problem}")
            return
        out.usage = usage

    def classify_ending(
        self, out: AdapterOutput, exit_code: int | None, stdout: bytes, stderr: bytes, timed_out: bool
    ) -> InfraError | None:
        """What the stream said; a CLI that printed no JSON event at all (not signed in, a refused
        configuration, a version without the JSON format) is the infrastructure's, never the agent's."""
        if out.infra_error is not None:
            return out.infra_error
        if not timed_out and not read_jsonl(stdout).records:
            return no_events(exit_code, stdout, stderr)
        found = super().classify_ending(out, exit_code, stdout, stderr, timed_out)
        last_error = next((as_str(e.get("message")) for e in reversed(out.events) if e.get("type") == "error"), None)
        if found is not None and found["class"] == "crashed" and last_error:
            # the CLI's own last error says more than its (empty) stderr
            from pytest_agentdrift.agents.infra import infra_error

            found = infra_error("crashed", last_error, "copilot", exit_code=exit_code)
        return found

    def live_record(self, record: JsonObject) -> LiveNote | None:
        """Progress and running usage from one session event."""
        kind = as_str(record.get("type"))
        data = payload(record)
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


# -- the Node the CLI carries ----------------------------------------------------------------------

#: Node's own release URL, compiled into every Node binary (process.release): the bundled version
_NODE_RELEASE = re.compile(rb"https://nodejs\.org/download/release/(v\d+\.\d+\.\d+)/")
_ARCH = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}


def platform_binary(launcher: str | None) -> str | None:
    """The native CLI the npm launcher (`@github/copilot/npm-loader.js`) starts: the platform
    package installed beside it (`@github/copilot-linux-x64/copilot`, or linuxmusl), or the
    launcher itself when it is a standalone binary."""
    if launcher is None:
        return None
    real = os.path.realpath(launcher)
    if not real.endswith(".js"):
        return real
    scope = os.path.dirname(os.path.dirname(real))  # .../node_modules/@github
    arch = _ARCH.get(platform.machine().lower())
    for libc in ("linux", "linuxmusl") if sys.platform.startswith("linux") else (sys.platform,):
        candidate = os.path.join(scope, f"copilot-{libc}-{arch}", "copilot")
        if arch and os.path.isfile(candidate):
            return candidate
    return None


@lru_cache(maxsize=8)
def bundled_node(path: str, size: int, mtime_ns: int) -> str | None:
    """The version of the Node runtime compiled into a single-executable binary, or None."""
    import mmap

    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            at = data.find(b"https://nodejs.org/download/release/v")
            m = _NODE_RELEASE.match(data[at : at + 80]) if at >= 0 else None
    except (OSError, ValueError):
        return None
    return m.group(1).decode() if m else None
