"""The shape of comparison.json: the comparison of two recorded runs (compare/comparison.compare_runs)."""

# no `from __future__ import annotations`: on Python 3.11 a TypedDict's NotRequired is only seen in an
# annotation that is evaluated, and tests/unit/test_shapes.py reads the required keys at run time
from typing import NotRequired, TypedDict

from pytest_agentdrift.shapes.cost import DecisionCost
from pytest_agentdrift.shapes.jsonvalue import JsonObject, JsonValue


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
    cost: NotRequired[DecisionCost]
    regraded: NotRequired[JsonObject]
