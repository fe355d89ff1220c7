"""Settings is a declared type kept equal to the option table: one field per row, in its order.

options.TABLE declares every option once (flag, ini twin, parser, default, help); Settings
is written out as a frozen dataclass so that a reader and a type checker see each field's
type. These tests hold the two together: the fields are the rows' names in the rows' order
(then agent_options), each default is the row's, and each type is what the row's parser
and kind give once resolve() has read the option.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path

import pytest

from pytest_agentdrift import options
from pytest_agentdrift.options import OPTIONS, TABLE, Option, Settings

#: what each parser of the table makes of the text it is given
PARSED = {
    options.positive_int: int,
    options.nonneg_int: int,
    options.whole_number: int,
    options.positive_float: float,
    options.nonneg_float: float,
    options.share: float,
    options._path: Path,
    options.env_name: str,
    None: str,
}


def expected_type(decl: Option) -> object:
    """The type of the Settings field of `decl`, from its row alone (resolve_value's rules)."""
    if decl.kind == "flag":
        return bool
    if decl.kind == "list":
        # the limits are KEY=VALUE entries resolved into {key: bytes or count, None: switched off}
        return dict[str, int | None] if isinstance(decl.field_default, dict) else tuple[str, ...]
    one = PARSED[decl.parse]
    return one if decl.default is not None or decl.field_default is not None else one | None


def _default(f: dataclasses.Field) -> object:
    return f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]


def test_settings_is_a_frozen_dataclass():
    assert dataclasses.is_dataclass(Settings) and Settings.__dataclass_params__.frozen  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings().k = 2  # type: ignore[misc]


def test_one_field_per_row_in_the_rows_order_then_agent_options():
    names = [f.name for f in dataclasses.fields(Settings)]
    assert names == [decl.dest for decl in TABLE] + ["agent_options"]


@pytest.mark.parametrize("dest", list(OPTIONS))
def test_each_field_defaults_to_what_its_row_declares(dest):
    f = {f.name: f for f in dataclasses.fields(Settings)}[dest]
    assert _default(f) == _default(OPTIONS[dest].settings_field())
    assert type(_default(f)) is type(_default(OPTIONS[dest].settings_field()))


@pytest.mark.parametrize("dest", list(OPTIONS))
def test_each_field_is_typed_as_its_row_resolves(dest):
    assert typing.get_type_hints(Settings)[dest] == expected_type(OPTIONS[dest])


def _holds(value: object, hint: object) -> bool:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_holds(value, one) for one in typing.get_args(hint))
    if hint is type(None):
        return value is None
    return isinstance(value, typing.get_origin(hint) or hint)  # type: ignore[arg-type]


def test_a_resolved_session_holds_values_of_the_declared_types(tmp_path):
    """resolve() of a session that gives many options, the rest left to their defaults: each
    value is of its field's type."""
    given = {
        "agent": "reference",
        "k": "3",
        "timeout": "2.5",
        "record": str(tmp_path / "rec"),
        "baseline": str(tmp_path / "base"),
        "baseline_window": "4",
        "vary": ["model_id"],
        "gate": "regression",
        "env": ["SOME_NAME"],
        "limits": ["memory=1G"],
        "retry_backoff": "3",
        "max_infra_loss": "10%",
        "seed": "7",
        "keep_workdirs": True,
    }
    ini_defaults = {decl.ini: decl.ini_default for decl in TABLE}
    settings = options.resolve(lambda name: given.get(name.removeprefix("agentdrift_")), ini_defaults.get, tmp_path)
    hints = typing.get_type_hints(Settings)
    wrong = [(d.dest, getattr(settings, d.dest)) for d in TABLE if not _holds(getattr(settings, d.dest), hints[d.dest])]
    assert wrong == []
    assert (settings.k, settings.timeout, settings.max_infra_loss, settings.limits["memory"]) == (3, 2.5, 0.1, 1 << 30)


def test_a_cli_twin_the_row_does_not_declare_is_refused_by_name():
    import argparse

    with pytest.raises(ValueError, match="--agent-k has no agentdrift CLI twin"):
        options.add_cli_flags(argparse.ArgumentParser(), "k")


@pytest.mark.parametrize(
    "baseline,gate,confirm,expected",
    [
        ("pool", "regression", None, 30),  # a gate reading a pool of nightly records: confirmation on
        ("pool", "regression", "0", 0),  # turned off by name
        ("pool", "regression", "12", 12),
        ("pool", None, None, 0),  # no gate: nothing decides on the extra runs
        ("record", "regression", None, 0),  # one record: a pool of a few runs confirms little
    ],
)
def test_confirmation_defaults_on_where_a_gate_reads_a_pool(tmp_path, baseline, gate, confirm, expected):
    (tmp_path / "pool" / "n1").mkdir(parents=True)
    (tmp_path / "pool" / "n1" / "results.json").write_text("{}")
    (tmp_path / "record").mkdir()
    (tmp_path / "record" / "results.json").write_text("{}")
    given = {"agent": "reference", "k": "3", "baseline": str(tmp_path / baseline), "gate": gate, "confirm": confirm}
    ini_defaults = {decl.ini: decl.ini_default for decl in TABLE}
    settings = options.resolve(lambda name: given.get(name.removeprefix("agentdrift_")), ini_defaults.get, tmp_path)
    assert settings.confirm == expected
