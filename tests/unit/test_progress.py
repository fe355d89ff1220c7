"""Progress lines (run/progress.py): in place on a terminal, plain lines otherwise."""

from __future__ import annotations

import os

from pytest_agentdrift.run.progress import ProgressDisplay, StatusBoard, TimeLedger, render, status_line


def test_status_lines():
    now = 1000.0
    running = {
        "worker": "gw0",
        "state": "running",
        "task": "T03",
        "rep": 1,
        "attempt": 2,
        "started": now - 45,
        "timeout_s": 600,
        "last_event": "Bash: pytest -q",
        "tokens": 12034,
        "cost_usd": 0.04,
    }
    assert status_line(running, now) == "gw0   T03 r1 (attempt 2)  45s/10m00s  Bash: pytest -q  12,034 tokens $0.04"
    waiting = {
        "worker": "gw1",
        "state": "backoff",
        "task": "T07",
        "rep": 2,
        "attempt": 3,
        "until": now + 20,
        "last_event": "overloaded: 529",
    }
    assert status_line(waiting, now) == "gw1   T07 r2 waiting 20s before attempt 3: overloaded: 529"
    assert status_line({"worker": "gw2", "state": "idle"}, now) is None
    lines = render([running, waiting, {"state": "idle"}], now, 3, 10, "1,000 tokens")
    assert lines[0] == "agentdrift progress: 3/10 run(s) done, 2 running, spent 1,000 tokens"
    assert len(lines) == 3


def display(tmp_path, tty):
    board = StatusBoard(tmp_path, "gw0", clock=lambda: 100.0)
    board.start("T01", 1, 1, 60)
    board.update({"last_event": "Edit: a.py", "tokens": 5})
    r, w = os.pipe()
    now = [0.0]
    d = ProgressDisplay(
        tmp_path,
        w,
        tty=tty,
        interval=30,
        counts=lambda: (1, 4, None),
        current_column=lambda: 7,
        width=lambda: 80,
        clock=lambda: now[0],
    )
    return d, r, now


def test_plain_lines_have_no_carriage_return_or_escape(tmp_path):
    d, r, now = display(tmp_path, tty=False)
    for t in (100.0, 131.0, 131.5):  # printed, printed again 31 s later, too soon
        now[0] = t
        d.draw()
    d.stop()
    out = os.read(r, 65536).decode()
    assert "\r" not in out and "\x1b" not in out
    assert out.count("agentdrift progress: 1/4 run(s) done, 1 running") == 2
    assert "gw0   T01 r1  31s/1m00s  Edit: a.py  5 tokens" in out
    assert out.startswith("\n")  # pytest's line had text on it: ours start on a new line


def test_tty_redraws_in_place_and_restores_the_cursor(tmp_path):
    d, r, now = display(tmp_path, tty=True)
    now[0] = 100.0
    d.draw()
    d.draw()
    d.erase()
    d.stop()
    out = os.read(r, 65536).decode()
    # drawn below pytest's line, erased line by line, cursor back to column 8 of pytest's line
    erase = "\r\x1b[2K" + "\x1b[1A\x1b[2K" + "\x1b[1A" + "\x1b[8G"
    assert out.count(erase) == 2
    assert out.count("\nagentdrift progress: 1/4 run(s) done, 1 running") == 2


def test_time_ledger_line():
    t = TimeLedger()
    t.add({"item_s": 100, "agent_s": 80, "wait_s": 10, "attempts": 2})
    t.add({"item_s": 50, "agent_s": 45, "wait_s": 0, "attempts": 1})
    assert t.harness_s == 15
    assert t.line(120, "3,000 tokens") == (
        "agentdrift time: 2 run(s) in 3 attempt(s); agent 2m05s, harness 15s (10% of run time), "
        "waiting before retries 10s; wall 2m00s; spent 3,000 tokens"
    )
