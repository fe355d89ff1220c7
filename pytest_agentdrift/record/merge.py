"""One record from shards recorded on several machines (`agentdrift merge`). No pytest.

The caller shows that the shards' manifests are one runtime; here the
results must agree on everything that makes runs comparable (task set,
evaluator, runtime id, plugin version, settings), must not overlap (an item
is one repetition of one task, `T07/r2`, so a task's repetitions may come
from several shards) and, together, must cover every item of the task set.
The merged record is what one unsharded session would have written: tasks
and runs in the same order, the summary recomputed, the shards' run ids kept
as provenance (`merged_from`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from pytest_agentdrift.errors import RecordError
from pytest_agentdrift.shapes import ConfirmPlan, Results, ResumeNote, ShardRecord, TaskEntry
from pytest_agentdrift.tasks.shard import item_key
from pytest_agentdrift.vocabulary import INSTRUCTION_BUNDLE_FILE

#: top-level keys that describe how one shard's session went, not the merged run
_SESSION_ONLY = ("shard", "resumed", "budget", "merged_from")


def universe(tasks: Iterable[str], k: int) -> set[str]:
    """Every item of a task set run k times."""
    return {item_key(t, rep) for t in tasks for rep in range(1, k + 1)}


def merge_shards(shards: list[Results], run_id: str, expected_items: set[str] | None = None) -> Results:
    """Merge complete shard results; RecordError (exit 4) names what does not fit."""
    from pytest_agentdrift.grade.scoring import summarise

    _check_shards_fit(shards)
    tasks = _merged_tasks(shards)
    ran = {item_key(tid, r["rep"]) for tid, t in tasks.items() for r in t["runs"]}
    confirm, not_needed = _merged_confirm(shards)
    both = sorted(ran & set(not_needed.values()))
    if both:
        raise RecordError(f"item(s) both run and skipped as not needed: {', '.join(both[:10])}")
    if expected_items is not None:
        _check_coverage(ran | set(not_needed.values()), expected_items)
    merged: Results = {
        **shards[0],
        "run_id": run_id,
        "started_at": min(sh["started_at"] for sh in shards),
        "finished_at": max(sh["finished_at"] for sh in shards),
        "complete": True,
        "incomplete_reasons": [],
        "tasks": tasks,
        "workers": {f"{sh['run_id']}/{wid}": w for sh in shards for wid, w in sh["workers"].items()},
        "summary": summarise(tasks),
    }
    # the keys of _SESSION_ONLY
    merged.pop("shard", None)
    merged.pop("resumed", None)
    merged.pop("budget", None)
    merged["merged_from"] = [sh["run_id"] for sh in shards]
    if confirm is not None:
        merged["confirm"] = {**confirm, "not_needed": sorted(not_needed)}
    resumed: list[ResumeNote] = [
        {**note, "shard_run_id": sh["run_id"]} for sh in shards for note in sh.get("resumed") or []
    ]
    if resumed:
        merged["resumed"] = resumed
    return merged


def _check_shards_fit(shards: list[Results]) -> None:
    """Complete shards of one task set, evaluator, runtime and settings, from one split, each given once."""
    if not shards:
        raise RecordError("nothing to merge")
    for sh in shards:
        if not sh.get("complete"):
            reasons = "; ".join(sh.get("incomplete_reasons") or [])[:300] or "marked incomplete"
            raise RecordError(
                f"shard {sh.get('run_id')} is incomplete ({reasons}): finish it with --agent-resume before merging"
            )
    for key in ("task_set_id", "evaluator_id", "runtime_id", "plugin_version", "settings"):
        values = {repr(sh.get(key)) for sh in shards}
        if len(values) > 1:
            raise RecordError(f"shards differ in {key}: {', '.join(sorted(values))}")
    given = [sh.get("shard") for sh in shards]
    if not any(given):
        return
    sharded: list[ShardRecord] = [s for s in given if s]
    if len(sharded) < len(given):
        raise RecordError("some shards were recorded with --agent-shard and some without: merge shards of one split")
    counts = {s["count"] for s in sharded}
    if len(counts) > 1:
        raise RecordError(f"shards of different splits: counts {', '.join(map(str, sorted(counts)))}")
    indices = sorted(s["index"] for s in sharded)
    dupes = sorted({i for i in indices if indices.count(i) > 1})
    if dupes:
        count = next(iter(counts))
        raise RecordError(f"the same shard given twice: {', '.join(f'{i}/{count}' for i in dupes)}")


def _merged_tasks(shards: list[Results]) -> dict[str, TaskEntry]:
    """The shards' tasks in one mapping, each task's runs from every shard in repetition order; no overlap."""
    tasks: dict[str, TaskEntry] = {}
    owner: dict[str, str] = {}
    overlap: list[str] = []
    for sh in shards:
        for tid, task in sh["tasks"].items():
            # where a shard found the task (task_dir) is its machine's, not the task's: it may differ
            meta = {k: v for k, v in task.items() if k not in ("runs", "task_dir")}
            if tid in tasks:
                known = {k: v for k, v in tasks[tid].items() if k not in ("runs", "task_dir")}
                if known != meta:
                    raise RecordError(
                        f"task {tid} differs between shards ({owner.get(tid)} and {sh['run_id']}): task_digest or title"
                    )
                if tasks[tid].get("task_dir") != task.get("task_dir"):
                    tasks[tid].pop("task_dir", None)  # no one place: regrade then needs --tasks
            else:
                tasks[tid] = {**task, "runs": []}
                owner[tid] = sh["run_id"]
            have = {r["rep"] for r in tasks[tid]["runs"]}
            for run in task["runs"]:
                if run["rep"] in have:
                    overlap.append(item_key(tid, run["rep"]))
                tasks[tid]["runs"].append(run)
    if overlap:
        raise RecordError(
            f"shards overlap on {len(overlap)} item(s): {', '.join(sorted(overlap)[:10])}; each item must come from one shard"
        )
    for task in tasks.values():
        task["runs"].sort(key=lambda r: r["rep"])
    return dict(sorted(tasks.items()))


def _merged_confirm(shards: list[Results]) -> tuple[ConfirmPlan | None, dict[str, str]]:
    """The shards' one confirming plan (None when they did not confirm) and every repetition they
    skipped as not needed (nodeid -> item key). A shard runs whole tasks, so its not-needed nodeids
    name tasks of its own record: the nodeid's path is the task's directory relative to the rootdir."""
    plans = [sh.get("confirm") for sh in shards]
    if not any(plans):
        return None, {}
    if not all(plans):
        raise RecordError("some shards were recorded with --agent-confirm and some without: merge shards of one split")
    rules = {repr({k: v for k, v in p.items() if k != "not_needed"}) for p in plans if p}
    if len(rules) > 1:
        raise RecordError(f"shards confirm by different plans: {'; '.join(sorted(rules))}")
    keys: dict[str, str] = {}
    for sh, plan in zip(shards, plans, strict=True):
        dirs = {tid: Path(t["task_dir"]).as_posix() for tid, t in sh["tasks"].items() if t.get("task_dir")}
        for nodeid in plan.get("not_needed") or [] if plan else []:
            where, _, rep = nodeid.rpartition("::r")
            found = [tid for tid, d in dirs.items() if d == where or d.endswith("/" + where)]
            if len(found) != 1 or not rep.isdigit():
                raise RecordError(f"shard {sh['run_id']}: not-needed item {nodeid} names no one task of the shard")
            keys[nodeid] = item_key(found[0], int(rep))
    return plans[0], keys


def _check_coverage(got: set[str], expected_items: set[str]) -> None:
    missing, extra = sorted(expected_items - got), sorted(got - expected_items)
    if missing:
        raise RecordError(
            f"the shards together miss {len(missing)} item(s) of the task set: {', '.join(missing[:10])}"
            + (" ..." if len(missing) > 10 else "")
            + "; record the missing shard(s) or resume them"
        )
    if extra:
        raise RecordError(f"the shards hold item(s) outside the task set: {', '.join(extra[:10])}")


def write_merged(out: Path, shards: list[tuple[Path, Results]], merged: Results) -> None:
    """The merged record at ``out``: the first shard's manifests, every shard's raw runs and blobs,
    the reports and results.json (record/derived.py)."""
    import shutil

    from pytest_agentdrift.record.derived import derived_record
    from pytest_agentdrift.vocabulary import BLOB_DIR, MANIFEST_FILE, SOURCE_MANIFEST_FILE

    first_path = shards[0][0]
    with derived_record(out, merged, "merging") as tmp:
        for name in (MANIFEST_FILE, INSTRUCTION_BUNDLE_FILE, SOURCE_MANIFEST_FILE):
            if (first_path / name).is_file():
                shutil.copyfile(first_path / name, tmp / name)
        for path, results in shards:
            for task in results["tasks"].values():
                for run in task["runs"]:
                    src = path / run["raw"]
                    if src.is_dir():
                        shutil.copytree(src, tmp / run["raw"], copy_function=_link_or_copy)
            if (path / BLOB_DIR).is_dir():  # the final trees' bytes (content-addressed: shards share them)
                shutil.copytree(path / BLOB_DIR, tmp / BLOB_DIR, copy_function=_link_or_copy, dirs_exist_ok=True)


def _link_or_copy(src: str, dst: str) -> None:
    """Raw files of a record never change (every write replaces a file whole), so a merged
    record can share them with its shards: a hard link, or a copy across file systems."""
    import os
    import shutil

    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


__all__ = ["merge_shards", "universe", "write_merged"]
