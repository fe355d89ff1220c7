"""The long-run options resolve once, with their ini twins, and refuse bad values as usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.options import OPTIONS, resolve


def settings(cli=None, ini=None):
    cli, ini = cli or {}, ini or {}
    defaults = {d.ini: None for d in OPTIONS.values()}
    return resolve(
        lambda name: cli.get(name.removeprefix("agentdrift_")),
        lambda name: ini.get(name, defaults.get(name)),
        Path("."),
    )


def test_defaults():
    s = settings()
    assert (
        s.retries,
        s.retry_backoff,
        s.max_infra_loss,
        s.resume,
        s.shard,
        s.budget,
        s.progress,
        s.progress_interval,
    ) == (0, 30.0, 0.10, None, None, (), "auto", 30.0)


def test_ini_twins_and_the_command_line_wins():
    s = settings(
        ini={"agent_retries": "2", "agent_max_infra_loss": "25%", "agent_budget": ["tokens=100"], "agent_shard": "2/3"}
    )
    assert (s.retries, s.max_infra_loss, s.budget, s.shard) == (2, 0.25, ("tokens=100",), "2/3")
    s = settings(cli={"retries": 1, "max_infra_loss": 0.5}, ini={"agent_retries": "2"})
    assert (s.retries, s.max_infra_loss) == (1, 0.5)


def test_resume_records_into_the_resumed_directory():
    s = settings(cli={"resume": "runs/a"})
    assert s.resume == Path("runs/a") and s.record == Path("runs/a") and s.active
    with pytest.raises(AgentDriftError, match="name two records"):
        settings(cli={"resume": "runs/a", "record": "runs/b"})


@pytest.mark.parametrize(
    "ini, match",
    [
        ({"agent_retries": "-1"}, "agent_retries: must be 0 or more"),
        ({"agent_max_infra_loss": "120%"}, "between 0 and 100%"),
        ({"agent_shard": "5/4"}, "need 1 <= I <= N"),
        ({"agent_budget": ["coins=3"]}, "KEY=VALUE"),
        ({"agent_progress_interval": "0"}, "greater than 0"),
    ],
)
def test_bad_values_are_one_usage_error(ini, match):
    with pytest.raises(AgentDriftError, match=match):
        settings(ini=ini)
