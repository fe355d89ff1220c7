"""The options of bundles, ablation, the null experiment and plans: parsing and the checks made before any run."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.options import OPTIONS, add_options, check_experiment_options, resolve


def parse(argv: list[str], ini: dict | None = None):
    parser = argparse.ArgumentParser()
    add_options(parser.add_argument, None)
    ns = parser.parse_args(argv)
    defaults = {d.ini: d.default for d in OPTIONS.values()}
    values = {**defaults, **(ini or {})}
    return resolve(lambda name: getattr(ns, name), lambda name: values.get(name), Path("."))


def test_gate_modes():
    base = {"agent_baseline": "runs/base"}  # a gate decides against a baseline

    def gate(argv, ini=None):
        return parse(argv, {**base, **(ini or {})}).gate

    assert gate([]) is None
    assert gate(["--agent-gate"]) == "promote"  # the bare flag keeps its meaning: the ship / hold gate
    assert gate(["--agent-gate", "drop-it"]) == "drop-it"
    assert gate(["--agent-gate=promote"]) == "promote"
    assert gate(["--agent-gate", "regression"]) == "regression"
    assert gate([], {"agent_gate": "regression"}) == "regression"
    with pytest.raises(AgentDriftError, match="agent_gate"):
        gate([], {"agent_gate": "true"})  # the mode is named, in the ini as on the command line
    assert gate([], {"agent_gate": "drop-it"}) == "drop-it"
    with pytest.raises(SystemExit):
        gate(["--agent-gate", "maybe"])
    with pytest.raises(SystemExit):
        gate(["--agent-gate", "ship"])  # the name bundles once used: promote is the gate's one name
    with pytest.raises(AgentDriftError, match="agent_gate"):
        gate([], {"agent_gate": "maybe"})
    with pytest.raises(AgentDriftError, match="needs --agent-baseline"):
        parse(["--agent-gate", "regression"])


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
        check_experiment_options(settings(**kw), controller=True)


def test_workers_do_not_repeat_the_controller_only_checks():
    check_experiment_options(settings(null=True), controller=False)
