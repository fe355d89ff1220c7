"""What one removed or added item contributes: the effect line, the item gate and the drop-it gate.

Pure functions (no pytest, no I/O). An ablation session runs bundle A minus
an item (``--agent-without``) against a baseline recorded with A; an
addition runs A plus an item (``--agent-with``). Which arm "has the item" is
therefore the baseline for a removal and the candidate for an addition.

* The **effect** of the item is (arm with it) − (arm without it): for a
  removal ``A − B = −delta``, for an addition ``B − A = delta``, with the
  comparison's paired bootstrap interval turned the same way.
* The **item gate** counts only the tasks where the item reached
  the agent's context in the arm that has it (``exposure``, from the run's
  trace and the arm's instruction bundle) and gives ACCEPT / REJECT /
  UNMEASURED / UNCOVERED (KEEP / KILL / RECHECK for an addition) or RERUN.
  The rule and its thresholds are in docs/statistics.md.
* The **drop-it gate** (``--agent-gate drop-it``) answers "may we drop the
  item": only "Drop it" exits 0.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath
from typing import Any

from pytest_agentdrift.compare.behaviour import LOADED
from pytest_agentdrift.compare.stats import scored_passes
from pytest_agentdrift.shapes import Comparison
from pytest_agentdrift.vocabulary import ERROR_OUTCOME

REMOVAL, ADDITION = "removal", "addition"
ACCEPT, REJECT, UNMEASURED, UNCOVERED, RERUN = "ACCEPT", "REJECT", "UNMEASURED", "UNCOVERED", "RERUN"
KEEP, KILL, RECHECK = "KEEP", "KILL", "RECHECK"
DROP_IT, KEEP_IT = "Drop it", "Keep it"


@dataclass(frozen=True)
class ItemGateParams:
    """Thresholds of the item gate (the protocol's defaults; docs/statistics.md).

    tau: a task whose pass rate drops by more than this share (one run in
        three, with a margin) is broken by the change.
    margin: net runs won or lost that decide on their own.
    accept_rate: pass rate on the exposed tasks that makes the arm after the
        change good enough to accept (a removal) or keep (an addition).
    """

    tau: float = 0.34
    margin: int = 2
    accept_rate: float = 0.80

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- the item


@dataclass(frozen=True)
class Item:
    kind: str  # removal | addition
    label: str  # as the user named it: CLAUDE.md, .claude/skills/pdf, plugin:./terse
    paths: tuple[tuple[str, str], ...]  # (scope, path or directory prefix): project | user


def item_from_derivation(derivation: Mapping[str, Any] | None) -> Item | None:
    """The item a derived bundle removed or added, or None when the run was not an ablation."""
    if not derivation:
        return None
    without, with_ = list(derivation.get("without") or []), list(derivation.get("with") or [])
    if without and not with_:
        paths = [
            ("user", w[2:].rstrip("/")) if w.startswith("~/") else ("project", w.removeprefix("./").rstrip("/"))
            for w in without
        ]
        return Item(REMOVAL, ", ".join(without), tuple(paths))
    if with_ and not without:
        paths = [tuple(f.split(":", 1)) for f in derivation.get("added_files") or []]
        return Item(ADDITION, ", ".join(with_), tuple((s, p) for s, p in paths))
    return None  # both at once: not one item; the comparison still runs, without an item gate


def _matches(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


# --------------------------------------------------------------------------- exposure


def _entries_for(bundle_doc: Mapping[str, Any] | None, item: Item, task: str) -> list[Mapping[str, Any]]:
    """The arm's instruction entries that belong to the item, for one task's context (and the user's)."""
    out = []
    for e in (bundle_doc or {}).get("entries") or []:
        path, context = str(e.get("path", "")), str(e.get("context", ""))
        for scope, prefix in item.paths:
            if (
                scope == "user"
                and path.startswith("~/")
                and _matches(path[2:], prefix)
                and context in ("user", "session")
            ):
                out.append(e)
            elif (
                scope == "project"
                and context == f"task:{task}"
                and path.startswith(f"task:{task}:")
                and _matches(path[len(f"task:{task}:") :], prefix)
            ):
                out.append({**e, "rel": path[len(f"task:{task}:") :]})
            elif (
                scope == "project"
                and context == "session"
                and path.startswith("project:")
                and _matches(path[8:], prefix)
            ):
                out.append({**e, "rel": path[8:]})
    return out


def _touched(steps: Sequence[Mapping[str, Any]]) -> list[str]:
    return [s["target"] for s in steps if s.get("tool") in ("read", "edit") and isinstance(s.get("target"), str)]


def fired(
    run: Mapping[str, Any], entries: Sequence[Mapping[str, Any]], item: Item, config_paths: set[tuple[str, str]]
) -> bool | None:
    """Whether the item reached the agent's context in this run; None when the run cannot tell (no trace).

    * configuration files (settings, MCP, hooks) and instruction files loaded at
      startup are in effect from the first turn: always;
    * a path-scoped rule: when the agent read or edited a file it applies to;
    * an on-demand memory file: when the agent read or edited something in its directory;
    * a skill / subagent / command: when the agent invoked it (Skill, Task or
      SlashCommand tool naming it) or read its file;
    * anything else: when the agent read, edited or named the file in a command.
    """
    if _in_effect_from_start(entries, item, config_paths):
        return True
    trace = run.get("trace")
    if not trace:
        return None
    steps = trace.get("steps") or []
    touched = _touched(steps)
    if any(_entry_fired(e, steps, touched) for e in entries if e.get("status") in LOADED):
        return True
    return _project_path_used(item, steps, touched)


def _in_effect_from_start(entries: Sequence[Mapping[str, Any]], item: Item, config_paths: set[tuple[str, str]]) -> bool:
    """Whether the item is configuration or an instruction file loaded at startup: in effect from the first turn."""
    is_config = any(scope == s and _matches(p, prefix) for s, p in config_paths for scope, prefix in item.paths)
    return is_config or any(e.get("load") == "startup" and e.get("status") in LOADED for e in entries)


def _entry_fired(e: Mapping[str, Any], steps: Sequence[Mapping[str, Any]], touched: Sequence[str]) -> bool:
    """Whether one loaded entry of the item reached the context, by what loads it: a path-scoped rule,
    an on-demand memory file, a skill / subagent / command; False for any other entry."""
    rel = e.get("rel") or str(e.get("path", "")).split(":", 2)[-1]
    kind, load = e.get("kind"), e.get("load")
    if load == "conditional" and e.get("apply_to"):
        return any(_applies(t, e["apply_to"]) for t in touched)
    if load == "on_demand" and kind == "memory":
        folder = str(PurePosixPath(rel).parent)
        return any(_matches(t, folder) for t in touched)
    if kind in ("skill", "subagent", "command"):
        return _invoked(kind, rel, steps) or any(
            _matches(t, str(PurePosixPath(rel).parent)) if kind == "skill" else t == rel for t in touched
        )
    return False


def _invoked(kind: str, rel: str, steps: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the agent invoked the skill, subagent or command at ``rel`` by name (a Skill, Task or SlashCommand
    step naming it: bare, with a leading slash, or plugin-qualified)."""
    name = PurePosixPath(rel).parent.name if kind == "skill" else PurePosixPath(rel).stem.removesuffix(".agent")
    for s in steps:
        target = str(s.get("target") or "")
        if s.get("tool") in ("Skill", "Task", "SlashCommand", "skill") and (
            target == name or target.lstrip("/") == name or target.endswith(f":{name}")
        ):
            return True
    return False


def _project_path_used(item: Item, steps: Sequence[Mapping[str, Any]], touched: Sequence[str]) -> bool:
    """Whether the agent read or edited one of the item's project paths, or named it in a command."""
    return any(
        any(_matches(t, prefix) for t in touched) or any(prefix in (s.get("command") or "") for s in steps)
        for scope, prefix in item.paths
        if scope == "project"
    )


def _applies(path: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(path, p.replace("**/", "")) for p in patterns)


def exposure(
    with_results: Mapping[str, Any],
    bundle_doc: Mapping[str, Any] | None,
    item: Item,
    config_paths: set[tuple[str, str]],
) -> dict[str, Any]:
    """Per task: runs of the arm with the item in which it fired, and runs that cannot tell."""
    per_task: dict[str, dict[str, int]] = {}
    for tid, task in sorted(with_results.get("tasks", {}).items()):
        entries = _entries_for(bundle_doc, item, tid)
        row = {"runs": 0, "fired": 0, "unknown": 0}
        for run in task.get("runs", []):
            row["runs"] += 1
            f = fired(run, entries, item, config_paths)
            if f is None:
                row["unknown"] += 1
            elif f:
                row["fired"] += 1
        per_task[tid] = row
    return per_task


# --------------------------------------------------------------------------- the gates


@dataclass
class _ExposedTally:
    """The exposed tasks' scored runs, both arms."""

    gain: int = 0  # G: runs the candidate passes more (scaled to the baseline's scored runs)
    worst_drop: float = 0.0  # D: the largest pass-rate drop on one task
    after_pass: int = 0
    after_runs: int = 0
    solved_any: bool = False
    dropped: list[str] = field(default_factory=list)
    unscorable: list[str] = field(default_factory=list)


def _tally(tasks: list[str], base: Mapping[str, Any], cand: Mapping[str, Any]) -> _ExposedTally:
    t = _ExposedTally()
    for tid in tasks:
        pa, na = scored_passes(base["tasks"][tid]["runs"])
        pb, nb = scored_passes(cand["tasks"][tid]["runs"])
        if not na or not nb:  # every run of an arm lost to infrastructure: nothing to score
            t.unscorable.append(tid)
            continue
        t.gain += pb - pa if na == nb else round(pb * na / nb) - pa
        drop = pa / na - pb / nb
        t.worst_drop = max(t.worst_drop, drop)
        if drop > 0:
            t.dropped.append(tid)
        t.after_pass, t.after_runs = t.after_pass + pb, t.after_runs + nb
        t.solved_any |= pa > 0 or pb > 0
        if any(r.get("outcome") == ERROR_OUTCOME for arm in (base, cand) for r in arm["tasks"][tid]["runs"]):
            t.unscorable.append(tid)
    return t


def item_gate(
    item: Item,
    base: Mapping[str, Any],
    cand: Mapping[str, Any],
    exposed: Mapping[str, Mapping[str, int]],
    params: ItemGateParams | None = None,
) -> dict[str, Any]:
    """The item gate on the exposed tasks (see the module doc and docs/statistics.md)."""
    params = params or ItemGateParams()
    tasks = sorted(
        t
        for t, row in exposed.items()
        if row["fired"] > 0 and t in cand.get("tasks", {}) and t in base.get("tasks", {})
    )
    with_runs = sum(row["runs"] for row in exposed.values())
    fired_runs = sum(row["fired"] for row in exposed.values())
    unknown = sum(row["unknown"] for row in exposed.values())
    k = max((len(t["runs"]) for t in base.get("tasks", {}).values()), default=0)
    tally = _tally(tasks, base, cand)
    rate_after = tally.after_pass / tally.after_runs if tally.after_runs else None
    out: dict[str, Any] = {
        "kind": item.kind,
        "item": item.label,
        "params": {**params.as_dict(), "k": k},
        "exposed_tasks": tasks,
        "S": len(tasks),
        "G": tally.gain,
        "D": round(tally.worst_drop, 6),
        "fired_runs": fired_runs,
        "with_runs": with_runs,
        "unknown_runs": unknown,
        "pass_rate_after": rate_after,
        "dropped": tally.dropped,
    }
    verdict, why = _item_verdict(item, params, tally, rate_after, unknown, bool(tasks), fired_runs, with_runs)
    if verdict == RECHECK:
        out["recheck"] = {"tasks": tally.dropped, "k": max(2 * k, 3)}
    out["verdict"], out["reason"] = verdict, why
    return out


def _item_verdict(
    item: Item,
    params: ItemGateParams,
    tally: _ExposedTally,
    rate_after: float | None,
    unknown: int,
    reached: bool,
    fired_runs: int,
    with_runs: int,
) -> tuple[str, str]:
    """The verdict: re-run what cannot be told or scored, keep what never reached the agent, else measure."""
    if unknown:
        return RERUN, (
            f"{unknown} run(s) of the arm with the item have no recorded trace, so whether the item "
            "reached the agent cannot be told: re-run both arms with this version"
        )
    if tally.unscorable:
        return (
            RERUN,
            f"runs on exposed task(s) {', '.join(tally.unscorable)} could not be scored (the agent did not start)",
        )
    if not reached:
        return UNMEASURED, f"the item never reached the agent ({fired_runs}/{with_runs} runs); keep"
    return _measured_verdict(item, params, tally, rate_after)


def _measured_verdict(
    item: Item, params: ItemGateParams, tally: _ExposedTally, rate_after: float | None
) -> tuple[str, str]:
    """The verdict once the item reached the agent and every exposed run was scored."""
    g, worst, dropped = tally.gain, tally.worst_drop, tally.dropped
    accept_word, reject_word = (ACCEPT, REJECT) if item.kind == REMOVAL else (KEEP, KILL)
    if not tally.solved_any:
        return UNCOVERED, "neither arm passes any exposed task: repair the item or check the tasks"
    if g <= -params.margin:
        return reject_word, f"the {item.kind} costs {-g} run(s) on the exposed tasks"
    if worst > params.tau:
        return reject_word, (
            f"the {item.kind} breaks {', '.join(dropped[:5])} (pass rate down "
            f"{100 * worst:.0f} pp > {100 * params.tau:.0f} pp)"
        )
    if rate_after is not None and rate_after >= params.accept_rate:
        return (
            accept_word,
            f"the pass rate after the {item.kind} is {100 * rate_after:.0f}% ≥ {100 * params.accept_rate:.0f}% on the exposed tasks",
        )
    if g >= params.margin:
        return accept_word, f"the {item.kind} wins {g} run(s) on the exposed tasks"
    if item.kind == ADDITION:
        return (
            RECHECK,
            f"not decided: {g:+d} run(s), pass rate {100 * (rate_after or 0):.0f}% on the exposed tasks; re-run "
            + (f"the tasks that dropped ({', '.join(dropped)})" if dropped else "with more repetitions"),
        )
    return UNMEASURED, (
        f"the agent passes {100 * (rate_after or 0):.0f}% < {100 * params.accept_rate:.0f}% of "
        "the exposed runs without the item: not enough to accept its removal; keep"
    )


def effect(item: Item, comparison: Comparison) -> dict[str, Any]:
    """(arm with the item) − (arm without it), with the paired interval."""
    paired = comparison.get("paired")
    sign = -1 if item.kind == REMOVAL else 1
    delta, delta_ci, method = (
        (paired["delta"], paired["delta_ci"], paired["ci_method"]) if paired else (None, None, None)
    )
    if delta is None or delta_ci is None:
        return {
            "item": item.label,
            "formula": "A − B" if item.kind == REMOVAL else "B − A",
            "estimate": None,
            "ci": None,
            "method": None,
        }
    lo, hi = delta_ci
    ci = sorted([sign * lo, sign * hi])
    return {
        "item": item.label,
        "formula": "A − B" if item.kind == REMOVAL else "B − A",
        "estimate": sign * delta + 0.0,
        "ci": [ci[0] + 0.0, ci[1] + 0.0],
        "method": method,
    }


def drop_it_gate(item: Item, gate_result: Mapping[str, Any], comparison: Comparison) -> dict[str, Any]:
    """May the item be dropped (removal) or left out (addition)? Only "Drop it" exits 0."""
    gate = comparison.get("gate") or {}
    blockers = list(gate.get("blockers") or [])
    quality = gate.get("quality_verdict")
    verdict = gate_result["verdict"]
    if not comparison.get("comparable"):
        answer, why = KEEP_IT, "the runs are not comparable"
    elif item.kind == REMOVAL:
        if blockers:
            answer, why = KEEP_IT, "removing it breaks: " + "; ".join(blockers[:3])
        elif quality == "dont_ship":
            answer, why = KEEP_IT, f"the gate says the arm without it is worse ({gate.get('reason')})"
        elif verdict == ACCEPT:
            answer, why = DROP_IT, f"{gate_result['reason']}; the gate does not object ({quality})"
        else:
            answer, why = KEEP_IT, f"item gate {verdict}: {gate_result['reason']}"
    else:
        if verdict == KEEP and quality != "dont_ship" and not blockers:
            answer, why = KEEP_IT, f"{gate_result['reason']}; the gate does not object ({quality})"
        else:
            answer, why = (
                DROP_IT,
                f"item gate {verdict}: {gate_result['reason']}"
                if verdict != KEEP
                else f"the gate objects: {'; '.join(blockers) or gate.get('reason')}",
            )
    return {"answer": answer, "reason": why, "passed": answer == DROP_IT}
