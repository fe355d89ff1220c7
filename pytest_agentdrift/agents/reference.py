"""The deterministic reference agent.

It is run through the same protocol as any agent: cwd is the private work
tree, and it learns where to write events and its final report from
AGENTDRIFT_EVENTS / AGENTDRIFT_REPORT. It applies the task's solution/ (or
solution/drifted/ for the drifted profile, where the task has one), so the
bundled suite runs offline, in CI, and as the demo.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

VERSIONS = {"faithful": "reference-1.0.0", "drifted": "reference-1.1.0-drifted"}


def _solution_dir(task_dir: Path, profile: str) -> Path | None:
    base = task_dir / "solution"
    if profile == "drifted" and (base / "drifted").is_dir():
        return base / "drifted"
    return base if base.is_dir() else None


def _overlay(src: Path, dst: Path) -> None:
    for dirpath, dirnames, files in os.walk(src):
        dirnames.sort()
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in sorted(files):
            shutil.copyfile(Path(dirpath) / name, dst / rel / name)


def apply(task_dir: Path, profile: str, work: Path) -> int:
    sol = _solution_dir(task_dir, profile)
    events_path = os.environ.get("AGENTDRIFT_EVENTS")
    report_path = os.environ.get("AGENTDRIFT_REPORT")
    if sol is None:
        if report_path:
            Path(report_path).write_text(
                '{"status": "blocked", "summary": "the reference agent has no solution for this task"}\n'
            )
        return 0
    if (sol / "files").is_dir():
        _overlay(sol / "files", work)
    delete = sol / "delete.txt"
    if delete.is_file():
        for line in delete.read_text(encoding="utf-8").splitlines():
            rel = line.strip()
            if rel and not rel.startswith("#"):
                target = work / rel
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                elif target.exists() or target.is_symlink():
                    target.unlink()
    if events_path and (sol / "events.jsonl").is_file():
        with open(events_path, "a", encoding="utf-8") as fh:
            fh.write((sol / "events.jsonl").read_text(encoding="utf-8"))
    if report_path and (sol / "report.json").is_file():
        shutil.copyfile(sol / "report.json", report_path)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentdrift-reference-agent")
    parser.add_argument("--task-dir", type=Path)
    parser.add_argument("--profile", choices=sorted(VERSIONS), default="faithful")
    parser.add_argument("--version", action="store_true")
    args = parser.parse_args(argv)
    if args.version:
        print(VERSIONS[args.profile])
        return 0
    if args.task_dir is None:
        parser.error("--task-dir is required")
    print(f"{VERSIONS[args.profile]}: applying the solution of {args.task_dir.name}")
    return apply(args.task_dir, args.profile, Path.cwd())


if __name__ == "__main__":
    sys.exit(main())
