"""Long runs: infrastructure stops, retries, resume, shards, budgets and the time ledger,
as one per-process state. No pytest.

`LongRun` holds what a long session decides as it goes; session/longrun.py
wires it into pytest's hooks. The rules themselves live in the pure modules
it calls: agents/infra.py (when infrastructure errors stop a session),
run/budget.py, run/retry.py, tasks/shard.py, run/progress.py and
record/resume.py.

Processes talk through the session's control directory (a temporary
directory the controller makes and hands to workers in `WorkerInput`): a
`STOP` file (why the session stops starting runs: a session budget spent,
an infrastructure error that will repeat) that every process checks before
it starts a run, and `status/<worker>.json` for progress. Workers on other
machines (`--tx ssh`) do not share it: there, a stop only takes effect as
xdist drains its queue, and no progress is shown.
"""

from __future__ import annotations

import copy
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from pytest_agentdrift.agents.infra import InfraStopRule
from pytest_agentdrift.record.spend import spend_text
from pytest_agentdrift.run import scratch
from pytest_agentdrift.run.budget import (
    Budget,
    add_spend,
    parse_budget,
    run_exceeded,
    run_spend,
    session_exhausted,
    usage_source,
)
from pytest_agentdrift.run.progress import StatusBoard, TimeLedger
from pytest_agentdrift.run.retry import RetryPolicy, run_with_retries
from pytest_agentdrift.shapes import Results, ResumeNote, SettingsRecord, SpendRecord
from pytest_agentdrift.tasks.shard import Shard, item_key
from pytest_agentdrift.vocabulary import EVENTS_FILE

if TYPE_CHECKING:
    from pytest_agentdrift.agents.base import AgentAdapter
    from pytest_agentdrift.record.resume import ResumeState
    from pytest_agentdrift.run.budget import PriceTable, RunWatch
    from pytest_agentdrift.run.evidence import RunEvidence

STOP_FILE = "STOP"
#: the WorkerInput's keys in xdist's workerinput, which every plugin of the session shares
WORKER_KEY_PREFIX = "agentdrift_"


@dataclass(frozen=True)
class WorkerInput:
    """What the controller decides once and hands every xdist worker; xdist carries it as a plain dict."""

    run_id: str | None = None
    started_at: str | None = None
    manifest: dict[str, Any] | None = None  # captured once, on the controller (the `agent_manifest` fixture)
    control_dir: str | None = None
    shard: dict[str, Any] | None = None
    resume_skip: tuple[str, ...] = ()  # finished runs of the resumed record (not run again)
    resume_only: tuple[str, ...] | None = None  # the resumed record's items (nothing else is run)
    worker_id: str = "main"  # xdist's own `workerid`, never sent by us

    def to_dict(self) -> dict[str, Any]:
        sent = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "worker_id"}
        sent["resume_skip"] = sorted(self.resume_skip)
        sent["resume_only"] = sorted(self.resume_only) if self.resume_only is not None else None
        return {WORKER_KEY_PREFIX + name: value for name, value in sent.items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkerInput:
        """A worker's view of xdist's workerinput (keys the controller did not send keep their defaults)."""
        got = {f.name: data.get(WORKER_KEY_PREFIX + f.name) for f in fields(cls) if f.name != "worker_id"}
        only = got["resume_only"]
        # xdist's workerinput as it came: plain JSON values, which the fields below take as sent
        sent: dict[str, Any] = {
            **got,
            "control_dir": got["control_dir"] or None,
            "shard": got["shard"] or None,
            "resume_skip": tuple(got["resume_skip"] or ()),
            "resume_only": tuple(only) if only is not None else None,
        }
        return cls(**sent, worker_id=str(data.get("workerid", "gw?")))


class LongRunSettings(Protocol):
    """What LongRun reads of the session's settings (options.Settings, which this stage does not import)."""

    @property
    def retries(self) -> int: ...
    @property
    def retry_backoff(self) -> float: ...
    @property
    def budget(self) -> tuple[str, ...]: ...
    @property
    def price_table(self) -> Path | None: ...
    @property
    def shard(self) -> str | None: ...
    @property
    def resume(self) -> Path | None: ...
    @property
    def baseline(self) -> Path | None: ...
    @property
    def confirm(self) -> int | None: ...
    @property
    def agent_options(self) -> dict[str, Any]: ...


class SessionSettings(Protocol):
    """What LongRun reads of the session's SessionInfo (session/state.py, a later layer): its settings."""

    @property
    def settings(self) -> LongRunSettings: ...


class LongRun:
    """One per process (controller, worker or both): see the module doc."""

    def __init__(self, info: SessionSettings, handed: WorkerInput | None = None):
        self.info = info  # the session's SessionInfo: its settings, read live (a bundle can set the model later)
        settings = info.settings
        self.policy = RetryPolicy(settings.retries, settings.retry_backoff)
        self.budget: Budget = parse_budget(settings.budget) if settings.budget else Budget()
        self._table: PriceTable | None = None
        self._dealt: dict[tuple[str, int], int] = {}
        # controller
        self.resume: ResumeState | None = None
        self.nodeid_keys: dict[str, str] = {}
        self._dirs: dict[Path, str] | None = None
        self._rootpath: Path | None = None
        self._args: list[str] = []
        self.spent: SpendRecord = add_spend()
        self.stop_reason: str | None = None
        self.infra = InfraStopRule()
        self.wall_start = time.monotonic()
        self._own_control_dir = False
        self.ledger = TimeLedger()
        handed = handed or WorkerInput()
        self.worker_id = handed.worker_id
        self.control_dir: Path | None = Path(handed.control_dir) if handed.control_dir else None
        self.shard = (
            Shard(handed.shard["index"], handed.shard["count"], handed.shard["source"]) if handed.shard else None
        )
        self.skip_keys: set[str] = set(handed.resume_skip)
        self.only_keys: set[str] | None = set(handed.resume_only) if handed.resume_only is not None else None
        self.board = StatusBoard(self.control_dir, self.worker_id)

    @property
    def settings(self) -> LongRunSettings:
        return self.info.settings

    def table(self) -> PriceTable | None:
        if self._table is None and self.settings.price_table is not None:
            from pytest_agentdrift.run.budget import load_price_table

            self._table = load_price_table(self.settings.price_table)
        return self._table

    def identity_options(self) -> dict[str, Any]:
        """Envelope options that enter the manifest's identity (retries; a per-run budget)."""
        out: dict[str, Any] = {"retry_policy": self.policy.identity()}
        if self.budget.run_limited:
            out["budget_tokens_per_task"] = self.budget.per_run()
        return out

    def worker_fields(self) -> dict[str, Any]:
        """This process's part of the WorkerInput: control directory, shard, resumed runs."""
        return {
            "control_dir": str(self.control_dir) if self.control_dir else None,
            "shard": self.shard.to_dict() if self.shard else None,
            "resume_skip": tuple(sorted(self.skip_keys)),
            "resume_only": tuple(sorted(self.only_keys)) if self.only_keys is not None else None,
        }

    # -- controller: before collection ------------------------------------------
    def prepare(self, rootpath: Path, args: list[str], validate_manifest: Callable[[Any, Path], Any]) -> None:
        """Controller sessionstart, before the manifest: shard, price table, control dir, resume.

        `validate_manifest` checks a resumed record's manifest (manifest.capture's: this stage
        does not import the manifest stage)."""
        from pytest_agentdrift.tasks.shard import resolve

        self.shard = resolve(self.settings.shard, os.environ)
        self.table()  # a bad price table is one usage error now, not a failure mid-session
        self._rootpath = Path(rootpath)
        self._args = list(args)
        self.control_dir = scratch.make("control")
        self._own_control_dir = True
        self.board = StatusBoard(self.control_dir, self.worker_id)
        if self.settings.resume is not None:
            from pytest_agentdrift.record.resume import load_for_resume

            self.resume = load_for_resume(self.settings.resume, validate_manifest)
            self.skip_keys = set(self.resume.kept)
            self.only_keys = set(self.resume.state["expected"])

    # -- worker side (and the single process) -----------------------------------
    def stop_requested(self) -> str | None:
        if self.control_dir is None:
            return self.stop_reason
        try:
            return (self.control_dir / STOP_FILE).read_text(encoding="utf-8").strip() or "stopped"
        except OSError:
            return None

    def keep(self, task_id: str, rep: int) -> bool:
        """Whether this process runs the item (shard and resume)."""
        key = item_key(task_id, rep)
        if key in self.skip_keys or (self.only_keys is not None and key not in self.only_keys):
            return False
        if self.shard is not None:
            return self._dealt.get((task_id, rep)) == self.shard.index
        return True

    def deal(self, keys: list[tuple[str, int]]) -> None:
        """Deal the collected items to the shards (tasks/shard.deal), by the baseline's durations when there is one."""
        if self.shard is None:
            return
        from pytest_agentdrift.tasks.shard import deal

        if not self.settings.confirm:
            self._dealt = deal(keys, self.shard.count, self._baseline_durations())
            return
        # a task's confirming repetitions wait for its screen's runs, reported on this machine only:
        # every repetition of a task goes to one shard (tasks dealt as items are: balanced, by duration)
        whole = deal({(task_id, 1) for task_id, _ in keys}, self.shard.count, self._baseline_durations())
        self._dealt = {(task_id, rep): whole[(task_id, 1)] for task_id, rep in keys}

    def _baseline_durations(self) -> dict[str, float] | None:
        if not self.settings.baseline:
            return None
        from pytest_agentdrift.errors import RecordError
        from pytest_agentdrift.record.store import load_results
        from pytest_agentdrift.tasks.shard import durations_from

        try:
            return durations_from(load_results(Path(self.settings.baseline)))
        except RecordError:
            return None  # the comparison reports a bad baseline; the shards are then dealt by count

    def monitor(self) -> Callable[[AgentAdapter, Path], RunWatch] | None:
        """The sandbox monitor factory for one run (run/budget.RunWatch), or None."""
        if self.control_dir is None and not self.budget.run_limited:
            return None
        from pytest_agentdrift.run.budget import RunWatch

        def factory(adapter: AgentAdapter, harness: Path) -> RunWatch:
            return RunWatch(
                adapter,
                harness / EVENTS_FILE,
                budget=self.budget,
                table=self.table(),
                model=self.settings.agent_options.get("model"),
                on_update=self.board.update,
                input_includes_cached=getattr(adapter, "usage_input_includes_cached", False),
            )

        return factory

    def annotate(self, result: dict[str, Any], run: RunEvidence, adapter: AgentAdapter | None) -> None:
        """What the run spent (run/budget.py), from the usage its adapter parsed."""
        result["spend"] = self._final_spend(result.get("usage"), run, adapter)

    def _final_spend(
        self, usage: Mapping[str, object] | None, run: RunEvidence, adapter: AgentAdapter | None
    ) -> SpendRecord:
        model = run.adapter_output.model_stamp or self.settings.agent_options.get("model")
        spend = run_spend(
            usage,
            model=model,
            table=self.table(),
            input_includes_cached=bool(getattr(adapter, "usage_input_includes_cached", False)),
        )
        # where the counts came from: the harness's count of the model calls it relayed where it has
        # one, else the agent's own usage reports (its usage events, its product's output)
        spend["usage_source"] = usage_source(run)
        return spend

    def overspent(self, adapter: AgentAdapter) -> Callable[[RunEvidence], str | None] | None:
        """The final-spend check of one run against the per-run budget (RunSettings.overspent), or None."""
        if not self.budget.run_limited:
            return None

        def check(run: RunEvidence) -> str | None:
            spend = self._final_spend(run.adapter_output.usage.to_dict(), run, adapter)
            why = run_exceeded(self.budget, spend)
            told = "counted by the harness" if spend["usage_source"] == "harness" else "reported by the agent"
            return f"{why} (the run's final spend, {told})" if why else None

        return check

    def run_item(
        self, once: Callable[[], dict[str, Any]], task_id: str, rep: int, timeout_s: float | None
    ) -> dict[str, Any]:
        """One item: `once()` (one run's payload), retried while it is lost to infrastructure; the
        payload gains the item's timing."""
        started = time.monotonic()
        waited = 0.0

        def attempt(number: int) -> dict[str, Any]:
            self.board.start(task_id, rep, number, timeout_s)
            return once()

        def on_wait(next_attempt: int, seconds: float, result: dict[str, Any]) -> None:
            nonlocal waited
            waited += seconds
            infra = result.get("infra_error") or {}
            why = f"{infra.get('class')}: {infra.get('evidence')}"
            self.board.waiting(task_id, rep, next_attempt, seconds, why)

        try:
            payload = run_with_retries(attempt, self.policy, stop_requested=self.stop_requested, on_wait=on_wait)
        finally:
            self.board.idle()
        result = payload["result"]
        attempts = result.get("attempts") or [{"duration_s": result["evidence"].get("duration_s")}]
        payload["timing"] = {
            "item_s": round(time.monotonic() - started, 3),
            "wait_s": waited,
            "attempts": len(attempts),
            "agent_s": round(sum(a.get("duration_s") or 0 for a in attempts), 3),
        }
        return payload

    # -- controller: as runs report ----------------------------------------------
    def request_stop(self, reason: str) -> None:
        if self.stop_reason is not None:
            return
        self.stop_reason = reason
        if self.control_dir is not None:
            from pytest_agentdrift.record.store import atomic_write

            atomic_write(self.control_dir / STOP_FILE, reason + "\n")

    def on_payload(self, payload: dict[str, Any], nodeid: str) -> None:
        """A run reported: its spend and time, and whether the session stops starting runs."""
        key = item_key(payload["task_id"], payload["rep"])
        self.nodeid_keys[nodeid] = key
        result = payload["result"]
        self.spent = add_spend(self.spent, result.get("spend"))
        self.ledger.add(payload.get("timing") or {})
        reason = self.infra.observe(key, result) or session_exhausted(self.budget, self.spent)
        if reason:
            self.request_stop(reason)

    def expected_keys(self, expected_nodeids: set[str]) -> list[str]:
        """The item keys (`T07/r2`) of the nodeids this session expects."""
        return [
            self.nodeid_keys.get(nodeid) or self._key_from_nodeid(nodeid) or nodeid
            for nodeid in sorted(expected_nodeids)
        ]

    def _key_from_nodeid(self, nodeid: str) -> str | None:
        """`<task dir relative to rootdir>::r<rep>` -> `T07/r2` (the controller under xdist has no items)."""
        if self._dirs is None:
            from pytest_agentdrift.tasks.taskdirs import session_task_dirs

            self._dirs = {Path(d).resolve(): tid for tid, d in session_task_dirs(self._args).items()}
        where, _, rep = nodeid.rpartition("::r")
        if not rep.isdigit() or self._rootpath is None:
            return None
        tid = self._dirs.get((self._rootpath / where).resolve())
        return item_key(tid, int(rep)) if tid else None

    def state_document(
        self, run_id: str, started_at: str, expected_nodeids: set[str], settings: SettingsRecord
    ) -> dict[str, Any]:
        """The INCOMPLETE marker's state: what a resume of this session needs (record/resume.py)."""
        from pytest_agentdrift.record.resume import state_document

        return state_document(
            run_id=run_id,
            started_at=started_at,
            expected=self.expected_keys(expected_nodeids),
            settings=settings,
            shard=self.shard.to_dict() if self.shard else None,
            note=f"recording run {run_id} started {started_at}",
        )

    def progress_counts(self, received: int, expected: int) -> tuple[int, int, str | None]:
        """(runs done, runs expected, spend so far) for the progress display; a resume's kept runs count."""
        kept = len(self.resume.kept) if self.resume else 0
        has_spend = self.spent.get("tokens") is not None or self.spent.get("cost_usd") is not None
        return received + kept, expected + kept, spend_text(self.spent) if has_spend else None

    # -- controller: the end -----------------------------------------------------
    def complete_results(self, results: Results, collector: Any) -> None:
        """Add what the long-run features know to results.json (before it is written).

        `collector` is the session's RunCollector: the nodeids it expected and received, whether
        the session was interrupted, and the record it may still have to start."""
        reasons = results["incomplete_reasons"]
        expected, received = collector.expected_nodeids, collector.received_nodeids
        if self.shard is not None:
            kept = len(self.resume.kept) if self.resume else 0
            shard = self.shard
            results["shard"] = {
                "index": shard.index,
                "count": shard.count,
                "source": shard.source,
                "selected": len(expected) + kept,
            }  # Shard.to_dict, and the items this shard selected
            if not expected and not received and "no task was run" in reasons and not collector.interrupted:
                reasons.remove("no task was run")  # this shard's share of the items is empty: a complete, empty record
                if collector.recorder is not None and not collector.recorder.started:
                    collector.start_record()
        if self.resume is not None:
            reasons.extend(self._resume_facts(self.resume, results, received, expected))
        if self.stop_reason is not None:
            reasons.append(f"stopped starting runs: {self.stop_reason}")
        if self.budget.session_limited or self.budget.run_limited:
            results["budget"] = {"limits": self.budget.to_dict(), "spent": self.spent}
        results["complete"] = not reasons

    def _resume_facts(self, resume: ResumeState, results: Results, received: set[str], expected: set[str]) -> list[str]:
        """results.json's `resumed` notes; the reasons a resumed record is still incomplete."""
        state = resume.state
        notes: list[ResumeNote] = [copy.copy(n) for n in state.get("resumed", [])]
        if notes:
            notes[-1]["ran_runs"] = len(received)
        results["resumed"] = notes
        have = {item_key(tid, r["rep"]) for tid, t in results["tasks"].items() for r in t["runs"]}
        unselected = sorted(set(state["expected"]) - have - set(self.expected_keys(expected)))
        reasons = []
        if unselected:
            reasons.append(
                f"{len(unselected)} run(s) of the resumed record were not selected in this session: "
                + ", ".join(unselected[:10])
            )
        return reasons + [f"resume: {n}" for n in resume.notes if "ignored" not in n]

    def final_lines(self, results: Results, record: Path | None) -> list[str]:
        """The time ledger (and spend against the budget); why the session stopped starting runs."""
        summary = results["summary"]
        spent = summary.get("tokens") is not None or summary.get("cost_usd") is not None
        budget = ""
        if self.budget.session_limited:
            limits = (
                f"{self.budget.tokens:,} tokens" if self.budget.tokens else "",
                f"${self.budget.cost_usd:,.2f}" if self.budget.cost_usd else "",
            )
            budget = " of " + " / ".join(x for x in limits if x)
        spend = spend_text(self.spent) + budget if spent or self.budget.session_limited else None
        lines = [self.ledger.line(time.monotonic() - self.wall_start, spend)]
        if self.stop_reason is not None:
            lines.append(
                f"ERROR: stopped starting runs: {self.stop_reason}"
                + (f"; the record is incomplete: continue it with --agent-resume {record}" if record else "")
            )
        return lines

    def close(self) -> None:
        if self._own_control_dir and self.control_dir is not None:
            shutil.rmtree(self.control_dir, ignore_errors=True)


__all__ = ["LongRun", "STOP_FILE", "WorkerInput"]
