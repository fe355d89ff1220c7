"""Long runs, wired into the session: infrastructure stops, retries, resume, shards,
budgets and progress.

`LongRun` is the per-process state (on the session object, `s.longrun`);
`LongRunPlugin` its pytest hooks, registered beside the controller or worker
role when a session asks for anything agentdrift does. The logic lives in
pure modules: agents/infra.py, run/budget.py, run/retry.py,
tasks/shard.py, run/progress.py, record/resume.py, record/merge.py.

Processes talk through the session's control directory (a temporary
directory the controller makes and hands to workers in workerinput): a
`STOP` file (why the session stops starting runs: a session budget spent,
an infrastructure error that will repeat) that every process checks before
it starts a run, and `status/<worker>.json` for progress. Workers on other
machines (`--tx ssh`) do not share it: there, a stop only takes effect as
xdist drains its queue, and no progress is shown.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_agentdrift.agents.infra import describe
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.run.budget import Budget, add_spend, parse_budget, run_spend, session_exhausted, spend_text
from pytest_agentdrift.run.retry import RetryPolicy, run_with_retries
from pytest_agentdrift.tasks.shard import item_key
from pytest_agentdrift.vocabulary import INFRA_OUTCOME, MANIFEST_FILE, SOURCE_MANIFEST_FILE

STOP_FILE = "STOP"
#: the same (class, evidence) ending this many runs in a row stops the session
SAME_INFRA_STREAK = 3


class LongRun:
    def __init__(self, info, *, workerinput: dict[str, Any] | None = None):
        self.info = info  # session/state.SessionInfo: its settings, read live (a bundle can set the model later)
        settings = info.settings
        self.policy = RetryPolicy(settings.retries, settings.retry_backoff)
        self.budget: Budget = parse_budget(settings.budget) if settings.budget else Budget()
        self._table = None
        self.shard = None
        self._dealt: dict[tuple[str, int], int] = {}
        self.control_dir: Path | None = None
        self.worker_id = "main"
        self.skip_keys: set[str] = set()  # finished runs of the resumed record (not run again)
        self.only_keys: set[str] | None = None  # the resumed record's items (nothing else is run)
        self.deselected = 0
        # controller
        self.resume = None  # record.resume.ResumeState
        self.nodeid_keys: dict[str, str] = {}
        self._dirs: dict[Path, str] | None = None
        self._rootpath: Path | None = None
        self._args: list[str] = []
        self.spent: dict[str, Any] = add_spend()
        self.stop_reason: str | None = None
        self._streak: list[tuple[str, str]] = []
        self.infra_runs: list[str] = []
        self.wall_start = time.monotonic()
        self.display = None
        self._own_control_dir = False
        from pytest_agentdrift.run.progress import StatusBoard, TimeLedger

        self.ledger = TimeLedger()
        if workerinput is not None:
            self.worker_id = str(workerinput.get("workerid", "gw?"))
            cd = workerinput.get("agentdrift_control_dir")
            self.control_dir = Path(cd) if cd else None
            sh = workerinput.get("agentdrift_shard")
            if sh:
                from pytest_agentdrift.tasks.shard import Shard

                self.shard = Shard(sh["index"], sh["count"], sh["source"])
            self.skip_keys = set(workerinput.get("agentdrift_resume_skip") or ())
            only = workerinput.get("agentdrift_resume_only")
            self.only_keys = set(only) if only is not None else None
        self.board = StatusBoard(self.control_dir, self.worker_id)

    @property
    def settings(self):
        return self.info.settings

    # -- settings-derived ---------------------------------------------------------
    def table(self):
        if self._table is None and self.settings.price_table is not None:
            from pytest_agentdrift.run.budget import load_price_table

            self._table = load_price_table(self.settings.price_table)
        return self._table

    def run_item(self, runner, spec, rep: int) -> dict[str, Any]:
        """TaskRunner.run_item's long-run path (the nodes call the runner, never this module)."""
        return run_item(self, runner, spec, rep)

    def identity_options(self) -> dict[str, Any]:
        """Envelope options that enter the manifest's identity (retries; a per-run budget)."""
        out: dict[str, Any] = {"retry_policy": self.policy.identity()}
        if self.budget.run_limited:
            out["budget_tokens_per_task"] = self.budget.per_run()
        return out

    def workerinput(self) -> dict[str, Any]:
        return {
            "agentdrift_control_dir": str(self.control_dir) if self.control_dir else None,
            "agentdrift_shard": self.shard.to_dict() if self.shard else None,
            "agentdrift_resume_skip": sorted(self.skip_keys),
            "agentdrift_resume_only": sorted(self.only_keys) if self.only_keys is not None else None,
        }

    # -- controller: before collection ------------------------------------------
    def prepare(self, config, s) -> None:
        """Controller sessionstart, before the manifest: shard, price table, control dir, resume."""
        from pytest_agentdrift.tasks.shard import resolve

        self.shard = resolve(self.settings.shard, os.environ)
        self.table()  # a bad price table is one usage error now, not a failure mid-session
        self._rootpath = Path(config.rootpath)
        self._args = list(config.args)
        self.control_dir = Path(tempfile.mkdtemp(prefix="agentdrift-control-"))
        self._own_control_dir = True
        from pytest_agentdrift.run.progress import StatusBoard

        self.board = StatusBoard(self.control_dir, self.worker_id)
        if self.settings.resume is not None:
            from pytest_agentdrift.manifest.capture import validate_manifest
            from pytest_agentdrift.record.resume import load_for_resume

            self.resume = load_for_resume(self.settings.resume, validate_manifest)
            state = self.resume.state
            # the resumed session continues the same run: same id, same start
            s.run_id, s.started_at = state["run_id"], state["started_at"]
            self.skip_keys = set(self.resume.kept)
            self.only_keys = set(state["expected"])

    def open_resumed(self, config, s) -> list[str] | None:
        """After the manifest: the runtime must be the recorded one, then take the record.

        Returns the refusal lines (the controller exits 6 with them) or None."""
        from pytest_agentdrift.manifest.identity import compare_manifests, render_refusal
        from pytest_agentdrift.record.resume import ResumedRecorder, settings_differences, write_state
        from pytest_agentdrift.session.state import utc_now

        res = self.resume
        lines: list[str] = []
        if s.manifest is not None and "identity" in s.manifest:
            from pytest_agentdrift.manifest.identity import IDENTITY_FIELDS

            # A resume continues one session: a field unobserved on both sides is as unknown as it
            # was while the session ran, so it does not block here (it still blocks a comparison);
            # every observed difference does.
            cmp = compare_manifests(res.manifest, s.manifest, [], pre_run=True, accept_unobserved=list(IDENTITY_FIELDS))
            if not cmp.comparable:
                lines += render_refusal(cmp)
        for key, before, now in settings_differences(res.state["settings"], s.settings_record()):
            lines.append(f"BLOCK settings.{key}: {before!r} != {now!r}")
        recorded_shard = res.state.get("shard")
        current_shard = {"index": self.shard.index, "count": self.shard.count} if self.shard else None
        if (recorded_shard and {k: recorded_shard[k] for k in ("index", "count")}) != current_shard:
            lines.append(f"BLOCK shard: {_shard_text(recorded_shard)} != {_shard_text(current_shard)}")
        if lines:
            # the controller refuses (exit 6) with these lines and its closing line
            return [f"agentdrift: cannot resume {res.path}: this session is not the recorded run", *lines]
        s.recorder = ResumedRecorder(res.path, res)
        s.recorder.clear_partial(res.missing)
        for payload in res.kept.values():
            s.task_meta[payload["task_id"]] = payload["meta"]
            s.results.setdefault(payload["task_id"], {})[payload["rep"]] = payload["result"]
        state = dict(res.state)
        note = {
            "at": utc_now(),
            "kept_runs": len(res.kept),
            "ran_runs": 0,
            "pytest_argv": list(config.invocation_params.args),
        }
        if res.infra_lost:
            from pytest_agentdrift.agents.infra import describe

            note["rerun_infra_errors"] = [
                f"{k}: {describe(p['result']['infra_error'])}" for k, p in sorted(res.infra_lost.items())
            ]
        state["resumed"] = [*state.get("resumed", []), note]
        res.state = state
        write_state(res.path, state)
        return None

    def start_display(self, config, s) -> None:
        mode = self.settings.progress
        if mode == "off" or self.control_dir is None or config.option.verbose < -1:
            return
        from pytest_agentdrift.run.progress import ProgressDisplay

        tw = config.get_terminal_writer()
        try:
            # pytest's capture is suspended between items, so fd 1 is the terminal now; during an
            # item it is not, hence a descriptor of our own
            fd = os.dup(1)
        except OSError:
            return
        tty = mode == "tty" or (mode == "auto" and os.isatty(fd))

        def counts() -> tuple[int, int, str | None]:
            kept = len(self.resume.kept) if self.resume else 0
            spent = (
                spend_text(self.spent)
                if self.spent.get("tokens") is not None or self.spent.get("cost_usd") is not None
                else None
            )
            return len(s.received_nodeids) + kept, len(s.expected_nodeids) + kept, spent

        self.display = ProgressDisplay(
            self.control_dir,
            fd,
            tty=tty,
            interval=self.settings.progress_interval,
            counts=counts,
            current_column=lambda: tw.width_of_current_line,
            width=lambda: tw.fullwidth,
        )
        self.display.start()

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

        self._dealt = deal(keys, self.shard.count, self._baseline_durations())

    def _baseline_durations(self) -> dict[str, float] | None:
        if not self.settings.baseline:
            return None
        from pytest_agentdrift.errors import RecordError
        from pytest_agentdrift.record.store import load_run
        from pytest_agentdrift.tasks.shard import durations_from

        try:
            return durations_from(load_run(Path(self.settings.baseline)))
        except RecordError:
            return None  # the comparison reports a bad baseline; the shards are then dealt by count

    def monitor(self, spec, rep: int):
        """The sandbox monitor factory for one run (run/budget.RunWatch), or None."""
        if self.control_dir is None and not self.budget.run_limited:
            return None
        from pytest_agentdrift.run.budget import RunWatch

        def factory(adapter, harness: Path):
            return RunWatch(
                adapter,
                harness / "events.jsonl",
                budget=self.budget,
                table=self.table(),
                model=self.settings.agent_options.get("model"),
                on_update=self.board.update,
                input_includes_cached=getattr(adapter, "usage_input_includes_cached", False),
            )

        return factory

    def annotate(self, result: dict[str, Any], run, adapter) -> None:
        """What the run spent (run/budget.py), from the usage its adapter parsed."""
        model = run.adapter_output.model_stamp or self.settings.agent_options.get("model")
        result["spend"] = run_spend(
            result.get("usage"),
            model=model,
            table=self.table(),
            input_includes_cached=bool(getattr(adapter, "usage_input_includes_cached", False)),
        )

    # -- controller: as runs report ----------------------------------------------
    def request_stop(self, reason: str) -> None:
        if self.stop_reason is not None:
            return
        self.stop_reason = reason
        if self.control_dir is not None:
            from pytest_agentdrift.record.store import atomic_write

            atomic_write(self.control_dir / STOP_FILE, reason + "\n")

    def on_payload(self, payload: dict[str, Any], nodeid: str) -> None:
        key = item_key(payload["task_id"], payload["rep"])
        self.nodeid_keys[nodeid] = key
        result = payload["result"]
        self.spent = add_spend(self.spent, result.get("spend"))
        self.ledger.add(payload.get("timing") or {})
        infra = result.get("infra_error") if result.get("outcome") == INFRA_OUTCOME else None
        if infra is not None:
            self.infra_runs.append(f"{key} {describe(infra)}")
            if infra.get("repeats"):
                self.request_stop(
                    f"an infrastructure error that will repeat on every run ended {key}: {describe(infra)}"
                )
            self._streak.append((infra.get("class"), infra.get("evidence")))
            if len(self._streak) >= SAME_INFRA_STREAK and len(set(self._streak[-SAME_INFRA_STREAK:])) == 1:
                self.request_stop(
                    f"the same infrastructure error ended {SAME_INFRA_STREAK} runs in a row: {describe(infra)}"
                )
        else:
            self._streak = []
        exhausted = session_exhausted(self.budget, self.spent)
        if exhausted:
            self.request_stop(exhausted)

    def expected_keys(self, s) -> list[str]:
        """The item keys (`T07/r2`) of the nodeids this session expects."""
        keys = []
        for nodeid in sorted(s.expected_nodeids):
            key = self.nodeid_keys.get(nodeid) or self._key_from_nodeid(nodeid)
            keys.append(key or nodeid)
        return keys

    def _key_from_nodeid(self, nodeid: str) -> str | None:
        """`<task dir relative to rootdir>::r<rep>` -> `T07/r2` (the controller under xdist has no items)."""
        if self._dirs is None:
            from pytest_agentdrift.tasks.load import session_task_dirs

            self._dirs = {Path(d).resolve(): tid for tid, d in session_task_dirs(self._args).items()}
        where, _, rep = nodeid.rpartition("::r")
        if not rep.isdigit() or self._rootpath is None:
            return None
        tid = self._dirs.get((self._rootpath / where).resolve())
        return item_key(tid, rep) if tid else None

    def begin_record(self, s) -> None:
        """The first run reported: create the record with the session's state and manifest,
        so that even a session killed from now on can be resumed."""
        from pytest_agentdrift.record.resume import state_document

        state = state_document(
            run_id=s.run_id,
            started_at=s.started_at,
            expected=self.expected_keys(s),
            settings=s.settings_record(),
            shard=self.shard.to_dict() if self.shard else None,
            note=f"recording run {s.run_id} started {s.started_at}",
        )
        s.recorder.start(json.dumps(state, indent=2, sort_keys=True))
        if s.manifest is not None:
            s.recorder.write_json(MANIFEST_FILE, s.manifest)
        if s.instruction_bundle is not None:
            s.recorder.write_json("instruction-bundle.json", s.instruction_bundle)
        if s.source_manifest is not None:
            s.recorder.write_json(SOURCE_MANIFEST_FILE, s.source_manifest)

    # -- controller: the end -----------------------------------------------------
    def complete_results(self, s, results: dict[str, Any]) -> None:
        """Add what the long-run features know to results.json (before it is written)."""
        reasons = results["incomplete_reasons"]
        selected = len(s.expected_nodeids)
        if self.shard is not None:
            results["shard"] = {
                **self.shard.to_dict(),
                "selected": selected + (len(self.resume.kept) if self.resume else 0),
            }
            if not s.expected_nodeids and not s.received_nodeids and "no task was run" in reasons and not s.interrupted:
                reasons.remove("no task was run")  # this shard's share of the items is empty: a complete, empty record
                if s.recorder is not None and not s.recorder.started:
                    self.begin_record(s)
        if self.resume is not None:
            state = self.resume.state
            notes = [dict(n) for n in state.get("resumed", [])]
            if notes:
                notes[-1]["ran_runs"] = len(s.received_nodeids)
            results["resumed"] = notes
            have = {f"{tid}/r{r['rep']}" for tid, t in results["tasks"].items() for r in t["runs"]}
            collected = set(self.expected_keys(s))
            unselected = sorted(set(state["expected"]) - have - collected)
            if unselected:
                reasons.append(
                    f"{len(unselected)} run(s) of the resumed record were not selected in this session: "
                    + ", ".join(unselected[:10])
                )
            reasons.extend(f"resume: {n}" for n in self.resume.notes if "ignored" not in n)
        if self.stop_reason is not None:
            reasons.append(f"stopped starting runs: {self.stop_reason}")
        if self.budget.session_limited or self.budget.run_limited:
            results["budget"] = {"limits": self.budget.to_dict(), "spent": self.spent}
        results["complete"] = not reasons

    def final_lines(self, s, results: dict[str, Any]) -> list[str]:
        lines = []
        spent = results["summary"].get("tokens") is not None or results["summary"].get("cost_usd") is not None
        budget = ""
        if self.budget.session_limited:
            budget = " of " + " / ".join(
                x
                for x in (
                    f"{self.budget.tokens:,} tokens" if self.budget.tokens else "",
                    f"${self.budget.cost_usd:,.2f}" if self.budget.cost_usd else "",
                )
                if x
            )
        lines.append(
            self.ledger.line(
                time.monotonic() - self.wall_start,
                spend_text(self.spent) + budget if spent or self.budget.session_limited else None,
            )
        )
        if self.stop_reason is not None:
            target = s.settings.record
            lines.append(
                f"ERROR: stopped starting runs: {self.stop_reason}"
                + (f"; the record is incomplete: continue it with --agent-resume {target}" if target else "")
            )
        return lines

    def close(self) -> None:
        if self.display is not None:
            self.display.stop()
            self.display = None
        if self._own_control_dir and self.control_dir is not None:
            shutil.rmtree(self.control_dir, ignore_errors=True)


def _shard_text(sh: dict[str, Any] | None) -> str:
    return "none" if not sh else f"{sh['index']}/{sh['count']}"


def run_item(lr: LongRun, runner, spec, rep: int) -> dict[str, Any]:
    """One item on a worker (a session/state.TaskRunner): the run, retried while it is lost to
    infrastructure."""
    started = time.monotonic()
    waited = 0.0

    def once(attempt: int) -> dict[str, Any]:
        lr.board.start(spec.id, rep, attempt, runner.settings.timeout or spec.timeout_s)
        return runner.run_task(spec, rep)

    def on_wait(next_attempt: int, seconds: float, result: dict[str, Any]) -> None:
        nonlocal waited
        waited += seconds
        infra = result.get("infra_error") or {}
        lr.board.waiting(spec.id, rep, next_attempt, seconds, f"{infra.get('class')}: {infra.get('evidence')}")

    try:
        payload = run_with_retries(once, lr.policy, stop_requested=lr.stop_requested, on_wait=on_wait)
    finally:
        lr.board.idle()
    result = payload["result"]
    attempts = result.get("attempts") or [{"duration_s": result["evidence"].get("duration_s")}]
    payload["timing"] = {
        "item_s": round(time.monotonic() - started, 3),
        "wait_s": waited,
        "attempts": len(attempts),
        "agent_s": round(sum(a.get("duration_s") or 0 for a in attempts), 3),
    }
    return payload


class LongRunPlugin:
    """The hooks (controller or worker; the single process is both)."""

    def __init__(self, config, session, item_class: type):
        self.config = config
        self.s = session
        self.lr: LongRun = session.longrun
        self.item_class = item_class  # session/collect.TaskItem, handed in by plugin.py: no import of the nodes

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session) -> None:
        if self.s.is_worker:
            return
        try:
            self.lr.prepare(self.config, self.s)
        except AgentDriftError as exc:
            raise pytest.UsageError(exc.message) from None

    def pytest_collection_modifyitems(self, session, config, items) -> None:
        self.lr.deal([(item.spec.id, item.rep) for item in items if isinstance(item, self.item_class)])
        keep, drop = [], []
        for item in items:
            (keep if not isinstance(item, self.item_class) or self.lr.keep(item.spec.id, item.rep) else drop).append(
                item
            )
        if drop:
            self.lr.deselected = len(drop)
            items[:] = keep
            config.hook.pytest_deselected(items=drop)

    def pytest_collection_finish(self, session) -> None:
        for item in session.items:
            if isinstance(item, self.item_class):
                self.lr.nodeid_keys[item.nodeid] = f"{item.spec.id}/r{item.rep}"

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        # a stop (budget spent, an error that repeats) means: start no further run
        if isinstance(item, self.item_class) and self.lr.stop_requested():
            return True
        return None

    # pytest writes its own progress in logstart / logreport / logfinish: the wrappers take our
    # progress lines off the screen first and keep the display thread out until pytest is done
    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report):
        if not self.s.is_worker and report.when == "call":
            payload = getattr(report, "agentdrift_payload", None)  # session/collect.py puts it there
            if payload is not None:
                self.lr.on_payload(payload, report.nodeid)
        yield from self._quiet()

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_logstart(self, nodeid, location):
        yield from self._quiet()

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_logfinish(self, nodeid, location):
        yield from self._quiet()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session):
        if not self.s.is_worker and self.s.adapter is not None and not self.config.option.collectonly:
            self.lr.start_display(self.config, self.s)
        try:
            yield
        finally:
            if self.lr.display is not None:
                self.lr.display.stop()
                self.lr.display = None

    def _quiet(self):
        display = self.lr.display
        if display is None:
            yield
            return
        with display.lock:
            display.erase()
            yield

    def pytest_unconfigure(self, config) -> None:
        self.lr.close()


__all__ = ["LongRun", "LongRunPlugin", "run_item", "STOP_FILE"]
