"""docs/tasks.md "Add your own task", followed to the letter: every sh block, in order."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test here starts pytest sessions with agents

DOC = Path(__file__).parents[2] / "docs" / "tasks.md"


def sh_blocks() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Add your own task") :]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def test_the_document_has_both_forms():
    blocks = sh_blocks()
    joined = "\n".join(blocks)
    assert len(blocks) >= 6
    assert "agentdrift validate my-tasks/X01-fix-greeting --k 2" in joined
    assert "test_checks.py" in joined


def test_following_the_steps_gives_two_valid_passing_tasks(tmp_path):
    bindir = Path(sys.executable).parent
    script = "set -euo pipefail\n" + "\n".join(sh_blocks())
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"},
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "ok   X01 Fix the greeting" in out
    assert "ok   X02 Fix the greeting (checks as pytest functions)" in out
    assert "2 passed" in out.splitlines()[-1] or "2 passed" in out
    # and the second form really graded with the pytest functions
    assert (tmp_path / "my-tasks" / "X02-greeting-pytest-checks" / "initial-tree.sha256").is_file()
