"""Loading and validating a frozen task directory. No pytest in here.

`load_task` validates every file of a task directory (docs/task-format.md)
and returns an immutable `TaskSpec` (tasks/taskspec.py); any problem is a
`TaskError` naming the file. Each [[checks]] entry is parsed by
tasks/checkparams.py, repo/ checked against initial-tree.sha256 by
tasks/initialtree.py; tasks/taskdirs.py finds the directories.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pytest_agentdrift.canonical import load_json_file, load_toml_file, read_text_utf8
from pytest_agentdrift.errors import TaskError
from pytest_agentdrift.tasks.checkparams import expect, parse_check, str_list
from pytest_agentdrift.tasks.initialtree import check_symlinks, hash_repo, parse_tree_file, verify_tree
from pytest_agentdrift.tasks.patterns import PathSpec, PatternError, check_pattern
from pytest_agentdrift.tasks.taskspec import CheckSpec, TaskSpec, default_safety_checks
from pytest_agentdrift.vocabulary import (
    ALLOWED_PATHS_FILE,
    EVALUATOR_VERSION_FILE,
    EXPECTED_EVENTS_FILE,
    FIXTURE_MANIFEST_FILE,
    FORBIDDEN_EFFECTS_FILE,
    INITIAL_TREE_FILE,
    RESET_INSTRUCTIONS_FILE,
    TASK_MD_FILE,
    TASK_TOML_FILE,
)

REQUIRED_FILES = (
    TASK_MD_FILE,
    TASK_TOML_FILE,
    ALLOWED_PATHS_FILE,
    FORBIDDEN_EFFECTS_FILE,
    EXPECTED_EVENTS_FILE,
    FIXTURE_MANIFEST_FILE,
    INITIAL_TREE_FILE,
    EVALUATOR_VERSION_FILE,
    RESET_INSTRUCTIONS_FILE,
)

FORBIDDEN_EFFECT_KEYS = frozenset(
    {
        "network",
        "writes_outside",
        "git_mutation",
        "lockfile_change",
        "credential_access",
        "protected_paths",
        "publication",
        "deployment",
    }
)
EXPECTED_EVENT_KEYS = frozenset({"require", "require_any", "forbid", "max"})
TASK_KEYS = frozenset(
    {
        "id",
        "title",
        "behavior",
        "suite",
        "timeout_s",
        "protected",
        "hidden",
        "git",
        "checks",
        "description",
        "default_checks",
    }
)

_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


def _load_patterns(path: Path) -> PathSpec:
    text = read_text_utf8(path, TaskError)
    try:
        return PathSpec.from_lines(text.splitlines())
    except PatternError as exc:
        raise TaskError(str(exc), path) from None


def load_task(task_dir: Path, *, recording_expectations: bool = False) -> TaskSpec:
    """Validate every file of a task directory and return its TaskSpec (a pytest check's
    `expected` file may be absent while `agentdrift task expect` records it)."""
    task_dir = Path(task_dir).absolute()
    _require_files(task_dir)
    toml_path = task_dir / TASK_TOML_FILE
    meta = _task_meta(toml_path)
    checks, function_files = _task_checks(meta, task_dir, toml_path)
    text = read_text_utf8(task_dir / TASK_MD_FILE, TaskError)
    expect(bool(text.strip()), "the instruction is empty", task_dir / TASK_MD_FILE)
    allowed = _load_patterns(task_dir / ALLOWED_PATHS_FILE)
    effects, protected_effects = _forbidden_effects(task_dir / FORBIDDEN_EFFECTS_FILE)
    protected_toml = meta.get("protected", [])
    # one notion of protected: what task.toml protects and what the effects forbid touching
    protected = PathSpec.from_lines(list(dict.fromkeys([*protected_toml, *protected_effects])))
    default_checks = meta.get("default_checks", True)
    if default_checks:
        checks = checks + default_safety_checks(checks)
    events = _expected_events(task_dir / EXPECTED_EVENTS_FILE)
    fixture, evaluator_version = _fixture_and_evaluator(task_dir)
    check_symlinks(task_dir)
    tree = parse_tree_file(task_dir / INITIAL_TREE_FILE)
    hidden = _hidden_files(meta, tree, protected, toml_path)
    _check_task_files(checks, task_dir, toml_path, recording_expectations)
    spec = TaskSpec(
        id=meta["id"],
        title=meta["title"],
        behavior=meta.get("behavior", ""),
        suite=meta.get("suite", "default") or "default",
        timeout_s=float(meta.get("timeout_s", 300)),
        path=task_dir,
        text=text,
        checks=checks,
        allowed=allowed,
        protected=protected,
        git=meta.get("git", True),
        forbidden_effects=effects,
        expected_events=events,
        fixture_manifest=fixture,
        initial_tree=tree,
        evaluator_version=evaluator_version,
        function_files=function_files,
        default_checks=default_checks,
        protected_toml=tuple(protected_toml),
        protected_effects=tuple(protected_effects),
        hidden=hidden,
    )
    # A fixture that changed is refused when collected (and each copy is verified again before a run).
    verify_tree(spec, hash_repo(spec.repo), spec.repo)
    return spec


def _require_files(task_dir: Path) -> None:
    for name in REQUIRED_FILES:
        p = task_dir / name
        expect(p.is_file(), "required file is missing", p)
    expect((task_dir / "repo").is_dir(), "required directory is missing", task_dir / "repo")


def _fixture_and_evaluator(task_dir: Path) -> tuple[dict[str, Any], str]:
    """fixture-manifest.json and the evaluator version (reset-instructions.md is only read)."""
    fixture_path = task_dir / FIXTURE_MANIFEST_FILE
    fixture = load_json_file(fixture_path, TaskError)
    expect(isinstance(fixture, dict), "must be a JSON object", fixture_path)
    evaluator_version = read_text_utf8(task_dir / EVALUATOR_VERSION_FILE, TaskError).strip()
    expect(bool(evaluator_version), "empty evaluator version", task_dir / EVALUATOR_VERSION_FILE)
    read_text_utf8(task_dir / RESET_INSTRUCTIONS_FILE, TaskError)
    return fixture, evaluator_version


def _task_meta(toml_path: Path) -> dict[str, Any]:
    """task.toml, its top-level keys validated (the checks are parsed on their own)."""
    meta = load_toml_file(toml_path, TaskError)
    unknown = sorted(set(meta) - TASK_KEYS)
    expect(not unknown, f"unknown key(s): {', '.join(unknown)}", toml_path)
    task_id = meta.get("id")
    expect(
        isinstance(task_id, str) and bool(_ID_RE.match(task_id)), "'id' must match [A-Za-z][A-Za-z0-9_.-]*", toml_path
    )
    for key in ("title", "behavior", "suite"):
        expect(isinstance(meta.get(key, ""), str), f"'{key}' must be a string", toml_path)
    expect(isinstance(meta.get("title"), str) and bool(meta["title"]), "'title' is required", toml_path)
    timeout = meta.get("timeout_s", 300)
    expect(
        isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0,
        "'timeout_s' must be a positive number",
        toml_path,
    )
    expect(isinstance(meta.get("git", True), bool), "'git' must be true or false", toml_path)
    protected_toml = str_list(meta.get("protected", []), "'protected'", toml_path)
    try:
        PathSpec.from_lines(protected_toml)
    except PatternError as exc:
        raise TaskError(f"protected: {exc}", toml_path) from None
    expect(isinstance(meta.get("default_checks", True), bool), "'default_checks' must be true or false", toml_path)
    return meta


def _task_checks(
    meta: dict[str, Any], task_dir: Path, toml_path: Path
) -> tuple[tuple[CheckSpec, ...], tuple[Path, ...]]:
    """The task's [[checks]], and its test_*.py files of checks."""
    raw_checks = meta.get("checks", [])
    function_files = tuple(sorted(p for p in task_dir.glob("test_*.py") if p.is_file()))
    expect(
        isinstance(raw_checks, list) and (bool(raw_checks) or bool(function_files)),
        "at least one [[checks]] entry (or a test_*.py file of checks) is required",
        toml_path,
    )
    checks = tuple(parse_check(raw, i, toml_path) for i, raw in enumerate(raw_checks))
    names = [c.name for c in checks]
    dupes = sorted({n for n in names if names.count(n) > 1})
    expect(not dupes, f"duplicate check name(s): {', '.join(dupes)}", toml_path)
    return checks, function_files


def _forbidden_effects(effects_path: Path) -> tuple[dict[str, Any], list[str]]:
    """forbidden-effects.json, and the paths it protects."""
    effects = load_json_file(effects_path, TaskError)
    expect(isinstance(effects, dict), "must be a JSON object", effects_path)
    unknown = sorted(set(effects) - FORBIDDEN_EFFECT_KEYS)
    expect(
        not unknown,
        f"unknown effect(s): {', '.join(unknown)}; known: {', '.join(sorted(FORBIDDEN_EFFECT_KEYS))}",
        effects_path,
    )
    for key, value in effects.items():
        if key == "protected_paths":
            for pattern in str_list(value, "protected_paths", effects_path):
                try:
                    check_pattern(pattern)
                except PatternError as exc:
                    raise TaskError(str(exc), effects_path) from None
        else:
            expect(isinstance(value, bool), f"{key!r} must be true or false", effects_path)
    return effects, str_list(effects.get("protected_paths", []), "protected_paths", effects_path)


def _expected_events(events_path: Path) -> dict[str, Any]:
    events = load_json_file(events_path, TaskError)
    if not isinstance(events, dict):
        raise TaskError("must be a JSON object", events_path)
    unknown = sorted(set(events) - EXPECTED_EVENT_KEYS)
    expect(not unknown, f"unknown key(s): {', '.join(unknown)}", events_path)
    for key in ("require", "forbid"):
        expect(
            isinstance(events.get(key, []), list) and all(isinstance(e, dict) for e in events.get(key, [])),
            f"{key!r} must be a list of objects",
            events_path,
        )
    expect(
        isinstance(events.get("require_any", []), list)
        and all(isinstance(g, list) and all(isinstance(e, dict) for e in g) for g in events.get("require_any", [])),
        "'require_any' must be a list of lists of objects",
        events_path,
    )
    expect(
        isinstance(events.get("max", {}), dict)
        and all(isinstance(v, int) and v >= 0 for v in events.get("max", {}).values()),
        "'max' must map event types to counts",
        events_path,
    )
    return events


def _hidden_files(meta: dict[str, Any], tree: dict[str, str], protected: PathSpec, toml_path: Path) -> tuple[str, ...]:
    hidden = tuple(str_list(meta.get("hidden", []), "'hidden'", toml_path))
    for rel in hidden:
        # the graded copy gets a hidden file back only because it is protected
        expect(rel in tree, f"hidden file {rel!r} is not a file of repo/", toml_path)
        expect(
            protected.matches(rel),
            f"hidden file {rel!r} must also be protected (the graded copy restores it)",
            toml_path,
        )
    return hidden


def _check_task_files(
    checks: tuple[CheckSpec, ...], task_dir: Path, toml_path: Path, recording_expectations: bool = False
) -> None:
    """The files and directories of the task directory that checks name exist."""
    for check in checks:
        if "expected" in check.params and not (recording_expectations and check.kind == "pytest"):
            expect(
                (task_dir / check.params["expected"]).is_file(),
                f"check {check.name!r}: expected file {check.params['expected']!r} is missing",
                toml_path,
            )
        if "reference_fix" in check.params:
            expect(
                (task_dir / check.params["reference_fix"]).is_dir(),
                f"check {check.name!r}: reference_fix directory {check.params['reference_fix']!r} is missing",
                toml_path,
            )
        for golden in check.params.get("equal", {}).values():
            expect((task_dir / golden).is_file(), f"check {check.name!r}: golden file {golden!r} is missing", toml_path)
