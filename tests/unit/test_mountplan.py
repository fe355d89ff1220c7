"""The allow-list a sandbox is built from (mountplan.py), the signed result
channel of grading (gradechannel.py), the standard-library guard (gradeguard.py)
and the helpers of the graded copy. Plans are checked as data; a few small
bwrap runs prove that what the plan says is what the sandbox shows."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agentdrift.agents.base import CommandAdapter
from pytest_agentdrift.grade.channel import GradedEnd, HarnessEnd
from pytest_agentdrift.grade.commandline import pytest_args
from pytest_agentdrift.grade.gradedcopy import drop_escaping_symlinks
from pytest_agentdrift.run import agentpaths, harnessruntime, hostprogram, mountplan
from pytest_agentdrift.run import stdlib_guard as gradeguard


def records(plan: mountplan.MountPlan) -> list[str]:
    return plan.to_record()["mounts"]


# ---- the plan as data ---------------------------------------------------------------------------
def test_system_allow_list_and_nothing_of_the_host_beyond_it(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    plan = mountplan.build(writable=[run])
    mounts = records(plan)
    assert mounts[:3] == ["dev /dev", "tmpfs /dev/shm", "proc /proc"]
    assert mounts[-1] == "remount-ro /"
    assert "ro /usr" in mounts and f"rw {run}" in mounts
    assert "ro /etc/passwd" in mounts
    for secret in (
        "/etc/shadow",
        "/etc/gshadow",
        "/etc/sudoers",
        "/etc/ssh",
        "/etc/ssl/private",
        "/etc/pip.conf",
        "/etc/npmrc",
    ):
        assert not any(m.split(" ")[1] == secret or m.split(" ")[1].startswith(secret + "/") for m in mounts), secret
    for empty in ("/tmp", "/home", "/root", "/run", "/srv", "/mnt", "/media", "/opt"):
        assert f"dir {empty}" in mounts, empty
    assert "symlink /var/run -> ../run" in mounts
    # nothing else of the host: no host path outside the system, and the run, is bound
    bound = [m.split(" ")[1] for m in mounts if m.startswith(("ro ", "rw "))]
    allowed_tops = ("/usr", "/etc/", "/sys/devices/system/cpu", str(run))
    assert "ro /sys" not in mounts  # the cgroup tree lists host processes
    assert all(b.startswith(allowed_tops) for b in bound), bound


def test_a_mount_bubblewrap_could_not_make_as_declared_is_refused_not_dropped():
    assert mountplan.Mount("ro", "/usr", "/usr").bwrap_args() == ["--ro-bind", "/usr", "/usr"]
    assert mountplan.Mount("tmpfs", None, "/tmp").bwrap_args() == ["--tmpfs", "/tmp"]
    with pytest.raises(ValueError, match="unknown mount kind 'robind'"):
        mountplan.Mount("robind", "/usr", "/usr").bwrap_args()
    with pytest.raises(ValueError, match="a ro mount needs a source"):
        mountplan.Mount("ro", None, "/usr").bwrap_args()


def test_parents_come_before_children(tmp_path):
    outer = tmp_path / "outer"
    (outer / "inner").mkdir(parents=True)
    # a writable child of a read-only parent is bound after it, or the parent's bind would cover it
    plan = mountplan.build(readable=[outer], writable=[outer / "inner"])
    binds = [(m.kind, m.dest) for m in plan.mounts if m.kind in ("ro", "rw")]
    assert binds.index(("ro", str(outer))) < binds.index(("rw", str(outer / "inner")))
    # a writable directory is not also mounted read-only inside itself
    plan = mountplan.build(readable=[outer / "inner"], writable=[outer])
    assert ("rw", str(outer)) in [(m.kind, m.dest) for m in plan.mounts]
    assert f"ro {outer / 'inner'}" not in records(plan)


def test_a_hidden_path_inside_an_allowed_directory_is_left_out_and_never_named(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "suite" / "T01" / "solution").mkdir(parents=True)
    (pkg / "suite" / "T01" / "solution" / "answer.txt").write_text("secret")
    (pkg / "sub" / "deeper").mkdir(parents=True)
    (pkg / "code.py").write_text("")
    (pkg / "link").symlink_to("code.py")
    plan = mountplan.build(readable=[pkg], exclude=[pkg / "suite", pkg / "sub" / "deeper"])
    mounts = records(plan)
    assert f"dir {pkg}" in mounts and f"ro {pkg / 'code.py'}" in mounts
    assert f"symlink {pkg / 'link'} -> code.py" in mounts
    assert f"dir {pkg / 'sub'}" in mounts  # recreated: one of its entries is hidden
    assert not any("suite" in m or "deeper" in m for m in mounts), mounts
    assert sorted(plan.excluded) == sorted([str(pkg / "suite"), str(pkg / "sub" / "deeper")])


def test_an_explicit_allow_inside_a_hidden_directory_wins(tmp_path):
    suite = tmp_path / "suite"
    (suite / "T01").mkdir(parents=True)
    (suite / "T02").mkdir()
    plan = mountplan.build(readable=[suite / "T01"], exclude=[suite])
    mounts = records(plan)
    assert f"ro {suite / 'T01'}" in mounts
    assert not any(str(suite / "T02") in m for m in mounts)


def test_the_bundled_suite_is_always_excluded():
    from pytest_agentdrift.tasks.taskdirs import builtin_suite_dir

    suite = os.path.realpath(builtin_suite_dir())
    assert suite in harnessruntime.bundled_suite_copies()
    plan = mountplan.build(readable=harnessruntime.harness_runtime())
    assert suite in plan.excluded
    assert not any(m.startswith(("ro ", "rw ")) and suite in m for m in records(plan))


def test_the_root_directory_is_never_allowed_whole():
    plan = mountplan.build(readable=["/"])
    assert "ro /" not in records(plan)


def test_not_hidden_is_said_for_the_weaker_modes():
    assert mountplan.not_hidden("bwrap") == []
    for mode in ("unshare", "none"):
        lines = mountplan.not_hidden(mode)
        assert any("nothing of the host file system is hidden" in ln for ln in lines)
        assert any("/etc/shadow" in ln for ln in lines)
    assert any("network namespace" in ln for ln in mountplan.not_hidden("unshare"))
    assert any("host network is reachable" in ln for ln in mountplan.not_hidden("none"))


# ---- what an agent's command needs ----------------------------------------------------------------
def _exe(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_an_npm_cli_brings_its_package_and_its_interpreters_prefix(tmp_path):
    prefix = tmp_path / "node-prefix"
    _exe(prefix / "bin" / "node")
    cli = _exe(
        prefix / "lib" / "node_modules" / "@vendor" / "agent-cli" / "cli.js", "#!/usr/bin/env node\nconsole.log(1)\n"
    )
    (prefix / "bin" / "agent").symlink_to(os.path.relpath(cli, prefix / "bin"))
    found = dict(hostprogram.executable_paths("agent", str(prefix / "bin")))
    assert str(prefix / "bin" / "agent") in found  # the link itself
    assert str(prefix / "lib" / "node_modules" / "@vendor" / "agent-cli") in found  # the package
    assert str(prefix) in found  # node's install prefix (its global modules)


def test_a_standalone_binary_brings_itself_but_never_the_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    real = _exe(home / ".local" / "share" / "agent" / "versions" / "2.0.1")
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "agent").symlink_to(real)
    found = dict(hostprogram.executable_paths("agent", str(home / ".local" / "bin")))
    assert set(found) == {str(home / ".local" / "bin" / "agent"), str(real)}
    _exe(home / ".local" / "bin" / "other")
    assert set(dict(hostprogram.executable_paths("other", str(home / ".local" / "bin")))) == {
        str(home / ".local" / "bin" / "other")
    }


def test_a_virtual_environment_brings_its_base_installation(tmp_path):
    base = tmp_path / "base"
    _exe(base / "bin" / "python3")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(base / "bin" / "python3")
    (venv / "pyvenv.cfg").write_text(f"home = {base / 'bin'}\n")
    script = _exe(venv / "bin" / "agent", f"#!{venv / 'bin' / 'python'}\nprint(1)\n")
    found = dict(hostprogram.executable_paths(str(script), None))
    assert str(venv) in found and str(base) in found


def test_a_command_adapter_names_its_script_and_config(tmp_path):
    script = tmp_path / "agent.py"
    script.write_text("")
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("")
    adapter = CommandAdapter(f"{sys.executable} {script} --config={cfg} {{task_file}}")
    paths = dict(agentpaths.agent_paths(adapter, os.environ))
    assert str(script) in paths and str(cfg) in paths
    # what the harness runtime shows anyway is not an addition
    beyond = dict(harnessruntime.beyond_runtime(agentpaths.agent_paths(adapter, os.environ)))
    assert set(beyond) == {str(script), str(cfg), str(tmp_path)}  # tmp_path: the agent's own code directory
    # unless that directory is, or holds, what the sandbox hides
    beyond = dict(harnessruntime.beyond_runtime(agentpaths.agent_paths(adapter, os.environ, [tmp_path / "runs"])))
    assert set(beyond) == {str(script), str(cfg)}


# ---- the result channel -----------------------------------------------------------------------------
def _child(code: str, harness: HarnessEnd) -> subprocess.CompletedProcess:
    env = {**os.environ, **harness.env}
    try:
        return subprocess.run(
            [sys.executable, "-c", code], env=env, pass_fds=harness.child_fds, capture_output=True, timeout=30
        )
    finally:
        harness.close_child_ends()


REPORTER = """
from pytest_agentdrift.grade.channel import GradedEnd
ch = GradedEnd.from_env()
import os
assert "AGENTDRIFT_GRADE_CHANNEL" not in os.environ
ch.send("result", {"exitstatus": 0, "outcomes": {"t::a": "passed"}})
ch.close()
"""


def test_authentic_messages_arrive():
    h = HarnessEnd()
    proc = _child(REPORTER, h)
    assert proc.returncode == 0, proc.stderr
    got = h.receive()
    assert got.problems == []
    assert got.last("result") == {"kind": "result", "exitstatus": 0, "outcomes": {"t::a": "passed"}}


KEEP_FD = "import os\n_keep = os.dup(int(os.environ['AGENTDRIFT_GRADE_CHANNEL'].split(',')[1]))\n"
FORGED = repr(b'{"kind": "result", "exitstatus": 0}\n')


def _received_problems(code: str) -> list[str]:
    """What the harness end found wrong in what graded code running `code` sent it."""
    h = HarnessEnd()
    proc = _child(code, h)
    assert proc.returncode == 0, proc.stderr
    return h.receive().problems


@pytest.mark.parametrize("when", ["after", "before"])
def test_anything_the_reporter_did_not_send_is_forged(when):
    """Graded code keeps a copy of the channel's fd (as an import-time hook would) and
    writes a plausible result on it, after the reporter's message (an atexit handler)
    or before it."""
    forge = f"os.write(_keep, {FORGED})\n"
    problems = _received_problems(KEEP_FD + (REPORTER + forge if when == "after" else forge + REPORTER))
    assert problems and "did not send" in problems[0], problems


def test_a_replayed_message_is_forged():
    code = (
        KEEP_FD
        + REPORTER.replace("ch.close()", "")
        + "line = b'0' * 64 + b' 1 {}\\n'\nos.write(_keep, line)\nch.close()\n"
    )
    problems = _received_problems(code)
    assert problems and "at message 1" in problems[0], problems


def test_no_message_is_a_missing_result():
    h = HarnessEnd()
    proc = _child(
        "from pytest_agentdrift.grade.channel import GradedEnd\nch = GradedEnd.from_env()\nimport os\nos._exit(0)\n", h
    )
    assert proc.returncode == 0
    got = h.receive()
    assert got.problems == [] and got.last("result") is None


def test_the_key_never_reaches_the_environment():
    h = HarnessEnd()
    assert h.key.hex() not in str(h.env) and len(h.key) == 32
    ch = None
    try:
        os.environ.update(h.env)
        ch = GradedEnd.from_env()
        assert ch.key == h.key and "AGENTDRIFT_GRADE_CHANNEL" not in os.environ
    finally:
        os.environ.pop("AGENTDRIFT_GRADE_CHANNEL", None)
        if ch:
            ch.close()
        h.close_child_ends()
        h.receive(timeout_s=1)


# ---- the standard-library guard -----------------------------------------------------------------
def test_shadowing_modules_are_the_added_top_level_ones():
    added = [
        "pdb.py",
        "xml/__init__.py",
        "tests/difflib.py",
        "pkg/json.py",
        "pkg/__init__.py",
        "calc.py",
        "secrets.cpython-311-x86_64-linux-gnu.so",
        "unittest.pyc",
        "README.md",
        "logging.py",
    ]
    final = set(added) | {"tests/test_calc.py"}
    assert gradeguard.shadowing_modules(added, final, provided={"logging"}) == [
        "pdb.py",
        "secrets.cpython-311-x86_64-linux-gnu.so",
        "tests/difflib.py",
        "unittest.pyc",
        "xml/__init__.py",
    ]
    assert gradeguard.fixture_provided(["logging.py", "app/__init__.py", "calc.py"]) == {"logging"}


def test_the_guard_keeps_the_tree_off_standard_library_names(tmp_path):
    (tmp_path / "difflib.py").write_text("raise SystemExit('shadowed')\n")
    (tmp_path / "logging.py").write_text("PROJECT = True\n")
    (tmp_path / "calc.py").write_text("VALUE = 1\n")
    code = (
        f"import sys\nfrom pytest_agentdrift.run import stdlib_guard as gradeguard\ngradeguard.install(list(sys.path), ['logging'])\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\nimport difflib, calc, logging\n"
        "print(difflib.__file__.startswith(sys.base_prefix) or 'site' not in difflib.__file__, calc.VALUE, logging.PROJECT)\n"
    )
    proc = subprocess.run([sys.executable, "-P", "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "1", "True"]


# ---- the graded copy --------------------------------------------------------------------------------
def test_symlinks_out_of_the_graded_copy_are_dropped(tmp_path):
    tree = tmp_path / "repo"
    (tree / "pkg").mkdir(parents=True)
    (tree / "a.py").write_text("")
    (tree / "in.py").symlink_to("a.py")
    (tree / "abs.py").symlink_to(tmp_path / "outside.py")
    (tree / "pkg" / "up.py").symlink_to("../../outside.py")
    (tree / "dir").symlink_to(tmp_path)
    (tree / "pkg" / "via.py").symlink_to("../abs.py")
    assert drop_escaping_symlinks(tree) == ["abs.py", "dir", "pkg/up.py", "pkg/via.py"]
    assert (tree / "in.py").is_symlink()


@pytest.mark.parametrize(
    "argv, args",
    [
        (["python", "-m", "pytest", "-q", "tests"], ["-q", "tests"]),
        (["python3", "-u", "-W", "error", "-m", "pytest"], []),
        (["pytest", "tests/test_x.py"], ["tests/test_x.py"]),
        (["py.test"], []),
        ([sys.executable, "-m", "py.test", "-x"], ["-x"]),
        (["python", "-c", "import pytest; pytest.main()"], None),
        (["python", "-m", "pytest_other"], None),
        (["python", "tools/build.py"], None),
        (["bash", "-c", "pytest"], None),
    ],
)
def test_commands_that_run_pytest_are_recognised(argv, args):
    assert pytest_args(argv) == args


# ---- the agent's PATH ---------------------------------------------------------------------------
def test_the_agents_path_starts_with_the_toolchain_and_names_only_what_the_sandbox_shows(tmp_path):
    from pytest_agentdrift.run import toolchain

    shims = tmp_path / "home" / ".pyenv" / "shims"
    shown = tmp_path / "tools" / "bin"
    for d in (shims, shown):
        d.mkdir(parents=True)
    plan = mountplan.build(readable=[shown], exclude=[tmp_path / "home"])
    assert plan.shows(str(shown)) and plan.shows("/usr/bin")
    assert not plan.shows(str(shims)) and not plan.shows(str(tmp_path))
    host = os.pathsep.join([str(shims), "/usr/bin", str(shown), "/usr/bin", "relative/bin"])
    assert toolchain.agent_path(host, "/tc/bin", plan.shows).split(os.pathsep) == ["/tc/bin", "/usr/bin", str(shown)]


def test_the_toolchain_wrappers_run_this_python(tmp_path):
    from pytest_agentdrift.run import toolchain

    bin_dir = toolchain.make_bin(tmp_path)
    for name in toolchain.PROGRAMS:
        out = subprocess.run(
            [str(bin_dir / name), "-c", "import sys, pytest; print(sys.prefix)"], capture_output=True, text=True
        )
        assert out.returncode == 0 and out.stdout.strip() == sys.prefix, out
    assert toolchain.describe()["pytest"] == pytest.__version__


# ---- what a command's first word really runs ----------------------------------------------------
def _exec_shim(tmp_path: Path) -> tuple[Path, Path]:
    """A pyenv-style shim (a script that execs its manager) and the program its manager names."""
    real = tmp_path / "versions" / "1.0" / "bin" / "tool"
    real.parent.mkdir(parents=True)
    real.write_text("#!/usr/bin/env python3\nprint('tool')\n")
    manager = tmp_path / "libexec" / "mgr"
    manager.parent.mkdir()
    manager.write_text(f'#!/bin/sh\n[ "$1" = which ] && echo "{real.parent}/$2" || exit 3\n')
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "tool").write_text(f'#!/usr/bin/env bash\nexec "{manager}" exec "$program" "$@"\n')
    for p in (real, manager, shims / "tool"):
        p.chmod(0o755)
    return shims, real


def test_a_shim_resolves_to_what_its_manager_runs(tmp_path):
    shims, real = _exec_shim(tmp_path)
    path_env = f"{shims}:/usr/bin:/bin"
    prog = hostprogram.resolve_program("tool", path_env)
    assert (prog.found, prog.path, prog.problem) == (str(shims / "tool"), str(real), None)
    assert prog.manager == str(tmp_path / "libexec" / "mgr")
    # the shim is never shown (it needs the whole manager); what it runs is, with its install prefix
    paths = dict(hostprogram.executable_paths("tool", path_env))
    assert str(shims / "tool") not in paths and str(real) in paths and str(real.parent.parent) in paths
    assert "a shim of mgr" in paths[str(real)]
    # a script whose shebang is `env NAME` is started by the NAME the host's PATH finds
    python3 = hostprogram.resolve_program("python3", path_env).path
    assert hostprogram.host_argv(["tool", "-x"], path_env) == [python3, str(real), "-x"]
    assert hostprogram.host_argv(["{workdir}/x"], path_env) == ["{workdir}/x"]


def test_a_shim_its_manager_cannot_resolve_is_a_problem_not_a_program(tmp_path):
    shims, real = _exec_shim(tmp_path)
    (tmp_path / "libexec" / "mgr").write_text("#!/bin/sh\necho 'mgr: tool: command not found' >&2\nexit 127\n")
    prog = hostprogram.resolve_program("tool", f"{shims}:/usr/bin")
    assert prog.problem and "command not found" in prog.problem
    assert hostprogram.executable_paths("tool", f"{shims}:/usr/bin") == []


def test_the_agents_code_directory_is_shown_unless_it_is_or_holds_a_hidden_path(tmp_path):
    project = tmp_path / "project"
    (project / "my_agent").mkdir(parents=True)
    main = project / "my_agent" / "main.py"
    main.write_text("import helpers\nimport json\n")
    (project / "my_agent" / "helpers.py").write_text("")
    top = project / "agent.py"
    top.write_text("import helpers\nfrom tools.x import y\nimport json\n")
    (project / "helpers.py").write_text("")
    (project / "tools").mkdir()
    named = agentpaths.named_paths([str(main), str(top)])
    assert agentpaths.code_dirs(named, [project]) == [(str(project / "my_agent"), "the agent's own code directory")]
    assert agentpaths.hidden_imports(named, [project]) == [str(project / "helpers.py"), str(project / "tools")]
