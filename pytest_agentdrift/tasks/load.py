"""Loading and validating frozen task directories. No pytest in here.

A task directory is recognised by `task.toml` next to `task.md`
(docs/task-format.md). `load_task` validates every file and returns an
immutable `TaskSpec`; any problem is a `TaskError` naming the file.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentdrift.canonical import digest, load_json_file, load_toml_file, read_text_utf8, sha256_hex
from pytest_agentdrift.errors import TaskError
from pytest_agentdrift.tasks.patterns import PathSpec, PatternError, check_pattern
from pytest_agentdrift.tasks.treesnap import CACHE_NAMES, Snapshot, scan, snapshot
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

LAYERS = (
    "safety",
    "correctness",
    "scope",
    "instruction_fidelity",
    "verification",
    "efficiency",
    "operator_load",
    "recovery",
)

#: keys any check may carry
COMMON_CHECK_KEYS = frozenset({"name", "kind", "layer", "critical", "when_changed"})
#: `critical = "if_complete"`: a failure is critical only while the agent's report claims status complete
CRITICAL_IF_COMPLETE = "if_complete"

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
#: the statuses of an agent's final report (the agent protocol)
REPORT_STATUSES = ("complete", "partial", "blocked", "failed")
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

#: The safety checks every task gets unless it says `default_checks = false`: (concern,
#: the check kinds that already cover it, the check added when none does).
DEFAULT_CHECKS = (
    ("tamper", ("tamper",), ("default-tamper", "tamper", "verification")),
    ("scope", ("paths", "unchanged"), ("default-scope", "paths", "scope")),
    ("effects", ("effects",), ("default-effects", "effects", "safety")),
)


def default_safety_checks(checks: tuple[CheckSpec, ...]) -> tuple[CheckSpec, ...]:
    """The default checks a task's own checks leave uncovered."""
    kinds = {c.kind for c in checks}
    names = {c.name for c in checks}
    return tuple(
        CheckSpec(name, kind, layer, False)
        for _, covered, (name, kind, layer) in DEFAULT_CHECKS
        if not kinds & set(covered) and name not in names
    )


_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


def is_task_dir(path: Path) -> bool:
    """task.toml or task.md, beside repo/ or initial-tree.sha256.

    A half-made task is collected so its missing file is reported, never
    silently skipped; a project that merely has a task.toml is left alone.
    """
    return ((path / TASK_TOML_FILE).is_file() or (path / TASK_MD_FILE).is_file()) and (
        (path / "repo").is_dir() or (path / INITIAL_TREE_FILE).is_file()
    )


@dataclass(frozen=True)
class CheckSpec:
    name: str
    kind: str
    layer: str
    critical: bool | str  # True, False or CRITICAL_IF_COMPLETE
    params: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    when_changed: tuple[str, ...] = ()  # the check applies only when a changed path matches one of these globs

    def to_dict(self) -> dict[str, Any]:
        d = {"name": self.name, "kind": self.kind, "layer": self.layer, "critical": self.critical, **self.params}
        if self.when_changed:
            d["when_changed"] = list(self.when_changed)
        return d

    def critical_for(self, report: dict[str, Any] | None) -> bool:
        """Whether a failure of this check is critical, given the agent's final report."""
        if self.critical == CRITICAL_IF_COMPLETE:
            return bool(report) and report.get("status") == "complete"
        return bool(self.critical)


@dataclass(frozen=True)
class TaskSpec:
    id: str
    title: str
    behavior: str
    suite: str
    timeout_s: float
    path: Path
    text: str
    checks: tuple[CheckSpec, ...]
    allowed: PathSpec
    protected: PathSpec
    git: bool
    forbidden_effects: dict[str, Any]
    expected_events: dict[str, Any]
    fixture_manifest: dict[str, Any]
    initial_tree: dict[str, str]  # relpath -> sha256 hex
    evaluator_version: str
    function_files: tuple[Path, ...] = ()  # test_*.py beside task.toml: checks as pytest functions
    default_checks: bool = True  # false: the task opted out of the default safety checks
    protected_toml: tuple[str, ...] = ()  # task.toml `protected` (protected = it and protected_paths)
    protected_effects: tuple[str, ...] = ()  # forbidden-effects.json `protected_paths`
    hidden: tuple[str, ...] = ()  # protected files of repo/ the agent's copy does not get (restored for grading)

    @property
    def repo(self) -> Path:
        return self.path / "repo"

    @property
    def solution(self) -> Path:
        return self.path / "solution"

    def listing(self) -> list[list[str]]:
        """directory_listing of the task directory, hashed again only when an entry's metadata
        changed: a session takes the task's digests four or five times (identity, record, grading
        cache, evaluator), and each hash reads every file of the task. The change time is in the
        comparison, so a file rewritten to its old size and modification time is hashed again."""
        signature = _stat_signature(self.path)
        cached = self.__dict__.get("_listing")
        if cached is None or cached[0] != signature:
            cached = (signature, directory_listing(self.path))
            object.__setattr__(self, "_listing", cached)  # a cache, not a field: equality is unchanged
        return cached[1]

    def content_digest(self) -> str:
        """Digest of every file of the task directory (names, modes, bytes)."""
        return digest(self.listing())

    def given_digest(self) -> str:
        """The task's identity: what the agent is given (task_set_id; docs/task-format.md)."""
        return digest(split_task(self)[0])

    def grading_digest(self) -> str:
        """How the task is graded: every other file and task.toml key (part of evaluator_id)."""
        return digest(split_task(self)[1])


#: task.toml keys that shape what the agent is given; every other key is how the run is graded
GIVEN_TOML_KEYS = ("id", "timeout_s", "git")
#: files of the task directory, besides repo/, the agent is given (the instruction, verbatim)
GIVEN_FILES = (TASK_MD_FILE,)
#: in neither part as files: initial-tree.sha256 is derived from repo/ (checked against it before
#: every run), task.toml is split by key
DERIVED_FILES = (INITIAL_TREE_FILE, TASK_TOML_FILE)


def given_path(spec: TaskSpec, rel: str) -> bool:
    """Whether a path of the task directory is part of what the agent is given."""
    if rel in GIVEN_FILES:
        return True
    return rel.startswith("repo/") and rel[len("repo/") :] not in spec.hidden


def split_task(spec: TaskSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what the agent is given, how it is graded) of a task directory, as two digestible documents.

    The agent gets task.md and its copy of repo/ (without the hidden files) under the
    task's limits; checks, hidden tests, golden files, solutions, allowed paths and
    forbidden effects only judge it. A fixed check must not make it another task."""
    given: list[list[str]] = []
    grading: list[list[str]] = []
    for entry in spec.listing():
        if entry[0] not in DERIVED_FILES:
            (given if given_path(spec, entry[0]) else grading).append(entry)
    meta = load_toml_file(spec.path / TASK_TOML_FILE, TaskError)
    given_meta = {k: meta[k] for k in GIVEN_TOML_KEYS if k in meta}
    grading_meta = {k: v for k, v in meta.items() if k not in GIVEN_TOML_KEYS}
    return {"files": given, TASK_TOML_FILE: given_meta}, {"files": grading, TASK_TOML_FILE: grading_meta}


def _stat_signature(root: Path) -> list[tuple]:
    """What says a directory's entries are unchanged without reading them (inode, size, mode,
    modification and change times; nobody but the kernel sets a change time)."""
    return [
        (rel, st.st_ino, st.st_size, st.st_mode, st.st_mtime_ns, st.st_ctime_ns)
        for rel, _, st in scan(os.fspath(root), CACHE_NAMES)
    ]


def directory_listing(root: Path) -> list[list[str]]:
    """Sorted [relpath, kind, sha256-or-target] for every entry below root."""
    snap = snapshot(root, skip=CACHE_NAMES)
    return [
        [rel, "exec" if e.kind == "file" and e.mode & 0o111 else e.kind, e.sha256] for rel, e in sorted(snap.items())
    ]


def walk_files(root: Path) -> list[tuple[str, str]]:
    """(posix relpath, full path) of every file and symlink below root, sorted."""
    return sorted((rel, full) for rel, full, _ in scan(os.fspath(root), CACHE_NAMES) if not rel.endswith("/"))


def parse_tree_file(path: Path) -> dict[str, str]:
    """Parse `sha256sum` output lines: `<64 hex>  <relpath>`."""
    text = read_text_utf8(path, TaskError)
    tree: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = re.match(r"^([0-9a-f]{64}) [ *](.+)$", line)
        if not m:
            raise TaskError(f"line {lineno}: expected '<sha256>  <path>'", path)
        rel = m.group(2)
        if rel.startswith("./"):
            rel = rel[2:]
        if rel.startswith("/") or ".." in rel.split("/"):
            raise TaskError(f"line {lineno}: path {rel!r} escapes repo/", path)
        if rel in tree:
            raise TaskError(f"line {lineno}: {rel!r} listed twice", path)
        tree[rel] = m.group(1)
    return tree


def render_tree_file(hashes: dict[str, str]) -> str:
    return "".join(f"{h}  {rel}\n" for rel, h in sorted(hashes.items()))


def hash_repo(repo: Path) -> dict[str, str]:
    """relpath -> sha256 of every file of a repo/ (a symlink: sha256 of its target string)."""
    return tree_hashes(snapshot(repo, skip=CACHE_NAMES))


def tree_hashes(snap: Snapshot) -> dict[str, str]:
    """The initial-tree.sha256 view of a snapshot: files and links, no empty dirs."""
    out = {}
    for rel, e in snap.items():
        if e.kind == "file":
            out[rel] = e.sha256
        elif e.kind == "link":
            out[rel] = sha256_hex(b"symlink:" + e.sha256.encode())
    return out


def check_symlinks(task_dir: Path) -> None:
    """A symlink in repo/ may only point inside the task's repo/."""
    repo = os.path.realpath(task_dir / "repo")
    for _rel, full in walk_files(task_dir / "repo"):
        if os.path.islink(full):
            target = os.readlink(full)
            # resolved, not normalised: a chain of links may leave repo/ where the text does not
            resolved = os.path.realpath(full)
            if os.path.isabs(target) or not resolved.startswith(repo + os.sep):
                raise TaskError(f"symlink points outside the task: {target!r}", Path(full))


def verify_tree(spec: TaskSpec, actual: dict[str, str], where: Path) -> None:
    """Refuse a fixture whose files do not match initial-tree.sha256."""
    if actual == spec.initial_tree:
        return
    missing = sorted(set(spec.initial_tree) - set(actual))
    extra = sorted(set(actual) - set(spec.initial_tree))
    changed = sorted(p for p in set(actual) & set(spec.initial_tree) if actual[p] != spec.initial_tree[p])
    parts = []
    if changed:
        parts.append("changed: " + ", ".join(changed[:5]))
    if missing:
        parts.append("missing: " + ", ".join(missing[:5]))
    if extra:
        parts.append("not listed: " + ", ".join(extra[:5]))
    raise TaskError(
        "repo/ does not match initial-tree.sha256 (" + "; ".join(parts) + "); the fixture changed and is refused",
        spec.path / INITIAL_TREE_FILE,
    )


def _expect(cond: bool, problem: str, path: Path) -> None:
    if not cond:
        raise TaskError(problem, path)


def _str_list(value: Any, what: str, path: Path) -> list[str]:
    _expect(
        isinstance(value, list) and all(isinstance(v, str) for v in value), f"{what} must be a list of strings", path
    )
    return list(value)


@dataclass(frozen=True)
class _CheckAt:
    """A check being parsed: where it is declared, for its error messages."""

    where: str  # "check 'name'"
    kind: str
    path: Path  # its task.toml

    def expect(self, cond: bool, problem: str) -> None:
        _expect(cond, f"{self.where}: {problem}", self.path)

    def str_list(self, value: Any, what: str) -> list[str]:
        return _str_list(value, f"{self.where}: {what}", self.path)

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
    _expect(isinstance(observations, dict), "needs an object 'observations' (node id -> [[name, repr], ...])", path)
    for nodeid, values in observations.items():
        _expect(
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
    at.expect(
        isinstance(steps, list)
        and bool(steps)
        and all(isinstance(st, list) and len(st) == 2 and all(isinstance(x, str) and x for x in st) for st in steps),
        '\'steps\' must be a non-empty list of ["function|alternative", "path/of/file.py"] pairs',
    )
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


def _parse_check(raw: Any, index: int, toml_path: Path) -> CheckSpec:
    where = f"checks[{index}]"
    _expect(isinstance(raw, dict), f"{where} must be a table", toml_path)
    name = raw.get("name")
    _expect(isinstance(name, str) and bool(name), f"{where}: 'name' must be a non-empty string", toml_path)
    where = f"check {name!r}"
    kind = raw.get("kind")
    _expect(
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


def _task_relative(rel: str, what: str, path: Path) -> None:
    _expect(
        not os.path.isabs(rel) and ".." not in Path(rel).parts,
        f"{what}: {rel!r} must stay inside the task directory",
        path,
    )


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
    _expect(bool(text.strip()), "the instruction is empty", task_dir / TASK_MD_FILE)
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
        _expect(p.is_file(), "required file is missing", p)
    _expect((task_dir / "repo").is_dir(), "required directory is missing", task_dir / "repo")


def _fixture_and_evaluator(task_dir: Path) -> tuple[dict[str, Any], str]:
    """fixture-manifest.json and the evaluator version (reset-instructions.md is only read)."""
    fixture_path = task_dir / FIXTURE_MANIFEST_FILE
    fixture = load_json_file(fixture_path, TaskError)
    _expect(isinstance(fixture, dict), "must be a JSON object", fixture_path)
    evaluator_version = read_text_utf8(task_dir / EVALUATOR_VERSION_FILE, TaskError).strip()
    _expect(bool(evaluator_version), "empty evaluator version", task_dir / EVALUATOR_VERSION_FILE)
    read_text_utf8(task_dir / RESET_INSTRUCTIONS_FILE, TaskError)
    return fixture, evaluator_version


def _task_meta(toml_path: Path) -> dict[str, Any]:
    """task.toml, its top-level keys validated (the checks are parsed on their own)."""
    meta = load_toml_file(toml_path, TaskError)
    unknown = sorted(set(meta) - TASK_KEYS)
    _expect(not unknown, f"unknown key(s): {', '.join(unknown)}", toml_path)
    task_id = meta.get("id")
    _expect(
        isinstance(task_id, str) and bool(_ID_RE.match(task_id)), "'id' must match [A-Za-z][A-Za-z0-9_.-]*", toml_path
    )
    for key in ("title", "behavior", "suite"):
        _expect(isinstance(meta.get(key, ""), str), f"'{key}' must be a string", toml_path)
    _expect(isinstance(meta.get("title"), str) and bool(meta["title"]), "'title' is required", toml_path)
    timeout = meta.get("timeout_s", 300)
    _expect(
        isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0,
        "'timeout_s' must be a positive number",
        toml_path,
    )
    _expect(isinstance(meta.get("git", True), bool), "'git' must be true or false", toml_path)
    protected_toml = _str_list(meta.get("protected", []), "'protected'", toml_path)
    try:
        PathSpec.from_lines(protected_toml)
    except PatternError as exc:
        raise TaskError(f"protected: {exc}", toml_path) from None
    _expect(isinstance(meta.get("default_checks", True), bool), "'default_checks' must be true or false", toml_path)
    return meta


def _task_checks(
    meta: dict[str, Any], task_dir: Path, toml_path: Path
) -> tuple[tuple[CheckSpec, ...], tuple[Path, ...]]:
    """The task's [[checks]], and its test_*.py files of checks."""
    raw_checks = meta.get("checks", [])
    function_files = tuple(sorted(p for p in task_dir.glob("test_*.py") if p.is_file()))
    _expect(
        isinstance(raw_checks, list) and (bool(raw_checks) or bool(function_files)),
        "at least one [[checks]] entry (or a test_*.py file of checks) is required",
        toml_path,
    )
    checks = tuple(_parse_check(raw, i, toml_path) for i, raw in enumerate(raw_checks))
    names = [c.name for c in checks]
    dupes = sorted({n for n in names if names.count(n) > 1})
    _expect(not dupes, f"duplicate check name(s): {', '.join(dupes)}", toml_path)
    return checks, function_files


def _forbidden_effects(effects_path: Path) -> tuple[dict[str, Any], list[str]]:
    """forbidden-effects.json, and the paths it protects."""
    effects = load_json_file(effects_path, TaskError)
    _expect(isinstance(effects, dict), "must be a JSON object", effects_path)
    unknown = sorted(set(effects) - FORBIDDEN_EFFECT_KEYS)
    _expect(
        not unknown,
        f"unknown effect(s): {', '.join(unknown)}; known: {', '.join(sorted(FORBIDDEN_EFFECT_KEYS))}",
        effects_path,
    )
    for key, value in effects.items():
        if key == "protected_paths":
            for pattern in _str_list(value, "protected_paths", effects_path):
                try:
                    check_pattern(pattern)
                except PatternError as exc:
                    raise TaskError(str(exc), effects_path) from None
        else:
            _expect(isinstance(value, bool), f"{key!r} must be true or false", effects_path)
    return effects, _str_list(effects.get("protected_paths", []), "protected_paths", effects_path)


def _expected_events(events_path: Path) -> dict[str, Any]:
    events = load_json_file(events_path, TaskError)
    _expect(isinstance(events, dict), "must be a JSON object", events_path)
    unknown = sorted(set(events) - EXPECTED_EVENT_KEYS)
    _expect(not unknown, f"unknown key(s): {', '.join(unknown)}", events_path)
    for key in ("require", "forbid"):
        _expect(
            isinstance(events.get(key, []), list) and all(isinstance(e, dict) for e in events.get(key, [])),
            f"{key!r} must be a list of objects",
            events_path,
        )
    _expect(
        isinstance(events.get("require_any", []), list)
        and all(isinstance(g, list) and all(isinstance(e, dict) for e in g) for g in events.get("require_any", [])),
        "'require_any' must be a list of lists of objects",
        events_path,
    )
    _expect(
        isinstance(events.get("max", {}), dict)
        and all(isinstance(v, int) and v >= 0 for v in events.get("max", {}).values()),
        "'max' must map event types to counts",
        events_path,
    )
    return events


def _hidden_files(meta: dict[str, Any], tree: dict[str, str], protected: PathSpec, toml_path: Path) -> tuple[str, ...]:
    hidden = tuple(_str_list(meta.get("hidden", []), "'hidden'", toml_path))
    for rel in hidden:
        # the graded copy gets a hidden file back only because it is protected
        _expect(rel in tree, f"hidden file {rel!r} is not a file of repo/", toml_path)
        _expect(
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
            _expect(
                (task_dir / check.params["expected"]).is_file(),
                f"check {check.name!r}: expected file {check.params['expected']!r} is missing",
                toml_path,
            )
        if "reference_fix" in check.params:
            _expect(
                (task_dir / check.params["reference_fix"]).is_dir(),
                f"check {check.name!r}: reference_fix directory {check.params['reference_fix']!r} is missing",
                toml_path,
            )
        for golden in check.params.get("equal", {}).values():
            _expect(
                (task_dir / golden).is_file(), f"check {check.name!r}: golden file {golden!r} is missing", toml_path
            )


def find_task_dirs(root: Path) -> list[Path]:
    """Task directories at or below root, sorted; never descends into a task."""
    root = Path(root)
    if is_task_dir(root):
        return [root]
    found = []
    for dirpath, dirnames, _ in os.walk(root):
        dirnames.sort()
        here = Path(dirpath)
        if is_task_dir(here):
            found.append(here)
            dirnames[:] = []
        else:
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "__pycache__"]
    return sorted(found)


def session_task_dirs(args: list[str]) -> dict[str, Path]:
    """task id -> directory for every task the command line names (before collection)."""
    found: dict[str, Path] = {}
    for arg in args:
        path = Path(arg.split("::", 1)[0])
        if not path.is_dir():
            continue
        for d in find_task_dirs(path):
            try:
                tid = tomllib.loads((d / TASK_TOML_FILE).read_text(encoding="utf-8")).get("id")
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                continue  # collection reports the malformed task
            if isinstance(tid, str):
                found[tid] = d.absolute()
    return dict(sorted(found.items()))


def builtin_suite_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "suite"
