"""What a check's command line runs: pytest (`pytest_args`), or Python in a way the harness's
wrapper gradehook/run_python.py can reproduce (`python_command`). No pytest."""

from __future__ import annotations

import os
import re
import sys

EVALUATOR_COMPONENT = "command_line"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")
#: interpreter options that take a value (`-W error`); others stand alone (`-u`, `-B`, `-I`)
_PYTHON_VALUE_OPTS = ("-W", "-X")


def pytest_args(argv: list[str]) -> list[str] | None:
    """The pytest arguments when argv runs pytest (`pytest ...`, `python -m pytest ...`), else None."""
    if not argv:
        return None
    exe = os.path.basename(argv[0])
    if exe in ("pytest", "py.test"):
        return list(argv[1:])
    if not (_PYTHON.fullmatch(exe) or argv[0] == sys.executable):
        return None
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-m":
        if argv[i] in ("-c", "-"):
            return None
        i += 2 if argv[i] in _PYTHON_VALUE_OPTS else 1
    if i + 1 < len(argv) and argv[i] == "-m" and argv[i + 1] in ("pytest", "py.test"):
        return list(argv[i + 2 :])
    return None


#: interpreter options the wrapper can pass on unchanged (anything else runs unwrapped)
_PASS_THROUGH = frozenset({"-u", "-B", "-E", "-s", "-I", "-P", "-O", "-OO", "-b", "-bb", "-q", "-R"})


def python_command(argv: list[str]) -> tuple[list[str], list[str]] | None:
    """(interpreter options, `-c CODE ...` / `-m MOD ...` / `SCRIPT ...`) when argv runs
    Python in a way gradehook/run_python.py can reproduce, else None."""
    if not argv or not (_PYTHON.fullmatch(os.path.basename(argv[0])) or argv[0] == sys.executable):
        return None
    opts: list[str] = []
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-c", "-m"):
        if argv[i] in _PYTHON_VALUE_OPTS and i + 1 < len(argv):
            opts += argv[i : i + 2]
            i += 2
        elif argv[i] in _PASS_THROUGH:
            opts.append(argv[i])
            i += 1
        else:
            return None  # -i, -, -S (no site: the wrapper cannot import itself), combined flags
    rest = argv[i:]
    if not rest or (rest[0] in ("-c", "-m") and len(rest) < 2):
        return None
    return opts, rest
