"""A task directory is hashed once per loaded spec for all of its digests while it is unchanged;
an edited task is a new identity, for the spec loaded before the edit too (the record says what the
task held when it was graded, not only when it was loaded)."""

import dataclasses
import os

from pytest_agentdrift.tasks import load, taskspec
from pytest_agentdrift.testing import make_task


def test_the_digests_of_one_spec_read_the_task_directory_once(tmp_path, monkeypatch):
    spec = load.load_task(make_task(tmp_path, "LS1", repo={"a.py": "x = 1\n"}))
    reads = []
    real = taskspec.directory_listing
    monkeypatch.setattr(taskspec, "directory_listing", lambda root: reads.append(root) or real(root))
    digests = [spec.given_digest(), spec.grading_digest(), spec.content_digest()]
    assert digests == [spec.given_digest(), spec.grading_digest(), spec.content_digest()]
    assert reads == [spec.path]
    assert spec == dataclasses.replace(spec)  # the kept listing is no field of the spec


def test_a_spec_loaded_again_sees_an_edited_task(tmp_path):
    d = make_task(tmp_path, "LS2", repo={"a.py": "x = 1\n"})
    first = load.load_task(d)
    given, grading = first.given_digest(), first.grading_digest()
    (d / "solution").mkdir()
    (d / "solution" / "a.py").write_text("x = 2\n")
    again = load.load_task(d)
    assert again.given_digest() == given  # the solution is not what the agent is given
    assert again.grading_digest() != grading
    assert first.grading_digest() == again.grading_digest()  # the spec loaded before sees the edit too


def test_a_file_rewritten_to_its_old_size_and_time_is_hashed_again(tmp_path):
    d = make_task(tmp_path, "LS3", repo={"a.py": "x = 1\n"})
    (d / "golden.txt").write_text("expected output\n")
    spec = load.load_task(d)
    loaded = spec.grading_digest()
    st = os.stat(d / "golden.txt")
    (d / "golden.txt").write_text("EXPECTED OUTPUT\n")  # same size
    os.utime(d / "golden.txt", ns=(st.st_atime_ns, st.st_mtime_ns))  # and the old modification time
    assert spec.grading_digest() != loaded
