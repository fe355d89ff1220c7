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


def option_mounts(settings: Any) -> list[tuple[str, str]]:
    """(path, why) the options name for the agent to read: --agent-config, -instructions, -mount."""
    return [
        *((os.path.abspath(p), "--agent-config") for p in settings.config_files),
        *((os.path.abspath(p), "--agent-instructions") for p in settings.instruction_files),
        *((p, "--agent-mount") for p in settings.mounts),
    ]


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
    from pytest_agentdrift.run import mountplan

    argv = adapter.argv_template()
    prog = mountplan.resolve_program(argv[0], mountplan.env_path(environ)) if "{" not in argv[0] else None
    if prog is not None and prog.problem:
        raise AgentDriftError(
            f"the agent's program {prog.found} is a shim of {prog.manager}, which the sandbox hides, and "
            f"{prog.problem}; name the real program in --agent-cmd"
        )
    missing = mountplan.hidden_imports(mountplan.named_paths(argv[1:]), hidden)
    if missing:
        raise AgentDriftError(
            f"the agent imports {missing[0]}, which the sandbox hides (its directory is, or holds, the "
            f"project, a home or the records); show it with --agent-mount {missing[0]}, "
            "or keep the agent in a directory of its own"
        )


__all__ = ["check_agent_present", "check_agent_visible", "hidden_paths", "option_mounts"]
