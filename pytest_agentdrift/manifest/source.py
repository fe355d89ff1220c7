"""The source manifest of a session: what the selected task directories hold, byte for byte.

`build_source_manifest` lists every file of every selected task directory (relative path, size,
sha256; a symlink by its target, never followed) and the lockfiles found on the way and at the top
of the project root; its digest is the identity's ``source_id``. Where no task directory is
selected, the project's own git checkout (`git_checkout`: commit and dirty flag, read without
taking a lock) is all the source there is. Read-only: nothing here writes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_agentdrift.canonical import digest, hash_file
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.vocabulary import NOT_APPLICABLE, UNOBSERVED

#: names never counted in the source manifest: written by running tests
SOURCE_EXCLUDED_NAMES = frozenset({"__pycache__", ".pytest_cache"})

LOCKFILE_NAMES = {
    "uv.lock": "uv",
    "poetry.lock": "poetry",
    "Pipfile.lock": "pipenv",
    "pdm.lock": "pdm",
    "pylock.toml": "pylock",
    "package-lock.json": "npm",
    "npm-shrinkwrap.json": "npm-shrinkwrap",
    "yarn.lock": "yarn",
    "pnpm-lock.yaml": "pnpm",
    "bun.lock": "bun",
    "bun.lockb": "bun-binary",
    "Cargo.lock": "cargo",
    "go.sum": "go",
    "Gemfile.lock": "bundler",
    "composer.lock": "composer",
    "conda-lock.yml": "conda-lock",
    "packages.lock.json": "nuget",
    "mix.lock": "mix",
    "Package.resolved": "swiftpm",
}
_REQUIREMENTS = re.compile(r"^(requirements|constraints)([-_.\w]*)\.(txt|in)$")


def build_source_manifest(
    task_dirs: Mapping[str, Path], project_root: Path | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(source-manifest.json document, lockfiles) for the selected task directories.

    Paths are ``<task id>/<posix path relative to the task directory>``,
    sorted; symlinks are recorded with their target (never followed); cache
    directories written by running tests are left out. Lockfiles are found
    in the same walk, plus the top level of the project root.
    """
    files: list[dict[str, Any]] = []
    lockfiles: list[dict[str, Any]] = []
    listing: list[tuple[str, str, str, str]] = []  # (task id, rel, full, kind)
    for tid, top in sorted(task_dirs.items()):
        listing.extend((tid, rel, full, kind) for rel, full, kind in _walk(Path(top)))
    hashed = _hash_files([full for _, _, full, kind in listing if kind == "file"])
    for tid, rel, full, kind in listing:
        path = f"{tid}/{rel}"
        if kind == "symlink":
            # recorded with its target, never followed; an absolute target by its name only
            target = os.readlink(full)
            target = target if not os.path.isabs(target) else "absolute:" + os.path.basename(target)
            files.append({"path": path, "type": "symlink", "target": target})
            continue
        size, sha = hashed[full]
        files.append({"path": path, "size": size, "sha256": sha})
        fmt = _lockfile_format(os.path.basename(full))
        if fmt is not None:
            lockfiles.append(_lockfile(f"task:{tid}:{rel}", full, fmt, sha))
    if project_root is not None and Path(project_root).is_dir():
        for entry in sorted(os.scandir(project_root), key=lambda e: e.name):
            fmt = _lockfile_format(entry.name)
            if fmt is not None and entry.is_file(follow_symlinks=False):
                lockfiles.append(_lockfile(f"project:{entry.name}", entry.path, fmt, hash_file(entry.path)))
    doc = {
        "manifest_version": 1,
        "excluded_names": sorted(SOURCE_EXCLUDED_NAMES),
        "tasks": sorted(task_dirs),
        "files": files,
    }
    # The digest covers [path, size, sha256] (symlinks: [path, "symlink",
    # target]) in path order: the same facts as `files`, in a compact form
    # that canonicalises about twice as fast as the list of objects.
    doc["digest"] = digest(
        [[f["path"], f["size"], f["sha256"]] if "sha256" in f else [f["path"], "symlink", f["target"]] for f in files]
    )
    return doc, sorted(lockfiles, key=lambda x: x["path"])


def _lockfile(label: str, full: str, fmt: str, sha: str) -> dict[str, Any]:
    return {"path": label, "format": fmt, "format_version": _lockfile_version(Path(full), fmt), "sha256": sha}


def _hash_files(regular: list[str]) -> dict[str, tuple[int, str]]:
    """{path: (size, sha256)}.

    Hash in a small thread pool: open/read/sha256 release the GIL, and a
    tree of many small files is bound by per-file system calls, not by
    one core's sha256 speed.
    """
    workers = min(4, (os.cpu_count() or 1)) if len(regular) > 64 and (os.cpu_count() or 1) > 2 else 1
    if workers == 1:
        return {full: _size_and_sha256(full) for full in regular}
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(regular, pool.map(_size_and_sha256, regular, chunksize=64), strict=False))


_SMALL = 1 << 20


def _size_and_sha256(full: str) -> tuple[int, str]:
    """(size, hex sha256) with one open; small files in one read."""
    import hashlib

    with open(full, "rb", buffering=0) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size <= _SMALL:
            return size, hashlib.sha256(fh.read()).hexdigest()
        return size, hashlib.file_digest(fh, "sha256").hexdigest()


def _walk(top: Path) -> Iterable[tuple[str, str, str]]:
    """(posix rel, full path, file|symlink) below top, sorted by rel; no symlink is followed."""
    out: list[tuple[str, str, str]] = []
    stack = [(os.fspath(top), "")]
    while stack:
        d, prefix = stack.pop()
        try:
            it = list(os.scandir(d))
        except OSError as exc:
            raise AgentDriftError(f"cannot list task directory: {exc.strerror or exc}", d) from None
        for e in it:
            if e.name in SOURCE_EXCLUDED_NAMES:
                continue
            rel = prefix + e.name
            if e.is_symlink():
                out.append((rel, e.path, "symlink"))
            elif e.is_dir(follow_symlinks=False):
                stack.append((e.path, rel + "/"))
            elif e.is_file(follow_symlinks=False):
                out.append((rel, e.path, "file"))
    out.sort(key=lambda t: t[0])
    return out


def _lockfile_format(name: str) -> str | None:
    if name in LOCKFILE_NAMES:
        return LOCKFILE_NAMES[name]
    if _REQUIREMENTS.match(name):
        return "pip-requirements"
    return None


def _lockfile_version(path: Path, fmt: str) -> str:
    """The lockfile's own format version where the format declares one in its head."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8192).decode("utf-8", errors="replace")
    except OSError:
        return UNOBSERVED
    patterns = {
        "uv": r"^version\s*=\s*(\d+)",
        "pylock": r"^lock-version\s*=\s*\"?([\d.]+)",
        "poetry": r"lock-version\s*=\s*\"([\d.]+)\"",
        "npm": r"\"lockfileVersion\"\s*:\s*(\d+)",
        "npm-shrinkwrap": r"\"lockfileVersion\"\s*:\s*(\d+)",
        "pnpm": r"^lockfileVersion:\s*'?([\d.]+)",
        "pipenv": r"\"pipfile-spec\"\s*:\s*(\d+)",
        "cargo": r"^version\s*=\s*(\d+)",
        "yarn": r"^# yarn lockfile (v\d+)|^__metadata:",
        "bun": r"\"lockfileVersion\"\s*:\s*(\d+)",
        "composer": r"\"plugin-api-version\"\s*:\s*\"([\d.]+)\"",
    }
    pat = patterns.get(fmt)
    if pat is None:
        return NOT_APPLICABLE
    m = re.search(pat, head, re.MULTILINE)
    if not m:
        return UNOBSERVED
    if fmt == "yarn":
        return m.group(1) or "berry"
    return m.group(1)


# --------------------------------------------------------------------------- git


def git_checkout(project_root: Path, env: Mapping[str, str]) -> dict[str, Any] | str:
    """Commit and dirty flag of the project checkout (GitPython, imported here only).

    GIT_OPTIONAL_LOCKS=0 keeps `git status`-style commands from refreshing
    and rewriting the index: capture must leave every file as it found it.
    Remotes are not read (their URLs can hold tokens).
    """
    if not _find_git_dir(Path(project_root)):
        return NOT_APPLICABLE
    try:
        import git  # GitPython
    except ImportError:
        return UNOBSERVED
    try:
        repo = git.Repo(os.fspath(project_root), search_parent_directories=True)
        with repo.git.custom_environment(GIT_OPTIONAL_LOCKS="0"):
            try:
                commit = repo.head.commit.hexsha
            except ValueError:
                commit = UNOBSERVED  # no commit yet
            dirty = repo.is_dirty(untracked_files=True)
        return {"commit": commit, "dirty": bool(dirty)}
    except Exception as exc:  # noqa: BLE001 - any git failure leaves the field unobserved, never aborts capture
        return {"commit": UNOBSERVED, "dirty": UNOBSERVED, "error": type(exc).__name__}
    finally:
        try:
            repo.close()  # type: ignore[possibly-undefined]
        except Exception:  # noqa: BLE001
            pass


def _find_git_dir(start: Path) -> bool:
    cur = Path(os.path.abspath(start))
    while True:
        if (cur / ".git").exists():
            return True
        if cur.parent == cur:
            return False
        cur = cur.parent
