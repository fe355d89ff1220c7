"""What the mount plan says is what the sandbox shows, under bubblewrap (run/mountplan.py)."""

from __future__ import annotations

import secrets
import shutil
import sys

import pytest

from pytest_agentdrift.run import sandbox

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed on this machine"
)


# ---- under bwrap: what the plan says is what the sandbox shows --------------------------------------
@needs_bwrap
def test_the_sandbox_shows_what_the_plan_says(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    shown = tmp_path / "shown"
    (shown / "hidden").mkdir(parents=True)
    (shown / "ok.txt").write_text("ok")
    (tmp_path / "beside.txt").write_text("beside")
    code = f"""
import os
for p in ({str(shown / "ok.txt")!r}, {str(shown / "hidden")!r}, {str(tmp_path / "beside.txt")!r}, "/etc/shadow", "/etc/passwd", "/home", "/root"):
    print(p, os.path.exists(p), os.listdir(p) if os.path.isdir(p) else "")
print("MOUNTINFO")
print(open("/proc/self/mountinfo").read())
"""
    res = sandbox.run(
        [sys.executable, "-c", code],
        cwd=work,
        env={"PATH": "/usr/bin:/bin"},
        isolation=sandbox.detect("bwrap"),
        writable=[work],
        readable=[shown],
        hidden_dirs=[shown / "hidden"],
        timeout_s=30,
        token=secrets.token_hex(8),
    )
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.decode().splitlines()
    assert lines[0] == f"{shown / 'ok.txt'} True "
    assert lines[1] == f"{shown / 'hidden'} False "
    assert lines[2] == f"{tmp_path / 'beside.txt'} False "
    assert lines[3] == "/etc/shadow False "
    assert lines[4] == "/etc/passwd True "
    assert lines[5] == "/home True []" and lines[6].startswith("/root True ")
    assert ".gitconfig" not in lines[6] and ".ssh" not in lines[6]
    mountinfo = res.stdout.decode().split("MOUNTINFO", 1)[1]
    assert str(shown / "hidden") not in mountinfo and str(shown / "ok.txt") in mountinfo
