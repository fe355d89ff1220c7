"""What a command's program is on this host and what running it needs: a version manager's shim
resolved to the program it starts, a script's interpreter, the program's install prefix, a virtual
environment and its base installation, an npm package's dependencies. No pytest.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Mapping

from pytest_agentdrift.run.hostpaths import is_home_or_above, resolved, within


def install_prefix(real: str) -> str | None:
    """The directory an installed program lives in, when it is one we can name safely:
    an npm package (its directory under node_modules), a virtual environment, or the
    `<prefix>` of `<prefix>/bin/<program>`; never /, /usr, a home directory or ~/.local."""
    parts = real.split("/")
    if "node_modules" in parts:
        i = len(parts) - 1 - parts[::-1].index("node_modules")
        if i + 1 < len(parts):
            end = i + 3 if parts[i + 1].startswith("@") else i + 2
            return "/".join(parts[:end])
    parent = os.path.dirname(real)
    if os.path.basename(parent) in ("bin", "sbin"):
        prefix = os.path.dirname(parent)
        if prefix not in ("/", "/usr", "/usr/local") and not is_home_or_above(prefix):
            return prefix
    return None


def npm_dependencies(prefix: str) -> list[tuple[str, str]]:
    """The installed packages an npm package needs that lie outside it (path, why).

    `npm install --prefix` (or a project's own node_modules) puts a package's dependencies
    beside it rather than inside it: `node_modules/@openai/codex` finds its platform binary in
    `node_modules/@openai/codex-linux-x64`, `@github/copilot` finds `detect-libc`. Each name
    of `dependencies` and `optionalDependencies` is resolved as Node does, in the nearest
    `node_modules` up from the package, transitively; the ones inside the package are already
    visible with it."""
    out: list[tuple[str, str]] = []
    seen = {resolved(prefix)}
    todo = [prefix]
    while todo and len(seen) < 200:
        pkg = todo.pop()
        for name in _npm_dependency_names(pkg):
            found = _npm_resolve(pkg, name)
            if found is None or found in seen:
                continue
            seen.add(found)
            if not within(found, resolved(prefix)):
                out.append((found, f"npm dependency {name} of {pkg.rsplit('node_modules/', 1)[-1]}"))
            todo.append(found)
    return out


def _npm_dependency_names(pkg: str) -> list[str]:
    try:
        meta = json.loads(Path(pkg, "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(meta, dict):
        return []
    names: list[str] = []
    for key in ("dependencies", "optionalDependencies"):
        deps = meta.get(key)
        if isinstance(deps, dict):
            names += [n for n in deps if isinstance(n, str) and "/.." not in n and not n.startswith(".")]
    return names


def _npm_resolve(pkg: str, name: str) -> str | None:
    """Where Node finds package `name` from inside `pkg`: its own node_modules, then each
    node_modules directory above it."""
    d = resolved(pkg)
    candidates = [os.path.join(d, "node_modules", name)]
    while d != "/":
        d = os.path.dirname(d)
        if os.path.basename(d) == "node_modules":
            candidates.append(os.path.join(d, name))
    for c in candidates:
        if os.path.isfile(os.path.join(c, "package.json")):
            return resolved(c)
    return None


def _shebang_words(path: str) -> list[str]:
    """The words of a script's `#!` line ([] for a binary or an unreadable file)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    return head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()


def _shebang(path: str) -> str | None:
    words = _shebang_words(path)
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        return rest[0] if rest else None
    return words[0]


# ---- version managers: a shim is not the program it starts ---------------------------------
#: a shim script that execs its manager, `exec "<root>/libexec/pyenv" exec "$program" "$@"`
#: (pyenv, rbenv, nodenv, asdf, ...): it runs only where the whole manager is visible
_EXEC_SHIM = re.compile(r'^\s*exec\s+"?([^"\s]+)"?\s+exec\s', re.M)
#: managers whose shims are links to the manager's own binary (it reads argv[0]): link target -> manager
_LINK_SHIMS = {"mise": "mise", "rtx": "rtx", "volta-shim": "volta"}


@dataclass(frozen=True)
class Program:
    """What a command's first word runs on this host."""

    found: str  # where PATH (or the command itself) points
    path: str  # what really runs: `found`, or what a version manager's shim starts
    manager: str | None = None  # the version manager whose shim `found` is
    problem: str | None = None  # why a shim could not be resolved


def shim_manager(found: str, path_env: str | None) -> str | None:
    """The version manager `found` is a shim of (its executable), or None for a real program."""
    real = resolved(found)
    if os.path.islink(found) and os.path.basename(real) in _LINK_SHIMS:
        name = _LINK_SHIMS[os.path.basename(real)]
        sibling = os.path.join(os.path.dirname(real), name)
        return sibling if os.path.isfile(sibling) else shutil.which(name, path=path_env) or real
    if os.path.basename(_shebang(real) or "") not in ("sh", "bash", "dash", "zsh"):
        return None
    try:
        with open(real, "rb") as fh:
            text = fh.read(8192).decode("utf-8", "replace")
    except OSError:
        return None
    m = _EXEC_SHIM.search(text)
    if m is None or "$" in m.group(1):
        return None
    manager = m.group(1)
    return manager if "/" in manager else shutil.which(manager, path=path_env) or manager


@lru_cache(maxsize=64)
def resolve_program(exe: str, path_env: str | None) -> Program | None:
    """Where `exe` points and what really runs (a shim asked with its manager's `which`, in
    the session's own directory and environment: a .python-version there counts); None
    when there is no such program."""
    import subprocess

    found = exe if "/" in exe else shutil.which(exe, path=path_env)
    if not found or not os.path.exists(found):
        return None
    found = os.path.abspath(found)
    manager = shim_manager(found, path_env)
    if manager is None:
        return Program(found, found)
    name = os.path.basename(found)
    argv = [manager, "which", name]
    try:
        out = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PATH": path_env or os.environ.get("PATH", "")},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return Program(found, found, manager, f"`{' '.join(argv)}` could not run: {exc}")
    lines = out.stdout.strip().splitlines()
    path = lines[-1].strip() if lines else ""
    if out.returncode != 0 or not os.path.isabs(path) or not os.path.isfile(path):
        why = (out.stderr.strip().splitlines() or out.stdout.strip().splitlines() or [f"exit {out.returncode}"])[-1]
        return Program(found, found, manager, f"`{' '.join(argv)}` named no program: {why}")
    return Program(found, os.path.abspath(path), manager)


def host_argv(argv: list[str], path_env: str | None) -> list[str]:
    """`argv` with its program named as the host runs it: a shim replaced by what it starts,
    a script whose shebang is `env NAME` started by the NAME the host's PATH finds (inside
    the sandbox the PATH starts with the task's toolchain, which is not the agent's)."""
    if not argv or "{" in argv[0]:
        return list(argv)
    prog = resolve_program(argv[0], path_env)
    if prog is None or prog.problem:
        return list(argv)
    words = _shebang_words(resolved(prog.path))
    if len(words) == 2 and os.path.basename(words[0]) == "env" and not words[1].startswith("-"):
        interp = resolve_program(words[1], path_env)
        if interp is not None and not interp.problem:
            return [interp.path, prog.path, *argv[1:]]
    return [prog.path, *argv[1:]]


def executable_paths(  # noqa: C901 (known debt: split by job when next touched)
    exe: str, path_env: str | None, _depth: int = 0, _name: str | None = None
) -> list[tuple[str, str]]:
    """What running `exe` needs beyond the system: (path, why) pairs.

    The file (and each link on the way to it), its install prefix, a virtual
    environment's base installation, and the same for a script's interpreter.
    A version manager's shim is replaced by the program it starts (the shim
    itself needs the whole manager, and the sandbox shows no home).
    """
    prog = resolve_program(exe, path_env) if _depth <= 3 else None
    if prog is None or prog.problem:
        return []
    name = _name or exe
    if prog.manager is not None:
        how = f"{name} (a shim of {os.path.basename(prog.manager)}, {prog.found}, resolved)"
        return executable_paths(prog.path, path_env, _depth + 1, how)
    out: list[tuple[str, str]] = []
    p = prog.found
    for _ in range(40):
        if not os.path.islink(p):
            break
        out.append((p, f"link to {name}"))
        p = os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p)))
    real = resolved(prog.found)
    out.append((real, f"executable {name}"))
    venv = venv_of(prog.found)
    if venv is not None and venv != install_prefix(real):
        # a venv's interpreter is a link out of it: without the venv its packages are gone
        out.append((venv, f"virtual environment of {name}"))
        out += _venv_base(venv)
    prefix = install_prefix(real)
    if prefix:
        out.append((prefix, f"install prefix of {name}"))
        out += npm_dependencies(prefix)
        out += _venv_base(prefix)
    interp = _shebang(real)
    if interp and os.path.basename(interp) not in ("sh", "bash", "dash"):
        out += executable_paths(interp, path_env, _depth + 1)
    return out


def venv_of(found: str) -> str | None:
    """The virtual environment a program's name lies in (`<venv>/bin/python`, pyvenv.cfg beside
    bin/), before its links are followed: a venv's interpreter links to the base Python, and the
    venv is only found from the name the command used. Never a home directory or above."""
    parent = os.path.dirname(os.path.abspath(found))
    if os.path.basename(parent) not in ("bin", "Scripts"):
        return None
    venv = os.path.dirname(parent)
    if not os.path.isfile(os.path.join(venv, "pyvenv.cfg")) or venv in ("/", "/usr", "/usr/local"):
        return None
    return None if is_home_or_above(resolved(venv)) else venv


def _venv_base(prefix: str) -> list[tuple[str, str]]:
    """The base installation a virtual environment at `prefix` was made from (its pyvenv.cfg
    `home`), where that is not the system's own."""
    cfg = os.path.join(prefix, "pyvenv.cfg")
    if not os.path.isfile(cfg):
        return []
    out = []
    for line in Path(cfg).read_text(encoding="utf-8", errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            base = os.path.dirname(resolved(value.strip()))
            if base not in ("/", "/usr") and not is_home_or_above(base):
                out.append((base, f"base installation of {prefix}"))
    return out


def env_path(env: Mapping[str, str]) -> str:
    return env.get("PATH") or "/usr/local/bin:/usr/bin:/bin"
