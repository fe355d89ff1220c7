"""Command-line options and ini twins, resolved once into a frozen Settings.

`add_options(group.addoption, parser.addini)` is shared by the pytest plugin
and the `agentdrift` CLI. Every option defaults to None on the command line
and its ini twin (`agent_…`) carries the default, pytest's own idiom, so
`pytest.ini` / `pyproject.toml` can set any of them.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.vocabulary import (
    DEFAULT_ACCEPT_UNOBSERVED,
    FAIL_ON_MODES,
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


PROGRESS_MODES = ("auto", "tty", "plain", "off")

#: (flag, dest suffix, ini type, default, help, extra argparse kwargs)
OPTIONS: list[tuple[str, str, str, Any, str, dict[str, Any]]] = [
    (
        "--agent",
        "agent",
        "string",
        None,
        "agent preset: reference, reference-drifted, claude-code, codex, copilot, ...",
        {},
    ),
    (
        "--agent-cmd",
        "cmd",
        "string",
        None,
        "run any agent command through the agent protocol (shlex-split; placeholders {task_file} {task_text} {workdir} {task_id} {task_dir})",
        {},
    ),
    (
        "--agent-suite",
        "suite",
        "string",
        None,
        "add a task suite to collect: 'builtin' (the twelve bundled tasks) or a directory",
        {},
    ),
    ("--agent-k", "k", "string", "1", "repetitions of each task (items end ::r1 ... ::rN)", {"type": positive_int}),
    (
        "--agent-timeout",
        "timeout",
        "string",
        None,
        "per-run agent timeout in seconds (overrides each task's timeout_s)",
        {"type": positive_float},
    ),
    (
        "--agent-record",
        "record",
        "string",
        None,
        "record the run into this new directory (refused if it holds a run)",
        {},
    ),
    (
        "--agent-baseline",
        "baseline",
        "string",
        None,
        "compare against this recorded run; refused (exit 6) when identity stamps differ",
        {},
    ),
    (
        "--agent-vary",
        "vary",
        "linelist",
        [],
        "manifest field that may differ from the baseline (the experiment's variable); repeatable",
        {"action": "append"},
    ),
    (
        "--agent-fail-on",
        "fail_on",
        "string",
        "any",
        "which failed checks fail an item: any (default), critical, or none (record without judging: exit 0 whenever the record is complete)",
        {"choices": FAIL_ON_MODES},
    ),
    (
        "--agent-gate",
        "gate",
        "string",
        None,
        "with --agent-baseline, the gate sets the exit status: regression (merge gating: exit 1 only on a new critical "
        "or safety failure, a tampered pass or a significant paired regression), promote (exit 0 only when the ship/hold "
        "gate says ship; what a bare --agent-gate means) or drop-it (with --agent-without/--agent-with: exit 0 only on "
        "'drop it')",
        {"nargs": "?", "const": GATE_PROMOTE, "choices": GATE_MODES},
    ),
    (
        "--agent-isolation",
        "isolation",
        "string",
        "auto",
        "sandbox: auto (strongest available), bwrap, unshare or none",
        {"choices": ISOLATION_MODES},
    ),
    (
        "--agent-env",
        "env",
        "linelist",
        [],
        "extra environment variable NAME passed to the agent (values never recorded); repeatable",
        {"action": "append"},
    ),
    ("--agent-model", "model", "string", None, "model for real-agent presets (recorded in the manifest)", {}),
    (
        "--agent-permission-mode",
        "permission_mode",
        "string",
        None,
        "permission / approval mode for real-agent presets",
        {},
    ),
    (
        "--agent-sandbox-mode",
        "sandbox_mode",
        "string",
        None,
        "the product's own sandbox mode for real-agent presets",
        {},
    ),
    (
        "--agent-config",
        "config_files",
        "linelist",
        [],
        "a configuration file the agent reads (hashed into the manifest); repeatable",
        {"action": "append"},
    ),
    (
        "--agent-instructions",
        "instruction_files",
        "linelist",
        [],
        "an instruction file the agent reads (hashed into the manifest); repeatable",
        {"action": "append"},
    ),
    (
        "--agent-mount",
        "mounts",
        "linelist",
        [],
        "a file or directory a generic agent needs to read under bwrap (its install, helper modules); mounted read-only, recorded in the manifest; repeatable",
        {"action": "append"},
    ),
    (
        "--agent-allow-host",
        "allow_hosts",
        "linelist",
        [],
        "extra host (host, host:port or *.suffix) a real agent may reach through the recording proxy; repeatable",
        {"action": "append"},
    ),
    (
        "--agent-accept-unobserved",
        "accept_unobserved",
        "linelist",
        list(DEFAULT_ACCEPT_UNOBSERVED),
        "a compared field that may stay unobserved on both sides (noted, not blocking), or a group: "
        "envelope (the six envelope fields), unobservable (every field the agent's adapter cannot observe); "
        "repeatable, adds to the ini list; 'none' clears what came before; default: env_image_digest and server_revision",
        {"action": "append"},
    ),
    (
        "--agent-declare",
        "declare",
        "string",
        None,
        "TOML or JSON file of runtime facts you vouch for (model_id, model_options, permission_mode, sandbox, "
        "built_in_tools, external_tools, the envelope fields); recorded as declared, observed values win",
        {},
    ),
    (
        "--agent-describe-cmd",
        "describe_cmd",
        "string",
        None,
        "command the agent answers with the same JSON about itself, run once before the session; recorded as agent_reported",
        {},
    ),
    (
        "--agent-image-digest",
        "image_digest",
        "string",
        None,
        "digest of the environment image the session runs in (else read from AGENTDRIFT_IMAGE_DIGEST)",
        {},
    ),
    (
        "--agent-rollback-state",
        "rollback_state",
        "string",
        "unknown",
        "what returning to the baseline runtime would take: verified (needs --agent-rollback-evidence), prepared_unverified, unavailable or unknown",
        {"choices": ROLLBACK_STATES},
    ),
    (
        "--agent-rollback-evidence",
        "rollback_evidence",
        "string",
        None,
        'JSON file with the evidence of a tested restoration: {"artifact": ..., "restoration": ...}',
        {},
    ),
    (
        "--agent-release-notes",
        "release_notes",
        "string",
        None,
        "CSV of release notes to triage against observed changes",
        {},
    ),
    ("--agent-seed", "seed", "string", "0", "seed of the paired bootstrap", {}),
    (
        "--agent-keep-workdirs",
        "keep_workdirs",
        "bool",
        False,
        "keep each run's private directory for inspection",
        {"action": "store_true"},
    ),
    (
        "--agent-limit",
        "limits",
        "linelist",
        [],
        "resource limit KEY=VALUE of each agent run: memory, procs, disk, shm, tmp, files (e.g. "
        "memory=1G, procs=256; 'none' switches one off); repeatable, each key overrides its ini value",
        {"action": "append"},
    ),
    # -- long runs (issue 12): infrastructure errors, retries, resume, shards, budgets, progress
    (
        "--agent-retries",
        "retries",
        "string",
        "0",
        "re-run a run lost to an infrastructure error (outcome infra_error) up to N times, each in a fresh copy; every attempt is recorded",
        {"type": nonneg_int},
    ),
    (
        "--agent-retry-backoff",
        "retry_backoff",
        "string",
        "30",
        "seconds before the first retry, doubling each time (at most 600)",
        {"type": nonneg_float},
    ),
    (
        "--agent-max-infra-loss",
        "max_infra_loss",
        "string",
        "10%",
        "a comparison where either arm lost more than this share of its runs to infrastructure errors is not decided (hold; exit 4 under --agent-gate)",
        {"type": share},
    ),
    (
        "--agent-resume",
        "resume",
        "string",
        None,
        "continue the incomplete recording in DIR: refused (exit 6) unless the runtime identity is the recorded one; runs only what is missing",
        {},
    ),
    (
        "--agent-shard",
        "shard",
        "string",
        None,
        "run shard I/N of the items (stable by task id and repetition), or 'auto': read it from the CI engine (docs/scale.md)",
        {},
    ),
    (
        "--agent-budget",
        "budget",
        "linelist",
        [],
        "tokens=N or cost_usd=X for the session (stop starting runs when spent), run_tokens=N or run_cost_usd=X per run; repeatable",
        {"action": "append"},
    ),
    (
        "--agent-price-table",
        "price_table",
        "string",
        None,
        "TOML or JSON file of USD per million tokens by model, for runs whose product reports no cost",
        {},
    ),
    (
        "--agent-progress",
        "progress",
        "string",
        "auto",
        "progress while agents run: auto (in place on a terminal, periodic lines otherwise), tty, plain or off",
        {"choices": PROGRESS_MODES},
    ),
    (
        "--agent-progress-interval",
        "progress_interval",
        "string",
        "30",
        "seconds between plain progress lines",
        {"type": positive_float},
    ),
    (
        "--agent-bundle",
        "bundle",
        "string",
        None,
        "run with an instruction bundle (NAME, digest or directory; see agentdrift bundle snapshot): project files "
        "overlaid into each work tree, user files into the private home",
        {},
    ),
    (
        "--agent-bundles",
        "bundles",
        "string",
        None,
        "the bundles directory (else AGENTDRIFT_BUNDLES, else .agentdrift/bundles under the rootdir)",
        {},
    ),
    (
        "--agent-without",
        "without",
        "linelist",
        [],
        "ablation: run the bundle minus PATH (also deleted from each task's repo); repeatable",
        {"action": "append"},
    ),
    (
        "--agent-with",
        "with",
        "linelist",
        [],
        "addition: run the bundle plus PATH (from the current directory, ~/ for home) or plugin:DIR; repeatable",
        {"action": "append"},
    ),
    (
        "--agent-null",
        "null",
        "bool",
        False,
        "with --agent-baseline: a null experiment (same runtime twice): report outcome flips and whether the gate would have fired",
        {"action": "store_true"},
    ),
    (
        "--agent-plan",
        "plan",
        "string",
        None,
        "a plan written by 'agentdrift plan --out': recorded into the run (pre-registration) and checked against what ran",
        {},
    ),
]


def add_options(addoption: Callable[..., Any], addini: Callable[..., Any] | None) -> None:
    for flag, dest, ini_type, default, help_, extra in OPTIONS:
        kwargs = {k: v for k, v in extra.items() if v is not None}
        if kwargs.get("action") in ("store_true", "append"):
            kwargs["default"] = None
        else:
            kwargs.setdefault("default", None)
        addoption(flag, dest=f"agentdrift_{dest}", help=help_, **kwargs)
        if addini is not None:
            addini(_ini_name(dest), help=help_, type=ini_type, default=default)


@dataclass(frozen=True)
class Settings:
    agent: str | None
    cmd: str | None
    suite: str | None
    k: int
    timeout: float | None
    record: Path | None
    baseline: Path | None
    vary: tuple[str, ...]
    fail_on: str
    gate: str | None  # None (off), or one of GATE_MODES
    isolation: str
    env: tuple[str, ...]
    agent_options: dict[str, Any] = field(default_factory=dict)
    config_files: tuple[str, ...] = ()
    instruction_files: tuple[str, ...] = ()
    release_notes: Path | None = None
    accept_unobserved: tuple[str, ...] = DEFAULT_ACCEPT_UNOBSERVED  # tokens: field names and group names
    declare: Path | None = None
    describe_cmd: str | None = None
    image_digest: str | None = None
    allow_hosts: tuple[str, ...] = ()
    rollback_state: str = "unknown"
    rollback_evidence: Path | None = None
    seed: int = 0
    keep_workdirs: bool = False
    limits: dict[str, int | None] = field(default_factory=dict)  # limits.py: defaults, then ini, then CLI, per key
    mounts: tuple[str, ...] = ()
    # long runs (issue 12)
    retries: int = 0
    retry_backoff: float = 30.0
    max_infra_loss: float = 0.10
    resume: Path | None = None
    shard: str | None = None
    budget: tuple[str, ...] = ()
    price_table: Path | None = None
    progress: str = "auto"
    progress_interval: float = 30.0
    bundle: str | None = None
    bundles: str | None = None
    without: tuple[str, ...] = ()
    with_items: tuple[str, ...] = ()
    null: bool = False
    plan: Path | None = None

    @property
    def agent_selected(self) -> bool:
        return bool(self.agent or self.cmd)

    @property
    def active(self) -> bool:
        """Whether the session asked for anything agentdrift does."""
        return bool(self.agent or self.cmd or self.suite or self.record or self.baseline or self.resume or self.shard)


def _ini_name(dest: str) -> str:
    return "agent" if dest == "agent" else f"agent_{dest}"


def resolve(getoption: Callable[[str], Any], getini: Callable[[str], Any], rootpath: Path) -> Settings:
    """CLI value if given, else the ini value; validated once."""
    values: dict[str, Any] = {}
    for _flag, dest, _ini_type, default, _, extra in OPTIONS:
        cli = getoption(f"agentdrift_{dest}")
        if cli is not None and cli != []:
            values[dest] = cli
            continue
        ini = getini(_ini_name(dest))
        if ini in (None, "", []):
            values[dest] = default
            continue
        conv = extra.get("type")
        if conv is not None and isinstance(ini, str):
            try:
                ini = conv(ini)
            except argparse.ArgumentTypeError as exc:
                raise AgentDriftError(f"ini option {_ini_name(dest)}: {exc}") from None
        if (
            dest == "gate"
            and isinstance(ini, str)
            and ini.strip().lower() in ("true", "1", "yes", "on", "false", "0", "no", "off")
        ):
            # the flag's old boolean ini form: true is the ship / hold gate (promote)
            ini = GATE_PROMOTE if ini.strip().lower() in ("true", "1", "yes", "on") else None
            values[dest] = ini
            continue
        if "choices" in extra and ini not in extra["choices"]:
            raise AgentDriftError(f"ini option {_ini_name(dest)}: {ini!r} is not one of {', '.join(extra['choices'])}")
        values[dest] = ini
    # one resolver for the plugin and every CLI command (manifest/accept.py)
    from pytest_agentdrift.manifest.accept import accept_tokens

    values["accept_unobserved"] = accept_tokens(
        getini("agent_accept_unobserved"), getoption("agentdrift_accept_unobserved")
    )
    ini_limits, cli_limits = getini("agent_limits") or [], getoption("agentdrift_limits") or []
    limits: dict[str, int | None] = {}  # empty: the defaults (run/limits.py), imported only when asked
    if ini_limits or cli_limits:
        from pytest_agentdrift.run.limits import resolve_limits

        limits = resolve_limits(ini_limits, cli_limits)
    k = values["k"] if isinstance(values["k"], int) else _conv(positive_int, values["k"], "agent_k")
    timeout = values["timeout"]
    if timeout is not None and not isinstance(timeout, float):
        timeout = _conv(positive_float, timeout, "agent_timeout")
    seed = values["seed"]
    try:
        seed = int(seed)
    except (TypeError, ValueError):
        raise AgentDriftError(f"--agent-seed: {seed!r} is not a whole number") from None
    if values["agent"] and values["cmd"]:
        raise AgentDriftError("--agent and --agent-cmd name two agents; use one")
    env = tuple(values["env"] or ())
    for name in env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise AgentDriftError(f"--agent-env: {name!r} is not an environment variable name")

    def path(v: Any) -> Path | None:
        return None if v in (None, "") else Path(v)

    mounts = []
    for m in values["mounts"] or ():
        full = rootpath / m if not Path(m).is_absolute() else Path(m)
        if not full.exists():
            raise AgentDriftError(f"--agent-mount: {m}: no such file or directory")
        mounts.append(str(full.absolute()))

    long_runs = _long_run_values(values)
    if long_runs["resume"] is not None:
        # a resumed session completes the record it resumes
        if values["record"] not in (None, "") and Path(values["record"]) != long_runs["resume"]:
            raise AgentDriftError(
                f"--agent-resume {long_runs['resume']} and --agent-record {values['record']} name two records; "
                "a resumed session completes the record it resumes"
            )
        values["record"] = str(long_runs["resume"])

    return Settings(
        **long_runs,
        agent=values["agent"],
        cmd=values["cmd"],
        suite=values["suite"],
        k=k,
        timeout=timeout,
        record=path(values["record"]),
        baseline=path(values["baseline"]),
        vary=tuple(values["vary"] or ()),
        fail_on=values["fail_on"],
        gate=values["gate"] or None,
        isolation=values["isolation"],
        env=env,
        agent_options={
            k_: v
            for k_, v in (
                ("model", values["model"]),
                ("permission_mode", values["permission_mode"]),
                ("sandbox", values["sandbox_mode"]),
            )
            if v
        },
        config_files=tuple(values["config_files"] or ()),
        instruction_files=tuple(values["instruction_files"] or ()),
        release_notes=path(values["release_notes"]),
        seed=seed,
        accept_unobserved=tuple(values["accept_unobserved"]),
        image_digest=values["image_digest"],
        declare=path(values["declare"]),
        describe_cmd=values["describe_cmd"] or None,
        allow_hosts=tuple(values["allow_hosts"] or ()),
        rollback_state=values["rollback_state"],
        rollback_evidence=path(values["rollback_evidence"]),
        keep_workdirs=bool(values["keep_workdirs"]),
        limits=limits,
        mounts=tuple(mounts),
        bundle=values["bundle"] or None,
        bundles=values["bundles"] or None,
        without=tuple(values["without"] or ()),
        with_items=tuple(values["with"] or ()),
        null=bool(values["null"]),
        plan=path(values["plan"]),
    )


def _long_run_values(values: dict[str, Any]) -> dict[str, Any]:
    """The long-run options (issue 12), converted and checked once."""

    def conv(fn, name):
        v = values[name]
        return v if not isinstance(v, str) else _conv(fn, v, f"agent_{name}")

    shard = values["shard"] or None
    if shard is not None and shard != "auto":
        from pytest_agentdrift.tasks.shard import parse_shard

        parse_shard(shard, "--agent-shard")  # refused now, before anything runs
    budget = tuple(values["budget"] or ())
    if budget:
        from pytest_agentdrift.run.budget import parse_budget

        parse_budget(budget)
    return {
        "retries": conv(nonneg_int, "retries"),
        "retry_backoff": float(conv(nonneg_float, "retry_backoff")),
        "max_infra_loss": float(conv(share, "max_infra_loss")),
        "resume": None if values["resume"] in (None, "") else Path(values["resume"]),
        "shard": shard,
        "budget": budget,
        "price_table": None if values["price_table"] in (None, "") else Path(values["price_table"]),
        "progress": values["progress"],
        "progress_interval": float(conv(positive_float, "progress_interval")),
    }


def _conv(fn: Callable[[str], Any], value: Any, name: str) -> Any:
    try:
        return fn(str(value))
    except argparse.ArgumentTypeError as exc:
        raise AgentDriftError(f"{name}: {exc}") from None
