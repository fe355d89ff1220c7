"""The package's own source as code: its modules, each parsed and walked once per process.

Several tests read the package as code (where a fact is defined, how long functions
are, what every import names). Parsing it takes about two seconds here, so they share
one parse; they run in one xdist group (`GROUP`) so that one worker makes it.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest_agentdrift

PACKAGE = Path(pytest_agentdrift.__file__).parent
#: the xdist group of the modules that read the package's source
GROUP = "package-source"


def modules(*, skip: tuple[str, ...] = ()) -> list[Path]:
    """Every module of the package but the bundled suite (task data) and the folders in `skip`."""
    return [p for p in sorted(PACKAGE.rglob("*.py")) if not {"suite", *skip} & set(p.relative_to(PACKAGE).parts)]


@functools.cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of the module, walked once for all the checks."""
    return tuple(ast.walk(tree(path)))
