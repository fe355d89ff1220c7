"""What one agent run is given (RunSettings): its isolation, timeout and output limit, the
environment passed through to the agent, what it may read beyond the system and what stays
hidden from it, its resource limits, a live monitor and a bundle put in front of it. The
session builds it; run/runner.run_agent and the stages that gather the run's evidence read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentdrift.run import sandbox
from pytest_agentdrift.vocabulary import DEFAULT_PROVIDER_PATIENCE_S

#: environment variables passed through to agents by default (never secrets)
DEFAULT_ENV_ALLOWLIST = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TERM",
    "PYTHONHASHSEED",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)


@dataclass
class RunSettings:
    isolation: sandbox.Isolation
    timeout_s: float | None = None  # overrides the task's timeout
    output_limit: int = 1 << 20
    env_allowlist: tuple[str, ...] = DEFAULT_ENV_ALLOWLIST
    agent_options: dict[str, Any] = field(default_factory=dict)
    keep_workdirs: bool = False
    allow_hosts: tuple[str, ...] = ()  # extends the adapter's API-host allowlist
    #: how long a run's model calls may all fail with provider errors before it is stopped as infrastructure
    provider_patience_s: float = DEFAULT_PROVIDER_PATIENCE_S
    #: (path, why) the agent may read under bwrap beyond the system, the harness runtime and
    #: what its adapter names (`sandbox_paths`): --agent-config / --agent-instructions / --agent-mount
    mounts: tuple[tuple[str, str], ...] = ()
    #: never visible to the agent, even inside something it may read (task dirs, records, the project)
    hidden: tuple[Path, ...] = ()
    limits: dict[str, int | None] | None = None  # resource limits (limits.py); None: the defaults
    harness_dir: Path | None = None  # harness-only scratch (observer logs); None: beside the runs' base
    # long runs: monitor(adapter, harness_dir) -> a sandbox monitor (run/budget.RunWatch) or None
    monitor: Any = None
    # long runs: overspent(run) -> why the run's final spend is over its per-run budget, or None: what a
    # run reports just before it exits is held against the budget too, not only what was seen live
    overspent: Any = None
    overlay: Any = None  # run.overlay.Overlay: a bundle put in front of the agent (--agent-bundle)
