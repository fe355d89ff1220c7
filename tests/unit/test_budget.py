"""Budgets, the price table and watching a run live (run/budget.py)."""

from __future__ import annotations

import json

import pytest

from pytest_agentdrift.agents.base import CommandAdapter
from pytest_agentdrift.agents.claude_code import ClaudeCodeAdapter
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.run.budget import (
    Budget,
    RunWatch,
    add_spend,
    load_price_table,
    parse_budget,
    run_exceeded,
    run_spend,
    session_exhausted,
    usage_from_events,
    usage_source,
)


def test_parse_budget():
    b = parse_budget(["tokens=2_000_000", "cost_usd=25", "run_tokens=50000,run_cost_usd=0.5"])
    assert b == Budget(tokens=2_000_000, cost_usd=25.0, run_tokens=50000, run_cost_usd=0.5)
    assert b.per_run() == {"tokens": 50000, "cost_usd": 0.5} and b.session_limited and b.run_limited
    assert Budget().per_run() is None
    for bad, match in (
        (["tokens"], "KEY=VALUE"),
        (["dollars=3"], "KEY=VALUE"),
        (["tokens=1.5"], "whole number"),
        (["cost_usd=-1"], "greater than 0"),
        (["tokens=lots"], "not a number"),
    ):
        with pytest.raises(AgentDriftError, match=match):
            parse_budget(bad)


def test_price_table(tmp_path):
    toml = tmp_path / "prices.toml"
    toml.write_text(
        '[models."claude-sonnet-4-5"]\ninput = 3.0\noutput = 15.0\ncached_input = 0.3\n'
        "[models.default]\ninput = 1.0\noutput = 2.0\n"
    )
    table = load_price_table(toml)
    assert table.lookup("claude-sonnet-4-5-20250929")[0] == "claude-sonnet-4-5"
    assert table.lookup("gpt-5")[0] == "default" and table.lookup(None)[0] == "default"
    usage = {"input_tokens": 1_000_000, "output_tokens": 100_000, "cached_tokens": 2_000_000, "cost_usd": None}
    spend = run_spend(usage, model="claude-sonnet-4-5-20250929", table=table)
    assert spend == {
        "tokens": 1_100_000,
        "cost_usd": pytest.approx(3.0 + 1.5 + 0.6),
        "cost_source": "price_table:claude-sonnet-4-5",
    }
    # Codex counts cached input inside input_tokens: not priced twice
    codex = run_spend({**usage, "input_tokens": 3_000_000}, model="x", table=table, input_includes_cached=True)
    assert codex["cost_usd"] == pytest.approx(1.0 + 0.2 + 2.0)
    # a cost the product reported wins over the table
    assert run_spend({**usage, "cost_usd": 0.42}, model="x", table=table)["cost_source"] == "reported"
    assert run_spend({"input_tokens": None, "output_tokens": None}, table=table) == {
        "tokens": None,
        "cost_usd": None,
        "cost_source": None,
    }


@pytest.mark.parametrize(
    "text, match",
    [
        ("models = 3", "non-empty \\[models\\]"),
        ("[models.x]\ninput = 1\n", "missing output"),
        ("[models.x]\ninput = 1\noutput = -2\n", "expected a number >= 0"),
        ("[models.x]\ninput = 1\noutput = 2\nspeed = 3\n", "unknown field"),
        ("[models\n", "not a valid price table"),
    ],
)
def test_bad_price_table_is_one_error_naming_the_file(tmp_path, text, match):
    p = tmp_path / "p.toml"
    p.write_text(text)
    with pytest.raises(AgentDriftError, match=match) as exc:
        load_price_table(p)
    assert exc.value.path == str(p)


def test_spend_arithmetic_and_limits():
    total = add_spend(
        {"tokens": 10, "cost_usd": None, "cost_source": None},
        None,
        {"tokens": 5, "cost_usd": 0.1, "cost_source": "reported"},
    )
    assert total == {"tokens": 15, "cost_usd": 0.1, "cost_source": "reported"}
    assert session_exhausted(Budget(tokens=15), total) == "session token budget spent: 15 of 15 tokens"
    assert session_exhausted(Budget(tokens=16), total) is None
    assert session_exhausted(Budget(cost_usd=0.1), total).startswith("session cost budget spent")
    assert run_exceeded(Budget(run_tokens=15), total) is None
    assert run_exceeded(Budget(run_tokens=14), total) == "per-run token budget exceeded: 15 > 14 tokens"


def test_usage_events_of_the_generic_protocol():
    u = usage_from_events(
        [
            {"type": "usage", "input_tokens": 10, "output_tokens": 2},
            {"type": "tool_call"},
            {"type": "usage", "input_tokens": 5, "cost_usd": 0.01},
            {"type": "usage", "input_tokens": -3},
        ]
    )
    assert (u.input_tokens, u.output_tokens, u.cost_usd) == (15, 2, 0.01)
    assert usage_from_events([{"type": "message"}]) is None


def test_run_watch_reads_a_claude_stream_in_chunks(tmp_path):
    updates = []
    watch = RunWatch(
        ClaudeCodeAdapter(),
        tmp_path / "events.jsonl",
        budget=Budget(run_tokens=250),
        on_update=updates.append,
        clock=iter(range(0, 1000, 2)).__next__,
    )
    msg = {
        "type": "assistant",
        "message": {
            "id": "m1",
            "model": "claude-x",
            "usage": {"input_tokens": 100, "output_tokens": 20},
            "content": [{"type": "tool_use", "name": "Bash", "input": {"command": "pytest -q"}}],
        },
    }
    data = json.dumps(msg).encode() + b"\n"
    watch.feed(data[:10])
    watch.feed(data[10:])
    watch.feed(data)  # the same message again (one record per content block): counted once
    assert watch.poll() is None
    assert updates[-1] == {"last_event": "Bash: pytest -q", "tokens": 120, "cost_usd": None}
    msg2 = {**msg, "message": {**msg["message"], "id": "m2", "usage": {"input_tokens": 130, "output_tokens": 10}}}
    watch.feed(json.dumps(msg2).encode() + b"\n")
    assert watch.poll() == "per-run token budget exceeded: 260 > 250 tokens"


def test_run_watch_reads_the_generic_events_file(tmp_path):
    events = tmp_path / "events.jsonl"
    watch = RunWatch(CommandAdapter("true"), events, budget=Budget(run_tokens=100))
    assert watch.poll() is None  # no file yet
    events.write_text(
        json.dumps({"type": "usage", "input_tokens": 60})
        + "\n"
        + json.dumps({"type": "tool_call", "name": "edit"})
        + "\n{partial"
    )
    assert watch.poll() is None and watch.last_event == "tool_call: edit"
    with events.open("a") as fh:
        fh.write('"x": 1}\n' + json.dumps({"type": "usage", "output_tokens": 50}) + "\n")
    assert watch.poll() == "per-run token budget exceeded: 110 > 100 tokens"


@pytest.mark.parametrize("size", [500_000, 1 << 20, 3 << 20])
def test_run_watch_skips_a_line_too_long_to_read(tmp_path, size):
    """A line of 1 MiB or more once held the reader at its start for the rest of the run."""
    events = tmp_path / "events.jsonl"
    watch = RunWatch(CommandAdapter("true"), events, budget=Budget(run_tokens=100))
    events.write_text('{"type": "note", "text": "' + "z" * size + '"}\n')
    watch.poll()
    with events.open("a") as fh:
        fh.write(json.dumps({"type": "usage", "input_tokens": 60, "output_tokens": 50}) + "\n")
    assert watch.poll() == "per-run token budget exceeded: 110 > 100 tokens"
    assert watch.long_lines == (size + 30 > (1 << 20))


def test_the_usage_source_is_the_harness_only_where_its_gateway_counted_the_calls():
    class Run:
        def __init__(self, traffic):
            self.model_traffic = traffic

    assert usage_source(Run(None)) == "agent"  # no gateway: the agent's own reports
    assert usage_source(Run({"calls": 0})) == "agent"
    # calls seen, but streams without usage: nothing counted, the agent's word stands
    assert usage_source(Run({"calls": 2, "usage": {"input_tokens": None, "output_tokens": None}})) == "agent"
    assert usage_source(Run({"calls": 2, "usage": {"input_tokens": 500, "output_tokens": None}})) == "harness"
