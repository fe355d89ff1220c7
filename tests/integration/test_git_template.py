"""The fixture's git repository is made once per task and process, in the first run's fresh copy
before its agent starts, and kept as a template: what an agent does to its repository never
reaches the next run's, and each run's mutations are measured against the harness's own state."""

import subprocess

from pytest_agentdrift.agents.base import CommandAdapter
from pytest_agentdrift.run import gitstate, sandbox
from pytest_agentdrift.run.runner import cleanup, run_agent
from pytest_agentdrift.run.runsettings import RunSettings
from pytest_agentdrift.tasks.load import load_task
from pytest_agentdrift.testing import agent_cmd, agent_script, make_task

MUTATE = """
import subprocess
with open(".git/config", "a") as fh:
    fh.write("[alias]\\n    planted = !echo planted\\n")
subprocess.run(["git", "update-index", "--skip-worktree", "README.md"], check=True)
Path(".git/refs/heads/planted").write_text("0" * 40 + "\\n")
report("complete", summary="done")
"""
NOTHING = 'report("complete", summary="nothing")\n'


def _run(spec, tmp_path, name, body):
    script = agent_script(tmp_path / f"{name}.py", body)
    settings = RunSettings(isolation=sandbox.detect("auto"))
    return run_agent(spec, 1, CommandAdapter(agent_cmd(script)), settings, tmp_path / "runs")


def test_what_one_run_does_to_its_repository_never_reaches_the_next(tmp_path):
    spec = load_task(make_task(tmp_path / "tasks", "GT1", repo={"README.md": "hello\n", "src/a.py": "x = 1\n"}))
    first = _run(spec, tmp_path, "mutate", MUTATE)
    second = None
    try:
        assert first.start_commit is not None
        assert ".git/config (changed)" in first.git_mutations, first.git_mutations
        assert ".git/index (changed)" in first.git_mutations, first.git_mutations
        second = _run(spec, tmp_path, "nothing", NOTHING)  # while the first run's tree is still there
        assert second.start_commit == first.start_commit
        assert second.git_mutations == [], second.git_mutations
        config = (second.work / ".git" / "config").read_text()
        assert "planted" not in config
        assert not (second.work / ".git" / "refs" / "heads" / "planted").exists()
        flags = subprocess.run(
            ["git", "ls-files", "-v"], cwd=second.work, capture_output=True, text=True, check=True
        ).stdout
        assert "S README.md" not in flags and "H README.md" in flags, flags
    finally:
        cleanup(first)
        if second is not None:
            cleanup(second)


def test_the_template_state_equals_what_the_run_sandbox_reads(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "README.md").write_text("hello\n")
    assert gitstate.git_init_fixture(work) is not None
    in_sandbox = gitstate.git_state(work, sandbox.detect("auto"))
    assert in_sandbox["index"] not in ("unreadable", "not-a-regular-file")
    assert gitstate.git_state(work, gitstate.HARNESS_WRITTEN) == in_sandbox


def _packs(work):
    return sorted(p.name for p in (work / ".git" / "objects" / "pack").glob("*.pack"))


def test_a_small_fixture_keeps_loose_objects_a_large_one_is_packed_and_the_commit_is_the_same(tmp_path, monkeypatch):
    def fixture(name):
        work = tmp_path / name
        work.mkdir()
        for i in range(30):
            (work / f"m{i}.py").write_text(f"x = {i}\n")
        return work

    small = fixture("small")
    loose_commit = gitstate.git_init_fixture(small)
    assert _packs(small) == [] and gitstate._loose_objects(small / ".git" / "objects") == 32  # 30 blobs, tree, commit
    monkeypatch.setattr(gitstate, "REPACK_FROM_OBJECTS", 10)
    packed = fixture("packed")
    assert gitstate.git_init_fixture(packed) == loose_commit
    assert len(_packs(packed)) == 1 and gitstate._loose_objects(packed / ".git" / "objects") == 0
    for work in (small, packed):
        fsck = subprocess.run(["git", "fsck", "--strict"], cwd=work, capture_output=True, text=True)
        assert fsck.returncode == 0, fsck.stderr
    states = [gitstate.git_state(w, gitstate.HARNESS_WRITTEN) for w in (small, packed)]
    for key in ("index", "HEAD", "refs/heads/main", "config"):
        assert states[0][key] == states[1][key], key


def test_a_git_that_failed_once_is_tried_again_by_the_next_run(tmp_path, monkeypatch):
    # git that could not run for a moment (not started, a full disk) is no reason for every later
    # run of the task to get no repository
    key = ("GT-retry", "digest")
    cache = tmp_path / "cache"
    first, second = tmp_path / "w1", tmp_path / "w2"
    for work in (first, second):
        work.mkdir()
        (work / "a.txt").write_text("a\n")
    with monkeypatch.context() as m:
        m.setenv("PATH", str(tmp_path / "no-git-here"))
        assert gitstate.git_fixture(first, key, cache) is None
    assert not (first / ".git").exists()
    commit = gitstate.git_fixture(second, key, cache)
    assert commit is not None and (second / ".git").is_dir()
    third = tmp_path / "w3"
    third.mkdir()
    (third / "a.txt").write_text("a\n")
    assert gitstate.git_fixture(third, key, cache) == commit  # and kept once it was made


REWRITE_OBJECT = """
import subprocess, zlib
fixed = b"def add(a, b):\\n    return a + b\\n"
oid = subprocess.run(["git", "rev-parse", "HEAD:calc.py"], capture_output=True, text=True, check=True).stdout.strip()
obj = Path(".git/objects") / oid[:2] / oid[2:]
obj.chmod(0o644)
obj.write_bytes(zlib.compress(b"blob %d\\0" % len(fixed) + fixed))  # the fixture's own object, new bytes
shown = subprocess.run(["git", "show", "HEAD:calc.py"], capture_output=True, check=False).stdout
report("complete", summary=f"history_shows_fixed={shown == fixed}")
"""
ADD_OBJECTS = """
import subprocess
for i in range(3):
    subprocess.run(["git", "hash-object", "-w", "--stdin"], input=f"scratch {i}\\n".encode(), check=True)
subprocess.run(["git", "status", "--porcelain"], check=True, capture_output=True)
report("complete", summary="added")
"""


def test_rewriting_one_of_the_fixtures_objects_is_a_git_mutation_adding_one_is_not(tmp_path):
    # a rewritten blob behind HEAD:calc.py makes every git command show the fix as the fixture's
    # history while refs, config and index stay as they were
    spec = load_task(make_task(tmp_path / "tasks", "GT3", repo={"calc.py": "def add(a, b):\n    return a - b\n"}))
    rewrote = _run(spec, tmp_path, "rewrite", REWRITE_OBJECT)
    added = None
    try:
        assert rewrote.report["summary"] == "history_shows_fixed=True", rewrote.report
        assert any(m.startswith(".git/objects/") and m.endswith("(changed)") for m in rewrote.git_mutations), (
            rewrote.git_mutations
        )
        added = _run(spec, tmp_path, "add", ADD_OBJECTS)
        assert added.report["summary"] == "added" and added.git_mutations == [], added.git_mutations
    finally:
        cleanup(rewrote)
        if added is not None:
            cleanup(added)
