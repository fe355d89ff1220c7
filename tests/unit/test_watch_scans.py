"""The write watcher's scans of new directories: a directory found (and watched) by the scan of the
one above it is not listed again when its own create event arrives, so a deep tree costs its size,
not the square of its depth; what each directory holds is still reported once, however the agent's
creations and the watcher's reads interleave, and a directory made again where one was removed is
listed and watched anew."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

from pytest_agentdrift.run import watch
from pytest_agentdrift.run.watch import WriteWatcher

DEPTH = 300


@pytest.fixture
def work(tmp_path: Path) -> Path:
    work = tmp_path / "box" / "work"
    work.mkdir(parents=True)
    return work


def _created(watcher: WriteWatcher) -> Counter[str]:
    return Counter(e["path"] for e in watcher.events if e["kind"] == "create")


def test_a_deep_tree_made_while_watched_is_each_entry_once_and_each_directory_listed_about_once(work, monkeypatch):
    listed: Counter[str] = Counter()
    scandir = os.scandir

    def counting_scandir(path):
        listed[str(path)] += 1
        return scandir(path)

    monkeypatch.setattr(watch.os, "scandir", counting_scandir)
    watcher = WriteWatcher(work.parent, work).start()
    d = work
    for level in range(DEPTH):
        d = d / f"d{level}"
        d.mkdir()
        (d / "f").write_text("x")
    assert watcher.settle()
    watcher.stop()
    made = [p for p in listed if p.startswith(str(work) + os.sep)]
    created = _created(watcher)
    assert len(created) == 2 * DEPTH and set(created.values()) == {1}, created.most_common(3)
    assert watcher.entries == 2 * DEPTH
    assert len(made) == DEPTH
    # each directory is listed when it is watched, and again at most when its own event finds it
    # unknown (made after its parent's listing): never once for every directory made below it
    assert max(listed[p] for p in made) <= 2, listed.most_common(3)


def test_a_directory_removed_and_made_again_is_listed_and_watched_anew(work):
    watcher = WriteWatcher(work.parent, work).start()
    (work / "d").mkdir()
    (work / "d" / "a").write_text("x")
    assert watcher.settle()
    shutil.rmtree(work / "d")
    (work / "d").mkdir()
    (work / "d" / "b").write_text("x")
    assert watcher.settle()
    (work / "d" / "c").write_text("x")  # after the new directory's own watch
    assert watcher.settle()
    watcher.stop()
    created = _created(watcher)
    assert {f"d/{name}" for name in "abc"} <= set(created), created
    assert created["d"] == 2
