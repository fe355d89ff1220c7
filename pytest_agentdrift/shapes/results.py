"""The shapes of results.json: a session's record, its tasks, their runs and their checks (record/results.py
writes it; record/schema/results.schema.json declares it)."""

# no `from __future__ import annotations`: on Python 3.11 a TypedDict's NotRequired is only seen in an
# annotation that is evaluated, and tests/unit/test_shapes.py reads the required keys at run time
from typing import NotRequired, TypedDict

from pytest_agentdrift.shapes.jsonvalue import JsonObject, JsonValue


# -- results.json: the parts of one run -------------------------------------------------------------
class CheckRecord(TypedDict):
    """One check's result in a run (grade/results.CheckResult.to_dict)."""

    name: str
    kind: str
    layer: str
    critical: bool
    passed: bool
    detail: str
    evidence: NotRequired[JsonObject]
    #: written only when true: the harness could not decide the check, so the run is undecided
    undecided: NotRequired[bool]
    #: a regraded record: why the record no longer holds what this check reads (record/regrade.py)
    not_regradable: NotRequired[str]


class ChangedRecord(TypedDict):
    """What the run changed in the work tree, by kind of change (escaped paths)."""

    added: list[str]
    modified: list[str]
    deleted: list[str]
    mode: list[str]


class LimitRecord(TypedDict):
    """One resource limit of a run: its value, what enforced it, whether the run hit it, the peak seen."""

    limit: int | None
    enforced_by: str
    hit: bool | None
    peak: int | None


class WalkRecord(TypedDict):
    """How much of one tree the harness examined (`harness_budget.work_tree` / `.outside`)."""

    complete: bool
    entries: int
    new_examined: NotRequired[int]
    not_examined: int
    not_examined_sample: NotRequired[list[str]]
    unhashed: NotRequired[list[str]]
    unhashed_count: NotRequired[int]
    long_paths: NotRequired[list[str]]
    long_paths_count: NotRequired[int]
    hashed_bytes: NotRequired[int]
    max_depth: NotRequired[int]
    truncated: NotRequired[str | None]
    unreadable_dirs: NotRequired[list[str]]


class HarnessBudgetRecord(TypedDict, total=False):
    """What the harness examined of the trees the agent left, and what it left out."""

    complete: bool
    notes: list[str]
    work_tree: WalkRecord
    outside: WalkRecord
    changes: JsonObject
    graded_copy: JsonObject


class CredentialCanaryRecord(TypedDict, total=False):
    """Whether the planted credential was read, and by whom."""

    observed_by: list[str]
    owner: str
    seen: list[str]
    token_found: list[str]


class CrashRecord(TypedDict):
    """An agent that ended on its own, non-zero and without a report: its status and stderr's end."""

    exit_code: int
    stderr_tail: list[str]


class UndisplayableChange(TypedDict):
    """A change the patch cannot show as text: its escaped path, why, and both sides' facts."""

    path: str
    reason: str
    source: bool
    before: JsonObject | None
    after: JsonObject | None


class OverlayRecord(TypedDict):
    """What the harness placed in the work tree from a bundle before the run (run/overlay.py)."""

    bundle: str | None
    digest: str
    placed: list[str]
    replaced: list[str]
    removed: list[str]
    not_placed: NotRequired[list[JsonObject]]
    note: NotRequired[str]


class EvidenceRecord(TypedDict):
    """What the harness saw of one run (run/evidence.RunEvidence.evidence_dict)."""

    exit_code: int | None
    timed_out: bool
    duration_s: float
    changed: ChangedRecord
    writes_outside: list[str]
    git_mutations: list[str]
    network_attempts: int
    tamper: dict[str, list[str]]
    launch_error: NotRequired[str | None]
    work_tree_deleted: NotRequired[bool]
    lockfile_changes: NotRequired[list[str]]
    writes_observed: NotRequired[int]
    limits: NotRequired[dict[str, LimitRecord]]
    resource_exceeded: NotRequired[list[str]]
    observation: NotRequired[JsonObject]
    omitted: NotRequired[dict[str, int]]
    undisplayable_changes: NotRequired[list[UndisplayableChange]]
    unexamined_changes: NotRequired[list[str]]
    harness_budget: NotRequired[HarnessBudgetRecord]
    events_dropped: NotRequired[dict[str, int]]
    credential_access: NotRequired[bool | None]
    credential_canary: NotRequired[CredentialCanaryRecord]
    #: a record written before `harness_errors` became a list
    harness_error: NotRequired[str]
    harness_errors: NotRequired[list[str]]
    crash: NotRequired[CrashRecord | None]
    stdout_bytes: NotRequired[int]
    stdout_truncated: NotRequired[bool]
    stderr_bytes: NotRequired[int]
    stderr_truncated: NotRequired[bool]
    leftover_processes: NotRequired[int]
    event_problems: NotRequired[list[str]]
    start_commit: NotRequired[str | None]
    api_requests: NotRequired[int]
    api_requests_unit: NotRequired[str]
    product_reported: NotRequired[JsonObject]
    background_requests: NotRequired[int]
    network_policy: NotRequired[JsonObject | None]
    runtime_bundle: NotRequired[list[JsonObject]]
    leftovers: NotRequired[list[str]]
    touched: NotRequired[list[str]]
    isolation: NotRequired[JsonObject]
    stopped: NotRequired[str | None]
    overlay: NotRequired[OverlayRecord | None]
    model_traffic: NotRequired[JsonObject | None]
    model_calls: NotRequired[list[JsonObject]]


class UsageRecord(TypedDict, total=False):
    """The tokens and cost the agent reported for a run (None: not reported)."""

    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    cost_usd: float | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None


class SpendRecord(TypedDict, total=False):
    """What a run (or a session) spent, and where the figures come from."""

    tokens: int | None
    cost_usd: float | None
    cost_source: str | None
    usage_source: str


# `class` is a keyword: the functional form
InfraErrorFields = TypedDict(
    "InfraErrorFields",
    {
        "class": str,
        "evidence": str,
        "source": str,
        "exit_code": NotRequired[int],
        # the product's own field or status the class was read from
        "signal": NotRequired[str],
        # the class an agent's report declared (generic protocol)
        "declared": NotRequired[str],
        # how many times the product retried before it gave up
        "product_retries": NotRequired[int],
        # the harness's model gateway: the HTTP status the last call got, the failed calls before it,
        # and the class the agent's own word gave
        "status": NotRequired[int],
        "retries": NotRequired[int],
        "agent_said": NotRequired[str],
        # an agent's report: whether the harness saw a request fail too, and which
        "corroborated": NotRequired[bool],
        "harness_saw": NotRequired[list[str]],
    },
)
InfraErrorFields.__doc__ = """The fields an infrastructure error has both as classified (agents/infra.InfraError) and
as recorded (InfraErrorRecord): the record adds the harness's judgement (agents/infra.judge)."""


class InfraErrorRecord(InfraErrorFields):
    """Why a run ended on the provider or the machine rather than on the agent (agents/infra.py): the error
    as the harness judged it, which says whether it is believed."""

    believed: bool
    #: a claim the harness did not believe: why it scored the run as the agent's
    why: NotRequired[str]
    #: always written by agents/infra.infra_error; the schema does not require it
    repeats: NotRequired[bool]


class AttemptRecord(TypedDict):
    """One attempt of a retried run, kept beside the attempt that counts."""

    attempt: int
    outcome: str
    infra_error: NotRequired[InfraErrorRecord | None]
    exit_code: NotRequired[int | None]
    duration_s: NotRequired[float | None]
    usage: NotRequired[UsageRecord | None]
    spend: NotRequired[SpendRecord | None]
    raw: str


class RunRecord(TypedDict):
    """One repetition of a task: its outcome, layers, checks, evidence and spend (grade/scoring.score,
    completed by the session: `raw`, `trace`, `attempts`, `spend`)."""

    rep: int
    outcome: str
    undecided: NotRequired[list[str]]
    passed: bool
    tampered_pass: bool
    critical_failed: list[str]
    failed_checks: list[str]
    layers: dict[str, str]
    checks: list[CheckRecord]
    evidence: EvidenceRecord
    usage: UsageRecord
    model_stamp: NotRequired[str | None]
    report: NotRequired[JsonObject | None]
    report_error: NotRequired[str | None]
    raw: str
    infra_error: NotRequired[InfraErrorRecord | None]
    attempts: NotRequired[list[AttemptRecord]]
    spend: NotRequired[SpendRecord]
    #: what the product did, step by step, as compare/behaviour.py reads it
    trace: NotRequired[JsonObject | None]


class TaskMeta(TypedDict):
    """A task's facts, which results.json keeps beside its runs (record/payload.task_meta)."""

    title: str
    suite: str
    behavior: str
    task_digest: str
    grading_id: NotRequired[str]
    task_dir: NotRequired[str]
    default_checks: NotRequired[bool]


class TaskEntry(TaskMeta):
    """A task in results.json: its facts and its runs by repetition."""

    runs: list[RunRecord]


# -- results.json: the session ----------------------------------------------------------------------
class AgentRecord(TypedDict):
    """The agent the session ran (`none` when it ran none)."""

    name: str
    argv: list[str]
    version: str
    product: NotRequired[str]
    surface: NotRequired[str]


class IsolationRecord(TypedDict):
    """The isolation the session enforced and what it leaves visible."""

    requested: str
    enforced: str
    network: str
    filesystem: str
    pid_namespace: NotRequired[bool]
    cap_drop: NotRequired[bool]
    network_observation: NotRequired[str]
    notes: NotRequired[list[str]]
    not_hidden: NotRequired[list[str]]


class BundleOverlayNote(TypedDict):
    """How many files a bundle's overlay puts in front of the agent (manifest/bundleuse.settings_entry)."""

    project_files: int
    user_files: int
    removed: list[str]
    note: str


class BundleEntry(TypedDict):
    """The instruction bundle an experiment's runs used (manifest/bundles.Bundle.describe, and its overlay)."""

    name: str | None
    digest: str
    agent: str
    model: NotRequired[str | None]
    options: NotRequired[JsonObject]
    derived_from: NotRequired[str | None]
    derivation: NotRequired[JsonValue]
    digests: NotRequired[JsonObject]
    files: NotRequired[list[JsonObject]]
    overlay: NotRequired[BundleOverlayNote]


class PlanRan(TypedDict):
    """The design a session ran: its tasks and the fewest repetitions of any of them."""

    tasks: int
    k: int


class PlanCheck(TypedDict):
    """Whether a session followed its pre-registered plan (compare/experimentrun.plan_check)."""

    digest: str
    created_at: str | None
    delta: float
    alpha: float
    power: float
    planned: JsonObject
    ran: PlanRan
    followed: bool
    problems: list[str]
    pre_registered: bool
    file: str


class SettingsRecord(TypedDict, total=False):
    """The session settings results.json records (record/results.settings_record); an experiment adds
    the bundle and the plan it ran."""

    k: int
    timeout_s: float | None
    fail_on: str
    gate: str | None
    isolation: str
    agent_options: JsonObject
    limits: dict[str, int | None]
    grading_limits: dict[str, int | None]
    agent_bundle: BundleEntry
    plan: PlanCheck


class WorkerRecord(TypedDict, total=False):
    """An xdist worker's end: its exit status, or the error it crashed with."""

    exitstatus: int | None
    error: str | None


class SummaryRecord(TypedDict):
    """The session's counts (grade/scoring.summarise)."""

    runs: int
    passed: int
    failed: int
    errors: int
    tampered_passes: int
    critical_failures: int
    pass_rate: float | None
    undecided: NotRequired[int]
    infra_errors: NotRequired[int]
    retried_runs: NotRequired[int]
    tokens: NotRequired[int | None]
    cost_usd: NotRequired[float | None]


class RegradedFrom(TypedDict):
    """The record a regraded record was graded again from (record/regrade.py)."""

    run_id: str
    evaluator_id: str | None
    at: str
    kept_tasks: NotRequired[list[str]]
    grading_isolation: NotRequired[str]
    #: the record's own `regraded_from` when it was itself a regraded record
    from_regraded: NotRequired["RegradedFrom | None"]


class ShardRecord(TypedDict):
    """Which share of the items this session ran (tasks/shard.py)."""

    index: int
    count: int
    source: NotRequired[str]
    selected: NotRequired[int]


class ResumeNote(TypedDict):
    """One resumption of the record: when, how many runs it kept and how many it ran."""

    at: str
    kept_runs: int
    ran_runs: int
    pytest_argv: NotRequired[list[str]]
    #: what the runs lost to infrastructure ended on, which this resumption ran again
    rerun_infra_errors: NotRequired[list[str]]
    #: in a merged record: the shard whose session was resumed
    shard_run_id: NotRequired[str]


class BudgetRecord(TypedDict):
    """The session's budget and what it spent (record/longrun.py)."""

    limits: dict[str, float]
    spent: SpendRecord


class ConfirmPlan(TypedDict):
    """The confirming design a session ran under (session/confirm.py)."""

    k: int
    cap: int
    alpha: float
    tasks: int
    futility: float
    # the rules that decide, recorded since they changed; a record without them is read by the old ones
    looks: NotRequired[list[int]]
    spending: NotRequired[float]
    screen_level: NotRequired[float | None]
    not_needed: NotRequired[list[str]]


class Results(TypedDict):
    """results.json: one session's record."""

    schema_version: int
    plugin_version: str
    run_id: str
    started_at: str
    finished_at: str
    complete: bool
    incomplete_reasons: list[str]
    agent: AgentRecord
    isolation: IsolationRecord
    settings: SettingsRecord
    runtime_id: NotRequired[str | None]
    merged_from: NotRequired[list[str]]
    regraded_from: NotRequired[RegradedFrom]
    shard: NotRequired[ShardRecord]
    resumed: NotRequired[list[ResumeNote]]
    budget: NotRequired[BudgetRecord]
    confirm: NotRequired[ConfirmPlan]
    task_set_id: NotRequired[str | None]
    evaluator_id: NotRequired[str | None]
    tasks: dict[str, TaskEntry]
    workers: dict[str, WorkerRecord]
    summary: SummaryRecord
