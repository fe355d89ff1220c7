"""The session's three jobs, as three objects (plugin.py builds them and hands them on).

* `SessionInfo`: what the controller decides once (settings, run id, start
  time, the captured manifest) and workers receive through workerinput.
* `TaskRunner` (worker side, and a plain single process): picks the agent,
  runs one item (run -> grade -> score) and returns the payload that rides
  to the controller on the test report.
* `RunCollector` (controller side): gathers payloads, builds results.json
  and writes the record.
* `ComparisonState` (controller side): the baseline, the manifest
  comparison, the comparison's files and lines, and the session's verdict.

Nothing here imports pytest.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agentdrift import EVALUATOR_VERSION, __version__
from pytest_agentdrift.errors import AgentDriftError, TaskError
from pytest_agentdrift.options import Settings
from pytest_agentdrift.vocabulary import (
    EXIT_STATUS_KEY,
    MANIFEST_FILE,
    NOT_APPLICABLE,
    SOURCE_MANIFEST_FILE,
    UNOBSERVED,
)

# Every pytest run of the environment creates these objects: the modules that
# run agents, grade and record are imported only when a session uses them.
if TYPE_CHECKING:
    from pytest_agentdrift.agents.base import AgentAdapter
    from pytest_agentdrift.compare.outcome import Verdict
    from pytest_agentdrift.grade.checks import Grader
    from pytest_agentdrift.manifest.identity import StampComparison
    from pytest_agentdrift.record.store import RunRecorder
    from pytest_agentdrift.run.sandbox import Isolation
    from pytest_agentdrift.tasks.load import TaskSpec


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_run_id() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(4)


def _overlay_note(run: Any) -> str:
    from pytest_agentdrift.run.overlay import patch_note

    return patch_note(getattr(run, "overlay", None))


def evaluator_id(specs: list[TaskSpec]) -> str:
    from pytest_agentdrift.canonical import digest
    from pytest_agentdrift.grade.evaluator import evaluator_components

    # Grading code by logical component (see evaluator.py): moving a file keeps the id.
    return digest(
        {
            "evaluator_version": EVALUATOR_VERSION,
            "code": evaluator_components(),
            "checks": {s.id: [c.to_dict() for c in s.checks] for s in sorted(specs, key=lambda s: s.id)},
            # the grading part of each task: checks, hidden tests, golden files, solutions (tasks/load.split_task)
            "tasks": {s.id: s.grading_digest() for s in sorted(specs, key=lambda s: s.id)},
        }
    )


def _task_grading_id(spec: TaskSpec) -> str:
    from pytest_agentdrift.grade.evaluator import task_grading_id

    return task_grading_id(spec)


def task_set_id(specs: list[TaskSpec]) -> str:
    from pytest_agentdrift.canonical import digest

    # what the agent is given only: a fixed check changes evaluator_id, never the task set
    return digest({s.id: s.given_digest() for s in sorted(specs, key=lambda s: s.id)})


@dataclass
class SessionInfo:
    """Decided once on the controller; a worker gets the same values through workerinput."""

    settings: Settings
    run_id: str = field(default_factory=new_run_id)
    started_at: str = field(default_factory=utc_now)
    manifest: dict[str, Any] | None = None
    longrun: Any = None  # session/longrun.LongRun when the session is active

    def to_workerinput(self) -> dict[str, Any]:
        return {
            "agentdrift_run_id": self.run_id,
            "agentdrift_started_at": self.started_at,
            "agentdrift_manifest": self.manifest,
        }

    def update_from_workerinput(self, workerinput: dict[str, Any]) -> None:
        self.run_id = workerinput.get("agentdrift_run_id", self.run_id)
        self.started_at = workerinput.get("agentdrift_started_at", self.started_at)
        self.manifest = workerinput.get("agentdrift_manifest")


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
        if self.adapter is None and self.settings.agent_selected:
            from pytest_agentdrift.agents.base import CommandAdapter, get_adapter

            s = self.settings
            self.adapter = CommandAdapter(s.cmd) if s.cmd else get_adapter(s.agent, extra)
        return self.adapter

    def check_agent_available(self) -> None:
        """A missing binary is one usage error before any task runs."""
        adapter = self.adapter
        exe = adapter.executable() if adapter else None
        if exe and not shutil.which(exe) and not Path(exe).is_file():
            raise AgentDriftError(f"agent executable {exe!r} was not found on PATH (agent {adapter.name!r})")
        if adapter is not None and self.isolation.mode == "bwrap":
            self.check_agent_visible(adapter)

    def check_agent_visible(self, adapter: AgentAdapter) -> None:
        """What the agent needs and the sandbox would hide stops the session before its first task:
        a shim no manager resolves, a module beside the agent's script in a hidden directory."""
        from pytest_agentdrift.run import mountplan

        argv = adapter.argv_template()
        prog = mountplan.resolve_program(argv[0], mountplan.env_path(os.environ)) if "{" not in argv[0] else None
        if prog is not None and prog.problem:
            raise AgentDriftError(
                f"the agent's program {prog.found} is a shim of {prog.manager}, which the sandbox hides, and "
                f"{prog.problem}; name the real program in --agent-cmd"
            )
        missing = mountplan.hidden_imports(mountplan.named_paths(argv[1:]), self.hidden_paths())
        if missing:
            raise AgentDriftError(
                f"the agent imports {missing[0]}, which the sandbox hides (its directory is, or holds, the "
                f"project, a home or the records); show it with --agent-mount {missing[0]}, "
                "or keep the agent in a directory of its own"
            )

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
        from pytest_agentdrift.manifest.capture import probe_cli_version

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
                f"task id {spec.id!r} is also used by {other.path}; ids must be unique", spec.path / "task.toml"
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
            self._base = Path(tempfile.mkdtemp(prefix="agentdrift-"))
        return self._base

    @property
    def grader(self) -> Grader:
        if self._grader is None:
            from pytest_agentdrift.grade.checks import Grader

            self._grader = Grader(
                self.isolation,
                self.base / "grading",
                hide=self.base / "runs",
                hidden=self.hidden_paths(),
                limits=dict(self.settings.limits) or None,  # the run's limits bind graded code too
                cache_dir=self.grading_cache,
            )
        return self._grader

    def sandbox_mounts(self) -> list[tuple[str, str]]:
        """(path, why) the agent may read beyond the system and the harness runtime: what the
        adapter needs (an install prefix), what the command and --agent-config/-instructions/-mount name."""
        if self._mounts is None:
            from pytest_agentdrift.run import mountplan

            adds = mountplan.agent_paths(self.adapter, os.environ, self.hidden_paths()) if self.adapter else []
            self._mounts = mountplan.beyond_runtime([*adds, *self.option_mounts()])
        return self._mounts

    def option_mounts(self) -> list[tuple[str, str]]:
        return [
            *((os.path.abspath(p), "--agent-config") for p in self.settings.config_files),
            *((os.path.abspath(p), "--agent-instructions") for p in self.settings.instruction_files),
            *((p, "--agent-mount") for p in self.settings.mounts),
        ]

    def host_secrets(self) -> list[str]:
        if self._host_secrets is None:
            from pytest_agentdrift.record.redact import host_file_secrets

            self._host_secrets = host_file_secrets(Path.home(), getattr(self.adapter, "credential_files", ()))
        return self._host_secrets

    def hidden_paths(self) -> tuple[Path, ...]:
        """Never visible in a sandbox, even inside something it may read."""
        paths = [p for p in (self.settings.record, self.settings.baseline) if p is not None]
        paths += [spec.path for spec in self.specs.values()]
        paths.append(Path.cwd())  # the project, should it lie inside something a sandbox shows (/usr/src/...)
        return tuple(Path(p).absolute() for p in paths)

    def close(self) -> None:
        if self._base is not None and not self.settings.keep_workdirs:
            from pytest_agentdrift.tasks.fdtree import rmtree

            rmtree(self._base)  # iterative: a 5,000-deep chain an agent left is no RecursionError

    def task_digest(self, spec: TaskSpec) -> str:
        key = str(spec.path)
        if key not in self._digests:
            self._digests[key] = spec.given_digest()
        return self._digests[key]

    # -- one run --------------------------------------------------------------------------
    def run_item(self, spec: TaskSpec, rep: int) -> dict[str, Any]:
        """One item: the run, retried while it is lost to infrastructure when long runs are on."""
        longrun = self.info.longrun
        return self.run_task(spec, rep) if longrun is None else longrun.run_item(self, spec, rep)

    def run_task(self, spec: TaskSpec, rep: int) -> dict[str, Any]:
        """Run the agent once on a fresh copy, grade and score it; returns the payload."""
        from pytest_agentdrift.grade.attempt import attempt
        from pytest_agentdrift.record.redact import scrub, secret_values
        from pytest_agentdrift.run.agentio import dump_jsonl
        from pytest_agentdrift.run.runner import DEFAULT_ENV_ALLOWLIST, RunSettings
        from pytest_agentdrift.safetext import json_safe

        settings = RunSettings(
            isolation=self.isolation,
            timeout_s=self.settings.timeout,
            env_allowlist=tuple(sorted(set(DEFAULT_ENV_ALLOWLIST) | set(self.settings.env))),
            agent_options=self.settings.agent_options,
            keep_workdirs=self.settings.keep_workdirs,
            allow_hosts=self.settings.allow_hosts,
            mounts=tuple(self.option_mounts()),
            hidden=self.hidden_paths(),
            limits=dict(self.settings.limits) or None,
            harness_dir=self.base / "harness",
            monitor=self.info.longrun.monitor(spec, rep) if self.info.longrun else None,  # budgets, progress
            overlay=self.overlay,
        )
        # Whatever goes wrong while handling this one run is this run's `error`, with the
        # reason (grade/attempt.py); the session, the other repetitions and tasks go on.
        run, result = attempt(
            spec,
            rep,
            self.adapter,
            settings,
            self.grader,
            self.base / "runs",
            keep_workdirs=self.settings.keep_workdirs,
        )
        raw_dir = f"raw/{spec.id}/r{rep}"
        result["raw"] = raw_dir
        if self.info.longrun is not None and run is not None:
            self.info.longrun.annotate(result, run, self.adapter)  # tokens and cost (run/budget.py)
        if run is not None and "_raw_files" not in result:
            from pytest_agentdrift.compare.behaviour import trace_of

            # what the agent did, step by step (its own account: behaviour rows only, never check evidence)
            result["trace"] = trace_of(run.adapter_output.events, run.agent_events)
            result["_raw_files"] = {
                "stdout.txt": run.stdout,
                "stderr.txt": run.stderr,
                "events.jsonl": dump_jsonl(run.events),
                "diff.patch": _overlay_note(run) + run.patch,
                "report.json": json.dumps(json_safe(run.report), indent=2, sort_keys=True) + "\n"
                if run.report
                else "null\n",
                "checks.json": json.dumps(json_safe(result["checks"]), indent=2, sort_keys=True) + "\n",
                "argv.json": json.dumps(json_safe(run.argv), indent=2) + "\n",
            }
        meta = {
            "title": spec.title,
            "suite": spec.suite,
            "behavior": spec.behavior,
            "task_digest": self.task_digest(spec),
            "grading_id": _task_grading_id(spec),
            "default_checks": spec.default_checks,
        }
        tree = result.pop("_final_tree", None)
        payload = json_safe({"task_id": spec.id, "rep": rep, "meta": meta, "result": result})
        # The one place where run data leaves for the record: keep the session's secrets out.
        secrets_ = secret_values(dict(os.environ), set(settings.env_allowlist) | set(self.adapter.env_allowlist))
        secrets_ += self.host_secrets()  # what the host's credential files hold (readable outside bwrap)
        # secrets written into a bundle's settings or MCP files travel with it into the work tree
        secrets_ = sorted({*secrets_, *getattr(settings.overlay, "secrets", ())}, key=len, reverse=True)
        if tree is not None:  # the final tree's bytes: secrets replaced in the bytes, before encoding
            payload["result"]["_final_tree"] = tree.to_payload(secrets_)
        return json.loads(scrub(json.dumps(payload, allow_nan=False), [json.dumps(v)[1:-1] for v in secrets_]))


class SessionView:
    """The session's split objects (session/state.py) under the names long runs read and set:
    the run id, start and manifest from SessionInfo, the agent and the runs from TaskRunner, the
    record and the reported runs from RunCollector (controller side; None on a worker)."""

    _INFO = frozenset({"run_id", "started_at", "manifest", "settings", "longrun"})
    _RUNNER = frozenset({"adapter", "run_task", "specs"})

    def __init__(self, info, runner, collector=None):
        object.__setattr__(self, "info", info)
        object.__setattr__(self, "runner", runner)
        object.__setattr__(self, "collector", collector)

    @property
    def is_worker(self) -> bool:
        return self.collector is None

    def _owner(self, name: str):
        if name in self._INFO:
            return self.info
        if name in self._RUNNER or self.collector is None:
            return self.runner
        return self.collector

    def __getattr__(self, name: str):
        return getattr(self._owner(name), name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self._owner(name), name, value)


class RunCollector:
    """Controller side: payloads in, results.json and the record out."""

    def __init__(self, info: SessionInfo, runner: TaskRunner):
        self.info = info
        self.runner = runner  # the controller's own: its isolation and the specs it collected
        self.agent_version: str = UNOBSERVED
        self.recorder: RunRecorder | None = None
        self.expected_nodeids: set[str] = set()
        self.received_nodeids: set[str] = set()
        self.results: dict[str, dict[int, Any]] = {}
        self.task_meta: dict[str, dict[str, Any]] = {}
        self.workers: dict[str, dict[str, Any]] = {}
        self.interrupted: str | None = None
        self.record_error: str | None = None
        self.instruction_bundle: dict[str, Any] | None = None
        self.source_manifest: dict[str, Any] | None = None

    @property
    def settings(self) -> Settings:
        return self.info.settings

    def add_payload(self, payload: dict[str, Any], nodeid: str) -> None:
        from pytest_agentdrift.safetext import json_safe

        payload = json_safe(payload)  # whatever a worker sent, the record writer can encode it
        self.received_nodeids.add(nodeid)
        tid, rep = payload["task_id"], payload["rep"]
        result = dict(payload["result"])
        raw_files = result.pop("_raw_files", {})
        final_tree = result.pop("_final_tree", None)
        self.task_meta[tid] = payload["meta"]
        self.results.setdefault(tid, {})[rep] = result
        if self.recorder is not None:
            try:
                if not self.recorder.started:
                    if self.info.longrun is not None:
                        # session state and manifest first: resumable from here on
                        self.info.longrun.begin_record(SessionView(self.info, self.runner, self))
                    else:
                        self.recorder.start(f"recording run {self.info.run_id} started {self.info.started_at}")
                if final_tree is not None:
                    raw_files = {**raw_files, **self.recorder.write_tree(final_tree)}
                if raw_files:
                    self.recorder.write_raw(result["raw"], raw_files)
                # last: a run.json means every file of this run is on disk (record/resume.py)
                self.recorder.write_json(
                    f"{result['raw']}/run.json", {"task_id": tid, "rep": rep, "meta": payload["meta"], "result": result}
                )
            except (AgentDriftError, OSError) as exc:
                # reported at the end of the session (exit 4); the runs go on
                self.record_error = getattr(exc, "message", str(exc))
                self.recorder = None

    def build_results(self) -> dict[str, Any]:
        from pytest_agentdrift.grade.scoring import summarise

        tasks = {}
        for tid in sorted(self.results):
            meta = self.task_meta[tid]
            tasks[tid] = {**meta, "runs": [self.results[tid][rep] for rep in sorted(self.results[tid])]}
        reasons = []
        missing = sorted(self.expected_nodeids - self.received_nodeids)
        if missing:
            reasons.append(f"{len(missing)} run(s) never reported: " + ", ".join(missing[:10]))
        for wid, w in sorted(self.workers.items()):
            if w.get("error"):
                reasons.append(f"worker {wid} crashed: {w['error']}")
        if self.interrupted:
            reasons.append(f"session interrupted: {self.interrupted}")
        if not self.expected_nodeids and not self.received_nodeids and not self.results:
            reasons.append("no task was run")
        st = self.settings
        adapter = self.runner.adapter
        from pytest_agentdrift.run.mountplan import not_hidden

        iso = self.runner.isolation.to_dict(st.isolation)
        iso["not_hidden"] = not_hidden(self.runner.isolation.mode)
        return {
            "schema_version": 1,
            "plugin_version": __version__,
            "run_id": self.info.run_id,
            "started_at": self.info.started_at,
            "finished_at": utc_now(),
            "complete": not reasons,
            "incomplete_reasons": reasons,
            "agent": {
                "name": adapter.name if adapter else "none",
                "argv": adapter.argv_template(st.agent_options) if adapter else [],
                "version": self.agent_version,
                "product": adapter.product if adapter else "none",
                "surface": adapter.surface if adapter else "none",
            },
            "isolation": iso,
            "settings": self.settings_record(),
            "runtime_id": (self.info.manifest or {}).get("runtime_id"),
            "task_set_id": self._identity_field("task_set_id", task_set_id),
            "evaluator_id": self._identity_field("evaluator_id", evaluator_id),
            "tasks": tasks,
            "workers": {
                wid: {"exitstatus": w.get("exitstatus"), "error": w.get("error")}
                for wid, w in sorted(self.workers.items())
            },
            "summary": summarise(tasks),
        }

    def settings_record(self) -> dict[str, Any]:
        """The session settings results.json records (a resumed session must share them)."""
        st = self.settings
        return {
            "k": st.k,
            "timeout_s": st.timeout,
            "fail_on": st.fail_on,
            "gate": st.gate,
            "isolation": st.isolation,
            "agent_options": st.agent_options,
            "limits": self._limits(),
        }

    def _limits(self) -> dict[str, int | None]:
        from pytest_agentdrift.run.limits import DEFAULT_LIMITS

        return dict(self.settings.limits) or dict(DEFAULT_LIMITS)

    def _identity_field(self, name: str, compute) -> str | None:
        """From the manifest when captured (it saw every selected task), else from the specs run here."""
        value = ((self.info.manifest or {}).get("identity") or {}).get(name)
        if isinstance(value, str) and value.startswith("sha256:"):
            return value
        specs = list(self.runner.specs.values())
        return compute(specs) if specs else None

    def write_record(self, results: dict[str, Any], comparison: ComparisonState, closing: str) -> None:
        """Manifest files and comparison first, results.json last (it marks completeness)."""
        from pytest_agentdrift.record.report import markdown

        rec = self.recorder
        if self.info.manifest is not None:
            rec.write_json(MANIFEST_FILE, self.info.manifest)
        if self.instruction_bundle is not None:
            rec.write_json("instruction-bundle.json", self.instruction_bundle)
        if self.source_manifest is not None:
            rec.write_json(SOURCE_MANIFEST_FILE, self.source_manifest)
        for name, doc in sorted(comparison.files.items()):
            if isinstance(doc, str):
                rec.write_raw(str(Path(name).parent), {Path(name).name: doc})
            else:
                rec.write_json(name, doc, lead=(EXIT_STATUS_KEY,))  # decision.json opens with the closing line
        rec.write_raw(".", {"report.md": markdown(results, comparison.lines or None, closing=closing)})
        from pytest_agentdrift.record.html import record_page

        rec.write_raw(".", {"report.html": record_page(rec.path, results, closing)})
        rec.finish(results)


@dataclass
class ComparisonState:
    """The baseline and everything the comparison with it produced (controller side)."""

    baseline_results: dict[str, Any] | None = None
    baseline_manifest: dict[str, Any] | None = None
    stamps: StampComparison | None = None
    accepted: dict[str, Any] = field(default_factory=dict)  # the resolved accepted-unobserved list, groups expanded
    lines: list[str] = field(default_factory=list)
    files: dict[str, Any] = field(default_factory=dict)
    verdict: Verdict | None = None  # the comparison's part of the exit status
