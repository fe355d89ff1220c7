"""The README starts with the two commands a newcomer runs, and CI runs the second one as written."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _blocks() -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```", (ROOT / "README.md").read_text(encoding="utf-8"), re.M | re.S)


def test_the_first_two_commands_are_the_demo_and_the_test_suite_in_a_new_venv():
    demo, tests = (b.strip() for b in _blocks()[:2])
    for command in (demo, tests):
        # system Pythons refuse pip outside a virtual environment (PEP 668)
        assert command.startswith("python3 -m venv .venv && . .venv/bin/activate && python -m pip install"), command
    assert "--agent reference --agent-suite builtin" in demo
    assert "'.[test]'" in tests and "-m pytest -n 2" in tests


def test_ci_runs_the_readme_test_command_verbatim():
    lookup = re.search(r"^test_command=.*?^}\n", (ROOT / ".ci" / "run").read_text(encoding="utf-8"), re.M | re.S)
    assert lookup, ".ci/run no longer reads its test command from the README"
    out = subprocess.run(
        ["bash", "-c", lookup.group(0) + 'printf %s "$test_command"'], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == _blocks()[1].strip()
