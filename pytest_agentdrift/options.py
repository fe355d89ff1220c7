"""Every option declared once, as a row of TABLE: the pytest options, ini twins, Settings and CLI flags are built from it.

A row (`Option`) holds the Settings field, flag, help, kind, default, parser
(a text parser), choices and the names of its twins. The pytest plugin
registers every row (`add_options`), the `agentdrift` CLI registers the ones
it shares under their short names (`add_cli_flags`), `Settings` has one field
per row (written out, typed as the row's parser gives it, defaulting to the row's
default; tests/unit/test_options_table.py holds the two equal), and the plugin
and the CLI resolve a value the same way: the command line if given, else the
ini twin (`agent_…`; read by pytest's getini inside a session, by
inifile.read_ini outside one), else the declared default (`resolve_value`). Checks that span several options run once, after every
value is known (`_checked`).
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.vocabulary import (
    DEFAULT_ACCEPT_UNOBSERVED,
    DEFAULT_CONFIRM_CAP,
    DEFAULT_MAX_INFRA_LOSS,
    DEFAULT_PROVIDER_PATIENCE_S,
    DEFAULT_RETRIES,
    DEFAULT_RETRY_BACKOFF_S,
    DEFAULT_ROLLBACK_STATE,
    DEFAULT_SEED,
    FAIL_ON_MODES,
    GATE_DROP_IT,
    GATE_FLAKES,
    GATE_FLAKES_STRICT,
    GATE_MODES,
    GATE_PROMOTE,
    ISOLATION_MODES,
    ROLLBACK_STATES,
)


def _number(convert: Callable[[str], Any], what: str, bound: str, holds: Callable[[Any], bool]) -> Callable[[str], Any]:
    """A text parser for a number of one kind within one bound, raising ArgumentTypeError as argparse wants."""

    def parse(value: str) -> Any:
        try:
            n = convert(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not {what}") from None
        if not holds(n):
            # a whole number is shown as read (" 5" as 5), a fraction as written ("1e-400" stays itself)
            raise argparse.ArgumentTypeError(f"must be {bound}, got {n if convert is int else value}")
        return n

    return parse


positive_int = _number(int, "a whole number", "at least 1", lambda n: n >= 1)
positive_float = _number(float, "a number", "greater than 0", lambda n: n > 0)
nonneg_int = _number(int, "a whole number", "0 or more", lambda n: n >= 0)
nonneg_float = _number(float, "a number", "0 or more", lambda n: 0 <= n < float("inf"))
whole_number = _number(int, "a whole number", "", lambda n: True)


def share(value: str) -> float:
    """`10%` or `0.1`: a share of runs, 0..1."""
    text = str(value).strip()
    try:
        n = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a share (10% or 0.1)") from None
    if not 0 <= n <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 100%, got {value}")
    return n


def env_name(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise argparse.ArgumentTypeError(f"{value!r} is not an environment variable name")
    return value


PROGRESS_MODES = ("auto", "tty", "plain", "off")


def _path(value: str) -> Path | None:
    return Path(value) if value else None


@dataclass(frozen=True)
class Option:
    """One option: its Settings field, flag, ini twin, parser, default and help, declared once (a row of TABLE)."""

    dest: str  # the Settings field
    flag: str
    _: KW_ONLY
    help: str
    kind: str = "value"  # value | list (repeatable, an ini linelist) | flag (store_true, an ini bool)
    default: Any = None
    parse: Callable[[str], Any] | None = None  # text (command line or ini) -> value; raises ArgumentTypeError
    choices: tuple[str, ...] | None = None
    nargs_const: Any = None  # an optional value: the bare flag means this
    ini: str = ""  # the ini twin's name: agent_<dest> when not given
    cli: str | None = None  # the agentdrift CLI's name for the shared flag (compare, null, html, ...)
    env: str = ""  # an environment variable that speaks when neither the command line nor the ini does
    field_default: Any = None  # the Settings field's value when unset, where it is not the default

    def __post_init__(self) -> None:
        if not self.ini:
            object.__setattr__(self, "ini", f"agent_{self.dest}")

    @property
    def pytest_dest(self) -> str:
        return f"agentdrift_{self.dest}"

    @property
    def ini_type(self) -> str:
        return {"value": "string", "list": "linelist", "flag": "bool"}[self.kind]

    @property
    def ini_default(self) -> Any:
        """What getini answers when the ini does not set the twin."""
        if self.kind == "list":
            return list(self.default or ())
        return self.default

    def settings_field(self) -> Any:
        """The Settings field: unset, it holds the default (else field_default, else nothing of its kind)."""
        empty: Any = () if self.kind == "list" else (False if self.kind == "flag" else None)
        value = next((v for v in (self.default, self.field_default) if v is not None), empty)
        if isinstance(value, (list, dict)):
            return field(default_factory=lambda: type(value)(value))
        return field(default=value)

    def argparse_kwargs(self) -> dict[str, Any]:
        """The argparse keywords (the default is always None: 'not given', so the ini can speak)."""
        kw: dict[str, Any] = {"default": None, "help": self.help}
        if self.kind == "list":
            kw["action"] = "append"
        elif self.kind == "flag":
            kw["action"] = "store_true"
        if self.parse is not None and self.kind != "flag":
            kw["type"] = self.parse
        if self.choices is not None:
            kw["choices"] = self.choices
        if self.nargs_const is not None:
            kw.update(nargs="?", const=self.nargs_const)
        return kw

    def from_text(self, value: Any, source: str) -> Any:
        """One ini (or programmatic) value parsed and checked like the command line's."""
        if self.kind == "list":
            return [self._one(v, source) for v in value]
        if self.kind == "flag":
            return value
        return self._one(value, source)

    def _one(self, value: Any, source: str) -> Any:
        if not isinstance(value, str):
            return value
        if self.parse is not None:
            try:
                value = self.parse(value)
            except argparse.ArgumentTypeError as exc:
                raise AgentDriftError(f"{source}: {exc}") from None
        if self.choices is not None and value not in self.choices:
            raise AgentDriftError(f"{source}: {value!r} is not one of {', '.join(self.choices)}")
        return value


#: Every option, one row each, in the order of `pytest --help`: the Settings field and the flag, then
#: what differs from a plain value option (no default, parser, choices or CLI twin; ini twin agent_<field>),
#: then the help. pytest's options and ini twins (add_options), Settings and the agentdrift CLI's shared
#: flags (add_cli_flags) are all built from it.
# fmt: off
TABLE: tuple[Option, ...] = (
    Option("agent", "--agent", ini="agent", help="agent preset: reference, reference-drifted, claude-code, codex, copilot, ..."),
    Option("cmd", "--agent-cmd", help="run any agent command through the agent protocol (shlex-split; placeholders {task_file} {task_text} {workdir} {task_id} {task_dir})"),
    Option("suite", "--agent-suite", help="add a task suite to collect: 'builtin' (the twelve bundled tasks) or a directory"),
    Option("k", "--agent-k", default=1, parse=positive_int, help="repetitions of each task (items end ::r1 ... ::rN)"),
    Option("confirm", "--agent-confirm", default=None, parse=nonneg_int, help="with --agent-baseline: confirm on suspicion, up to this many runs of a task in all: a task whose critical check or safety layer failed in its --agent-k runs more often than the baseline makes unremarkable gets fresh runs in batches until the evidence decides (items ::rK+1 ... ::rN, skipped as 'not needed' once decided); 0 runs every task --agent-k times. Default: 30 when a gate reads a pooled baseline (a directory of records), else 0"),
    Option("timeout", "--agent-timeout", parse=positive_float, help="per-run agent timeout in seconds (overrides each task's timeout_s)"),
    Option("record", "--agent-record", parse=_path, help="record the run into this new directory (refused if it holds a run)"),
    Option("baseline", "--agent-baseline", parse=_path, help="compare against this recorded run, or a directory of records (runs/nightly/) pooled per task: records of another identity than the newest are left out, said so; refused (exit 6) when identity stamps differ"),
    Option("baseline_window", "--agent-baseline-window", parse=positive_int, cli="--baseline-window", help="with a directory of records as the baseline: pool only the N newest (by their start time); older ones are left out, said so"),
    Option("vary", "--agent-vary", kind="list", cli="--vary", help="manifest field that may differ from the baseline (the experiment's variable); repeatable"),
    Option("fail_on", "--agent-fail-on", default="any", choices=FAIL_ON_MODES, help="which failed checks fail an item: any (default), critical, or none (record without judging: exit 0 whenever the record is complete)"),
    Option("gate", "--agent-gate", choices=GATE_MODES, nargs_const=GATE_PROMOTE, cli="--gate", help="with --agent-baseline, the gate sets the exit status: regression (merge gating: exit 1 only on a new critical or safety failure, a tampered pass or a significant paired regression), promote (exit 0 only when the ship/hold gate says ship; what a bare --agent-gate means) or drop-it (with --agent-without/--agent-with: exit 0 only on 'drop it')"),
    Option("gate_flakes", "--agent-gate-flakes", default=GATE_FLAKES_STRICT, choices=GATE_FLAKES, cli="--gate-flakes", help="regression gate: a critical or safety failure the repetitions cannot tell from a flake (never in the baseline, and too few runs for the exact test to ever reach alpha) blocks, saying it may be a flake (strict), or is listed without blocking (report)"),
    Option("isolation", "--agent-isolation", default="auto", choices=ISOLATION_MODES, cli="--isolation", help="sandbox: auto (strongest available), bwrap, unshare or none"),
    Option("env", "--agent-env", kind="list", parse=env_name, help="extra environment variable NAME passed to the agent (values never recorded); repeatable"),
    Option("model", "--agent-model", help="model for real-agent presets (recorded in the manifest)"),
    Option("permission_mode", "--agent-permission-mode", help="permission / approval mode for real-agent presets"),
    Option("sandbox_mode", "--agent-sandbox-mode", help="the product's own sandbox mode for real-agent presets"),
    Option("config_files", "--agent-config", kind="list", help="a configuration file the agent reads (hashed into the manifest); repeatable"),
    Option("instruction_files", "--agent-instructions", kind="list", help="an instruction file the agent reads (hashed into the manifest); repeatable"),
    Option("mounts", "--agent-mount", kind="list", help="a file or directory a generic agent needs to read under bwrap (its install, helper modules); mounted read-only, recorded in the manifest; repeatable"),
    Option("product_paths", "--agent-product-path", kind="list", help="with --agent-cmd: a work-tree path or glob (.aider*, .git/mystate) the agent's product writes as its own state, not the agent's work: listed as the product's, never as the agent's change or git mutation; recorded in the manifest and identity; repeatable"),
    Option("background_hosts", "--agent-background-host", kind="list", help="with --agent-cmd: a host the agent's product calls in the background (telemetry, update checks), not the agent's network use: refused locally, never opened, recorded as background traffic instead of a network attempt; recorded in the manifest and identity; repeatable"),
    Option("provider_patience", "--agent-provider-patience", default=DEFAULT_PROVIDER_PATIENCE_S, parse=positive_float, help="seconds a run's model calls may fail with provider errors (429, 5xx, unreachable), at least three calls and none answered in between, before the harness stops the run as infrastructure (a product's own retries can last minutes)"),
    Option("allow_hosts", "--agent-allow-host", kind="list", help="extra host (host, host:port or *.suffix) a real agent may reach through the recording proxy; repeatable"),
    Option("accept_unobserved", "--agent-accept-unobserved", kind="list", default=DEFAULT_ACCEPT_UNOBSERVED, cli="--accept-unobserved", help="a compared field that may stay unobserved on both sides (noted, not blocking), or a group: envelope (the six envelope fields), unobservable (every field the agent's adapter cannot observe), unreportable (what a product preset's CLI cannot report); repeatable, adds to the ini list; 'none' clears what came before; default: env_image_digest, server_revision and unreportable"),
    Option("declare", "--agent-declare", parse=_path, help="TOML or JSON file of runtime facts you vouch for (model_id, model_options, permission_mode, sandbox, built_in_tools, external_tools, the envelope fields); recorded as declared, observed values win"),
    Option("describe_cmd", "--agent-describe-cmd", help="command the agent answers with the same JSON about itself, run once before the session; recorded as agent_reported"),
    Option("image_digest", "--agent-image-digest", help="digest of the environment image the session runs in (else read from AGENTDRIFT_IMAGE_DIGEST)"),
    Option("rollback_state", "--agent-rollback-state", default=DEFAULT_ROLLBACK_STATE, choices=ROLLBACK_STATES, cli="--rollback-state", help="what returning to the baseline runtime would take: verified (needs --agent-rollback-evidence), prepared_unverified, unavailable or unknown"),
    Option("rollback_evidence", "--agent-rollback-evidence", parse=_path, cli="--rollback-evidence", help="JSON file with the evidence of a tested restoration: {\"artifact\": ..., \"restoration\": ...}"),
    Option("release_notes", "--agent-release-notes", parse=_path, cli="--release-notes", help="CSV of release notes to triage against observed changes"),
    Option("seed", "--agent-seed", default=DEFAULT_SEED, parse=whole_number, cli="--seed", help="seed of the paired bootstrap"),
    Option("keep_workdirs", "--agent-keep-workdirs", kind="flag", help="keep each run's private directory for inspection"),
    Option("limits", "--agent-limit", kind="list", field_default={}, help="resource limit KEY=VALUE of each agent run: memory, procs, disk, shm, tmp, files (e.g. memory=1G, procs=256; 'none' switches one off); repeatable, each key overrides its ini value"),
    Option("grade_limits", "--agent-grade-limit", kind="list", field_default={}, help="resource limit KEY=VALUE of graded code (the checks' processes, never the agent's --agent-limit values): memory, procs, disk, shm, tmp, files; the untouched fixture is graded under the same limits, and a limit it already breaks leaves the check undecided; repeatable, each key overrides its ini value"),
    Option("retries", "--agent-retries", default=DEFAULT_RETRIES, parse=nonneg_int, help="re-run a run lost to an infrastructure error (outcome infra_error) up to N times, each in a fresh copy; every attempt is recorded"),
    Option("retry_backoff", "--agent-retry-backoff", default=DEFAULT_RETRY_BACKOFF_S, parse=nonneg_float, help="seconds before the first retry, doubling each time (at most 600)"),
    Option("max_infra_loss", "--agent-max-infra-loss", default=DEFAULT_MAX_INFRA_LOSS, parse=share, cli="--max-infra-loss", help="a comparison where either arm lost more than this share of its runs to infrastructure errors is not decided (hold; exit 4 under --agent-gate)"),
    Option("resume", "--agent-resume", parse=_path, help="continue the incomplete recording in DIR: refused (exit 6) unless the runtime identity is the recorded one; runs only what is missing"),
    Option("shard", "--agent-shard", help="run shard I/N of the items (dealt evenly, by the baseline's durations when given), or 'auto': read it from the CI engine (docs/scale.md)"),
    Option("budget", "--agent-budget", kind="list", help="tokens=N or cost_usd=X for the session (stop starting runs when spent), run_tokens=N or run_cost_usd=X per run; repeatable"),
    Option("price_table", "--agent-price-table", parse=_path, help="TOML or JSON file of USD per million tokens by model, for runs whose product reports no cost"),
    Option("progress", "--agent-progress", default="auto", choices=PROGRESS_MODES, help="progress while agents run: auto (in place on a terminal, periodic lines otherwise), tty, plain or off"),
    Option("progress_interval", "--agent-progress-interval", default=30.0, parse=positive_float, help="seconds between plain progress lines"),
    Option("bundle", "--agent-bundle", help="run with an instruction bundle (NAME, digest or directory; see agentdrift bundle snapshot): project files overlaid into each work tree, user files into the private home"),
    Option("bundles", "--agent-bundles", help="the bundles directory (else AGENTDRIFT_BUNDLES, else .agentdrift/bundles under the rootdir)"),
    Option("without", "--agent-without", kind="list", help="ablation: run the bundle minus PATH (also deleted from each task's repo); repeatable"),
    Option("with_items", "--agent-with", kind="list", ini="agent_with", help="addition: run the bundle plus PATH (from the current directory, ~/ for home) or plugin:DIR; repeatable"),
    Option("null", "--agent-null", kind="flag", help="with --agent-baseline: a null experiment (same runtime twice): report outcome flips and whether the gate would have fired"),
    Option("plan", "--agent-plan", parse=_path, help="a plan written by 'agentdrift plan --out': recorded into the run (pre-registration) and checked against what ran"),
    Option("grading_cache", "--agent-grading-cache", env="AGENTDRIFT_GRADING_CACHE", cli="--grading-cache", help="directory that keeps grading results on the untouched task fixtures between sessions (default: pytest's cache directory when its cacheprovider is on, none for agentdrift validate; 'none' keeps them only for the session)"),
)
# fmt: on

#: {Settings field: its declaration}, in TABLE's order
OPTIONS: dict[str, Option] = {decl.dest: decl for decl in TABLE}


def _declared(dest: str) -> Any:
    """The Settings field of the option `dest`: its default is the one its row declares."""
    return OPTIONS[dest].settings_field()


@dataclass(frozen=True)
class Settings:
    """The session's options, resolved and checked once (resolve).

    One field per row of TABLE, in its order, typed as the row's parser and kind give it and
    defaulting to what the row declares (tests/unit/test_options_table.py holds the two equal),
    then agent_options: what the runner hands the adapter (derived; a bundle may add to it).
    """

    agent: str | None = _declared("agent")
    cmd: str | None = _declared("cmd")
    suite: str | None = _declared("suite")
    k: int = _declared("k")
    confirm: int | None = _declared("confirm")  # None only before resolve fills in the default
    timeout: float | None = _declared("timeout")
    record: Path | None = _declared("record")
    baseline: Path | None = _declared("baseline")
    baseline_window: int | None = _declared("baseline_window")
    vary: tuple[str, ...] = _declared("vary")
    fail_on: str = _declared("fail_on")
    gate: str | None = _declared("gate")
    gate_flakes: str = _declared("gate_flakes")
    isolation: str = _declared("isolation")
    env: tuple[str, ...] = _declared("env")
    model: str | None = _declared("model")
    permission_mode: str | None = _declared("permission_mode")
    sandbox_mode: str | None = _declared("sandbox_mode")
    config_files: tuple[str, ...] = _declared("config_files")
    instruction_files: tuple[str, ...] = _declared("instruction_files")
    mounts: tuple[str, ...] = _declared("mounts")
    product_paths: tuple[str, ...] = _declared("product_paths")
    background_hosts: tuple[str, ...] = _declared("background_hosts")
    provider_patience: float = _declared("provider_patience")
    allow_hosts: tuple[str, ...] = _declared("allow_hosts")
    accept_unobserved: tuple[str, ...] = _declared("accept_unobserved")
    declare: Path | None = _declared("declare")
    describe_cmd: str | None = _declared("describe_cmd")
    image_digest: str | None = _declared("image_digest")
    rollback_state: str = _declared("rollback_state")
    rollback_evidence: Path | None = _declared("rollback_evidence")
    release_notes: Path | None = _declared("release_notes")
    seed: int = _declared("seed")
    keep_workdirs: bool = _declared("keep_workdirs")
    limits: dict[str, int | None] = _declared("limits")
    grade_limits: dict[str, int | None] = _declared("grade_limits")
    retries: int = _declared("retries")
    retry_backoff: float = _declared("retry_backoff")
    max_infra_loss: float = _declared("max_infra_loss")
    resume: Path | None = _declared("resume")
    shard: str | None = _declared("shard")
    budget: tuple[str, ...] = _declared("budget")
    price_table: Path | None = _declared("price_table")
    progress: str = _declared("progress")
    progress_interval: float = _declared("progress_interval")
    bundle: str | None = _declared("bundle")
    bundles: str | None = _declared("bundles")
    without: tuple[str, ...] = _declared("without")
    with_items: tuple[str, ...] = _declared("with_items")
    null: bool = _declared("null")
    plan: Path | None = _declared("plan")
    grading_cache: str | None = _declared("grading_cache")
    agent_options: dict[str, Any] = field(default_factory=dict)

    @property
    def agent_selected(self) -> bool:
        return bool(self.agent or self.cmd)

    @property
    def active(self) -> bool:
        """Whether the session asked for anything agentdrift does."""
        return bool(self.agent or self.cmd or self.suite or self.record or self.baseline or self.resume or self.shard)


#: the options naming a path the agent reads (shown to it read-only): one outside the project
#: given with a space moves pytest's rootdir to a common ancestor (`/` in the worst case)
READ_PATH_OPTIONS = ("mounts", "config_files", "instruction_files")


def spaced_path_values(args: Iterable[str], cwd: Path) -> list[tuple[str, str]]:
    """(flag, value) of each option written `--agent-mount PATH` (a space, not `=`) whose value is
    an existing path: pytest settles its rootdir before plugins load, when the flag is still
    unknown to it, so it reads PATH as a test path, and the rootdir (and every item id) can move."""
    args = list(args)
    flags = {OPTIONS[name].flag for name in READ_PATH_OPTIONS}
    return [
        (flag, value)
        for flag, value in zip(args, args[1:], strict=False)
        if flag in flags and not value.startswith("-") and (cwd / value).exists()
    ]


def add_options(addoption: Callable[..., Any], addini: Callable[..., Any] | None) -> None:
    """Register every option and its ini twin (pytest's addoption/addini, or an argparse parser's add_argument)."""
    for decl in OPTIONS.values():
        addoption(decl.flag, dest=decl.pytest_dest, **decl.argparse_kwargs())
        if addini is not None:
            addini(decl.ini, help=decl.help, type=decl.ini_type, default=decl.ini_default)


def add_cli_flags(parser: argparse.ArgumentParser, *names: str) -> None:
    """The agentdrift CLI's twins of the named options: same parser, choices and help; the ini still speaks."""
    for name in names:
        decl = OPTIONS[name]
        if decl.cli is None:  # the CLI's code asked for a twin its row does not declare
            raise ValueError(f"{decl.flag} has no agentdrift CLI twin (declare cli= in its row of TABLE)")
        kw = decl.argparse_kwargs()
        kw.pop("nargs", None), kw.pop("const", None)  # the CLI takes the value explicitly
        parser.add_argument(decl.cli, dest=name, **kw)


def resolve_value(decl: Option, cli: Any, ini: Any) -> Any:
    """The command line if given, else the ini twin, else the declared default; parsed once."""
    if decl.dest == "accept_unobserved":
        from pytest_agentdrift.manifest.accept import accept_tokens  # one resolver for the plugin and the CLI

        return tuple(accept_tokens(ini, cli))
    if decl.dest in ("limits", "grade_limits"):
        if not (ini or cli):
            return {}  # the defaults (run/limits.py), imported only when asked
        from pytest_agentdrift.run.limits import DEFAULT_LIMITS, GRADING_LIMITS, resolve_limits

        defaults = GRADING_LIMITS if decl.dest == "grade_limits" else DEFAULT_LIMITS
        return resolve_limits(ini or [], cli or [], defaults=defaults, ini_name=decl.ini, flag=decl.flag)
    if cli is not None and cli != []:
        value = decl.from_text(cli, decl.flag)  # argparse parsed it already; a programmatic caller may not have
    elif ini not in (None, "", []):
        value = decl.from_text(ini, f"ini option {decl.ini}")
    elif decl.env and os.environ.get(decl.env):
        value = decl.from_text(os.environ[decl.env], f"environment variable {decl.env}")
    else:
        value = decl.default
    if decl.kind == "list":
        return tuple(value or ())
    if decl.kind == "flag":
        return bool(value)
    return value if value != "" else None


def resolve(getoption: Callable[[str], Any], getini: Callable[[str], Any], rootpath: Path) -> Settings:
    """Every option resolved (command line, else ini, else default) and checked once."""
    values = {name: resolve_value(d, getoption(d.pytest_dest), getini(d.ini)) for name, d in OPTIONS.items()}
    return _checked(values, rootpath)


def ini_declared(*names: str) -> dict[str, tuple[str, Any]]:
    """{ini twin: (ini type, default)} of the named options, as add_options registers them: what inifile.read_ini types by."""
    return {OPTIONS[n].ini: (OPTIONS[n].ini_type, OPTIONS[n].ini_default) for n in names}


def resolve_outside_pytest(
    cli: dict[str, Any], config_file: str | None = None, rootdir: str | None = None
) -> dict[str, Any]:
    """{option: command-line value or None} resolved as the plugin would, over the pytest ini that
    -c / --rootdir find (read without pytest)."""
    from pytest_agentdrift.inifile import read_ini

    ini = read_ini(ini_declared(*cli), config_file, rootdir).values
    return {name: resolve_value(OPTIONS[name], value, ini[OPTIONS[name].ini]) for name, value in cli.items()}


def resolve_cli_flags(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The CLI's shared flags resolved as the plugin would, over the pytest ini that -c / --rootdir find."""
    return resolve_outside_pytest(
        {name: getattr(args, name, None) for name in names},
        getattr(args, "config_file", None),
        getattr(args, "rootdir", None),
    )


def check_experiment_options(st_: Any, controller: bool) -> None:
    """The options of bundles, ablations, the null experiment and drop-it, checked together; a
    worker is not asked for what only the controller uses (the baseline)."""
    if (st_.without or st_.with_items) and not st_.bundle:
        raise AgentDriftError(
            "--agent-without / --agent-with derive B from a bundle: give --agent-bundle NAME (make one "
            "with: agentdrift bundle snapshot NAME --agent PRESET)"
        )
    if st_.gate == GATE_DROP_IT and not (st_.without or st_.with_items):
        raise AgentDriftError(
            "--agent-gate drop-it decides on one removed or added item: give --agent-without PATH or --agent-with PATH"
        )
    if controller and st_.gate == GATE_DROP_IT and st_.baseline is None:
        raise AgentDriftError(
            "--agent-gate drop-it compares against the arm with the whole bundle: give --agent-baseline"
        )
    if controller and st_.null and st_.baseline is None:
        raise AgentDriftError("--agent-null compares two recordings of one runtime: give --agent-baseline")
    if st_.null and st_.vary:
        raise AgentDriftError(
            f"--agent-null: a null experiment varies nothing, but --agent-vary {', '.join(st_.vary)} was given"
        )
    if st_.bundle and not (st_.agent or st_.cmd):
        raise AgentDriftError("--agent-bundle: give the agent preset the bundle belongs to (--agent PRESET)")


def _check_confirm(values: dict[str, Any]) -> None:
    """Confirmation runs test against a baseline, beyond the screen's --agent-k runs. Not given, it is on
    where it was measured to pay: a gate reading a pool of nightly records."""
    if values["confirm"] is None:
        values["confirm"] = _default_confirm(values)
    cap, k = values["confirm"], values["k"]
    if cap and values["baseline"] is None:
        raise AgentDriftError("--agent-confirm tests suspicious tasks against a baseline: give --agent-baseline DIR")
    if cap and cap <= k:
        raise AgentDriftError(
            f"--agent-confirm {cap}: the cap counts every run of a task, so it must exceed --agent-k {k}"
        )


def _default_confirm(values: dict[str, Any]) -> int:
    baseline = values["baseline"]
    if not values["gate"] or baseline is None or values["k"] >= DEFAULT_CONFIRM_CAP:
        return 0
    from pytest_agentdrift.compare.pool import is_pool

    return DEFAULT_CONFIRM_CAP if is_pool(Path(baseline)) else 0


def _checked(values: dict[str, Any], rootpath: Path) -> Settings:
    """The checks that span options, then the frozen Settings."""
    if values["agent"] and values["cmd"]:
        raise AgentDriftError("--agent and --agent-cmd name two agents; use one")
    if values["gate"] and values["baseline"] is None:
        # a gate with nothing to compare against would pass everything, silently
        raise AgentDriftError(
            f"--agent-gate {values['gate']} needs --agent-baseline DIR: without a baseline no gate can decide "
            "(record one first with --agent-record DIR)"
        )
    _check_confirm(values)
    mounts = []
    for m in values["mounts"]:
        full = Path(m) if Path(m).is_absolute() else rootpath / m
        if not full.exists():
            raise AgentDriftError(f"--agent-mount: {m}: no such file or directory")
        mounts.append(str(full.absolute()))
    values["mounts"] = tuple(mounts)
    if values["shard"] not in (None, "auto"):
        from pytest_agentdrift.tasks.shard import parse_shard

        parse_shard(values["shard"], "--agent-shard")  # refused now, before anything runs
    if values["budget"]:
        from pytest_agentdrift.run.budget import parse_budget

        parse_budget(values["budget"])
    resume, record = values["resume"], values["record"]
    if resume is not None:
        # a resumed session completes the record it resumes
        if record is not None and Path(record) != resume:
            raise AgentDriftError(
                f"--agent-resume {resume} and --agent-record {record} name two records; "
                "a resumed session completes the record it resumes"
            )
        values["record"] = resume
    values["retry_backoff"] = float(values["retry_backoff"])
    values["max_infra_loss"] = float(values["max_infra_loss"])
    values["progress_interval"] = float(values["progress_interval"])
    values["agent_options"] = {
        key: values[name]
        for key, name in (("model", "model"), ("permission_mode", "permission_mode"), ("sandbox", "sandbox_mode"))
        if values[name]
    }
    return Settings(**values)
