"""A product's side outputs (run/agentword.py): a directory of the harness's beside the run, read
after the run only as regular files of bounded size."""

from __future__ import annotations

import os

from pytest_agentdrift.run.agentword import SCRATCH_FILE_LIMIT, product_scratch, read_scratch


def test_the_scratch_lies_beside_the_run_and_is_the_harness_s(tmp_path):
    scratch = product_scratch(tmp_path, "T01-r1-abcd")
    assert scratch.parent == tmp_path and scratch.name == ".out-T01-r1-abcd"
    assert scratch.stat().st_mode & 0o777 == 0o700


def test_only_regular_files_of_bounded_size_are_read(tmp_path):
    scratch = product_scratch(tmp_path, "run")
    (scratch / "usage.json").write_text('{"modelMetrics": {}}')
    secret = tmp_path / "secret.txt"
    secret.write_text("not the product's")
    os.symlink(secret, scratch / "linked.json")  # the agent's code pointing the harness elsewhere
    (scratch / "big.json").write_bytes(b"x" * (SCRATCH_FILE_LIMIT + 1))
    (scratch / "dir.json").mkdir()
    os.mkfifo(scratch / "fifo.json")  # would block a reader
    got = read_scratch(scratch, ("usage.json", "linked.json", "big.json", "dir.json", "fifo.json", "absent.json"))
    assert got == {
        "usage.json": b'{"modelMetrics": {}}',
        "linked.json": None,
        "big.json": None,
        "dir.json": None,
        "fifo.json": None,
        "absent.json": None,
    }
