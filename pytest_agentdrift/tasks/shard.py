"""Shards: which items one machine of N runs, and where I and N come from. No pytest.

An item is one repetition of one task: the key `T07/r2`. The items of a
session are dealt to N shards (`deal`):

* **balanced**: shard sizes differ by at most one (12 tasks over 4 shards:
  3/3/3/3). When a previous record gives the tasks' durations (the session's
  `--agent-baseline`), the items are dealt longest first, each to the shard
  with the least estimated time among those that still have room, as
  pytest-split's least-duration algorithm does but keeping the counts within
  one; a task the record lacks is estimated at the median of the others;
* **deterministic from the task set**: the same items on every machine,
  worker and run, with no coordination and no state (every xdist worker
  applies it to its own collection and gets the same answer). Ties are
  broken by the sha256 of the item's key, never by collection order, so a
  shard's share depends on which items there are and on the durations, and
  on nothing else. Adding a task can move other items between shards: a
  shard's record is a session of its own, and `agentdrift merge` needs only
  that together the shards cover every item once.

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
from typing import Any, Callable, Iterable, Mapping

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


def _order(key: tuple[str, int]) -> bytes:
    return hashlib.sha256(item_key(*key).encode("utf-8")).digest()


def deal(
    keys: Iterable[tuple[str, int]], count: int, durations: Mapping[str, float] | None = None
) -> dict[tuple[str, int], int]:
    """The 1-based shard of every (task id, repetition) pair (see the module docstring)."""
    items = sorted(set(keys), key=_order)
    known = sorted(v for v in (durations or {}).values() if v is not None and v >= 0)
    if known:
        typical = known[len(known) // 2]

        def estimate(key: tuple[str, int]) -> float:
            value = (durations or {}).get(key[0])
            return float(value) if value is not None and value >= 0 else typical

        items.sort(key=estimate, reverse=True)  # stable: equal estimates keep the hash order
    else:

        def estimate(key: tuple[str, int]) -> float:
            return 1.0

    base, extra = divmod(len(items), count)
    sizes, loads = [0] * count, [0.0] * count
    out: dict[tuple[str, int], int] = {}
    for key in items:
        full = sum(1 for n in sizes if n > base)  # shards that took one of the `extra` items
        room = [i for i in range(count) if sizes[i] < base or (sizes[i] == base and full < extra)]
        i = min(room, key=lambda j: (loads[j], sizes[j], j))
        sizes[i] += 1
        loads[i] += estimate(key)
        out[key] = i + 1
    return out


def durations_from(results: Mapping[str, Any]) -> dict[str, float]:
    """Each task's mean agent time in a recorded run's results.json (what `deal` estimates from)."""
    out: dict[str, float] = {}
    for task_id, task in (results.get("tasks") or {}).items():
        seconds = [
            float(d)
            for r in task.get("runs") or ()
            if isinstance(d := (r.get("evidence") or {}).get("duration_s"), (int, float)) and d >= 0
        ]
        if seconds:
            out[task_id] = sum(seconds) / len(seconds)
    return out


def select(
    keys: Iterable[tuple[str, int]], shard: Shard, durations: Mapping[str, float] | None = None
) -> list[tuple[str, int]]:
    """The (task id, repetition) pairs shard `shard` runs, in the given order."""
    keys = list(keys)
    dealt = deal(keys, shard.count, durations)
    return [k for k in keys if dealt[k] == shard.index]


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


@dataclass(frozen=True)
class IndexedEngine:
    """A launching engine that gives each job its 0-based index and, from the user's own
    configuration, the number of jobs."""

    name: str
    applies: Callable[[Mapping[str, str]], bool]
    index_var: str
    count_var: str
    count_missing: str  # what to tell the user when the count is not set


INDEXED_ENGINES = (
    IndexedEngine(
        "github-actions matrix",
        lambda env: env.get("GITHUB_ACTIONS") == "true" and env.get("AGENTDRIFT_JOB_INDEX") is not None,
        "AGENTDRIFT_JOB_INDEX",
        "AGENTDRIFT_JOB_TOTAL",
        "GitHub Actions sets AGENTDRIFT_JOB_INDEX but not AGENTDRIFT_JOB_TOTAL "
        "(set both in the workflow: ${{ strategy.job-index }} and ${{ strategy.job-total }})",
    ),
    IndexedEngine(
        "kubernetes indexed job",
        lambda env: env.get("JOB_COMPLETION_INDEX") is not None,
        "JOB_COMPLETION_INDEX",
        "AGENTDRIFT_SHARD_COUNT",
        "Kubernetes sets JOB_COMPLETION_INDEX but AGENTDRIFT_SHARD_COUNT is not set "
        "(set it to the Job's completions in the manifest)",
    ),
)


def from_environment(env: Mapping[str, str]) -> Shard:
    """The shard the launching engine asked for (see the module docstring)."""
    if env.get("AGENTDRIFT_SHARD"):
        return parse_shard(env["AGENTDRIFT_SHARD"], "AGENTDRIFT_SHARD")
    for engine in INDEXED_ENGINES:
        if engine.applies(env):
            if not env.get(engine.count_var):
                raise AgentDriftError(f"--agent-shard auto: {engine.count_missing}")
            i, n = _int(env, engine.index_var), _int(env, engine.count_var)
            return _checked(i + 1, n, f"{engine.name} ({engine.index_var}={i}, {engine.count_var}={n})")
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


__all__ = [
    "Shard",
    "item_key",
    "split_key",
    "deal",
    "durations_from",
    "select",
    "parse_shard",
    "from_environment",
    "resolve",
]
