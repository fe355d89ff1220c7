"""The agent command as identity: its argv without a private path, and the files it names.

`identity_argv` labels the agent's argv (an interpreter by implementation and version, a path
under a named root relative to it, any other absolute path by its file name); `agent_files_hash`
hashes the files the command names (its script, the --agent-config files), so editing the agent's
own program changes the identity. `label_argv` relabels any argv for provenance, `argv_value` reads
one flag's value from the agent's argv. What else identifies the program an agent command runs
belongs here; running a program to read its version is manifest/probes.py's.
"""

from __future__ import annotations

import json
import os
import platform as _platform
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_agentdrift.agents import discovery_base
from pytest_agentdrift.canonical import hash_file
from pytest_agentdrift.manifest.probes import VERSION_TIMEOUT_S, probe_python_metadata
from pytest_agentdrift.vocabulary import NOT_APPLICABLE, UNOBSERVED


def label_argv(argv: Sequence[str], roots: discovery_base.Roots) -> list[str]:
    """argv with absolute paths under a named root relabelled, so identity holds no private path."""
    out = []
    for arg in argv:
        s = str(arg)
        if os.path.isabs(s) and not any(c in s for c in "{}"):
            label = roots.label(s)
            out.append(label if not label.startswith("outside:") else s)
        else:
            out.append(s)
    return out


_INTERPRETER = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?(\.exe)?$")


def _interpreter_label(path: str) -> str | None:
    """An interpreter by implementation and version, never by where it is installed."""
    if not _INTERPRETER.match(os.path.basename(path)):
        return None
    if os.path.realpath(path) == os.path.realpath(sys.executable) or os.path.abspath(path) == os.path.abspath(
        sys.executable
    ):
        return f"interpreter:{_platform.python_implementation()} {_platform.python_version()}"
    try:
        out = subprocess.run(
            [path, "-c", "import platform; print(platform.python_implementation(), platform.python_version())"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return "interpreter:unobserved"
    text = out.stdout.strip()
    return f"interpreter:{text}" if out.returncode == 0 and text else "interpreter:unobserved"


def _identity_label(path: str, roots: discovery_base.Roots) -> str:
    label = _interpreter_label(path) or roots.label(path)
    # the system root is "/": a label under it would still spell out this machine's directories
    if label.startswith(("outside:", "system:")):
        return "outside:" + os.path.basename(path)
    return label


def identity_argv(argv: Sequence[str], roots: discovery_base.Roots) -> list[str]:
    """argv for the identity: no absolute path of this machine.

    Interpreters become their implementation and version; paths under a named
    root (project, home, task) are relabelled; any other absolute path keeps
    only its file name (what the file holds is in agent_files_hash).
    """
    out = []
    for arg in argv:
        text = str(arg)
        if os.path.isabs(text) and not any(c in text for c in "{}"):
            out.append(_identity_label(text, roots))
        else:
            out.append(text)
    return out


def agent_files_hash(
    argv: Sequence[str],
    config_files: Sequence[Path],
    roots: discovery_base.Roots,
    reasons: dict[str, str],
    program: str | None = None,
) -> Any:
    """sha256 of each file the agent command names (its script, --agent-config files), by label.

    Interpreters are identified by version, not bytes; a file under a named root is
    labelled relative to it, any other by its name. Editing the agent's own script
    changes this field. An --agent-config file is hashed in its canonical form (the
    parsed value, as config_hash reads it): reordered keys or CRLF are no change. `program`, the
    file program_identity identified as the command's program, is left out: its bytes or its
    package's version are cli_version's.
    """
    files: dict[str, str] = {}
    candidates = [str(a) for a in argv[1:] if os.path.isabs(str(a)) and not any(c in str(a) for c in "{}")]
    if argv and os.path.isabs(str(argv[0])) and _interpreter_label(str(argv[0])) is None:
        candidates.insert(0, str(argv[0]))  # a script run directly is the agent itself
    configs = {os.path.abspath(os.fspath(p)) for p in config_files}
    candidates += sorted(configs)
    for path in candidates:
        if not os.path.isfile(path) or _interpreter_label(path) or path == program:
            continue
        label = _identity_label(path, roots)
        try:
            files[label] = _config_digest(Path(path), roots) if path in configs else "sha256:" + hash_file(path)
        except OSError as exc:
            files[label] = UNOBSERVED
            reasons["agent_files_hash"] = f"{label}: {exc.strerror or exc}"
    if not files:
        reasons["agent_files_hash"] = (
            "the agent command names no file of its own besides its program (in cli_version)"
            if program
            else "the agent command names no file of its own"
        )
        return NOT_APPLICABLE
    return dict(sorted(files.items()))


def _config_digest(path: Path, roots: discovery_base.Roots) -> str:
    """The canonical digest of a configuration file, the one config_hash is built from."""
    source = discovery_base.config_source(
        path, roots, surface="generic", scope="user-named", precedence=0, fmt=discovery_base.format_for(path), spec=None
    )
    if source.get("status") != "present":
        raise OSError(f"{source.get('status')}: {path.name}")
    return str(source["canonical_sha256"])


# --------------------------------------------------------------------------- the program's version

#: interpreters whose first non-option argument is the program they run (what follows `-c` is inline
#: code: what program that code starts is not known before it runs)
_SCRIPT_RUNNERS = re.compile(r"^(node|nodejs|bash|sh|dash|zsh|ksh|ruby|perl)(\d+(\.\d+)*)?$")
_DECLARE = "the program it starts is not identified; declare its version as cli_version (--agent-declare)"
#: programs that fetch or choose the program they run: what they start is not known before it runs
_LAUNCHERS = frozenset(
    {"npx", "pnpx", "bunx", "uvx", "uv", "pipx", "pnpm", "yarn", "bun", "poetry", "pdm", "hatch", "env"}
)
#: options of python that take a value (the script comes after it)
_PYTHON_VALUE_OPTS = frozenset({"-W", "-X", "--check-hash-based-pycs"})
#: the shebang pip writes when the interpreter's path is too long for one: a shell that execs it
_PIP_SH_EXEC = re.compile(r"""^'''exec' '?"?([^'" ]+)""")


def program_identity(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path, probe_home: Path | None, runner: Any = None
) -> dict[str, Any]:
    """Which program an agent command runs, read-only: ``version`` is what cli_version records.

    * a package of npm (its bin links into node_modules/<package>/): ``npm:<name>@<version>`` from
      that package's package.json;
    * a console script pip installed, or ``python -m module``: ``pip:<name>==<version>`` of the
      distribution that owns it, as the interpreter that will run it reads its own metadata;
    * any other script or program: ``{"program": name, "sha256": ...}``, and for a python script
      the distributions its interpreter sees (``distributions``: name to version). The
      interpreter's own version is runtime_versions' and the command's, not the program's.

    Also ``kind`` and ``path`` (absolute, for provenance to label); when the program cannot be
    identified (a launcher such as npx, inline code such as `sh -c`) ``version`` is unobserved with
    a ``reason`` naming the way out: the operator declares it.
    """
    if not argv:
        return {"version": NOT_APPLICABLE, "reason": "no agent command"}
    exe = _resolve(str(argv[0]), env)
    if exe is None:
        return {"version": UNOBSERVED, "reason": f"{argv[0]!r} not found on PATH"}
    if os.path.basename(exe) in _LAUNCHERS:
        return {
            "version": UNOBSERVED,
            "reason": f"{os.path.basename(exe)} fetches or picks the program it runs: {_DECLARE}",
        }
    probe = _PythonProbe(env, cwd, probe_home, runner)
    if _interpreter_label(exe) is not None:
        return _python_program(exe, [str(a) for a in argv[1:]], probe)
    if _SCRIPT_RUNNERS.match(os.path.basename(exe)):
        return _runner_script(exe, [str(a) for a in argv[1:]], env)
    found = _npm_program(exe)
    if found is not None:
        return found
    interpreter = _python_shebang(exe, env)
    if interpreter is not None:
        return _console_script(exe, interpreter, probe)
    return _file_program(exe)


def _resolve(name: str, env: Mapping[str, str]) -> str | None:
    if os.sep in name:
        return name if os.path.isfile(name) else None
    return shutil.which(name, path=env.get("PATH", ""))


def _runner_script(exe: str, args: list[str], env: Mapping[str, str]) -> dict[str, Any]:
    """`node cli.js`, `bash agent.sh`: the script (an npm package's when it is one)."""
    runner = os.path.basename(exe)
    if any(a in ("-c", "-e", "--eval") for a in args):
        return {"version": UNOBSERVED, "reason": f"{runner} runs inline code: {_DECLARE}"}
    script = next((a for a in args if not a.startswith("-")), None)
    path = _resolve(script, env) if script is not None and os.sep in script else None
    if path is None:
        return {"version": UNOBSERVED, "reason": f"no script file found in what {runner} is given"}
    return _npm_program(path) or _file_program(path)


class _PythonProbe:
    """How an interpreter's metadata read runs: the agent's environment, a scratch home."""

    def __init__(self, env: Mapping[str, str], cwd: Path, probe_home: Path | None, runner: Any):
        self.env, self.cwd, self.probe_home, self.runner = env, cwd, probe_home, runner

    def __call__(self, interpreter: str, **query: Any) -> dict[str, Any]:
        return probe_python_metadata(interpreter, query, self.env, self.cwd, self.probe_home, self.runner)


def _python_program(interpreter: str, args: list[str], probe: _PythonProbe) -> dict[str, Any]:
    """`python [options] script.py ...` or `python [options] -m module ...`."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] not in ("-m", "-c", "-"):
        i += 2 if args[i] in _PYTHON_VALUE_OPTS else 1
    if i >= len(args) or args[i] in ("-c", "-"):
        return {"version": UNOBSERVED, "reason": f"the interpreter runs inline code: {_DECLARE}"}
    if args[i] == "-m":
        module = args[i + 1] if i + 1 < len(args) else ""
        found = probe(interpreter, module=module)
        owner = found.get("module_owner")
        if owner:
            return {"version": f"pip:{owner[0]}=={owner[1]}", "kind": "python -m", "path": interpreter}
        why = found.get("error") or f"no installed distribution owns the module {module!r}"
        return {"version": UNOBSERVED, "reason": why, "path": interpreter}
    if not os.path.isfile(args[i]):
        return {"version": UNOBSERVED, "reason": f"the script {args[i]!r} the interpreter runs is not a file"}
    return _python_script(args[i], interpreter, probe)


def _python_script(
    script: str, interpreter: str, probe: _PythonProbe, found: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A python script by its bytes, with the distributions its interpreter sees."""
    out = _file_program(script)
    if out["version"] == UNOBSERVED:
        return out
    found = found if found is not None else probe(interpreter)
    if "error" in found:
        return {"version": UNOBSERVED, "reason": f"{os.path.basename(interpreter)}: {found['error']}", "path": script}
    out["version"] = {**out["version"], "distributions": found.get("distributions", {})}
    out["kind"] = "python script"
    return out


def _console_script(exe: str, interpreter: str, probe: _PythonProbe) -> dict[str, Any]:
    """A file whose shebang names a python: pip's console script (its owner's version), else a script."""
    found = probe(interpreter, script=os.path.basename(exe))
    owner = found.get("script_owner")
    if owner:
        return {"version": f"pip:{owner[0]}=={owner[1]}", "kind": "console script", "path": exe}
    return _python_script(exe, interpreter, probe, found)


def _python_shebang(path: str, env: Mapping[str, str]) -> str | None:
    """The python a script's shebang runs (pip's `#!/bin/sh` + `'''exec'` form included), if any."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(1024).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None
    if not head or not head[0].startswith("#!"):
        return None
    words = head[0][2:].split()
    if words and os.path.basename(words[0]) == "env" and len(words) > 1:
        words = words[1:]
    target = words[0] if words else ""
    if target in ("/bin/sh", "/usr/bin/sh") and len(head) > 1:
        match = _PIP_SH_EXEC.match(head[1])
        target = match.group(1) if match else ""
    if not _INTERPRETER.match(os.path.basename(target)):
        return None
    return target if os.path.isabs(target) else _resolve(target, env)


def _npm_program(path: str) -> dict[str, Any] | None:
    """The npm package a file belongs to (its real path under node_modules/<package>/), or None."""
    real = Path(os.path.realpath(path))
    for pkg in real.parents:
        scoped = pkg.parent.name.startswith("@") and pkg.parent.parent.name == "node_modules"
        if pkg.parent.name != "node_modules" and not scoped:
            continue
        try:
            meta = json.loads((pkg / "package.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = None
        name = meta.get("name") if isinstance(meta, dict) else None
        version = meta.get("version") if isinstance(meta, dict) else None
        if isinstance(name, str) and isinstance(version, str) and name and version:
            return {"version": f"npm:{name}@{version}", "kind": "npm package", "path": path}
        return {"version": UNOBSERVED, "reason": f"{pkg.name}/package.json names no package and version", "path": path}
    return None


def _file_program(path: str) -> dict[str, Any]:
    try:
        sha = "sha256:" + hash_file(path)
    except OSError as exc:
        return {"version": UNOBSERVED, "reason": f"{os.path.basename(path)}: {exc.strerror or exc}", "path": path}
    return {"version": {"program": os.path.basename(path), "sha256": sha}, "kind": "program", "path": path}


def argv_value(argv: Sequence[str], flags: Sequence[str]) -> str | None:
    for i, a in enumerate(argv):
        for f in flags:
            if a == f and i + 1 < len(argv):
                return str(argv[i + 1])
            if a.startswith(f + "="):
                return a.split("=", 1)[1]
    return None
