"""Whether the selected agent can run at all, checked once before the session's first task. No pytest.

A missing binary, a shim of a version manager the sandbox hides, a module beside the agent's script
in a directory the sandbox hides: each would fail every run the same way, as a harness problem the
agent would be blamed for. They stop the session with one usage error instead.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Mapping

from pytest_agentdrift.errors import AgentDriftError


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


__all__ = ["check_agent_present", "check_agent_visible"]
