"""What an agent's command reads under bubblewrap: the program its argv starts, the absolute paths
the argv names, the agent's own code directory where it may be shown, and the modules it would miss
where it may not. No pytest.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping

from pytest_agentdrift.run.hostpaths import is_home_or_above, resolved, within
from pytest_agentdrift.run.hostprogram import env_path, executable_paths
from pytest_agentdrift.run.scratchplaces import scratch_places

if TYPE_CHECKING:
    from pytest_agentdrift.agents.base import AgentAdapter


def agent_paths(
    adapter: AgentAdapter, env: Mapping[str, str], hidden: Iterable[str | os.PathLike[str]] = ()
) -> list[tuple[str, str]]:
    """(path, why) an adapter's agent reads under bubblewrap: the program its argv starts (with
    its install prefix, or a script's interpreter), every existing absolute path the argv names,
    the directory of a program file it names (the agent's own code: a module beside it), and
    what the adapter adds (`sandbox_paths`)."""
    argv = adapter.argv_template()
    first = [] if not argv or "{" in argv[0] else executable_paths(argv[0], env_path(env))
    named = named_paths(argv[1:])
    return [*first, *named, *code_dirs(named, hidden), *adapter.sandbox_paths(dict(env))]


def named_paths(argv: Iterable[str]) -> list[tuple[str, str]]:
    """Existing absolute paths an argv names (`/x/agent.py`, `--config=/x/cfg.toml`)."""
    out = []
    for arg in argv:
        for value in (arg, arg.partition("=")[2]):
            if value.startswith("/") and "{" not in value and os.path.exists(value):
                out.append((value, "named by the agent command"))
    return out


def code_dirs(named: Iterable[tuple[str, str]], hidden: Iterable[str | os.PathLike[str]]) -> list[tuple[str, str]]:
    """The directory of each file the command names, where it may be shown: never a hidden path
    or a directory above one (the project itself, the records), a home or above, the temporary
    directory or the scratch directories' own (run/scratch.py) or the root; those stay hidden and
    `hidden_imports` says what the agent misses."""
    out = []
    for path, _ in named:
        if os.path.isfile(path) and code_dir_shown(os.path.dirname(resolved(path)), hidden):
            out.append((os.path.dirname(resolved(path)), "the agent's own code directory"))
    return out


def code_dir_shown(directory: str, hidden: Iterable[str | os.PathLike[str]]) -> bool:
    tops = [resolved(h) for h in hidden if h] + scratch_places()
    return (
        directory not in ("/", "/usr", "/usr/local")
        and not is_home_or_above(directory)
        and not any(within(top, directory) for top in tops)
    )


def hidden_imports(named: Iterable[tuple[str, str]], hidden: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Modules beside a Python file the command names that the file imports, where that file's
    directory stays hidden: the agent would stop at its first import (ModuleNotFoundError)."""
    import ast

    hidden = list(hidden)
    missing: list[str] = []
    for path, _ in named:
        directory = os.path.dirname(resolved(path))
        if not path.endswith(".py") or not os.path.isfile(path) or code_dir_shown(directory, hidden):
            continue
        try:
            tree = ast.parse(Path(path).read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        for name in sorted(names):
            for cand in (os.path.join(directory, name + ".py"), os.path.join(directory, name)):
                if os.path.exists(cand) and cand != resolved(path):
                    missing.append(cand)
                    break
    return missing
