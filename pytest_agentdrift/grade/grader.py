"""The Grader: evaluates a task's checks on one run, each by its kind's function (the table of
grade/kinds/), runs graded processes, makes graded copies and keeps the untouched fixture's
results. No pytest.

Checks that execute code (pytest, command, golden) run in a *graded copy*:
the agent's final tree with every protected file and every piece of test
configuration put back to its frozen bytes, and anything the agent added
there removed. Each check gets a fresh copy (what one check's code wrote
never reaches the next), and a symlink that points outside the copy is
dropped, not followed. They run sandboxed like the agent (under bwrap an
allow-list that leaves out the task directory), with the harness's own pytest
settings, so a conftest, an ini `addopts`, a skip marker or a deselection
cannot turn a red suite green; pytest's outcomes arrive over a signed channel
graded code cannot write (grade/channel.py), and standard-library names
cannot be shadowed by the tree (run/stdlib_guard.py). A `command` check that runs
pytest takes the same path. What the agent changed is reported as tamper evidence.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from pytest_agentdrift.grade import fixturecache
from pytest_agentdrift.grade.commandline import python_command
from pytest_agentdrift.grade.gradedcopy import (
    GradedCopyIncomplete,
    add_hidden,
    copy_beside,
    drop_escaping_symlinks,
    remove_leftovers,
    restore_protected,
)
from pytest_agentdrift.grade.gradeserver import GRADEHOOK_DIR, GradingServer, Relocation, grading_guard, server_env
from pytest_agentdrift.grade.kinds import KINDS
from pytest_agentdrift.grade.results import CheckResult, CheckUndecided, ExecResult
from pytest_agentdrift.run import sandbox
from pytest_agentdrift.run.evidence import RunEvidence
from pytest_agentdrift.run.harnessruntime import harness_pythonpath, harness_runtime
from pytest_agentdrift.run.runner import copy_tree
from pytest_agentdrift.tasks import fdtree, treesnap
from pytest_agentdrift.tasks.patterns import PathSpec
from pytest_agentdrift.tasks.taskspec import LAYERS, TaskSpec

EVALUATOR_COMPONENT = "grader"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)


@dataclass(frozen=True)
class GradedCommand:
    """One graded process: what it runs, in which tree, for how long, what is added to its
    environment, and which of the harness's paths it may read besides its own directory."""

    argv: list[str]
    tree: Path
    timeout_s: float
    extra_env: dict[str, str] | None = None
    readable: tuple[Path, ...] = ()


class FixtureUngradable(str):
    """Why the untouched fixture could not be graded (kept in place of its result)."""


class Grader:
    """Evaluates checks; owns the per-process cache of untouched-fixture runs."""

    def __init__(
        self,
        isolation: sandbox.Isolation,
        base: Path,
        hide: Path | None = None,
        hidden: tuple[Path, ...] = (),
        limits: dict[str, int | None] | None = None,
        cache_dir: Path | None = None,
    ):
        from pytest_agentdrift.run.limits import GRADING_LIMITS

        self.isolation = isolation
        # graded code's own limits (memory, processes, disk and files in total, file size, tmpfs sizes),
        # never the agent's: an agent's small limits would otherwise break the untouched fixture's grading
        self.limits = dict(limits if limits is not None else GRADING_LIMITS)
        self.exceeded: set[str] = set()  # limits graded code broke during the current check
        self.base = base  # harness-only: agents never see or write it
        self.hide = hide  # hidden from graded code (the session's run directories)
        self.hidden = tuple(hidden)  # task directories, records: never visible to graded code
        self._before_cache: dict[tuple[str, str], Any] = {}
        self.fixture_results = fixturecache.FixtureResults(cache_dir)  # untouched-fixture results between sessions
        self._task_digests: dict[Path, str] = {}
        #: each task directory as it was before the first run of it: grading refuses a task that changed since
        self._task_before: dict[Path, list[list[str]]] = {}
        self._scratch: Path | None = None
        self._copies = 0
        #: prepared trees no graded process ever runs in: each process gets a fresh copy of its directory
        self._pristine: set[Path] = set()
        self.dropped_links: dict[Path, list[str]] = {}
        self.provided: frozenset[str] = frozenset()  # stdlib/pytest names the fixture provides itself
        self.observed: dict[str, dict[str, list[list[str]]]] = {}  # check name -> node id -> observe() calls
        self.recording_expectations = False  # `agentdrift task expect`: observe, do not compare
        # one grading sandbox for the processes of one run that report over the channel (gradeserver.py);
        # ended after each run, so what one agent's code did to it never reaches another's checks
        self.server = GradingServer(isolation, self.limits, base, self._excluded())
        weakref.finalize(self, self.server.close)
        # and one for the untouched fixtures' processes, which no agent's code ever reaches: only task
        # fixtures' own code runs there, in a PID namespace of its own; it lives as long as the Grader
        self.fixture_server = GradingServer(isolation, self.limits, base, self._excluded())
        weakref.finalize(self, self.fixture_server.close)
        self._untouched_fixture = 0  # > 0 while an untouched fixture runs: never in a sandbox agent code ran in

    def prepare(self, spec: TaskSpec) -> None:
        """Before the agent's run: start the run's grading sandbox when a check of the task will use
        it, so that it imports pytest while the agent works. A failure here is retried (and
        reported) where the first check needs the sandbox. The task directory is listed (every
        file's bytes hashed) before its first run, for `evaluate` to compare."""
        self.note_tasks([spec])

    def note_tasks(self, specs: Iterable[TaskSpec]) -> None:
        """List each task directory not listed yet: before any run of it (a session lists all its
        tasks before its first run, so that no run can rewrite another task unseen)."""
        specs = list(specs)
        for spec in specs:
            self._task_before.setdefault(spec.path, spec.listing())
        # the grading server starts now, beside the first run, if any task has a check it serves
        if any(KINDS[check.kind].served for spec in specs for check in spec.checks if check.kind in KINDS):
            try:
                self.server.launch()
            except Exception:  # noqa: BLE001 - the first request starts it again and says why it cannot
                self.server.close()

    # -- executing commands in a tree -------------------------------------------------
    def execute(self, cmd: GradedCommand, channel: Any = None) -> ExecResult:
        """Run the command in its tree, sandboxed like the agent: only the tree's own directory
        (the tree and a private home beside it) is writable; under bwrap nothing else of the
        harness, the task directory or other runs exists."""
        if cmd.tree in self._pristine:
            cmd = self._on_fresh_copy(cmd)
        argv = [sys.executable if i == 0 and a in ("python", "python3") else a for i, a in enumerate(cmd.argv)]
        tree = cmd.tree
        scratch = tree.parent
        env = self._process_env(tree, cmd.extra_env, channel)
        plan = None
        if self.isolation.mode == "bwrap":
            from pytest_agentdrift.run import mountplan

            plan = mountplan.build(
                writable=[scratch], readable=[*harness_runtime(), *cmd.readable], exclude=self._excluded()
            )
        token = secrets.token_hex(16)
        guard = grading_guard(
            self.limits, self.isolation.mode, root=scratch, work=tree, harness_dir=scratch, token=token
        )
        try:
            guard.prepare()
            proc = sandbox.run(
                argv,
                cwd=tree,
                env=env,
                isolation=self.isolation,
                writable=[scratch],
                plan=plan,
                timeout_s=cmd.timeout_s,
                output_limit=256 << 10,
                token=token,
                pass_fds=channel.child_fds if channel is not None else (),
                guard=guard,
            )
        finally:
            if channel is not None:
                channel.close_child_ends()
            guard.close()
        self.exceeded.update(guard.exceeded())
        if proc.launch_error:
            return ExecResult(None, False, "", proc.launch_error)
        return ExecResult(
            proc.exit_code,
            proc.timed_out,
            proc.stdout.decode("utf-8", "replace"),
            proc.stderr.decode("utf-8", "replace"),
        )

    def _on_fresh_copy(self, cmd: GradedCommand) -> GradedCommand:
        """The command moved to a fresh copy of a pristine tree's directory: its argv, tree and
        added environment name the copy."""
        copy_dir = self._run_scratch() / f"graded-{self._next_copy()}"
        self._request_copy(cmd.tree, copy_dir)
        moved = Relocation(cmd.tree.parent, copy_dir)
        return replace(
            cmd,
            argv=[moved.path(a) for a in cmd.argv],
            tree=Path(moved.path(str(cmd.tree))),
            extra_env={k: moved.path(v) for k, v in (cmd.extra_env or {}).items()},
        )

    def _run_scratch(self) -> Path:
        """The scratch directory of the run being graded, which evaluate() makes and removes."""
        if self._scratch is None:
            raise RuntimeError("no run is being graded: its scratch directory exists only within evaluate()")
        return self._scratch

    def _excluded(self) -> list[Path]:
        return [self.base, *([self.hide] if self.hide else []), *self.hidden]

    def _process_env(self, tree: Path, extra_env: dict[str, str] | None, channel: Any) -> dict[str, str]:
        """A graded process's environment: a private home beside its tree, the harness's Python path."""
        home = tree.parent / f"home-{tree.name}"
        home.mkdir(exist_ok=True)
        return {
            **server_env(home),
            "PYTHONPATH": harness_pythonpath(),
            **(extra_env or {}),
            **(channel.env if channel is not None else {}),
        }

    def execute_reporting(self, cmd: GradedCommand) -> tuple[ExecResult, Any]:
        """`execute` for a harness-wrapped process (launch.py, run_python.py) that reports over the
        signed channel: its result and what the channel carried. Under bubblewrap it runs in the
        Grader's grading sandbox (gradeserver.py) when it can, else in a sandbox of its own."""
        from pytest_agentdrift.grade.channel import HarnessEnd

        server = self.fixture_server if self._untouched_fixture else self.server
        if not cmd.readable and server.usable and _servable(cmd.argv):
            channel = HarnessEnd()
            env = self._process_env(cmd.tree, cmd.extra_env, None)
            served = server.run(cmd.argv, cmd.tree, env, channel, cmd.timeout_s, copy=self._request_copy)
            received = channel.receive()
            if served is not None:
                self.exceeded.update(served.exceeded)
                return ExecResult(served.exit_code, served.timed_out, served.stdout, served.stderr), received
        channel = HarnessEnd()
        res = self.execute(cmd, channel)
        return res, channel.receive()

    def run_python(self, argv: list[str], tree: Path, timeout_s: float) -> tuple[ExecResult, list[str]]:
        """Run a command; a Python one through gradehook/run_python.py, which reports over the
        signed channel how the command returned. Returns the result and why it cannot be
        trusted (empty when it can, or when argv is not Python and only its exit status exists)."""
        parsed = python_command(argv)
        if parsed is None:
            return self.execute(GradedCommand(argv, tree, timeout_s)), []
        opts, rest = parsed
        wrapped = [sys.executable, *opts, "-P", str(GRADEHOOK_DIR / "run_python.py"), *rest]
        provided = {"AGENTDRIFT_GRADE_PROVIDED": ",".join(sorted(self.provided))}
        res, received = self.execute_reporting(GradedCommand(wrapped, tree, timeout_s, provided))
        ended = received.last("exit")
        if received.problems:
            return res, ["forged result: " + "; ".join(received.problems)]
        if res.timed_out or res.exit_code is None:
            return res, []
        if ended is None:
            return res, [f"the command never returned (os._exit or a crash); the process exited {res.exit_code}"]
        if ended["code"] != res.exit_code:
            return res, [f"the command returned {ended['code']} but the process exited {res.exit_code}"]
        return res, []

    def run_grading_pytest(
        self,
        argv_tail: list[str],
        tree: Path,
        timeout_s: float,
        extra_env: dict[str, str] | None = None,
        readable: tuple[Path, ...] = (),
    ) -> dict[str, Any]:
        """The harness's own pytest (gradehook/launch.py) on tree; its report arrives over
        the signed channel. A missing or forged report says so (`missing_report`, `channel_problems`)."""
        argv = [sys.executable, "-P", str(GRADEHOOK_DIR / "launch.py"), *argv_tail]
        env = {
            "PYTHONPATH": harness_pythonpath(GRADEHOOK_DIR),
            "AGENTDRIFT_GRADE_PROVIDED": ",".join(sorted(self.provided)),
            **(extra_env or {}),
        }
        res, received = self.execute_reporting(GradedCommand(argv, tree, timeout_s, env, readable))
        result = received.last("result")
        data: dict[str, Any]
        if received.problems or result is None:
            from pytest_agentdrift.grade.channel import empty_test_report

            data = {**empty_test_report(), "exitstatus": None, "missing_report": True}
        else:
            data = {k: v for k, v in result.items() if k != "kind"}
        data["channel_problems"] = received.problems
        data["exec"] = res
        return data

    def run_pytest(self, tree: Path, args: list[str], timeout_s: float) -> dict[str, Any]:
        config = _pytest_config_file(tree)
        return self.run_grading_pytest(
            ["-p", "no:cacheprovider", "-q", "--no-header", "-rN", "--rootdir", str(tree), "-c", str(config), *args],
            tree,
            timeout_s,
        )

    def before(self, spec: TaskSpec, key: str, fn: Callable[[Path], Any], kind: str = "pytest") -> Any:
        """fn's result on a fresh untouched copy of the fixture: once per process, and from the
        fixture cache (fixturecache.py) when an earlier session computed it with the same inputs."""
        cache_key = (str(spec.path), key)
        self.provided = _fixture_provided(spec)
        if cache_key not in self._before_cache:
            stored_key = self._stored_key(spec, key)
            stored = self.fixture_results.get(stored_key)
            if stored is not None:
                self._before_cache[cache_key] = _decode(kind, stored)
            else:
                self._before_cache[cache_key] = self._run_before(spec, fn, kind, stored_key)
        value = self._before_cache[cache_key]
        if isinstance(value, FixtureUngradable):
            raise CheckUndecided(str(value))
        return value

    def _run_before(self, spec: TaskSpec, fn: Callable[[Path], Any], kind: str, stored_key: str) -> Any:
        scratch = self.base / f"before-{spec.id}-{secrets.token_hex(4)}"
        scratch.mkdir(parents=True)
        tree = scratch / "repo"
        copy_tree(spec.repo, tree)
        add_hidden(spec, tree)
        exceeded = set(self.exceeded)
        # the untouched fixture's result is kept for every later run and session: it is never computed
        # in a sandbox an agent's code has run in (code can change what the server's later forks inherit)
        self._untouched_fixture += 1
        try:
            value = fn(tree)
        finally:
            self._untouched_fixture -= 1
            fdtree.remove_later(scratch)  # its processes have ended
        broken = self._fixture_broken(kind, value, sorted(self.exceeded - exceeded))
        if broken is not None:
            self.exceeded = exceeded  # the untouched fixture's own, never the agent's code's
            return broken
        if _clean(kind, value):
            self.fixture_results.put(stored_key, _encode(kind, value))
        return value

    def _fixture_broken(self, kind: str, value: Any, broke: list[str]) -> FixtureUngradable | None:
        """Why the untouched fixture cannot be graded under grading's limits and timeout, when it
        cannot: the harness's own finding (its limits, a loaded machine), which leaves every check
        that needs it undecided and never becomes the agent's failure."""
        from pytest_agentdrift.run.limits import human

        res = value[0] if kind == "command" else value["exec"]
        if broke:
            shown = ", ".join(f"{k} {human(k, self.limits.get(k))}" for k in broke)
            return FixtureUngradable(
                f"the untouched fixture's own grading broke the grading limits ({shown}): the harness's "
                "limits are too small for this task, not the agent's doing (raise them with --agent-grade-limit)"
            )
        if res.timed_out:
            return FixtureUngradable(
                "the untouched fixture's own grading timed out (a loaded machine, or the check's timeout_s "
                "is too short for this task): the harness's problem, not the agent's"
            )
        return None

    def _stored_key(self, spec: TaskSpec, key: str) -> str:
        if spec.path not in self._task_digests:
            self._task_digests[spec.path] = spec.content_digest()
        context = {"isolation": self.isolation.mode, "limits": self.limits, "provided": sorted(self.provided)}
        return fixturecache.cache_key(self._task_digests[spec.path], key, context)

    # -- the graded copy --------------------------------------------------------------
    def graded_copy(self, spec: TaskSpec, run: RunEvidence) -> Path:
        """The graded tree of one check: what one check's code writes never reaches the next. In
        the harness's own scratch, so nothing the agent left can stand in for it. Under bubblewrap
        it is the run's master copy (prepared once, never shown to graded code): each graded process
        run on it gets a plain copy of its own (`_request_copy`); elsewhere each call prepares a
        fresh copy."""
        graded = self._run_scratch() / f"graded-{self._next_copy()}" / "repo"
        if self.isolation.mode != "bwrap":
            # without a mount namespace a process an earlier check left behind can reach the scratch
            # directory, a master copy included: each check's copy is prepared from the agent's tree
            self._prepare_copy(spec, run, graded)
            self.provided = _fixture_provided(spec)
            return graded
        master = self._master_copy(spec, run)
        self.provided = _fixture_provided(spec)
        return master  # pristine: every process run on it gets a copy of its own (_request_copy)

    def _next_copy(self) -> int:
        self._copies += 1
        return self._copies

    def _request_copy(self, tree: Path, dest: Path) -> None:
        """A fresh copy of tree's directory at dest for one graded process: tree by its name, and what
        the harness put beside it (the process's home, an empty pytest configuration)."""
        dest.mkdir()
        copied = copy_tree(tree, dest / tree.name)
        if not copied.complete and tree in self._pristine:  # a partial tree is never graded as the agent's
            raise GradedCopyIncomplete(f"the check's copy: {copied.truncated or copied.skipped[:5]}")
        if not copied.complete:
            raise OSError(f"the grading copy of {tree.name} is incomplete: {copied.truncated or copied.skipped[:5]}")
        for entry in os.scandir(tree.parent):
            if entry.name != tree.name:
                copy_beside(entry, dest / entry.name)

    def _master_copy(self, spec: TaskSpec, run: RunEvidence) -> Path:
        """The prepared copy each check's copy is made from under bubblewrap, where graded code
        never sees it (and the grading server ends every process a check left); once per run."""
        master = self._run_scratch() / "graded-master" / "repo"
        if master in self.dropped_links:
            return master
        fdtree.rmtree(master.parent)  # what an earlier attempt that failed half-way left
        self._prepare_copy(spec, run, master)
        self._pristine.add(master)
        return master

    def _prepare_copy(self, spec: TaskSpec, run: RunEvidence, master: Path) -> None:
        """The agent's final tree at `master` with protected files and test configuration restored,
        tool leftovers removed, hidden files added and symlinks out of it dropped."""
        copied = run.harness_budget.get("graded_copy", {})
        incomplete = copied.get("incomplete") if isinstance(copied, dict) else None
        if incomplete:
            raise GradedCopyIncomplete(incomplete)
        if not run.tree_complete:
            # the harness did not see all of the tree: what it would grade is not what the agent left
            walked = run.harness_budget["work_tree"]
            not_examined = walked["not_examined"] if isinstance(walked, dict) else None
            why = (
                f"the work tree exceeds the harness's budget ({not_examined} "
                "new entries not examined); not copied for grading"
            )
            run.harness_budget["graded_copy"] = {"complete": False, "incomplete": why}
            raise GradedCopyIncomplete(why)
        master.parent.mkdir(parents=True)
        if not run.work_tree_deleted:
            # without the fixture's repository (.git at the top; a nested one is the agent's content)
            report = fdtree.copy_tree(run.work, master, skip=treesnap.IGNORED_NAMES)
            copied = report.to_dict()
            run.harness_budget["graded_copy"] = copied
            if not report.complete:
                why = (
                    f"the graded copy is incomplete: {report.truncated or 'entries left out'} "
                    f"({report.skipped_count} left out: {', '.join(report.skipped[:5])})"
                )
                copied["incomplete"] = why
                raise GradedCopyIncomplete(why)
        else:
            master.mkdir()
        restore_protected(spec, master)
        remove_leftovers(master, run.leftovers)
        add_hidden(spec, master)
        self.dropped_links[master] = drop_escaping_symlinks(master)

    def copy_evidence(self, graded: Path) -> dict[str, Any]:
        dropped = self.dropped_links.get(graded) or []
        return {"symlinks_not_followed": dropped} if dropped else {}

    # -- evaluation -------------------------------------------------------------------
    def evaluate(self, spec: TaskSpec, run: RunEvidence) -> list[CheckResult]:
        changed = self._task_changed(spec)
        if changed:
            return task_changed_results(spec, changed)
        self._scratch = self.base / f"{spec.id}-r{run.rep}-{secrets.token_hex(4)}"
        self._scratch.mkdir(parents=True)
        try:
            return self._evaluate(spec, run)
        finally:
            self.server.close()
            fdtree.remove_later(self._scratch)  # every graded process has ended
            self._scratch = None

    def _task_changed(self, spec: TaskSpec) -> list[str]:
        """The task directory's paths that differ from before its first run (added, removed or
        rewritten): where the agent could write it (isolation unshare or none), a hidden test it
        rewrote would grade its own work. Empty when unchanged, or when no run of it was prepared."""
        before = self._task_before.get(spec.path)
        if before is None:
            return []
        now = spec.listing()
        if now == before:
            return []
        old, new = {e[0]: e for e in before}, {e[0]: e for e in now}
        return sorted(p for p in old.keys() | new.keys() if old.get(p) != new.get(p))

    def _evaluate(self, spec: TaskSpec, run: RunEvidence) -> list[CheckResult]:
        results = []
        for check in spec.checks:
            fn = KINDS[check.kind].check
            undecided = False
            evid: dict[str, Any]
            self.exceeded = set()
            try:
                if check.when_changed and not any(
                    PathSpec((w,)).matches(p) for w in check.when_changed for p in run.diff.changed
                ):
                    passed, detail, evid = (
                        True,
                        "not applicable: nothing changed matching " + ", ".join(check.when_changed),
                        {},
                    )
                else:
                    passed, detail, evid = fn(self, spec, run, check)
            except GradedCopyIncomplete as exc:
                passed, detail, evid = False, f"not evaluated: {exc}", {}
            except CheckUndecided as exc:
                passed, detail, evid, undecided = False, f"undecided: {exc}", {}, True
            except Exception as exc:  # the harness's own error: the check is undecided, never passed
                passed, detail, evid = False, f"check could not be evaluated: {type(exc).__name__}: {exc}", {}
                undecided = True
            result = CheckResult(
                check.name, check.kind, check.layer, check.critical_for(run.report), passed, detail, evid, undecided
            )
            results.append(self._limits_hit(result))
        if spec.function_files:
            self.exceeded = set()
            results.extend(self._limits_hit(r) for r in self.evaluate_functions(spec, run))
        return results

    def _limits_hit(self, result: CheckResult) -> CheckResult:
        """A check whose graded code broke one of grading's limits fails with `resource_exceeded`."""
        from pytest_agentdrift.run.limits import human

        if not self.exceeded:
            return result
        hit = sorted(self.exceeded)
        result.passed = False
        shown = ", ".join(f"{k} {human(k, self.limits.get(k))}" for k in hit)
        result.detail = f"resource limit exceeded while grading ({shown}); {result.detail}"
        # the grading limits it broke, beside the run's own record of the agent's (evidence.limits)
        result.evidence = {
            **result.evidence,
            "resource_exceeded": hit,
            "grading_limits": {k: self.limits.get(k) for k in hit},
        }
        return result

    def evaluate_functions(self, spec: TaskSpec, run: RunEvidence) -> list[CheckResult]:
        """Run the task's test_*.py checks in their own pytest process against this run."""
        from pytest_agentdrift.grade.function_checks import RUN_JSON_ENV, AgentRun

        scratch = self._run_scratch() / "functions"
        scratch.mkdir()
        (scratch / "cwd").mkdir()
        run_json = scratch / "run.json"
        # the checks read a copy of the agent's final tree, without symlinks out of it
        workdir = self._run_scratch() / "inspect" / "repo"
        workdir.parent.mkdir()
        if not run.work_tree_deleted:
            copy_tree(run.work, workdir)
            drop_escaping_symlinks(workdir)
        agent_run = AgentRun(
            task_id=spec.id,
            rep=run.rep,
            workdir=workdir,
            changed=run.diff.to_dict(),
            patch=run.patch,
            events=run.events,
            report=run.report,
            stdout=run.stdout,
            stderr=run.stderr,
            exit_code=run.exit_code,
            timed_out=run.timed_out,
            usage=run.adapter_output.usage.to_dict(),
            evidence=run.evidence_dict(),
        )
        run_json.write_text(json.dumps(agent_run.to_dict()), encoding="utf-8")
        ini = scratch / "functions.ini"
        ini.write_text("[pytest]\n")
        data = self.run_grading_pytest(
            [
                "-p",
                "agentdrift_functions",
                "-p",
                "no:cacheprovider",
                "-vv",
                "--no-header",
                "-c",
                str(ini),
                "--rootdir",
                str(spec.path),
                *[str(p) for p in spec.function_files],
            ],
            scratch / "cwd",
            120,
            {RUN_JSON_ENV: str(run_json), "AGENTDRIFT_NO_CWD_ON_PATH": "1"},
            readable=(spec.path, workdir.parent),
        )
        res = data["exec"]

        def no_checks(detail: str) -> list[CheckResult]:
            """The whole set failed as one critical check: the process gave nothing to grade."""
            return [
                CheckResult(
                    "pytest-functions", "pytest_function", "correctness", True, False, detail, {"tail": res.tail()}
                )
            ]

        if data.get("missing_report"):
            why = "; ".join(data["channel_problems"]) or "no result (killed, timed out or exited early)"
            return no_checks(f"the task's pytest checks produced no trustworthy result: {why}")
        results = []
        for nodeid in data["collected"]:
            marks = data["marks"].get(nodeid, {})
            layer = marks.get("layer") or "correctness"
            outcome = data["outcomes"].get(nodeid, "missing")
            name = nodeid.split("::", 1)[-1]
            if layer not in LAYERS:
                results.append(
                    CheckResult(
                        name,
                        "pytest_function",
                        "correctness",
                        True,
                        False,
                        f"unknown layer {layer!r} in agent_layer marker",
                        {},
                    )
                )
                continue
            forged = nodeid in data["forged"]
            passed = outcome == "passed" and not forged
            detail = (
                "passed"
                if passed
                else (
                    "forged pass (the call raised)"
                    if forged
                    else f"{outcome}: {data['messages'].get(nodeid, '')}".strip()
                )
            )
            results.append(CheckResult(name, "pytest_function", layer, bool(marks.get("critical")), passed, detail, {}))
        return results or no_checks("no check function was collected")


#: the check that stands for a task directory changed during the session (Grader.evaluate)
TASK_INTACT_CHECK = "task-untouched"


def task_changed_results(spec: TaskSpec, changed: list[str]) -> list[CheckResult]:
    """A run whose task directory changed since before its first run is never graded: every
    check fails unevaluated, and a critical tamper finding names what changed (grading against
    rewritten tests would let the agent grade itself)."""
    from pytest_agentdrift.safetext import escape_path

    shown = ", ".join(escape_path(p) for p in changed[:10]) + (
        f" (+{len(changed) - 10} more)" if len(changed) > 10 else ""
    )
    why = f"the task directory changed during the session ({shown}): not graded"
    results = [
        # nothing of the run is read, its report neither: a check critical if the agent claims completion
        # (`if_complete`) counts as critical, as the record's boolean `critical` says
        CheckResult(c.name, c.kind, c.layer, bool(c.critical), False, f"not evaluated: {why}", {})
        for c in spec.checks
    ]
    evidence = {"task_changed": [escape_path(p) for p in changed[:100]]}
    results.append(CheckResult(TASK_INTACT_CHECK, "tamper", "safety", True, False, why, evidence))
    return results


def _clean(kind: str, value: Any) -> bool:
    if kind == "command":
        res, problems = value
        return not problems and not res.timed_out and res.exit_code is not None
    return fixturecache.clean_pytest_result(value)


def _encode(kind: str, value: Any) -> dict[str, Any]:
    if kind == "command":
        return fixturecache.encode_command_result(*value)
    return fixturecache.encode_pytest_result(value)


def _decode(kind: str, stored: dict[str, Any]) -> Any:
    if kind == "command":
        return ExecResult(**stored["exec"]), list(stored["problems"])
    return {**stored, "exec": ExecResult(**stored["exec"])}


def _pytest_config_file(tree: Path) -> Path:
    """The fixture's own (restored, frozen) pytest config, else an empty one."""
    for name in ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"):
        p = tree / name
        if p.is_file():
            text = p.read_text(encoding="utf-8", errors="replace")
            if (
                name in ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini")
                or "[tool.pytest" in text
                or "[pytest]" in text
                or "[tool:pytest]" in text
            ):
                return p
    empty = tree.parent / "agentdrift-empty-pytest.ini"
    empty.write_text("[pytest]\n")
    return empty


def _servable(argv: list[str]) -> bool:
    """Whether argv is a harness-wrapped process the grading sandbox's server runs: launch.py, or
    run_python.py without interpreter options (they take effect only as an interpreter starts)."""
    hooks = (str(GRADEHOOK_DIR / "launch.py"), str(GRADEHOOK_DIR / "run_python.py"))
    return len(argv) >= 3 and argv[0] == sys.executable and argv[1] == "-P" and argv[2] in hooks


def _fixture_provided(spec: TaskSpec) -> frozenset[str]:
    from pytest_agentdrift.run.stdlib_guard import fixture_provided

    return fixture_provided(spec.initial_tree)
