"""The package keeps the shape it was simplified to: the pytest layer (session/) wires hooks and
fixtures and stays small, and functions do one job each. The bounds are the maintainers' (the
package's own task data under suite/ is not code of the package)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from package_source import GROUP, PACKAGE, modules, nodes

pytestmark = pytest.mark.xdist_group(GROUP)
#: session/ is wiring: policy, results and records live in the stage folders
SESSION_LINES_BELOW = 1500
LONGEST_FUNCTION = 120
LONG_FUNCTION = 50
LONG_FUNCTIONS_AT_MOST = 20


def function_lengths(path: Path) -> list[tuple[int, str]]:
    """(lines, name) of every function and method in the file, decorators not counted."""
    where = path.relative_to(PACKAGE) if path.is_relative_to(PACKAGE) else path.name
    return [
        (node.end_lineno - node.lineno + 1, f"{where}:{node.name}")
        for node in nodes(path)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def test_the_pytest_layer_stays_wiring():
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in (PACKAGE / "session").glob("*.py"))
    assert lines < SESSION_LINES_BELOW, f"session/ has {lines} lines: move policy into its stage folder"


def test_functions_do_one_job():
    lengths = [row for path in modules() for row in function_lengths(path)]
    assert len(lengths) > 1000  # the whole package was read
    too_long = [row for row in lengths if row[0] > LONGEST_FUNCTION]
    long = sorted((row for row in lengths if row[0] > LONG_FUNCTION), reverse=True)
    assert too_long == [], f"over {LONGEST_FUNCTION} lines: {too_long}"
    assert len(long) <= LONG_FUNCTIONS_AT_MOST, f"{len(long)} functions over {LONG_FUNCTION} lines: {long}"


def test_a_long_function_is_measured(tmp_path):
    planted = tmp_path / "planted.py"
    body = "".join(f"        x{i} = {i}\n" for i in range(130))
    planted.write_text(f"class C:\n    @staticmethod\n    def m():\n{body}\n\ndef f():\n    pass\n")
    assert sorted(function_lengths(planted)) == [(2, "planted.py:f"), (131, "planted.py:m")]
