"""Put a bundle in front of the agent: project files into the work tree, user files into the private home.

The runner calls `apply_project` on the fresh, verified copy of the task's
repo/ *before* it takes the snapshot the agent's changes are measured
against, so harness-placed files are part of the starting tree: they are
never changes, never scope violations and never tamper, and the git
fixture's commit includes them (the agent sees a clean checkout, as in a
repository where the team committed its CLAUDE.md). The run's evidence
says what was placed (`evidence.overlay`), and the raw diff.patch starts
with a note saying those files are not in it.

`apply_home` puts the bundle's user-scope files into the private home; the
runner then copies only credential files from the real home (to sign in),
so the agent sees the bundle's user setup, not the machine's.

Nothing is written through a symlink: a destination whose parent is a link
(or not a directory) in the task repository is left alone and listed under
`not_placed` with the reason.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pytest_agentdrift.tasks import treesnap


@dataclass(frozen=True)
class Overlay:
    """A bundle as the runner needs it: plain paths and names, no manifest import."""

    name: str | None
    digest: str
    project_root: str  # the bundle's files/project directory (the old side of a patch of a placed file)
    project: tuple[tuple[str, bool], ...]  # (posix path relative to the work tree, executable)
    user_root: str
    user: tuple[tuple[str, bool], ...]  # (posix path relative to the home directory, executable)
    remove: tuple[str, ...] = ()  # project paths deleted from each work tree (--agent-without)
    #: values in the bundle's configuration to scrub from every run artifact (manifest.bundles.secret_strings)
    secrets: tuple[str, ...] = field(default=(), repr=False)

    @property
    def label(self) -> str:
        return f"{self.name or 'bundle'} ({self.digest[:19]}…)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "digest": self.digest,
            "project": [p for p, _ in self.project],
            "user": [p for p, _ in self.user],
            "remove": list(self.remove),
        }


def _blocked_parent(root: Path, rel: str) -> str | None:
    """Why ``root/rel`` cannot be written without following a link, or None."""
    current = root
    for part in PurePosixPath(rel).parts[:-1]:
        current = current / part
        if current.is_symlink():
            return f"{current.relative_to(root).as_posix()} is a symlink in the task repository"
        if current.exists() and not current.is_dir():
            return f"{current.relative_to(root).as_posix()} is a file in the task repository"
    return None


def _place(src: Path, dst: Path, executable: bool) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst, follow_symlinks=False)
    os.chmod(dst, 0o755 if executable else 0o644)


def apply_project(overlay: Overlay, work: Path) -> dict[str, Any]:
    """Remove the ``remove`` paths, then place the project files; returns what was done."""
    removed: list[str] = []
    for rel in overlay.remove:
        target = work / rel
        if _blocked_parent(work, rel) is not None:
            continue
        if target.is_symlink() or target.is_file():
            target.unlink()
            removed.append(rel)
        elif target.is_dir():
            shutil.rmtree(target)
            removed.append(rel + "/")
    placed: list[str] = []
    replaced: list[str] = []
    not_placed: list[dict[str, str]] = []
    for rel, executable in overlay.project:
        dst = work / rel
        why = _blocked_parent(work, rel)
        if why is None and dst.is_symlink():
            why = "a symlink in the task repository"
        elif why is None and dst.is_dir():
            why = "a directory in the task repository"
        if why is not None:
            not_placed.append({"path": rel, "reason": why})
            continue
        (replaced if dst.exists() else placed).append(rel)
        _place(Path(overlay.project_root) / rel, dst, executable)
    return {
        "bundle": overlay.name,
        "digest": overlay.digest,
        "placed": placed,
        "replaced": replaced,
        "removed": removed,
        "not_placed": not_placed,
        "note": "harness-placed: part of the starting tree, so never counted as the agent's changes",
    }


def apply_home(overlay: Overlay, home: Path) -> list[dict[str, Any]]:
    """Place the user-scope files in the private home; entries in the runtime_bundle format."""
    out = []
    for rel, executable in overlay.user:
        if _blocked_parent(home, rel) is not None:
            continue
        _place(Path(overlay.user_root) / rel, home / rel, executable)
        out.append({"path": f"~/{rel}", "credential": False, "source": f"bundle {overlay.name or overlay.digest}"})
    return out


def placed_paths(info: dict[str, Any] | None) -> set[str]:
    return set(info["placed"]) | set(info["replaced"]) if info else set()


def render_changes(
    repo: Path,
    work: Path,
    diff: treesnap.TreeDiff,
    before: treesnap.Snapshot | None,
    after: treesnap.Snapshot | None,
    overlay: Overlay | None,
    info: dict[str, Any] | None,
    **kw: Any,
) -> treesnap.Changes:
    """The run's changes (treesnap.render_changes); a harness-placed file the agent then changed
    is diffed against the bundle's copy, every other path against the fixture."""
    ours = placed_paths(info) & set(diff.changed) if overlay is not None else set()
    old_roots = {rel: Path(overlay.project_root) for rel in ours} if ours and overlay is not None else None
    return treesnap.render_changes(repo, work, diff, before, after, old_roots=old_roots, **kw)


def patch_note(info: dict[str, Any] | None) -> str:
    """The first lines of the raw diff.patch when a bundle was overlaid: what is not in the diff, and why."""
    if not info:
        return ""
    lines = [f"# agentdrift: bundle {info['bundle'] or info['digest']} ({info['digest']})"]
    files = sorted(placed_paths(info))
    if files:
        lines.append(f"# placed by the harness before the run, not counted as changes: {', '.join(files)}")
    if info["removed"]:
        lines.append(f"# removed by the harness before the run (--agent-without): {', '.join(info['removed'])}")
    for n in info["not_placed"]:
        lines.append(f"# not placed: {n['path']} ({n['reason']})")
    return "\n".join(lines) + "\n"
