"""The deterministic reference agent.

It is run through the same protocol as any agent: cwd is the private work
tree, and it learns where to write events and its final report from
AGENTDRIFT_EVENTS / AGENTDRIFT_REPORT. It applies the task's solution/ (or
solution/drifted/ for the drifted profile, where the task has one), so the
bundled suite runs offline, in CI, and as the demo. With `--play NAME` it
plays another solution of the task instead, `solution/NAME/` (the wrong
solutions of `solution/wrong/*/`, through `--agent reference:wrong/NAME`).

A solution may carry `actions.py`: a program run first, in the work tree,
for what a final tree cannot show (a file edited and put back, a command
that reaches for the network). The overlay of files/ and the report follow.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

VERSIONS = {"faithful": "reference-1.0.0", "drifted": "reference-1.1.0-drifted"}


def check_play(play: str) -> str:
    """A solution to play names a directory below solution/: plain segments, never out of it."""
    parts = play.split("/")
    if not play or play.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in play:
        raise ValueError(f"cannot play {play!r}: name a directory below solution/, such as wrong/give-up")
    return play


def _solution_dir(task_dir: Path, profile: str, play: str | None = None) -> Path | None:
    base = task_dir / "solution"
    if play is not None:
        chosen = base / check_play(play)
        return chosen if chosen.is_dir() else None
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


def apply(task_dir: Path, profile: str, work: Path, play: str | None = None) -> int:
    sol = _solution_dir(task_dir, profile, play)
    events_path = os.environ.get("AGENTDRIFT_EVENTS")
    report_path = os.environ.get("AGENTDRIFT_REPORT")
    if sol is None:
        if report_path:
            what = f"no solution {play!r}" if play else "no solution"
            Path(report_path).write_text(
                '{"status": "blocked", "summary": "the reference agent has %s for this task"}\n' % what
            )
        return 0
    return apply_solution(sol, work, events_path, report_path)


def apply_solution(
    sol: Path, work: Path, events_path: str | None, report_path: str | None, run_actions: bool = True
) -> int:
    """Act out one solution directory in the work tree (actions.py, files/, delete.txt, events, report)."""
    if run_actions and (sol / "actions.py").is_file():
        import subprocess

        subprocess.run([sys.executable, str(sol / "actions.py")], cwd=work, check=False)
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
    parser.add_argument("--play", help="play solution/PLAY/ instead (e.g. wrong/give-up)")
    parser.add_argument("--version", action="store_true")
    args = parser.parse_args(argv)
    version = VERSIONS[args.profile] + (f"+{args.play}" if args.play else "")
    if args.version:
        print(version)
        return 0
    if args.task_dir is None:
        parser.error("--task-dir is required")
    print(f"{version}: applying the solution of {args.task_dir.name}" + (f" ({args.play})" if args.play else ""))
    return apply(args.task_dir, args.profile, Path.cwd(), args.play)


if __name__ == "__main__":
    sys.exit(main())
