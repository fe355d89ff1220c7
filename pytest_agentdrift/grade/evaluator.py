"""The evaluator's identity: which grading code a record was scored by.

A record's `evaluator_id` must change when the code that grades changes and
must not change when a file merely moves (a re-layout of the package would
otherwise refuse every stored baseline). So the evaluator is named by
*logical components*, not paths: each grading module declares one line,

    EVALUATOR_COMPONENT = "checks"

and the id hashes the sorted (component, content digest) pairs, wherever in
the package the declaring files live. Files are read as text, never
imported, so computing the id costs one sha256 per component file.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agentdrift.canonical import digest, hash_file

if TYPE_CHECKING:
    from pytest_agentdrift.tasks.load import TaskSpec

PACKAGE_ROOT = Path(__file__).resolve().parent.parent

_DECLARATION = re.compile(rb'^EVALUATOR_COMPONENT\s*=\s*"([a-z0-9_.-]+)"', re.MULTILINE)


def _package_sources(root: Path) -> list[Path]:
    # The bundled suite is task data (it has its own digest), never evaluator code.
    return sorted(
        p for p in root.rglob("*.py") if "__pycache__" not in p.parts and "suite" not in p.relative_to(root).parts
    )


@functools.cache
def _components_now() -> tuple[tuple[str, str], ...]:
    return tuple(evaluator_components().items())


def task_grading_id(spec: TaskSpec) -> str:
    """Everything that decides how one task's runs are graded: the grading code, the task's
    checks and its grading files. Equal ids grade the same final tree the same way, so a
    regrade keeps that task's recorded checks instead of running them again."""
    from pytest_agentdrift import EVALUATOR_VERSION

    return digest(
        {
            "evaluator_version": EVALUATOR_VERSION,
            "code": dict(_components_now()),
            "checks": [c.to_dict() for c in spec.checks],
            "task": spec.grading_digest(),
        }
    )


def evaluator_components(root: Path = PACKAGE_ROOT) -> dict[str, str]:
    """{component name: sha256 of its file} for every file that declares one."""
    components: dict[str, str] = {}
    for path in _package_sources(root):
        match = _DECLARATION.search(path.read_bytes())
        if match is None:
            continue
        name = match.group(1).decode()
        if name in components:
            raise ValueError(f"{path}: evaluator component {name!r} is declared twice")
        components[name] = hash_file(path)
    return dict(sorted(components.items()))


def code_digest(root: Path = PACKAGE_ROOT) -> str:
    """Digest of the package's code by content only: a moved file keeps it, an edited one changes it."""
    return digest(sorted(hash_file(p) for p in _package_sources(root)))
