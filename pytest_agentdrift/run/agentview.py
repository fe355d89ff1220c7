"""What a session's agent sees of the machine, and whether it can run at all. No pytest.

`option_mounts` is what the session's options show the agent beyond the system, `hidden_paths` what
it never sees even inside those. `check_agent_present` and `check_agent_visible` run once before
the session's first task: a missing binary, a shim of a version manager the sandbox hides, a module
beside the agent's script in a directory the sandbox hides would each fail every run the same way,
as a harness problem the agent would be blamed for; they stop the session with one usage error
instead.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Iterable, Mapping

from pytest_agentdrift.errors import AgentDriftError

#: variables that name CA certificates a TLS client trusts (OpenSSL, Node, requests, curl, git):
#: a gateway's or a proxy's own CA, which the agent cannot verify its endpoint without
CA_ENV = (
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "PIP_CERT",
    "AWS_CA_BUNDLE",
    "CODEX_CA_CERTIFICATE",
)


def option_mounts(settings: Any, environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(path, why) the options name for the agent to read: --agent-config, -instructions, -mount,
    and the CA files named by the variables the agent is passed."""
    return [
        *((os.path.abspath(p), "--agent-config") for p in settings.config_files),
        *((os.path.abspath(p), "--agent-instructions") for p in settings.instruction_files),
        *((p, "--agent-mount") for p in settings.mounts),
        *ca_mounts(settings.env, os.environ if environ is None else environ),
    ]


def ca_mounts(passed: Iterable[str], environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """(path, why) of the CA files or directories named by the CA variables the agent is passed
    (the default allow-list's and --agent-env's): shown read-only, else the agent's TLS fails on
    every run and is scored as its own failure. Only an absolute path that exists is shown."""
    from pytest_agentdrift.run.mountplan import ETC_ALLOW, SYSTEM_DIRS
    from pytest_agentdrift.run.runsettings import DEFAULT_ENV_ALLOWLIST

    names = set(passed) | set(DEFAULT_ENV_ALLOWLIST)
    # the system's own trust store is shown anyway: not an addition of the agent's
    shown = [*SYSTEM_DIRS, *(f"/etc/{e}" for e in ETC_ALLOW)]
    out = []
    for name in CA_ENV:
        value = environ.get(name, "")
        if name not in names or not os.path.isabs(value) or not os.path.exists(value):
            continue
        real = os.path.realpath(value)
        if not any(real == d or real.startswith(d + "/") for d in shown):
            out.append((value, f"{name}: CA certificates the agent is passed"))
    return out


def check_background_hosts(adapter: Any, allow_hosts: Iterable[str]) -> None:
    """A declared background host is answered locally, never opened: one the proxy also lets through
    would be open to the agent's own tools as well, so the two are one usage error together."""
    declared = set(getattr(adapter, "background_hosts", ()) if hasattr(adapter, "declared_product") else ())
    both = sorted(h for h in declared if h in {a.lower().rsplit(":", 1)[0] for a in allow_hosts})
    if both:
        raise AgentDriftError(
            f"--agent-background-host {both[0]} is also an --agent-allow-host: a background host is refused "
            "and recorded, never opened (an allowed host is open to the agent's tools too); drop one of the two"
        )


def check_agent_env(names: Iterable[str], environ: Mapping[str, str]) -> None:
    """An --agent-env NAME that is not set would pass nothing: the agent would run without what
    its user meant to give it (a key, a base URL) and fail as if by its own doing."""
    unset = [n for n in names if n not in environ]
    if unset:
        raise AgentDriftError(
            f"--agent-env {unset[0]}: the variable is not set in this environment "
            f"(export {unset[0]}=... before the session, or drop the option)"
        )


def hidden_paths(settings: Any, task_dirs: Iterable[Path], cwd: Path) -> tuple[Path, ...]:
    """Never visible in a sandbox, even inside something it may read: the records, the task
    directories and the project, should it lie inside something a sandbox shows (/usr/src/...)."""
    paths = [p for p in (settings.record, settings.baseline) if p is not None]
    return tuple(Path(p).absolute() for p in [*paths, *task_dirs, cwd])


def check_agent_present(adapter: Any) -> None:
    """Raise AgentDriftError when the agent's program is neither on PATH nor a file."""
    exe = adapter.executable() if adapter else None
    if exe and not shutil.which(exe) and not Path(exe).is_file():
        raise AgentDriftError(f"agent executable {exe!r} was not found on PATH (agent {adapter.name!r})")


def check_agent_visible(adapter: Any, hidden: tuple[Path, ...], environ: Mapping[str, str]) -> None:
    """What the agent needs and the sandbox would hide: a shim no manager resolves, a module beside
    the agent's script in a hidden directory (`hidden`: the project, the records, the task dirs)."""
    from pytest_agentdrift.run import agentpaths, hostprogram

    argv = adapter.argv_template()
    prog = hostprogram.resolve_program(argv[0], hostprogram.env_path(environ)) if "{" not in argv[0] else None
    if prog is not None and prog.problem:
        raise AgentDriftError(
            f"the agent's program {prog.found} is a shim of {prog.manager}, which the sandbox hides, and "
            f"{prog.problem}; name the real program in --agent-cmd"
        )
    missing = agentpaths.hidden_imports(agentpaths.named_paths(argv[1:]), hidden)
    if missing:
        raise AgentDriftError(
            f"the agent imports {missing[0]}, which the sandbox hides (its directory is, or holds, the "
            f"project, a home or the records); show it with --agent-mount {missing[0]}, "
            "or keep the agent in a directory of its own"
        )


__all__ = [
    "ca_mounts",
    "check_agent_env",
    "check_background_hosts",
    "check_agent_present",
    "check_agent_visible",
    "hidden_paths",
    "option_mounts",
]
