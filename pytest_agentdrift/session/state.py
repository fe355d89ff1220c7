"""AgentDriftSession: the one object per pytest process (config.stash).

The controller (or a standalone process) decides the run id, checks the
recording target and the baseline, gathers per-run results from test
reports and writes the record. Workers only run agents and ship results on
their reports. Nothing here imports pytest: plugin.py does the wiring.
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
from typing import Any

from typing import TYPE_CHECKING

from pytest_agentdrift import EVALUATOR_VERSION, __version__
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.session.options import Settings

# Every pytest run of the environment creates a session object: the modules that
# run agents, grade and record are imported only when a session uses them.
if TYPE_CHECKING:
    from pytest_agentdrift.agents.base import AgentAdapter
    from pytest_agentdrift.grade.checks import Grader
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
    return digest({
        "evaluator_version": EVALUATOR_VERSION,
        "code": evaluator_components(),
        "checks": {s.id: [c.to_dict() for c in s.checks] for s in sorted(specs, key=lambda s: s.id)},
    })


def task_set_id(specs: list[TaskSpec]) -> str:
    from pytest_agentdrift.canonical import digest

    return digest({s.id: s.content_digest() for s in sorted(specs, key=lambda s: s.id)})


@dataclass
class AgentDriftSession:
    settings: Settings
    is_worker: bool
    run_id: str = field(default_factory=new_run_id)
    started_at: str = field(default_factory=utc_now)
    adapter: AgentAdapter | None = None
    agent_version: str = "unobserved"
    recorder: RunRecorder | None = None
    expected_nodeids: set[str] = field(default_factory=set)
    received_nodeids: set[str] = field(default_factory=set)
    results: dict[str, dict[int, Any]] = field(default_factory=dict)
    task_meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    specs: dict[str, TaskSpec] = field(default_factory=dict)
    workers: dict[str, dict[str, Any]] = field(default_factory=dict)
    interrupted: str | None = None
    manifest: dict[str, Any] | None = None
    instruction_bundle: dict[str, Any] | None = None
    source_manifest: dict[str, Any] | None = None
    baseline_results: dict[str, Any] | None = None
    baseline_manifest: dict[str, Any] | None = None
    stamp_comparison: Any = None
    comparison_lines: list[str] = field(default_factory=list)
    comparison_files: dict[str, Any] = field(default_factory=dict)
    final_lines: list[str] = field(default_factory=list)
    record_error: str | None = None
    _digests: dict[str, str] = field(default_factory=dict)
    _isolation: Isolation | None = None
    _grader: Grader | None = None
    _base: Path | None = None

    # -- setup (controller and workers) ---------------------------------------------
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

    def probe_agent_version(self) -> str:
        import subprocess

        argv = self.adapter.version_argv() if self.adapter else None
        if not argv:
            return "unobserved"
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=5, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return "unobserved"
        text = out.stdout.strip().splitlines()
        return text[0] if out.returncode == 0 and text else "unobserved"

    @property
    def isolation(self) -> Isolation:
        if self._isolation is None:
            from pytest_agentdrift.run import sandbox

            self._isolation = sandbox.detect(self.settings.isolation)
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

            self._grader = Grader(self.isolation, self.base / "grading", hide=self.base / "runs")
        return self._grader

    def close(self) -> None:
        if self._base is not None and not self.settings.keep_workdirs:
            shutil.rmtree(self._base, ignore_errors=True)

    # -- one run (any process) --------------------------------------------------------
    def run_task(self, spec: TaskSpec, rep: int) -> dict[str, Any]:
        """Run the agent once on a fresh copy and score it; returns the payload."""
        from pytest_agentdrift.run.evidence import dump_jsonl, scrub, secret_values
        from pytest_agentdrift.run.runner import DEFAULT_ENV_ALLOWLIST, RunSettings, cleanup, run_agent
        from pytest_agentdrift.grade.scoring import score
        settings = RunSettings(
            isolation=self.isolation, timeout_s=self.settings.timeout,
            env_allowlist=tuple(sorted(set(DEFAULT_ENV_ALLOWLIST) | set(self.settings.env))),
            agent_options=self.settings.agent_options, keep_workdirs=self.settings.keep_workdirs,
            allow_hosts=self.settings.allow_hosts, overlay=getattr(self, "overlay", None),
        )
        run = run_agent(spec, rep, self.adapter, settings, self.base / "runs")
        try:
            checks = self.grader.evaluate(spec, run)
            result = score(run, checks)
            from pytest_agentdrift.compare.behaviour import trace_of

            # what the agent did, step by step (its own account: behaviour rows only, never check evidence)
            result["trace"] = trace_of(run.adapter_output.events, run.agent_events)
        finally:
            if not self.settings.keep_workdirs:
                cleanup(run)
        raw_dir = f"raw/{spec.id}/r{rep}"
        result["raw"] = raw_dir
        result["_raw_files"] = {
            "stdout.txt": run.stdout,
            "stderr.txt": run.stderr,
            "events.jsonl": dump_jsonl(run.events),
            "diff.patch": _overlay_note(run) + run.patch,
            "report.json": json.dumps(run.report, indent=2, sort_keys=True) + "\n" if run.report else "null\n",
            "checks.json": json.dumps(result["checks"], indent=2, sort_keys=True) + "\n",
            "argv.json": json.dumps(run.argv, indent=2) + "\n",
        }
        meta = {"title": spec.title, "suite": spec.suite, "behavior": spec.behavior, "task_digest": self.task_digest(spec)}
        payload = {"task_id": spec.id, "rep": rep, "meta": meta, "result": result}
        # The one place where run data leaves for the record: keep the session's secrets out.
        secrets_ = secret_values(dict(os.environ), set(settings.env_allowlist) | set(self.adapter.env_allowlist))
        # secrets written into a bundle's settings or MCP files travel with it into the work tree
        secrets_ = sorted({*secrets_, *getattr(settings.overlay, "secrets", ())}, key=len, reverse=True)
        return json.loads(scrub(json.dumps(payload), [json.dumps(v)[1:-1] for v in secrets_]))

    # -- controller side ----------------------------------------------------------------
    def add_payload(self, payload: dict[str, Any], nodeid: str) -> None:
        self.received_nodeids.add(nodeid)
        tid, rep = payload["task_id"], payload["rep"]
        result = dict(payload["result"])
        raw_files = result.pop("_raw_files", {})
        self.task_meta[tid] = payload["meta"]
        self.results.setdefault(tid, {})[rep] = result
        if self.recorder is not None:
            try:
                if not self.recorder.started:
                    self.recorder.start(f"recording run {self.run_id} started {self.started_at}")
                if raw_files:
                    self.recorder.write_raw(result["raw"], raw_files)
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
        if not self.expected_nodeids and not self.received_nodeids:
            reasons.append("no task was run")
        iso = self.isolation.to_dict(self.settings.isolation)
        adapter = self.adapter
        results = {
            "schema_version": 1,
            "plugin_version": __version__,
            "run_id": self.run_id,
            "started_at": self.started_at,
            "finished_at": utc_now(),
            "complete": not reasons,
            "incomplete_reasons": reasons,
            "agent": {
                "name": adapter.name if adapter else "none",
                "argv": adapter.argv_template(self.settings.agent_options) if adapter else [],
                "version": self.agent_version,
                "product": adapter.product if adapter else "none",
                "surface": adapter.surface if adapter else "none",
            },
            "isolation": iso,
            "settings": {"k": self.settings.k, "timeout_s": self.settings.timeout, "fail_on": self.settings.fail_on,
                         "isolation": self.settings.isolation, "agent_options": self.settings.agent_options},
            "runtime_id": (self.manifest or {}).get("runtime_id"),
            "task_set_id": self._identity_field("task_set_id", task_set_id),
            "evaluator_id": self._identity_field("evaluator_id", evaluator_id),
            "tasks": tasks,
            "workers": {wid: {"exitstatus": w.get("exitstatus"), "error": w.get("error")} for wid, w in sorted(self.workers.items())},
            "summary": summarise(tasks),
        }
        return results

    def _identity_field(self, name: str, compute) -> str | None:
        """From the manifest when captured (it saw every selected task), else from the specs run here."""
        value = ((self.manifest or {}).get("identity") or {}).get(name)
        if isinstance(value, str) and value.startswith("sha256:"):
            return value
        return compute(list(self.specs.values())) if self.specs else None

    def summary(self, results: dict[str, Any]) -> list[str]:
        from pytest_agentdrift.record.report import summary_lines

        return summary_lines(results)

    def task_digest(self, spec: TaskSpec) -> str:
        key = str(spec.path)
        if key not in self._digests:
            self._digests[key] = spec.content_digest()
        return self._digests[key]

    def write_record(self, results: dict[str, Any]) -> None:
        """Manifest files and comparison first, results.json last (it marks completeness)."""
        from pytest_agentdrift.record.report import markdown

        rec = self.recorder
        if self.manifest is not None:
            rec.write_json("runtime-manifest.json", self.manifest)
        if self.instruction_bundle is not None:
            rec.write_json("instruction-bundle.json", self.instruction_bundle)
        if self.source_manifest is not None:
            rec.write_json("source-manifest.json", self.source_manifest)
        for name, doc in sorted(self.comparison_files.items()):
            if isinstance(doc, str):
                rec.write_raw(str(Path(name).parent), {Path(name).name: doc})
            else:
                rec.write_json(name, doc)
        rec.write_raw(".", {"report.md": markdown(results, self.comparison_lines or None)})
        rec.finish(results)
