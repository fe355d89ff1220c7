"""The shapes of the JSON this package reads and writes: one home for the types of records and of the
free-form JSON it parses (agent streams, model traffic, tool payloads).

`JsonValue` is what `json.loads` can return; code that reads a value of it narrows it (isinstance) before
use, so a record or a stream that is not what we expect is found where it is read, not three calls later.
The record types (results.json, a task's entry, a run, a check, decision.json) are TypedDicts below: read a
record through them rather than by string keys into `dict[str, Any]`. Each one's keys are the properties
its schema (record/schema/*.schema.json) declares, held equal by tests/unit/test_shapes.py; a key that is
not always written is `NotRequired`.

A record read from disk is only checked against its schema where the reader validates it (record/store.py):
a TypedDict states what the writer promises, not what a hand-edited file holds.
"""

# no `from __future__ import annotations`: on Python 3.11 a TypedDict's NotRequired is only seen in an
# annotation that is evaluated, and tests/unit/test_shapes.py reads the required keys at run time
from typing import NotRequired, TypeAlias, TypedDict, Union

JsonScalar: TypeAlias = None | bool | int | float | str
JsonValue: TypeAlias = Union[JsonScalar, list["JsonValue"], dict[str, "JsonValue"]]
JsonObject: TypeAlias = dict[str, JsonValue]


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


# -- comparison.json: the comparison of two recorded runs (compare/comparison.compare_runs) ---------
# comparison.json has no schema file: these TypedDicts are its one declaration (docs/statistics.md
# says what each field means).
class RunIdentity(TypedDict):
    """The keys of one arm's results.json that identify its run (vocabulary.RUN_IDENTITY_KEYS)."""

    runtime_id: str | None
    task_set_id: str | None
    evaluator_id: str | None


class ComparisonIdentity(TypedDict):
    """Both arms' identities, which of them are missing and which differ."""

    baseline: RunIdentity
    candidate: RunIdentity
    missing: list[str]
    changed: list[str]


InfraLostRun = TypedDict(
    "InfraLostRun",
    # `class` is a keyword: the functional form names it
    {"task": str, "rep": int | None, "class": str | None, "evidence": JsonValue},
)


class UndecidedRun(TypedDict):
    """A run the harness could not judge, and why."""

    task: str
    rep: int | None
    why: str


class InfraArm(TypedDict):
    """One arm's runs lost to infrastructure and runs left undecided."""

    runs: int
    lost: int
    share: float
    runs_lost: list[InfraLostRun]
    tasks_lost: list[str]
    undecided: list[UndecidedRun]


class InfraPart(TypedDict):
    """The comparison's `infra`: runs excluded from every statistic, per arm."""

    threshold: float
    baseline: InfraArm
    candidate: InfraArm
    exceeded: list[str]
    undecided: list[str]
    excluded_tasks: list[str]


class ArmSpend(TypedDict):
    """Tokens and cost of every run of an arm (None when no run reported one)."""

    tokens: int | None
    cost_usd: float | None


class TaskRep(TypedDict):
    """One run of one task (a tampered pass)."""

    task: str
    rep: int


class CriticalFailure(TypedDict):
    """A critical check that failed in an arm, and in which runs."""

    task: str
    check: str
    reps: list[int]


class ArmSummary(TypedDict):
    """One arm of the comparison (compare/arms.arm_summary)."""

    spend: ArmSpend
    run_id: str | None
    runtime_id: str | None
    k: int
    tasks: int
    runs: int
    passes: int
    pass_rate: float | None
    wilson: list[float] | None
    tampered_passes: list[TaskRep]
    critical_failures: list[CriticalFailure]


class TaskRow(TypedDict):
    """One task in both arms: [passes, runs] per arm and, when paired, what changed."""

    suite: str
    baseline: list[int] | None
    candidate: list[int] | None
    outcome: str | None
    delta: float | None
    critical_regressions: list[str] | None
    new_safety_failure: bool | None


class PairedResult(TypedDict):
    """The paired test over the tasks both arms ran."""

    tasks: int
    won: list[str]
    lost: list[str]
    tied: list[str]
    discordant: int
    p_value: float
    test: str
    delta: float | None
    delta_ci: list[float] | None
    ci_method: str | None
    draws: int
    confidence: float


class FailureClass(TypedDict):
    """The failed runs of one arm in one class (bad-run, beyond-arm, unsolved-by-all), and their tasks."""

    runs: int
    tasks: list[str]


class VarianceDecomposition(TypedDict):
    """The variance of 0/1 run outcomes split into task, arm, task x arm and run-to-run (compare/stats)."""

    runs: int
    total_ss: float
    ss: dict[str, float]
    #: None when every run has the same outcome (then `note` says so)
    shares: dict[str, float] | None
    note: NotRequired[str]
    run_to_run_exceeds_arm: NotRequired[bool]


class CriticalRegression(TypedDict):
    """A task whose critical checks fail in the candidate and not in the baseline."""

    task: str
    checks: list[str]


class GateCounts(TypedDict):
    """The gate on one set of discordant tasks, pooled or one suite (compare/gates.gate_counts)."""

    won: int
    lost: int
    baseline_solved: int
    broken_share: float
    net: float
    p_value: float
    loss_p_value: float
    verdict: str
    reason: str


class Stratum(TypedDict):
    """One suite of the comparison and its own gate."""

    tasks: list[str]
    baseline_pass_rate: float
    candidate_pass_rate: float
    delta: float
    gate: GateCounts


class Promotion(TypedDict, total=False):
    """Cost promotion: same quality (within eps) for less (compare/gates.cost_promotion); the bootstrap's
    keys (stats.promotion_support) are there when some run reported a cost basis."""

    basis: str | None
    eps: float
    min_support: float
    support: float | None
    promote: bool
    reason: str
    note: str
    priced_tasks: int
    baseline_mean_cost: float
    candidate_mean_cost: float
    cost_delta: float
    cost_delta_ci: list[float]
    cost_change: float | None
    quality_delta: float
    draws: int
    seed: int
    method: str
    approximation_error: float | None


class PromotionGate(TypedDict):
    """The comparison's `gate` (compare/gates.promotion_gate); not comparable runs have only the verdicts."""

    scope: NotRequired[str]
    verdict: str | None
    quality_verdict: str | None
    reason: str
    quality_reason: str
    passed: bool
    pooled: NotRequired[GateCounts]
    blocked_by_strata: NotRequired[list[str]]
    blockers: NotRequired[list[str]]


class RawCounts(TypedDict):
    """A check row's [failed, runs] per arm as counted, where the gate tested effective counts."""

    baseline: list[int]
    candidate: list[int]


class CheckRow(TypedDict):
    """One (task, check) of the regression gate: [failed, runs] per arm, its p-value and verdict
    (compare/checkrates.check_rate_tests; compare/confirm.confirm_tests for a confirming candidate)."""

    task: str
    check: str
    baseline: list[int]
    candidate: list[int]
    p_value: float
    min_p_value: float | None
    verdict: str | None
    blocks: bool
    raw: NotRequired[RawCounts]
    effective: NotRequired[str]
    confirmed_at: NotRequired[int]
    stopped: NotRequired[str]


class CheckTests(TypedDict):
    """The check rows of the regression gate, the family they were tested in and its level."""

    method: NotRequired[str]
    level: float
    family: int
    paired_tests: int
    flakes: str
    screened: NotRequired[int]
    plan: NotRequired[JsonObject]
    looks: NotRequired[dict[str, list[JsonObject]]]
    rows: list[CheckRow]


class RowRates(TypedDict):
    """A check row's rates as a failure group shows them."""

    baseline: list[int]
    candidate: list[int]
    p_value: float
    verdict: str | None


class FailureGroup(TypedDict):
    """The check rows of one task that mean the same for the gate (new, standing, undecided)."""

    task: str
    checks: list[str]
    rates: dict[str, RowRates]


class MinimumDetectable(TypedDict):
    """The smallest per-run pass-rate drop the regression gate detects (compare/power)."""

    method: str
    alpha: float
    power: float
    tasks: int
    k: int
    mde_pp: int | None
    power_at_mde: float | None


class RegressionSection(TypedDict):
    """The regression gate (compare/gates.regression_gate): fails only on what is new in the candidate."""

    mode: str
    passed: bool
    reason: str
    blockers: list[str]
    new_critical_failures: list[FailureGroup]
    standing_critical_failures: list[FailureGroup]
    undecided_failures: list[FailureGroup]
    new_safety_failures: list[str]
    check_tests: CheckTests
    flakes: str
    tampered_passes: list[TaskRep]
    won: int
    lost: int
    loss_p_value: float
    strata_flagged: list[str]
    alpha: float
    level: float
    minimum_detectable: MinimumDetectable
    #: what pytest's items say of each task (compare/outcome.gate_items), added by the session
    items: NotRequired[dict[str, dict[str, str]]]


class ObservedChange(TypedDict):
    """A task-level behaviour change: won or lost, a critical check broke, a new safety failure."""

    task: str
    change: str


class LedgerRow(TypedDict):
    """One row of release-note-ledger.csv: an observed change or a note, and its status (compare/ledger)."""

    status: str
    task: str
    observed_change: str
    note_line: int | None
    version: str
    tag: str
    url: str
    text: str


class StatusDecision(TypedDict):
    """The status the decision table settled on, its rule and the evidence (compare/status.decide_status)."""

    status: str
    rule: str
    because: list[str]


class ComparisonPaired(TypedDict):
    """comparison.json's cross-arm keys: None throughout when the runs are not comparable."""

    tasks: dict[str, TaskRow]
    paired: PairedResult | None
    #: arm -> class -> its failed runs (None with k = 1: one run cannot tell noise from inability)
    failure_classes: dict[str, dict[str, FailureClass]] | None
    variance: VarianceDecomposition | None
    critical_regressions: list[CriticalRegression] | None
    new_safety_failures: list[str] | None
    strata: dict[str, Stratum] | None
    promotion: Promotion | None
    gate: PromotionGate
    regression: RegressionSection | None


class Comparison(ComparisonPaired):
    """comparison.json: two recorded runs compared (compare/comparison.compare_runs). Not comparable
    runs keep every cross-arm number None; compare/outcome adds the session's keys."""

    schema_version: int
    comparable: bool
    reasons: list[str]
    change_class: str | None
    identity: ComparisonIdentity
    params: JsonObject
    seed: int
    baseline: ArmSummary
    candidate: ArmSummary
    rollback_state: str
    rollback_evidence: JsonObject | None
    rollback_notes: list[str]
    infra: InfraPart
    observed_changes: list[ObservedChange] | None
    ledger: list[LedgerRow] | None
    ledger_supplied: bool
    #: settled last, by the decision table reading the rest
    decision: NotRequired[StatusDecision]
    gate_mode: NotRequired[str | None]
    baseline_pool: NotRequired[JsonObject]
    cost: NotRequired["DecisionCost"]  # declared with decision.json below
    regraded: NotRequired[JsonObject]


# -- decision.json ----------------------------------------------------------------------------------
class CostArm(TypedDict):
    """What one arm of a gated comparison spent (compare/cost.py)."""

    runs: int
    records: int
    tokens: int | None
    cost_usd: float | None
    wall_s: float | None
    not_needed: NotRequired[int]


class FixedEquivalent(TypedDict):
    """The fixed design of the same power as a confirming one."""

    k: int | None
    runs: int | None
    power: float | None
    level: float
    k_max: int


class CostPower(TypedDict):
    """What the comparison could see: its power against a given rate."""

    rate: float
    level: float
    design: str
    k: int | None
    cap: int | None
    power: float | None
    task: str | None
    fixed_equivalent: FixedEquivalent | None


class DecisionCost(TypedDict):
    """decision.json's cost: what each arm spent and what it bought (compare/cost.decision_cost)."""

    baseline: CostArm
    candidate: CostArm
    power: CostPower | None
    text: str


class DecisionCriticalFailure(CriticalFailure):
    """A critical check the candidate fails, and whether the baseline passed it (a regression)."""

    regression: bool


class GateSummary(TypedDict):
    """decision.json's `gate`: the promotion gate's verdicts and each suite's."""

    params: JsonObject
    verdict: str | None
    quality_verdict: str | None
    passed: bool
    reason: str
    strata: dict[str, str] | None


class RegressionSummary(TypedDict):
    """decision.json's `regression_gate`: the regression gate less its check rows."""

    passed: bool
    reason: str
    blockers: list[str]
    new_critical_failures: list[FailureGroup]
    standing_critical_failures: list[FailureGroup]
    new_safety_failures: list[str]
    undecided_failures: list[FailureGroup]
    flakes: str
    tampered_passes: list[TaskRep]
    won: int
    lost: int
    loss_p_value: float
    strata_flagged: list[str]
    alpha: float
    level: float
    minimum_detectable: MinimumDetectable
    items: NotRequired[dict[str, dict[str, str]]]


class InfraArmSummary(TypedDict):
    """decision.json: one arm's runs lost to infrastructure and left undecided."""

    runs: int
    lost: int
    share: float
    runs_lost: list[InfraLostRun]
    undecided: list[UndecidedRun]


class InfraSummary(TypedDict):
    """decision.json's `infra_errors`: runs lost to infrastructure per arm, excluded from the statistics."""

    threshold: float
    decided: bool
    exceeded: list[str]
    undecided: list[str]
    excluded_tasks: list[str]
    baseline: InfraArmSummary
    candidate: InfraArmSummary


class ArmEvidence(TypedDict):
    """decision.json: one arm as the evidence shows it."""

    run_id: str | None
    runtime_id: str | None
    k: int
    tasks: int
    runs: int
    passes: int
    pass_rate: float | None
    wilson: list[float] | None
    spend: ArmSpend


class TamperedByArm(TypedDict):
    """The tampered passes of each arm."""

    baseline: list[TaskRep]
    candidate: list[TaskRep]


class DecisionEvidence(TypedDict):
    """decision.json's `evidence`: what the status rests on."""

    identity: ComparisonIdentity
    baseline: ArmEvidence
    candidate: ArmEvidence
    paired: PairedResult | None
    strata: dict[str, Stratum] | None
    promotion: Promotion | None
    tampered_passes: TamperedByArm
    release_notes_supplied: bool
    notes: list[str]


class ExitStatusRecord(TypedDict):
    """The exit code a record's session closed with, and the sentence that says why."""

    code: int
    reason: str
    line: str


class Decision(TypedDict):
    """decision.json: the status of a comparison and the evidence it rests on (compare/status.py
    decision_document; the session adds `gate_mode`, `exit_status` and an experiment's section)."""

    schema_version: int
    exit_status: NotRequired[ExitStatusRecord]
    status: str
    status_rule: str | None
    because: list[str]
    baseline_runtime_id: NotRequired[str | None]
    candidate_runtime_id: NotRequired[str | None]
    task_set_id: NotRequired[str | None]
    evaluator_id: NotRequired[str | None]
    change_class: NotRequired[str | None]
    comparable: bool
    reasons: NotRequired[list[str]]
    critical_failures: NotRequired[list[DecisionCriticalFailure]]
    unconfirmed_changes: NotRequired[list[str]]
    rollback_state: NotRequired[str]
    rollback_evidence: NotRequired[JsonObject | None]
    gate: NotRequired[GateSummary]
    gate_mode: NotRequired[str | None]
    regression_gate: NotRequired[RegressionSummary | None]
    infra_errors: NotRequired[InfraSummary | None]
    evidence: NotRequired[DecisionEvidence]
    approved_external_effects: NotRequired[list[JsonValue]]
    publication_authorized: NotRequired[bool]
    baseline_pool: NotRequired[JsonObject]
    cost: NotRequired[DecisionCost]
    experiment: NotRequired[JsonObject]
