"""Helpers for tests of tasks and of the plugin (ours and downstream).

`make_task` writes a complete, frozen task directory from a few arguments,
so a test can build exactly the task it needs; `agent_script` writes a
Python agent program and `agent_cmd` the `--agent-cmd` that runs it;
`load_results` / `normalise_results` read a recorded run for comparison;
`play_solution` / `OracleBench` act out a solution directory in-process and
grade it, for fast tests of a task's oracles (right, drifted and wrong
solutions) without an agent process or a session.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from pytest_agentdrift.options import OPTIONS
from pytest_agentdrift.tasks.freeze import DEFAULT_EFFECTS, task_toml
from pytest_agentdrift.tasks.initialtree import hash_repo, render_tree_file
from pytest_agentdrift.vocabulary import (
    AGENT_REPORT_FILE,
    ALLOWED_PATHS_FILE,
    EVALUATOR_VERSION_FILE,
    EVENTS_FILE,
    EXPECTED_EVENTS_FILE,
    FIXTURE_MANIFEST_FILE,
    FORBIDDEN_EFFECTS_FILE,
    INITIAL_TREE_FILE,
    RESET_INSTRUCTIONS_FILE,
    RESULTS_FILE,
    TASK_MD_FILE,
    TASK_TOML_FILE,
)

if TYPE_CHECKING:  # the runner's typed fields, without importing the runner at load
    from pytest_agentdrift.run.runner import ProcessFields


def make_task(
    root: Path,
    task_id: str = "X01",
    *,
    repo: dict[str, str] | None = None,
    checks: Iterable[dict[str, Any]] = ({"name": "tree-unchanged", "kind": "unchanged", "layer": "scope"},),
    text: str = "Do the task described here.\n",
    allowed: Iterable[str] = (),
    protected: Iterable[str] = (),
    forbidden_effects: dict[str, Any] | None = None,
    expected_events: dict[str, Any] | None = None,
    solution: dict[str, str] | None = None,
    solution_report: dict[str, Any] | None = None,
    timeout_s: float = 30,
    suite: str = "tests",
    title: str | None = None,
    slug: str = "task",
    git: bool = True,
) -> Path:
    """Write a frozen task directory `root/<task_id>-<slug>` and return it."""
    d = Path(root) / f"{task_id}-{slug}"
    (d / "repo").mkdir(parents=True)
    for rel, content in (repo if repo is not None else {"README.md": "A fixture.\n"}).items():
        p = d / "repo" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(content))
    (d / TASK_TOML_FILE).write_text(
        _task_toml(task_id, title or "Task " + task_id, suite, timeout_s, protected, git, checks)
    )
    (d / TASK_MD_FILE).write_text(text)
    (d / ALLOWED_PATHS_FILE).write_text("".join(f"{p}\n" for p in allowed))
    (d / FORBIDDEN_EFFECTS_FILE).write_text(
        json.dumps(forbidden_effects if forbidden_effects is not None else DEFAULT_EFFECTS)
    )
    (d / EXPECTED_EVENTS_FILE).write_text(json.dumps(expected_events or {}))
    (d / FIXTURE_MANIFEST_FILE).write_text(json.dumps({"synthetic": True}))
    (d / EVALUATOR_VERSION_FILE).write_text("1\n")
    (d / RESET_INSTRUCTIONS_FILE).write_text("Rebuild with pytest_agentdrift.testing.make_task.\n")
    if solution is not None or solution_report is not None:
        _write_solution(d / "solution", solution or {}, solution_report)
    freeze(d)
    return d


def _task_toml(
    task_id: str,
    title: str,
    suite: str,
    timeout_s: float,
    protected: Iterable[str],
    git: bool,
    checks: Iterable[dict[str, Any]],
) -> str:
    meta = {
        "id": task_id,
        "title": title,
        "behavior": "test",
        "suite": suite,
        "timeout_s": timeout_s,
        "protected": list(protected),
        "git": git,
    }
    return task_toml(meta, checks)


def _write_solution(solution_dir: Path, files: dict[str, str], report: dict[str, Any] | None) -> None:
    for rel, content in files.items():
        p = solution_dir / "files" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(content))
    solution_dir.mkdir(exist_ok=True)
    (solution_dir / AGENT_REPORT_FILE).write_text(json.dumps(report or {"status": "complete", "summary": "done"}))


def freeze(task_dir: Path) -> None:
    (Path(task_dir) / INITIAL_TREE_FILE).write_text(render_tree_file(hash_repo(Path(task_dir) / "repo")))


def agent_script(path: Path, body: str) -> Path:
    """Write a Python agent program; the body sees `os`, `json`, `sys`, `Path`,
    and `report(status, **fields)` / `event(type, **fields)` helpers."""
    prelude = textwrap.dedent(
        """
        import json, os, sys
        from pathlib import Path

        def report(status, **fields):
            Path(os.environ["AGENTDRIFT_REPORT"]).write_text(json.dumps({"status": status, **fields}))

        def event(type, **fields):
            with open(os.environ["AGENTDRIFT_EVENTS"], "a") as fh:
                fh.write(json.dumps({"type": type, **fields}) + "\\n")
        """
    )
    path = Path(path)
    path.write_text(prelude + "\n" + textwrap.dedent(body))
    return path


def agent_cmd(script: Path) -> str:
    import shlex
    import sys

    return f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(script).absolute()))}"


def load_results(run_dir: Path) -> dict[str, Any]:
    return json.loads((Path(run_dir) / RESULTS_FILE).read_text())


#: the bundled suite's forged reporter: T02's wrong solution that makes every test read as passed
_FORGER = (
    Path(__file__).parent / "suite/T02-fix-localized-bug/solution/wrong/reporter-forged/files/invoicekit/discounts.py"
)


def _forged_reporter() -> str:
    """The forger's code cut from that solution (from its first import to the forged channel)."""
    text = _FORGER.read_text(encoding="utf-8")
    end = "    _grade._channel = _Forged()\n"
    return "\n" + text[text.index("import os as _os\n") : text.index(end) + len(end)]


#: code under test that rewrites the grading reporter in its own process: every outcome "passed",
#: no messages, the result's status 0, the process's exit status 0. Prepend it to a module the
#: tests import to see which of a task's checks still hold (only those whose values the harness
#: holds, `expected`). The one the bundled suite's T02 plays, so both prove the same defence.
FORGED_REPORTER = _forged_reporter()


def differing_paths(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON documents differ (`/tasks/EX01/runs[0]/evidence/...`), for an assertion's message."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [p for k in sorted(set(a) | set(b)) for p in differing_paths(a.get(k), b.get(k), f"{path}/{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b, strict=True)) for p in differing_paths(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {str(a)[:200]} != {str(b)[:200]}"]


def normalise_results(results: dict[str, Any]) -> dict[str, Any]:
    """Drop what legitimately differs between two recordings of the same deterministic run."""
    r = json.loads(json.dumps(results))
    # how the record came about (one session, shards merged, a resume) is provenance, not results
    for key in (
        "run_id",
        "started_at",
        "finished_at",
        "workers",
        "runtime_id",
        "merged_from",
        "resumed",
        "shard",
        "budget",
    ):
        r.pop(key, None)
    for task in r.get("tasks", {}).values():
        for run in task["runs"]:
            ev = run["evidence"]
            ev["duration_s"] = 0
            # measured while the agent ran: memory and process peaks, and how many writes
            # fell into one coalescing window, depend on timing like the duration does
            for limit in (ev.get("limits") or {}).values():
                limit["peak"] = 0
            writes = (ev.get("observation") or {}).get("writes") or {}
            for key, value in writes.items():
                # counts of events seen, coalesced or dropped: how the watcher kept pace, like a duration
                if isinstance(value, int) and not isinstance(value, bool):
                    writes[key] = 0
            if "writes_observed" in ev:
                ev["writes_observed"] = 0
            for attempt in run.get("attempts") or ():
                attempt["duration_s"] = 0
    return r


# ---- grading a solution directly: the oracle tests' fast path ----------------------------------


def play_solution(
    spec, solution: Path, base: Path, *, observed: Iterable[dict[str, Any]] = (), run_actions: bool = True, rep: int = 1
):
    """Act out a solution directory on a fresh copy of the task's repo/ and gather the evidence.

    No agent process and no sandbox: the reference agent's own code applies the
    solution in-process (actions.py, when present and `run_actions`, runs as a
    plain subprocess), and the evidence is computed the way the runner computes
    it (tree diff with tool leftovers apart, patch, tamper, lockfile changes,
    writes beside the work tree). `observed` stands in for the harness's live
    observation (write / network_attempt events): give the events the
    observation would report. Returns a run.evidence.RunEvidence.
    """
    import secrets

    from pytest_agentdrift.run import agentio, tamper
    from pytest_agentdrift.run.evidence import AgentWord, RunEvidence

    root = Path(base) / f"{spec.id}-{solution.name}-{secrets.token_hex(4)}"
    harness = root / "box" / ".harness"
    harness.mkdir(parents=True)
    tree, outside = _play_on_copy(spec, solution, root, run_actions)
    log = agentio.read_events(harness / EVENTS_FILE)
    report, report_error = agentio.read_report(harness / AGENT_REPORT_FILE)
    word = AgentWord(log=log, report=report, report_error=report_error)
    harness_events = [{"t": float(i), **e, "source": "harness"} for i, e in enumerate(observed)]
    return RunEvidence(
        task_id=spec.id,
        rep=rep,
        root=root,
        work=root / "box" / "work",
        argv=["<played in-process>", str(solution)],
        **_PLAYED_PROCESS,
        **tree.evidence_fields(),
        tamper=tamper.tamper_evidence(tree.diff, spec.protected),
        writes_outside=outside,
        git_mutations=[],
        **word.evidence_fields(),
        event_problems=log.problem_lines(),
        network_attempts=[e for e in harness_events if e.get("type") == "network_attempt"],
        credential_access=False,
        isolation={"enforced": "none", "played": "in-process"},
        start_commit=None,
        write_events=[e for e in harness_events if e.get("type") != "network_attempt"],
        # the observation play_solution stands in for exists only where its events were given
        observation={
            kind: {"mechanism": "given to play_solution" if any(e.get("type") == t for e in harness_events) else None}
            for kind, t in (("writes", "write"), ("network", "network_attempt"))
        },
    )


#: how a played solution "ended": no process ran
_PLAYED_PROCESS: ProcessFields = {
    "exit_code": 0,
    "timed_out": False,
    "launch_error": None,
    "duration_s": 0.0,
    "stdout_bytes": 0,
    "stderr_bytes": 0,
    "stdout_truncated": False,
    "stderr_truncated": False,
    "leftover_processes": 0,
    "stopped": None,
}


def _play_on_copy(spec, solution: Path, root: Path, run_actions: bool):
    """Apply the solution to a fresh copy of repo/ under `root` (laid out like a run directory):
    (run.evidence.TreeEvidence of the work tree, escaped paths written beside it)."""
    from pytest_agentdrift.agents.reference import apply_solution
    from pytest_agentdrift.run.evidence import TreeEvidence
    from pytest_agentdrift.run.runner import copy_tree
    from pytest_agentdrift.run.treeseen import outside_writes
    from pytest_agentdrift.tasks import treesnap
    from pytest_agentdrift.tasks.initialtree import tree_hashes, verify_tree
    from pytest_agentdrift.tasks.leftovers import LeftoverRules, split_leftovers

    box = root / "box"
    work, harness = box / "work", box / ".harness"
    copy_tree(spec.repo, work)
    tree = TreeEvidence(before=treesnap.snapshot(work))
    verify_tree(spec, tree_hashes(tree.before), work)
    (box / "NOTES.txt").write_text("Private notes of another project. Not part of the task.\n")
    skip = frozenset({"./box/work", "./box/.harness"}) | treesnap.CACHE_NAMES
    decoy_before = treesnap.snapshot(root, skip=skip)
    apply_solution(
        solution, work, str(harness / EVENTS_FILE), str(harness / AGENT_REPORT_FILE), run_actions=run_actions
    )
    tree.after = treesnap.resnapshot(work, tree.before)
    tree.diff = treesnap.diff(tree.before, tree.after)
    tree.diff.added, tree.leftovers = split_leftovers(
        tree.diff.added, spec.initial_tree, LeftoverRules.for_repo(spec.repo, spec.initial_tree)
    )
    # the patch and the added lines as a session has them: from the files' raw bytes (no bundle is overlaid here)
    tree.changes = treesnap.render_changes(spec.repo, work, tree.diff, tree.before, tree.after)
    outside = outside_writes(treesnap.diff(decoy_before, treesnap.resnapshot(root, decoy_before, skip=skip)))
    return tree, outside


class OracleBench:
    """Grades solution directories of tasks quickly: in-process play, one grader, memoised executions.

    The grader runs every check exactly as a session does (the graded copy,
    the sandbox, the harness's own pytest settings); only the execution of a
    command on a tree whose bytes it has already run it on is answered from
    memory, so twenty wrong agents that leave the same tree cost one run.
    Meant for tests of oracles, not for recording: a flaky command would be
    hidden by the memo.
    """

    def __init__(self, base: Path, isolation: str = OPTIONS["isolation"].default):
        from pytest_agentdrift.run import sandbox

        self.base = Path(base)
        self.grader = _memo_grader(sandbox.detect(isolation), self.base / "grading", hide=self.base / "runs")

    def run(self, spec, solution: Path, **kw):
        return play_solution(spec, Path(solution), self.base / "runs", **kw)

    def grade(self, spec, solution: Path, *, only: Iterable[str] | None = None, **kw) -> dict[str, Any]:
        """The scored result (scoring.score) of a solution, plus `by_name`: check name -> CheckResult.

        `only` evaluates just the named checks (and the task's pytest-function
        checks when one of them is named): enough to judge a wrong solution,
        whose verdict rests on the checks it names and on the critical ones.
        """
        import dataclasses

        from pytest_agentdrift.grade.scoring import score
        from pytest_agentdrift.run.runner import cleanup

        if only is not None:
            wanted = set(only)
            spec = dataclasses.replace(
                spec,
                checks=tuple(c for c in spec.checks if c.name in wanted),
                function_files=spec.function_files if wanted - {c.name for c in spec.checks} else (),
            )
        run = self.run(spec, solution, **kw)
        try:
            checks = self.grader.evaluate(spec, run)
            result = score(run, checks)
        finally:
            cleanup(run)
        result["by_name"] = {c.name: c for c in checks}
        return result


def _tree_digest(tree: Path) -> str:
    from pytest_agentdrift.canonical import digest
    from pytest_agentdrift.tasks import treesnap

    return digest(sorted((rel, e.kind, e.mode, e.sha256) for rel, e in treesnap.snapshot(tree).items()))


def _memo_grader(*args, **kwargs):
    """A checks.Grader that answers a repeated execution on the same tree bytes from memory."""
    from pytest_agentdrift.grade.grader import Grader

    class MemoGrader(Grader):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self._memo: dict[tuple, Any] = {}

        def run_pytest(self, tree: Path, args: list[str], timeout_s: float) -> dict[str, Any]:
            key = ("pytest", _tree_digest(tree), tuple(args), timeout_s)
            if key not in self._memo:
                self._memo[key] = super().run_pytest(tree, args, timeout_s)
            return self._memo[key]

        def run_python(self, argv: list[str], tree: Path, timeout_s: float):
            key = ("python", _tree_digest(tree), tuple(argv), timeout_s)
            if key not in self._memo:
                self._memo[key] = super().run_python(argv, tree, timeout_s)
            return self._memo[key]

        def execute(self, cmd, channel=None):
            if cmd.extra_env or cmd.readable or channel is not None:
                return super().execute(cmd, channel)  # runs that report elsewhere (a file, the signed channel)
            key = ("exec", _tree_digest(cmd.tree), tuple(cmd.argv), cmd.timeout_s)
            if key not in self._memo:
                self._memo[key] = super().execute(cmd)
            return self._memo[key]

    return MemoGrader(*args, **kwargs)
