"""Fail closed, the rules beside the runs: a product's number out of range is garbage, not a harness
error, and effects not all seen are undecided (tests/integration/test_fail_closed_runs.py runs
an agent through every stage)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("value", [10**400, -(10**400), float("inf"), float("nan"), 10**16, -1, True, "12"])
def test_product_numbers_out_of_range_are_garbage_not_an_error(value):
    from pytest_agentdrift.agents.common import as_float, as_int

    assert as_int(value) is None
    if not (isinstance(value, int) and not isinstance(value, bool) and -(10**15) <= value <= 10**15):
        assert as_float(value) is None


def test_product_numbers_in_range_are_kept():
    from pytest_agentdrift.agents.common import as_float, as_int

    assert as_int(12) == 12 and as_int(12.0) == 12 and as_int(10**15) == 10**15
    assert as_float(0.25) == 0.25 and as_float(3) == 3.0


def _effects_run(writes_outside, watch):
    from types import SimpleNamespace

    return SimpleNamespace(
        network_attempts=[],
        writes_outside=writes_outside,
        git_mutations=[],
        lockfile_changes=[],
        credential_access=False,
        diff=SimpleNamespace(changed=[]),
        work_tree_deleted=False,
        observation={"writes": watch},
    )


def test_effects_are_undecided_when_writes_beside_the_tree_were_not_all_seen():
    from types import SimpleNamespace

    from pytest_agentdrift.grade.kinds.events import check_effects
    from pytest_agentdrift.grade.results import CheckUndecided

    spec = SimpleNamespace(forbidden_effects={"writes_outside": True})
    lost = {"mechanism": "inotify", "dropped_decoy": 3, "queue_overflows": 0, "outside_complete": False}
    with pytest.raises(CheckUndecided, match="3 event\\(s\\) dropped"):
        check_effects(None, spec, _effects_run([], lost), None)
    # what was seen is decided: a write outside fails whatever was lost besides
    passed, detail, _ = check_effects(None, spec, _effects_run(["box/sibling/README.md"], lost), None)
    assert passed is False and "box/sibling/README.md" in detail
    # complete observation, or a record from before the field existed: decided as before
    for watch in ({"mechanism": "inotify", "outside_complete": True}, {"mechanism": "inotify"}):
        assert check_effects(None, spec, _effects_run([], watch), None)[0] is True
