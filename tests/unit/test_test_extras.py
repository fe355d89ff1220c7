"""A fresh machine installs only what pyproject.toml names. Every package a test imports must be a
dependency or a test extra (named there, not arriving through another package), and a missing one must
fail, not skip: pytest.importorskip would turn a missing install step into a quiet skip."""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
#: code the suite carries itself: graded task trees and agent fixtures are not the tests' imports
NOT_TEST_CODE = ("tests/oracles/right", "tests/data")


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    rows = list(project["dependencies"]) + list(project["optional-dependencies"]["test"])
    return [Requirement(r) for r in rows]


def _local_names() -> set[str]:
    """Modules the suite imports from its own tree (sys.path holds the test folders under pytest)."""
    names = {p.stem for p in TESTS.rglob("*.py")} | {p.name for p in TESTS.rglob("*") if p.is_dir()}
    return names | {p.stem for p in ROOT.glob("*.py")} | {"pytest_agentdrift"}


def _imports(text: str) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.lineno, node.module))
    return out


def _test_files() -> dict[str, str]:
    return {
        str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
        for p in TESTS.rglob("*.py")
        if not str(p.relative_to(ROOT)).startswith(NOT_TEST_CODE)
    }


def unnamed_imports(files: dict[str, str], dists: dict[str, list[str]]) -> list[str]:
    """Each import in `files` of a package that pyproject.toml does not name, as one line."""
    reqs = _requirements()
    named = {canonicalize_name(r.name) for r in reqs}
    for_elsewhere = {canonicalize_name(r.name) for r in reqs if r.marker and not r.marker.evaluate()}
    local, problems = _local_names(), []
    for name, text in files.items():
        for line, module in _imports(text):
            top = module.split(".")[0]
            if top in sys.stdlib_module_names or top in local or top.startswith("_"):
                continue
            owners = {canonicalize_name(d) for d in dists.get(top, [])}
            where = f"{name}:{line} imports {top}"
            if not owners:
                if canonicalize_name(top) not in for_elsewhere:
                    problems.append(f"{where}, which is not installed: name its package in the test extras")
            elif not owners & named:
                problems.append(f"{where} from {sorted(owners)[0]}, which pyproject.toml does not name")
    return problems


def test_every_imported_package_is_named_in_the_dependencies_or_test_extras():
    problems = unnamed_imports(_test_files(), metadata.packages_distributions())
    assert not problems, "\n".join(problems)


def test_no_test_skips_on_a_missing_package():
    found = [
        f"{name}:{node.lineno}"
        for name, text in _test_files().items()
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Attribute) and node.attr == "importorskip"
    ]
    assert not found, f"pytest.importorskip hides a missing install step as a skip: {found}"


def test_the_check_sees_a_package_nobody_named():
    """The rule itself can fail: a package outside the extras is reported, one inside is not."""
    files = {"tests/unit/probe.py": "import six\nimport xmlschema.validators\nimport harbor\n"}
    problems = unnamed_imports(files, {"six": ["six"], "xmlschema": ["xmlschema"]})
    assert len(problems) == (1 if sys.version_info < (3, 12) else 2)
    assert "probe.py:1 imports six from six, which pyproject.toml does not name" in problems[0]
