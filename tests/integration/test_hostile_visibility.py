"""A hostile agent against what the sandbox shows on purpose for a first-time setup: the CA files its
variables name and the virtual environment its interpreter lies in. Each is shown read-only and
alone: the agent can neither write through it nor read what lies beside it. Under bubblewrap."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import run_pytest

from pytest_agentdrift.run.sandbox import detect
from pytest_agentdrift.testing import agent_script, load_results, make_task

pytestmark = [
    pytest.mark.slow,  # a sandboxed agent session
    pytest.mark.skipif(detect("auto").mode != "bwrap", reason="bubblewrap cannot run here"),
]

PROBES = """
import glob
leaks = []
ca = Path(os.environ["SSL_CERT_FILE"])
venv = Path(sys.prefix)
for secret in (ca.parent / "secret.txt", venv.parent / "secret.txt"):
    try:
        leaks.append("read " + secret.name + ": " + secret.read_text().strip())
    except OSError:
        pass
for target in (ca, venv / "pyvenv.cfg", venv / "planted.py"):
    try:
        with open(target, "a") as fh:
            fh.write("written by the agent\\n")
        leaks.append("wrote " + str(target))
    except OSError:
        pass
listed = [p for p in glob.glob(str(ca.parent / "*")) if not p.endswith(ca.name)]
leaks += ["listed " + p for p in listed]
report("complete", summary="probed", answer=json.dumps(leaks))
"""


def test_shown_ca_files_and_venvs_are_read_only_and_alone(pytester, monkeypatch):
    certs = pytester.path / "certs"
    certs.mkdir()
    (certs / "gateway.pem").write_text("GATEWAY CA\n")
    (certs / "secret.txt").write_text("CA-SIBLING-SECRET\n")
    venv = pytester.path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (pytester.path / "secret.txt").write_text("VENV-SIBLING-SECRET\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(certs / "gateway.pem"))
    (pytester.path / "hostile").mkdir()
    agent_script(pytester.path / "hostile" / "agent.py", PROBES)
    make_task(pytester.path, "S01")
    result = run_pytest(
        pytester, "--agent-isolation", "bwrap",
        "--agent-cmd", "venv/bin/python hostile/agent.py", "--agent-record", "runs/r", timeout=300,
    )  # fmt: skip
    run = load_results(pytester.path / "runs" / "r")["tasks"]["S01"]["runs"][0]
    assert run["report"] and run["report"]["summary"] == "probed", result.stdout.str()[-3000:]
    assert json.loads(run["report"]["answer"]) == []  # every probe found nothing
    assert (certs / "gateway.pem").read_text() == "GATEWAY CA\n"
    assert "written by the agent" not in (venv / "pyvenv.cfg").read_text() and not (venv / "planted.py").exists()
    mounts = run["evidence"]["isolation"]["mounts"]
    assert f"ro {certs / 'gateway.pem'}" in mounts and f"ro {venv}" in mounts, mounts
