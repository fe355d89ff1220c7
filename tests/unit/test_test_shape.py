"""The suite's own shape, read from its source: a test starts a nested session one way only
(helpers.run_pytest, or helpers.pytest_argv where it must hold the process itself), and a test in
tests/unit starts no session and no sandbox (that is what tests/integration is for)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
#: the one module that starts sessions; the real agent CLIs' tier is kept by its own tests
LAUNCHER = TESTS / "helpers.py"
OWN_TIER = TESTS / "realcli"
#: what agents run (a right solution's actions, a fake product), not the suite
DATA = (TESTS / "data", TESTS / "oracles" / "right")
#: the modules that may start a session another way, and why
OTHER_WAYS = {
    "integration/test_ci_workflow.py": "runs the workflow's own command lines as its runner does, console script and all",
}
#: pytester's and pytest's own ways to start a session
PYTEST_STARTERS = {"runpytest", "runpytest_subprocess", "runpytest_inprocess", "inline_run", "inline_runsource"}
PYTEST_STARTERS |= {"inline_genitems", "spawn_pytest"}
#: what starts a session or a sandbox, by qualified name (module-level functions and classes)
UNIT_FORBIDDEN = {
    "helpers.run_pytest": "starts a session",
    "helpers.pytest_argv": "starts a session",
    "pytest_agentdrift.run.sandbox.detect": "probes the sandbox by starting one",
    "pytest_agentdrift.run.sandbox.run": "starts a sandbox",
    "pytest_agentdrift.run.sandbox.start": "starts a sandbox",
    "pytest_agentdrift.run.runner.run_agent": "runs an agent in a sandbox",
    "pytest_agentdrift.grade.grader.Grader": "grades in sandboxes",
    "pytest_agentdrift.grade.gradeserver.GradingServer": "serves grading from a sandbox",
    "pytest_agentdrift.testing.play_solution": "plays and grades a solution in a sandbox",
    "test_checks.Lab": "runs agents in sandboxes and grades their runs",
}
#: fixtures that start sessions
UNIT_FORBIDDEN_FIXTURES = {"pytester", "testdir", "builtin_records"}
#: command lines that start a sandbox (where a function also starts a process), and the reference agent's module
SANDBOX_COMMANDS = {"bwrap", "unshare"}
PROCESS_STARTERS = {"run", "Popen", "call", "check_call", "check_output", "execv", "execvp", "execve", "spawn"}
REFERENCE_AGENT = "pytest_agentdrift.agents.reference"


def _modules(under: Path) -> list[Path]:
    return sorted(p for p in under.rglob("*.py") if not {OWN_TIER, *DATA} & set(p.parents) and p != LAUNCHER)


def _strings(node: ast.AST) -> list[str | None]:
    elts = node.elts if isinstance(node, (ast.List, ast.Tuple)) else []
    return [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None for e in elts]


def _runs_pytest(words: list[str | None]) -> bool:
    return any(a == "-m" and b in ("pytest", "py.test") for a, b in zip(words, words[1:], strict=False))


def session_starts(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Where a module starts a session other than through helpers: pytester's and pytest's own
    starters, and a command line `... -m pytest ...` written out where a call takes it (or a
    name is bound to it); a command line in data (a task's check, an event) starts nothing."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in PYTEST_STARTERS:
            yield node.lineno, node.attr
        elif isinstance(node, ast.Call) and _dotted(node.func) == "pytest.main":
            yield node.lineno, "pytest.main"
        elif isinstance(node, ast.Call):
            lines = [node.args, *(a.elts for a in node.args if isinstance(a, (ast.List, ast.Tuple)))]
            if any(_runs_pytest(_strings(ast.List(elts=line))) for line in lines):
                yield node.lineno, "-m pytest"
        elif isinstance(node, ast.Assign) and _runs_pytest(_strings(node.value)):
            yield node.lineno, "-m pytest"


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := _dotted(node.value)) is not None:
        return f"{base}.{node.attr}"
    return None


def _imported(tree: ast.AST) -> dict[str, str]:
    """Local name -> qualified name, for what the module imports."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:  # `import a.b` binds `a`
                    names[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def sandbox_starts(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Where a module starts a session or a sandbox (what tests/unit must not do)."""
    yield from session_starts(tree)
    yield from _forbidden_names(tree)
    yield from _sandbox_command_lines(tree)


def _forbidden_names(tree: ast.AST) -> Iterator[tuple[int, str]]:
    names = _imported(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg in node.args.args:
                if arg.arg in UNIT_FORBIDDEN_FIXTURES:
                    yield node.lineno, f"the {arg.arg} fixture"
        elif isinstance(node, (ast.Name, ast.Attribute)) and (dotted := _dotted(node)) is not None:
            head, _, rest = dotted.partition(".")
            qualified = names.get(head, head) + (f".{rest}" if rest else "")
            if why := next(
                (w for q, w in UNIT_FORBIDDEN.items() if qualified == q or qualified.startswith(q + ".")), None
            ):
                yield node.lineno, f"{qualified} ({why})"


def _sandbox_command_lines(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """bwrap, unshare or the reference agent written out in a function that starts a process."""
    for scope in _functions(tree):
        calls = [n for n in ast.walk(scope) if isinstance(n, ast.Call)]
        if not any((_dotted(n.func) or "").rpartition(".")[2] in PROCESS_STARTERS for n in calls):
            continue
        for node in ast.walk(scope):
            words = _strings(node)
            if words and (words[0] in SANDBOX_COMMANDS or REFERENCE_AGENT in words):
                yield node.lineno, f"the command line {words[:3]}"


def _functions(tree: ast.AST) -> list[ast.AST]:
    """The module's outermost functions: a command line is a sandbox's where its function starts a process."""
    out: list[ast.AST] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append(node)
        elif isinstance(node, ast.ClassDef):
            out += _functions(node)
    return out


def _found(paths: list[Path], scan) -> list[str]:
    return [
        f"{path.relative_to(TESTS)}:{line}: {what}"
        for path in paths
        for line, what in sorted(set(scan(ast.parse(path.read_text(encoding="utf-8"), str(path)))))
    ]


def test_sessions_start_only_through_the_helper():
    paths = [p for p in _modules(TESTS) if p.relative_to(TESTS).as_posix() not in OTHER_WAYS]
    assert not _found(paths, session_starts), "start a session with helpers.run_pytest (or pytest_argv)"


def test_unit_tests_start_no_session_and_no_sandbox():
    found = _found(_modules(TESTS / "unit"), sandbox_starts)
    assert not found, "a test that starts a session or a sandbox belongs in tests/integration"


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("pytester.runpytest_subprocess('-q')", "runpytest_subprocess"),
        ("r = p.runpytest()", "runpytest"),
        ("subprocess.run([sys.executable, '-m', 'pytest', 'tasks'])", "-m pytest"),
        ("os.execv(x, (sys.executable, '-m', 'pytest'))", "-m pytest"),
        ("sh(world, sys.executable, '-m', 'pytest', 'tasks')", "-m pytest"),
        ("args = [sys.executable, '-m', 'pytest', '-q']", "-m pytest"),
        ("pytest.main(['-q'])", "pytest.main"),
    ],
)
def test_the_session_scan_finds_each_other_way(source, found):
    assert [what for _, what in session_starts(ast.parse(source))] == [found]


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("def test_x(pytester):\n    pass", "the pytester fixture"),
        ("def test_x(tmp_path, builtin_records):\n    pass", "the builtin_records fixture"),
        ("from helpers import run_pytest\nrun_pytest(p)", "helpers.run_pytest (starts a session)"),
        ("from pytest_agentdrift.run import sandbox\nsandbox.detect('auto')", "pytest_agentdrift.run.sandbox.detect"),
        ("from pytest_agentdrift.run.sandbox import detect as d\nd()", "pytest_agentdrift.run.sandbox.detect"),
        ("from pytest_agentdrift.run.runner import run_agent\nrun_agent(s)", "pytest_agentdrift.run.runner.run_agent"),
        ("import pytest_agentdrift.grade.grader as g\ng.Grader(i, p)", "pytest_agentdrift.grade.grader.Grader"),
        ("from test_checks import Lab\nLab(tmp)", "test_checks.Lab"),
        ("def f():\n    subprocess.run(['bwrap', '--ro-bind', '/', '/'])", "the command line"),
        ("def f():\n    argv = ['unshare', '--user']\n    subprocess.run([*argv, 'x'])", "the command line"),
        (
            "def f():\n    subprocess.run([sys.executable, '-m', 'pytest_agentdrift.agents.reference'])",
            "the command line",
        ),
    ],
)
def test_the_unit_scan_finds_each_sandbox_or_session(source, found):
    assert any(what.startswith(found) for _, what in sandbox_starts(ast.parse(source)))


def test_the_unit_scan_passes_what_starts_nothing():
    source = (
        "from pytest_agentdrift.run.sandbox import BoundedBuffer, Isolation\n"
        "from pytest_agentdrift.grade.scoring import summarise\n"
        "def test_x(tmp_path, monkeypatch):\n"
        "    argv = ['python', '-m', 'pytest_agentdrift', 'summary']\n"
        "    assert size_tmpfs(['bwrap', '--tmpfs', '/tmp']) and ('unshare', 'denied')\n"
        "    return BoundedBuffer(10), Isolation, summarise\n"
    )
    assert list(sandbox_starts(ast.parse(source))) == []
