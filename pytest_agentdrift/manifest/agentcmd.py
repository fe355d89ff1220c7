"""The agent command as identity: its argv without a private path, and the files it names.

`identity_argv` labels the agent's argv (an interpreter by implementation and version, a path
under a named root relative to it, any other absolute path by its file name); `agent_files_hash`
hashes the files the command names (its script, the --agent-config files), so editing the agent's
own program changes the identity. `label_argv` relabels any argv for provenance, `argv_value` reads
one flag's value from the agent's argv. What else identifies the program an agent command runs
belongs here; running a program to read its version is manifest/probes.py's.
"""

from __future__ import annotations

import os
import platform as _platform
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_agentdrift.agents import discovery_base
from pytest_agentdrift.canonical import hash_file
from pytest_agentdrift.manifest.probes import VERSION_TIMEOUT_S
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
    argv: Sequence[str], config_files: Sequence[Path], roots: discovery_base.Roots, reasons: dict[str, str]
) -> Any:
    """sha256 of each file the agent command names (its script, --agent-config files), by label.

    Interpreters are identified by version, not bytes; a file under a named root is
    labelled relative to it, any other by its name. Editing the agent's own script
    changes this field. An --agent-config file is hashed in its canonical form (the
    parsed value, as config_hash reads it): reordered keys or CRLF are no change.
    """
    files: dict[str, str] = {}
    candidates = [str(a) for a in argv[1:] if os.path.isabs(str(a)) and not any(c in str(a) for c in "{}")]
    if argv and os.path.isabs(str(argv[0])) and _interpreter_label(str(argv[0])) is None:
        candidates.insert(0, str(argv[0]))  # a script run directly is the agent itself
    configs = {os.path.abspath(os.fspath(p)) for p in config_files}
    candidates += sorted(configs)
    for path in candidates:
        if not os.path.isfile(path) or _interpreter_label(path):
            continue
        label = _identity_label(path, roots)
        try:
            files[label] = _config_digest(Path(path), roots) if path in configs else "sha256:" + hash_file(path)
        except OSError as exc:
            files[label] = UNOBSERVED
            reasons["agent_files_hash"] = f"{label}: {exc.strerror or exc}"
    if not files:
        reasons["agent_files_hash"] = "the agent command names no file of its own"
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


def argv_value(argv: Sequence[str], flags: Sequence[str]) -> str | None:
    for i, a in enumerate(argv):
        for f in flags:
            if a == f and i + 1 < len(argv):
                return str(argv[i + 1])
            if a.startswith(f + "="):
                return a.split("=", 1)[1]
    return None
