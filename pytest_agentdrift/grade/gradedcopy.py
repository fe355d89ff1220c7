"""The tree operations that make a graded copy: protected files and test configuration put back
to their frozen bytes (`restore_protected`), tool leftovers removed (`remove_leftovers`), the
task's hidden files added (`add_hidden`), symlinks out of the tree dropped
(`drop_escaping_symlinks`), and what the harness put beside a tree copied with it
(`copy_beside`). The Grader (grade/grader.py) decides when a copy is made. No pytest."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pytest_agentdrift.run.runner import copy_tree
from pytest_agentdrift.run.tamper import TEST_CONFIG
from pytest_agentdrift.tasks import fdtree, treesnap
from pytest_agentdrift.tasks.taskspec import TaskSpec

EVALUATOR_COMPONENT = "graded_copy"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

#: where a task's hidden/ directory appears in every graded copy (and untouched copy) of its repo
HIDDEN_DIR_NAME = "agentdrift_hidden"


class GradedCopyIncomplete(Exception):
    """The harness could not make a complete graded copy within its budget: checks
    that run code fail with this reason instead of grading a partial tree."""


def copy_beside(entry: os.DirEntry, target: Path) -> None:
    """One entry the harness put beside a graded tree, copied as it is: a link stays a link
    (never the bytes of what it points at), a directory is copied whole or not at all."""
    if entry.is_symlink():
        os.symlink(os.readlink(entry.path), target)
    elif entry.is_dir(follow_symlinks=False):
        copied = copy_tree(entry.path, target)
        if not copied.complete:
            raise OSError(f"the grading copy of {entry.name} is incomplete: {copied.truncated or copied.skipped[:5]}")
    elif entry.is_file(follow_symlinks=False):
        shutil.copyfile(entry.path, target, follow_symlinks=False)


def real_parents(root: Path, rel: str) -> Path:
    """root/rel with every parent a real directory inside root: a symlinked (or
    file) parent the agent left is replaced, so nothing is written through it."""
    current = root
    for part in rel.split("/")[:-1]:
        current = current / part
        if current.is_symlink() or (current.exists() and not current.is_dir()):
            current.unlink()
        current.mkdir(exist_ok=True)
    return root / rel


def restore_protected(spec: TaskSpec, graded: Path) -> None:
    """Put protected files and test configuration back to their frozen bytes."""

    def guarded(rel: str) -> bool:
        return bool(spec.protected and spec.protected.matches(rel)) or TEST_CONFIG.matches(rel)

    frozen = set(spec.initial_tree)
    for rel in sorted(frozen):
        if guarded(rel):
            dst = real_parents(graded, rel)
            if dst.is_symlink() or dst.is_file():
                dst.unlink()
            elif dst.is_dir():
                fdtree.rmtree(dst)
            shutil.copy2(spec.repo / rel, dst, follow_symlinks=False)
    # by directory fd: an added conftest.py deeper than PATH_MAX is removed too
    for item in fdtree.walk(graded, treesnap.CACHE_NAMES):
        if item.rel.endswith("/") or item.rel in frozen:
            continue
        if guarded(item.rel):
            os.unlink(item.name, dir_fd=item.dir_fd)


def drop_escaping_symlinks(tree: Path) -> list[str]:
    """Remove every symlink in tree that resolves outside it (absolute, `../..`, or through
    another link); graded code must not reach the task directory or the host through one.
    Returns the relative paths removed."""
    top = os.path.realpath(tree)
    escaping = []
    for dirpath, dirnames, filenames in os.walk(tree):
        for name in [*dirnames, *filenames]:
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                target = os.path.realpath(full)
                if target != top and not target.startswith(top + os.sep):
                    escaping.append(full)
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
    for full in escaping:  # decided first, removed after: a link through another link is judged by where it ends
        os.unlink(full)
    return sorted(os.path.relpath(full, tree).replace(os.sep, "/") for full in escaping)


def remove_leftovers(graded: Path, leftovers: list[str]) -> None:
    """Tool leftovers are not the agent's change: the graded copy does without them."""
    for rel in leftovers:
        target = graded / rel.rstrip("/")
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        parent = target.parent  # and the directories that held only leftovers
        while parent != graded and parent.is_dir() and not parent.is_symlink() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent


def add_hidden(spec: TaskSpec, tree: Path) -> None:
    """The task's hidden/ directory (tests and data the agent never sees) as HIDDEN_DIR_NAME/ in a graded tree.

    Whatever the agent left under that name is replaced, so nothing of the
    agent's can stand in for the hidden files.
    """
    src = spec.path / "hidden"
    if not src.is_dir():
        return
    dst = tree / HIDDEN_DIR_NAME
    if dst.is_symlink() or dst.is_file():
        dst.unlink()
    elif dst.exists():
        shutil.rmtree(dst)
    copy_tree(src, dst)
