"""A worker's decision for one confirming repetition (session/confirm.py): it waits only for its task's
runs up to the look before its own, so the repetitions of one batch run side by side."""

from __future__ import annotations

import json
from types import SimpleNamespace

from pytest_agentdrift.session.confirm import CONFIRM_DIR, NOT_NEEDED, POOLS_FILE, SCREEN_FILE, ConfirmPlugin


def plugin(control, stop):
    settings = SimpleNamespace(k=3, confirm=24, timeout=1)
    longrun = SimpleNamespace(control_dir=str(control), stop_requested=stop, shard=None)
    p = ConfirmPlugin(None, SimpleNamespace(settings=settings, longrun=longrun), None, None, object)
    p.tasks = 12
    return p


def write(control, runs: dict[int, list[str]]):
    where = control / CONFIRM_DIR
    where.mkdir(parents=True, exist_ok=True)
    (where / POOLS_FILE).write_text(json.dumps({"T07": {"fails": {"c": 2}, "runs": 30}}))
    (where / SCREEN_FILE).write_text(json.dumps({"screened": 1}))
    (where / "T07.json").write_text(json.dumps(runs))


def test_a_repetition_of_the_batch_after_a_look_waits_for_that_look_only(tmp_path):
    # r1 failed c (the screen sent T07 on); r4 ... r9 clean: 64 times likelier under the pool's rate than
    # under half the runs, so the look at r9 clears the task. r10 has not reported: r11 does not wait for it.
    write(tmp_path, {1: ["c"], 2: [], 3: [], 4: [], 5: [], 6: [], 7: [], 8: [], 9: []})
    asked = []
    p = plugin(tmp_path, lambda: asked.append(1) or len(asked) > 1)  # one look at the files, no waiting
    assert p._decide(SimpleNamespace(id="T07", timeout_s=1), 11) == f"{NOT_NEEDED}: T07 decided at r9 (clear)"


def test_a_repetition_waits_for_the_look_before_its_batch(tmp_path):
    write(tmp_path, {1: ["c"], 2: [], 3: [], 4: [], 5: [], 6: [], 7: [], 8: []})  # r9 missing: the look at 9 is not in
    asked = []
    p = plugin(tmp_path, lambda: asked.append(1) or len(asked) > 1)
    assert p._decide(SimpleNamespace(id="T07", timeout_s=1), 11) is None  # stopped waiting: runs it
    assert len(asked) == 2  # it did wait


def test_an_undecided_task_runs_its_whole_next_batch(tmp_path):
    write(
        tmp_path, {1: ["c"], 2: [], 3: [], 4: ["c"], 5: [], 6: [], 7: [], 8: [], 9: []}
    )  # one more failure: undecided
    p = plugin(tmp_path, lambda: False)
    assert all(p._decide(SimpleNamespace(id="T07", timeout_s=1), r) is None for r in range(10, 16))


def test_a_shard_runs_until_the_task_is_decided_at_every_screened_count(tmp_path):
    # the pool failed c in 10 of 30 runs; r1 ... r15 fail it 6 times: clear at r15 when all 12 tasks were
    # screened (the lowest level), still open when T07 was the only one. A shard cannot know which (the
    # other shards' screens), so it runs r16: the merged verdict, at the real count, then reads what an
    # unsharded session would have
    where = tmp_path / CONFIRM_DIR
    where.mkdir()
    (where / POOLS_FILE).write_text(json.dumps({"T07": {"fails": {"c": 10}, "runs": 30}}))
    (where / "T07.json").write_text(
        json.dumps({r: ["c"] if x == "c" else [] for r, x in enumerate(".cc.c..ccc.....", 1)})
    )
    p = plugin(tmp_path, lambda: False)
    p.settings.confirm = 30
    task = SimpleNamespace(id="T07", timeout_s=1)
    (where / SCREEN_FILE).write_text(json.dumps({"screened": 12}))
    assert p._decide(task, 16) == f"{NOT_NEEDED}: T07 decided at r15 (clear)"  # S known: decided
    (where / SCREEN_FILE).unlink()
    p.info.longrun.shard = object()
    assert p._decide(task, 16) is None
