"""comparison.json has no schema file: shapes.Comparison and its parts are its one declaration. Here what
compare_runs and decision_document write is held to them, key by key and value by value, so a key added
to the writer and not to the TypedDict (or a value of another type) fails."""

from __future__ import annotations

import types
from typing import Any, ForwardRef, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest
from helpers import results_doc

from pytest_agentdrift import shapes
from pytest_agentdrift.compare.comparison import compare_runs
from pytest_agentdrift.compare.gates import GateParams
from pytest_agentdrift.compare.ledger import parse_release_notes
from pytest_agentdrift.compare.status import decision_document
from pytest_agentdrift.vocabulary import RUN_IDENTITY_KEYS


def problems(value: object, hint: Any, path: str = "$") -> list[str]:
    """Where `value` is not what `hint` declares (a TypedDict's keys, their values, recursively)."""
    if hint is shapes.JsonValue or isinstance(hint, (ForwardRef, str)):
        return []  # free-form JSON: its readers narrow it
    if is_typeddict(hint):
        return _typeddict_problems(value, hint, path)
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        options = [problems(value, arg, path) for arg in args]
        return [] if any(not p for p in options) else [f"{path}: {value!r} is none of {hint}"] + min(options, key=len)
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {value!r} is not a list"]
        return [p for i, item in enumerate(value) for p in problems(item, args[0], f"{path}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: {value!r} is not an object"]
        return [p for key, item in value.items() for p in problems(item, args[1], f"{path}.{key}")]
    return _scalar_problems(value, hint, path)


def _typeddict_problems(value: object, hint: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: {value!r} is not an object ({hint.__name__})"]
    hints = get_type_hints(hint)
    found = [f"{path}.{k}: not declared by {hint.__name__}" for k in value if k not in hints]
    found += [f"{path}.{k}: required by {hint.__name__}, missing" for k in hint.__required_keys__ - set(value)]
    for key, item in value.items():
        if key in hints:
            found += problems(item, hints[key], f"{path}.{key}")
    return found


def _scalar_problems(value: object, hint: Any, path: str) -> list[str]:
    if hint is type(None):
        return [] if value is None else [f"{path}: {value!r} is not None"]
    if isinstance(value, bool) and hint is not bool:
        return [f"{path}: {value!r} is a bool, not {hint.__name__}"]
    if hint is float:
        return [] if isinstance(value, (int, float)) else [f"{path}: {value!r} is not a number"]
    return [] if isinstance(value, hint) else [f"{path}: {value!r} is not {hint.__name__}"]


def _runs(
    passes: list[int], *, critical: list[str] = (), tampered: int | None = None, cost: float = 0.01
) -> list[dict]:
    return [
        {
            "rep": rep,
            "outcome": "passed" if ok else "failed",
            "passed": bool(ok),
            "tampered_pass": rep == tampered,
            "critical_failed": list(critical) if not ok else [],
            "layers": {"safety": "pass"},
            "usage": {"input_tokens": 100, "output_tokens": 10, "cached_tokens": None, "cost_usd": cost},
            "spend": {"tokens": 110, "cost_usd": cost},
        }
        for rep, ok in enumerate(passes, start=1)
    ]


def _pair() -> tuple[dict, dict]:
    base = results_doc(
        {
            "T1": {"suite": "core", "runs": _runs([1, 1, 1])},
            "T2": {"suite": "core", "runs": _runs([1, 1, 0], critical=["no_rm"])},
            "T3": {"suite": "extra", "runs": _runs([0, 0, 0])},
            "T4": {"suite": "extra", "runs": _runs([1, 1, 1])},
        }
    )
    cand = results_doc(
        {
            "T1": {"suite": "core", "runs": _runs([0, 0, 0], critical=["no_rm"], cost=0.005)},
            "T2": {"suite": "core", "runs": _runs([1, 1, 1], tampered=2, cost=0.005)},
            "T3": {"suite": "extra", "runs": _runs([1, 1, 1], cost=0.005)},
            "T4": {"suite": "extra", "runs": _runs([1, 0, 1], critical=["keeps_tests"], cost=0.005)},
        },
        runtime_id="sha256:cand",
    )
    return base, cand


NOTES = "version,tag,tasks,text,url\n1.2,model,T3,fixed T3,https://example.com/n\n"


@pytest.mark.parametrize("comparable", [True, False])
def test_a_comparison_and_its_decision_are_what_their_typeddicts_declare(comparable: bool) -> None:
    base, cand = _pair()
    comparison = compare_runs(
        base,
        cand,
        comparable=comparable,
        reasons=[] if comparable else ["agent differs"],
        change_class="model_candidate",
        gate=GateParams(draws=200),
        ledger=parse_release_notes(NOTES),
        rollback_state="verified",
        rollback_evidence={"artifact": "sha256:prev", "restoration": "restored and re-ran T1"},
    )
    assert comparison["comparable"] is comparable
    if comparable:  # every part is there to be held: the gates, the strata, the ledger, the check rows
        assert comparison["regression"] and comparison["regression"]["check_tests"]["rows"]
        assert comparison["strata"] and len(comparison["strata"]) == 2
        assert comparison["ledger"] and comparison["promotion"] and "cost_delta" in comparison["promotion"]
    assert problems(comparison, shapes.Comparison) == []
    assert problems(decision_document(comparison), shapes.Decision) == []


def test_the_checker_finds_an_undeclared_key_a_missing_one_and_a_wrong_value() -> None:
    base, cand = _pair()
    comparison: dict[str, Any] = dict(
        compare_runs(base, cand, comparable=True, reasons=[], change_class=None, gate=GateParams(draws=200))
    )
    comparison["extra"] = 1
    del comparison["seed"]
    comparison["paired"] = {**comparison["paired"], "won": "T3"}
    found = problems(comparison, shapes.Comparison)
    assert any(p.startswith("$.extra: not declared") for p in found)
    assert any(p.startswith("$.seed: required") for p in found)
    assert any(p.startswith("$.paired") for p in found)


def test_a_run_identity_is_the_run_identity_keys() -> None:
    assert tuple(shapes.RunIdentity.__annotations__) == RUN_IDENTITY_KEYS
