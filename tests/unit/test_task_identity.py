"""The two digests of a task: what the agent is given (task_set_id) and how it is graded (evaluator_id)."""

from pathlib import Path

import pytest

from pytest_agentdrift.record.results import evaluator_id, task_set_id
from pytest_agentdrift.tasks.load import load_task
from pytest_agentdrift.testing import freeze, make_task


def _task(tmp_path: Path) -> Path:
    d = make_task(
        tmp_path,
        "A01",
        repo={"app.py": "X = 1\n", "tests/test_app.py": "def test_x():\n    pass\n", "tests/test_held.py": "pass\n"},
        checks=[{"name": "tests", "kind": "pytest", "layer": "correctness", "args": ["tests"]}],
        protected=["tests/**"],
        solution={"app.py": "X = 2\n"},
    )
    toml = d / "task.toml"
    toml.write_text(toml.read_text().replace("git = true", 'git = true\nhidden = ["tests/test_held.py"]'))
    (d / "golden").mkdir()
    (d / "golden" / "out.txt").write_text("2\n")
    (d / "hidden").mkdir()
    (d / "hidden" / "test_more.py").write_text("def test_more():\n    pass\n")
    freeze(d)
    return d


def _ids(d: Path) -> tuple[str, str]:
    spec = load_task(d)
    return task_set_id([spec]), evaluator_id([spec])


def _edit_toml(d: Path, old: str, new: str) -> None:
    toml = d / "task.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new, 1))


def _append(rel: str):
    def edit(d: Path) -> None:
        (d / rel).write_text((d / rel).read_text() + "# edited\n")
        if rel.startswith("repo/"):
            freeze(d)

    return edit


GIVEN = {
    "task.md": _append("task.md"),
    "repo/ (a file the agent gets)": _append("repo/app.py"),
    "task.toml timeout_s": lambda d: _edit_toml(d, "timeout_s = 30", "timeout_s = 60"),
    "task.toml git": lambda d: _edit_toml(d, "git = true", "git = false"),
}
GRADING = {
    "task.toml checks": lambda d: _edit_toml(d, 'args = ["tests"]', 'args = ["tests/test_app.py"]'),
    "repo/ (a hidden test)": _append("repo/tests/test_held.py"),
    "hidden/": _append("hidden/test_more.py"),
    "golden/": _append("golden/out.txt"),
    "solution/": _append("solution/files/app.py"),
    "allowed-paths.txt": lambda d: (d / "allowed-paths.txt").write_text("app.py\n"),
    "forbidden-effects.json": lambda d: (d / "forbidden-effects.json").write_text('{"network": false}\n'),
    "expected-events.json": lambda d: (d / "expected-events.json").write_text('{"max": {"write": 3}}\n'),
    "task.toml title": lambda d: _edit_toml(d, 'title = "Task A01"', 'title = "Renamed"'),
    "task.toml protected": lambda d: _edit_toml(d, 'protected = ["tests/**"]', 'protected = ["tests/**", "x"]'),
}


@pytest.mark.parametrize(
    ("what", "moves"), [*((w, "task_set_id") for w in sorted(GIVEN)), *((w, "evaluator_id") for w in sorted(GRADING))]
)
def test_what_the_agent_is_given_moves_the_task_set_and_how_it_is_graded_the_evaluator(tmp_path, what, moves):
    d = _task(tmp_path)
    before = dict(zip(("task_set_id", "evaluator_id"), _ids(d), strict=True))
    (GIVEN if moves == "task_set_id" else GRADING)[what](d)
    after = dict(zip(("task_set_id", "evaluator_id"), _ids(d), strict=True))
    assert {k for k in after if after[k] != before[k]} == {moves}, what


def test_the_two_parts_cover_the_whole_directory(tmp_path):
    from pytest_agentdrift.tasks.taskspec import DERIVED_FILES, directory_listing, split_task

    d = _task(tmp_path)
    given, grading = split_task(load_task(d))
    listed = {e[0] for e in directory_listing(d)} - set(DERIVED_FILES)
    assert {e[0] for e in given["files"]} | {e[0] for e in grading["files"]} == listed
    assert not {e[0] for e in given["files"]} & {e[0] for e in grading["files"]}
    assert "repo/tests/test_held.py" in {e[0] for e in grading["files"]}


@pytest.mark.parametrize(
    "blocks, hinted",
    [
        ([("evaluator_id", "a", "b")], True),
        ([("evaluator_id", "a", "b"), ("source_id", "c", "d")], True),  # the task files' digest moves with a check
        ([("evaluator_id", "a", "b"), ("task_set_id", "c", "d")], False),  # another task: regrading cannot help
        ([("evaluator_id", "a", "b"), ("cli_version", "1", "2")], False),
        ([("source_id", "c", "d")], False),
    ],
)
def test_a_refusal_only_by_the_grading_points_to_regrade(blocks, hinted):
    from pytest_agentdrift.manifest.identity import StampComparison, regrade_hint

    hint = regrade_hint(StampComparison(comparable=False, blocks=blocks), "runs/base")
    assert (hint is not None) == hinted
    if hinted:
        assert "regrade the older record: agentdrift regrade runs/base --out runs/base-regraded" in hint
