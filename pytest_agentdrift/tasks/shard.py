"""Shards: which items one machine of N runs, and where I and N come from. No pytest.

An item is one repetition of one task: the key `T07/r2`. Shard I of N
(1-based) runs the items whose

    (int(sha256(task id)[:16], 16) + repetition - 1) mod N  ==  I - 1

Why this rule:

* **deterministic**: the same items on every machine, worker and run, with no
  coordination and no state (every xdist worker applies it to its own
  collection and gets the same answer);
* **stable when tasks are added**: a task's place depends on its own id
  only, so adding or removing tasks never moves another task's items from
  one shard to another (round-robin over the sorted ids would shift every
  task after the new one). Raising k adds repetitions on the following
  shards without moving the existing ones;
* **balanced**: the k repetitions of a task go to k consecutive shards, so
  with k >= N every shard gets k/N of every task (exactly, when N divides
  k); the task's starting shard is a uniform hash, so with k < N the load is
  balanced in expectation, within about sqrt(items / N) items of the mean
  (benchmarks/bench_long_runs.py prints the spread for 1,000 tasks).

`auto` reads the shard from the engine that launched the session, first
match wins (docs/scale.md has the workflows):

* `AGENTDRIFT_SHARD=I/N`: any engine, the option's own syntax;
* GitHub Actions (`GITHUB_ACTIONS=true`) matrix: `AGENTDRIFT_JOB_INDEX` and
  `AGENTDRIFT_JOB_TOTAL`, set in the workflow from `${{ strategy.job-index }}`
  (0-based) and `${{ strategy.job-total }}`;
* Kubernetes Indexed Job: `JOB_COMPLETION_INDEX` (0-based, set by Kubernetes)
  and `AGENTDRIFT_SHARD_COUNT` (the Job's `completions`, set in the manifest:
  Kubernetes does not expose it to the pod).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Mapping

from pytest_agentdrift.errors import AgentDriftError


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int
    source: str  # "option" or the engine and variables it was read from

    def __post_init__(self) -> None:
        if not (1 <= self.index <= self.count):
            raise AgentDriftError(f"shard {self.index}/{self.count}: the index must be between 1 and the count")

    @property
    def spec(self) -> str:
        return f"{self.index}/{self.count}"

    def to_dict(self) -> dict:
        return {"index": self.index, "count": self.count, "source": self.source}


def item_key(task_id: str, rep: int) -> str:
    return f"{task_id}/r{rep}"


def split_key(key: str) -> tuple[str, int]:
    task_id, _, rep = key.rpartition("/r")
    return task_id, int(rep)


def shard_of(task_id: str, rep: int, count: int) -> int:
    """The 1-based shard that runs repetition `rep` of `task_id` out of `count`."""
    h = int.from_bytes(hashlib.sha256(task_id.encode("utf-8")).digest()[:8], "big")
    return (h + rep - 1) % count + 1


def select(keys: Iterable[tuple[str, int]], shard: Shard) -> list[tuple[str, int]]:
    """The (task id, repetition) pairs shard `shard` runs, in the given order."""
    return [(t, r) for t, r in keys if shard_of(t, r, shard.count) == shard.index]


def parse_shard(text: str, where: str) -> Shard:
    """`I/N` (1-based)."""
    index, sep, count = str(text).strip().partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        raise AgentDriftError(f"{where}: {text!r} is not I/N (for example 2/4) or auto") from None
    if not sep or n < 1 or not 1 <= i <= n:
        raise AgentDriftError(f"{where}: {text!r}: need 1 <= I <= N in I/N")
    return Shard(i, n, "option" if where == "--agent-shard" else where)


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name].strip())
    except ValueError:
        raise AgentDriftError(f"--agent-shard auto: {name}={env[name]!r} is not a whole number") from None


def from_environment(env: Mapping[str, str]) -> Shard:
    """The shard the launching engine asked for (see the module docstring)."""
    if env.get("AGENTDRIFT_SHARD"):
        return parse_shard(env["AGENTDRIFT_SHARD"], "AGENTDRIFT_SHARD")
    if env.get("GITHUB_ACTIONS") == "true" and env.get("AGENTDRIFT_JOB_INDEX") is not None:
        if not env.get("AGENTDRIFT_JOB_TOTAL"):
            raise AgentDriftError(
                "--agent-shard auto: GitHub Actions sets AGENTDRIFT_JOB_INDEX but not AGENTDRIFT_JOB_TOTAL "
                "(set both in the workflow: ${{ strategy.job-index }} and ${{ strategy.job-total }})"
            )
        i, n = _int(env, "AGENTDRIFT_JOB_INDEX"), _int(env, "AGENTDRIFT_JOB_TOTAL")
        return _checked(i + 1, n, f"github-actions matrix (AGENTDRIFT_JOB_INDEX={i}, AGENTDRIFT_JOB_TOTAL={n})")
    if env.get("JOB_COMPLETION_INDEX") is not None:
        if not env.get("AGENTDRIFT_SHARD_COUNT"):
            raise AgentDriftError(
                "--agent-shard auto: Kubernetes sets JOB_COMPLETION_INDEX but AGENTDRIFT_SHARD_COUNT is not set "
                "(set it to the Job's completions in the manifest)"
            )
        i, n = _int(env, "JOB_COMPLETION_INDEX"), _int(env, "AGENTDRIFT_SHARD_COUNT")
        return _checked(i + 1, n, f"kubernetes indexed job (JOB_COMPLETION_INDEX={i}, AGENTDRIFT_SHARD_COUNT={n})")
    raise AgentDriftError(
        "--agent-shard auto: no shard in the environment; set AGENTDRIFT_SHARD=I/N, or on GitHub Actions "
        "AGENTDRIFT_JOB_INDEX/AGENTDRIFT_JOB_TOTAL, or on a Kubernetes Indexed Job AGENTDRIFT_SHARD_COUNT "
        "(docs/scale.md)"
    )


def _checked(index: int, count: int, source: str) -> Shard:
    if count < 1 or not 1 <= index <= count:
        raise AgentDriftError(f"--agent-shard auto: {source}: the index is outside 0..count-1")
    return Shard(index, count, source)


def resolve(option: str | None, env: Mapping[str, str]) -> Shard | None:
    """The session's shard from `--agent-shard` (None when not sharding)."""
    if not option:
        return None
    if option == "auto":
        return from_environment(env)
    return parse_shard(option, "--agent-shard")


__all__ = ["Shard", "item_key", "split_key", "shard_of", "select", "parse_shard", "from_environment", "resolve"]
