"""What the harness itself needs inside a sandbox: the Python runtime it runs and this package (its
PYTHONPATH for a sandboxed helper), every copy of the bundled suite (which no sandbox shows), and
which additions a sandbox shows anyway. No pytest.
"""

from __future__ import annotations

import glob
import os
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from pytest_agentdrift.run.hostpaths import resolved, within

#: this package (run/ is one of its stage folders): mounted whole, its bundled suite excluded
PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def harness_pythonpath(*first: Path) -> str:
    """PYTHONPATH for a sandboxed helper of ours: its hook directory, then the directory holding
    this very copy of the package (mounted by harness_runtime), so a helper imports the code
    the harness runs and not whatever copy an editable install's finder points at."""
    return os.pathsep.join([*(str(p) for p in first), str(PACKAGE_ROOT.parent)])


@lru_cache(maxsize=1)
def harness_runtime() -> tuple[str, ...]:
    """The interpreter that runs agents' helpers and graded code, and this package.

    The prefixes of the running Python (a virtual environment and the
    installation it was made from), the interpreter's own installation, this
    package (its bundled suite is excluded by `build`), and pytest and its
    dependencies wherever they are installed.
    """
    from importlib.util import find_spec

    paths = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.dirname(resolved(sys.executable))),
        str(PACKAGE_ROOT),
    }
    for name in ("pytest", "_pytest", "pluggy", "iniconfig", "packaging"):
        try:
            spec = find_spec(name)
        except (ImportError, ValueError):
            continue
        origin = spec.origin if spec is not None else None
        if origin and origin not in ("built-in", "frozen"):
            # a package is its directory, a module its file
            paths.add(os.path.dirname(origin) if os.path.basename(origin) == "__init__.py" else origin)
    return tuple(sorted(p for p in {resolved(p) for p in paths} if p != "/"))


@lru_cache(maxsize=1)
def bundled_suite_copies() -> tuple[str, ...]:  # noqa: C901 (known debt: split by job when next touched)
    """Every copy of the bundled suite we can find: this package's, installed copies in
    the site directories of the runtimes we mount, and those editable installs point at."""
    from pytest_agentdrift.tasks.taskdirs import builtin_suite_dir

    found = {resolved(builtin_suite_dir())}
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, "/usr", "/usr/local"}
    site_dirs: set[str] = {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    for prefix in prefixes:
        for pattern in (
            "lib/python3*/site-packages",
            "lib64/python3*/site-packages",
            "lib/python3*/dist-packages",
            "lib/python3/dist-packages",
            "local/lib/python3*/dist-packages",
        ):
            site_dirs.update(glob.glob(os.path.join(prefix, pattern)))
    sources: set[str] = set(site_dirs)
    for d in site_dirs:
        for pth in glob.glob(os.path.join(d, "*.pth")):
            try:
                lines = Path(pth).read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
            sources.update(ln.strip() for ln in lines if ln.strip().startswith("/"))
        for finder in glob.glob(os.path.join(d, "__editable__*finder.py")):
            try:
                text = Path(finder).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            for m in re.finditer(r"""['"]pytest_agentdrift['"]\s*:\s*['"]([^'"]+)['"]""", text):
                sources.add(os.path.dirname(m.group(1)))
    for src in sources:
        cand = os.path.join(src, "pytest_agentdrift", "suite")
        if os.path.isdir(cand):
            found.add(resolved(cand))
    return tuple(sorted(found))


def beyond_runtime(additions: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The additions a sandbox does not show anyway (the system, the harness runtime), deduplicated."""
    visible = (*harness_runtime(), "/usr")

    def shown(p: str) -> bool:
        return any(within(p, v) for v in visible)

    out: dict[str, str] = {}
    for p, why in additions:
        p = os.path.abspath(p)
        if os.path.lexists(p) and not (shown(p) and shown(resolved(p))):
            out.setdefault(p, why)
    return list(out.items())
