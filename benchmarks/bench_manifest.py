"""Manifest capture cost against a plain sha256 walk of the same tree.

Generates (in a temporary directory) a home with a realistic Claude Code
instruction stack (user CLAUDE.md with imports, rules, settings, MCP) and a
task whose repository holds a 20,000-file source tree with nested
CLAUDE.md files, then times:

* baseline: os.walk + sha256 of every file (what any tree digest must pay);
* capture:  manifest.capture() on that task (discovery, config parsing,
            source manifest, lockfiles, git-less provenance, version probes).

Prints the median of several runs and the ratio. Never asserts on time.

    python benchmarks/bench_manifest.py [--files 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_agentdrift.manifest import capture as mf


def generate(root: Path, n_files: int) -> dict:
    home, proj = root / "home", root / "proj"
    task = proj / "suite" / "T01"
    repo = task / "repo"
    (home / ".claude" / "rules").mkdir(parents=True)
    (home / ".claude" / "CLAUDE.md").write_text("# user\n@~/.claude/style.md\n@~/.claude/tools.md\n")
    (home / ".claude" / "style.md").write_text("prefer small diffs\n@~/.claude/deep.md\n")
    (home / ".claude" / "tools.md").write_text("use pytest\n")
    (home / ".claude" / "deep.md").write_text("deep import\n")
    for i in range(5):
        (home / ".claude" / "rules" / f"rule{i}.md").write_text(f"rule {i}\n" * 20)
    (home / ".claude" / "settings.json").write_text(
        json.dumps(
            {"model": "m", "permissions": {"allow": [f"Bash(cmd{i}:*)" for i in range(50)], "deny": ["WebFetch"]}}
        )
    )
    (home / ".claude.json").write_text(
        json.dumps({"mcpServers": {f"s{i}": {"command": "npx", "args": ["-y", f"p{i}"]} for i in range(5)}})
    )
    (task / "task.md").parent.mkdir(parents=True)
    (task / "task.md").write_text("do the task\n")
    (repo / ".claude" / "rules").mkdir(parents=True)
    (repo / "CLAUDE.md").write_text("# repo\n@docs/conventions.md\n")
    (repo / "docs").mkdir()
    (repo / "docs" / "conventions.md").write_text("conventions\n" * 50)
    (repo / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"defaultMode": "acceptEdits"}}))
    (repo / "uv.lock").write_text("version = 1\n" + "x" * 50000)
    written = 0
    d = 0
    while written < n_files:
        pkg = repo / "src" / f"pkg{d // 20}" / f"mod{d}"
        pkg.mkdir(parents=True, exist_ok=True)
        if d % 50 == 0:
            (pkg / "CLAUDE.md").write_text(f"nested rules {d}\n")
            written += 1
        for j in range(min(40, n_files - written)):
            # a spread of small and medium source files
            (pkg / f"f{j}.py").write_bytes((f"# file {d}/{j}\n" + "x = 1\n" * (5 + (j * 37) % 400)).encode())
            written += 1
        d += 1
    bindir = root / "bin"
    bindir.mkdir()
    return {"home": home, "proj": proj, "task": task, "repo": repo, "bin": bindir}


def plain_walk(top: Path) -> str:
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for name in sorted(filenames):
            with open(os.path.join(dirpath, name), "rb") as fh:
                h.update(hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()


def run_capture(w: dict) -> dict:
    ctx = mf.ManifestContext(
        adapter={"name": "claude-code", "product": "anthropic/claude-code", "surface": "cli"},
        agent_argv=["claude", "-p", "{task_text}"],
        version_argv=["claude", "--version"],
        home=w["home"],
        project_root=w["proj"],
        task_repos={"T01": w["repo"]},
        task_dirs={"T01": w["task"]},
        env={"PATH": os.environ.get("PATH", ""), "SHELL": os.environ.get("SHELL", "/bin/sh")},
        task_set_id="sha256:t",
        evaluator_id="sha256:e",
        harness_version="bench",
        system_root=None,
    )
    return mf.capture_manifest(ctx)


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentdrift-bench-") as tmp:
        w = generate(Path(tmp), args.files)
        plain_walk(w["task"])  # warm the page cache for both contenders
        base = median_time(lambda: plain_walk(w["task"]), args.repeat)
        cap = median_time(lambda: run_capture(w), args.repeat)
        m = run_capture(w)
        n = m["evidence"]["source_files"]
        print(f"files in task tree:        {n}")
        print(f"instruction entries:       {m['evidence']['instruction_bundle_entries']}")
        print(f"plain sha256 walk (median): {base * 1000:8.1f} ms")
        print(f"manifest capture (median):  {cap * 1000:8.1f} ms")
        print(f"ratio capture / plain walk: {cap / base:8.2f}x")


if __name__ == "__main__":
    main()
