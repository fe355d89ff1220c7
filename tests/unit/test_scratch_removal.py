"""Scratch trees removed on the background remover: gone from where they were at once when moved
to a trash directory, removed whatever an agent did to them, and what one check leaves in the
grading sandbox's writable directory never reaches the next check (grade/gradeserver.py)."""

import os
import shutil

import pytest
from test_checks import Lab

from pytest_agentdrift.grade.grader import Grader
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


# imported by each check: first says whether anything but its own copy is in the grading sandbox's
# writable directory, then leaves files there and beside its tree for the next check to find
LITTER = """
import os
mine = os.path.basename(os.path.abspath('..'))
foreign = [n for n in os.listdir('../..') if n != mine] + [n for n in os.listdir('..') if n.startswith('left-')]
for where in ('../..', '..'):
    with open(os.path.join(where, 'left-by-a-check'), 'w') as fh:
        fh.write('x')
rc = 1 if foreign else 0
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the grading server runs under bubblewrap")
def test_what_a_check_leaves_in_the_grading_sandbox_never_reaches_the_next(tmp_path):
    lab = Lab(tmp_path)
    if lab.iso.mode != "bwrap":
        pytest.skip(f"isolation here is {lab.iso.mode}, not bwrap")
    run_calc = ["python", "-c", "import calc, sys; sys.exit(calc.rc)"]
    spec = lab.task(
        "SRVLIT",
        repo={"calc.py": "rc = 0\n"},
        allowed=["calc.py"],
        checks=[{"name": f"check{i}", "kind": "command", "layer": "correctness", "run": run_calc} for i in (1, 2, 3)],
    )
    grader = lab.graders.setdefault(spec.path, Grader(lab.iso, lab.base / "litter"))
    _, results = lab.go(spec, f"Path('calc.py').write_text({LITTER!r})\n")
    assert grader.server.served == 3  # one server answered all three: the litter was removed, not the sandbox
    for name in ("check1", "check2", "check3"):
        assert results[name].passed is True, results[name]
