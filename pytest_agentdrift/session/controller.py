"""Process roles, registered from pytest_configure: ControllerPlugin in the
controller (or a plain single process), WorkerPlugin in xdist workers.

Side effects (the record, the comparison, the exit status) happen only in
the controller. Results arrive through pytest_runtest_logreport, which the
controller receives for every report, from any worker. Every exit path
ends with one closing line, `agentdrift: exit N — <reason>`, printed last
(after pytest's own summary line) and written into report.md and
decision.json.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_agentdrift.compare.exitpolicy import pytest_reason
from pytest_agentdrift.compare.outcome import Verdict
from pytest_agentdrift.errors import AgentDriftError, PoolRefused
from pytest_agentdrift.run import scratch
from pytest_agentdrift.session.state import ComparisonState, RunCollector, SessionInfo, TaskRunner
from pytest_agentdrift.shapes import Results
from pytest_agentdrift.vocabulary import (
    DECISION_FILE,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_STATUS_KEY,
    EXIT_USAGE,
    REPORT_MD_FILE,
)


def _resolve_agent(config: pytest.Config, runner: TaskRunner) -> None:
    extra: dict = {}
    for found in config.hook.pytest_agentdrift_register_adapters(config=config):
        extra.update(found or {})
    try:
        runner.resolve_adapter(extra)
    except AgentDriftError as exc:
        raise pytest.UsageError(exc.message) from None


def _reserve_write_watch() -> None:
    """Hold this process's inotify instance before any agent runs: an agent of the same user that
    takes every instance cannot leave a later run unobserved (run/watch.py, InotifyReserve)."""
    from pytest_agentdrift.run.watch import reserve_instances

    reserve_instances()


class WorkerPlugin:
    def __init__(self, config: pytest.Config, runner: TaskRunner):
        self.config = config
        self.runner = runner

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.runner.settings.agent_selected:
            _resolve_agent(self.config, self.runner)
            _reserve_write_watch()
            from pytest_agentdrift.session.experiments import prepare_session

            try:
                # the same bundle (and derived B) as the controller's
                prepare_session(self.config, self.runner.info, self.runner)
            except AgentDriftError as exc:
                raise pytest.UsageError(exc.message) from None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        workeroutput: dict[str, object] | None = getattr(self.config, "workeroutput", None)  # set by xdist on a worker
        if workeroutput is not None:
            workeroutput["agentdrift_exitstatus"] = int(exitstatus)


class ControllerPlugin:
    def __init__(
        self,
        config: pytest.Config,
        info: SessionInfo,
        runner: TaskRunner,
        collector: RunCollector,
        comparison: ComparisonState,
    ):
        self.config = config
        self.info = info
        self.runner = runner
        self.collector = collector
        self.comparison = comparison
        self.final_lines: list[str] = []
        self.verdict: Verdict | None = None
        self._exited_early = False
        self._failed_items: Any = None  # session.itemverdicts.FailedItems, once an item failed

    @property
    def settings(self):
        return self.info.settings

    def _exit_now(self, verdict: Verdict, lines: list[str], *, error: bool = False) -> None:
        """Stop before collection (no worker starts); the lines and the closing line print once.

        An operational error goes to stderr, where pytest's own usage errors go.
        """
        import sys

        tw = self.config.get_terminal_writer()
        for line in lines:
            if error:
                sys.stderr.write(line + "\n")
            else:
                tw.line(line, red=line.startswith("BLOCK"))
        self.verdict = verdict
        self._exited_early = True
        pytest.exit(f"agentdrift stopped the session before collection (exit {verdict.code})", returncode=verdict.code)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Pick the agent, refuse bad targets and incomparable baselines, before collection.

        Runs before xdist's own (trylast) sessionstart, so a refusal starts no workers.
        """
        s = self.settings
        if not s.active:
            return
        _resolve_agent(self.config, self.runner)
        if s.agent_selected:
            scratch.sweep()  # in the background: the scratch directories killed sessions left
        if s.agent_selected and not self.config.pluginmanager.has_plugin("dsession"):
            _reserve_write_watch()  # this process runs the agents (no xdist workers)
        try:
            self._prepare_agent()
            from pytest_agentdrift.session.baseline import capture_for_session

            capture_for_session(self.config, self.info, self.runner, self.collector)
            if self.settings.baseline is not None:
                self._check_baseline()
            self._open_record()
        except AgentDriftError as exc:
            self._exit_now(Verdict(EXIT_USAGE, exc.message), [f"ERROR: {exc.message}"], error=True)

    def _prepare_agent(self) -> None:
        """The agent can run, its version, and the bundle, derived B, options and plan it runs with
        (a bundle's model and options stand in for unset ones: `self.settings` changes)."""
        if self.runner.adapter is None:
            return
        self.runner.check_agent_available()
        self.collector.agent_version = self.runner.probe_agent_version()
        from pytest_agentdrift.session.experiments import prepare_session

        prepare_session(self.config, self.info, self.runner, self.comparison)

    def _check_baseline(self) -> None:
        """An incomparable baseline refuses the session (exit 6); a refusal still reports:
        refusal.json, report.md and one failing JUnit case."""
        from pytest_agentdrift.manifest.baseline import refusal_reason
        from pytest_agentdrift.session.baseline import check_baseline
        from pytest_agentdrift.session.refused import report_refusal

        try:
            refusal = check_baseline(self.config, self.info, self.comparison)
        except PoolRefused as exc:
            self._refuse_pool(exc)
            return
        if refusal:
            stamps = self.comparison.stamps
            if stamps is None:
                raise AssertionError("a baseline refused without the stamps it was compared on")
            verdict = Verdict(EXIT_REFUSED, refusal_reason(stamps.blocks))
            self._exit_now(verdict, refusal + report_refusal(self.config, self.settings, stamps, verdict, refusal))

    def _refuse_pool(self, exc: PoolRefused) -> None:
        """A directory of records none of which can be pooled: refused (exit 6), reported as a refusal is."""
        from pytest_agentdrift.compare.pool import refusal_lines
        from pytest_agentdrift.manifest.identity import StampComparison
        from pytest_agentdrift.session.refused import report_refusal

        stamps = StampComparison(comparable=False, change_class="invalid_comparison", explanation=exc.problem)
        lines = refusal_lines(exc)
        verdict = Verdict(EXIT_REFUSED, f"refused: {exc.message}")
        self._exit_now(verdict, lines + report_refusal(self.config, self.settings, stamps, verdict, lines))

    def _open_record(self) -> None:
        """--agent-resume takes the record it continues; --agent-record is refused now if it holds a run,
        and created when the first run reports, so a session that fails at collection writes nothing."""
        if self.info.longrun.resume is not None:
            self._open_resumed()
        elif self.settings.record is not None:
            from pytest_agentdrift.record.store import RunRecorder, check_record_target

            check_record_target(self.settings.record)
            self.collector.recorder = RunRecorder(self.settings.record)

    def _open_resumed(self) -> None:
        """The runtime and settings must be the recorded ones (else exit 6); then take the record
        and keep its finished runs (record/resume.py)."""
        from pytest_agentdrift.manifest.baseline import resume_identity_blocks
        from pytest_agentdrift.record.results import utc_now
        from pytest_agentdrift.record.resume import continue_record, resume_refusal

        lr = self.info.longrun
        resume = lr.resume
        if resume is None:
            raise AssertionError("_open_resumed without a record to resume")  # _open_record asks first
        identity = resume_identity_blocks(resume.manifest, self.info.manifest)
        shard = lr.shard.to_dict() if lr.shard else None
        refusal = resume_refusal(resume, identity, self.collector.settings_record(), shard)
        if refusal:
            why = f"refused to resume {self.settings.record}: the runtime or settings differ from the record"
            self._exit_now(Verdict(EXIT_REFUSED, why), refusal)
        self.collector.recorder = continue_record(resume, at=utc_now(), argv=self.config.invocation_params.args)
        for payload in resume.kept.values():
            self.collector.keep(payload["task_id"], payload["rep"], payload["meta"], payload["result"])

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        import sys

        if "pytest_agentdrift.session.collect" not in sys.modules:
            return  # no task directory was collected: nothing to expect (and nothing heavy imported)
        from pytest_agentdrift.session.collect import TaskItem

        self.collector.expected_nodeids.update(i.nodeid for i in session.items if isinstance(i, TaskItem))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        payload = getattr(report, "agentdrift_payload", None)
        if payload is not None:
            self.collector.add_payload(payload, report.nodeid)
            if report.failed and self.settings.gate:
                from pytest_agentdrift.session.itemverdicts import FailedItems

                self._failed_items = self._failed_items or FailedItems()
                self._failed_items.add(self.config, report, payload["task_id"])

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        if not self._exited_early:
            self.collector.interrupted = excinfo.typename

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        c, s = self.collector, self.settings
        if not s.active and not c.expected_nodeids:
            return
        if self.config.option.collectonly or (self.runner.adapter is None and not c.received_nodeids):
            # nothing ran, by request (--collect-only) or for want of an agent: nothing to record or compare
            code = int(exitstatus)
            why = "collected; no agent run" if code == EXIT_OK else pytest_reason(code, session.testsfailed)
            self.verdict = Verdict(code, why)
            return
        if session.shouldstop:
            c.interrupted = c.interrupted or f"stopped early: {session.shouldstop}"
        results = self._results()
        error = self._compare(session, results) if s.baseline is not None else None
        verdict, lines = self._write_record(results, self._decide(session, int(exitstatus), results, error))
        from pytest_agentdrift.record.report import summary_lines

        closing = self.info.longrun.final_lines(results, s.record)
        self.final_lines = [*summary_lines(results), *self.comparison.lines, *lines, *closing]
        self.verdict = verdict
        session.exitstatus = verdict.code

    def _results(self) -> Results:
        """results.json: the runs, the long-run facts, the runtime id, what hooks add."""
        from pytest_agentdrift.manifest.sessionfacts import finalized

        results = self.collector.build_results()
        self.info.longrun.complete_results(results, self.collector)  # shard, resume, stop and budget facts
        confirm = self.config.pluginmanager.get_plugin("agentdrift-confirm")
        if confirm is not None:  # the plan the gate reads the confirming runs with
            results["confirm"] = confirm.plan_section()
        self.info.manifest = finalized(self.info.manifest, results)
        self.config.hook.pytest_agentdrift_modify_report(config=self.config, results=results)
        return results

    def _compare(self, session: pytest.Session, results: Results) -> str | None:
        """The comparison with the baseline, and pytest's outcomes made to agree with its gate;
        the comparison's error, if it failed."""
        if self.comparison.baseline_results is None:
            return None
        from pytest_agentdrift.session.baseline import compare_with_baseline

        error = None
        try:
            compare_with_baseline(self.config, self.info, self.comparison, results, collector=self.collector)
        except AgentDriftError as exc:
            error = exc.message
        self._agree_with_gate(session)
        return error

    def _write_record(self, results: Results, verdict: Verdict) -> tuple[Verdict, list[str]]:
        """The record, with the closing line in decision.json; a failed write is the verdict (exit 4)."""
        c, record = self.collector, self.settings.record
        if c.record_error:
            return Verdict(EXIT_USAGE, f"recording failed: {c.record_error}"), []
        if c.recorder is None:
            return verdict, []
        if not c.recorder.started:
            return verdict, [f"nothing recorded in {record}: no task ran"]
        decision = self.comparison.files.get(DECISION_FILE)
        if isinstance(decision, dict):
            decision[EXIT_STATUS_KEY] = verdict.to_dict()
        try:
            c.write_record(results, self.comparison, verdict.line)
        except (AgentDriftError, OSError) as exc:
            return Verdict(EXIT_USAGE, f"recording failed: {getattr(exc, 'message', exc)}"), []
        state = "recorded" if results["complete"] else "recorded INCOMPLETE"
        return verdict, [f"{state}: {record} (read {record / REPORT_MD_FILE})"]

    def _agree_with_gate(self, session: pytest.Session) -> None:
        """Failures the regression gate does not hold against the candidate become xfails (itemverdicts)."""
        comparison = self.comparison.comparison
        if self._failed_items is None or comparison is None:
            return
        from pytest_agentdrift.compare.outcome import gate_item_outcomes

        reasons = gate_item_outcomes(comparison, self.settings.gate)
        if reasons:
            self._failed_items.agree(session, reasons)

    def _decide(self, session: pytest.Session, exitstatus: int, results: Results, error: str | None) -> Verdict:
        """The exit policy (compare/exitpolicy.py) over the facts this session ended with."""
        from pytest_agentdrift.compare.exitpolicy import SessionEnd, exit_verdict

        s, c, lr = self.settings, self.collector, self.info.longrun
        finishing = "resume" if lr.resume is not None else "shard" if lr.shard is not None else None
        return exit_verdict(
            SessionEnd(
                pytest_status=exitstatus,
                tests_failed=session.testsfailed,
                results=results,
                fail_on=s.fail_on,
                gate=s.gate,
                null=s.null,
                record=s.record,
                interrupted=c.interrupted,
                ran_any=bool(c.received_nodeids),
                comparison_error=error,
                comparison_verdict=self.comparison.verdict,
                finishing_only=finishing,
                max_infra_loss=s.max_infra_loss,
            )
        )

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config: pytest.Config) -> None:
        if not self.final_lines or config.option.verbose < -1:
            return
        terminalreporter.write_sep("=", "agentdrift")
        for line in self.final_lines:
            terminalreporter.write_line(line)

    @pytest.hookimpl(tryfirst=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """The closing line, last: after pytest's own summary, whatever ended the session."""
        tr = config.pluginmanager.get_plugin("terminalreporter")
        if self.verdict is None or tr is None:
            return
        if self._exited_early and getattr(tr, "_keyboardinterrupt_memo", None) is not None:
            # our own pytest.exit already explained itself: no "!!! _pytest.outcomes.Exit" banner
            tr._keyboardinterrupt_memo = None
        tr.write_line(self.verdict.line, red=self.verdict.code != EXIT_OK, green=self.verdict.code == EXIT_OK)
