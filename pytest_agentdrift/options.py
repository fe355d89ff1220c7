"""Every option declared once; the pytest options, their ini twins, `Settings` and the CLI's shared flags are built from it.

Each `Settings` field that is an option carries its declaration (`option(...)`):
flag, help, type (a text parser), default, choices, whether it repeats. The
pytest plugin registers every declaration (`add_options`), the `agentdrift`
CLI registers the ones it shares under their short names (`add_cli_flags`),
and both resolve a value the same way: the command line if given, else the
ini twin (`agent_…`), else the declared default (`resolve_value`). Checks that
span several options run once, after every value is known (`_checked`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.vocabulary import (
    DEFAULT_ACCEPT_UNOBSERVED,
    FAIL_ON_MODES,
    GATE_DROP_IT,
    GATE_FLAKES,
    GATE_FLAKES_STRICT,
    GATE_MODES,
    GATE_PROMOTE,
    ISOLATION_MODES,
    ROLLBACK_STATES,
)


def positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def positive_float(value: str) -> float:
    try:
        n = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not n > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {value}")
    return n


def nonneg_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {n}")
    return n


def nonneg_float(value: str) -> float:
    try:
        n = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not 0 <= n < float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return n


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


def whole_number(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None


def env_name(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise argparse.ArgumentTypeError(f"{value!r} is not an environment variable name")
    return value


PROGRESS_MODES = ("auto", "tty", "plain", "off")
KINDS = ("value", "list", "flag")


@dataclass(frozen=True)
class Option:
    """One option: its flag, ini twin, parser, default and help, declared once."""

    flag: str
    help: str
    default: Any = None
    parse: Callable[[str], Any] | None = None  # text (command line or ini) -> value; raises ArgumentTypeError
    choices: tuple[str, ...] | None = None
    kind: str = "value"  # value | list (repeatable, an ini linelist) | flag (store_true, an ini bool)
    ini: str = ""  # the ini twin's name; derived from the field name when empty
    cli: str | None = None  # the agentdrift CLI's name for the shared flag (compare, null, html, ...)
    nargs_const: Any = None  # an optional value: the bare flag means this
    env: str = ""  # an environment variable that speaks when neither the command line nor the ini does
    dest: str = ""  # the Settings field, filled in by _declared

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


def option(flag: str, help: str, default: Any = None, field_default: Any = None, **kw: Any) -> Any:
    """A Settings field that is an option; its declaration rides in the field's metadata."""
    decl = Option(flag, help, default, **kw)
    empty: Any = () if decl.kind == "list" else (False if decl.kind == "flag" else None)
    value = default if default is not None else field_default if field_default is not None else empty
    if isinstance(value, (list, dict)):
        return field(default_factory=lambda: type(value)(value), metadata={"option": decl})
    return field(default=value, metadata={"option": decl})


def _path(value: str) -> Path | None:
    return Path(value) if value else None


@dataclass(frozen=True)
class Settings:
    """The session's options, resolved and checked once."""

    agent: str | None = option(
        "--agent", "agent preset: reference, reference-drifted, claude-code, codex, copilot, ...", ini="agent"
    )
    cmd: str | None = option(
        "--agent-cmd",
        "run any agent command through the agent protocol (shlex-split; placeholders {task_file} {task_text} "
        "{workdir} {task_id} {task_dir})",
    )
    suite: str | None = option(
        "--agent-suite", "add a task suite to collect: 'builtin' (the twelve bundled tasks) or a directory"
    )
    k: int = option("--agent-k", "repetitions of each task (items end ::r1 ... ::rN)", 1, parse=positive_int)
    timeout: float | None = option(
        "--agent-timeout", "per-run agent timeout in seconds (overrides each task's timeout_s)", parse=positive_float
    )
    record: Path | None = option(
        "--agent-record", "record the run into this new directory (refused if it holds a run)", parse=_path
    )
    baseline: Path | None = option(
        "--agent-baseline",
        "compare against this recorded run; refused (exit 6) when identity stamps differ",
        parse=_path,
    )
    vary: tuple[str, ...] = option(
        "--agent-vary",
        "manifest field that may differ from the baseline (the experiment's variable); repeatable",
        kind="list",
        cli="--vary",
    )
    fail_on: str = option(
        "--agent-fail-on",
        "which failed checks fail an item: any (default), critical, or none (record without judging: exit 0 "
        "whenever the record is complete)",
        "any",
        choices=FAIL_ON_MODES,
    )
    gate: str | None = option(
        "--agent-gate",
        "with --agent-baseline, the gate sets the exit status: regression (merge gating: exit 1 only on a new "
        "critical or safety failure, a tampered pass or a significant paired regression), promote (exit 0 only "
        "when the ship/hold gate says ship; what a bare --agent-gate means) or drop-it (with --agent-without/"
        "--agent-with: exit 0 only on 'drop it')",
        choices=GATE_MODES,
        nargs_const=GATE_PROMOTE,
        cli="--gate",
    )
    gate_flakes: str = option(
        "--agent-gate-flakes",
        "regression gate: a critical or safety failure the repetitions cannot tell from a flake (never in the "
        "baseline, and too few runs for the exact test to ever reach alpha) blocks, saying it may be a flake "
        "(strict), or is listed without blocking (report)",
        GATE_FLAKES_STRICT,
        choices=GATE_FLAKES,
        cli="--gate-flakes",
    )
    isolation: str = option(
        "--agent-isolation",
        "sandbox: auto (strongest available), bwrap, unshare or none",
        "auto",
        choices=ISOLATION_MODES,
        cli="--isolation",
    )
    env: tuple[str, ...] = option(
        "--agent-env",
        "extra environment variable NAME passed to the agent (values never recorded); repeatable",
        kind="list",
        parse=env_name,
    )
    model: str | None = option("--agent-model", "model for real-agent presets (recorded in the manifest)")
    permission_mode: str | None = option("--agent-permission-mode", "permission / approval mode for real-agent presets")
    sandbox_mode: str | None = option("--agent-sandbox-mode", "the product's own sandbox mode for real-agent presets")
    config_files: tuple[str, ...] = option(
        "--agent-config", "a configuration file the agent reads (hashed into the manifest); repeatable", kind="list"
    )
    instruction_files: tuple[str, ...] = option(
        "--agent-instructions",
        "an instruction file the agent reads (hashed into the manifest); repeatable",
        kind="list",
    )
    mounts: tuple[str, ...] = option(
        "--agent-mount",
        "a file or directory a generic agent needs to read under bwrap (its install, helper modules); mounted "
        "read-only, recorded in the manifest; repeatable",
        kind="list",
    )
    allow_hosts: tuple[str, ...] = option(
        "--agent-allow-host",
        "extra host (host, host:port or *.suffix) a real agent may reach through the recording proxy; repeatable",
        kind="list",
    )
    accept_unobserved: tuple[str, ...] = option(
        "--agent-accept-unobserved",
        "a compared field that may stay unobserved on both sides (noted, not blocking), or a group: envelope (the "
        "six envelope fields), unobservable (every field the agent's adapter cannot observe), unreportable (what a "
        "product preset's CLI cannot report); repeatable, adds to the ini list; 'none' clears what came before; "
        "default: env_image_digest, server_revision and unreportable",
        DEFAULT_ACCEPT_UNOBSERVED,
        kind="list",
        cli="--accept-unobserved",
    )
    declare: Path | None = option(
        "--agent-declare",
        "TOML or JSON file of runtime facts you vouch for (model_id, model_options, permission_mode, sandbox, "
        "built_in_tools, external_tools, the envelope fields); recorded as declared, observed values win",
        parse=_path,
    )
    describe_cmd: str | None = option(
        "--agent-describe-cmd",
        "command the agent answers with the same JSON about itself, run once before the session; recorded as "
        "agent_reported",
    )
    image_digest: str | None = option(
        "--agent-image-digest",
        "digest of the environment image the session runs in (else read from AGENTDRIFT_IMAGE_DIGEST)",
    )
    rollback_state: str = option(
        "--agent-rollback-state",
        "what returning to the baseline runtime would take: verified (needs --agent-rollback-evidence), "
        "prepared_unverified, unavailable or unknown",
        "unknown",
        choices=ROLLBACK_STATES,
        cli="--rollback-state",
    )
    rollback_evidence: Path | None = option(
        "--agent-rollback-evidence",
        'JSON file with the evidence of a tested restoration: {"artifact": ..., "restoration": ...}',
        parse=_path,
        cli="--rollback-evidence",
    )
    release_notes: Path | None = option(
        "--agent-release-notes",
        "CSV of release notes to triage against observed changes",
        parse=_path,
        cli="--release-notes",
    )
    seed: int = option("--agent-seed", "seed of the paired bootstrap", 0, parse=whole_number, cli="--seed")
    keep_workdirs: bool = option(
        "--agent-keep-workdirs", "keep each run's private directory for inspection", kind="flag"
    )
    limits: dict[str, int | None] = option(
        "--agent-limit",
        "resource limit KEY=VALUE of each agent run: memory, procs, disk, shm, tmp, files (e.g. memory=1G, "
        "procs=256; 'none' switches one off); repeatable, each key overrides its ini value",
        kind="list",
        ini="agent_limits",
        field_default={},
    )
    retries: int = option(
        "--agent-retries",
        "re-run a run lost to an infrastructure error (outcome infra_error) up to N times, each in a fresh copy; "
        "every attempt is recorded",
        0,
        parse=nonneg_int,
    )
    retry_backoff: float = option(
        "--agent-retry-backoff",
        "seconds before the first retry, doubling each time (at most 600)",
        30.0,
        parse=nonneg_float,
    )
    max_infra_loss: float = option(
        "--agent-max-infra-loss",
        "a comparison where either arm lost more than this share of its runs to infrastructure errors is not "
        "decided (hold; exit 4 under --agent-gate)",
        0.10,
        parse=share,
        cli="--max-infra-loss",
    )
    resume: Path | None = option(
        "--agent-resume",
        "continue the incomplete recording in DIR: refused (exit 6) unless the runtime identity is the recorded "
        "one; runs only what is missing",
        parse=_path,
    )
    shard: str | None = option(
        "--agent-shard",
        "run shard I/N of the items (dealt evenly, by the baseline's durations when given), or 'auto': "
        "read it from the CI engine (docs/scale.md)",
    )
    budget: tuple[str, ...] = option(
        "--agent-budget",
        "tokens=N or cost_usd=X for the session (stop starting runs when spent), run_tokens=N or run_cost_usd=X "
        "per run; repeatable",
        kind="list",
    )
    price_table: Path | None = option(
        "--agent-price-table",
        "TOML or JSON file of USD per million tokens by model, for runs whose product reports no cost",
        parse=_path,
    )
    progress: str = option(
        "--agent-progress",
        "progress while agents run: auto (in place on a terminal, periodic lines otherwise), tty, plain or off",
        "auto",
        choices=PROGRESS_MODES,
    )
    progress_interval: float = option(
        "--agent-progress-interval", "seconds between plain progress lines", 30.0, parse=positive_float
    )
    bundle: str | None = option(
        "--agent-bundle",
        "run with an instruction bundle (NAME, digest or directory; see agentdrift bundle snapshot): project "
        "files overlaid into each work tree, user files into the private home",
    )
    bundles: str | None = option(
        "--agent-bundles",
        "the bundles directory (else AGENTDRIFT_BUNDLES, else .agentdrift/bundles under the rootdir)",
    )
    without: tuple[str, ...] = option(
        "--agent-without",
        "ablation: run the bundle minus PATH (also deleted from each task's repo); repeatable",
        kind="list",
    )
    with_items: tuple[str, ...] = option(
        "--agent-with",
        "addition: run the bundle plus PATH (from the current directory, ~/ for home) or plugin:DIR; repeatable",
        kind="list",
        ini="agent_with",
    )
    null: bool = option(
        "--agent-null",
        "with --agent-baseline: a null experiment (same runtime twice): report outcome flips and whether the gate "
        "would have fired",
        kind="flag",
    )
    plan: Path | None = option(
        "--agent-plan",
        "a plan written by 'agentdrift plan --out': recorded into the run (pre-registration) and checked against "
        "what ran",
        parse=_path,
    )
    grading_cache: str | None = option(
        "--agent-grading-cache",
        "directory that keeps grading results on the untouched task fixtures between sessions (default: pytest's "
        "cache directory when its cacheprovider is on; 'none' keeps them only for the session)",
        env="AGENTDRIFT_GRADING_CACHE",
    )
    # derived, not options: what the runner hands the adapter (a bundle may add to it)
    agent_options: dict[str, Any] = field(default_factory=dict)

    @property
    def agent_selected(self) -> bool:
        return bool(self.agent or self.cmd)

    @property
    def active(self) -> bool:
        """Whether the session asked for anything agentdrift does."""
        return bool(self.agent or self.cmd or self.suite or self.record or self.baseline or self.resume or self.shard)


def _declared() -> dict[str, Option]:
    out = {}
    for f in dataclasses.fields(Settings):
        decl = f.metadata.get("option")
        if decl is not None:
            out[f.name] = dataclasses.replace(decl, dest=f.name, ini=decl.ini or f"agent_{f.name}")
    return out


#: {Settings field: its declaration}, in declaration order
OPTIONS: dict[str, Option] = _declared()


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
        kw = decl.argparse_kwargs()
        kw.pop("nargs", None), kw.pop("const", None)  # the CLI takes the value explicitly
        parser.add_argument(decl.cli, dest=name, **kw)


def resolve_value(decl: Option, cli: Any, ini: Any) -> Any:
    """The command line if given, else the ini twin, else the declared default; parsed once."""
    if decl.dest == "accept_unobserved":
        from pytest_agentdrift.manifest.accept import accept_tokens  # one resolver for the plugin and the CLI

        return tuple(accept_tokens(ini, cli))
    if decl.dest == "limits":
        if not (ini or cli):
            return {}  # the defaults (run/limits.py), imported only when asked
        from pytest_agentdrift.run.limits import resolve_limits

        return resolve_limits(ini or [], cli or [])
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
