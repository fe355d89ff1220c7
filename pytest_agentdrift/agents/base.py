"""The adapter protocol, the generic command adapter and the reference presets.

An adapter is a small object with no pytest in it. The runner asks it for
the argv of one run (`build_argv`), runs that argv itself in the sandbox, and
hands the captured stdout/stderr back to `parse_output`, which turns the
product's own output format into the common event list, usage figures, the
final report (when the output holds one) and the model id the host reported.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, TypedDict

from pytest_agentdrift.agents.infra import InfraError
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.shapes import JsonObject
from pytest_agentdrift.vocabulary import (  # the sampling envelope a product CLI cannot report, the field groups
    CLIENT_FIELDS,
    ENVELOPE_FIELDS,
    GATEWAY_FIELDS,
    IDENTITY_FIELDS,
    MODEL_FIELDS,
)


@dataclass(frozen=True)
class RunContext:
    """What an adapter may use to build the argv of one run."""

    task_id: str
    task_file: Path  # task.md (read-only)
    task_text: str
    task_dir: Path  # the frozen task directory (read-only)
    workdir: Path  # the private work tree (cwd of the agent)
    options: dict[str, object] = field(default_factory=dict)  # model, permission_mode, sandbox, ...
    #: a directory of the harness's, outside the work tree and the private home, where the product
    #: writes the side outputs the adapter names in `scratch_files` (read after the run, then removed)
    scratch: Path | None = None


def add_counts(a: int | None, b: int | None) -> int | None:
    """Sum two optional counts: None means "not reported", so None + n is n."""
    if a is None:
        return b
    if b is None:
        return a
    return a + b


#: the token figures of a Usage that parts add up to
_SUMMED_TOKENS = ("input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens", "reasoning_tokens")


@dataclass
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    #: input written to the provider's prompt cache (Anthropic bills it apart); None: not reported
    cache_write_tokens: int | None = None
    #: of the output, the model's reasoning (OpenAI reports it apart); None: not reported
    reasoning_tokens: int | None = None
    #: when the product reports its calls apart: the agent's own conversation and the CLI's side
    #: calls (titles, summaries, other models), token figures each; the totals above are their sum
    main_thread: dict[str, int | None] | None = None
    side_calls: dict[str, int | None] | None = None
    #: `reported` when the product priced the model that answered, `estimated` when it priced
    #: the calls as another model (a gateway answering with a model the CLI has no price for)
    cost_basis: str | None = None
    priced_as: list[str] | None = None  # the models the product's cost was computed for

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "cost_usd": self.cost_usd,
            "cache_write_tokens": self.cache_write_tokens,
            "reasoning_tokens": self.reasoning_tokens,
        }
        for name in ("main_thread", "side_calls", "cost_basis", "priced_as"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    def add_tokens(self, part: Usage) -> None:
        """Add a part's token figures (one call, one turn, one model) to these; cost and the split
        are the product's own totals, never summed."""
        for name in _SUMMED_TOKENS:
            setattr(self, name, add_counts(getattr(self, name), getattr(part, name)))

    def tokens(self) -> dict[str, int | None]:
        """The token figures alone (one part of a split)."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


class LiveNote(TypedDict, total=False):
    """What one record of a product's stream says as it arrives (AgentAdapter.live_record, read by
    run/budget.py): progress, and running usage keyed by message (`usage_key`) or as the final
    `total`."""

    event: str
    usage_key: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    total: bool


@dataclass
class AdapterOutput:
    """What an adapter read from the agent's own output."""

    events: list[JsonObject] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    final_report: JsonObject | None = None  # used when the agent wrote no report file
    model_stamp: str | None = None  # the model id the host reported, verbatim
    parse_errors: list[str] = field(default_factory=list)  # malformed / truncated stream
    # infrastructure (agents/infra.py): the run ended on the provider or the machine, read from the
    # product's own structured output; `answered` is whether the model answered at all (None: unknown)
    infra_error: InfraError | None = None
    answered: bool | None = None
    #: identity facts the product reported about itself while it ran (its init event: the model
    #: it requested, its tools), by identity field; they fill what capture left unobserved
    run_identity: JsonObject = field(default_factory=dict)


class AgentAdapter:
    """Base class. Subclasses set the class attributes and override methods."""

    name: str = ""  # a class attribute; an instance may name its variant (the reference agent's play)
    product: ClassVar[str] = "generic"  # vendor/product identifier for the manifest
    surface: ClassVar[str] = "cli"
    #: environment variable names the product needs (credentials, config); values never recorded
    env_allowlist: ClassVar[tuple[str, ...]] = ()
    #: API hosts the recording proxy lets through for this product
    api_hosts: ClassVar[tuple[str, ...]] = ()
    #: hosts the product itself contacts in the background (telemetry, experiments, update
    #: checks, git remotes it probes), refused like any other and recorded apart: a refused attempt
    #: to one of them by one of `background_programs` is not the agent's network effect
    background_hosts: tuple[str, ...] = ()
    background_programs: ClassVar[tuple[str, ...]] = ()
    #: environment variables naming the product's model endpoint (a base URL: a gateway, a local
    #: model server): passed on when set, and that endpoint's host:port is let through the proxy
    endpoint_env: ClassVar[tuple[str, ...]] = ()
    #: environment the preset sets on every run (recorded by describe())
    fixed_env: ClassVar[dict[str, str]] = {}
    #: whether the agent gets a writable /tmp of its own under bubblewrap (a product whose own
    #: sandbox writes there); recorded in the mount plan as `tmpfs /tmp`
    private_tmp: ClassVar[bool] = False
    #: directories the product's own sandbox creates in the work tree as mount points; left empty,
    #: they are listed as leftovers, not as the agent's changes
    sandbox_dirs: ClassVar[tuple[str, ...]] = ()
    #: paths under the work tree's .git where the product keeps state of its own (a project id):
    #: listed as leftovers, never as the agent's git mutations; git itself must not read them
    product_state: tuple[str, ...] = ()
    #: under bubblewrap, the uid the agent runs as in a user namespace of its own (mapped to the
    #: harness's uid; recorded in the mount plan); None: the harness's own uid
    sandbox_user: ClassVar[int | None] = None
    #: files under the user's home the product reads (copied into the private home)
    home_files: ClassVar[tuple[str, ...]] = ()
    #: of those, the ones holding credentials: copied, labelled, never hashed or recorded
    credential_files: ClassVar[tuple[str, ...]] = ()
    #: whether the agent may see the task directory (solution/, checks); only the reference agent
    needs_task_dir: bool = False
    #: identity fields this adapter can never observe (the `unobservable` accept group)
    unobservable: ClassVar[tuple[str, ...]] = ("server_revision",)
    #: of those, the ones a product preset documents its product cannot report (no flag, no
    #: record): the `unreportable` accept group, accepted by default
    unreportable: ClassVar[tuple[str, ...]] = ()
    #: identity fields the product reports itself at run time (AdapterOutput.run_identity): left
    #: unobserved before the runs, they are compared on the finished run
    run_reported: ClassVar[tuple[str, ...]] = ()
    #: the model endpoint the product talks to when its environment names none
    default_endpoint: ClassVar[str | None] = None
    #: whether the model stamp is read from the agent's own `usage` events (`model`): the generic
    #: protocol, for a command that reports the model that answered (a product's stream says it itself)
    model_in_events: ClassVar[bool] = False
    #: whether the product's input_tokens already include cached input (pricing must not count it twice)
    usage_input_includes_cached: ClassVar[bool] = False
    #: files the product writes into RunContext.scratch (a usage summary, ...): the harness gives it
    #: that directory, reads these files after the run and hands them to `read_scratch`
    scratch_files: ClassVar[tuple[str, ...]] = ()

    def build_argv(self, ctx: RunContext) -> list[str]:
        raise NotImplementedError

    def version_argv(self) -> list[str] | None:
        """The documented read-only version display, or None when there is none."""
        return None

    def argv_template(self, options: Mapping[str, object] | None = None) -> list[str]:
        """The argv of a run with placeholders left in: what the manifest records."""
        ctx = RunContext(
            task_id="{task_id}",
            task_file=Path("{task_file}"),
            task_text="{task_text}",
            task_dir=Path("{task_dir}"),
            workdir=Path("{workdir}"),
            options=dict(options or {}),
            scratch=Path("{scratch}") if self.scratch_files else None,
        )
        return self.build_argv(ctx)

    def executable(self) -> str | None:
        """The binary that must exist for this adapter to run (checked before any task)."""
        return None

    def parse_output(self, stdout: bytes, stderr: bytes) -> AdapterOutput:
        return AdapterOutput()

    def read_scratch(self, out: AdapterOutput, files: dict[str, bytes | None]) -> None:
        """Complete `out` (parsed from stdout) with the side outputs of `scratch_files` (None: the
        product wrote no such file)."""

    def sandbox_paths(self, env: dict[str, str]) -> list[tuple[str, str]]:
        """(path, why) the agent needs to read under bubblewrap beyond the system, the
        harness's Python runtime and what its argv names (run/agentpaths.py `agent_paths`
        adds the program it starts, with its install prefix, and every absolute path the
        argv names). An adapter that needs more says so here; recorded in the manifest."""
        return []

    def bundled_runtimes(self, env: dict[str, str]) -> dict[str, str]:
        """Runtimes the product carries inside itself (a CLI built with its own Node): name ->
        version, recorded in the manifest instead of the host's (which the product never runs)."""
        return {}

    def path_links(self, env: dict[str, str]) -> dict[str, str]:
        """Extra program names the agent finds first on its PATH -> the file each runs (a helper
        the product re-executes itself as); put in the harness's toolchain directory."""
        return {}

    def endpoint_hosts(self, environ: dict[str, str]) -> list[str]:
        """`host:port` of each model endpoint the environment points the product at (`endpoint_env`)."""
        return [hp for name in self.endpoint_env if (hp := url_host_port(environ.get(name)))]

    def classify_ending(
        self, out: AdapterOutput, exit_code: int | None, stdout: bytes, stderr: bytes, timed_out: bool
    ) -> InfraError | None:
        """An infrastructure error that ended the run (agents/infra.py), or None.

        The generic protocol has no structured output of its own: only what
        parse_output found (nothing) counts here; the agent's report
        (`status: "infra_error"`) and launch failures are read by the runner.
        """
        return out.infra_error

    def live_record(self, record: JsonObject) -> LiveNote | None:
        """One record of the product's stdout stream as it arrives (run/budget.py).

        Returns `{"event": "Bash: pytest -q", "usage_key": id, "input_tokens": n,
        "output_tokens": n, "cost_usd": x}` (any subset) or None. Usage under the
        same `usage_key` replaces the previous figures (a message repeated per
        block); without a key it adds up.
        """
        return None

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name,
            "product": self.product,
            "surface": self.surface,
            "unobservable": list(self.unobservable),
            "unreportable": list(self.unreportable),
            "run_reported": list(self.run_reported),
        }


def url_host_port(url: str | None) -> str | None:
    """`host:port` of an http(s) URL (the scheme's port when none is given), or None."""
    from urllib.parse import urlsplit

    if not url:
        return None
    try:
        parts = urlsplit(url)
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None
    return f"{parts.hostname}:{port}"


def endpoint_label(url: str | None) -> str | None:
    """A model endpoint as identity: `scheme://host[:port]/path`, lower-case scheme and host,
    without user, password, query or fragment (where gateways carry keys); None when `url` is
    not an http(s) URL with a host."""
    from urllib.parse import urlsplit

    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    netloc = host if port in (None, {"https": 443, "http": 80}[scheme]) else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def expand_placeholders(template: list[str], ctx: RunContext) -> list[str]:
    values = {
        "task_file": str(ctx.task_file),
        "task_text": ctx.task_text,
        "workdir": str(ctx.workdir),
        "task_id": ctx.task_id,
        "task_dir": str(ctx.task_dir),
    }
    out = []
    for arg in template:
        try:
            out.append(arg.format_map(values))
        except (KeyError, ValueError, IndexError) as exc:
            raise AgentDriftError(f"--agent-cmd: bad placeholder in {arg!r} ({exc}); known: {sorted(values)}") from None
    return out


class CommandAdapter(AgentAdapter):
    """Any agent given as `--agent-cmd "…"` (shlex-split, placeholders expanded)."""

    name = "cmd"
    model_in_events = True
    #: a command is a black box: what options and tools it uses is only known to its operator
    #: (--agent-declare) or to itself (--agent-describe-cmd). Its model traffic is not: through
    #: the harness's model gateway the harness sees the model asked for, the endpoint and the
    #: model that answered (GATEWAY_FIELDS); nor is the program it runs, identified by capture
    #: (manifest/agentcmd.py: its package's version, or its bytes and its venv's distributions)
    #: as its cli_version. So no word that accepts the unobservable hides them
    unobservable = tuple(
        f
        for f in IDENTITY_FIELDS
        if f
        in (MODEL_FIELDS - GATEWAY_FIELDS)
        | (CLIENT_FIELDS - {"cli_version"})
        | {*ENVELOPE_FIELDS, "permission_mode", "sandbox", "built_in_tools"}
    )
    #: what neither the harness nor any gateway can see of a black box (its sampling envelope,
    #: model options, permission and sandbox settings, tools, update setting): accepted by
    #: default, as a preset's unreportable fields are
    unreportable = unobservable
    #: reported at run time by the harness's model gateway, compared on the finished run
    run_reported = ("model_id", "model_endpoint")

    def __init__(self, command: str, product_paths: Iterable[str] = (), background_hosts: Iterable[str] = ()):
        # what the operator declares of the product behind the command (--agent-product-path,
        # --agent-background-host), as a preset declares its product_state and background_hosts
        self.product_paths = tuple(dict.fromkeys(p.strip().strip("/") for p in product_paths if p.strip("/ ")))
        self.product_state = tuple(p for p in self.product_paths if p.startswith(".git/"))
        self.background_hosts = tuple(dict.fromkeys(h.strip().lower() for h in background_hosts if h.strip()))
        try:
            self.template = shlex.split(command)
        except ValueError as exc:
            raise AgentDriftError(f"--agent-cmd: cannot split {command!r}: {exc}") from None
        if not self.template:
            raise AgentDriftError("--agent-cmd is empty")
        # The agent runs in its work tree: a relative path to an existing file
        # (`python my_agent.py`) means the file where pytest was started.
        self.template = [
            os.path.abspath(a) if "{" not in a and not os.path.isabs(a) and os.path.isfile(a) else a
            for a in self.template
        ]
        # {task_dir} hands the agent the whole task directory (solution/, checks): only then is it visible
        self.needs_task_dir = any("{task_dir}" in a for a in self.template)

    def build_argv(self, ctx: RunContext) -> list[str]:
        return expand_placeholders(self.template, ctx)

    def argv_template(self, options: Mapping[str, object] | None = None) -> list[str]:
        return list(self.template)

    def executable(self) -> str | None:
        return self.template[0]

    #: a command has no program of its own the harness could name: a declared background host is
    #: the product's whichever of its processes calls it (it is refused all the same)
    background_any_program = True

    def declared_product(self) -> dict[str, list[str]]:
        """What the operator declared of the product (recorded in the manifest and identity)."""
        out = {"product_paths": list(self.product_paths), "background_hosts": list(self.background_hosts)}
        return {k: v for k, v in out.items() if v}

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "command": self.template, **self.declared_product()}


class ProductAdapter(AgentAdapter):
    """A real product's CLI: one binary, documented option defaults, a structured output format."""

    binary: ClassVar[str] = ""
    #: option keys this product understands (from --agent-model / --agent-permission-mode / ...)
    option_keys: ClassVar[tuple[str, ...]] = ("model", "permission_mode")
    #: defaults applied when the user gives none (recorded via describe())
    defaults: ClassVar[dict[str, object]] = {}
    output_format: ClassVar[str] = ""
    #: env var that relocates the user config dir -> the home-relative dir it replaces
    config_home_env: ClassVar[dict[str, str]] = {}
    home_dirs: ClassVar[tuple[str, ...]] = ()
    #: environment naming the CA certificates the product trusts (a gateway's or a proxy's own
    #: CA): passed on, and the files they name are made readable in the sandbox
    ca_env: ClassVar[tuple[str, ...]] = ("NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR")
    #: what a product CLI cannot report when the user sets nothing (no flag, no record of its
    #: effective value): the sampling envelope, its model options and its auto-update state
    unreportable: ClassVar[tuple[str, ...]] = (*ENVELOPE_FIELDS, "model_options", "auto_update_state")
    unobservable: ClassVar[tuple[str, ...]] = ("server_revision", *unreportable)

    def executable(self) -> str | None:
        return self.binary

    def sandbox_paths(self, env: dict[str, str]) -> list[tuple[str, str]]:
        return [(env[name], f"{name}: CA certificates the product trusts") for name in self.ca_env if env.get(name)]

    def version_argv(self) -> list[str] | None:
        return [self.binary, "--version"]

    def effective_options(self, options: Mapping[str, object]) -> dict[str, object]:
        merged = {**self.defaults, **{k: v for k, v in options.items() if v is not None}}
        return {k: merged[k] for k in self.option_keys if k in merged}

    def classify_ending(
        self, out: AdapterOutput, exit_code: int | None, stdout: bytes, stderr: bytes, timed_out: bool
    ) -> InfraError | None:
        """What the stream said, else a CLI that exited non-zero before its model answered."""
        if out.infra_error is not None:
            return out.infra_error
        if timed_out or out.answered is not False:
            return None
        from pytest_agentdrift.agents.infra import crashed_before_answer

        return crashed_before_answer(False, exit_code, stderr, stdout, self.name)

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "binary": self.binary,
            "output_format": self.output_format,
            "defaults": dict(self.defaults),
            "fixed_env": dict(self.fixed_env),
            "endpoint_env": list(self.endpoint_env),
            "default_endpoint": self.default_endpoint,
        }


class ReferenceAdapter(AgentAdapter):
    """The deterministic reference agent: applies a task's solution/."""

    name = "reference"
    product = "pytest-agentdrift/reference"
    unobservable = ()  # runs no model: those fields are not_applicable
    profile = "faithful"
    needs_task_dir = True  # it applies the task's solution/

    def __init__(self, play: str | None = None):
        # `reference:wrong/NAME` plays solution/wrong/NAME/ of every task: an oracle's wrong agent
        self.play = play
        if play is not None:
            self.name = f"{type(self).name}:{play}"

    def _play_args(self) -> list[str]:
        return ["--play", self.play] if self.play else []

    def build_argv(self, ctx: RunContext) -> list[str]:
        return [
            sys.executable,
            "-m",
            "pytest_agentdrift.agents.reference",
            "--task-dir",
            str(ctx.task_dir),
            "--profile",
            self.profile,
            *self._play_args(),
        ]

    def version_argv(self) -> list[str] | None:
        return [
            sys.executable,
            "-m",
            "pytest_agentdrift.agents.reference",
            "--version",
            "--profile",
            self.profile,
            *self._play_args(),
        ]

    def executable(self) -> str | None:
        return sys.executable


class DriftedReferenceAdapter(ReferenceAdapter):
    name = "reference-drifted"
    profile = "drifted"


def builtin_adapters() -> dict[str, type[AgentAdapter]]:
    """Preset name -> adapter class. Real-product adapters are imported lazily."""
    presets: dict[str, type[AgentAdapter]] = {
        ReferenceAdapter.name: ReferenceAdapter,
        DriftedReferenceAdapter.name: DriftedReferenceAdapter,
    }
    for module, cls_name in (
        ("claude_code", "ClaudeCodeAdapter"),
        ("codex", "CodexAdapter"),
        ("copilot", "CopilotAdapter"),
        ("gemini", "GeminiAdapter"),
        ("opencode", "OpenCodeAdapter"),
    ):
        try:
            mod = __import__(f"{__package__}.{module}", fromlist=[cls_name])
        except ImportError:
            continue
        cls = getattr(mod, cls_name, None)
        if cls is not None:
            presets[cls.name] = cls
    presets.update(entry_point_adapters())
    return presets


def entry_point_adapters() -> dict[str, type[AgentAdapter]]:
    """Adapters other packages register in the `pytest_agentdrift.adapters` group."""
    from importlib.metadata import entry_points

    found: dict[str, type[AgentAdapter]] = {}
    for ep in entry_points(group="pytest_agentdrift.adapters"):
        try:
            cls = ep.load()
        except Exception as exc:  # a broken third-party package must not break every session
            raise AgentDriftError(f"adapter entry point {ep.name!r} ({ep.value}) failed to load: {exc}") from None
        if not (isinstance(cls, type) and issubclass(cls, AgentAdapter)):
            raise AgentDriftError(f"adapter entry point {ep.name!r} ({ep.value}) is not an AgentAdapter subclass")
        found[ep.name] = cls
    return found


def get_adapter(name: str, extra: dict[str, type[AgentAdapter]] | None = None) -> AgentAdapter:
    presets = {**builtin_adapters(), **(extra or {})}
    if name.startswith(ReferenceAdapter.name + ":") and name not in presets:
        from pytest_agentdrift.agents.reference import check_play

        try:
            return ReferenceAdapter(play=check_play(name.split(":", 1)[1]))
        except ValueError as exc:
            raise AgentDriftError(f"--agent {name}: {exc}") from None
    try:
        return presets[name]()
    except KeyError:
        raise AgentDriftError(f"--agent: unknown agent {name!r}; known: {', '.join(sorted(presets))}") from None
