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
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agentdrift.canonical import digest, sha256_hex

if TYPE_CHECKING:
    from pytest_agentdrift.tasks.taskspec import TaskSpec

PACKAGE_ROOT = Path(__file__).resolve().parent.parent

#: folders of the package that hold no code of its own
_NOT_CODE = frozenset({"suite", "__pycache__"})

_DECLARATION = re.compile(rb'^EVALUATOR_COMPONENT\s*=\s*"([a-z0-9_.-]+)"', re.MULTILINE)


def _package_sources(root: Path) -> list[Path]:
    # The bundled suite is task data (it has its own digest), never evaluator code: its tree is
    # not walked at all (it holds most of the package's files).
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _NOT_CODE]
        found.extend(Path(folder, name) for name in files if name.endswith(".py"))
    return sorted(found)


@dataclass(frozen=True)
class _Source:
    path: Path
    sha256: str
    component: str | None  # the EVALUATOR_COMPONENT it declares, if any


def _read_sources(root: Path) -> tuple[_Source, ...]:
    sources = []
    for path in _package_sources(root):
        data = path.read_bytes()
        match = _DECLARATION.search(data)
        sources.append(_Source(path, sha256_hex(data), match.group(1).decode() if match else None))
    return tuple(sources)


@functools.cache
def _installed_sources() -> tuple[_Source, ...]:
    # The running package's files do not change under a process; a session asks for its
    # evaluator id and code digest several times (records, manifest, grading cache).
    return _read_sources(PACKAGE_ROOT)


def _sources(root: Path) -> tuple[_Source, ...]:
    return _installed_sources() if root == PACKAGE_ROOT else _read_sources(root)


def task_grading_id(spec: TaskSpec) -> str:
    """Everything that decides how one task's runs are graded: the grading code, the task's
    checks and its grading files. Equal ids grade the same final tree the same way, so a
    regrade keeps that task's recorded checks instead of running them again."""
    from pytest_agentdrift import EVALUATOR_VERSION

    return digest(
        {
            "evaluator_version": EVALUATOR_VERSION,
            "code": evaluator_components(),
            "checks": [c.to_dict() for c in spec.checks],
            "task": spec.grading_digest(),
        }
    )


def evaluator_components(root: Path = PACKAGE_ROOT) -> dict[str, str]:
    """{component name: sha256 of its file} for every file that declares one."""
    components: dict[str, str] = {}
    for source in _sources(root):
        if source.component is None:
            continue
        if source.component in components:
            raise ValueError(f"{source.path}: evaluator component {source.component!r} is declared twice")
        components[source.component] = source.sha256
    return dict(sorted(components.items()))


def code_digest(root: Path = PACKAGE_ROOT) -> str:
    """Digest of the package's code by content only: a moved file keeps it, an edited one changes it."""
    return digest(sorted(source.sha256 for source in _sources(root)))
