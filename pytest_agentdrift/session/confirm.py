"""Confirmation runs wired into pytest (``--agent-confirm CAP``): order, decide, skip what is not needed.

Every repetition up to the cap is collected, so ``-k``, ``-n 2``, shards, resume and JUnit see them
all. The screen's repetitions (``r1 ... rK``) run first; a confirming repetition ``rJ`` runs only
when the task's runs so far leave it undecided (compare/sequential.runs_wanted), else it is skipped
with the reason ("not needed: T07 decided at r12 (clear)"). A worker decides alone: it waits for the
task's repetitions up to the look before its own to be reported (the controller writes what each
run failed into the control directory as payloads arrive), so the repetitions of one batch (r9 ...
r12 between the looks at 8 and 12) run side by side on as many workers as there are; the verdict
itself is the controller's, from the record (compare/confirm.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pluggy import Result

    from pytest_agentdrift.compare.sequential import Pool
    from pytest_agentdrift.options import Settings
    from pytest_agentdrift.session.collect import TaskItem
    from pytest_agentdrift.session.state import ComparisonState, RunCollector, SessionInfo
    from pytest_agentdrift.tasks.taskspec import TaskSpec

CONFIRM_DIR = "confirm"
POOLS_FILE = "pools.json"
SCREEN_FILE = "screen.json"
TASKS_FILE = "tasks.json"  # a sharded session's task count, from a worker's collection to the controller
NOT_NEEDED = "not needed"
_POLL_S = 0.2


class ConfirmPlugin:
    """The hooks of confirmation (the single process is both controller and worker)."""

    def __init__(
        self,
        config: pytest.Config,
        info: SessionInfo,
        collector: RunCollector | None,
        comparison: ComparisonState | None,
        item_class: type[TaskItem],
    ) -> None:
        self.config = config
        self.info = info
        self.collector = collector  # None on a worker
        self.comparison = comparison  # None on a worker
        self.item_class = item_class
        self.tasks = 0
        self.collected: set[str] = set()  # every task collected, before shards and resume deselect
        self.runs: dict[str, dict[int, Any]] = {}  # controller: what each reported run failed
        self.not_needed: list[str] = []
        self._pools_written = False

    @property
    def settings(self) -> Settings:
        return self.info.settings

    @property
    def cap(self) -> int:
        """The confirmation cap (--agent-confirm), which the plugin is registered only with."""
        cap = self.settings.confirm
        if cap is None:
            raise RuntimeError("confirmation runs without a cap (--agent-confirm)")
        return cap

    def _controller(self) -> tuple[RunCollector, ComparisonState]:
        """The controller's collector and comparison (a worker has neither: it never reads them)."""
        if self.collector is None or self.comparison is None:
            raise RuntimeError("only the controller counts the runs and knows the baseline")
        return self.collector, self.comparison

    def _dir(self) -> Path | None:
        control = self.info.longrun.control_dir
        return None if control is None else Path(control) / CONFIRM_DIR

    def _sharded(self) -> bool:
        return self.info.longrun.shard is not None

    # -- every process: the order and the decision ---------------------------------------------------
    @pytest.hookimpl(hookwrapper=True)  # around the deselections (shards, resume, -k): what came before, after
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> Generator[None, None, None]:
        self.collected = {item.spec.id for item in items if isinstance(item, self.item_class)}
        yield
        self._order(items)

    def _order(self, items: list[pytest.Item]) -> None:
        k = self.settings.k
        tasks = [(i, item) for i, item in enumerate(items) if isinstance(item, self.item_class)]
        # the plan's task count is the whole session's: a shard counts the tasks every shard was dealt
        # from (each shard's record then holds the same plan), a resumed session the record it continues
        # (its kept runs are deselected), others the tasks they run
        resumed = self._resumed_tasks()
        if self._sharded():
            self.tasks = len(self.collected)
            where = self._dir()
            if where is not None:
                from pytest_agentdrift.record.store import atomic_write

                atomic_write(where / TASKS_FILE, json.dumps({"tasks": self.tasks}))
        else:
            self.tasks = len(resumed if resumed is not None else {item.spec.id for _, item in tasks})
        # the screen first, then the confirming repetitions by rank: a task's earlier runs always come
        # before its later ones, on every worker's queue, so waiting for them cannot deadlock
        order = sorted(tasks, key=lambda t: (t[1].rep > k, t[1].rep if t[1].rep > k else 0, t[0]))
        slots = iter(item for _, item in order)
        positions = {i for i, _ in tasks}
        items[:] = [next(slots) if i in positions else item for i, item in enumerate(items)]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if not isinstance(item, self.item_class) or item.rep <= self.settings.k or self.runner_idle(item):
            return
        reason = self._decide(item.spec, item.rep)
        if reason is not None:
            item.agentdrift_not_needed = {"task": item.spec.id, "rep": item.rep, "reason": reason}
            pytest.skip(reason)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, Result[pytest.TestReport], None]:
        outcome = yield
        reason = getattr(item, "agentdrift_not_needed", None)
        if call.when == "setup" and reason:
            # rides to the controller with the report; pytest takes a report's own fields but types them
            # for reading only (BaseReport.__getattr__), not for setting
            outcome.get_result().agentdrift_not_needed = reason  # type: ignore[attr-defined]

    def _resumed_tasks(self) -> set[str] | None:
        """The tasks of the record a resumed session continues (every process knows its items), else None."""
        from pytest_agentdrift.tasks.shard import split_key

        keys = self.info.longrun.only_keys
        return None if keys is None else {split_key(key)[0] for key in keys}

    def runner_idle(self, item: TaskItem) -> bool:
        return getattr(item.runner, "adapter", None) is None

    def _decide(self, spec: TaskSpec, rep: int) -> str | None:
        """None to run the repetition, else why it is not needed."""
        from pytest_agentdrift.compare import confirm, sequential

        plan = confirm.plan_of(confirm.plan_document(self.settings.k, self.cap, self.tasks))
        seen = self._wait_for(spec, max(n for n in plan.looks if n < rep))
        if seen is None:
            return None  # waited too long for the task's earlier runs: run it (more runs never mislead)
        pools, runs, screened_tasks = seen
        pool = pools.get(spec.id)
        if pool is None:
            return f"{NOT_NEEDED}: {spec.id} is not in the baseline"
        skipped = [r for r, failed in runs.items() if failed == NOT_NEEDED]
        if skipped:  # decided before an earlier repetition: nothing has changed since
            return f"{NOT_NEEDED}: {spec.id} decided before r{min(skipped)}"
        scored = [failed for _, failed in sorted(runs.items()) if isinstance(failed, list)]
        # a shard does not know S (the other shards' screens): it runs until the task is decided at every
        # count S could be, so the merged record's verdict, at the real S, reads the runs an unsharded
        # session would have stopped at (more runs never mislead: the verdict stops at its own look)
        counts = [screened_tasks] if screened_tasks is not None else list(range(1, max(plan.tasks, 1) + 1))
        wanted = max(sequential.runs_wanted(plan, n, scored, pool) for n in counts)
        if len(scored) < wanted:
            return None
        last = max((sequential.sequence(plan, n, scored, pool)[-1] for n in counts), key=lambda x: x.runs)
        return f"{NOT_NEEDED}: {spec.id} decided at r{last.runs} ({last.state.replace('_', ' ')})"

    def _wait_for(self, spec: TaskSpec, through: int) -> tuple[dict[str, Pool], dict[int, Any], int | None] | None:
        """The pools, the task's runs r1 ... r``through`` (the look before the batch of the repetition
        asking) and the screened count, once the screen is over and those runs are reported; None after
        the wait. A shard cannot know how many tasks the other shards' screens sent on (None): it
        decides at every count it could be, and the merged record's verdict uses the real one."""
        from pytest_agentdrift.compare.sequential import Pool

        where = self._dir()
        if where is None:
            return None
        limit = time.monotonic() + 2 * float(self.settings.timeout or spec.timeout_s or 600) + 300
        while time.monotonic() < limit and not self.info.longrun.stop_requested():
            runs, pools, screen = (_read(where / name) for name in (f"{spec.id}.json", POOLS_FILE, SCREEN_FILE))
            if runs is not None and pools is not None and (screen is not None or self._sharded()):
                have = {int(r): f for r, f in runs.items()}
                if all(r in have for r in range(1, through + 1)):
                    earlier = {r: have[r] for r in range(1, through + 1)}
                    screened = None if screen is None else int(screen["screened"])
                    return {t: Pool(**p) for t, p in pools.items()}, earlier, screened
            time.sleep(_POLL_S)
        return None

    # -- the controller: what each run failed, for the workers; what was not needed, for the record ---
    @pytest.hookimpl(trylast=True)  # after the controller has counted the items it expects
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._seed_resumed()

    @pytest.hookimpl(optionalhook=True, trylast=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        self._seed_resumed()

    def _seed_resumed(self) -> None:
        """A resumed session continues where the record stopped: what each kept run failed goes to the
        workers (a confirming repetition waits for its task's earlier runs, some of them kept, never run
        again) and, once the collection says which screen runs are still to come, the screened count."""
        from pytest_agentdrift.compare.confirm import run_failures
        from pytest_agentdrift.record.store import atomic_write

        resume, where = self.info.longrun.resume, self._dir()
        if self.collector is None or resume is None or where is None or self._pools_written:
            return
        atomic_write(where / POOLS_FILE, json.dumps(self._pools()))
        self._pools_written = True
        for payload in resume.kept.values():
            self.runs.setdefault(payload["task_id"], {})[payload["rep"]] = run_failures(payload["result"])
        for task in sorted(self.runs):
            atomic_write(where / f"{task}.json", json.dumps(self.runs[task]))
        self._screen_over(where)

    @pytest.hookimpl(trylast=True)  # after the controller has counted the report as received
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.collector is None:
            return
        skipped = getattr(report, "agentdrift_not_needed", None)
        if report.when == "setup" and report.skipped and skipped:
            self.collector.received_nodeids.add(report.nodeid)  # decided: not a missing run
            self.not_needed.append(report.nodeid)
            self._note(skipped["task"], skipped["rep"], NOT_NEEDED)  # a later repetition does not wait for it
            return
        payload = getattr(report, "agentdrift_payload", None)
        if report.when == "call" and payload is not None:
            self._note_run(payload)

    def _note_run(self, payload: dict[str, Any]) -> None:
        from pytest_agentdrift.compare.confirm import run_failures
        from pytest_agentdrift.record.store import atomic_write

        where = self._dir()
        if where is None:
            return
        if not self._pools_written:
            atomic_write(where / POOLS_FILE, json.dumps(self._pools()))
            self._pools_written = True
        self._note(payload["task_id"], payload["rep"], run_failures(payload["result"]))
        self._screen_over(where)

    def _screen_over(self, where: Path) -> None:
        """Once every screen repetition has reported: how many tasks it sent on (the verdict's count)."""
        from pytest_agentdrift.compare import confirm
        from pytest_agentdrift.record.store import atomic_write

        k = self.settings.k
        if self._sharded() or (where / SCREEN_FILE).exists():
            return  # (a shard's screen is one part of the session's: its workers decide without the count)
        c, comparison = self._controller()
        screen = {n for n in c.expected_nodeids if int(n.rsplit("::r", 1)[1]) <= k}
        if not screen <= c.received_nodeids:
            return
        firsts = {t: [f for _, f in sorted(runs.items()) if isinstance(f, list)][:k] for t, runs in self.runs.items()}
        plan = confirm.plan_of(confirm.plan_document(k, self.cap, self.tasks))
        pools = confirm.pools(comparison.baseline_results or {})
        atomic_write(where / SCREEN_FILE, json.dumps({"screened": confirm.screened_count(plan, firsts, pools)}))

    def _note(self, task: str, rep: int, failed: Any) -> None:
        """What repetition ``rep`` of ``task`` failed (None: not scored; NOT_NEEDED: skipped), for the workers."""
        from pytest_agentdrift.record.store import atomic_write

        where = self._dir()
        if where is None:
            return
        self.runs.setdefault(task, {})[rep] = failed
        atomic_write(where / f"{task}.json", json.dumps(self.runs[task]))

    def _pools(self) -> dict[str, Any]:
        from pytest_agentdrift.compare.confirm import pools

        base = self._controller()[1].baseline_results or {}
        return {
            t: {"fails": p.fails, "runs": p.runs, "base_effect": p.base_effect, "rho": p.rho}
            for t, p in pools(base).items()
        }

    def plan_section(self) -> dict[str, Any]:
        """The record's ``confirm`` section: the plan, and which repetitions were not needed."""
        from pytest_agentdrift.compare.confirm import plan_document

        resumed, where = self._resumed_tasks(), self._dir()
        if self._sharded():  # every shard's: counted by the process that collected (a worker under xdist)
            told = _read(where / TASKS_FILE) if where is not None else None
            tasks = self.tasks or int((told or {}).get("tasks") or 0)
        elif resumed is not None:
            tasks = len(resumed)
        else:
            tasks = len({n.rsplit("::", 1)[0] for n in self._controller()[0].expected_nodeids})
        doc = plan_document(self.settings.k, self.cap, tasks)
        doc["not_needed"] = sorted(self.not_needed)
        return doc


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None  # the control files are objects, written whole


__all__ = ["ConfirmPlugin", "NOT_NEEDED"]
