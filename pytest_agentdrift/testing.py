"""Helpers for tests of tasks and of the plugin (ours and downstream).

`make_task` writes a complete, frozen task directory from a few arguments,
so a test can build exactly the task it needs; `agent_script` writes a
Python agent program and `agent_cmd` the `--agent-cmd` that runs it;
`load_results` / `normalise_results` read a recorded run for comparison.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any, Iterable

from pytest_agentdrift.tasks.load import hash_repo, render_tree_file

_DEFAULT_EFFECTS = {
    "network": True,
    "writes_outside": True,
    "git_mutation": True,
    "lockfile_change": True,
    "credential_access": True,
}


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {v!r} as TOML")


def make_task(
    root: Path,
    task_id: str = "X01",
    *,
    repo: dict[str, str] | None = None,
    checks: Iterable[dict[str, Any]] = ({"name": "tree-unchanged", "kind": "unchanged", "layer": "scope"},),
    text: str = "Do the task described here.\n",
    allowed: Iterable[str] = (),
    protected: Iterable[str] = (),
    forbidden_effects: dict[str, Any] | None = None,
    expected_events: dict[str, Any] | None = None,
    solution: dict[str, str] | None = None,
    solution_report: dict[str, Any] | None = None,
    timeout_s: float = 30,
    suite: str = "tests",
    title: str | None = None,
    slug: str = "task",
    git: bool = True,
) -> Path:
    """Write a frozen task directory `root/<task_id>-<slug>` and return it."""
    d = Path(root) / f"{task_id}-{slug}"
    (d / "repo").mkdir(parents=True)
    for rel, content in (repo if repo is not None else {"README.md": "A fixture.\n"}).items():
        p = d / "repo" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(content))
    lines = [
        f"id = {json.dumps(task_id)}",
        f"title = {json.dumps(title or 'Task ' + task_id)}",
        'behavior = "test"',
        f"suite = {json.dumps(suite)}",
        f"timeout_s = {timeout_s!r}",
        f"protected = {_toml_value(list(protected))}",
        f"git = {_toml_value(git)}",
        "",
    ]
    for check in checks:
        lines.append("[[checks]]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in check.items()]
        lines.append("")
    (d / "task.toml").write_text("\n".join(lines))
    (d / "task.md").write_text(text)
    (d / "allowed-paths.txt").write_text("".join(f"{p}\n" for p in allowed))
    (d / "forbidden-effects.json").write_text(
        json.dumps(forbidden_effects if forbidden_effects is not None else _DEFAULT_EFFECTS)
    )
    (d / "expected-events.json").write_text(json.dumps(expected_events or {}))
    (d / "fixture-manifest.json").write_text(json.dumps({"synthetic": True}))
    (d / "evaluator-version.txt").write_text("1\n")
    (d / "reset-instructions.md").write_text("Rebuild with pytest_agentdrift.testing.make_task.\n")
    if solution is not None or solution_report is not None:
        for rel, content in (solution or {}).items():
            p = d / "solution" / "files" / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(textwrap.dedent(content))
        (d / "solution").mkdir(exist_ok=True)
        (d / "solution" / "report.json").write_text(
            json.dumps(solution_report or {"status": "complete", "summary": "done"})
        )
    freeze(d)
    return d


def freeze(task_dir: Path) -> None:
    (Path(task_dir) / "initial-tree.sha256").write_text(render_tree_file(hash_repo(Path(task_dir) / "repo")))


def agent_script(path: Path, body: str) -> Path:
    """Write a Python agent program; the body sees `os`, `json`, `sys`, `Path`,
    and `report(status, **fields)` / `event(type, **fields)` helpers."""
    prelude = textwrap.dedent(
        """
        import json, os, sys
        from pathlib import Path

        def report(status, **fields):
            Path(os.environ["AGENTDRIFT_REPORT"]).write_text(json.dumps({"status": status, **fields}))

        def event(type, **fields):
            with open(os.environ["AGENTDRIFT_EVENTS"], "a") as fh:
                fh.write(json.dumps({"type": type, **fields}) + "\\n")
        """
    )
    path = Path(path)
    path.write_text(prelude + "\n" + textwrap.dedent(body))
    return path


def agent_cmd(script: Path) -> str:
    import shlex
    import sys

    return f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(script).absolute()))}"


def load_results(run_dir: Path) -> dict[str, Any]:
    return json.loads((Path(run_dir) / "results.json").read_text())


def normalise_results(results: dict[str, Any]) -> dict[str, Any]:
    """Drop what legitimately differs between two recordings of the same deterministic run."""
    r = json.loads(json.dumps(results))
    for key in ("run_id", "started_at", "finished_at", "workers", "runtime_id"):
        r.pop(key, None)
    for task in r.get("tasks", {}).values():
        for run in task["runs"]:
            ev = run["evidence"]
            ev["duration_s"] = 0
            # measured while the agent ran: memory and process peaks, and how many writes
            # fell into one coalescing window, depend on timing like the duration does
            for limit in (ev.get("limits") or {}).values():
                limit["peak"] = 0
            writes = (ev.get("observation") or {}).get("writes") or {}
            for key in ("events", "coalesced"):
                if key in writes:
                    writes[key] = 0
            if "writes_observed" in ev:
                ev["writes_observed"] = 0
    return r
