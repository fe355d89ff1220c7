"""The shape of decision.json: the gate's decision and what it spent (compare/decision.py writes it;
record/schema/decision.schema.json declares it)."""

# no `from __future__ import annotations`: on Python 3.11 a TypedDict's NotRequired is only seen in an
# annotation that is evaluated, and tests/unit/test_shapes.py reads the required keys at run time
from typing import NotRequired, TypedDict

from pytest_agentdrift.shapes.comparison import (
    ArmSpend,
    ComparisonIdentity,
    CriticalFailure,
    FailureGroup,
    InfraLostRun,
    MinimumDetectable,
    PairedResult,
    Promotion,
    Stratum,
    TaskRep,
    UndecidedRun,
)
from pytest_agentdrift.shapes.cost import DecisionCost
from pytest_agentdrift.shapes.jsonvalue import JsonObject, JsonValue


# -- decision.json ----------------------------------------------------------------------------------
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
