"""A task directory is read once per loaded spec for all of its digests; a spec loaded again reads
it again, so an edited task is a new identity."""

import dataclasses

from pytest_agentdrift.tasks import load
from pytest_agentdrift.testing import make_task


def test_the_digests_of_one_spec_read_the_task_directory_once(tmp_path, monkeypatch):
    spec = load.load_task(make_task(tmp_path, "LS1", repo={"a.py": "x = 1\n"}))
    reads = []
    real = load.directory_listing
    monkeypatch.setattr(load, "directory_listing", lambda root: reads.append(root) or real(root))
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
    assert first.grading_digest() == grading  # the first spec keeps what it read
