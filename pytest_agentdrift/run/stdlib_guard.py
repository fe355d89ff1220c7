"""Keeping graded code off the names of the standard library and of pytest. No pytest.

pytest (and the tests themselves) import standard-library modules late:
`unittest` when collecting, `pdb` when debugging, `difflib` for an assertion
diff, `decimal` in a test module. With the graded tree on `sys.path`, a
top-level `unittest.py` the agent added would be imported in their place and
run inside the grading process. Two defences, both here:

* `install(trusted_path, allowed)` puts a finder first on `sys.meta_path` in
  the grading process (gradehook/launch.py, before the tree is importable):
  a top-level import of a guarded name is resolved on the interpreter's own
  path only, never from the tree. Names the frozen fixture itself provides
  (its own `logging.py`, say) stay the project's (`allowed`).
* `shadowing_modules(added, final_paths)` names every module the agent added
  that would shadow a guarded name; the `tamper` check reports it.
"""

from __future__ import annotations

import importlib.machinery
import re
import sys
from typing import Iterable

EVALUATOR_COMPONENT = "stdlib_guard"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

#: pytest, its dependencies and the harness's own grading modules
PYTEST_NAMES = frozenset(
    {
        "pytest",
        "_pytest",
        "py",
        "pluggy",
        "iniconfig",
        "packaging",
        "exceptiongroup",
        "tomli",
        "colorama",
        "pygments",
        "pytest_agentdrift",
        "agentdrift_grade",
        "agentdrift_functions",
        "sitecustomize",
        "usercustomize",
    }
)
GUARDED = frozenset(sys.stdlib_module_names) | PYTEST_NAMES

_MODULE_FILE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\.[A-Za-z0-9_-]+)*\.(py|pyc|pyw|so|pyd)$")


def module_candidates(paths: Iterable[str]) -> list[tuple[str, str, str]]:
    """(module name, directory, path) for each file that a directory on sys.path could
    import as a top-level module: `pdb.py`, `pdb.cpython-311-x86_64-linux-gnu.so`, `xml/__init__.py`."""
    out = []
    for rel in paths:
        rel = rel.rstrip("/")
        parts = rel.split("/")
        name = parts[-1]
        if name in ("__init__.py", "__init__.pyc") and len(parts) >= 2:
            out.append((parts[-2], "/".join(parts[:-2]), rel))
            continue
        m = _MODULE_FILE.match(name)
        if m:
            out.append((m.group(1), "/".join(parts[:-1]), rel))
    return out


def fixture_provided(paths: Iterable[str]) -> frozenset[str]:
    """Guarded names the frozen fixture provides itself: the project's own, never refused."""
    return frozenset(name for name, _, _ in module_candidates(paths) if name in GUARDED)


def shadowing_modules(added: Iterable[str], final_paths: Iterable[str], provided: Iterable[str] = ()) -> list[str]:
    """Added files that would be imported in place of a standard-library or pytest module.

    Only a file in a directory that can be on sys.path counts: the tree's root,
    or a directory without `__init__.py` (pytest inserts such a test directory).
    A package's submodule (`invoicekit/json.py`) shadows nothing.
    """
    final = set(final_paths)
    keep = set(provided)
    hits = []
    for name, directory, rel in module_candidates(added):
        if name not in GUARDED or name in keep:
            continue
        if directory and (f"{directory}/__init__.py" in final or f"{directory}/__init__.pyc" in final):
            continue
        hits.append(rel)
    return sorted(hits)


class _StdlibGuard:
    """A meta-path finder: guarded top-level names resolve on the trusted path only."""

    def __init__(self, trusted_path: list[str], allowed: frozenset[str]):
        self.trusted_path = list(trusted_path)
        self.allowed = allowed

    def find_spec(self, name, path=None, target=None):
        if path is not None or "." in name or name not in GUARDED or name in self.allowed:
            return None
        if name in sys.builtin_module_names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, self.trusted_path)
        if spec is None:
            frozen = importlib.machinery.FrozenImporter.find_spec(name)
            if frozen is not None:
                return frozen
            raise ModuleNotFoundError(
                f"No module named {name!r} outside the graded tree "
                "(a standard-library or pytest name: the tree cannot provide it)",
                name=name,
            )
        return spec

    def invalidate_caches(self) -> None:
        pass


def install(trusted_path: list[str], allowed: Iterable[str] = ()) -> None:
    sys.meta_path.insert(0, _StdlibGuard(trusted_path, frozenset(allowed)))
