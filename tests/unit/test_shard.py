"""Shard selection and where `auto` reads the shard from (tasks/shard.py)."""

from __future__ import annotations

import pytest

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.tasks.shard import Shard, from_environment, parse_shard, resolve, select, shard_of


def items(tasks, k):
    return [(t, r) for t in tasks for r in range(1, k + 1)]


def test_every_item_in_exactly_one_shard():
    keys = items([f"T{i:03d}" for i in range(50)], 3)
    shards = [select(keys, Shard(i, 4, "option")) for i in range(1, 5)]
    flat = [k for sh in shards for k in sh]
    assert sorted(flat) == sorted(keys) and len(flat) == len(set(flat))


def test_deterministic():
    keys = items(["A", "B", "C"], 2)
    assert select(keys, Shard(2, 3, "x")) == select(list(keys), Shard(2, 3, "y"))
    assert shard_of("T07", 2, 4) == shard_of("T07", 2, 4)


def test_repetitions_spread_exactly_when_k_is_a_multiple_of_n():
    keys = items([f"T{i}" for i in range(7)], 4)
    for i in range(1, 5):
        chosen = select(keys, Shard(i, 4, "x"))
        assert len(chosen) == 7 and sorted({t for t, _ in chosen}) == [f"T{i}" for i in range(7)]


def test_balanced_for_many_tasks():
    keys = items([f"task-{i}" for i in range(1000)], 1)
    sizes = [len(select(keys, Shard(i, 10, "x"))) for i in range(1, 11)]
    assert sum(sizes) == 1000
    assert max(sizes) - min(sizes) < 100  # expected spread about 2 x sqrt(100) = 20


def test_adding_tasks_moves_no_existing_item():
    before = items([f"T{i}" for i in range(30)], 2)
    after = items([f"T{i}" for i in range(30)] + ["NEW1", "AAA"], 2)
    for i in range(1, 6):
        old = set(select(before, Shard(i, 5, "x")))
        new = set(select(after, Shard(i, 5, "x")))
        assert old <= new and all(t in ("NEW1", "AAA") for t, _ in new - old)
    # raising k adds repetitions without moving the existing ones
    more = items([f"T{i}" for i in range(30)], 3)
    for i in range(1, 6):
        assert set(select(before, Shard(i, 5, "x"))) <= set(select(more, Shard(i, 5, "x")))


@pytest.mark.parametrize("text", ["0/4", "5/4", "1/0", "a/b", "3", "-1/2", ""])
def test_bad_shard_spec(text):
    with pytest.raises(AgentDriftError):
        parse_shard(text, "--agent-shard")


def test_auto_reads_a_kubernetes_indexed_job():
    shard = from_environment({"JOB_COMPLETION_INDEX": "2", "AGENTDRIFT_SHARD_COUNT": "4"})
    assert (shard.index, shard.count) == (3, 4)
    assert shard.source == "kubernetes indexed job (JOB_COMPLETION_INDEX=2, AGENTDRIFT_SHARD_COUNT=4)"
    with pytest.raises(AgentDriftError, match="AGENTDRIFT_SHARD_COUNT is not set"):
        from_environment({"JOB_COMPLETION_INDEX": "0"})
    with pytest.raises(AgentDriftError, match="outside"):
        from_environment({"JOB_COMPLETION_INDEX": "4", "AGENTDRIFT_SHARD_COUNT": "4"})


def test_auto_reads_a_github_actions_matrix_and_plain_variables():
    gh = from_environment({"GITHUB_ACTIONS": "true", "AGENTDRIFT_JOB_INDEX": "0", "AGENTDRIFT_JOB_TOTAL": "3"})
    assert (gh.index, gh.count) == (1, 3) and gh.source.startswith("github-actions matrix")
    with pytest.raises(AgentDriftError, match="AGENTDRIFT_JOB_TOTAL"):
        from_environment({"GITHUB_ACTIONS": "true", "AGENTDRIFT_JOB_INDEX": "0"})
    plain = from_environment({"AGENTDRIFT_SHARD": "2/5", "JOB_COMPLETION_INDEX": "0", "AGENTDRIFT_SHARD_COUNT": "9"})
    assert (plain.index, plain.count, plain.source) == (2, 5, "AGENTDRIFT_SHARD")  # the explicit variable wins
    with pytest.raises(AgentDriftError, match="no shard in the environment"):
        from_environment({"GITHUB_ACTIONS": "true"})


def test_resolve():
    assert resolve(None, {}) is None
    assert resolve("3/7", {}).spec == "3/7"
    assert resolve("auto", {"AGENTDRIFT_SHARD": "1/2"}).spec == "1/2"
