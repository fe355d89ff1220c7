"""Tree snapshots, diffs and patches: what the harness sees changing in a work tree."""

import hashlib
import os
import shutil
import time
from pathlib import Path

import pytest

from pytest_agentdrift.tasks import treesnap
from pytest_agentdrift.tasks.treesnap import (
    diff,
    make_patch,
    render_changes,
    resnapshot,
    snapshot,
)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def f():\n    return 1\n")
    (root / "README.md").write_text("readme\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(root / "run.sh", 0o644)
    (root / "empty").mkdir()
    os.symlink("src/app.py", root / "link.py")
    return root


def settle() -> None:
    """File timestamps come from a coarse clock; let it tick past the snapshot."""
    time.sleep(0.03)


def test_snapshot_records_every_entry_kind(tmp_path):
    root = build(tmp_path / "t")
    snap = snapshot(root)
    assert sorted(snap) == ["README.md", "empty/", "link.py", "run.sh", "src/app.py"]
    assert snap["src/app.py"].kind == "file"
    assert snap["src/app.py"].sha256 == sha(b"def f():\n    return 1\n")
    assert snap["src/app.py"].size == len(b"def f():\n    return 1\n")
    assert snap["run.sh"].mode == 0o644
    assert snap["link.py"].kind == "link"
    assert snap["link.py"].sha256 == "src/app.py"  # a link is identified by its target
    assert snap["empty/"].kind == "dir-empty"
    assert snap["empty/"].sha256 == ""


def test_caches_and_git_are_ignored(tmp_path):
    root = build(tmp_path / "t")
    for d in ("__pycache__", "src/__pycache__", ".pytest_cache", ".git", "src/.pytest_cache/v"):
        (root / d).mkdir(parents=True)
        (root / d / "junk").write_text("x")
    snap = snapshot(root)
    assert sorted(snap) == ["README.md", "empty/", "link.py", "run.sh", "src/app.py"]
    before = snap
    settle()
    (root / "src" / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"\0\1")
    (root / ".git" / "HEAD").write_text("ref: refs/heads/other\n")
    assert not diff(before, resnapshot(root, before))


def test_diff_added_modified_deleted_mode(tmp_path):
    root = build(tmp_path / "t")
    before = snapshot(root)
    settle()
    (root / "src" / "app.py").write_text("def f():\n    return 2\n")
    (root / "README.md").unlink()
    (root / "src" / "new.py").write_text("x = 1\n")
    os.chmod(root / "run.sh", 0o755)
    d = diff(before, resnapshot(root, before))
    assert d.to_dict() == {
        "added": ["src/new.py"],
        "modified": ["src/app.py"],
        "deleted": ["README.md"],
        "mode": ["run.sh"],
    }
    assert d.changed == ["README.md", "run.sh", "src/app.py", "src/new.py"]
    assert bool(d) is True


def test_unchanged_tree_has_an_empty_diff(tmp_path):
    root = build(tmp_path / "t")
    before = snapshot(root)
    d = diff(before, resnapshot(root, before))
    assert d.to_dict() == {"added": [], "modified": [], "deleted": [], "mode": []}
    assert bool(d) is False
    assert d.changed == []


def test_symlink_retarget_and_kind_change_are_modifications(tmp_path):
    root = build(tmp_path / "t")
    before = snapshot(root)
    settle()
    os.unlink(root / "link.py")
    os.symlink("README.md", root / "link.py")
    (root / "README.md").unlink()
    os.symlink("src/app.py", root / "README.md")  # file replaced by a link
    after = resnapshot(root, before)
    assert after["link.py"].sha256 == "README.md"
    assert after["README.md"].kind == "link"
    assert diff(before, after).to_dict() == {
        "added": [],
        "modified": ["README.md", "link.py"],
        "deleted": [],
        "mode": [],
    }


def test_empty_dirs_appear_and_disappear(tmp_path):
    root = build(tmp_path / "t")
    before = snapshot(root)
    settle()
    (root / "empty").rmdir()
    (root / "fresh" / "deep").mkdir(parents=True)
    (root / "src" / "app.py").unlink()  # src/ is now empty
    d = diff(before, resnapshot(root, before))
    assert d.to_dict() == {
        "added": ["fresh/deep/", "src/"],
        "modified": [],
        "deleted": ["empty/", "src/app.py"],
        "mode": [],
    }


def test_mode_change_of_empty_dir(tmp_path):
    root = build(tmp_path / "t")
    before = snapshot(root)
    os.chmod(root / "empty", 0o700)
    d = diff(before, resnapshot(root, before))
    assert d.mode == ["empty/"]
    assert d.modified == []


def test_edit_restoring_size_and_mtime_is_seen_through_ctime(tmp_path):
    root = build(tmp_path / "t")
    target = root / "src" / "app.py"
    before = snapshot(root)
    old = os.stat(target)
    settle()
    with open(target, "r+b") as fh:  # same size, same inode, different bytes
        fh.write(b"DEF")
    os.utime(target, ns=(old.st_atime_ns, old.st_mtime_ns))
    new = os.stat(target)
    assert (new.st_size, new.st_mtime_ns, new.st_ino, new.st_mode) == (
        old.st_size,
        old.st_mtime_ns,
        old.st_ino,
        old.st_mode,
    )
    assert new.st_ctime_ns != old.st_ctime_ns
    after = resnapshot(root, before)
    assert after["src/app.py"].sha256 == sha(b"DEF f():\n    return 1\n")
    assert diff(before, after).modified == ["src/app.py"]


def test_resnapshot_rehashes_only_changed_entries(tmp_path, monkeypatch):
    root = tmp_path / "t"
    root.mkdir()
    for i in range(30):
        (root / f"f{i:02}.txt").write_text(f"file {i}\n")
    before = snapshot(root)
    calls: list[str] = []
    real = treesnap._hash_at

    def counting(dir_fd, name):
        calls.append(name)
        return real(dir_fd, name)

    monkeypatch.setattr(treesnap, "_hash_at", counting)
    assert not diff(before, resnapshot(root, before))
    assert calls == []  # nothing changed: nothing re-hashed
    settle()
    (root / "f03.txt").write_text("file 3 edited\n")
    (root / "new.txt").write_text("new\n")
    os.chmod(root / "f07.txt", 0o600)
    (root / "f09.txt").unlink()
    after = resnapshot(root, before)
    assert sorted(calls) == ["f03.txt", "f07.txt"]  # a new file is added whatever it holds: not hashed here
    assert diff(before, after).to_dict() == {
        "added": ["new.txt"],
        "modified": ["f03.txt"],
        "deleted": ["f09.txt"],
        "mode": ["f07.txt"],
    }
    # a full snapshot hashes everything
    calls.clear()
    snapshot(root)
    assert len(calls) == 30


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    old = build(tmp_path / "old")
    new = tmp_path / "new"
    shutil.copytree(old, new, symlinks=True)
    return old, new


def test_patch_of_text_changes(tmp_path):
    old, new = _pair(tmp_path)
    before = snapshot(new)
    settle()
    (new / "src" / "app.py").write_text("def f():\n    return 2\n")
    (new / "README.md").unlink()
    (new / "notes.txt").write_text("first\nsecond")  # no newline at the end
    d = diff(before, resnapshot(new, before))
    patch = make_patch(old, new, d)
    assert patch == (
        "diff --agentdrift a/README.md b/README.md\n"
        "--- a/README.md\n"
        "+++ /dev/null\n"
        "@@ -1 +0,0 @@\n"
        "-readme\n"
        "diff --agentdrift a/notes.txt b/notes.txt\n"
        "--- /dev/null\n"
        "+++ b/notes.txt\n"
        "@@ -0,0 +1,2 @@\n"
        "+first\n"
        "+second\n"
        "\\ No newline at end of file\n"
        "diff --agentdrift a/src/app.py b/src/app.py\n"
        "--- a/src/app.py\n"
        "+++ b/src/app.py\n"
        "@@ -1,2 +1,2 @@\n"
        " def f():\n"
        "-    return 1\n"
        "+    return 2\n"
    )
    assert render_changes(old, new, d).added == {
        "README.md": [],
        "notes.txt": ["first", "second"],
        "src/app.py": ["    return 2"],
    }


def test_patch_of_mode_symlink_binary_and_large_files(tmp_path):
    old, new = _pair(tmp_path)
    (old / "blob.bin").write_bytes(b"\0\1\2")
    (new / "blob.bin").write_bytes(b"\0\1\2")
    (old / "big.txt").write_text("a\n" * 1000)
    (new / "big.txt").write_text("a\n" * 1000)
    before = snapshot(new)
    settle()
    (new / "blob.bin").write_bytes(b"\0\1\3")
    (new / "big.txt").write_text("b\n" * 1000)
    os.chmod(new / "run.sh", 0o755)
    os.unlink(new / "link.py")
    os.symlink("README.md", new / "link.py")
    d = diff(before, resnapshot(new, before))
    assert d.to_dict() == {
        "added": [],
        "modified": ["big.txt", "blob.bin", "link.py"],
        "deleted": [],
        "mode": ["run.sh"],
    }
    ch = render_changes(old, new, d, limit=1000)  # big.txt (2000 bytes) is over the limit
    big_sha = sha(b"b\n" * 1000)
    assert ch.patch == (
        "diff --agentdrift a/big.txt b/big.txt\n"
        f"agentdrift: larger than 1000 bytes; before 2000 bytes sha256 {sha(bytes([97, 10]) * 1000)}; after 2000 bytes sha256 {big_sha}\n"
        "--- a/big.txt\n"
        "+++ b/big.txt\n"
        "@@ added lines of a large file (1000) @@\n" + "+b\n" * 1000 + "diff --agentdrift a/blob.bin b/blob.bin\n"
        f"agentdrift: binary; before 3 bytes sha256 {sha(bytes([0, 1, 2]))}; after 3 bytes sha256 {sha(bytes([0, 1, 3]))}\n"
        "agentdrift: first 3 bytes of b/blob.bin:\n"
        f"~ 00000000  {'00 01 03':<47}  |...|\n"
        "diff --agentdrift a/link.py b/link.py\n"
        "--- a/link.py\n"
        "+++ b/link.py\n"
        "@@ -1 +1 @@\n"
        "-symlink -> src/app.py\n"
        "+symlink -> README.md\n"
        "diff --agentdrift a/run.sh b/run.sh\n"
        "mode changed\n"
    )
    assert ch.added == {"big.txt": ["b"], "blob.bin": [bytes([0, 1, 3]).decode()], "link.py": ["symlink -> README.md"]}
    # a binary file is undisplayable, so is one over the limit; neither is a source file here
    assert [(u["path"], u["reason"], u["source"]) for u in ch.undisplayable] == [
        ("big.txt", "larger than 1000 bytes", False),
        ("blob.bin", "binary", False),
    ]
    # under the default limit the large text file is diffed line by line
    full = make_patch(old, new, d)
    assert "+b\n" * 1000 in full and "-a\n" * 1000 in full


def test_non_utf8_file_is_shown_escaped_and_flagged(tmp_path):
    old, new = _pair(tmp_path)
    before = snapshot(new)
    (new / "latin1.txt").write_bytes(b"caf\xe9\n")
    d = diff(before, resnapshot(new, before))
    ch = render_changes(old, new, d)
    assert ch.patch == (
        "diff --agentdrift a/latin1.txt b/latin1.txt\n"
        f"agentdrift: not UTF-8; after 5 bytes sha256 {sha(b'caf' + bytes([0xE9, 10]))}\n"
        "--- /dev/null\n"
        "+++ b/latin1.txt\n"
        "@@ -0,0 +1 @@\n"
        "+caf\\xe9\n"
    )
    assert ch.undisplayable == [
        {
            "path": "latin1.txt",
            "reason": "not UTF-8",
            "source": False,
            "before": None,
            "after": {"kind": "file", "size": 5, "sha256": sha(b"caf" + bytes([0xE9, 10]))},
        }
    ]


def test_only_the_top_level_git_is_ignored(tmp_path):
    root = tmp_path / "t"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref")
    (root / "a" / ".git").mkdir(parents=True)
    (root / "a" / ".git" / "hidden.txt").write_text("x")  # content an agent might try to hide
    assert sorted(snapshot(root)) == ["a/.git/hidden.txt"]


@pytest.mark.parametrize("name", ["__pycache__", ".pytest_cache"])
def test_ignored_names_at_any_depth(tmp_path, name):
    root = tmp_path / "t"
    (root / "a" / "b" / name).mkdir(parents=True)
    (root / "a" / "b" / name / "x").write_text("x")
    (root / "a" / "keep.txt").write_text("k")
    # a/b/ holds only an ignored entry: it is neither listed as empty nor descended into
    assert sorted(snapshot(root)) == ["a/keep.txt"]


def test_the_patch_budget_goes_to_source_first_and_never_hides_a_source_change(tmp_path):
    old, new = _pair(tmp_path)
    before = snapshot(new)
    (new / "AAA.md").write_text("data line\n" * 500)  # sorts first, not source
    (new / "src" / "app.py").write_text("def f():\n    return 2\n")
    d = diff(before, resnapshot(new, before))
    ch = render_changes(old, new, d, total=600)
    assert "+    return 2" in ch.patch and len(ch.patch) < 600 + 200
    assert [(u["path"], u["source"]) for u in ch.undisplayable] == [("AAA.md", False)]
    assert ch.undisplayable[0]["reason"] == "left out of the patch: over its 600-byte budget"
    assert ch.patch.index("a/AAA.md") < ch.patch.index("a/src/app.py")  # still one patch in path order
    # source changes beyond the budget are undisplayable source changes (the tamper check fails them)
    tight = render_changes(old, new, d, total=50)
    assert ("src/app.py", True) in [(u["path"], u["source"]) for u in tight.undisplayable]
    assert len(tight.patch) < 50 + 200


def test_the_patch_budget_counts_bytes_not_characters(tmp_path):
    old, new = _pair(tmp_path)
    before = snapshot(new)
    (new / "notes.md").write_text("価格表の行\n" * 400)  # 16 bytes a line in UTF-8, 6 characters
    d = diff(before, resnapshot(new, before))
    ch = render_changes(old, new, d, total=2000)
    size = len(ch.patch.encode("utf-8"))
    assert size < 2000 + 300, size
    assert [u["path"] for u in ch.undisplayable] == ["notes.md"]
    assert "\ufffd" not in ch.patch  # cut on a character boundary
