"""The task's toolchain on the agent's PATH, and a PATH that names only what the sandbox shows. No pytest.

Every bundled task tells the agent to run its tests; an agent that cannot is a
different agent. The harness already runs a Python with pytest (it grades the
task's tests with it), so that interpreter is put first on the agent's PATH as
`python` and `python3`: small wrappers that exec it, so a virtual environment
stays one (a symlink would lose its pyvenv.cfg). The host's PATH follows,
without the directories the sandbox does not show (a pyenv shim directory under
a hidden home would otherwise answer `python` with a program that cannot run).
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Callable

#: the names the harness's Python answers to on the agent's PATH
PROGRAMS = ("python", "python3")


def make_bin(directory: Path, interpreter: str | None = None) -> Path:
    """`directory`/bin with one wrapper per name in PROGRAMS, exec'ing `interpreter` (this Python)."""
    target = interpreter or sys.executable
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in PROGRAMS:
        path = bin_dir / name
        path.write_text(f'#!/bin/sh\nexec {shlex.quote(target)} "$@"\n', encoding="utf-8")
        os.chmod(path, 0o755)
    return bin_dir


def agent_path(host_path: str, first: str | None, shows: Callable[[str], bool]) -> str:
    """The PATH inside a sandbox: `first` (the toolchain), then the host's directories that
    `shows` says exist there, each once, in the host's order."""
    out: list[str] = [first] if first else []
    for d in host_path.split(os.pathsep):
        if d and os.path.isabs(d) and d not in out and shows(d):
            out.append(d)
    return os.pathsep.join(out)


def describe() -> dict[str, object]:
    """What the toolchain is, for the manifest: the interpreter's and pytest's versions."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        pytest_version: str | None = version("pytest")
    except PackageNotFoundError:
        pytest_version = None
    return {
        "on_path": list(PROGRAMS),
        "python": ".".join(str(p) for p in sys.version_info[:3]),
        "implementation": sys.implementation.name,
        "pytest": pytest_version,
        "source": "the harness's own interpreter (the one that grades the task's tests)",
    }
