"""The pytest configuration file, found and read without pytest, each value typed as getini types it.

Inside a session the plugin asks `config.getini`: pytest owns the ini there.
Before or outside one — the `agentdrift` commands that take `-c FILE` and
`--rootdir DIR` like pytest and read the plugin's `agent_*` values, the bundle
store, the project root that discovery is rooted at — `read_ini` finds the same
file by pytest's own rules (`_pytest/config/findpaths.py`, `determine_setup`
with no test paths given; PYTEST_ADDOPTS's -c, --rootdir and -o included) and
types each value by the ini type it is declared with, as `Config.getini` does. It imports no pytest: the same `iniconfig`
parser pytest reads .ini and .cfg files with, and `tomllib`.
tests/unit/test_inifile.py holds it to pytest's own answer over a matrix of files.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentdrift.errors import AgentDriftError

#: pytest's search order in each directory, nearest directory first
CONFIG_NAMES = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
_TRUE = ("y", "yes", "t", "true", "on", "1")
_FALSE = ("n", "no", "f", "false", "off", "0")

#: {ini name: (ini type, default)}, as the names are registered with pytest's addini
Declared = Mapping[str, tuple[str, Any]]
#: {ini name: (raw value, "ini" | "toml")}: "ini" values are text or lists of text, "toml" ones keep TOML's types
_Raw = dict[str, tuple[Any, str]]


@dataclass(frozen=True)
class PytestIni:
    """What pytest would find: its rootdir, the configuration file (None when none) and the typed values."""

    rootdir: Path
    inipath: Path | None
    values: dict[str, Any]


def read_ini(
    declared: Declared,
    config_file: str | None = None,
    rootdir: str | None = None,
    start: Path | None = None,
    environ: Mapping[str, str] = os.environ,
) -> PytestIni:
    """The declared values as pytest invoked in ``start`` (the current directory) with ``-c`` and ``--rootdir`` reads them.

    ``rootdir`` is pytest's rootpath for a run given no test paths (so that an
    option's value that looks like a path cannot move it): ``--rootdir``, else
    the directory of ``-c`` or of the file found, else the nearest directory
    holding a setup.py, else ``start``. PYTEST_ADDOPTS speaks as it does to
    pytest: its ``-c`` and ``--rootdir`` when these are not given, and its
    ``-o name=value`` over the file's values.
    """
    addopts = _addopts(environ.get("PYTEST_ADDOPTS", ""))
    config_file, rootdir = config_file or addopts.config_file, rootdir or addopts.rootdir
    invoked = Path(os.path.abspath(start if start is not None else os.getcwd()))
    if config_file:
        given = Path(os.path.abspath(invoked / config_file))
        if not given.is_file():
            raise AgentDriftError("the configuration file given with -c does not exist", given)
        raw = _load(given) or {}
        root = given.parent
        inipath: Path | None = given
    else:
        inipath, raw = _locate(invoked)
        root = inipath.parent if inipath else _setup_py_dir(invoked) or invoked
    if rootdir:
        root = Path(os.path.abspath(invoked / os.path.expandvars(rootdir)))
        if not root.is_dir():
            raise AgentDriftError(f"--rootdir {rootdir}: no such directory")
    raw = {**raw, **_overrides(addopts.override_ini)}
    base = inipath.parent if inipath else invoked  # where `paths` values are relative to
    values = {}
    for name, (ini_type, default) in declared.items():
        if name not in raw:
            values[name] = default
            continue
        value, mode = raw[name]
        typed = _typed_ini if mode == "ini" else _typed_toml
        values[name] = typed(name, ini_type, value, base, inipath)
    return PytestIni(root, inipath, values)


def project_root(config: Any) -> Path:
    """Where instruction discovery and `project:` paths are rooted: pytest's rootdir for this invocation
    as if it named no test paths (read_ini).

    Not config.rootpath: pytest looks for its rootdir before any plugin's options exist, so
    an option's value that looks like a path (`--agent-baseline /elsewhere/base`) moves it.
    """
    return read_ini(
        {},
        config.getoption("inifilename", None),
        config.getoption("rootdir", None),
        Path(config.invocation_params.dir),
    ).rootdir


def _addopts(text: str) -> Any:
    """What of PYTEST_ADDOPTS decides the configuration: -c, --rootdir and -o, parsed as pytest parses them."""
    import argparse

    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    parser.add_argument("-c", "--config-file", dest="config_file")
    parser.add_argument("--rootdir")
    parser.add_argument("-o", "--override-ini", dest="override_ini", action="append", default=[])
    try:
        return parser.parse_known_args(shlex.split(text))[0]
    except (ValueError, argparse.ArgumentError) as exc:  # an unbalanced quote; an option without its value
        raise AgentDriftError(f"PYTEST_ADDOPTS={text!r} cannot be read: {exc}") from None


def _overrides(pairs: list[str]) -> _Raw:
    """-o name=value pairs (the last of one name wins), read like an ini file's text."""
    out: _Raw = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise AgentDriftError(f"PYTEST_ADDOPTS: -o/--override-ini expects name=value, got {pair!r}")
        out[name] = (value, "ini")
    return out


def _locate(invoked: Path) -> tuple[Path | None, _Raw]:
    """The first file of CONFIG_NAMES holding pytest configuration, from ``invoked`` up; else the
    nearest pyproject.toml, empty; else none."""
    nearest_pyproject = None
    for base in (invoked, *invoked.parents):
        for name in CONFIG_NAMES:
            path = base / name
            if path.is_file():
                if name == "pyproject.toml" and nearest_pyproject is None:
                    nearest_pyproject = path
                raw = _load(path)
                if raw is not None:
                    return path, raw
    return nearest_pyproject, {}


def _setup_py_dir(invoked: Path) -> Path | None:
    return next((d for d in (invoked, *invoked.parents) if (d / "setup.py").is_file()), None)


def _load(path: Path) -> _Raw | None:
    """The pytest section of one file, or None when it holds none (a pytest.ini or pytest.toml always does)."""
    if path.suffix == ".toml":
        return _load_toml(path)
    if path.suffix not in (".ini", ".cfg"):
        return None
    import iniconfig

    try:
        parsed = iniconfig.IniConfig(str(path))
    except (OSError, UnicodeDecodeError, iniconfig.ParseError) as exc:
        raise AgentDriftError(f"cannot read the pytest configuration: {exc}", path) from None
    if path.suffix == ".cfg" and "tool:pytest" not in parsed and "pytest" in parsed:
        raise AgentDriftError("a [pytest] section in setup.cfg is not read by pytest: name it [tool:pytest]", path)
    section = "pytest" if path.suffix == ".ini" else "tool:pytest"
    if section in parsed:
        return {k: (v, "ini") for k, v in parsed[section].items()}
    return {} if path.name in ("pytest.ini", ".pytest.ini") else None


def _load_toml(path: Path) -> _Raw | None:
    import tomllib

    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise AgentDriftError(f"cannot read the pytest configuration: {exc}", path) from None
    if path.name in ("pytest.toml", ".pytest.toml"):
        return {k: (v, "toml") for k, v in _table(doc, path, "pytest").items()}
    tool_pytest = _table(_table(doc, path, "tool"), path, "tool.pytest")
    native = {k: v for k, v in tool_pytest.items() if k != "ini_options"}
    ini_options = tool_pytest.get("ini_options")
    if native and ini_options is not None:
        raise AgentDriftError(
            "[tool.pytest] (native TOML types) and [tool.pytest.ini_options] (text, as in an ini file) "
            "cannot be used together: keep one",
            path,
        )
    if native:
        return {k: (v, "toml") for k, v in native.items()}
    if ini_options is None:
        return None
    # pytest reads [tool.pytest.ini_options] as an ini file: every scalar becomes its text
    return {
        k: (v if isinstance(v, list) else str(v), "ini") for k, v in _table(tool_pytest, path, "ini_options").items()
    }


def _table(doc: Any, path: Path, name: str) -> dict[str, Any]:
    value = doc.get(name.rpartition(".")[2], {})
    if not isinstance(value, dict):
        raise AgentDriftError(f"[{name}] is not a table", path)
    return value


def _typed_ini(name: str, ini_type: str, value: Any, base: Path, inipath: Path | None) -> Any:
    """An ini-mode value (text, or a list of text from [tool.pytest.ini_options]) as getini types it."""
    if ini_type in ("paths", "args"):
        items = _shlex(name, value, inipath) if isinstance(value, str) else value
        return [base / x for x in items] if ini_type == "paths" else items
    if ini_type == "linelist":
        return [line.strip() for line in value.split("\n") if line.strip()] if isinstance(value, str) else value
    if ini_type == "bool":
        text = str(value).strip().lower()
        if text not in _TRUE + _FALSE:
            raise AgentDriftError(f"{name} = {value!r} is not a truth value (true or false)", inipath)
        return text in _TRUE
    if ini_type in ("int", "float"):
        try:
            return int(value) if ini_type == "int" else float(value)
        except (TypeError, ValueError):
            raise AgentDriftError(f"{name} = {value!r} is not a number of type {ini_type}", inipath) from None
    return value


def _typed_toml(name: str, ini_type: str, value: Any, base: Path, inipath: Path | None) -> Any:
    """A native TOML value, checked against its ini type without coercion, as getini does."""
    kinds: dict[str, type | tuple[type, ...]] = {
        "paths": list,
        "args": list,
        "linelist": list,
        "bool": bool,
        "int": int,
        "float": (int, float),
        "string": str,
    }
    expected = kinds[ini_type]
    if not isinstance(value, expected) or (isinstance(value, bool) and ini_type in ("int", "float")):
        raise AgentDriftError(f"{name} must be of type {ini_type}, got {type(value).__name__}: {value!r}", inipath)
    if isinstance(value, list):
        bad = next((item for item in value if not isinstance(item, str)), None)
        if bad is not None:
            raise AgentDriftError(f"{name} must be a list of strings, holds {type(bad).__name__}: {bad!r}", inipath)
        return [base / x for x in value] if ini_type == "paths" else list(value)
    return value


def _shlex(name: str, value: str, inipath: Path | None) -> list[str]:
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise AgentDriftError(f"{name}: {exc}", inipath) from None
