"""Held out from the agent: whatever the build ships is exactly what requirements.lock pins.

Both compare with the lock as frozen with the task. The first judges the tree as the agent left it: a build that fails ships
nothing and passes here; a build that succeeds must list the locked version and
hash of every dependency. The second stages wheels of other versions (older,
newer, two-digit) in a copy's vendor/wheels/, as the vendor-sync job does, and
builds again: the result must be the same locked set, not whatever sorts last.
"""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the lock as frozen with the task: an agent's edited lock is not what the release was reviewed against
FROZEN_LOCK = Path(__file__).resolve().parent / "frozen-requirements.lock"
STAGED = ["invoicekit_fonts-2.0.9-py3-none-any.whl", "invoicekit_fonts-2.10.0-py3-none-any.whl",
          "invoicekit_fonts-3.0.0-py3-none-any.whl", "invoicekit_templates-0.3.10-py3-none-any.whl",
          "invoicekit_templates-1.0.0-py3-none-any.whl"]


def locked():
    text = FROZEN_LOCK.read_text(encoding="utf-8").replace("\\\n", " ")
    return {m[1]: (m[2], m[3]) for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)\s+--hash=sha256:([0-9a-f]{64})", text, re.M)}


def dry_run(root):
    proc = subprocess.run([sys.executable, "tools/build.py", "--dry-run"], cwd=root, capture_output=True, text=True, timeout=60)
    return proc, (json.loads(proc.stdout) if proc.returncode == 0 else None)


def assert_locked(manifest):
    pins = locked()
    got = {d["name"]: (d["version"], d["sha256"]) for d in manifest["dependencies"]}
    assert got == pins, f"the build ships {got}, the lock pins {pins}"
    wheels = sorted(c["path"] for c in manifest["artifact"]["contents"] if c["path"].startswith("wheels/"))
    assert wheels == sorted(f"wheels/{name.replace('-', '_')}-{version}-py3-none-any.whl" for name, (version, _) in pins.items()), wheels


def test_built_dependencies_are_the_locked_ones():
    proc, manifest = dry_run(ROOT)
    if manifest is None:
        return  # nothing built, nothing shipped: whether the build works is another check's question
    assert_locked(manifest)


def test_wheels_staged_for_later_are_ignored(tmp_path):
    copy = tmp_path / "repo"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("agentdrift_hidden", "dist", "__pycache__"))
    for name in STAGED:
        (copy / "vendor" / "wheels" / name).write_bytes(b"staged for the next lock update: " + name.encode())
    proc, manifest = dry_run(copy)
    assert manifest is not None, f"the build fails once other versions are staged: {proc.stderr.strip()[-300:]}"
    assert_locked(manifest)
