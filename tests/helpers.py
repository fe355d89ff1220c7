"""What the suite's modules share to start sessions and write files (importable as `helpers`:
tests/conftest.py puts tests/ on sys.path).

A session is `python -m pytest` in a subprocess, as a user runs it: `run_pytest` in a directory
(`record_session` for a whole suite, `run_pytest_at_home` with HOME there, for a record a
module-scoped fixture makes once), `run_pytester` in pytester's; `agentdrift` runs the CLI. The sessions block the cache provider (a
session must not write .pytest_cache into the project it records), pytest-benchmark and
pytest-randomly (installed here; they would shuffle or time the tasks when a test loads plugins as
installed). `run_entry` builds one run of a results.json for the renderers' unit tests;
`tiny_agent_wheel` and `pip_install` put a versioned package with a console script into a venv.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from pytest_agentdrift.tasks.load import LAYERS

#: the xdist group of the tests that read tests/conftest.py's builtin_records (one worker makes them)
BUILTIN_RECORDS_GROUP = "builtin-records"
#: the plugins a session the tests start never loads (see the module docstring)
SESSION_ARGS = ("-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:randomly")


def nested_session_env(**extra: str) -> dict[str, str]:
    """This environment for a session a test starts, without what would make it think it is part
    of the suite's own run (an xdist worker's variables, the suite's addopts, its current test)."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_ADDOPTS", "PYTEST_CURRENT"))
    }
    env.update(extra)
    return env


def run_pytest(
    cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300, **kw: Any
) -> subprocess.CompletedProcess:
    """`python -m pytest ARGS` in `cwd`, its output captured (`env` replaces the environment)."""
    return _captured(["pytest", *SESSION_ARGS, *args], cwd, env, timeout, **kw)


def run_pytester(pytester: pytest.Pytester, *args: str, timeout: float = 300) -> pytest.RunResult:
    """A session in pytester's directory, in a subprocess (HOME is that directory)."""
    return pytester.runpytest_subprocess(*SESSION_ARGS, *args, timeout=timeout)


def record_session(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """A quiet `run_pytest` that records a whole suite (a longer limit than a test's own sessions)."""
    return run_pytest(cwd, "-q", *args, timeout=900)


def run_pytest_at_home(root: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`run_pytest` in `root` with HOME there, as `run_pytester` runs a session: for a record a
    module-scoped fixture makes once (pytester is per test) and its tests copy into pytester's."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "TOX_ENV_DIR")}
    env.update(HOME=str(root), USERPROFILE=str(root), PY_COLORS="0")
    return run_pytest(root, *args, env=env, timeout=timeout)


def agentdrift(
    *args: object, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess:
    """The `agentdrift` CLI (`python -m pytest_agentdrift ARGS`), its output captured."""
    return _captured(["pytest_agentdrift", *map(str, args)], cwd, env, timeout)


def _captured(module_argv: list[str], cwd, env, timeout: float, **kw: Any) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS`, its output captured as text; its exit status is the caller's to check."""
    return subprocess.run(
        [sys.executable, "-m", *module_argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **kw,
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
