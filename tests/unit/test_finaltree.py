"""A run's final tree kept as content-addressed blobs and put back exactly."""

import os
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_agentdrift.errors import RecordError
from pytest_agentdrift.run import finaltree
from pytest_agentdrift.run.runner import copy_tree
from pytest_agentdrift.tasks import treesnap
from pytest_agentdrift.tasks.load import load_task
from pytest_agentdrift.testing import make_task


def _run(work: Path, before, **kw):
    after = treesnap.snapshot(work)
    return SimpleNamespace(
        work=work,
        diff=treesnap.diff(before, after),
        leftovers=[],
        work_tree_deleted=False,
        overlay=None,
        tree_complete=True,
        **kw,
    )


def _agent_edits(tmp_path: Path):
    d = make_task(tmp_path, "A01", repo={"a.py": "A = 1\n", "keep.txt": "same\n", "gone.txt": "x\n", "d/b.py": "B\n"})
    spec = load_task(d)
    work = tmp_path / "work"
    copy_tree(spec.repo, work)
    before = treesnap.snapshot(work)
    (work / "a.py").write_text("A = 2\n")
    (work / "gone.txt").unlink()
    (work / "new.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(work / "new.sh", 0o755)
    os.chmod(work / "keep.txt", 0o600)
    os.symlink("../../outside-secret", work / "escape")  # a link out of the tree: kept as a link, never followed
    (work / "empty").mkdir()
    (work / "d" / "c.py").write_text("A = 2\n")  # same bytes as a.py: one blob
    (tmp_path / "planted.txt").write_text("beside the tree\n")
    return spec, work, before


def _store(tree: finaltree.FinalTree, record: Path) -> dict:
    from pytest_agentdrift.record.store import RunRecorder

    rec = RunRecorder(record)
    record.mkdir()
    files = rec.write_tree(tree.to_payload([]))
    import json

    return json.loads(files[finaltree.TREE_FILE])


def test_round_trip_is_exact(tmp_path):
    spec, work, before = _agent_edits(tmp_path)
    tree = finaltree.capture(_run(work, before))
    doc = _store(tree, tmp_path / "rec")
    assert doc["complete"] is True
    blobs = [p for p in (tmp_path / "rec" / "blobs").rglob("*") if p.is_file()]
    assert len(blobs) == 3  # a.py and d/c.py share one blob; new.sh; keep.txt (its mode changed)
    assert "planted.txt" not in str(doc)
    dest = tmp_path / "rebuilt"
    finaltree.rebuild(spec, doc, lambda sha: finaltree.read_blob(tmp_path / "rec", sha), dest, tmp_path / "t.json")

    def view(root):
        return {r: (e.kind, e.mode, e.sha256) for r, e in treesnap.snapshot(root).items()}

    assert view(dest) == view(work)
    assert os.readlink(dest / "escape") == "../../outside-secret"
    assert stat.S_IMODE(os.lstat(dest / "new.sh").st_mode) == 0o755


def test_a_tampered_blob_is_refused_naming_it(tmp_path):
    spec, work, before = _agent_edits(tmp_path)
    doc = _store(finaltree.capture(_run(work, before)), tmp_path / "rec")
    sha = doc["entries"]["a.py"]["sha256"]
    blob = finaltree.blob_path(tmp_path / "rec", sha)
    blob.write_text("A = 3\n")
    with pytest.raises(RecordError) as err:
        finaltree.rebuild(spec, doc, lambda s: finaltree.read_blob(tmp_path / "rec", s), tmp_path / "x", blob)
    assert str(blob) in str(err.value) and "sha256" in str(err.value)


@pytest.mark.parametrize("rel", ["../planted.txt", "/etc/x", "a/../../x", "escape/through-link"])
def test_a_tree_entry_cannot_write_outside(tmp_path, rel):
    spec, work, before = _agent_edits(tmp_path)
    doc = _store(finaltree.capture(_run(work, before)), tmp_path / "rec")
    sha = doc["entries"]["a.py"]["sha256"]
    doc["entries"][rel] = {"kind": "file", "mode": 0o644, "sha256": sha, "size": 6, "kept": True}
    with pytest.raises(RecordError):
        finaltree.rebuild(
            spec, doc, lambda s: finaltree.read_blob(tmp_path / "rec", s), tmp_path / "x", tmp_path / "t.json"
        )
    assert not (tmp_path / "planted.txt").read_text() != "beside the tree\n"
    assert not (tmp_path / "outside-secret").exists()


def test_caps_and_secrets(tmp_path, monkeypatch):
    spec, work, before = _agent_edits(tmp_path)
    (work / "big.bin").write_bytes(b"\0" * (finaltree.FILE_CAP + 1))
    (work / "leak.txt").write_text("token=s3cr3t-value-123\n")
    tree = finaltree.capture(_run(work, before))
    payload = tree.to_payload(["s3cr3t-value-123"])
    assert "s3cr3t" not in str(payload) and payload["tree"]["entries"]["leak.txt"]["redacted"] is True
    doc = _store(tree, tmp_path / "rec")
    assert doc["entries"]["big.bin"]["kept"] is False and "cap" in doc["entries"]["big.bin"]["why"]
    assert doc["complete"] is False
    assert "big.bin was not kept" in finaltree.missing_for_grading(doc)


def test_a_secret_in_a_path_or_link_target_is_listed_redacted_and_not_kept(tmp_path):
    spec, work, before = _agent_edits(tmp_path)
    (work / "leak-s3cr3t-value-123.txt").write_text("x\n")
    os.symlink("../s3cr3t-value-123", work / "pointer")
    payload = finaltree.capture(_run(work, before)).to_payload(["s3cr3t-value-123"])
    doc = payload["tree"]
    assert "s3cr3t" not in str(payload)
    assert doc["entries"]["leak-[REDACTED].txt"]["kept"] is False
    assert doc["entries"]["pointer"] == {"kind": "link", "kept": False, "why": finaltree.REDACTED_TARGET}
    # the list of changed paths is no longer the run's: what reads only it is not regradable either
    assert "leak-[REDACTED].txt" in finaltree.missing_paths(doc)


def test_setuid_and_setgid_are_dropped_and_never_put_back(tmp_path):
    spec, work, before = _agent_edits(tmp_path)
    os.chmod(work / "new.sh", 0o4755)
    doc = _store(finaltree.capture(_run(work, before)), tmp_path / "rec")
    assert doc["entries"]["new.sh"]["mode"] == 0o755 and doc["entries"]["new.sh"]["dropped"] == "setuid/setgid"
    doc["entries"]["new.sh"]["mode"] = 0o6755  # as an older record may say
    dest = tmp_path / "rebuilt"
    finaltree.rebuild(spec, doc, lambda s: finaltree.read_blob(tmp_path / "rec", s), dest, tmp_path / "t.json")
    assert (dest / "new.sh").stat().st_mode & 0o7777 == 0o755
