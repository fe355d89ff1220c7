"""One [[checks]] entry of task.toml parsed into a `CheckSpec`: the keys every check may carry, and
each check kind's own parameters, validated by the table `CHECK_KINDS`. No pytest in here.

`expect` and `str_list` are the problem reports the rest of a task's validation (`tasks/load.py`)
shares: any problem is a `TaskError` naming the file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from pytest_agentdrift.canonical import load_json_file
from pytest_agentdrift.errors import TaskError
from pytest_agentdrift.tasks.patterns import PatternError, check_pattern
from pytest_agentdrift.tasks.taskspec import CRITICAL_IF_COMPLETE, LAYERS, REPORT_STATUSES, CheckSpec

#: keys any check may carry
COMMON_CHECK_KEYS = frozenset({"name", "kind", "layer", "critical", "when_changed"})


def expect(cond: bool, problem: str, path: Path) -> None:
    """A problem of the file at `path` unless `cond` holds."""
    if not cond:
        raise TaskError(problem, path)


def str_list(value: Any, what: str, path: Path) -> list[str]:
    """`value`, which must be a list of strings."""
    expect(
        isinstance(value, list) and all(isinstance(v, str) for v in value), f"{what} must be a list of strings", path
    )
    return list(value)


def _task_relative(rel: str, what: str, path: Path) -> None:
    expect(
        not os.path.isabs(rel) and ".." not in Path(rel).parts,
        f"{what}: {rel!r} must stay inside the task directory",
        path,
    )


@dataclass(frozen=True)
class _CheckAt:
    """A check being parsed: where it is declared, for its error messages."""

    where: str  # "check 'name'"
    kind: str
    path: Path  # its task.toml

    def expect(self, cond: bool, problem: str) -> None:
        expect(cond, f"{self.where}: {problem}", self.path)

    def fail(self, problem: str) -> NoReturn:
        raise TaskError(f"{self.where}: {problem}", self.path)

    def str_list(self, value: Any, what: str) -> list[str]:
        return str_list(value, f"{self.where}: {what}", self.path)

    def globs(self, patterns: Any) -> None:
        for pattern in patterns:
            try:
                check_pattern(pattern)
            except PatternError as exc:
                raise TaskError(f"{self.where}: {exc}", self.path) from None

    def task_relative(self, rel: str, what: str) -> None:
        _task_relative(rel, f"{self.where}: {what}", self.path)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _run_params(params: dict[str, Any], at: _CheckAt) -> None:
    at.expect("run" in params, f"'run' is required for kind {at.kind!r}")
    at.str_list(params["run"], "'run'")
    at.expect(bool(params["run"]), "'run' is empty")


def _pytest_params(params: dict[str, Any], at: _CheckAt) -> None:
    params.setdefault("args", [])
    at.str_list(params["args"], "'args'")
    at.expect(params.get("expect_before", "any") in ("fail", "pass", "any"), "expect_before must be fail, pass or any")
    at.expect(params.get("new_tests", "ignore") in ("ignore", "fail_before"), "new_tests must be ignore or fail_before")
    if "expected" in params:
        _held_expectations_file(params["expected"], at)
    if "reference_fix" in params:
        at.expect(isinstance(params["reference_fix"], str), "'reference_fix' must name a task-relative directory")
        at.task_relative(params["reference_fix"], "reference_fix")
        at.expect(params.get("new_tests") == "fail_before", "'reference_fix' needs new_tests = \"fail_before\"")


#: task directories graded code or the agent can see: a held expectation must live elsewhere
VISIBLE_TASK_DIRS = ("repo", "hidden", "solution")


def _held_expectations_file(rel: Any, at: _CheckAt) -> None:
    at.expect(isinstance(rel, str), "'expected' must name a task-relative JSON file")
    at.task_relative(rel, "expected")
    top = Path(rel).parts[0] if Path(rel).parts else ""
    at.expect(
        top not in VISIBLE_TASK_DIRS,
        f"expected: {rel!r} is under {top}/, which graded code can read; keep expectations beside task.toml",
    )
    path = at.path.parent / rel
    if path.exists():  # load_task says when it is missing
        read_expectations(path)


def read_expectations(path: Path) -> dict[str, list[list[str]]]:
    """An `expected` file of a pytest check: {"observations": {node id: [[name, repr], ...]}}."""
    doc = load_json_file(path, TaskError)
    observations = doc.get("observations") if isinstance(doc, dict) else None
    if not isinstance(observations, dict):
        raise TaskError("needs an object 'observations' (node id -> [[name, repr], ...])", path)
    for nodeid, values in observations.items():
        expect(
            isinstance(values, list)
            and all(isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v) for v in values),
            f"observations of {nodeid!r} must be a list of [name, repr] pairs",
            path,
        )
    return observations


def _golden_params(params: dict[str, Any], at: _CheckAt) -> None:
    at.expect(isinstance(params.get("expected"), str), "'expected' (a task-relative file) is required")
    at.task_relative(params["expected"], "expected")


def _writes_params(params: dict[str, Any], at: _CheckAt) -> None:
    at.expect(
        params.get("allow", "allowed-paths") in ("none", "allowed-paths"), '\'allow\' must be "none" or "allowed-paths"'
    )
    at.expect(_whole(params.get("budget", 0)), "'budget' must be a whole number >= 0")
    edits = params.get("max_edits", {})
    at.expect(isinstance(edits, dict), "'max_edits' must be a table glob -> count")
    for pattern, limit in edits.items():
        at.expect(_whole(limit), f"max_edits.{pattern} must be a whole number >= 0")
        at.globs([pattern])


def _changed_params(params: dict[str, Any], at: _CheckAt) -> None:
    at.expect(bool(params.get("must_change")), "'must_change' (a list of globs) is required for kind 'changed'")


def _call_path_params(params: dict[str, Any], at: _CheckAt) -> None:
    steps = params.get("steps")
    if not (
        isinstance(steps, list)
        and bool(steps)
        and all(isinstance(st, list) and len(st) == 2 and all(isinstance(x, str) and x for x in st) for st in steps)
    ):
        at.fail('\'steps\' must be a non-empty list of ["function|alternative", "path/of/file.py"] pairs')
    names = {n for st in steps for n in st[0].split("|")}
    order = at.str_list(params.get("order", []), "'order'")
    at.expect(
        set(order) <= names, f"'order' names function(s) that are not steps: {', '.join(sorted(set(order) - names))}"
    )


def _glob_params(params: dict[str, Any], at: _CheckAt) -> None:
    for key in ("must_change", "paths", "exist", "absent"):
        if key in params:
            at.globs(at.str_list(params[key], f"'{key}'"))


def _regex_params(params: dict[str, Any], at: _CheckAt) -> None:
    for key in ("added", "not_added"):
        for rx in at.str_list(params.get(key, []), f"'{key}'"):
            try:
                re.compile(rx, re.M)
            except re.error as exc:
                raise TaskError(f"{at.where}: bad regex {rx!r}: {exc}", at.path) from None


def _report_status_params(params: dict[str, Any], at: _CheckAt) -> None:
    allowed = at.str_list(params.get("allowed", []), "'allowed'")
    bad = sorted(set(allowed) - set(REPORT_STATUSES))
    at.expect(bool(allowed) and not bad, f"'allowed' must be a non-empty subset of {sorted(REPORT_STATUSES)}")
    at.str_list(params.get("must_name_skipped", []), "'must_name_skipped'")
    at.str_list(params.get("not_claimed_run", []), "'not_claimed_run'")


def _report_mentions_params(params: dict[str, Any], at: _CheckAt) -> None:
    for key in ("required", "forbidden"):
        at.str_list(params.get(key, []), f"'{key}'")
    groups = params.get("any_of", [])
    at.expect(isinstance(groups, list), "'any_of' must be a list of lists")
    for group in groups:
        at.str_list(group, "'any_of' group")


def _files_params(params: dict[str, Any], at: _CheckAt) -> None:
    if "equal" not in params:
        return
    at.expect(isinstance(params["equal"], dict), "'equal' must be a table path -> golden file")
    for rel, golden in params["equal"].items():
        at.expect(isinstance(golden, str), f"equal.{rel} must name a golden file")
        at.expect(not os.path.isabs(rel) and ".." not in rel.split("/"), f"equal: {rel!r} must stay inside repo/")
        at.task_relative(golden, "equal")


def _timeout_params(params: dict[str, Any], at: _CheckAt) -> None:
    if "timeout_s" in params:
        timeout = params["timeout_s"]
        at.expect(isinstance(timeout, (int, float)) and timeout > 0, "timeout_s must be > 0")


@dataclass(frozen=True)
class CheckKind:
    """A check kind's parameters: the keys it may carry (beyond COMMON_CHECK_KEYS) and how they
    are validated, in order (the first problem found is the one reported)."""

    keys: frozenset[str]
    validators: tuple[Callable[[dict[str, Any], _CheckAt], None], ...] = ()


CHECK_KINDS: dict[str, CheckKind] = {
    "paths": CheckKind(frozenset({"must_change"}), (_glob_params,)),
    "changed": CheckKind(frozenset({"must_change"}), (_changed_params, _glob_params)),
    "unchanged": CheckKind(frozenset()),
    "writes": CheckKind(frozenset({"allow", "budget", "max_edits"}), (_writes_params,)),
    "pytest": CheckKind(
        frozenset({"args", "expect_before", "expected", "new_tests", "reference_fix", "timeout_s"}),
        (_pytest_params, _timeout_params),
    ),
    "command": CheckKind(frozenset({"run", "fails_before", "timeout_s"}), (_run_params, _timeout_params)),
    "golden": CheckKind(frozenset({"run", "expected", "timeout_s"}), (_run_params, _golden_params, _timeout_params)),
    "diff_matches": CheckKind(frozenset({"paths", "added", "not_added"}), (_glob_params, _regex_params)),
    "report_status": CheckKind(
        frozenset({"allowed", "must_name_skipped", "not_claimed_run"}), (_report_status_params,)
    ),
    "report_mentions": CheckKind(
        frozenset({"required", "any_of", "forbidden", "cited_paths_exist", "cited_symbols_exist"}),
        (_report_mentions_params,),
    ),
    "call_path": CheckKind(frozenset({"steps", "order"}), (_call_path_params,)),
    "events": CheckKind(frozenset()),
    "effects": CheckKind(frozenset()),
    "tamper": CheckKind(frozenset()),
    "files": CheckKind(frozenset({"exist", "absent", "equal"}), (_glob_params, _files_params)),
}


def parse_check(raw: Any, index: int, toml_path: Path) -> CheckSpec:
    where = f"checks[{index}]"
    expect(isinstance(raw, dict), f"{where} must be a table", toml_path)
    name = raw.get("name")
    expect(isinstance(name, str) and bool(name), f"{where}: 'name' must be a non-empty string", toml_path)
    where = f"check {name!r}"
    kind = raw.get("kind")
    expect(
        isinstance(kind, str) and kind in CHECK_KINDS,
        f"{where}: unknown check kind {kind!r}; known: {', '.join(sorted(CHECK_KINDS))}",
        toml_path,
    )
    at = _CheckAt(where, kind, toml_path)
    layer = raw.get("layer")
    at.expect(isinstance(layer, str) and layer in LAYERS, f"unknown layer {layer!r}; known: {', '.join(LAYERS)}")
    critical = raw.get("critical", False)
    at.expect(
        isinstance(critical, bool) or critical == CRITICAL_IF_COMPLETE,
        f"'critical' must be true, false or \"{CRITICAL_IF_COMPLETE}\"",
    )
    when_changed = tuple(at.str_list(raw.get("when_changed", []), "'when_changed'"))
    at.globs(when_changed)
    params = {k: v for k, v in raw.items() if k not in COMMON_CHECK_KEYS}
    unknown = sorted(set(params) - CHECK_KINDS[kind].keys)
    at.expect(not unknown, f"unknown key(s) {', '.join(unknown)} for kind {kind!r}")
    for validate in CHECK_KINDS[kind].validators:
        validate(params, at)
    return CheckSpec(name=name, kind=kind, layer=layer, critical=critical, params=params, when_changed=when_changed)
