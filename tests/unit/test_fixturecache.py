"""Results on untouched fixtures kept between sessions (grade/fixturecache.py)."""

from __future__ import annotations

from pytest_agentdrift.grade import fixturecache


def test_entries_round_trip_and_a_broken_entry_is_absent(tmp_path):
    store = fixturecache.FixtureResults(tmp_path / "c")
    assert store.get("k") is None
    store.put("k", {"collected": ["a"], "exec": {"exit_code": 1}})
    assert store.get("k") == {"collected": ["a"], "exec": {"exit_code": 1}}
    (tmp_path / "c" / "k.json").write_text("{not json")
    assert store.get("k") is None
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["k.json"]  # no temporary file left behind
    nowhere = fixturecache.FixtureResults(None)
    nowhere.put("k", {"a": 1})
    assert nowhere.get("k") is None


def test_the_key_moves_with_every_input():
    base = fixturecache.cache_key("task", "pytest:suite", {"isolation": "bwrap", "limits": {"memory": 1}})
    assert base == fixturecache.cache_key("task", "pytest:suite", {"isolation": "bwrap", "limits": {"memory": 1}})
    assert base != fixturecache.cache_key("task2", "pytest:suite", {"isolation": "bwrap", "limits": {"memory": 1}})
    assert base != fixturecache.cache_key("task", "pytest:other", {"isolation": "bwrap", "limits": {"memory": 1}})
    assert base != fixturecache.cache_key("task", "pytest:suite", {"isolation": "none", "limits": {"memory": 1}})
    assert base != fixturecache.cache_key("task", "pytest:suite", {"isolation": "bwrap", "limits": {"memory": 2}})


def test_a_named_directory_is_relative_to_where_it_was_named_and_none_keeps_nothing(tmp_path):
    # the plugin (from the invocation directory) and `agentdrift validate` (from its own) read it so
    assert fixturecache.named_directory("cache", tmp_path) == tmp_path / "cache"
    assert fixturecache.named_directory(str(tmp_path / "abs"), tmp_path / "elsewhere") == tmp_path / "abs"
    assert fixturecache.named_directory("None", tmp_path) is None
