"""evaluator_id names grading code by logical component, not by path."""

import shutil
from pathlib import Path

import pytest

from pytest_agentdrift.grade.evaluator import PACKAGE_ROOT, code_digest, evaluator_components


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "pkg"
    shutil.copytree(PACKAGE_ROOT, dest, ignore=shutil.ignore_patterns("suite", "__pycache__"))
    return dest


def _declaring_file(root: Path, component: str) -> Path:
    for path in root.rglob("*.py"):
        if any(line.startswith(f'EVALUATOR_COMPONENT = "{component}"') for line in path.read_text().splitlines()):
            return path
    raise AssertionError(f"no file declares {component}")


def test_the_grading_components_are_declared():
    # the sandbox init and the grading server's host side decide exit codes, limits and guards of graded processes
    assert {
        "checks",
        "scoring",
        "grade_plugin",
        "grade_launcher",
        "grade_server",
        "grade_server_host",
        "sandbox_init",
    } <= set(evaluator_components())


def test_moving_a_module_keeps_the_evaluator_identity(package_copy: Path):
    before = (evaluator_components(package_copy), code_digest(package_copy))
    checks = _declaring_file(package_copy, "checks")
    elsewhere = package_copy / "moved_stage" / "renamed_checks.py"
    elsewhere.parent.mkdir()
    checks.rename(elsewhere)
    assert (evaluator_components(package_copy), code_digest(package_copy)) == before


def test_editing_grading_code_changes_the_evaluator_identity(package_copy: Path):
    before = (evaluator_components(package_copy), code_digest(package_copy))
    checks = _declaring_file(package_copy, "checks")
    checks.write_text(checks.read_text() + "\n# a change of grading code\n")
    after = (evaluator_components(package_copy), code_digest(package_copy))
    assert after[0]["checks"] != before[0]["checks"]
    assert after[1] != before[1]


def test_a_component_declared_twice_is_an_error(package_copy: Path):
    checks = _declaring_file(package_copy, "checks")
    shutil.copy(checks, checks.with_name("copy_of_checks.py"))
    with pytest.raises(ValueError, match="declared twice"):
        evaluator_components(package_copy)
