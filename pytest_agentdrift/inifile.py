"""The pytest ini, read two ways: without pytest (find_rootdir), and as the plugin sees it (read_ini).

find_rootdir is the one pure reader: the rootdir and one raw value, by
pytest's search order, for what runs before or outside pytest (the bundle
store of `agentdrift bundle`, the project root discovery is rooted at).

`agentdrift diff`, `compare` and `merge` accept `-c FILE` and `--rootdir DIR`
like pytest and read the same `agent_accept_unobserved` (and `agent_gate`)
the plugin would, so the accepted list resolves the same way everywhere
(manifest/accept.py). pytest has no public API for "find and parse my ini",
so this builds a pytest Config the way `pytest.main` does
(`_pytest.config._prepareconfig`, stable since pytest 6), without importing
any conftest.py, and asks it `getini` — the very lookup the plugin uses.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pytest_agentdrift.errors import AgentDriftError


def read_ini(
    names: list[str], config_file: str | None = None, rootdir: str | None = None, args: list[str] | None = None
) -> tuple[dict[str, Any], Path | None]:
    """{ini name: value as the plugin would see it}, and the ini file found (None when none)."""
    import pytest
    from _pytest.config import _prepareconfig

    argv = ["--noconftest", "-p", "no:cacheprovider", "-p", "no:xdist"]
    if config_file:
        argv += ["-c", config_file]
    if rootdir:
        argv += ["--rootdir", rootdir]
    argv += list(args or [])
    try:
        config = _prepareconfig(argv)
    except pytest.UsageError as exc:
        raise AgentDriftError(f"reading the pytest ini: {exc}") from None
    try:
        values = {name: config.getini(name) for name in names}
        return values, config.inipath
    finally:
        config._ensure_unconfigure()


def project_root(config: Any) -> Path:
    """Where instruction discovery and `project:` paths are rooted: --rootdir when given, else
    the directory of the pytest configuration above where pytest was invoked, else that directory.

    Not config.rootpath: pytest looks for its rootdir before any plugin's options exist, so
    an option's value that looks like a path (`--agent-baseline /elsewhere/base`) moves it.
    """
    given = config.getoption("rootdir", None)
    invoked = Path(config.invocation_params.dir)
    return (invoked / given).resolve() if given else find_rootdir(invoked)[0]


def find_rootdir(start: Path, name: str = "agent_bundles") -> tuple[Path, str | None]:
    """(rootdir, the ini value ``name``) as pytest would find them from ``start``, read without pytest.

    The first ancestor holding ``pytest.ini`` / ``.pytest.ini``, a
    ``pyproject.toml`` with ``[tool.pytest.ini_options]``, a ``tox.ini``
    with ``[pytest]`` or a ``setup.cfg`` with ``[tool:pytest]`` is the
    rootdir (pytest's order); without one, ``start`` itself. Only ``name``
    is read from it, as text (no ini type applied).
    """
    import configparser
    import tomllib

    start = Path(os.path.abspath(start))
    for d in (start, *start.parents):
        for ini in ("pytest.ini", ".pytest.ini"):
            if (d / ini).is_file():
                return d, _ini_value(configparser, d / ini, "pytest", name)
        if (d / "pyproject.toml").is_file():
            try:
                doc = tomllib.loads((d / "pyproject.toml").read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                raise AgentDriftError(f"cannot read the pytest configuration: {exc}", d / "pyproject.toml") from None
            section = doc.get("tool", {}).get("pytest", {}).get("ini_options")
            if isinstance(section, dict):
                value = section.get(name)
                return d, str(value) if value is not None else None
        if (d / "tox.ini").is_file() and _has_section(configparser, d / "tox.ini", "pytest"):
            return d, _ini_value(configparser, d / "tox.ini", "pytest", name)
        if (d / "setup.cfg").is_file() and _has_section(configparser, d / "setup.cfg", "tool:pytest"):
            return d, _ini_value(configparser, d / "setup.cfg", "tool:pytest", name)
    return start, None


def _has_section(configparser: Any, path: Path, section: str) -> bool:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return False
    return parser.has_section(section)


def _ini_value(configparser: Any, path: Path, section: str, name: str) -> str | None:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise AgentDriftError(f"cannot read the pytest configuration: {exc}", path) from None
    if parser.has_option(section, name):
        return parser.get(section, name).strip() or None
    return None
