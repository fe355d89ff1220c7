"""A task's repo/ and its initial-tree.sha256: the files below a tree, the tree file parsed and
written, a repo hashed into it, a copy verified against it, and symlinks kept inside repo/. No pytest.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agentdrift.canonical import read_text_utf8, sha256_hex
from pytest_agentdrift.errors import TaskError
from pytest_agentdrift.tasks.treesnap import CACHE_NAMES, Snapshot, scan, snapshot
from pytest_agentdrift.vocabulary import INITIAL_TREE_FILE

if TYPE_CHECKING:
    from pytest_agentdrift.tasks.taskspec import TaskSpec


def walk_files(root: Path) -> list[tuple[str, str]]:
    """(posix relpath, full path) of every file and symlink below root, sorted."""
    return sorted((rel, full) for rel, full, _ in scan(os.fspath(root), CACHE_NAMES) if not rel.endswith("/"))


def parse_tree_file(path: Path) -> dict[str, str]:
    """Parse `sha256sum` output lines: `<64 hex>  <relpath>`."""
    text = read_text_utf8(path, TaskError)
    tree: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = re.match(r"^([0-9a-f]{64}) [ *](.+)$", line)
        if not m:
            raise TaskError(f"line {lineno}: expected '<sha256>  <path>'", path)
        rel = m.group(2)
        if rel.startswith("./"):
            rel = rel[2:]
        if rel.startswith("/") or ".." in rel.split("/"):
            raise TaskError(f"line {lineno}: path {rel!r} escapes repo/", path)
        if rel in tree:
            raise TaskError(f"line {lineno}: {rel!r} listed twice", path)
        tree[rel] = m.group(1)
    return tree


def render_tree_file(hashes: dict[str, str]) -> str:
    return "".join(f"{h}  {rel}\n" for rel, h in sorted(hashes.items()))


def hash_repo(repo: Path) -> dict[str, str]:
    """relpath -> sha256 of every file of a repo/ (a symlink: sha256 of its target string)."""
    return tree_hashes(snapshot(repo, skip=CACHE_NAMES))


def tree_hashes(snap: Snapshot) -> dict[str, str]:
    """The initial-tree.sha256 view of a snapshot: files and links, no empty dirs."""
    out = {}
    for rel, e in snap.items():
        if e.kind == "file":
            out[rel] = e.sha256
        elif e.kind == "link":
            out[rel] = sha256_hex(b"symlink:" + e.sha256.encode())
    return out


def check_symlinks(task_dir: Path) -> None:
    """A symlink in repo/ may only point inside the task's repo/."""
    repo = os.path.realpath(task_dir / "repo")
    for _rel, full in walk_files(task_dir / "repo"):
        if os.path.islink(full):
            target = os.readlink(full)
            # resolved, not normalised: a chain of links may leave repo/ where the text does not
            resolved = os.path.realpath(full)
            if os.path.isabs(target) or not resolved.startswith(repo + os.sep):
                raise TaskError(f"symlink points outside the task: {target!r}", Path(full))


def verify_tree(spec: TaskSpec, actual: dict[str, str], where: Path) -> None:
    """Refuse a fixture whose files do not match initial-tree.sha256."""
    if actual == spec.initial_tree:
        return
    missing = sorted(set(spec.initial_tree) - set(actual))
    extra = sorted(set(actual) - set(spec.initial_tree))
    changed = sorted(p for p in set(actual) & set(spec.initial_tree) if actual[p] != spec.initial_tree[p])
    parts = []
    if changed:
        parts.append("changed: " + ", ".join(changed[:5]))
    if missing:
        parts.append("missing: " + ", ".join(missing[:5]))
    if extra:
        parts.append("not listed: " + ", ".join(extra[:5]))
    raise TaskError(
        "repo/ does not match initial-tree.sha256 (" + "; ".join(parts) + "); the fixture changed and is refused",
        spec.path / INITIAL_TREE_FILE,
    )
