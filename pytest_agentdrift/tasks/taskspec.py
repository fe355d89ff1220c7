"""A task as data: `TaskSpec` and its `CheckSpec`s, the scoring layers, the default safety checks,
and the task's identity (what the agent is given, how it is graded). No pytest in here.

`tasks/load.py` builds a TaskSpec from a task directory (docs/task-format.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentdrift.canonical import digest, load_toml_file
from pytest_agentdrift.errors import TaskError
from pytest_agentdrift.tasks.patterns import PathSpec
from pytest_agentdrift.tasks.treesnap import CACHE_NAMES, scan, snapshot
from pytest_agentdrift.vocabulary import INITIAL_TREE_FILE, TASK_MD_FILE, TASK_TOML_FILE

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

#: `critical = "if_complete"`: a failure is critical only while the agent's report claims status complete
CRITICAL_IF_COMPLETE = "if_complete"

#: the statuses of an agent's final report (the agent protocol)
REPORT_STATUSES = ("complete", "partial", "blocked", "failed")

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

    def critical_for(self, report: Mapping[str, object] | None) -> bool:
        """Whether a failure of this check is critical, given the agent's final report."""
        if self.critical == CRITICAL_IF_COMPLETE:
            return report is not None and report.get("status") == "complete"
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


def _stat_signature(root: Path) -> list[tuple[str, int, int, int, int, int]]:
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
