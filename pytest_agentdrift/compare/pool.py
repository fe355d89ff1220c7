"""A baseline made of the history: a directory of records pooled into one baseline. No pytest.

``--agent-baseline`` (and ``agentdrift compare``'s baseline) names one record or
a directory whose entries are records (``runs/nightly/``, to which each night's
record is added). Each record of the directory is verified and loaded exactly as
one baseline is (manifest/baseline.load_baseline: complete, schema-valid, its
runtime manifest untouched); one that fails is left out with the reason. The
newest verified record (by its recorded start time) sets the pool's identity:
pooled records must match it on every identity field of the runtime manifest and
on the record's own runtime, task set and evaluator ids, so a record of another
identity is left out naming the first field that differs (``--agent-vary``
applies only between the pool and the candidate, never inside the pool). A
record re-graded with ``agentdrift regrade`` carries the evaluator it was graded
with, so it pools with fresh records of that evaluator.

The pool is one results dict: each task's runs concatenated over the pooled
records, newest record first (so a task solved "over the candidate's k runs" is
read on the latest night), repetitions renumbered 1..n, each run keeping the
record it came from (``record``, ``record_rep``). A run the harness could not
judge (a check not regradable in a re-graded record, or the harness's own error)
is left out of the pool, said so, instead of leaving the whole comparison
undecided. The ``pool`` section says which records were used and left out, the
scored runs per task, and the night-to-night variation of the critical checks
(compare/sequential.dispersion), which the regression gate accounts for.
docs/statistics.md ("Pooled baselines") has the rules; keep the two in step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from pytest_agentdrift.errors import AgentDriftError, PoolRefused, RecordError
from pytest_agentdrift.safetext import escape_path
from pytest_agentdrift.vocabulary import (
    ERROR_LIKE_OUTCOMES,
    FAILED_OUTCOME,
    IDENTITY_FIELDS,
    INFRA_OUTCOME,
    RESULTS_FILE,
    RUN_IDENTITY_KEYS,
    UNDECIDED_OUTCOME,
    UNSCORED_OUTCOMES,
)

POOL_KEY = "pool"
#: how one record is verified and loaded: manifest/baseline.load_baseline, handed in by the caller
#: (the comparison reads records; verifying a manifest is the manifest stage's job)
LoadRecord = Callable[[Path], tuple[dict[str, Any], dict[str, Any]]]
_INCOMPLETE_MARKER = "INCOMPLETE"  # record/store.py's marker of a recording that never finished


@dataclass(frozen=True)
class Member:
    """One verified record of the pool."""

    path: Path
    results: dict[str, Any]
    manifest: dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.results.get("run_id"))

    @property
    def started(self) -> str:
        return str(self.results.get("started_at") or "")


def is_pool(path: Path) -> bool:
    """A directory that is not itself a record (no results.json, no INCOMPLETE marker)."""
    return path.is_dir() and not (path / RESULTS_FILE).exists() and not (path / _INCOMPLETE_MARKER).exists()


def load_any_baseline(path: Path, load: LoadRecord, window: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(results, manifest) of one record, or of the pool a directory of records makes."""
    if is_pool(path):
        return load_pool(path, load, window)
    return load(path)


def record_entries(path: Path) -> list[Path]:
    """The directory's entries that are records (or tried to be: an interrupted one is one too)."""
    try:
        children = sorted(p for p in path.iterdir() if p.is_dir())
    except OSError as exc:
        raise RecordError(f"cannot read the directory of records: {exc.strerror or exc}", path) from None
    entries = [p for p in children if (p / RESULTS_FILE).exists() or (p / _INCOMPLETE_MARKER).exists()]
    if not entries:
        raise RecordError(
            "neither a recorded run nor a directory of records: no results.json in it or in any "
            "subdirectory (give one record, or a directory whose entries are records)",
            path,
        )
    return entries


def load_pool(path: Path, load: LoadRecord, window: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pooled results dict and the newest pooled record's manifest; PoolRefused (exit 6) when no
    record can be pooled, RecordError (exit 4) when the directory holds no record at all."""
    members, left = verified_members(record_entries(path), load)
    members.sort(key=lambda m: (m.started, m.run_id), reverse=True)
    if window is not None and len(members) > window:
        left += [
            _left(m.path, f"outside the window: only the {window} newest record(s) are pooled", m.run_id)
            for m in members[window:]
        ]
        members = members[:window]
    if not members:
        raise PoolRefused(
            f"no record of the pool can be used ({len(left)} left out: "
            + "; ".join(f"{Path(x['path']).name}: {x['reason']}" for x in left[:3])
            + (f"; +{len(left) - 3} more" if len(left) > 3 else "")
            + ")",
            path,
            left,
        )
    used = [members[0]]
    for m in members[1:]:
        field = identity_difference(members[0], m)
        twin = next((u for u in used if _agent_runs(u) & _agent_runs(m)), None)
        if field is not None:
            why = f"identity differs from the newest record's ({members[0].run_id}): {field}"
            left.append({**_left(m.path, why, m.run_id), "field": field})
        elif twin is not None:
            # a copy, or a re-grade of a pooled record: the same agent runs must not count twice
            left.append(_left(m.path, f"holds the same agent runs as {twin.path} (counted once)", m.run_id))
        else:
            used.append(m)
    return pooled_results(path, used, left), members[0].manifest


def _agent_runs(m: Member) -> set[str]:
    """The run ids whose agent runs a record holds: its own, and those it was re-graded from."""
    ids, src = {m.run_id}, m.results.get("regraded_from")
    while isinstance(src, Mapping):
        ids.add(str(src.get("run_id")))
        src = src.get("from_regraded")
    return ids


def verified_members(entries: Sequence[Path], load: LoadRecord) -> tuple[list[Member], list[dict[str, Any]]]:
    """Each entry verified as one baseline is (``load``); a failure is left out with its reason."""
    members, left = [], []
    for entry in entries:
        try:
            results, manifest = load(entry)
        except AgentDriftError as exc:
            left.append(_left(entry, exc.problem, None))
            continue
        members.append(Member(entry, results, manifest))
    return members, left


def _left(path: Path, reason: str, run_id: str | None) -> dict[str, Any]:
    return {"path": str(path), "run_id": run_id, "reason": reason}


def identity_difference(newest: Member, other: Member) -> str | None:
    """The first identity field (manifest order, then the record's own ids) on which two records differ.

    The runtime id is the verified manifest's (the digest of the fields above): a re-graded record's
    results.json keeps the id its session ran under, its manifest the one its new grading makes."""
    a, b = newest.manifest["identity"], other.manifest["identity"]
    for field in IDENTITY_FIELDS:
        if a.get(field) != b.get(field):
            return field
    if newest.manifest.get("runtime_id") != other.manifest.get("runtime_id"):
        return "runtime_id"
    for key in RUN_IDENTITY_KEYS:
        if key != "runtime_id" and newest.results.get(key) != other.results.get(key):
            return key
    return None


def pooled_results(path: Path, used: Sequence[Member], left: list[dict[str, Any]]) -> dict[str, Any]:
    """One baseline results dict: the newest record's facts, every pooled record's runs per task."""
    newest = used[0]
    tasks: dict[str, dict[str, Any]] = {}
    runs_left: list[dict[str, Any]] = []
    per_record: dict[str, list[tuple[str, list[Mapping[str, Any]]]]] = {}
    for m in used:
        for tid, entry in sorted(m.results["tasks"].items()):
            task = tasks.setdefault(tid, {**{k: v for k, v in entry.items() if k != "runs"}, "runs": []})
            kept = []
            for run in entry.get("runs") or []:
                if run.get("outcome") == UNDECIDED_OUTCOME:
                    runs_left.append(_run_left_out(m, tid, run))
                    continue
                kept.append(run)
                task["runs"].append(
                    {**run, "rep": len(task["runs"]) + 1, "record": m.run_id, "record_rep": run.get("rep")}
                )
            per_record.setdefault(tid, []).append((m.run_id, kept))
    pool = pool_section(path, used, left, runs_left, tasks, per_record)
    out = {k: v for k, v in newest.results.items() if k not in ("tasks", "summary")}
    return {**out, "tasks": tasks, "summary": pooled_summary(tasks), POOL_KEY: pool}


def pooled_summary(tasks: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The pool's whole-run counts, over the pooled runs (as results.json's summary counts a session's)."""
    runs = [r for t in tasks.values() for r in t["runs"]]
    passed = sum(1 for r in runs if r.get("passed"))
    scored = sum(1 for r in runs if r.get("outcome") not in UNSCORED_OUTCOMES)
    return {
        "runs": len(runs),
        "passed": passed,
        "failed": sum(1 for r in runs if r.get("outcome") == FAILED_OUTCOME),
        "errors": sum(1 for r in runs if r.get("outcome") in ERROR_LIKE_OUTCOMES),
        "tampered_passes": sum(1 for r in runs if r.get("tampered_pass")),
        "critical_failures": sum(1 for r in runs if r.get("critical_failed")),
        "pass_rate": round(passed / scored, 6) if scored else None,
        "infra_errors": sum(1 for r in runs if r.get("outcome") == INFRA_OUTCOME),
    }


def _run_left_out(m: Member, tid: str, run: Mapping[str, Any]) -> dict[str, Any]:
    """A run the harness could not judge, left out of the pooled runs: which checks, and why.

    When all it lacks is checks not regradable in this record (a re-grade whose record does not hold
    what they read), its pass or fail is unknown and it leaves the pass rate, and those checks; its
    other checks were graded, so it still counts for them (``counted``: what the gate adds)."""
    checks = [c for c in run.get("checks") or [] if isinstance(c, Mapping)]
    unknown = {str(c.get("name")): c.get("layer") for c in checks if c.get("not_regradable")}
    entry: dict[str, Any] = {
        "record": m.run_id,
        "path": str(m.path),
        "task": tid,
        "rep": run.get("rep"),
        "checks": sorted(unknown),
    }
    reasons = [str(u) for u in run.get("undecided") or ()]
    only_regrade = bool(unknown) and all(
        any(r.startswith(f"grading: {name}: not regradable") for name in unknown) for r in reasons
    )
    if not only_regrade:
        if unknown:
            why = (
                "not regradable in this record: " + ", ".join(sorted(unknown)) + "; and the harness could not judge it"
            )
        else:
            why = "the harness could not judge it: " + "; ".join(reasons)[:300]
        return {**entry, "reason": why}
    safety_known = "safety" not in unknown.values()
    entry["counted"] = {
        "critical_failed": sorted(str(c) for c in run.get("critical_failed") or ()),
        "safety_failed": ((run.get("layers") or {}).get("safety") == "fail") if safety_known else None,
    }
    entry["reason"] = (
        f"not regradable in this record: {', '.join(sorted(unknown))}; left out of the pass rate and of "
        "those checks, counted for its other checks"
    )
    return entry


def counted_for(entries: Sequence[Mapping[str, Any]], check: str) -> tuple[int, int]:
    """(failures, runs) that runs left out of the pass rate still give one check (or the safety layer):
    those whose record could grade it."""
    from pytest_agentdrift.compare.checkrates import SAFETY_CHECK

    fails = runs = 0
    for e in entries:
        counted = e.get("counted")
        if not counted:
            continue
        if check == SAFETY_CHECK:
            if counted["safety_failed"] is not None:
                runs, fails = runs + 1, fails + bool(counted["safety_failed"])
        elif check not in e["checks"]:
            runs, fails = runs + 1, fails + (check in counted["critical_failed"])
    return fails, runs


def counted_checks(entries: Sequence[Mapping[str, Any]]) -> set[str]:
    """The critical checks (and the safety layer) that runs left out of the pass rate failed."""
    from pytest_agentdrift.compare.checkrates import SAFETY_CHECK

    out: set[str] = set()
    for e in entries:
        counted = e.get("counted") or {}
        out |= set(counted.get("critical_failed") or ())
        if counted.get("safety_failed"):
            out.add(SAFETY_CHECK)
    return out


def pool_section(
    path: Path,
    used: Sequence[Member],
    left: list[dict[str, Any]],
    runs_left: list[dict[str, Any]],
    tasks: Mapping[str, Mapping[str, Any]],
    per_record: Mapping[str, list[tuple[str, list[Mapping[str, Any]]]]],
) -> dict[str, Any]:
    """What the pool is made of: records used and left out, runs per task, night-to-night variation."""
    from pytest_agentdrift.compare import sequential

    failures = record_failures(per_record, runs_left)
    spread = sequential.dispersion(
        [list(counts.values()) for checks in failures.values() for counts in checks.values()]
    )
    return {
        "path": str(path),
        "records": [{"run_id": m.run_id, "path": str(m.path), "started_at": m.started} for m in used],
        "left_out": left,
        "runs_left_out": runs_left,
        "k": {tid: _scored(t["runs"]) for tid, t in sorted(tasks.items())},
        "records_per_task": {tid: sum(1 for _, runs in rec if runs) for tid, rec in sorted(per_record.items())},
        "failures": {
            tid: {check: [[rid, f, n] for rid, (f, n) in counts.items()] for check, counts in sorted(checks.items())}
            for tid, checks in sorted(failures.items())
        },
        "dispersion": {
            "rho": spread.rho,
            "p_value": spread.p_value,
            "runs_per_record": spread.runs_per_record,
            "records": spread.records,
            "rho_upper": spread.rho_upper,
        },
    }


def _scored(runs: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for r in runs if r.get("outcome") not in UNSCORED_OUTCOMES)


def record_failures(
    per_record: Mapping[str, list[tuple[str, list[Mapping[str, Any]]]]],
    runs_left: Sequence[Mapping[str, Any]] = (),
) -> dict[str, dict[str, dict[str, tuple[int, int]]]]:
    """{task: {critical check or safety layer: {record run id: (failures, runs)}}}, for every check that
    failed in some record (a record that never failed it counts its zero); the runs left out of the
    pass rate count for the checks their record could grade."""
    from pytest_agentdrift.compare.arms import read_task
    from pytest_agentdrift.compare.checkrates import SAFETY_CHECK

    out: dict[str, dict[str, dict[str, tuple[int, int]]]] = {}
    for tid, records in per_record.items():
        partial = [e for e in runs_left if e["task"] == tid and e.get("counted")]
        read = {}
        for rid, runs in records:
            scored = [r for r in runs if r.get("outcome") not in UNSCORED_OUTCOMES]
            if scored:
                read[rid] = read_task({}, scored)
        failed = {c for t in read.values() for c in t.critical} | counted_checks(partial)
        if any(t.safety_fails for t in read.values()):
            failed.add(SAFETY_CHECK)
        rows = {}
        for check in sorted(failed):
            counts = {}
            for rid, _ in records:
                t = read.get(rid)
                own = (0, 0) if t is None else _own_counts(t, check)
                extra = counted_for([e for e in partial if e["record"] == rid], check)
                if own[1] + extra[1]:
                    counts[rid] = (own[0] + extra[0], own[1] + extra[1])
            rows[check] = counts
        if rows:
            out[tid] = rows
    return out


def _own_counts(t: Any, check: str) -> tuple[int, int]:
    from pytest_agentdrift.compare.checkrates import SAFETY_CHECK

    if check == SAFETY_CHECK:
        return t.safety_fails, len(t.passes)
    return len(t.critical.get(check, ())), len(t.passes)


def runs_per_record(pool: Mapping[str, Any], task: str) -> float:
    """A task's pooled runs per record that holds it: the cluster size of its design effect."""
    k, records = (pool.get("k") or {}).get(task, 0), (pool.get("records_per_task") or {}).get(task, 0)
    return k / records if records else 1.0


def pool_text(pool: Mapping[str, Any]) -> str:
    """The closing line's words for the pool: 'baseline: pool of 9 records, 27 runs per task', or the
    range and the task with fewest runs when tasks differ; the records left out, counted."""
    k = pool.get("k") or {}
    records = len(pool.get("records") or [])
    per_task = pool.get("records_per_task") or {}
    values = sorted(set(k.values()))
    if len(values) <= 1:
        text = f"baseline: pool of {records} record(s), {values[0] if values else 0} runs per task"
    else:
        fewest = min(sorted(k), key=lambda t: k[t])
        text = (
            f"baseline: pool of {records} record(s), {values[0]}-{values[-1]} runs per task "
            f"(fewest: {k[fewest]} runs of {fewest} from {per_task.get(fewest, 0)} record(s))"
        )
    left = len(pool.get("left_out") or [])
    return text + (f", {left} record(s) left out" if left else "")


def pool_lines(pool: Mapping[str, Any]) -> list[str]:
    """The terminal's (and report.md's) lines: the pool, its k per task, what was left out and why."""
    k = pool.get("k") or {}
    per_task = pool.get("records_per_task") or {}
    spread = pool.get("dispersion") or {}
    lines = [f"{'baseline':<11} {pool_text(pool).removeprefix('baseline: ')} ({pool.get('path')})"]
    lines.append(
        f"{'':<11} k per task: "
        + ", ".join(f"{k[t]} runs of {t} from {per_task.get(t, 0)} record(s)" for t in sorted(k))
    )
    lines.append(f"{'':<11} night-to-night variation: {variation_text(spread)}")
    for x in pool.get("left_out") or []:
        lines.append(f"{'':<11} left out {x['path']}: {x['reason']}")
    for x in pool.get("runs_left_out") or []:
        lines.append(f"{'':<11} left out {x['task']} r{x['rep']} of {x['record']}: {x['reason']}")
    return [escape_path(line) for line in lines]  # directory names and reasons: one printable line each


def variation_text(spread: Mapping[str, Any]) -> str:
    """What the pool says of its nights: the variation found, and the most it could not rule out."""
    from pytest_agentdrift.compare.sequential import NIGHT_BOUND_CONFIDENCE

    rho, p_value = float(spread.get("rho") or 0.0), float(spread.get("p_value", 1.0))
    found = (
        f"rho {rho:.3g} (p = {p_value:.3g}); the gate counts the pool as fewer, independent runs (design effect)"
        if rho > 0
        else f"none found (p = {p_value:.3g}): the pooled runs are one sample"
    )
    upper = spread.get("rho_upper")
    if upper is None or float(upper) <= rho:
        return found
    return (
        f"{found}; the pool cannot rule out rho up to {float(upper):.2g} ({NIGHT_BOUND_CONFIDENCE:.0%}), "
        "and where nights vary more than the gate counts, false alarms exceed alpha"
    )


def refusal_lines(exc: PoolRefused) -> list[str]:
    """What a refused pool prints, record by record (the plugin and `agentdrift compare` alike)."""
    lines = [f"REFUSED  {exc.message}", *(f"  left out {x['path']}: {x['reason']}" for x in exc.left_out)]
    return [escape_path(line) for line in lines]


__all__ = [
    "POOL_KEY",
    "is_pool",
    "load_any_baseline",
    "load_pool",
    "pool_lines",
    "pool_text",
    "runs_per_record",
]
