"""The options of bundles, ablation, the null experiment and plans: parsing and the checks made before any run."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.session.experiments import _check_options
from pytest_agentdrift.session.options import OPTIONS, add_options, resolve


def parse(argv: list[str], ini: dict | None = None):
    parser = argparse.ArgumentParser()
    add_options(parser.add_argument, None)
    ns = parser.parse_args(argv)
    defaults = {d.ini: d.default for d in OPTIONS.values()}
    values = {**defaults, **(ini or {})}
    return resolve(lambda name: getattr(ns, name), lambda name: values.get(name), Path("."))


def test_gate_modes():
    assert parse([]).gate is None
    assert parse(["--agent-gate"]).gate == "promote"  # the bare flag keeps its meaning: the ship / hold gate
    assert parse(["--agent-gate", "drop-it"]).gate == "drop-it"
    assert parse(["--agent-gate=promote"]).gate == "promote"
    assert parse(["--agent-gate", "regression"]).gate == "regression"
    assert parse([], {"agent_gate": "regression"}).gate == "regression"
    with pytest.raises(AgentDriftError, match="agent_gate"):
        parse([], {"agent_gate": "true"})  # the mode is named, in the ini as on the command line
    assert parse([], {"agent_gate": "drop-it"}).gate == "drop-it"
    with pytest.raises(SystemExit):
        parse(["--agent-gate", "maybe"])
    with pytest.raises(SystemExit):
        parse(["--agent-gate", "ship"])  # the name bundles once used: promote is the gate's one name
    with pytest.raises(AgentDriftError, match="agent_gate"):
        parse([], {"agent_gate": "maybe"})


def test_bundle_options_resolve():
    s = parse(
        [
            "--agent",
            "claude-code",
            "--agent-bundle",
            "team",
            "--agent-without",
            "CLAUDE.md",
            "--agent-without",
            "~/.claude/CLAUDE.md",
            "--agent-with",
            "plugin:./terse",
            "--agent-null",
            "--agent-plan",
            "plan.json",
        ]
    )
    assert (s.bundle, s.without, s.with_items, s.null, s.plan) == (
        "team",
        ("CLAUDE.md", "~/.claude/CLAUDE.md"),
        ("plugin:./terse",),
        True,
        Path("plan.json"),
    )
    assert parse([], {"agent_bundles": "shared/bundles"}).bundles == "shared/bundles"


def settings(**kw):
    base = dict(
        without=(),
        with_items=(),
        bundle=None,
        gate=None,
        baseline=None,
        null=False,
        vary=(),
        agent="claude-code",
        cmd=None,
    )
    return SimpleNamespace(**{**base, **kw})


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"without": ("CLAUDE.md",)}, "give --agent-bundle"),
        ({"bundle": "b", "gate": "drop-it"}, "needs exactly|give --agent-without"),
        ({"bundle": "b", "without": ("x",), "gate": "drop-it"}, "give --agent-baseline"),
        ({"null": True}, "give --agent-baseline"),
        ({"null": True, "baseline": "runs/a", "vary": ("model_id",)}, "varies nothing"),
        ({"bundle": "b", "agent": None}, "give the agent preset"),
    ],
)
def test_option_checks_are_one_clear_error(kw, message):
    with pytest.raises(AgentDriftError, match=message):
        _check_options(settings(**kw), controller=True)


def test_workers_do_not_repeat_the_controller_only_checks():
    _check_options(settings(null=True), controller=False)
