"""The evidence model of one run: RunEvidence, everything the harness observed about it and
what gets recorded of it (`evidence_dict`, every path escaped, every list capped at
RESULT_LIST_CAP), and the typed pieces it is built from: TreeEvidence (the work tree the agent
left), NetworkSeen (what the harness's own proxy and DNS stub saw), AgentWord (what the agent
said about itself) and HarnessErrors (what failed in the harness: the run is undecided). A new
kind of evidence is a typed piece here whose `evidence_fields` fill RunEvidence's fields; the
runner's observation phase (run/runner.py, `_observe`) gathers it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict, TypeVar

from pytest_agentdrift.agents.base import AdapterOutput, AgentAdapter
from pytest_agentdrift.agents.infra import InfraError
from pytest_agentdrift.agents.modelcalls import ModelCall, ModelTraffic
from pytest_agentdrift.run import agentio, tamper
from pytest_agentdrift.run.runsettings import RunSettings
from pytest_agentdrift.safetext import capped, escape_path, json_safe
from pytest_agentdrift.shapes import CrashRecord, CredentialCanaryRecord, JsonObject
from pytest_agentdrift.tasks import treesnap
from pytest_agentdrift.vocabulary import enforces_network

if TYPE_CHECKING:
    from pytest_agentdrift.run.modelgateway import ModelGateway
    from pytest_agentdrift.run.netproxy import RecordingProxy
    from pytest_agentdrift.run.runguard import RunGuard

_T = TypeVar("_T")


class _Cap(Protocol):
    """Caps one list of the record at RESULT_LIST_CAP, counting what it leaves out under `name`."""

    def __call__(self, name: str, items: list[_T]) -> list[_T]: ...


@dataclass
class RunEvidence:
    """Everything observed about one run; `to_dict` is what gets recorded."""

    task_id: str
    rep: int
    root: Path
    work: Path
    argv: list[str]
    exit_code: int | None
    timed_out: bool
    launch_error: str | None
    duration_s: float
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    stdout_truncated: bool
    stderr_truncated: bool
    leftover_processes: int
    diff: treesnap.TreeDiff
    patch: str
    writes_outside: list[str]
    git_mutations: list[str]
    work_tree_deleted: bool
    tamper: dict[str, list[str]]
    lockfile_changes: list[str]
    network_attempts: list[JsonObject]
    credential_access: bool | None  # None: unobservable on this file system
    agent_events: list[JsonObject]
    event_problems: list[str]
    report: agentio.AgentReport | None
    report_error: str | None
    adapter_output: AdapterOutput
    isolation: JsonObject
    start_commit: str | None
    api_requests: list[JsonObject] = field(default_factory=list)  # allowlisted tunnels through the proxy
    #: refused attempts of the product itself to its known background hosts (adapter.background_hosts)
    background_requests: list[JsonObject] = field(default_factory=list)
    network_policy: JsonObject | None = None
    runtime_bundle: list[JsonObject] = field(default_factory=list)
    write_events: list[JsonObject] = field(default_factory=list)  # seen while the agent ran (watch.py)
    limits: JsonObject = field(default_factory=dict)  # per limit: value, mechanism, hit, peak
    resource_exceeded: list[str] = field(default_factory=list)  # the limits this run broke
    observation: JsonObject = field(default_factory=dict)  # how writes and network were observed
    harness_dir: Path | None = None  # the run's harness-only directory (observer logs)
    #: added paths that are tool leftovers (caches, paths the frozen .gitignore ignores): evidence, not changes
    leftovers: list[str] = field(default_factory=list)
    #: raw path -> lines the agent added, read from the files' raw bytes (never from the patch)
    added_lines: dict[str, list[str]] = field(default_factory=dict)
    #: raw paths of fixture files whose inode changed while their content is back (edited and undone)
    touched: list[str] = field(default_factory=list)
    #: raw paths of changed files whose content was too large to read in full
    unexamined: list[str] = field(default_factory=list)
    #: changes the patch cannot show as plain text (escaped paths, sizes, sha256)
    undisplayable: list[JsonObject] = field(default_factory=list)
    #: what the harness examined of the trees the agent left, and what it left out
    harness_budget: JsonObject = field(default_factory=dict)
    events_dropped: dict[str, int] = field(default_factory=dict)
    credential_canary: CredentialCanaryRecord = field(default_factory=CredentialCanaryRecord)
    infra_error: InfraError | None = None  # agents/infra.py: the run ended on the provider or the machine
    stopped: str | None = None  # a monitor stopped the run (per-run budget)
    overlay: JsonObject | None = None  # what the harness placed from a bundle (never the agent's changes)
    #: what failed in the harness while it handled this run (`stage: error`): the run is undecided
    harness_errors: list[str] = field(default_factory=list)
    #: the agent ended on its own with a non-zero status and no final report: its exit code and
    #: the last lines of its stderr (the traceback's end, the provider's error)
    crash: CrashRecord | None = None
    #: each model call the harness's gateway forwarded (run/modelgateway.py), and what they add up
    #: to (agents/modelcalls.summarise, with the agent's own word beside it); None: no gateway
    model_calls: list[ModelCall] = field(default_factory=list)
    model_traffic: ModelTraffic | None = None

    @property
    def tree_complete(self) -> bool:
        """Whether the snapshot of the work tree saw every entry (else the change set is partial)."""
        work_tree = self.harness_budget.get("work_tree")
        return not isinstance(work_tree, dict) or bool(work_tree.get("complete", True))

    @property
    def events(self) -> list[JsonObject]:
        """Agent-reported events plus what the harness observed itself."""
        outside: list[JsonObject] = [
            {"type": "write_outside", "path": p, "source": "harness"} for p in self.writes_outside
        ]
        observed = [
            *self.network_attempts,
            *self.api_requests,
            *self.background_requests,
            *outside,
            *self.write_events,
        ]
        return [*self.agent_events, *self.adapter_output.events, *observed]

    def observed_writes(self) -> list[JsonObject]:
        """The harness's own `write` events (never the agent's word)."""
        return [e for e in self.write_events if e.get("type") == "write" and e.get("source") == "harness"]

    def evidence_dict(self) -> dict[str, object]:
        """The recorded evidence: every path escaped, every list capped at RESULT_LIST_CAP
        with the count of what was left out in `omitted`."""
        omitted: dict[str, int] = self.diff.omitted(RESULT_LIST_CAP)

        def cap(name: str, items: list[_T]) -> list[_T]:
            kept, n = capped(items, RESULT_LIST_CAP)
            if n:
                omitted[name] = n
            return kept

        return {**self._effects_record(cap), "omitted": omitted, **self._run_record(cap)}

    def _effects_record(self, cap: _Cap) -> dict[str, object]:
        """How the process ended, what it changed, and how much of that the harness examined."""
        return {
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "launch_error": self.launch_error,
            "duration_s": round(self.duration_s, 3),
            "changed": self.diff.to_dict(RESULT_LIST_CAP),
            "writes_outside": cap("writes_outside", self.writes_outside),
            "git_mutations": cap("git_mutations", self.git_mutations),
            "work_tree_deleted": self.work_tree_deleted,
            "network_attempts": len(self.network_attempts),
            "tamper": {k: cap(f"tamper.{k}", v) for k, v in self.tamper.items()},
            "lockfile_changes": cap("lockfile_changes", self.lockfile_changes),
            "credential_access": self.credential_access,
            "credential_canary": self.credential_canary,
            "undisplayable_changes": cap("undisplayable_changes", self.undisplayable),
            "unexamined_changes": cap("unexamined_changes", [escape_path(p) for p in self.unexamined]),
            "harness_budget": self.harness_budget,
            "events_dropped": self.events_dropped,
        }

    def _run_record(self, cap: _Cap) -> dict[str, object]:
        """The process's output, what the product reported, and how the run was isolated and observed."""
        return {
            "stdout_bytes": self.stdout_bytes,
            "stdout_truncated": self.stdout_truncated,
            "stderr_bytes": self.stderr_bytes,
            "stderr_truncated": self.stderr_truncated,
            "leftover_processes": self.leftover_processes,
            "event_problems": self.event_problems + self.adapter_output.parse_errors,
            "start_commit": self.start_commit,
            "api_requests": len(self.api_requests),
            "api_requests_unit": request_unit(self.api_requests),
            # identity facts the product reported at run time (its init event), for the manifest
            "product_reported": self.adapter_output.run_identity,
            "background_requests": len(self.background_requests),
            "network_policy": self.network_policy,
            "runtime_bundle": self.runtime_bundle,
            "leftovers": [escape_path(p) for p in self.leftovers][:RESULT_LIST_CAP],
            "touched": cap("touched", [escape_path(p) for p in self.touched]),
            "isolation": self.isolation,
            "writes_observed": len(self.write_events),
            "limits": self.limits,
            "resource_exceeded": self.resource_exceeded,
            "observation": self.observation,
            "stopped": self.stopped,
            "overlay": self.overlay,
            "harness_errors": self.harness_errors,
            "crash": self.crash,
            "model_traffic": self.model_traffic,
            "model_calls": cap("model_calls", self.model_calls),
        }


def request_unit(proxied: list[JsonObject]) -> str:
    """What one counted API request is: of HTTPS the proxy sees only the CONNECT tunnel, which may
    carry any number of requests (run/netproxy.py lets nothing else through); a plain-HTTP request
    it passed would be one request."""
    plain = sum(1 for e in proxied if e.get("method") != "CONNECT")
    if not plain:
        return "tunnels"
    return "requests" if plain == len(proxied) else "requests and tunnels"


#: at most this many paths per list in results.json and checks.json (the rest are counted)
RESULT_LIST_CAP = 200


class TreeFields(TypedDict):
    """RunEvidence's fields that TreeEvidence fills."""

    diff: treesnap.TreeDiff
    patch: str
    work_tree_deleted: bool
    lockfile_changes: list[str]
    leftovers: list[str]
    touched: list[str]
    added_lines: dict[str, list[str]]
    unexamined: list[str]
    undisplayable: list[JsonObject]


@dataclass
class TreeEvidence:
    """What the harness read of the work tree the agent left, filled stage by stage."""

    before: treesnap.Snapshot
    work_deleted: bool = False
    report: treesnap.WalkReport = field(default_factory=treesnap.WalkReport)
    after: treesnap.Snapshot = field(default_factory=dict)
    diff: treesnap.TreeDiff = field(default_factory=treesnap.TreeDiff)
    leftovers: list[str] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)  # files whose inode changed, content put back
    changes: treesnap.Changes = field(default_factory=treesnap.Changes)
    file_hits: dict[str, list[str]] = field(default_factory=dict)
    searched: list[int] = field(default_factory=lambda: [0, 0])  # bytes searched, bytes waiting in the batch
    #: paths under .git the product keeps its own state in (AgentAdapter.product_state)
    product_state: tuple[str, ...] = ()

    def evidence_fields(self) -> TreeFields:
        """RunEvidence's fields of the work tree (the tamper evidence is a guarded stage of its own)."""
        return {
            "diff": self.diff,
            "patch": self.changes.patch,
            "work_tree_deleted": self.work_deleted,
            "lockfile_changes": tamper.lockfile_changes(self.diff),
            "leftovers": self.leftovers,
            "touched": self.touched,
            "added_lines": self.changes.added,
            "unexamined": self.changes.unexamined,
            "undisplayable": self.changes.undisplayable,
        }


class NetworkFields(TypedDict):
    """RunEvidence's fields that NetworkSeen fills."""

    network_attempts: list[JsonObject]
    background_requests: list[JsonObject]
    api_requests: list[JsonObject]
    network_policy: JsonObject | None


@dataclass
class NetworkSeen:
    """What the harness's own proxy and DNS stub saw of the run (never the agent's word)."""

    proxy: RecordingProxy | None  # in the sandbox or outside it; None: no proxy ran
    proxy_events: list[JsonObject]
    dns: list[JsonObject]
    policy: JsonObject | None  # the proxy's allow-list and whether the sandbox enforced it
    gateway: ModelGateway | None = None  # the model calls it forwarded; None: none ran

    @classmethod
    def gather(
        cls, guard: RunGuard, proxy: RecordingProxy | None, settings: RunSettings, gateway: ModelGateway | None = None
    ) -> NetworkSeen:
        if guard.net is not None and guard.net.proxy is not None:
            proxy = guard.net.proxy
        proxy_events = guard.net.proxy_events if guard.net is not None else (proxy.events if proxy else [])
        policy = None
        if proxy is not None and proxy.allowlist.entries:
            policy = {**proxy.describe(), "enforced": enforces_network(settings.isolation.mode)}
        dns = guard.net.dns_events if guard.net is not None else []
        return cls(proxy, proxy_events, dns, policy, gateway)

    @property
    def model_calls(self) -> list[ModelCall]:
        return [c.copy() for c in self.gateway.calls] if self.gateway is not None else []

    @property
    def api_requests(self) -> list[JsonObject]:
        return [e for e in self.proxy_events if e.get("allowed")]

    @property
    def refused(self) -> list[JsonObject]:
        return [e for e in self.proxy_events if not e.get("allowed")]

    def dropped_events(self) -> dict[str, int]:
        dropped = getattr(self.proxy, "dropped", 0) if self.proxy is not None else 0
        return {"proxy events over the cap": dropped} if dropped else {}

    def evidence_fields(self, hook_events: list[JsonObject], adapter: AgentAdapter) -> NetworkFields:
        """RunEvidence's network fields; `hook_events`: the network log of the harness's Python hook."""
        attempts = [*merge_python_hook_events(hook_events, self.dns), *self.dns, *self.refused]
        attempts, background = split_background(attempts, adapter)
        return {
            "network_attempts": attempts,
            "background_requests": background,
            "api_requests": [{**json_safe(e), "type": "api_request", "source": "harness"} for e in self.api_requests],
            "network_policy": self.policy,
        }


def split_background(attempts: list[JsonObject], adapter: AgentAdapter) -> tuple[list[JsonObject], list[JsonObject]]:
    """(network attempts, the product's background traffic): a refused attempt by one of the
    product's own programs to one of its known background hosts (telemetry, experiments, update
    checks, the git remotes it probes) is the product's, not the agent's network effect. It was
    refused all the same and stays in the record as a `background_request`."""
    hosts = set(getattr(adapter, "background_hosts", ()))
    programs = set(getattr(adapter, "background_programs", ()))
    any_program = getattr(adapter, "background_any_program", False)
    net: list[JsonObject] = []
    background: list[JsonObject] = []
    for a in attempts:
        ours = any_program or a.get("program") in programs
        if hosts and a.get("host") in hosts and ours and not a.get("allowed"):
            background.append({**a, "type": "background_request", "reason": "product background traffic"})
        else:
            net.append(a)
    return net, background


def merge_python_hook_events(hook: list[JsonObject], dns: list[JsonObject]) -> list[JsonObject]:
    if not dns:
        return hook
    from pytest_agentdrift.run.netwatch import merge_python_hook_events as merge

    return merge(hook, dns)


class WordFields(TypedDict):
    """RunEvidence's fields that AgentWord fills."""

    stdout: str
    stderr: str
    agent_events: list[JsonObject]
    report: agentio.AgentReport | None
    report_error: str | None
    adapter_output: AdapterOutput
    infra_error: InfraError | None


@dataclass
class AgentWord:
    """What the agent said about itself (events, report, its output as its adapter read it),
    filled stage by stage: a parse that fails keeps what was read before it."""

    stdout: str = ""
    stderr: str = ""
    log: agentio.EventLog = field(default_factory=agentio.EventLog)
    report: agentio.AgentReport | None = None
    report_error: str | None = "not read: the harness failed before reading the report"
    output: AdapterOutput = field(default_factory=AdapterOutput)
    infra_error: InfraError | None = None
    token_hits: dict[str, list[str]] = field(default_factory=dict)

    def evidence_fields(self) -> WordFields:
        """RunEvidence's fields of the agent's own word (its event problems are merged by the caller)."""
        return {
            "stdout": self.stdout,
            "stderr": self.stderr,
            "agent_events": self.log.events,
            "report": self.report,
            "report_error": self.report_error,
            "adapter_output": self.output,
            "infra_error": self.infra_error,
        }


class HarnessErrors(list[str]):
    """What failed in the harness while it handled one run, each as `stage: error`."""

    def stage(self, name: str, fn: Callable[[], _T], default: _T) -> _T:
        """fn(), or `default` with the error kept: what the other stages gathered stays."""
        try:
            return fn()
        except Exception as exc:  # fail closed: the run becomes undecided, never the agent's pass or fail
            self.append(f"{name}: {type(exc).__name__}: {str(exc)[:300]}")
            return default
