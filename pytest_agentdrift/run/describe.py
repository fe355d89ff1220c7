"""Running the agent's own describe command (`--agent-describe-cmd`) as the agent runs. No pytest.

The command is the agent's program: it runs like one of the agent's runs, never as the
harness. In the session's sandbox (under bubblewrap the system, the harness's runtime and
what the command names, read-only; a private scratch directory writable; the project, the
records and the task directories hidden), with the agent's environment only (the allow-list
an agent run gets, a private home and temporary directory: none of the harness's other
variables), under the agent's resource limits, and with its whole process tree ended when it
exits or its time is up (the sandbox's PID namespace, the run's cgroups, the run token), so
nothing it started outlives it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_agentdrift.run import agentpaths, harnessruntime, hostprogram, mountplan, sandbox, scratch
from pytest_agentdrift.run.runsettings import DEFAULT_ENV_ALLOWLIST

#: at most this much of the command's output is kept (it is one JSON object of runtime facts)
OUTPUT_LIMIT = 1 << 20


def absolute_argv(argv: list[str], cwd: Path) -> list[str]:
    """The command with each argument that names an existing file relative to `cwd` made absolute:
    it runs in a scratch directory of its own, where `python my_agent.py --describe` still finds
    the agent's file (shown read-only, as an agent command's named files are)."""
    out = [argv[0]]
    for arg in argv[1:]:
        candidate = cwd / arg
        out.append(str(candidate.absolute()) if arg and not arg.startswith("-") and candidate.is_file() else arg)
    return out


def agent_env(names: Iterable[str], home: Path) -> dict[str, str]:
    """What an agent run is given of the harness's environment (the allow-list and the names
    passed with --agent-env), with a private home and temporary directory."""
    allow = set(DEFAULT_ENV_ALLOWLIST) | set(names)
    env = {k: v for k, v in os.environ.items() if k in allow}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    tmp = home / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(home), TMPDIR=str(tmp), TMP=str(tmp), TEMP=str(tmp), PYTHONDONTWRITEBYTECODE="1")
    return env


def run_describe_command(
    argv: list[str],
    *,
    isolation: sandbox.Isolation,
    env_names: Iterable[str],
    limits: Mapping[str, int | None],
    hidden: Iterable[Path],
    mounts: Iterable[tuple[str, str]],
    timeout_s: float,
) -> sandbox.ProcessResult:
    """Run argv (absolute paths) as the agent would be run; its result, its processes all ended."""
    from pytest_agentdrift.run.runguard import RunGuard
    from pytest_agentdrift.tasks import fdtree

    base = scratch.make()
    box = base / "describe"
    work = box / "work"
    work.mkdir(parents=True)
    hidden = [Path(p) for p in hidden]
    try:
        env = agent_env(env_names, box / "home")
        plan = None
        if isolation.mode == "bwrap":
            named = agentpaths.named_paths(argv[1:])
            first = hostprogram.executable_paths(argv[0], hostprogram.env_path(env))
            reads = [
                p for p, _ in harnessruntime.beyond_runtime([*first, *named, *agentpaths.code_dirs(named, hidden)])
            ]
            plan = mountplan.build(
                writable=[box],
                readable=[*harnessruntime.harness_runtime(), *reads, *(p for p, _ in mounts)],
                exclude=hidden,
            )
        token = secrets.token_hex(16)
        guard = RunGuard(
            limits=dict(limits),
            mode=isolation.mode,
            root=box,
            work=work,
            harness_dir=base / "harness",
            token=token,
            observe_network=False,
            watch_writes=False,
        )
        try:
            guard.prepare()
            return sandbox.run(
                argv,
                cwd=work,
                env=env,
                isolation=isolation,
                writable=[box],
                plan=plan,
                timeout_s=timeout_s,
                output_limit=OUTPUT_LIMIT,
                token=token,
                guard=guard,
                readonly=sandbox.protected_dirs(hidden, base) if isolation.mode == "unshare" else (),
            )
        finally:
            guard.close()  # the run's cgroups are emptied (SIGKILL) and removed
    finally:
        fdtree.rmtree(base)


def describe_limits(limits: Mapping[str, Any] | None) -> dict[str, int | None]:
    """The agent's limits (--agent-limit), else the defaults."""
    from pytest_agentdrift.run.limits import DEFAULT_LIMITS

    return dict(limits) if limits else dict(DEFAULT_LIMITS)


__all__ = ["absolute_argv", "agent_env", "describe_limits", "run_describe_command"]
