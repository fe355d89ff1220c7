"""Where task directories are: recognising one, finding those below a directory or named on a
command line, and the bundled suite's. No pytest in here.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from pytest_agentdrift.vocabulary import INITIAL_TREE_FILE, TASK_MD_FILE, TASK_TOML_FILE


def is_task_dir(path: Path) -> bool:
    """task.toml or task.md, beside repo/ or initial-tree.sha256.

    A half-made task is collected so its missing file is reported, never
    silently skipped; a project that merely has a task.toml is left alone.
    """
    return ((path / TASK_TOML_FILE).is_file() or (path / TASK_MD_FILE).is_file()) and (
        (path / "repo").is_dir() or (path / INITIAL_TREE_FILE).is_file()
    )


def find_task_dirs(root: Path) -> list[Path]:
    """Task directories at or below root, sorted; never descends into a task."""
    root = Path(root)
    if is_task_dir(root):
        return [root]
    found = []
    for dirpath, dirnames, _ in os.walk(root):
        dirnames.sort()
        here = Path(dirpath)
        if is_task_dir(here):
            found.append(here)
            dirnames[:] = []
        else:
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "__pycache__"]
    return sorted(found)


def session_task_dirs(args: list[str]) -> dict[str, Path]:
    """task id -> directory for every task the command line names (before collection)."""
    found: dict[str, Path] = {}
    for arg in args:
        path = Path(arg.split("::", 1)[0])
        if not path.is_dir():
            continue
        for d in find_task_dirs(path):
            try:
                tid = tomllib.loads((d / TASK_TOML_FILE).read_text(encoding="utf-8")).get("id")
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                continue  # collection reports the malformed task
            if isinstance(tid, str):
                found[tid] = d.absolute()
    return dict(sorted(found.items()))


def builtin_suite_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "suite"
