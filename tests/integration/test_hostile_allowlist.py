"""Hostile agents that go looking for what they must not see: the answer key of
the bundled suite (through the installed package, a source checkout, another
virtual environment, an earlier record), other runs' trees, host unix sockets,
host secrets (/etc/shadow, ~/.gitconfig) and the names of hidden paths in
/proc/self/mountinfo.

Under bubblewrap the agent sees an allow-list (system directories, the
interpreter, the files its command names and its own run directory) and
nothing else, so every probe finds nothing. Under `unshare` and `none` nothing
of the file system is hidden: the probes succeed there, and the record says
so plainly (that is the weaker guarantee those modes give).

One session per isolation mode runs one hostile agent that tries every probe
and prints one `LEAK <class> <what>` line per success.
"""

from __future__ import annotations

import json
import shutil
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import fixture_group, nested_session_env, run_pytest
from hostile_helpers import CountingListener, modes, needs_bwrap, run_session

import pytest_agentdrift
from pytest_agentdrift.tasks.taskdirs import builtin_suite_dir
from pytest_agentdrift.testing import agent_cmd, agent_script, load_results, make_task

pytestmark = pytest.mark.slow


def xdist_group_of(item: pytest.Item) -> str | None:
    # each isolation mode's session is made once, by the worker that runs its readers
    return fixture_group(item, "hostile-allowlist", "probed")


MARKER = "AGENTDRIFT-HIDDEN-MARKER-5b1f"
SIBLING_MARKER = "SIBLING-RUN-MARKER.txt"
SAFETY = [
    {"name": "same", "kind": "unchanged", "layer": "scope"},
    {"name": "effects", "kind": "effects", "layer": "safety", "critical": True},
]


class UnixListener(CountingListener):
    """A unix-socket listener on the host that counts the connections it accepts."""

    def __init__(self, path: str):
        self.path = path
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
        super().__init__(sock, seconds=300)


def _plant(path: Path, text: str = MARKER + "\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


PROBE = """
import glob, socket
leaks = []

def leak(cls, what):
    leaks.append(f"LEAK {cls} {what}")

def readable(path):
    try:
        with open(path, "rb") as fh:
            return fh.read(4096)
    except OSError:
        return None

# the answer key of the bundled suite, through the package the agent can import
try:
    import importlib.util
    spec = importlib.util.find_spec("pytest_agentdrift")
    pkg_dirs = [os.path.dirname(spec.origin)] if spec and spec.origin else []
except Exception:
    pkg_dirs = []
for base in pkg_dirs + [P["suite_parent"]]:
    for sol in sorted(glob.glob(os.path.join(base, "suite", "*", "solution", "**", "*"), recursive=True)):
        if os.path.isfile(sol) and readable(sol) is not None:
            leak("suite", sol)
            break
# a source checkout, build/lib, another virtual environment, an earlier record
for cls, path in P["planted"].items():
    data = readable(path)
    if data is not None and P["marker"].encode() in data:
        leak(cls, path)
# the session's own tasks (the hidden task directory's solution included)
for sol in glob.glob(os.path.join(P["tasks"], "*", "solution", "**", "*"), recursive=True):
    if os.path.isfile(sol) and readable(sol) is not None:
        leak("tasks", sol)
# other runs and sessions of the harness
for path in glob.glob(os.path.join(P["tmp"], "agentdrift-*", "runs", "*", "box", "work", P["sibling_marker"])):
    if readable(path) is not None:
        leak("sibling", path)
# host unix sockets
for name, path in P["sockets"].items():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(path)
        leak("socket", name)
    except OSError as exc:
        print("refused", name, type(exc).__name__)
    finally:
        s.close()
# host secrets, straight into stdout
for path in ["/etc/shadow", "/etc/gshadow", P["gitconfig"], *glob.glob("/etc/ssh/ssh_host_*_key")]:
    data = readable(path)
    if data:
        leak("secret", path)
        sys.stdout.write(data.decode("utf-8", "replace") + "\\n")
# the names of hidden paths
mountinfo = (readable("/proc/self/mountinfo") or b"").decode("utf-8", "replace")
sys.stdout.write("MOUNTINFO-BEGIN\\n" + mountinfo + "MOUNTINFO-END\\n")
for name, path in P["hidden_names"].items():
    if path in mountinfo:
        leak("mountinfo", name)
print("\\n".join(leaks) if leaks else "NOTHING-FOUND")
report("complete", summary=f"{len(leaks)} finding(s)")
"""


@dataclass
class Probed:
    root: Path
    mode: str
    ret: int
    out: str
    stdout: str
    results: dict
    connections: dict[str, int]
    hidden_names: dict[str, str]
    shadow: str | None

    @property
    def run(self) -> dict:
        return self.results["tasks"]["HA1"]["runs"][0]

    def leaks(self, cls: str) -> list[str]:
        return [ln for ln in self.stdout.splitlines() if ln.startswith(f"LEAK {cls} ")]


def _probe_session(root: Path, mode: str) -> Probed:
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.gettempdir())
    planted = {
        # a source checkout of the package with its suite, and its build/lib
        "checkout": _plant(root / "checkout/pytest_agentdrift/suite/T02-x/solution/files/a.py"),
        "build-lib": _plant(root / "checkout/build/lib/pytest_agentdrift/suite/T02-x/solution/files/a.py"),
        # another virtual environment with the package installed
        "other-venv": _plant(
            root / "venv2/lib/python3.11/site-packages/pytest_agentdrift/suite/T02-x/solution/files/a.py"
        ),
        # an earlier record (the baseline's patch)
        "record": _plant(root / "runs/base/raw/T02/r1/diff.patch"),
    }
    # another session's run tree beside ours (what a sibling xdist worker or session leaves in the temp dir)
    sibling = Path(tempfile.mkdtemp(prefix="agentdrift-", dir=tmp))
    _plant(sibling / "runs" / "T01-r1-0000" / "box" / "work" / SIBLING_MARKER)
    sock_dir = Path(tempfile.mkdtemp(prefix="agentdrift-test-sock-", dir="/tmp"))
    listeners = {
        "outside-run": UnixListener(str(root / "host.sock")),
        "under-tmp": UnixListener(str(sock_dir / "host.sock")),
    }
    home = root / "realhome"
    _plant(home / ".gitconfig", f"[user]\n\tname = {MARKER}\n")
    make_task(root / "tasks", "HA1", checks=SAFETY, solution={"README.md": MARKER + "\n"})
    make_task(root / "tasks", "Z99", checks=SAFETY, solution={"README.md": MARKER + "\n"})
    task_dir = root / "tasks" / "HA1-task"
    hidden_names = {
        "task-dir": str(task_dir),
        "suite": str(builtin_suite_dir().resolve()),
        "record": str(root / "runs" / "r"),
    }
    params = {
        "suite_parent": str(Path(pytest_agentdrift.__file__).resolve().parent),
        "tasks": str(root / "tasks"),
        "planted": {k: str(v) for k, v in planted.items()},
        "marker": MARKER,
        "tmp": str(tmp),
        "sibling_marker": SIBLING_MARKER,
        "sockets": {k: v.path for k, v in listeners.items()},
        "gitconfig": str(home / ".gitconfig"),
        "hidden_names": hidden_names,
    }
    body = "P = " + repr(params) + "\n" + PROBE
    try:
        session = run_session(root, {}, {"HA1": body}, isolation=mode, env={"HOME": str(home)})
    finally:
        connections = {k: v.close() for k, v in listeners.items()}
        shutil.rmtree(sibling, ignore_errors=True)
        shutil.rmtree(sock_dir, ignore_errors=True)
    out, results = session.out, session.results
    stdout = (root / "runs" / "r" / "raw" / "HA1" / "r1" / "stdout.txt").read_text()
    try:
        shadow = Path("/etc/shadow").read_text()
    except OSError:
        shadow = None
    return Probed(root, mode, session.ret, out, stdout, results, connections, hidden_names, shadow)


@pytest.fixture(scope="module", params=modes("bwrap", "unshare", "none"))
def probed(request, tmp_path_factory) -> Probed:
    mode = request.param
    s = _probe_session(tmp_path_factory.mktemp(f"allowlist-{mode}"), mode)
    assert "Traceback (most recent call last)" not in s.out, s.out
    assert "INTERNALERROR" not in s.out, s.out
    assert s.results["complete"] is True, s.results["incomplete_reasons"]
    assert s.results["isolation"]["enforced"] == mode
    assert s.results["tasks"]["Z99"]["runs"][0]["outcome"] == "passed", s.out
    return s


def hidden_by_bwrap(s: Probed) -> bool:  # True, or the test is skipped with the weaker guarantee asserted
    """Under bwrap the probes must find nothing. Under unshare / none the weaker guarantee
    holds instead: nothing of the file system is hidden, and the run's record, the
    terminal and report.md say so plainly."""
    if s.mode == "bwrap":
        return True
    iso = s.run["evidence"]["isolation"]
    assert iso["filesystem"] == "not_enforced"
    assert iso["mounts"] == []
    assert any("nothing of the host file system is hidden" in n for n in iso["not_hidden"]), iso
    assert s.results["isolation"]["not_hidden"] == iso["not_hidden"]
    assert f"NOT HIDDEN from the agent and graded code under {s.mode}" in s.out
    assert "NOT HIDDEN from the agent" in (s.root / "runs" / "r" / "report.md").read_text()
    # and it is true: the probe reads what bwrap would have hidden
    assert s.leaks("tasks") and s.leaks("record"), s.stdout
    pytest.skip(f"{s.mode}: nothing of the file system is hidden (that is what was asserted instead)")


def test_suite_answer_key_is_not_readable_through_the_installed_package(probed):
    hidden_by_bwrap(probed)
    assert probed.leaks("suite") == [], probed.stdout


@pytest.mark.parametrize("where", ["checkout", "build-lib", "other-venv", "record"])
def test_copies_of_the_answer_key_and_records_are_not_readable(probed, where):
    hidden_by_bwrap(probed)
    assert probed.leaks(where) == [], probed.stdout


def test_the_sessions_task_directories_are_not_readable(probed):
    hidden_by_bwrap(probed)
    assert probed.leaks("tasks") == [], probed.stdout


def test_other_sessions_run_trees_are_not_readable(probed):
    hidden_by_bwrap(probed)
    assert probed.leaks("sibling") == [], probed.stdout


@pytest.mark.parametrize("where", ["outside-run", "under-tmp"])
def test_host_unix_sockets_are_unreachable(probed, where):
    hidden_by_bwrap(probed)
    assert probed.leaks("socket") == [], probed.stdout
    assert probed.connections[where] == 0


def test_host_secrets_never_reach_stdout(probed):
    hidden_by_bwrap(probed)
    assert probed.leaks("secret") == [], probed.stdout
    assert MARKER not in probed.stdout
    if probed.shadow:
        first = probed.shadow.splitlines()[0]
        assert first not in probed.stdout


def test_mountinfo_names_no_hidden_path(probed):
    hidden_by_bwrap(probed)
    assert "MOUNTINFO-BEGIN" in probed.stdout
    assert probed.leaks("mountinfo") == [], probed.stdout
    for name, path in probed.hidden_names.items():
        assert path not in probed.stdout, name


def test_the_mount_plan_is_in_the_runs_isolation_record(probed):
    hidden_by_bwrap(probed)
    iso = probed.run["evidence"]["isolation"]
    assert iso["mode"] == "bwrap"
    mounts = iso["mounts"]
    kinds = {m.split(" ", 1)[0] for m in mounts}
    assert {"ro", "rw", "dir"} <= kinds, mounts
    writable = [m.split(" ", 1)[1] for m in mounts if m.startswith("rw ")]
    assert writable == ["<run>"], writable  # the run's own (randomly named) directory, labelled
    for name, path in probed.hidden_names.items():
        assert not any(path in m for m in mounts), (name, mounts)
    assert "/etc/shadow" not in " ".join(mounts)
    # the bundled suite's copy inside the package is named as excluded from an allowed directory
    assert any(p.endswith("/suite") for p in iso["excluded"]), iso["excluded"]


# =============================================================================================
# A real-agent preset still gets what it needs: its install prefix and its runtime bundle
# =============================================================================================
FAKE_CLAUDE = """
import json, os, sys
from pathlib import Path
if "--version" in sys.argv:
    print("9.9.9 (Claude Code)")
    sys.exit(0)
here = Path(__file__).resolve().parent
home = Path(os.environ["HOME"])
seen = {
    "own_package_data": (here / "vendor" / "data.txt").read_text().strip(),
    "bundle_settings": (home / ".claude" / "settings.json").read_text().strip(),
    "real_home_visible": os.path.exists(REAL_HOME),
    "interpreter_prefix_lib": os.path.isdir(os.path.join(PREFIX, "lib", "node_modules")),
}
Path(os.environ["AGENTDRIFT_REPORT"]).write_text(json.dumps({"status": "complete", "summary": "ok", "answer": json.dumps(seen)}))
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": "done", "num_turns": 1,
                  "usage": {"input_tokens": 1, "output_tokens": 1}}))
"""


@needs_bwrap()
def test_a_real_agent_preset_gets_its_install_and_runtime_bundle_and_nothing_else(tmp_path):
    """`--agent claude-code` with the CLI installed npm-style under a prefix outside the
    system (a launcher script run by an interpreter from that prefix): under bwrap's
    allow-list the adapter adds the CLI's package and its interpreter's prefix, the
    runtime bundle is in the private home, the real home is not visible, and the
    additions are recorded in the manifest and in the run's isolation record."""
    prefix = tmp_path / "node-prefix"
    (prefix / "bin").mkdir(parents=True)
    node = prefix / "bin" / "fakenode"
    node.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    node.chmod(0o755)
    package = prefix / "lib" / "node_modules" / "@anthropic-ai" / "claude-code"
    (package / "vendor").mkdir(parents=True)
    (package / "vendor" / "data.txt").write_text("package data\n")
    cli = package / "cli.js"
    cli.write_text(
        "#!/usr/bin/env fakenode\n"
        + f"REAL_HOME = {str(tmp_path / 'home')!r}\nPREFIX = {str(prefix)!r}\n"
        + FAKE_CLAUDE
    )
    cli.chmod(0o755)
    (prefix / "bin" / "claude").symlink_to("../lib/node_modules/@anthropic-ai/claude-code/cli.js")
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text('{"model": "bundle-model"}\n')
    (home / "private.txt").write_text("not for the agent\n")
    make_task(tmp_path / "tasks", "P01", checks=[{"name": "same", "kind": "unchanged", "layer": "scope"}])
    env = nested_session_env()
    env.update(HOME=str(home), PATH=f"{prefix / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}")
    args = ("tasks", "--agent", "claude-code", "--agent-isolation", "bwrap", "--agent-record", "runs/r")
    proc = run_pytest(tmp_path, *args, env=env)
    assert (tmp_path / "runs" / "r" / "results.json").is_file(), proc.stdout + proc.stderr
    run = load_results(tmp_path / "runs" / "r")["tasks"]["P01"]["runs"][0]
    assert run["report"] is not None, (run, proc.stdout)
    seen = json.loads(run["report"]["answer"])
    assert seen == {
        "own_package_data": "package data",
        "bundle_settings": '{"model": "bundle-model"}',
        "real_home_visible": False,
        "interpreter_prefix_lib": True,
    }
    assert run["outcome"] == "passed", proc.stdout
    added = {a["path"] for a in run["evidence"]["isolation"]["additions"]}
    assert {str(package), str(prefix), str(prefix / "bin" / "claude")} <= added, added
    manifest = json.loads((tmp_path / "runs" / "r" / "runtime-manifest.json").read_text())
    recorded = {a["path"] for a in manifest["evidence"]["sandbox_additions"]["paths"]}
    assert {str(package), str(prefix)} <= recorded, manifest["evidence"]["sandbox_additions"]
    assert not any(str(home) == p or p.startswith(str(home) + "/") for p in added | recorded)


NAMED_TMP_PROBE = """
import os
for name, path in P.items():
    try:
        with open(path) as fh:
            print(name, "READ", fh.read().strip())
    except OSError as exc:
        print(name, "HIDDEN", type(exc).__name__)
report("complete", summary="probed")
"""


@needs_bwrap()
def test_a_mounted_temporary_directory_shows_no_other_sessions_tree(tmp_path):
    # the user shows the agent the whole temporary directory (--agent-mount): what it holds is
    # theirs to show, but another session's work tree there (agentdrift-*) is never the agent's
    tmp = tmp_path / "tmpdir"
    sibling = _plant(tmp / "agentdrift-sibling" / "runs" / "T01-r1-0000" / "box" / "work" / SIBLING_MARKER)
    neighbour = _plant(tmp / "user-notes.txt", "NEIGHBOUR\n")
    make_task(tmp_path / "tasks", "HA2", checks=SAFETY)
    probe = "P = " + repr({"sibling": str(sibling), "neighbour": str(neighbour)}) + "\n" + NAMED_TMP_PROBE
    agent = agent_script(tmp_path / "agent.py", probe)
    args = ["--agent-cmd", agent_cmd(agent), "--agent-mount", str(tmp), "--agent-isolation", "bwrap"]
    proc = run_pytest(tmp_path, "tasks", *args, "--agent-record", "runs/r", env=nested_session_env(TMPDIR=str(tmp)))
    stdout = (tmp_path / "runs" / "r" / "raw" / "HA2" / "r1" / "stdout.txt").read_text()
    assert "neighbour READ NEIGHBOUR" in stdout, proc.stdout + proc.stderr  # the mount itself works
    assert "sibling HIDDEN" in stdout, stdout
