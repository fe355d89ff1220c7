"""Hostile agents against per-run budgets, under bubblewrap.

* a run that writes its usage just before it exits was never held against `run_tokens`:
  only what the live reader saw while it ran counted, and the run passed;
* one usage line over 1 MiB stalled the live reader at its start for the rest of the run,
  so nothing the agent reported after it was ever counted live.

Both fail on the code before the final spend was held against the budget and the reader
skipped long lines, and pass after.
"""

from __future__ import annotations

import pytest
from hostile_helpers import assert_session_went_on, needs_bwrap, run_session, shared

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hostile-budgets"), needs_bwrap()]

BODIES = {
    # its usage, all of it, the moment before it exits: the live reader never sees it in time
    "HU1": """
Path("notes.txt").write_text("done\\n")
report("complete", summary="done")
event("usage", input_tokens=400000, output_tokens=100000)
""",
    # a line too long for the reader, then a usage line over the budget, then it keeps working
    "HU2": """
import time
with open(os.environ["AGENTDRIFT_EVENTS"], "a") as fh:
    fh.write('{"type": "note", "text": "' + "z" * (3 << 20) + '"}\\n')
event("usage", input_tokens=4000, output_tokens=1000)
time.sleep(25)
report("complete", summary="done")
""",
}
TASKS = {"HU1": {"allowed": ["notes.txt"]}, "HU2": {}}


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    return shared(
        tmp_path_factory,
        "budgets",
        lambda root: run_session(root, TASKS, BODIES, "--agent-budget", "run_tokens=1000", timeout=600),
    )


def test_the_session_went_on(session):
    assert_session_went_on(session, list(TASKS))


def test_usage_written_just_before_the_exit_is_held_against_the_budget(session):
    run = session.run("HU1")
    assert run["outcome"] == "over_budget", (run["outcome"], run["evidence"].get("stopped"))
    assert "per-run token budget exceeded: 500,000 > 1,000 tokens" in run["evidence"]["stopped"]
    assert "final spend" in run["evidence"]["stopped"]
    assert run["spend"]["tokens"] == 500_000 and run["spend"]["usage_source"] == "agent"
    assert session.ret != 0


def test_a_line_too_long_for_the_reader_does_not_blind_it(session):
    run = session.run("HU2")
    assert run["outcome"] == "over_budget", (run["outcome"], run["evidence"].get("stopped"))
    # stopped live, long before its 25 s of work: the reader went past the long line
    assert "final spend" not in run["evidence"]["stopped"]
    assert run["evidence"]["duration_s"] < 20, run["evidence"]["duration_s"]
