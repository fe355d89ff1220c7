"""The copilot preset with a CLI that behaves as Copilot 1.0.102 does without sign-in.

The stand-in `copilot` unpacks itself into its cache directory on `--version`
(as the real one does, 235 MB into ~/.cache/copilot) and, asked to work,
prints no JSON at all, only the real CLI's not-signed-in message, and exits 1.
The session must stop as infrastructure (authentication, exit 4, one closing
line naming the cause), never score the agent, and write nothing into the
user's home. The real CLI is driven in tests/realcli/test_copilot.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_pytest

from pytest_agentdrift.testing import make_task

pytestmark = pytest.mark.slow

REAL = Path(__file__).resolve().parents[1] / "data" / "transcripts" / "copilot"

CLI = """#!/bin/sh
cache="${XDG_CACHE_HOME:-$HOME/.cache}/copilot/pkg"
if [ "$1" = "--version" ]; then
  mkdir -p "$cache" && echo unpacked > "$cache/app.js" && echo state > "$HOME/.copilot-state" || exit 3
  echo ran >> "$(dirname "$0")/version-displays"
  echo "GitHub Copilot CLI 1.0.102."
  exit 0
fi
cat "$(dirname "$0")/not-signed-in.stderr" >&2
exit 1
"""


def test_a_cli_that_prints_no_json_stops_the_session_and_leaves_home_alone(pytester, monkeypatch, tmp_path):
    make_task(pytester.path, "C01")
    bindir, home = tmp_path / "bin", tmp_path / "home"
    bindir.mkdir()
    home.mkdir()
    (bindir / "copilot").write_text(CLI)
    (bindir / "copilot").chmod(0o755)
    (bindir / "not-signed-in.stderr").write_bytes((REAL / "real-not-signed-in.stderr").read_bytes())
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("PATH", f"{bindir}:{__import__('os').environ['PATH']}")
    result = run_pytest(
        pytester,
        "--agent",
        "copilot",
        "--agent-isolation",
        "none",
        "--agent-record",
        "runs/r",
        timeout=300,
    )
    out = result.stdout.str()
    assert result.ret == 4, out
    last = [ln for ln in result.stdout.lines if ln.strip()][-1]
    assert last.startswith("agentdrift: exit 4"), last
    assert "authentication" in last and "No authentication information found" in last, last
    results = json.loads((pytester.path / "runs" / "r" / "results.json").read_text())
    (run,) = results["tasks"]["C01"]["runs"]
    assert run["outcome"] == "infra_error", run["outcome"]
    assert run["infra_error"]["class"] == "authentication"
    # the version was observed, from a scratch home; the user's home is as it was: empty
    manifest = json.loads((pytester.path / "runs" / "r" / "runtime-manifest.json").read_text())
    assert manifest["identity"]["cli_version"].startswith("GitHub Copilot CLI 1.0.102")
    assert results["agent"]["version"] == "GitHub Copilot CLI 1.0.102."
    # one display a session: results.json and the manifest say what the same run of it printed
    assert (bindir / "version-displays").read_text().splitlines() == ["ran"]
    assert list(home.iterdir()) == []
