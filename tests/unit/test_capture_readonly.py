"""Capture writes nothing of the user's: the agent CLI's version display runs in a scratch home.

A stand-in CLI behaves as Copilot 1.0.102 does on `--version`: it unpacks
itself into its cache directory ($XDG_CACHE_HOME, else ~/.cache) and writes
state under $HOME before it prints its version. The user's home here is
read-only; the version is still observed and nothing is written there.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from pytest_agentdrift.manifest import capture as mf
from pytest_agentdrift.manifest import probes

CLI = """#!/bin/sh
cache="${XDG_CACHE_HOME:-$HOME/.cache}/copilot"
mkdir -p "$cache" && echo unpacked > "$cache/pkg" || exit 3
echo state > "$HOME/.copilot-state" || exit 4
echo "1.0.102"
"""


def tree(root: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every entry: content, mode and modification time (a rewrite with the same bytes shows too)."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"", p.lstat().st_mode, p.lstat().st_mtime_ns)
        for p in sorted([root, *root.rglob("*")])
    }


def test_version_probe_with_a_read_only_home(tmp_path):
    """As root a read-only mode stops no write: the home's tree, compared before and after, does."""
    home, bindir = tmp_path / "home", tmp_path / "bin"
    (home / ".copilot").mkdir(parents=True)
    (home / ".copilot" / "config.json").write_text("{}")
    bindir.mkdir()
    (bindir / "copilot").write_text(CLI)
    (bindir / "copilot").chmod(0o755)
    for p in [home, *home.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    before = tree(home)
    try:
        probe = probe_copilot(home, bindir, tmp_path)
        after = tree(home)
    finally:
        for p in [home, *home.rglob("*")]:
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
    assert probe["version"] == "1.0.102"
    assert after == before


#: the copilot preset as the manifest capture sees it
COPILOT = {
    "adapter": {"name": "copilot", "product": "github/copilot-cli", "surface": "cli"},
    "agent_argv": ["copilot", "-p", "{task_text}"],
    "version_argv": ["copilot", "--version"],
}


def probe_copilot(home: Path, bindir: Path, cwd: Path) -> dict:
    ctx = mf.ManifestContext(
        **COPILOT,
        home=home,
        project_root=cwd,
        env={"PATH": f"{bindir}{os.pathsep}/usr/bin:/bin", "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")},
        runner=subprocess.run,
    )
    return probes._probe_version(ctx, ctx.version_argv, cwd, scratch_home=True)


def test_version_probe_writes_into_a_scratch_home_that_is_then_gone(tmp_path):
    home, bindir = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    bindir.mkdir()
    (bindir / "copilot").write_text(CLI)
    (bindir / "copilot").chmod(0o755)
    seen = []

    def spy(argv, **kw):
        seen.append({k: kw["env"][k] for k in probes.PROBE_HOME_ENV})
        return subprocess.run(argv, **kw)

    probe = probes._probe_version(
        mf.ManifestContext(
            adapter={"name": "copilot"},
            agent_argv=["copilot"],
            version_argv=["copilot", "--version"],
            home=home,
            project_root=tmp_path,
            env={"PATH": f"{bindir}{os.pathsep}/usr/bin:/bin", "HOME": str(home)},
            runner=spy,
        ),
        ["copilot", "--version"],
        tmp_path,
        scratch_home=True,
    )
    assert probe["version"] == "1.0.102" and probe["exit_code"] == 0
    assert list(home.iterdir()) == []
    (scratch,) = {v for env in seen for v in env.values()}
    assert scratch != str(home) and not Path(scratch).exists()


def test_the_session_probe_is_reused_by_capture(tmp_path):
    """One version display per session: capture records what the session's probe saw and runs the
    CLI's display no second time (the runtimes' displays still run)."""
    home, bindir, scratch = tmp_path / "home", tmp_path / "bin", tmp_path / "probe-home"
    home.mkdir()
    bindir.mkdir()
    scratch.mkdir()
    (bindir / "copilot").write_text(CLI)
    (bindir / "copilot").chmod(0o755)
    env = {"PATH": f"{bindir}{os.pathsep}/usr/bin:/bin", "HOME": str(home)}
    probe = probes.probe_cli_version(["copilot", "--version"], env, tmp_path, scratch)
    assert probe["version"] == "1.0.102" and probe["exit_code"] == 0
    assert (scratch / ".copilot-state").is_file() and list(home.iterdir()) == []
    ran = []

    def spy(argv, **kw):
        ran.append(os.path.basename(argv[0]))
        return subprocess.run(argv, **kw)

    def capture(**kw):
        ctx = mf.ManifestContext(
            **COPILOT,
            home=home,
            project_root=tmp_path,
            env=env,
            probe_home=scratch,
            runner=spy,
            scoring_files=[],
            **kw,
        )
        return mf.capture(ctx).manifest

    reused = capture(cli_probe=probe)
    assert "copilot" not in ran and "git" in ran
    assert reused["identity"]["cli_version"] == "1.0.102"
    ran.clear()
    probed = capture()
    assert ran.count("copilot") == 1
    assert reused["identity"] == probed["identity"]
    assert reused["evidence"]["probes"]["cli"] == probed["evidence"]["probes"]["cli"]
    assert reused["provenance"]["cli_executable"] == probed["provenance"]["cli_executable"]
