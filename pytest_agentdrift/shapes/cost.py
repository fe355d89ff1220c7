"""The shape of what a gated comparison spent and bought (compare/cost.py): comparison.json and
decision.json both carry it as `cost`."""

from typing import NotRequired, TypedDict


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
