"""The session's jobs, as four objects (plugin.py builds them and hands them on).

* `SessionInfo`: what the controller decides once (settings, run id, start
  time, the captured manifest) and workers receive as a record/longrun.WorkerInput;
  the process's LongRun and bundle state.
* `TaskRunner` (worker side, and a plain single process): picks the agent,
  runs one item (run -> grade -> score) and returns the payload that rides
  to the controller on the test report (record/payload.py).
* `RunCollector` (controller side): gathers payloads, builds results.json
  and writes the record (record/results.py).
* `ComparisonState` (controller side): the baseline, the manifest
  comparison, the comparison's files and lines, and the session's verdict.

Nothing here imports pytest.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agentdrift.errors import AgentDriftError, RecordError, TaskError
from pytest_agentdrift.options import Settings
from pytest_agentdrift.record.results import new_run_id, utc_now
from pytest_agentdrift.record.store import raw_path
from pytest_agentdrift.run import scratch
from pytest_agentdrift.session.experiments import ExperimentState
from pytest_agentdrift.shapes import Comparison, Results, RunRecord, SettingsRecord, TaskMeta, WorkerRecord
from pytest_agentdrift.vocabulary import NOT_APPLICABLE, TASK_TOML_FILE, UNOBSERVED

# Every pytest run of the environment creates these objects: the modules that
# run agents, grade and record are imported only when a session uses them.
if TYPE_CHECKING:
    from pytest_agentdrift.agents.base import AgentAdapter
    from pytest_agentdrift.compare.outcome import Verdict
    from pytest_agentdrift.grade.grader import Grader
    from pytest_agentdrift.manifest.identity import StampComparison
    from pytest_agentdrift.record.longrun import LongRun, WorkerInput
    from pytest_agentdrift.record.payload import SentRun
    from pytest_agentdrift.record.store import RunRecorder
    from pytest_agentdrift.run.sandbox import Isolation
    from pytest_agentdrift.tasks.taskspec import TaskSpec


@dataclass
class SessionInfo:
    """Decided once on the controller; a worker gets the same values through workerinput."""

    settings: Settings
    run_id: str = field(default_factory=new_run_id)
    started_at: str = field(default_factory=utc_now)
    manifest: dict[str, Any] | None = None
    longrun: LongRun = None  # type: ignore[assignment]  # set right after, by plugin.py (it needs the info)
    experiment: ExperimentState = field(default_factory=ExperimentState)  # bundle and plan (session/experiments.py)

    def worker_input(self) -> WorkerInput:
        """What every xdist worker is handed: the run's id, start and manifest, and the long-run state."""
        from pytest_agentdrift.record.longrun import WorkerInput

        return WorkerInput(self.run_id, self.started_at, self.manifest, **self.longrun.worker_fields())

    def take_worker_input(self, handed: WorkerInput) -> None:
        self.run_id = handed.run_id or self.run_id
        self.started_at = handed.started_at or self.started_at
        self.manifest = handed.manifest


class TaskRunner:
    """Runs items: the agent, the sandbox, the grader. One per process."""

    def __init__(self, info: SessionInfo):
        self.info = info
        self.adapter: AgentAdapter | None = None
        self.specs: dict[str, TaskSpec] = {}
        self._digests: dict[str, str] = {}
        self._host_secrets: list[str] | None = None  # read once, on the first run
        self._isolation: Isolation | None = None
        self._grader: Grader | None = None
        self._base: Path | None = None
        self._mounts: list[tuple[str, str]] | None = None
        self.grading_cache: Path | None = None  # grade/fixturecache.py's directory; None keeps results in memory
        self.overlay: Any = None  # run.overlay.Overlay of --agent-bundle (session/experiments.py sets it)
        self.cli_probe: dict[str, Any] | None = None  # the agent CLI's version display (probe_agent_version)

    @property
    def settings(self) -> Settings:
        return self.info.settings

    # -- setup ------------------------------------------------------------------------
    def resolve_adapter(self, extra: dict[str, type[AgentAdapter]] | None = None) -> AgentAdapter | None:
        s = self.settings
        if self.adapter is None and s.agent_selected:
            from pytest_agentdrift.agents.base import CommandAdapter, get_adapter

            if s.cmd:
                self.adapter = CommandAdapter(s.cmd, s.product_paths, s.background_hosts)
            elif s.agent:
                self.adapter = get_adapter(s.agent, extra)
        return self.adapter

    def check_agent_available(self) -> None:
        """A missing binary, or one the sandbox would hide, is one usage error before any task runs."""
        from pytest_agentdrift.run import agentview

        agentview.check_agent_present(self.adapter)
        agentview.check_agent_env(self.settings.env, os.environ)
        agentview.check_background_hosts(self.adapter, self.settings.allow_hosts)
        if self.adapter is not None and self.isolation.mode == "bwrap":
            agentview.check_agent_visible(self.adapter, self.hidden_paths(), os.environ)

    @property
    def probe_home(self) -> Path:
        """HOME and XDG dirs of the agent CLI's version displays, in the session's scratch: a
        display may write where it keeps its state (Copilot unpacks 235 MB into its cache dir on
        first use), never into the user's home; shared by this probe and manifest capture, so the
        unpacking happens once a session."""
        home = self.base / "probe-home"
        home.mkdir(exist_ok=True)
        return home

    def probe_agent_version(self) -> str:
        """The first line of the agent CLI's version display; the whole probe is kept for manifest
        capture (cli_probe), so the display runs once a session."""
        from pytest_agentdrift.manifest.probes import probe_cli_version

        argv = self.adapter.version_argv() if self.adapter else None
        if not argv:
            return UNOBSERVED
        self.cli_probe = probe_cli_version(argv, os.environ, Path.cwd(), self.probe_home)
        version = self.cli_probe["version"]
        return version.splitlines()[0] if version not in (UNOBSERVED, NOT_APPLICABLE) else UNOBSERVED

    def register_spec(self, spec: TaskSpec) -> None:
        """Collection: task ids are unique across the session."""
        other = self.specs.get(spec.id)
        if other is not None and other.path != spec.path:
            raise TaskError(
                f"task id {spec.id!r} is also used by {other.path}; ids must be unique", spec.path / TASK_TOML_FILE
            )
        self.specs[spec.id] = spec

    @property
    def isolation(self) -> Isolation:
        if self._isolation is None:
            from pytest_agentdrift.run import sandbox

            self._isolation = sandbox.detect(self.settings.isolation)
        return self._isolation

    @property
    def isolation_if_known(self) -> Isolation | None:
        return self._isolation

    @property
    def base(self) -> Path:
        if self._base is None:
            self._base = scratch.make(keep=self.settings.keep_workdirs)
        return self._base

    @property
    def grader(self) -> Grader:
        if self._grader is None:
            from pytest_agentdrift.grade.grader import Grader

            self._grader = Grader(
                self.isolation,
                self.base / "grading",
                hide=self.base / "runs",
                hidden=self.hidden_paths(),
                limits=dict(self.settings.grade_limits) or None,  # graded code's own, never the agent's
                cache_dir=self.grading_cache,
            )
            self._grader.note_tasks(self.specs.values())  # before any run: grading refuses a task changed since
        return self._grader

    def sandbox_mounts(self) -> list[tuple[str, str]]:
        """(path, why) the agent may read beyond the system and the harness runtime: what the
        adapter needs (an install prefix), what the command and --agent-config/-instructions/-mount name."""
        if self._mounts is None:
            from pytest_agentdrift.run import agentpaths, harnessruntime

            adds = agentpaths.agent_paths(self.adapter, os.environ, self.hidden_paths()) if self.adapter else []
            self._mounts = harnessruntime.beyond_runtime([*adds, *self.option_mounts()])
        return self._mounts

    def option_mounts(self) -> list[tuple[str, str]]:
        from pytest_agentdrift.run.agentview import option_mounts

        return option_mounts(self.settings)

    def host_secrets(self) -> list[str]:
        if self._host_secrets is None:
            from pytest_agentdrift.record.redact import host_file_secrets

            self._host_secrets = host_file_secrets(Path.home(), getattr(self.adapter, "credential_files", ()))
        return self._host_secrets

    def hidden_paths(self) -> tuple[Path, ...]:
        from pytest_agentdrift.run.agentview import hidden_paths

        return hidden_paths(self.settings, [spec.path for spec in self.specs.values()], Path.cwd())

    def close(self) -> None:
        from pytest_agentdrift.tasks.fdtree import drain_removals, rmtree

        drain_removals()  # the runs' and grading's scratch trees handed to the background remover
        if self._base is not None and not self.settings.keep_workdirs:
            rmtree(self._base)  # iterative: a 5,000-deep chain an agent left is no RecursionError

    def task_digest(self, spec: TaskSpec) -> str:
        key = str(spec.path)
        if key not in self._digests:
            self._digests[key] = spec.given_digest()
        return self._digests[key]

    # -- one run --------------------------------------------------------------------------
    def run_item(self, spec: TaskSpec, rep: int) -> dict[str, Any]:
        """One item: the run, retried while it is lost to infrastructure (record/longrun.py)."""
        timeout = self.settings.timeout or spec.timeout_s
        return self.info.longrun.run_item(lambda: self.run_task(spec, rep), spec.id, rep, timeout)

    def run_task(self, spec: TaskSpec, rep: int) -> dict[str, Any]:
        """Run the agent once on a fresh copy, grade and score it; returns the payload."""
        from pytest_agentdrift.grade.attempt import attempt
        from pytest_agentdrift.record import payload as rp

        settings = self.run_settings()
        adapter = self.adapter
        if adapter is None:
            raise TaskError("no agent to run: --agent or --agent-cmd names none", spec.path)
        # what goes wrong while the harness handles this run makes it `undecided` (grade/attempt.py), nothing more
        run, result = attempt(
            spec,
            rep,
            adapter,
            settings,
            self.grader,
            self.base / "runs",
            keep_workdirs=self.settings.keep_workdirs,
        )
        result["raw"] = raw_path(spec.id, rep)
        if run is not None:
            self.info.longrun.annotate(result, run, self.adapter)  # tokens and cost (run/budget.py)
        if run is not None and "_raw_files" not in result:
            from pytest_agentdrift.compare.behaviour import trace_of
            from pytest_agentdrift.run.overlay import patch_note

            # what the agent did, step by step (its own account: behaviour rows only, never check evidence)
            result["trace"] = trace_of(run.adapter_output.events, run.agent_events)
            result["_raw_files"] = rp.raw_files(run, result, patch_note(getattr(run, "overlay", None)))
        from pytest_agentdrift.grade.evaluator import task_grading_id

        meta = rp.task_meta(spec, self.task_digest(spec), task_grading_id(spec))
        # The one place where run data leaves for the record: keep the session's secrets out.
        given = set(self.settings.env)  # --agent-env: values the user gives the agent, never recorded
        found = rp.session_secrets(os.environ, given, self.host_secrets(), getattr(settings.overlay, "secrets", ()))
        return rp.run_payload(spec.id, rep, meta, result, found)

    def run_settings(self):
        """What one run is given (run/runsettings.RunSettings): isolation, limits, what it sees and hides."""
        from pytest_agentdrift.run.runsettings import DEFAULT_ENV_ALLOWLIST, RunSettings

        st = self.settings
        return RunSettings(
            isolation=self.isolation,
            timeout_s=st.timeout,
            env_allowlist=tuple(sorted(set(DEFAULT_ENV_ALLOWLIST) | set(st.env))),
            agent_options=st.agent_options,
            keep_workdirs=st.keep_workdirs,
            allow_hosts=st.allow_hosts,
            provider_patience_s=st.provider_patience,
            mounts=tuple(self.option_mounts()),
            hidden=self.hidden_paths(),
            limits=dict(st.limits) or None,
            harness_dir=self.base / "harness",
            monitor=self.info.longrun.monitor(),  # budgets, progress
            overspent=self.info.longrun.overspent(self.adapter),
            overlay=self.overlay,
        )


class RunCollector:
    """Controller side: payloads in, results.json and the record out (record/results.py)."""

    def __init__(self, info: SessionInfo, runner: TaskRunner):
        self.info = info
        self.runner = runner  # the controller's own: its isolation and the specs it collected
        self.agent_version: str = UNOBSERVED
        self.recorder: RunRecorder | None = None
        self.expected_nodeids: set[str] = set()
        self.received_nodeids: set[str] = set()
        self.results: dict[str, dict[int, RunRecord]] = {}
        self.task_meta: dict[str, TaskMeta] = {}
        self.workers: dict[str, WorkerRecord] = {}
        self.interrupted: str | None = None
        self.record_error: str | None = None
        self.instruction_bundle: dict[str, Any] | None = None
        self.source_manifest: dict[str, Any] | None = None

    @property
    def settings(self) -> Settings:
        return self.info.settings

    def add_payload(self, payload: dict[str, Any], nodeid: str) -> None:
        from pytest_agentdrift.record.results import write_run
        from pytest_agentdrift.safetext import json_safe

        payload = json_safe(payload)  # whatever a worker sent, the record writer can encode it
        self.received_nodeids.add(nodeid)
        sent: SentRun = copy.copy(payload["result"])
        raw, tree = sent.pop("_raw_files", {}), sent.pop("_final_tree", None)
        result: RunRecord = sent  # what remains is the run's entry in results.json
        self.keep(payload["task_id"], payload["rep"], payload["meta"], result)
        if self.recorder is None:
            return
        try:
            if not self.recorder.started:
                self.start_record()  # session state and manifest first: resumable from here on
            write_run(self.recorder, payload, result, raw, tree)
        except (AgentDriftError, OSError) as exc:
            # reported at the end of the session (exit 4); the runs go on
            self.record_error = getattr(exc, "message", str(exc))
            self.recorder = None

    def keep(self, task_id: str, rep: int, meta: TaskMeta, result: RunRecord) -> None:
        self.task_meta[task_id] = meta
        self.results.setdefault(task_id, {})[rep] = result

    def start_record(self) -> None:
        """Create the record with the session's state and manifest, so that even a session killed
        from now on can be resumed."""
        from pytest_agentdrift.record.results import write_session_files

        info, recorder = self.info, self._recorder()
        state = info.longrun.state_document(info.run_id, info.started_at, self.expected_nodeids, self.settings_record())
        recorder.start(json.dumps(state, indent=2, sort_keys=True))
        write_session_files(recorder, info.manifest, self.instruction_bundle, self.source_manifest)

    def _recorder(self) -> RunRecorder:
        if self.recorder is None:
            raise RecordError("the session records nothing (--agent-record), or its record failed")
        return self.recorder

    def settings_record(self) -> SettingsRecord:
        from pytest_agentdrift.record.results import settings_record

        return settings_record(self.settings)

    def build_results(self) -> Results:
        from pytest_agentdrift.record import results as rr

        info, runner = self.info, self.runner
        specs = list(runner.specs.values())
        reasons = rr.incomplete_reasons(
            self.expected_nodeids, self.received_nodeids, self.workers, self.interrupted, bool(self.results)
        )
        return rr.results_document(
            run_id=info.run_id,
            started_at=info.started_at,
            reasons=reasons,
            agent=rr.agent_record(runner.adapter, self.settings.agent_options, self.agent_version),
            isolation=rr.isolation_record(runner.isolation, self.settings.isolation),
            settings=self.settings_record(),
            identity=(
                (info.manifest or {}).get("runtime_id"),
                rr.identity_field(info.manifest, "task_set_id", rr.task_set_id, specs),
                rr.identity_field(info.manifest, "evaluator_id", rr.evaluator_id, specs),
            ),
            runs=self.results,
            task_meta=self.task_meta,
            workers=self.workers,
        )

    def write_record(self, results: Results, comparison: ComparisonState, closing: str) -> None:
        from pytest_agentdrift.record.results import write_record

        write_record(
            self._recorder(),
            results,
            session_files=(self.info.manifest, self.instruction_bundle, self.source_manifest),
            comparison_files=comparison.files,
            comparison_lines=comparison.lines,
            closing=closing,
        )


@dataclass
class ComparisonState:
    """The baseline and everything the comparison with it produced (controller side)."""

    baseline_results: dict[str, Any] | None = None
    baseline_manifest: dict[str, Any] | None = None
    stamps: StampComparison | None = None
    accepted: dict[str, Any] = field(default_factory=dict)  # the resolved accepted-unobserved list, groups expanded
    lines: list[str] = field(default_factory=list)
    files: dict[str, Any] = field(default_factory=dict)
    comparison: Comparison | None = None  # comparison.json, as files holds it
    verdict: Verdict | None = None  # the comparison's part of the exit status
