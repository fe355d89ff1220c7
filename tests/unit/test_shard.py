"""Shard selection and where `auto` reads the shard from (tasks/shard.py)."""

from __future__ import annotations

import pytest

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.tasks.shard import (
    Shard,
    deal,
    durations_from,
    from_environment,
    parse_shard,
    resolve,
    select,
)


def items(tasks, k):
    return [(t, r) for t in tasks for r in range(1, k + 1)]


def test_every_item_in_exactly_one_shard():
    keys = items([f"T{i:03d}" for i in range(50)], 3)
    shards = [select(keys, Shard(i, 4, "option")) for i in range(1, 5)]
    flat = [k for sh in shards for k in sh]
    assert sorted(flat) == sorted(keys) and len(flat) == len(set(flat))


def test_deterministic_from_the_task_set_not_the_order():
    keys = items(["A", "B", "C"], 2)
    assert select(keys, Shard(2, 3, "x")) == select(list(keys), Shard(2, 3, "y"))
    assert deal(keys, 3) == deal(list(reversed(keys)), 3)
    durations = {"A": 10.0, "B": 200.0, "C": 35.5}
    assert deal(keys, 3, durations) == deal(list(reversed(keys)), 3, dict(reversed(durations.items())))


def test_twelve_tasks_over_four_shards_are_three_each():
    keys = items([f"T{i:02d}" for i in range(1, 13)], 1)
    assert sorted(len(select(keys, Shard(i, 4, "x"))) for i in range(1, 5)) == [3, 3, 3, 3]


@pytest.mark.parametrize("n_tasks,k,n", [(12, 1, 4), (13, 1, 4), (7, 4, 4), (50, 3, 7), (3, 1, 5), (1000, 1, 10)])
def test_shard_sizes_differ_by_at_most_one(n_tasks, k, n):
    keys = items([f"task-{i}" for i in range(n_tasks)], k)
    sizes = [len(select(keys, Shard(i, n, "x"))) for i in range(1, n + 1)]
    assert sum(sizes) == len(keys) and max(sizes) - min(sizes) <= 1
    durations = {f"task-{i}": float((i * 37) % 101) for i in range(n_tasks)}
    sizes = [len(select(keys, Shard(i, n, "x"), durations)) for i in range(1, n + 1)]
    assert sum(sizes) == len(keys) and max(sizes) - min(sizes) <= 1


def test_durations_balance_the_time_not_just_the_count():
    # two long tasks and six short ones over two shards: by count alone the two long ones can
    # land together; by duration they are split
    durations = {"L1": 100.0, "L2": 100.0, **{f"S{i}": 1.0 for i in range(6)}}
    keys = items(sorted(durations), 1)
    dealt = deal(keys, 2, durations)
    assert dealt[("L1", 1)] != dealt[("L2", 1)]
    loads = [sum(durations[t] for (t, _), s in dealt.items() if s == i) for i in (1, 2)]
    assert loads == [103.0, 103.0]
    # a task the record lacks is estimated at the median of the others
    dealt = deal(items(["L1", "L2", "NEW", "S0"], 1), 2, {"L1": 100.0, "L2": 100.0, "S0": 1.0})
    assert dealt[("L1", 1)] != dealt[("L2", 1)]


def test_durations_come_from_a_record():
    results = {
        "tasks": {
            "T01": {"runs": [{"evidence": {"duration_s": 2.0}}, {"evidence": {"duration_s": 4.0}}]},
            "T02": {"runs": [{"evidence": {"duration_s": None}}]},
        }
    }
    assert durations_from(results) == {"T01": 3.0}


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
