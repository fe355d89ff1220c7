"""Every `from pytest_agentdrift... import name` in the package resolves, the ones inside functions too.

Most of the package imports lazily (the plugin's start-up budget), so a name
moved or renamed in one module breaks another only when that function first
runs; ruff does not see it. This walks every import statement instead.
"""

from __future__ import annotations

import ast
import importlib

import pytest
from package_source import GROUP, PACKAGE, modules, nodes

pytestmark = pytest.mark.xdist_group(GROUP)


def _package_imports():
    for path in modules(skip=("gradehook",)):  # the grading plugins run in their own process
        for node in nodes(path):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and (node.module or "").startswith("pytest_agentdrift")
            ):
                for alias in node.names:
                    yield path.relative_to(PACKAGE), node.module, alias.name


def test_every_package_import_resolves():
    missing = []
    for where, module, name in _package_imports():
        mod = importlib.import_module(module)
        if not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{where}: from {module} import {name}")
    assert missing == []
