"""The fixture's git repository and what an agent did to it. No pytest.

A repository is more than HEAD and refs: index flags (`skip-worktree`,
`assume-unchanged`) hide edits from `git status`, `info/exclude` and
`info/attributes` change what git sees and how it diffs, and
`objects/info/alternates` borrows objects from another repository. So the
state compared before and after a run is every file under `.git` (refs,
packed-refs, logs, config, hooks, info/*, objects/info/*, the fixture's own
objects and packs, ...) plus the index by its entries *and* their flags; any
difference is a git mutation, except objects added to the content-addressed
store (they change nothing a ref or the index does not show).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import stat
import subprocess
from pathlib import Path

from pytest_agentdrift.safetext import escape_path
from pytest_agentdrift.tasks import fdtree

EVALUATOR_COMPONENT = "gitstate"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

_GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "agentdrift",
    "GIT_AUTHOR_EMAIL": "fixture@agentdrift.invalid",
    "GIT_COMMITTER_NAME": "agentdrift",
    "GIT_COMMITTER_EMAIL": "fixture@agentdrift.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+0000",
}

#: entries under .git the harness reads at most (a .git stuffed with files is a mutation in itself)
GIT_ENTRY_BUDGET = 20_000


def git_init_fixture(work: Path) -> str | None:
    """Make the work copy a git repository with one deterministic commit.

    Same tree -> same commit id on every run and machine (fixed author, date,
    no global config). Returns the commit id, or None when git is missing.
    """
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **_GIT_ENV}
    commands = [
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A"],
        ["git", "commit", "-q", "--no-verify", "--no-gpg-sign", "-m", "frozen fixture"],
    ]
    try:
        for argv in commands:
            _git(argv, work, env)
        if _loose_objects(work / ".git" / "objects") >= REPACK_FROM_OBJECTS:
            # one pack instead of a loose object per file: copying .git into each run stays cheap
            # (`repack -d` also prunes the loose objects the pack holds)
            _git(["git", "repack", "-a", "-d", "-q"], work, env)
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=work, env=env, check=True, capture_output=True, text=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


#: loose objects from which a fixture's repository is packed: below it copying them (and hashing
#: them for the compared state) costs less than a repack (about 0.1 s here)
REPACK_FROM_OBJECTS = 256


def _git(argv: list[str], work: Path, env: dict[str, str]) -> None:
    subprocess.run(
        argv, cwd=work, env=env, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def _loose_objects(objects: Path) -> int:
    """How many loose objects the object store holds (its two-hex-digit fan-out directories)."""
    count = 0
    for entry in os.scandir(objects):
        if len(entry.name) == 2 and entry.is_dir(follow_symlinks=False):
            count += len(os.listdir(entry.path))
    return count


_TEMPLATES: dict[tuple[str, str], tuple[Path, str]] = {}


def git_fixture(work: Path, key: tuple[str, str], cache_dir: Path) -> str | None:
    """Give the work copy the fixture's git repository (one deterministic commit).

    Committing a large tree costs seconds, so the .git of each task is made
    once per process, in the first run's fresh copy (the agent has not started),
    and kept as a template: later runs get a plain file copy of it. A failure
    is not kept: git that could not run for a moment (a full disk) is tried
    again by the next run instead of leaving every later run without a repository.
    """
    cached = _TEMPLATES.get(key)
    if cached is not None and (cached[0] / ".git").is_dir():
        shutil.copytree(cached[0] / ".git", work / ".git", symlinks=True)
        return cached[1]
    commit = git_init_fixture(work)
    if commit is None:
        fdtree.rmtree(work / ".git")  # what a git that failed half-way left: the run gets no repository
        return None
    template = cache_dir / f"git-{secrets.token_hex(8)}"
    template.mkdir(parents=True)
    shutil.copytree(work / ".git", template / ".git", symlinks=True)
    _TEMPLATES[key] = (template, commit)
    return commit


_TEMPLATE_STATES: dict[tuple[str, str], dict[str, str]] = {}
#: the `isolation` of a repository only the harness's git wrote (a template): git reads it on the host
HARNESS_WRITTEN = "harness-written"


def fixture_git_state(work: Path, key: tuple[str, str] | None, isolation) -> dict[str, str]:
    """git_state of a work copy fresh from git_fixture: its .git is a byte copy of the task's
    template, which the harness alone wrote, so the template's state stands for every copy
    (computed once per task and process, with the host's git: no agent wrote its config)."""
    cached = _TEMPLATES.get(key) if key is not None else None
    if cached is None or key is None:
        return git_state(work, isolation)
    if key not in _TEMPLATE_STATES:
        _TEMPLATE_STATES[key] = git_state(cached[0], HARNESS_WRITTEN)
    return dict(_TEMPLATE_STATES[key])


def _is_real_dir(p: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(p).st_mode)
    except OSError:
        return False


#: sha256 of an index file's bytes -> its entries' digest: the same bytes list the same entries
_ENTRIES_BY_INDEX: dict[str, str] = {}


def _index_bytes_digest(index: Path) -> str | None:
    try:
        fd = os.open(index, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    finally:
        os.close(fd)


def _index_entries(work: Path, isolation) -> str:
    """The index by entries and flags: `git ls-files --stage -v` tags each entry
    (H cached, S skip-worktree, lowercase assume-unchanged), so setting a flag
    is a change; the stat data a harmless `git status` refreshes is not.
    An index whose bytes were seen before is not read by git again (one
    sandboxed git per run saved when the agent never touched the index)."""
    seen = _index_bytes_digest(work / ".git" / "index")
    if seen is not None and seen in _ENTRIES_BY_INDEX:
        return _ENTRIES_BY_INDEX[seen]
    entries = _ls_files_digest(work, isolation)
    if seen is not None and entries != "unreadable" and _index_bytes_digest(work / ".git" / "index") == seen:
        _ENTRIES_BY_INDEX[seen] = entries
    return entries


#: the index by entries and flags (an agent's repository config never runs a command: no fsmonitor)
LS_FILES = ["git", "-c", "core.fsmonitor=false", "ls-files", "--stage", "-v", "-z"]


def _ls_files_digest(work: Path, isolation) -> str:
    from pytest_agentdrift.run import sandbox

    if isolation == HARNESS_WRITTEN:
        return _host_ls_files_digest(work)
    res = sandbox.run(
        LS_FILES,
        cwd=work,
        env=_read_env(),
        isolation=isolation or sandbox.detect("auto"),
        writable=[],
        timeout_s=30,
        output_limit=64 << 20,
        token=secrets.token_hex(8),
    )
    if res.exit_code != 0 or res.stdout_truncated:
        return "unreadable"
    return hashlib.sha256(res.stdout).hexdigest()


def _read_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", **_GIT_ENV}


def _host_ls_files_digest(work: Path) -> str:
    try:
        res = subprocess.run(
            LS_FILES,
            cwd=work,
            env=_read_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return "unreadable"
    return hashlib.sha256(res.stdout).hexdigest() if res.returncode == 0 else "unreadable"


def git_state(work: Path, isolation=None) -> dict[str, str]:
    """Everything under .git that defines the repository, path -> hash or mark.

    Read by directory fd without following symlinks (a planted symlink is its
    own mark). The agent wrote this repository's config (core.fsmonitor runs a
    command), so git itself runs in the run's sandbox, read-only, never on the host.
    """
    gitdir = work / ".git"
    state: dict[str, str] = {}
    if not _is_real_dir(gitdir):
        return state
    stats = fdtree.WalkStats()
    try:
        for item in fdtree.walk(gitdir, frozenset(), max_names=GIT_ENTRY_BUDGET, stats=stats):
            if item.rel != "index":
                state[item.rel] = _mark(item)
    except OSError as exc:
        state["(.git unreadable)"] = str(exc)
    if stats.truncated:
        state["(more entries than the harness reads)"] = stats.truncated
    if os.path.lexists(gitdir / "index"):
        state["index"] = (
            _index_entries(work, isolation)
            if (gitdir / "index").is_file() and not (gitdir / "index").is_symlink()
            else "not-a-regular-file"
        )
    return state


EMPTY_DIRECTORY = "empty-directory"


def _mark(item: fdtree.Item) -> str:
    """The hash of a regular file; anything else (a planted symlink or FIFO) is its own mark."""
    if item.entry is None:
        return EMPTY_DIRECTORY
    try:
        st = item.stat()
    except OSError:
        return "unreadable"
    if stat.S_ISLNK(st.st_mode):
        try:
            return "symlink:" + os.readlink(item.name, dir_fd=item.dir_fd)
        except OSError:
            return "symlink"
    if not stat.S_ISREG(st.st_mode):
        return "not-a-regular-file"
    try:
        return fdtree.hash_at(item.dir_fd, item.name)
    except OSError:
        return "unreadable"


def git_mutations(before: dict[str, str], after: dict[str, str], had_git: bool, has_git: bool) -> list[str]:
    """`.git/<path> (added|removed|changed)` for every difference, paths escaped."""
    out = []
    if had_git and not has_git:
        return [".git (removed)"]
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key) and not _object_added(key, before):
            what = "added" if key not in before else "removed" if key not in after else "changed"
            out.append(f".git/{escape_path(key)} ({what})")
    return out


def _object_added(key: str, before: dict[str, str]) -> bool:
    """An object the fixture's store did not hold, or a directory of the store that was empty.

    The object store is content-addressed: adding objects changes nothing a ref or the
    index does not show. Rewriting or removing one of the fixture's own objects changes
    what every git command shows as its history, so that is a mutation; objects/info
    (alternates, http-alternates) is configuration, compared as any other file."""
    if not key.startswith("objects/"):
        return False
    if key.startswith("objects/info/") and key != "objects/info/":
        return False
    return before.get(key, EMPTY_DIRECTORY) == EMPTY_DIRECTORY
