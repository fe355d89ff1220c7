"""One run's directory: where everything is, which parts are the agent's own (the rest is the
decoy), and what the harness recorded of it before the agent started (PreparedRun).

Layout of a run (all under a per-process base directory that the sandbox
hides from other runs):

    <base>/<task>-r<rep>-<rand>/      decoy level 2 (writes here are "outside")
      box/                            decoy level 1, beside the work tree
        work/                         the agent's cwd: a plain copy of repo/
        home/  tmp/                   private HOME and TMPDIR (home holds the canary)
        .harness/                     task.md; events.jsonl and report.json (the agent's own word)
        NOTES.txt, sibling/           decoy files the agent has no business touching
    <base>/.obs-<task>-r<rep>-<rand>/ harness only: the network log and proxy sockets
                                      (read-only in the sandbox; never writable by the agent)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentdrift.run import canary as canary_mod
from pytest_agentdrift.tasks import treesnap

#: the run directory's parts that are the agent's own (the decoy is everything else)
AGENT_OWN = ("box/work", "box/home", "box/tmp", "box/.harness")
#: what the snapshot of the decoy leaves out: the agent's own parts and caches
DECOY_SKIP = frozenset(f"./{own}" for own in AGENT_OWN) | treesnap.CACHE_NAMES


@dataclass(frozen=True)
class RunDirs:
    """One run's directories (the layout in the module docstring)."""

    base: Path
    root: Path

    @property
    def box(self) -> Path:
        return self.root / "box"

    @property
    def work(self) -> Path:
        return self.box / "work"

    @property
    def home(self) -> Path:
        return self.box / "home"

    @property
    def harness(self) -> Path:
        return self.box / ".harness"


@dataclass
class PreparedRun:
    """The run directory as the agent will find it, and what the harness recorded of it first."""

    dirs: RunDirs
    task_file: Path
    before: treesnap.Snapshot  # the work tree the agent's changes are diffed against
    decoy_before: treesnap.Snapshot  # beside and above the work tree
    overlaid: dict[str, Any] | None  # what the harness placed from a bundle
    start_commit: str | None
    git_before: dict[str, Any]
    canary: canary_mod.Canary
