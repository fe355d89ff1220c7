"""Version probes: running a program's documented, read-only version display to read its version.

`probe_cli_version` runs the agent CLI's display once a session (in a scratch home, so the display
writes nothing of the user's); `run_probes` runs the runtimes' displays (node, npm, git, the shell)
concurrently for a capture and returns what they printed, each bounded by VERSION_TIMEOUT_S with
stdin closed; `probe_python_metadata` has an interpreter read its own installed-package metadata
(which distributions it sees, which one owns a console script or a module). What a program the agent command names is, and how it is labelled, is
manifest/agentcmd.py's; this module only runs and reads displays.
"""

from __future__ import annotations

import json
import os
import platform as _platform
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentdrift.agents import discovery_base
from pytest_agentdrift.canonical import hash_file
from pytest_agentdrift.vocabulary import NOT_APPLICABLE, UNOBSERVED

#: generous: a version display that is merely slow (a loaded CI machine) must not turn a
#: runtime version into "unobserved" and refuse the comparison
VERSION_TIMEOUT_S = 30.0


def _run(
    ctx: _ProbeSetting, argv: Sequence[str], cwd: Path, scratch_home: bool = False
) -> tuple[int | None, bytes, bytes, str | None]:
    """Run one read-only display; (exit code, stdout, stderr, error). With `scratch_home`, in a
    scratch HOME and XDG directories of its own."""
    import tempfile

    runner = ctx.runner or subprocess.run
    # Documented switches that keep a version display from updating itself.
    env = {**ctx.env, "DISABLE_AUTOUPDATER": "1", "NO_UPDATE_NOTIFIER": "1"}
    # A display may still write where it keeps its state (Copilot unpacks its whole package into
    # the cache dir on first use): it gets a scratch home of its own, so capture writes nothing
    # of the user's, and the scratch is gone when it returns.
    if not scratch_home:
        return _run_in(runner, ctx, argv, cwd, env)
    if ctx.probe_home is not None:
        env.update({name: str(ctx.probe_home) for name in PROBE_HOME_ENV})
        return _run_in(runner, ctx, argv, cwd, env)
    with tempfile.TemporaryDirectory(prefix="agentdrift-probe-", ignore_cleanup_errors=True) as scratch:
        env.update({name: scratch for name in PROBE_HOME_ENV})
        return _run_in(runner, ctx, argv, cwd, env)


#: where programs keep per-user state: a version probe gets a scratch directory for each
PROBE_HOME_ENV = ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")


def _run_in(runner, ctx: _ProbeSetting, argv: Sequence[str], cwd: Path, env: dict[str, str]):
    try:
        proc = runner(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=ctx.version_timeout_s,
            cwd=os.fspath(cwd) if Path(cwd).is_dir() else None,
            env=env,
            check=False,
        )
    except FileNotFoundError:
        return None, b"", b"", "executable not found"
    except subprocess.TimeoutExpired:
        return None, b"", b"", f"timed out after {ctx.version_timeout_s:g} s"
    except OSError as exc:
        return None, b"", b"", f"could not run: {exc.strerror or exc}"
    return proc.returncode, proc.stdout or b"", proc.stderr or b"", None


def _which(name: str, env: Mapping[str, str]) -> str | None:
    if os.sep in name:
        return name if os.access(name, os.X_OK) else None
    return shutil.which(name, path=env.get("PATH", ""))


@dataclass(frozen=True)
class _ProbeSetting:
    """What a version display runs with (ManifestContext has the same fields)."""

    env: Mapping[str, str]
    probe_home: Path | None
    version_timeout_s: float = VERSION_TIMEOUT_S
    runner: Callable[..., subprocess.CompletedProcess[bytes]] | None = None


def probe_cli_version(
    argv: Sequence[str] | None, env: Mapping[str, str], cwd: Path, probe_home: Path | None
) -> dict[str, Any]:
    """The agent CLI's version display, run once a session in a scratch home: ``version`` (its exact
    stdout, or unobserved / not_applicable with a ``reason``), and the executable's path, sha256,
    exit code and stderr. The session shows its first line and capture records it whole
    (ManifestContext.cli_probe), so both say what one run of the display said."""
    return _probe_version(_ProbeSetting(dict(env), probe_home), argv, cwd, scratch_home=True)


def _probe_version(
    ctx: _ProbeSetting, argv: Sequence[str] | None, cwd: Path, scratch_home: bool = False
) -> dict[str, Any]:
    if not argv:
        return {"version": NOT_APPLICABLE, "reason": "the adapter documents no version display"}
    exe = _which(argv[0], ctx.env)
    if exe is None:
        return {"version": UNOBSERVED, "reason": f"{argv[0]!r} not found on PATH"}
    code, out, err, error = _run(ctx, [exe, *argv[1:]], cwd, scratch_home)
    result: dict[str, Any] = {"path": exe, "exit_code": code, "stderr": _clip(err)}
    try:
        result["sha256"] = hash_file(exe)
    except OSError:
        result["sha256"] = UNOBSERVED
    if error is not None or code != 0:
        result["version"] = UNOBSERVED
        result["reason"] = error or f"version display exited {code}"
        return result
    text = out.decode("utf-8", errors="replace").strip()
    # exact stdout, never normalised (1.2.3-beta.1 stays 1.2.3-beta.1)
    result["version"] = text if text else UNOBSERVED
    if not text:
        result["reason"] = "version display printed nothing"
    return result


_RUNTIMES: dict[str, Sequence[str]] = {
    "node": ("node", "--version"),
    "npm": ("npm", "--version"),
    "git": ("git", "--version"),
}


def run_probes(ctx: Any, cwd: Path, roots: discovery_base.Roots, rules: str) -> dict[str, Any]:
    """Version displays, run concurrently (each bounded by the timeout).

    ``ctx`` is capture's ManifestContext, typed loosely because manifest/capture.py imports this
    module; what the displays run with are the fields of _ProbeSetting."""
    from concurrent.futures import ThreadPoolExecutor

    shell = ctx.env.get("SHELL")
    jobs: dict[str, Sequence[str] | None] = dict(_RUNTIMES)
    if ctx.cli_probe is None:
        jobs["cli"] = list(ctx.version_argv) if ctx.version_argv else None
    if shell:
        jobs["shell"] = (shell, "--version")
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        # the agent's own CLI runs in a scratch home (its state is not the user's to change);
        # interpreters and shells keep theirs (a version manager's shim finds itself there)
        npm = _npm_package_version(ctx.env)
        if npm is not None:
            jobs.pop("npm")
        futures = {name: pool.submit(_probe_version, ctx, argv, cwd, name == "cli") for name, argv in jobs.items()}
        results = {name: f.result() for name, f in futures.items()}
    if npm is not None:
        results["npm"] = {"version": npm}
    if ctx.cli_probe is not None:
        results["cli"] = dict(ctx.cli_probe)
    runtimes: dict[str, Any] = {
        "python": f"{_platform.python_implementation()} {_platform.python_version()}",
    }
    for name in ("node", "npm", "git", "shell"):
        if name == "shell" and not shell:
            runtimes[name] = UNOBSERVED
            continue
        res = results[name]
        v = res["version"]
        # first line only: bash prints a licence after its version line
        runtimes[name] = (
            v.splitlines()[0].strip() if isinstance(v, str) and v not in (UNOBSERVED, NOT_APPLICABLE) else v
        )
        if name == "shell" and v not in (UNOBSERVED, NOT_APPLICABLE):
            runtimes[name] = f"{os.path.basename(shell or '')}: {runtimes[name]}"
    runtimes.update(ctx.bundled_runtimes)
    cli = results["cli"]
    if "path" in cli:
        cli["path"] = roots.label(cli["path"]) if cli["path"] else cli["path"]
    return {"cli": cli, "runtimes": runtimes}


def _npm_package_version(env: Mapping[str, str]) -> str | None:
    """npm's version as `npm --version` prints it, read from the package.json of the npm the PATH
    resolves to, when that is npm's own npm-cli.js (a system, nvm or prefix install); None for
    anything else (a version manager's shim), which is asked instead. Starting npm costs
    about half a second, in every session that records a manifest."""
    exe = _which("npm", env)
    if exe is None:
        return None
    cli = Path(os.path.realpath(exe))
    if cli.name != "npm-cli.js" or cli.parent.name != "bin" or cli.parent.parent.name != "npm":
        return None
    try:
        meta = json.loads((cli.parent.parent / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    version = meta.get("version") if isinstance(meta, dict) and meta.get("name") == "npm" else None
    return version if isinstance(version, str) and version.strip() == version and version else None


#: run by the interpreter that will run the agent, never by the harness (no code of the agent's is
#: imported here): the distributions it sees (normalised name: version), the one whose console or
#: GUI script is named `script`, and the one that owns the top-level package of `module`.
#: Reading metadata imports nothing of the distributions it reads.
_PYTHON_METADATA = r"""
import json, re, sys
import importlib.metadata as md
q = json.loads(sys.argv[1])
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
dists, owner = {}, None
for d in md.distributions():
    name = d.metadata["Name"]
    if not name:
        continue
    dists.setdefault(norm(name), d.version)
    if q.get("script") and owner is None:
        for ep in d.entry_points:
            if ep.group in ("console_scripts", "gui_scripts") and ep.name == q["script"]:
                owner = [norm(name), d.version]
                break
mod = None
if q.get("module"):
    names = md.packages_distributions().get(q["module"].split(".")[0]) or []
    mod = [norm(names[0]), dists.get(norm(names[0]))] if names else None
print(json.dumps({"distributions": dict(sorted(dists.items())), "script_owner": owner, "module_owner": mod}))
"""


def probe_python_metadata(
    interpreter: str,
    query: Mapping[str, Any],
    env: Mapping[str, str],
    cwd: Path,
    probe_home: Path | None,
    runner: Callable[..., subprocess.CompletedProcess[bytes]] | None = None,
) -> dict[str, Any]:
    """What `interpreter` reads from its own installed-package metadata (_PYTHON_METADATA), run in
    a scratch home, isolated (-I: no user site, no PYTHON* variables) and writing no bytecode (-B);
    ``{"error": why}`` when it cannot say."""
    ctx = _ProbeSetting(dict(env), probe_home, runner=runner)
    code, out, err, error = _run(
        ctx, [interpreter, "-I", "-B", "-c", _PYTHON_METADATA, json.dumps(dict(query))], cwd, scratch_home=True
    )
    if error is not None or code != 0:
        last = err.decode("utf-8", errors="replace").strip().splitlines()[-1:] or [""]
        return {"error": error or f"its metadata read exited {code}: {last[0][:200]}"}
    try:
        found = json.loads(out.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {"error": "its metadata read printed no JSON"}
    return found if isinstance(found, dict) else {"error": "its metadata read printed no JSON object"}


def _clip(data: bytes, limit: int = 400) -> str:
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= limit else text[:limit] + "…[truncated]"
