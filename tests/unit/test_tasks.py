"""Task loading: every file validated, errors name the file and the problem."""

import json
import os
from pathlib import Path

import pytest

from pytest_agentdrift.errors import TaskError
from pytest_agentdrift.tasks.initialtree import hash_repo, parse_tree_file, verify_tree
from pytest_agentdrift.tasks.load import load_task
from pytest_agentdrift.tasks.patterns import PathSpec, PatternError
from pytest_agentdrift.tasks.taskdirs import find_task_dirs
from pytest_agentdrift.testing import freeze, make_task

FIXTURES = Path(__file__).parents[2] / "fixtures"


def test_example_task_loads():
    spec = load_task(FIXTURES / "EX01-fix-discount")
    assert spec.id == "EX01"
    assert [c.name for c in spec.checks] == [
        "focused-tests-pass",
        "only-allowed-paths",
        "tests-untouched",
        "no-forbidden-effects",
        "reports-complete",
    ]
    assert spec.allowed.matches("shop/pricing.py") and not spec.allowed.matches("shop/catalog.py")
    assert spec.protected.matches("tests/test_pricing.py")
    assert set(spec.initial_tree) == set(hash_repo(spec.repo))


def test_content_digest_changes_with_any_file(tmp_path):
    d = make_task(tmp_path, "A01")
    before = load_task(d).content_digest()
    (d / "reset-instructions.md").write_text("changed\n")
    assert load_task(d).content_digest() != before


@pytest.mark.parametrize(
    "mutate, file, problem",
    [
        (lambda d: (d / "task.md").unlink(), "task.md", "required file is missing"),
        (lambda d: (d / "task.toml").write_text("id = 'A01'\nid = 'A02'\n"), "task.toml", "invalid TOML"),
        (
            lambda d: (d / "forbidden-effects.json").write_text('{"network": true,'),
            "forbidden-effects.json",
            "invalid JSON",
        ),
        (
            lambda d: (d / "forbidden-effects.json").write_text('{"network": true, "network": false}'),
            "forbidden-effects.json",
            "duplicate key 'network'",
        ),
        (
            lambda d: (d / "expected-events.json").write_text('{"require": [{"type": "x"}], "require": []}'),
            "expected-events.json",
            "duplicate key 'require'",
        ),
        (
            lambda d: (d / "allowed-paths.txt").write_text("../outside.txt\n"),
            "allowed-paths.txt",
            "escapes the repository",
        ),
        (lambda d: (d / "task.md").write_bytes(b"caf\xe9\n"), "task.md", "not valid UTF-8"),
        (
            lambda d: (d / "forbidden-effects.json").write_text('{"teleport": true}'),
            "forbidden-effects.json",
            "unknown effect(s): teleport",
        ),
        (
            lambda d: (d / "initial-tree.sha256").write_text("nothex  README.md\n"),
            "initial-tree.sha256",
            "expected '<sha256>  <path>'",
        ),
    ],
)
def test_bad_task_files(tmp_path, mutate, file, problem):
    d = make_task(tmp_path, "A01")
    mutate(d)
    with pytest.raises(TaskError) as exc:
        load_task(d)
    assert exc.value.path.endswith(file)
    assert problem in exc.value.problem


@pytest.mark.parametrize(
    "check, problem",
    [
        ({"name": "c", "kind": "teleport", "layer": "scope"}, "unknown check kind 'teleport'"),
        ({"name": "c", "kind": "unchanged", "layer": "vibes"}, "unknown layer 'vibes'"),
        (
            {"name": "c", "kind": "unchanged", "layer": "scope", "critical": "yes"},
            "'critical' must be true, false or \"if_complete\"",
        ),
        ({"name": "c", "kind": "command", "layer": "scope"}, "'run' is required"),
        ({"name": "c", "kind": "unchanged", "layer": "scope", "bogus": 1}, "unknown key(s) bogus"),
        ({"name": "c", "kind": "paths", "layer": "scope", "must_change": ["/etc/passwd"]}, "is absolute"),
        (
            {"name": "c", "kind": "golden", "layer": "scope", "run": ["true"], "expected": "../x"},
            "must stay inside the task directory",
        ),
        ({"name": "c", "kind": "diff_matches", "layer": "scope", "added": ["("]}, "bad regex"),
    ],
)
def test_bad_checks(tmp_path, check, problem):
    d = make_task(tmp_path, "A01", checks=[check])
    with pytest.raises(TaskError) as exc:
        load_task(d)
    assert exc.value.path.endswith("task.toml")
    assert problem in exc.value.problem


def test_absolute_patterns_rejected():
    with pytest.raises(PatternError, match="absolute"):
        PathSpec.from_lines(["/etc/passwd"])
    with pytest.raises(PatternError):
        PathSpec.from_lines(["src/../../x"])


def test_symlink_pointing_outside_is_refused(tmp_path):
    d = make_task(tmp_path, "A01")
    os.symlink("/etc/passwd", d / "repo" / "leak")
    with pytest.raises(TaskError) as exc:
        load_task(d)
    assert "symlink points outside the task" in exc.value.problem
    assert exc.value.path.endswith("repo/leak")


def test_symlink_inside_repo_is_fine(tmp_path):
    d = make_task(tmp_path, "A01", repo={"a.txt": "a\n"})
    os.symlink("a.txt", d / "repo" / "b.txt")
    freeze(d)
    spec = load_task(d)
    assert "b.txt" in spec.initial_tree


def test_verify_tree_names_what_changed(tmp_path):
    d = make_task(tmp_path, "A01", repo={"a.txt": "a\n", "b.txt": "b\n"})
    spec = load_task(d)
    (d / "repo" / "a.txt").write_text("tampered\n")
    (d / "repo" / "c.txt").write_text("new\n")
    with pytest.raises(TaskError) as exc:
        verify_tree(spec, hash_repo(d / "repo"), d / "repo")
    assert "changed: a.txt" in exc.value.problem and "not listed: c.txt" in exc.value.problem


def test_tree_file_matches_sha256sum_output(tmp_path):
    import subprocess

    d = make_task(tmp_path, "A01", repo={"x/y.txt": "y\n", "a.txt": "a\n"})
    expected = subprocess.run(
        "find . -type f | sed 's|^./||' | LC_ALL=C sort | xargs sha256sum",
        shell=True,
        cwd=d / "repo",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert (d / "initial-tree.sha256").read_text() == expected
    assert set(parse_tree_file(d / "initial-tree.sha256")) == {"a.txt", "x/y.txt"}


def test_find_task_dirs_sorted_and_not_nested(tmp_path):
    make_task(tmp_path, "B02")
    make_task(tmp_path, "A01")
    outer = make_task(tmp_path / "deep", "C03")
    make_task(outer / "repo", "D04")  # a task inside a task's repo is fixture data, not a task
    found = [p.name for p in find_task_dirs(tmp_path)]
    assert found == ["A01-task", "B02-task", "C03-task"]


def test_zero_checks_needs_function_file(tmp_path):
    d = make_task(tmp_path, "A01", checks=[])
    with pytest.raises(TaskError, match="at least one"):
        load_task(d)
    (d / "test_checks.py").write_text("def test_x(agent_run):\n    pass\n")
    assert load_task(d).function_files == (d / "test_checks.py",)


@pytest.mark.parametrize(
    "pattern, path, expected",
    [
        ("tests/**", "tests/a/b.py", True),
        ("tests/**", "src/tests.py", False),
        ("*.lock", "deep/x/uv.lock", True),
        ("./top.txt", "top.txt", True),
        ("./top.txt", "a/top.txt", False),
        ("docs/", "docs/x.md", True),
        ("src/*.py", "src/a/b.py", False),
        ("src/**/*.py", "src/a/b.py", True),
        ("src/**/*.py", "src/b.py", True),
        # where the hand-written matcher differed from gitignore (now pathspec's)
        ("a**b", "axxb", True),
        ("a**b", "a/x/b", False),
        ("\\#notes.md", "#notes.md", True),
        ("tests", "tests/unit/x.py", True),
    ],
)
def test_globs(pattern, path, expected):
    assert PathSpec.from_lines([pattern]).matches(path) is expected


def test_negation_last_match_wins():
    spec = PathSpec.from_lines(["src/**", "!src/secret.py"])
    assert spec.matches("src/a.py") and not spec.matches("src/secret.py")


def test_bundled_suite_ids():
    from pytest_agentdrift.tasks.taskdirs import builtin_suite_dir

    ids = [load_task(d).id for d in find_task_dirs(builtin_suite_dir())]
    assert ids == sorted(ids) and ids[0] == "T01"


def test_json_errors_are_line_precise(tmp_path):
    d = make_task(tmp_path, "A01")
    (d / "fixture-manifest.json").write_text('{\n  "a": 1\n  "b": 2\n}')
    with pytest.raises(TaskError) as exc:
        load_task(d)
    assert "line 3" in exc.value.problem
    json.loads('{"ok": 1}')
