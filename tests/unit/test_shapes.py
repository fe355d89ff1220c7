"""The record TypedDicts of shapes/ and the schemas of record/schema/ name the same fields: a field
added to one only fails here. Each TypedDict is held to the schema object it describes: its keys to the
object's `properties`, its required keys to the object's `required`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentdrift import shapes

SCHEMAS = Path(shapes.__file__).parents[1] / "record" / "schema"

RUN = "/$defs/run"
EVIDENCE = f"{RUN}/properties/evidence"
COST = "/properties/cost"

#: (schema file, JSON pointer of the object) per TypedDict
DESCRIBED = {
    "Results": ("results", ""),
    "AgentRecord": ("results", "/properties/agent"),
    "IsolationRecord": ("results", "/properties/isolation"),
    "SettingsRecord": ("results", "/properties/settings"),
    "BundleEntry": ("results", "/properties/settings/properties/agent_bundle"),
    "BundleOverlayNote": ("results", "/properties/settings/properties/agent_bundle/properties/overlay"),
    "PlanCheck": ("results", "/properties/settings/properties/plan"),
    "PlanRan": ("results", "/properties/settings/properties/plan/properties/ran"),
    "RegradedFrom": ("results", "/properties/regraded_from"),
    "ShardRecord": ("results", "/properties/shard"),
    "ResumeNote": ("results", "/properties/resumed/items"),
    "BudgetRecord": ("results", "/properties/budget"),
    "ConfirmPlan": ("results", "/properties/confirm"),
    "WorkerRecord": ("results", "/properties/workers/additionalProperties"),
    "SummaryRecord": ("results", "/properties/summary"),
    "TaskEntry": ("results", "/$defs/task"),
    "RunRecord": ("results", RUN),
    "CheckRecord": ("results", "/$defs/check"),
    "LimitRecord": ("results", "/$defs/limit"),
    "WalkRecord": ("results", "/$defs/walk"),
    "EvidenceRecord": ("results", EVIDENCE),
    "ChangedRecord": ("results", f"{EVIDENCE}/properties/changed"),
    "UndisplayableChange": ("results", f"{EVIDENCE}/properties/undisplayable_changes/items"),
    "HarnessBudgetRecord": ("results", f"{EVIDENCE}/properties/harness_budget"),
    "CredentialCanaryRecord": ("results", f"{EVIDENCE}/properties/credential_canary"),
    "CrashRecord": ("results", f"{EVIDENCE}/properties/crash"),
    "OverlayRecord": ("results", f"{EVIDENCE}/properties/overlay"),
    "UsageRecord": ("results", f"{RUN}/properties/usage"),
    "SpendRecord": ("results", f"{RUN}/properties/spend"),
    "InfraErrorRecord": ("results", f"{RUN}/properties/infra_error"),
    "AttemptRecord": ("results", f"{RUN}/properties/attempts/items"),
    "Decision": ("decision", ""),
    "ExitStatusRecord": ("decision", "/properties/exit_status"),
    "DecisionCost": ("decision", COST),
    "CostArm": ("decision", "/$defs/arm"),
    "CostPower": ("decision", f"{COST}/properties/power"),
    "FixedEquivalent": ("decision", f"{COST}/properties/power/properties/fixed_equivalent"),
}


def schema_object(name: str, pointer: str) -> dict[str, object]:
    node = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
    for part in filter(None, pointer.split("/")):
        node = node[part]
    assert isinstance(node, dict)
    return node


@pytest.mark.parametrize("typed", sorted(DESCRIBED))
def test_typeddict_names_the_fields_of_its_schema_object(typed: str) -> None:
    cls = getattr(shapes, typed)
    obj = schema_object(*DESCRIBED[typed])
    properties = obj.get("properties")
    assert isinstance(properties, dict), f"{DESCRIBED[typed]} declares no properties"
    assert set(cls.__annotations__) == set(properties)
    assert cls.__required_keys__ == frozenset(obj.get("required", ()))


#: TypedDicts that are a part of another, held to it: (the whole, the keys the part leaves out)
PARTS = {
    "TaskMeta": ("TaskEntry", {"runs"}),
    # the fields an infrastructure error has before it is judged too (agents/infra.InfraError)
    "InfraErrorFields": ("InfraErrorRecord", {"believed", "why", "repeats"}),
}

#: comparison.json has no schema file, and decision.json's schema leaves these parts bare objects: the
#: TypedDicts are their one declaration (held to what compare_runs writes by tests/unit/test_comparison_shape.py)
UNSCHEMED = {
    "RunIdentity",
    "ComparisonIdentity",
    "InfraLostRun",
    "UndecidedRun",
    "InfraArm",
    "InfraPart",
    "ArmSpend",
    "TaskRep",
    "CriticalFailure",
    "ArmSummary",
    "TaskRow",
    "PairedResult",
    "CriticalRegression",
    "FailureClass",
    "VarianceDecomposition",
    "GateCounts",
    "Stratum",
    "Promotion",
    "PromotionGate",
    "RawCounts",
    "CheckRow",
    "CheckTests",
    "RowRates",
    "FailureGroup",
    "MinimumDetectable",
    "RegressionSection",
    "ObservedChange",
    "LedgerRow",
    "StatusDecision",
    "ComparisonPaired",
    "Comparison",
    "DecisionCriticalFailure",
    "GateSummary",
    "RegressionSummary",
    "InfraArmSummary",
    "InfraSummary",
    "ArmEvidence",
    "TamperedByArm",
    "DecisionEvidence",
}


def test_every_record_typeddict_is_held_to_a_schema_object() -> None:
    """A record TypedDict added to shapes/ without its schema object would escape the test above."""
    typed = {
        name
        for name, value in vars(shapes).items()
        if isinstance(value, type) and issubclass(value, dict) and value.__module__.startswith(shapes.__name__ + ".")
    }
    assert typed == set(DESCRIBED) | set(PARTS) | UNSCHEMED


@pytest.mark.parametrize("part", sorted(PARTS))
def test_a_part_is_its_whole_less_the_keys_it_leaves_out(part: str) -> None:
    whole, left_out = PARTS[part]
    assert set(getattr(shapes, part).__annotations__) == set(getattr(shapes, whole).__annotations__) - left_out


def test_a_field_missing_from_the_schema_fails() -> None:
    """The comparison sees a difference: a key the schema does not declare is not equal."""
    obj = schema_object("results", "/$defs/check")
    properties = obj["properties"]
    assert isinstance(properties, dict)
    assert set(shapes.CheckRecord.__annotations__) != set(properties) - {"detail"}
