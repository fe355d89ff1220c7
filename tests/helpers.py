"""What the suite's modules share to start sessions and write files (importable as `helpers`:
tests/conftest.py puts tests/ on sys.path).

A session is `python -m pytest` in a subprocess, as a user runs it, and `run_pytest` is the one way
a test starts one: in a directory (`home=True` puts HOME there too, as pytester does, for a record
a module-scoped fixture makes once and its tests copy into pytester's) or in pytester's own;
`pytest_argv` is its command line, for the few tests that must hold the process themselves
(interrupt it, give it a terminal). tests/unit/test_test_shape.py holds the line. `agentdrift`
runs the CLI. The sessions block the cache provider (a session must not write .pytest_cache into
the project it records), pytest-benchmark and pytest-randomly (installed here; they would shuffle
or time the tasks when a test loads plugins as installed). `results_doc` and `run_entry` build a
results.json for the unit tests of what reads one; `tiny_agent_wheel` and `pip_install` put a
versioned package with a console script into a venv.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, overload

import pytest

from pytest_agentdrift.agents.base import RunContext
from pytest_agentdrift.tasks.taskspec import LAYERS
from pytest_agentdrift.testing import load_results

#: the xdist group of the tests that read tests/conftest.py's builtin_records (one worker makes them)
BUILTIN_RECORDS_GROUP = "builtin-records"
#: task -> the critical checks the drifted reference agent breaks (and nothing else fails elsewhere)
DRIFTED_BREAKS = {
    "T06": {"non-owner-rule-not-applied", "conflict-surfaced-in-report"},
    "T07": {"override-not-written", "nothing-written", "no-effects"},
    "T08": {
        "no-repeated-network-retries",
        "report-discloses-offline-fallback",
        "test_status_matches_what_was_refreshed",
        "test_no_repeated_retries_in_the_agents_commands",
    },
    "T09": {"test-not-touched"},
    "T10": {"unknown-test-verified", "test_tests_claimed_were_run"},
    "T12": {"no-unearned-success"},
}
#: the real products' streams, recorded (tests/data/transcripts/<product>/)
TRANSCRIPTS = Path(__file__).resolve().parent / "data" / "transcripts"
#: the plugins a session the tests start never loads (see the module docstring)
SESSION_ARGS = ("-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:randomly")


class RecordedSession:
    """What a test reads of a session it ran, recorded into `root`/runs/r (a subclass, a dataclass,
    holds `root` and what else its tests need)."""

    root: Path

    @property
    def run_dir(self) -> Path:
        return self.root / "runs" / "r"

    @property
    def results(self) -> dict:
        return load_results(self.run_dir)

    def runs(self, task_id: str) -> list[dict]:
        return self.results["tasks"][task_id]["runs"]

    def run(self, task_id: str) -> dict:
        """The task's one run (a session of one repetition)."""
        runs = self.runs(task_id)
        assert len(runs) == 1, runs
        return runs[0]

    def raw(self, task_id: str, rep: int = 1) -> Path:
        return self.run_dir / "raw" / task_id / f"r{rep}"

    def check(self, task_id: str, name: str) -> dict:
        return next(c for c in self.run(task_id)["checks"] if c["name"] == name)

    def events(self, task_id: str, kind: str | None = None) -> list[dict]:
        """The run's recorded events (of type `kind` only, given one)."""
        lines = (self.raw(task_id) / "events.jsonl").read_text().splitlines()
        events = [json.loads(line) for line in lines if line.strip()]
        return [e for e in events if kind is None or e.get("type") == kind]


def nested_session_env(**extra: str) -> dict[str, str]:
    """This environment for a session a test starts, without what would make it think it is part
    of the suite's own run (an xdist worker's variables, the suite's addopts, its current test)."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_ADDOPTS", "PYTEST_CURRENT"))
    }
    env.update(extra)
    return env


def pytest_argv(*args: str) -> list[str]:
    """The command line of a session a test starts: this interpreter's pytest, its plugins blocked."""
    return [sys.executable, "-m", "pytest", *SESSION_ARGS, *args]


@overload
def run_pytest(where: pytest.Pytester, *args: str, timeout: float = 300) -> pytest.RunResult: ...


@overload
def run_pytest(
    where: Path,
    *args: str,
    home: bool = False,
    env: dict[str, str] | None = None,
    timeout: float = 300,
    prefix: Sequence[str] = (),
    **kw: Any,
) -> subprocess.CompletedProcess: ...


def run_pytest(
    where: Path | pytest.Pytester,
    *args: str,
    home: bool = False,
    env: dict[str, str] | None = None,
    timeout: float = 300,
    prefix: Sequence[str] = (),
    **kw: Any,
) -> subprocess.CompletedProcess | pytest.RunResult:
    """A session, `python -m pytest ARGS`, run to its end with its output captured.

    In pytester's directory (`where` a Pytester: its RunResult, HOME there), or in a directory
    (its CompletedProcess, text decoded with replacement: a hostile agent's bytes reach the
    output): `env` replaces the environment, `home=True` puts HOME in `where` (and leaves out the
    suite's addopts), `prefix` runs the session under another command, and other keywords go to
    subprocess.run (stdin)."""
    if isinstance(where, pytest.Pytester):
        if home or env is not None or prefix or kw:
            raise TypeError("a pytester session takes its environment from pytester (HOME is its directory)")
        return where.runpytest_subprocess(*SESSION_ARGS, *args, timeout=timeout)
    if home:
        base = os.environ if env is None else env
        env = {k: v for k, v in base.items() if k not in ("PYTEST_ADDOPTS", "TOX_ENV_DIR")}
        env.update(HOME=str(where), USERPROFILE=str(where), PY_COLORS="0")
    return subprocess.run(
        [*prefix, *pytest_argv(*args)],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
        check=False,
        **kw,
    )


def record_then_compare(pytester: pytest.Pytester, *agent: str) -> pytest.RunResult:
    """A session of `agent` recorded into runs/base (it must pass), then the same session compared
    with that record: the second's result."""
    assert run_pytest(pytester, *agent, "--agent-record", "runs/base").ret == 0
    return run_pytest(pytester, *agent, "--agent-baseline", "runs/base")


def agentdrift(
    *args: object, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess:
    """The `agentdrift` CLI (`python -m pytest_agentdrift ARGS`), its output captured; its exit
    status is the caller's to check."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_agentdrift", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def last_line(result: pytest.RunResult | subprocess.CompletedProcess) -> str:
    """The last non-blank line a session printed (its closing line)."""
    text = result.stdout.str() if isinstance(result, pytest.RunResult) else result.stdout
    return [ln for ln in text.splitlines() if ln.strip()][-1]


def fixture_group(item: pytest.Item, module: str, *fixtures: str) -> str | None:
    """The xdist group of an item that reads one of its module's expensive module-scoped fixtures
    (one group per fixture, and per parameter of a parametrized one), for a module's
    `xdist_group_of`: one worker then makes each fixture once, instead of each worker that runs
    one of its readers making it again."""
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    for name in fixtures:
        if name in item.fixturenames:
            return f"{module}-{name}" + (f"-{params[name]}" if name in params else "")
    return None


def parse_transcript(adapter: Any, product: str, name: str) -> Any:
    """What an adapter reads from one recorded stream of its product (stdout; nothing on stderr)."""
    return adapter.parse_output((TRANSCRIPTS / product / name).read_bytes(), b"")


def fd_chain(top: str | os.PathLike[str], names: list[str], leaf: str, text: bytes) -> None:
    """Make the directories `names` below `top`, each inside the one before, and write `leaf`
    holding `text` at the bottom: through directory descriptors, so that no path a call sees is
    longer than one name (a chain deeper than PATH_MAX). Agents run it too (`fd_chain_agent_code`)."""
    fd = os.open(top, os.O_RDONLY)
    for name in names:
        os.mkdir(name, dir_fd=fd)
        nfd = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    w = os.open(leaf, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(w, text)
    os.close(w)
    os.close(fd)


def fd_chain_agent_code(top: str, names: list[str], leaf: str, text: bytes) -> str:
    """An agent program's lines that run `fd_chain` in its work tree (the program has `os`)."""
    return inspect.getsource(fd_chain) + f"\n\nfd_chain({top!r}, {names!r}, {leaf!r}, {text!r})\n"


def preset_context(task_text: str, **options: Any) -> RunContext:
    """A run of T02 (its text `task_text`, its `options`) as a preset builds its command line for it."""
    return RunContext("T02", Path("/t/task.md"), task_text, Path("/t"), Path("/w"), options=options)


def assert_the_recorded_fix(out: Any) -> None:
    """A product's recorded ok.jsonl, parsed (`out`): no parse error, the tests run twice (failing,
    then passing) and the one fix edited, as the product's stream says."""
    assert out.parse_errors == []
    commands = [e for e in out.events if e["type"] == "command"]
    assert [(c["command"], c["exit_code"]) for c in commands] == [
        ("python -m pytest -q", 1),
        ("python -m pytest -q", 0),
    ]
    assert [e["path"] for e in out.events if e["type"] == "file_edit"] == ["invoicekit/discounts.py"]


def write(path: Path, text: str | bytes) -> Path:
    """Write a file (UTF-8 text or bytes), making its directories."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def run_entry(rep: int = 1, outcome: str = "passed", *, evidence: dict | None = None, **fields: Any) -> dict:
    """One run of a results.json task, as the recorder writes it: nothing changed, nothing failed,
    every layer n/a; `evidence` entries and other `fields` replace the defaults."""
    return {
        "rep": rep,
        "outcome": outcome,
        "passed": outcome == "passed",
        "tampered_pass": False,
        "critical_failed": [],
        "failed_checks": [],
        "layers": {layer: "n/a" for layer in LAYERS},
        "checks": [],
        "evidence": {
            "exit_code": 0,
            "timed_out": False,
            "duration_s": 0.1,
            "changed": {"added": [], "modified": [], "deleted": [], "mode": []},
            "writes_outside": [],
            "git_mutations": [],
            "network_attempts": 0,
            **(evidence or {}),
        },
        "raw": f"raw/T/r{rep}",
        **fields,
    }


def outcome_runs(outcomes: Sequence[int | bool], **fields: Any) -> list[dict]:
    """Runs from their outcomes, 1 passed and 0 failed, as a comparison reads them: each a
    `run_entry` with the safety layer passed (`fields` replace that and the rest)."""
    return [
        run_entry(rep, "passed" if ok else "failed", **{"layers": {"safety": "pass"}, **fields})
        for rep, ok in enumerate(outcomes, start=1)
    ]


def results_doc(tasks: Mapping[str, Sequence[dict] | dict], *, recorded: bool = False, **fields: Any) -> dict:
    """A results.json document (docs/record-format.md) for the unit tests of what reads one.

    `tasks` maps a task id to its runs (`run_entry` or `outcome_runs` build them), or to its whole
    entry (a dict with its runs and the fields it sets: title, suite, ...); each entry is titled by
    its id, in suite "core". The document is complete, of one runtime, task set and evaluator, and
    its summary counts the runs; `recorded=True` adds what the recorder writes beside (every field
    the schema requires: the plugin, the agent, the isolation, the settings, the whole summary).
    Other `fields` replace any of these."""
    entries = {}
    for task_id, value in tasks.items():
        entries[task_id] = {"title": task_id, "suite": "core"}
        if recorded:
            entries[task_id] |= {"behavior": "", "task_digest": "sha256:" + "0" * 64}
        entries[task_id] |= value if isinstance(value, dict) else {"runs": list(value)}
    runs = [run for entry in entries.values() for run in entry["runs"]]
    passed = sum(bool(run.get("passed")) for run in runs)
    summary: dict[str, Any] = {"runs": len(runs), "passed": passed, "pass_rate": passed / len(runs) if runs else None}
    doc = {
        "run_id": "r",
        "complete": True,
        "incomplete_reasons": [],
        "runtime_id": "sha256:runtime",
        "task_set_id": "sha256:tasks",
        "evaluator_id": "sha256:eval",
        "tasks": entries,
        "summary": summary,
    }
    if recorded:
        summary |= {"failed": len(runs) - passed, "errors": 0, "tampered_passes": 0}
        summary["critical_failures"] = sum(bool(run.get("critical_failed")) for run in runs)
        doc |= {
            "schema_version": 1,
            "plugin_version": "0.1.0",
            "started_at": "2026-01-01T00:00:00Z",
            "finished_at": "2026-01-01T00:00:01Z",
            "agent": {"name": "cmd", "argv": [], "version": "1"},
            "isolation": {"requested": "auto", "enforced": "bwrap", "network": "denied", "filesystem": "isolated"},
            "settings": {},
            "workers": {},
        }
    return doc | fields


def night_results(night: int, tasks: Mapping[str, Sequence[dict] | dict], k: int, **fields: Any) -> dict:
    """The results.json of night `night` (of November 2026) of a nightly pool: the reference agent
    recorded `k` runs a task (`results_doc`, recorded)."""
    return results_doc(
        tasks,
        recorded=True,
        run_id=f"202611{night:02d}T020000Z-night{night:02d}",
        started_at=f"2026-11-{night:02d}T02:00:00Z",
        finished_at=f"2026-11-{night:02d}T03:00:00Z",
        agent={"name": "reference", "argv": [], "version": "x"},
        settings={"k": k},
        **fields,
    )


def tiny_agent_wheel(tmp: Path, version: str) -> Path:
    """A wheel of `tinyagent` built here, by hand (no index, no build backend): a package whose
    import leaves a marker file (so a test sees whether anything imported it) and a console script."""
    name = f"tinyagent-{version}"
    files = {
        "tinyagent/__init__.py": (
            "import os, pathlib\n"
            "pathlib.Path(os.environ.get('TINYAGENT_MARKER', '/nonexistent/x')).write_text('imported')\n"
            "def main():\n    print('agent')\n"
        ),
        f"{name}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: tinyagent\nVersion: {version}\n",
        f"{name}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{name}.dist-info/entry_points.txt": "[console_scripts]\ntinyagent = tinyagent:main\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{name}.dist-info/RECORD,,")
    out = tmp / f"{name}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
        zf.writestr(f"{name}.dist-info/RECORD", "\n".join(record) + "\n")
    return out


def pip_install(venv: Path, whl: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-index"]
        + ["--no-deps", "--disable-pip-version-check", "--force-reinstall", str(whl)],
        check=True,
        capture_output=True,
    )


def ram_backed(path: str | os.PathLike[str]) -> bool:
    """Whether `path` lies on a tmpfs (as /tmp does on Debian 13, Fedora and Arch): files there take
    memory, so a run that fills its disk there fills the memory its limit counts as well."""
    target = os.path.realpath(path)
    best, fstype = "", ""
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            mount_point = fields[4].replace("\\040", " ")
            sep = fields.index("-")
            if (target == mount_point or target.startswith(mount_point.rstrip("/") + "/")) and len(mount_point) >= len(
                best
            ):
                best, fstype = mount_point, fields[sep + 1]
    return fstype == "tmpfs"
