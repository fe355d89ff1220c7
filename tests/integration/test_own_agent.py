"""Your own agent on an ordinary developer machine, as a new user runs it.

Python from a version manager (a pyenv-like shim tree under a home the sandbox
hides, built here in a temporary directory, so the tests mean the same on a
machine without pyenv), an agent of several files that calls its model API over
HTTPS, the task's own tests run by the agent, a crash. Every session runs under
bubblewrap, the mode that hides the home.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers import run_pytest

from pytest_agentdrift.run.sandbox import detect
from pytest_agentdrift.testing import agent_cmd, agent_script, load_results

pytestmark = [
    pytest.mark.slow,  # every test starts a sandboxed agent session
    pytest.mark.skipif(detect("auto").mode != "bwrap", reason="bubblewrap cannot run here"),
]


def _session(pytester, *args: str):
    """A pytest session in pytester.path (the project), in a subprocess, under bubblewrap."""
    return run_pytest(pytester, "--agent-isolation", "bwrap", *args, timeout=300)


def _only_run(record: Path, task: str) -> dict:
    return load_results(record)["tasks"][task]["runs"][0]


# ---- the task's toolchain ----------------------------------------------------------------------------
RUNS_THE_TESTS = """
import shutil, subprocess
proc = subprocess.run(["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"], capture_output=True, text=True)
three = subprocess.run(["python3", "-c", "import pytest; print(pytest.__version__)"], capture_output=True, text=True)
report("complete", summary="ran the tests", answer=json.dumps({
    "python": shutil.which("python"),
    "exit": proc.returncode,
    "tail": (proc.stdout + proc.stderr)[-400:],
    "python3_pytest": three.stdout.strip() or three.stderr[-200:],
    "path": os.environ["PATH"],
}))
"""


def _broken_shim_dir(home: Path) -> Path:
    """A version manager's shim directory whose `python` cannot run where its manager is hidden."""
    shims = home / ".pyenv" / "shims"
    shims.mkdir(parents=True)
    for name in ("python", "python3"):
        shim = shims / name
        shim.write_text(f'#!/bin/sh\nexec "{home}/.pyenv/libexec/pyenv" exec "${{0##*/}}" "$@"\n')
        shim.chmod(0o755)
    return shims


def test_the_agent_runs_the_tasks_tests_with_python_from_its_path(pytester, monkeypatch):
    shims = _broken_shim_dir(pytester.path / "home")
    script = agent_script(pytester.path / "agent.py", RUNS_THE_TESTS)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ['PATH']}")
    result = _session(
        pytester,
        "--agent-cmd",
        agent_cmd(script),
        "--agent-suite",
        "builtin",
        "-k",
        "T02",
        "--agent-record",
        "runs/r",
    )
    record = pytester.path / "runs" / "r"
    run = _only_run(record, "T02")
    answer = json.loads(run["report"]["answer"])
    # the task's own tests ran (T02 starts with a failing test: the bug to fix)
    assert answer["exit"] in (0, 1), (answer, result.stdout.str()[-2000:])
    assert " passed" in answer["tail"] or " failed" in answer["tail"], answer
    assert answer["python3_pytest"] == pytest.__version__, answer
    iso = run["evidence"]["isolation"]
    assert iso["agent_path"][0] == "<observers>/toolchain/bin", iso["agent_path"]
    assert str(shims) not in answer["path"].split(os.pathsep)  # a hidden directory is not on PATH
    assert str(shims) not in iso["agent_path"]
    manifest = json.loads((record / "runtime-manifest.json").read_text())
    toolchain = manifest["evidence"]["toolchain"]
    assert toolchain["on_path"] == ["python", "python3"] and toolchain["pytest"] == pytest.__version__


# ---- a generic agent reaches its model API ---------------------------------------------------------------
def _tls_server(tmp: Path):
    """A loopback HTTPS 'model API' with a throwaway certificate for 127.0.0.1."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    seen: list[str] = []

    class Api(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append(body.decode())
            out = json.dumps({"completion": "use pathlib"}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(
        target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    ).start()  # a prompt shutdown()
    return srv, cert.read_text(), seen


CALLS_ITS_API = """
import ssl, urllib.request
ca = Path(os.environ["TMPDIR"]) / "api-ca.pem"
ca.write_text(CERT)
opener = urllib.request.build_opener(
    urllib.request.ProxyHandler(),  # HTTPS_PROXY: the harness's recording proxy
    urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=str(ca))),
)
req = urllib.request.Request(URL, data=b'{"prompt": "how do I join paths?"}', method="POST")
answer = json.loads(opener.open(req, timeout=30).read())["completion"]
report("complete", summary="asked the model", answer=answer)
"""


def test_a_command_agent_calls_its_https_api_through_allow_host(pytester, tmp_path):
    from pytest_agentdrift.testing import make_task

    srv, cert, seen = _tls_server(tmp_path)
    try:
        host = f"127.0.0.1:{srv.server_address[1]}"
        body = f"CERT = {cert!r}\nURL = 'https://{host}/v1/complete'\n" + CALLS_ITS_API
        script = agent_script(pytester.path / "agent.py", body)
        make_task(
            pytester.path,
            "A01",
            checks=[{"name": "fx", "kind": "effects", "layer": "safety", "critical": True}],
            forbidden_effects={"network": True},
        )
        result = _session(
            pytester, "--agent-cmd", agent_cmd(script), "--agent-allow-host", host, "--agent-record", "runs/r"
        )
    finally:
        srv.shutdown()
    run = _only_run(pytester.path / "runs" / "r", "A01")
    assert run["report"] and run["report"]["answer"] == "use pathlib", result.stdout.str()[-3000:]
    assert seen == ['{"prompt": "how do I join paths?"}']
    ev = run["evidence"]
    assert ev["api_requests"] == 1 and ev["network_attempts"] == 0
    assert host in ev["network_policy"]["allowlist"]
    assert run["critical_failed"] == [] and result.ret == 0
    manifest = json.loads((pytester.path / "runs" / "r" / "runtime-manifest.json").read_text())
    assert host in manifest["identity"]["isolation"]["network_allowlist"]


# ---- the agent's program as users install it --------------------------------------------------------
def _version_manager(home: Path, kind: str) -> Path:
    """A version manager's tree under `home` (which the sandbox hides): its shims directory,
    the manager, and one installed 'Python' (a wrapper that marks what started it)."""
    root = home / f".{kind}"
    version = root / "versions" / "3.99" / "bin"
    version.mkdir(parents=True)
    python = version / "python3"
    python.write_text(f'#!/bin/sh\nexport STARTED_BY="{kind} 3.99"\nexec {sys.executable} "$@"\n')
    manager = root / ("libexec/pyenv" if kind == "pyenv" else f"bin/{kind}")
    manager.parent.mkdir(parents=True)
    manager.write_text(
        "#!/bin/sh\n"
        'cmd="$1"; [ $# -gt 0 ] && shift\n'
        f'case "$cmd" in which) echo "{version}/$1" ;; exec) p="$1"; shift; exec "{version}/$p" "$@" ;;\n'
        f'*) p="$(basename "$0")"; exec "{version}/$p" "$cmd" "$@" ;; esac\n'
    )
    shims = root / "shims"
    shims.mkdir()
    for p in (python, manager):
        p.chmod(0o755)
    if kind == "mise":  # mise's shims are links to its own binary, which reads its name from argv[0]
        (shims / "python3").symlink_to(manager)
    else:  # pyenv's and asdf's are scripts that exec the manager (as they write them)
        quoted = f'"{manager}"' if kind == "pyenv" else str(manager)
        (shims / "python3").write_text(f'#!/usr/bin/env bash\nset -e\nexec {quoted} exec "python3" "$@"\n')
        (shims / "python3").chmod(0o755)
    return shims


REPORTS_ITS_PYTHON = """
report("complete", summary="started", answer=os.environ.get("STARTED_BY", "not by a version manager"))
"""


@pytest.mark.parametrize("kind", ["pyenv", "asdf", "mise"])
def test_python3_from_a_version_managers_shim_under_a_hidden_home(pytester, monkeypatch, kind):
    from pytest_agentdrift.testing import make_task

    shims = _version_manager(pytester.path / "home", kind)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ['PATH']}")
    agent_script(pytester.path / "agent.py", REPORTS_ITS_PYTHON)
    make_task(pytester.path, "S01")
    result = _session(pytester, "--agent-cmd", "python3 agent.py", "--agent-record", "runs/r")
    run = _only_run(pytester.path / "runs" / "r", "S01")
    assert run["evidence"]["exit_code"] == 0, result.stdout.str()[-3000:]
    assert run["report"]["answer"] == f"{kind} 3.99"
    additions = run["evidence"]["isolation"]["additions"]
    assert any(f"a shim of {kind}" in a["why"] for a in additions), additions
    assert not any(a["path"].startswith(str(shims)) for a in additions), additions  # the shim itself is not shown
    assert result.ret == 0


HELPERS = """
def plan():
    return "read the task, run the tests"
"""

MAIN = """
import helpers  # a module beside this file: the agent's own code
report("complete", summary=helpers.plan())
"""


def test_an_agent_of_two_files_runs_with_no_flags(pytester):
    from pytest_agentdrift.testing import make_task

    (pytester.path / "my_agent").mkdir()
    (pytester.path / "my_agent" / "helpers.py").write_text(HELPERS)
    agent_script(pytester.path / "my_agent" / "main.py", MAIN)
    make_task(pytester.path, "S01")
    result = _session(pytester, "--agent-cmd", "python3 my_agent/main.py", "--agent-record", "runs/r")
    run = _only_run(pytester.path / "runs" / "r", "S01")
    assert run["report"] and run["report"]["summary"] == "read the task, run the tests", result.stdout.str()[-3000:]
    additions = run["evidence"]["isolation"]["additions"]
    assert {"path": str(pytester.path / "my_agent"), "why": "the agent's own code directory"} in additions
    # the project around it stays hidden
    assert not any(a["path"] == str(pytester.path) for a in additions)
    assert result.ret == 0


def test_an_agent_whose_module_stays_hidden_stops_before_the_first_task(pytester):
    from pytest_agentdrift.testing import make_task

    (pytester.path / "helpers.py").write_text(HELPERS)
    agent_script(pytester.path / "agent.py", MAIN)  # beside it: the project root, which stays hidden
    make_task(pytester.path, "S01")
    result = _session(pytester, "--agent-cmd", "python3 agent.py", "--agent-record", "runs/r")
    assert result.ret == 4
    out = result.stdout.str() + result.stderr.str()
    line = next(ln for ln in out.splitlines() if "helpers.py" in ln)
    assert f"--agent-mount {pytester.path / 'helpers.py'}" in line, line
    assert "Traceback" not in out and not (pytester.path / "runs" / "r" / "results.json").exists()


# ---- start-up failures and crashes ---------------------------------------------------------------------
def test_an_agent_that_cannot_import_its_dependency_is_a_setup_error_not_a_failure(pytester):
    from pytest_agentdrift.testing import make_task

    (pytester.path / "my_agent").mkdir()
    agent_script(pytester.path / "my_agent" / "main.py", "import a_module_nobody_installed\n")
    make_task(pytester.path, "S01")
    result = _session(pytester, "--agent-cmd", "python3 my_agent/main.py", "--agent-record", "runs/r")
    run = _only_run(pytester.path / "runs" / "r", "S01")
    assert run["outcome"] == "infra_error" and run["critical_failed"] == [], run["outcome"]
    infra = run["infra_error"]
    assert infra["class"] == "launch_failed" and infra["source"] == "harness" and infra["believed"]
    assert "ModuleNotFoundError: No module named 'a_module_nobody_installed'" in infra["evidence"]
    assert "launch_failed" in result.stdout.str() and "a_module_nobody_installed" in result.stdout.str()
    assert "1 of 1 run(s) passed" not in result.stdout.str()


CRASHES = """
event("read", path="invoicekit/cli.py")
sys.stderr.write("calling the model\\n")
raise RuntimeError("the provider answered 529 Overloaded")
"""


def test_a_crash_after_start_is_the_runs_error_with_its_stderr_everywhere(pytester):
    from pytest_agentdrift.testing import make_task

    (pytester.path / "my_agent").mkdir()
    agent_script(pytester.path / "my_agent" / "main.py", CRASHES)
    make_task(pytester.path, "S01")
    result = _session(pytester, "--agent-cmd", "python3 my_agent/main.py", "--agent-record", "runs/r")
    record = pytester.path / "runs" / "r"
    run = _only_run(record, "S01")
    assert run["outcome"] == "error", result.stdout.str()[-3000:]
    crash = run["evidence"]["crash"]
    assert crash["exit_code"] == 1
    assert crash["stderr_tail"][-1] == "RuntimeError: the provider answered 529 Overloaded"
    assert "calling the model" in crash["stderr_tail"]
    wanted = "RuntimeError: the provider answered 529 Overloaded"
    assert wanted in result.stdout.str()
    assert "the agent crashed: exit 1" in result.stdout.str()
    assert wanted in (record / "report.md").read_text()
    assert wanted in (record / "report.html").read_text()
    assert result.ret != 0


# ---- the discovery root ---------------------------------------------------------------------------------
def test_a_baseline_outside_the_project_compares_with_the_same_agent(pytester, tmp_path_factory):
    from pytest_agentdrift.testing import make_task

    (pytester.path / "my_agent").mkdir()
    agent_script(pytester.path / "my_agent" / "main.py", "report('complete', summary='nothing to do')\n")
    make_task(pytester.path, "S01")
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "base"
    # this command agent calls no model: its model fields stay unobserved and are accepted by name
    # (no group word accepts what the harness's model gateway can see)
    cmd = ["--agent-cmd", "python3 my_agent/main.py"]
    cmd += [f"--agent-accept-unobserved={f}" for f in ("model_id", "model_endpoint", "model_stamp")]
    first = _session(pytester, *cmd, "--agent-record", str(elsewhere))
    assert first.ret == 0, first.stdout.str()[-2000:]
    # the baseline's path as its own argument: pytest takes it for a path when it looks for its rootdir
    again = _session(pytester, *cmd, "--agent-baseline", str(elsewhere))
    out = again.stdout.str()
    assert again.ret == 0, out[-3000:]
    assert "instruction_hash" not in out and "comparison status" in out


# ---- the canary convicts only the sandbox -----------------------------------------------------------------
WAITS_FOR_THE_INDEXER = """
import time
ready = Path(os.environ["TMPDIR"]) / "READY-{nonce}"
ready.write_text("waiting")
go_on = Path(os.environ["TMPDIR"]) / "GO-ON"
for _ in range(1200):  # the host's scan ends it; a bound, never a timing assumption
    if go_on.exists():
        break
    time.sleep(0.1)
report("complete", summary="scanned: " + go_on.read_text() if go_on.exists() else "never scanned")
"""


def _index_like_a_host_process(nonce: str, found: list[str], stop: threading.Event) -> None:
    """What an indexer or backup does: find the run's files under the temporary directory and
    read every one of them, then let the agent finish."""
    import glob
    import tempfile

    while not stop.is_set():
        for ready in glob.glob(
            os.path.join(tempfile.gettempdir(), "agentdrift-*", "**", f"READY-{nonce}"), recursive=True
        ):
            run_root = Path(ready).parents[2]  # <run>/box/tmp/READY-...
            for path in run_root.rglob("*"):
                try:
                    if path.is_file() and not path.is_symlink():
                        path.read_bytes()
                        found.append(str(path.relative_to(run_root)))
                except OSError:
                    pass
            (Path(ready).parent / "GO-ON").write_text(f"{len(found)} file(s)")
            return
        stop.wait(0.1)


def test_a_host_process_reading_the_runs_files_convicts_nobody(pytester):
    import secrets as _secrets

    from pytest_agentdrift.testing import make_task

    nonce = _secrets.token_hex(8)
    (pytester.path / "my_agent").mkdir()
    agent_script(pytester.path / "my_agent" / "main.py", WAITS_FOR_THE_INDEXER.replace("{nonce}", nonce))
    make_task(
        pytester.path,
        "S01",
        checks=[{"name": "fx", "kind": "effects", "layer": "safety", "critical": True}],
        forbidden_effects={"credential_access": True},
    )
    found: list[str] = []
    stop = threading.Event()
    indexer = threading.Thread(target=_index_like_a_host_process, args=(nonce, found, stop), daemon=True)
    indexer.start()
    try:
        result = _session(pytester, "--agent-cmd", "python3 my_agent/main.py", "--agent-record", "runs/r")
    finally:
        stop.set()
        indexer.join(10)
    run = _only_run(pytester.path / "runs" / "r", "S01")
    assert run["report"]["summary"].startswith("scanned: "), (found, result.stdout.str()[-2000:])
    assert any(Path(f).parts[:2] == ("box", "work") for f in found), found  # the host read the run's files
    assert run["evidence"]["credential_access"] is False, run["evidence"]["credential_canary"]
    assert run["critical_failed"] == [] and result.ret == 0
