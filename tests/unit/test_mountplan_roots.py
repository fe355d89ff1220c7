"""The allow-list's mounts are the same whichever way the enclosing root of each allowed path is
found: `_mount_roots` looks up each path's ancestors; the reference below scans every root, as the
plan once did. Any difference is a path shown or hidden that the other would not."""

import itertools
import random

import pytest

from pytest_agentdrift.run import mountplan
from pytest_agentdrift.run.hostpaths import within
from pytest_agentdrift.run.mountplan import _emit, _key, _mount_roots


def _reference(allowed, hidden, ops, excluded):
    roots = sorted(allowed, key=_key)
    for root in roots:
        mode = allowed[root]
        enclosing = [r for r in roots if r != root and within(root, r)]
        if enclosing:
            parent = max(enclosing, key=len)
            cut = any(within(x, parent) and within(root, x) for x in hidden)
            if allowed[parent] == mode and not cut:
                continue
        inside = [x for x in hidden if x != root and within(x, root)] if mode == "ro" else []
        _emit(root, mode, inside, ops, excluded)


def _tree(tmp_path, rng):
    dirs = [tmp_path]
    for i in range(40):
        d = rng.choice(dirs) / f"d{i}"
        d.mkdir()
        dirs.append(d)
        if rng.random() < 0.3:
            (d / "f.txt").write_text("x")
    return [str(d) for d in dirs]


@pytest.mark.parametrize("seed", range(12))
def test_the_ancestor_lookup_mounts_what_a_scan_of_every_root_mounts(tmp_path, seed):
    rng = random.Random(seed)
    dirs = _tree(tmp_path, rng)
    system = {"/usr": "ro", "/etc/hosts": "ro", "/opt": "ro"}
    allowed = {**system, **{d: rng.choice(["ro", "rw"]) for d in rng.sample(dirs, 15)}}
    hidden = sorted(rng.sample(dirs, 5), key=_key)
    got_ops, got_excluded, want_ops, want_excluded = [], [], [], []
    _mount_roots(dict(allowed), hidden, got_ops, got_excluded)
    _reference(dict(allowed), hidden, want_ops, want_excluded)
    assert got_ops == want_ops
    assert got_excluded == want_excluded


def test_the_ancestors_of_a_path_are_its_enclosing_directories_nearest_first():
    assert mountplan._ancestors("/a/b/c") == ["/a/b", "/a", "/"]
    assert mountplan._ancestors("/a") == ["/"]
    assert mountplan._ancestors("/") == []
    for path, top in itertools.product(["/a/b/c", "/a/bc", "/ab/c"], ["/a", "/a/b", "/"]):
        assert (top in mountplan._ancestors(path)) == (within(path, top) and path != top)
