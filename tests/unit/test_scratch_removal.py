"""Scratch trees removed on the background remover: gone from where they were at once when moved
to a trash directory, and removed whatever an agent did to them (what one check leaves in the
grading sandbox's writable directory: tests/integration/test_grading_server.py)."""

import os

from pytest_agentdrift.tasks import fdtree


def _hostile_tree(root):
    """A tree as an agent may leave it: a deep chain, a directory it made unreadable, a symlink out."""
    deep = root
    for i in range(60):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    (deep / "f.txt").write_text("x")
    locked = root / "locked"
    (locked / "inner").mkdir(parents=True)
    (locked / "inner" / "secret.txt").write_text("x")
    (root / "out").symlink_to(root.parent / "outside")
    locked.chmod(0)
    return root


def test_a_tree_moved_to_the_trash_is_gone_at_once_and_removed_in_the_background(tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "kept.txt").write_text("the symlink's target is never followed")
    trash = tmp_path / "trash"
    trash.mkdir()
    tree = _hostile_tree(tmp_path / "tree")
    assert fdtree.remove_later(tree, trash=trash) == []
    assert not os.path.lexists(tree)  # gone from its place before the call returns
    assert fdtree.drain_removals(60) is True
    assert os.listdir(trash) == []
    assert (tmp_path / "outside" / "kept.txt").is_file()


def test_a_tree_handed_over_in_place_is_removed_by_the_drain(tmp_path):
    tree = _hostile_tree(tmp_path / "tree")
    (tmp_path / "outside").mkdir()
    assert fdtree.remove_later(tree) == []
    assert fdtree.drain_removals(60) is True
    assert not os.path.lexists(tree)
    assert os.path.isdir(tmp_path / "outside")


def test_a_tree_that_cannot_be_moved_is_removed_at_once(tmp_path):
    tree = _hostile_tree(tmp_path / "tree")
    assert fdtree.remove_later(tree, trash=tmp_path / "no-such-trash") == []
    assert not os.path.lexists(tree)
