"""The ini a CLI command reads: found by pytest's own rules (-c, --rootdir, the search upwards).

`agentdrift diff`, `compare` and `merge` accept `-c FILE` and `--rootdir DIR`
like pytest and read the same `agent_accept_unobserved` (and `agent_gate`)
the plugin would, so the accepted list resolves the same way everywhere
(manifest/accept.py). pytest has no public API for "find and parse my ini",
so this builds a pytest Config the way `pytest.main` does
(`_pytest.config._prepareconfig`, stable since pytest 6), without importing
any conftest.py, and asks it `getini` — the very lookup the plugin uses.
"""

from __future__ import annotations

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
    from pytest_agentdrift.manifest.bundles import find_rootdir

    given = config.getoption("rootdir", None)
    invoked = Path(config.invocation_params.dir)
    return (invoked / given).resolve() if given else find_rootdir(invoked)[0]
