"""Setup that works the first time: what a new user types for their own agent runs, or stops
with one line that says what to type instead. Every session runs under bubblewrap."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from test_own_agent import _only_run, _session

from pytest_agentdrift.run.sandbox import detect
from pytest_agentdrift.testing import agent_script, make_task

pytestmark = [
    pytest.mark.slow,  # every test starts a sandboxed agent session
    pytest.mark.skipif(detect("auto").mode != "bwrap", reason="bubblewrap cannot run here"),
]


USES_ITS_VENV = """
import agent_dep  # installed into the agent's virtual environment only
report("complete", summary=agent_dep.WORD, answer=sys.prefix)
"""


def test_a_venvs_interpreter_brings_its_venv(pytester):
    venv = pytester.path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "agent_dep.py").write_text("WORD = 'from the venv'\n")
    (pytester.path / "my_agent").mkdir()
    agent_script(pytester.path / "my_agent" / "agent.py", USES_ITS_VENV)
    make_task(pytester.path, "S01")
    result = _session(pytester, "--agent-cmd", "venv/bin/python my_agent/agent.py", "--agent-record", "runs/r")
    run = _only_run(pytester.path / "runs" / "r", "S01")
    assert run["report"] and run["report"]["summary"] == "from the venv", result.stdout.str()[-3000:]
    assert run["report"]["answer"] == str(venv)
    additions = run["evidence"]["isolation"]["additions"]
    assert any(a["path"] == str(venv) and "virtual environment" in a["why"] for a in additions), additions
    assert f"ro {venv}" in run["evidence"]["isolation"]["mounts"]
    assert result.ret == 0


def test_an_unset_agent_env_is_one_usage_error_naming_it(pytester, monkeypatch):
    monkeypatch.delenv("AGENTDRIFT_NOT_SET_ANYWHERE", raising=False)
    agent_script(pytester.path / "agent.py", 'report("complete", summary="ran")\n')
    make_task(pytester.path, "S01")
    result = _session(
        pytester, "--agent-cmd", "python3 agent.py", "--agent-env", "AGENTDRIFT_NOT_SET_ANYWHERE", "--agent-record", "r"
    )
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, out[-3000:]
    lines = [ln for ln in out.splitlines() if "AGENTDRIFT_NOT_SET_ANYWHERE" in ln]
    assert lines and "--agent-env AGENTDRIFT_NOT_SET_ANYWHERE" in lines[0] and "not set" in lines[0], out[-3000:]
    assert "Traceback" not in out and not (pytester.path / "r" / "results.json").exists()


def test_an_unknown_shim_whose_target_the_sandbox_hides_names_agent_mount(pytester, monkeypatch):
    home = pytester.path / "home"
    target = home / ".toolman" / "versions" / "1.0" / "bin" / "python3"
    target.parent.mkdir(parents=True)
    target.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    target.chmod(0o755)
    shims = home / ".toolman" / "shims"
    shims.mkdir()
    (shims / "python3").write_text(f'#!/bin/bash\nexec "{target}" "$@"\n')  # a manager the harness does not know
    (shims / "python3").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ['PATH']}")
    agent_script(pytester.path / "agent.py", 'report("complete", summary="ran")\n')
    make_task(pytester.path, "S01")
    result = _session(pytester, "--agent-cmd", "python3 agent.py", "--agent-record", "runs/r")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, out[-3000:]
    assert "Traceback" not in out
    last = out.strip().splitlines()[-1]
    assert str(target) in out and "--agent-mount" in last, last


READS_ITS_CAS = """
found = {n: Path(os.environ[n]).read_text() for n in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE") if n in os.environ}
report("complete", summary="read", answer=json.dumps(found))
"""


def test_ca_files_named_by_the_agents_variables_are_shown_read_only(pytester, monkeypatch):
    certs = pytester.path / "certs"  # inside the project, which the sandbox hides
    certs.mkdir()
    (certs / "gateway.pem").write_text("GATEWAY CA\n")
    (certs / "bundle.pem").write_text("BUNDLE CA\n")
    (certs / "unpassed.pem").write_text("NOT PASSED\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(certs / "gateway.pem"))  # passed by default
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(certs / "bundle.pem"))  # passed with --agent-env
    monkeypatch.setenv("CURL_CA_BUNDLE", str(certs / "unpassed.pem"))  # never passed: never shown
    agent_script(pytester.path / "agent.py", READS_ITS_CAS)
    make_task(pytester.path, "S01")
    result = _session(
        pytester, "--agent-cmd", "python3 agent.py", "--agent-env", "REQUESTS_CA_BUNDLE", "--agent-record", "runs/r"
    )
    run = _only_run(pytester.path / "runs" / "r", "S01")
    assert run["report"], result.stdout.str()[-3000:]
    import json

    assert json.loads(run["report"]["answer"]) == {"SSL_CERT_FILE": "GATEWAY CA\n", "REQUESTS_CA_BUNDLE": "BUNDLE CA\n"}
    mounts = run["evidence"]["isolation"]["mounts"]
    assert f"ro {certs / 'gateway.pem'}" in mounts, [m for m in mounts if "pem" in m]
    # an --agent-env value is never recorded (it may be a key): the bundle's mount is there, its path scrubbed
    whys = [a["why"] for a in run["evidence"]["isolation"]["additions"]]
    assert "REQUESTS_CA_BUNDLE: CA certificates the agent is passed" in whys, whys
    assert not any("unpassed.pem" in m for m in mounts) and not any(w.startswith("CURL_CA_BUNDLE") for w in whys)
    assert result.ret == 0


def test_an_option_path_that_moves_the_rootdir_is_refused_naming_the_equals_form(pytester, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("agent-install")  # outside the project: the common ancestor is above it
    agent_script(pytester.path / "agent.py", 'report("complete", summary="ran")\n')
    make_task(pytester.path, "S01")
    result = _session(pytester, "--agent-cmd", "python3 agent.py", "--agent-mount", str(elsewhere))
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, out[-3000:]
    lines = [ln for ln in out.splitlines() if "rootdir" in ln]
    assert lines and f"--agent-mount={elsewhere}" in lines[0], out[-3000:]
    assert "Traceback" not in out
    # the = form leaves the rootdir where it was, and the session runs
    result = _session(pytester, "--agent-cmd", "python3 agent.py", f"--agent-mount={elsewhere}")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert f"rootdir: {pytester.path}" in result.stdout.str()
    # a space-form path inside the project moves nothing: no refusal
    (pytester.path / "extra").mkdir()
    result = _session(pytester, "--agent-cmd", "python3 agent.py", "--agent-mount", str(pytester.path / "extra"))
    assert result.ret == 0, result.stdout.str()[-3000:]
