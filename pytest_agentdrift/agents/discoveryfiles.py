"""Discovery's files and paths: the named roots paths are labelled by, reading and normalising
instruction text, frontmatter, and walking a tree (up from cwd, down for nested files).

Part of the generic discovery machinery (agents/discovery_base.py re-exports it).
Reads only what it is given.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_agentdrift.canonical import sha256_hex

#: Directories never descended into when looking for nested instruction
#: files: version-control internals and dependency / cache trees that no
#: product documents as an instruction location.
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".pytest_cache", ".mypy_cache", ".tox"}
)

NORMALISATION = (
    "bytes; leading UTF-8 BOM dropped; CRLF and CR -> LF; trailing space/tab/FF/VT stripped per line; "
    "trailing empty lines dropped; non-empty text ends with one LF"
)


# --------------------------------------------------------------------------- roots and labels


@dataclass(frozen=True)
class Roots:
    """Named roots used to turn absolute paths into stable, private-free labels.

    The most specific root containing a path wins, so a task repository inside
    the project is labelled ``task:T05:...`` rather than ``project:...``.
    """

    roots: tuple[tuple[str, str], ...]  # (prefix, absolute dir)

    @classmethod
    def build(cls, pairs: Iterable[tuple[str, Path | None]]) -> Roots:
        out = []
        for prefix, path in pairs:
            if path is not None:
                out.append((prefix, os.path.abspath(os.fspath(path))))
        # longest directory first: most specific root wins
        out.sort(key=lambda item: (-len(item[1]), item[0]))
        return cls(tuple(out))

    def with_root(self, prefix: str, path: Path) -> Roots:
        return Roots.build([*((p, Path(d)) for p, d in self.roots), (prefix, path)])

    def label(self, path: Path | str) -> str:
        full = os.path.abspath(os.fspath(path))
        for prefix, root in self.roots:
            if full == root:
                return prefix
            if full.startswith(root.rstrip(os.sep) + os.sep):
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                return prefix + rel
        # Outside every named root: keep the name, replace the directory by a
        # short digest so no private directory name reaches the manifest.
        return f"outside:{sha256_hex(full.encode())[:12]}/{os.path.basename(full)}"


def default_roots(home: Path, project_root: Path | None = None, system_root: Path | None = None) -> Roots:
    return Roots.build([("~/", home), ("project:", project_root), ("system:/", system_root)])


# --------------------------------------------------------------------------- text


_TRAILING_WS = re.compile(rb"[ \t\f\v]+$", re.MULTILINE)


def normalise_text(data: bytes) -> bytes:
    """The normalised form hashed into ``normalised_sha256`` (see module doc)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    data = _TRAILING_WS.sub(b"", data)
    data = data.rstrip(b"\n")
    return data + b"\n" if data else b""


def read_bytes(path: Path) -> tuple[bytes | None, str]:
    """(bytes, status) where status is loaded / missing / unreadable."""
    try:
        with open(path, "rb") as fh:
            return fh.read(), "loaded"
    except FileNotFoundError:
        return None, "missing"
    except IsADirectoryError:
        return None, "unreadable"
    except OSError:
        return None, "unreadable"


def is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def exists(path: Path) -> bool:
    try:
        return path.exists() or path.is_symlink()
    except OSError:
        return False


def parse_frontmatter(data: bytes) -> dict[str, str | list[str]]:
    """The small YAML subset instruction frontmatter uses.

    ``key: value`` (quoted or bare, comma separated allowed) and block lists
    (``key:`` followed by ``- item`` lines). Anything else is ignored: the
    frontmatter only decides *whether* a file applies, and an unparsed key
    is still covered by the file's hash.
    """
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
    if not text.startswith("---\n"):
        return {}
    end = text.find("\n---", 4)
    if end < 0:
        return {}
    out: dict[str, str | list[str]] = {}
    current: str | None = None
    for line in text[4:end].split("\n"):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("- ") and current is not None:
            items = out.setdefault(current, [])
            if isinstance(items, list):
                items.append(unquote(stripped[2:].strip()))
            continue
        key, sep, value = stripped.partition(":")
        if not sep:
            continue
        current = key.strip()
        value = value.strip()
        out[current] = unquote(value) if value else []
    return out


def unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def split_patterns(value: object) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        for part in str(item).split(","):
            part = unquote(part.strip())
            if part:
                out.append(part)
    return out


# --------------------------------------------------------------------------- walking


def walk_up(cwd: Path, stop: Path | None) -> list[Path]:
    """cwd and its ancestors, outermost first; stops at ``stop`` (inclusive) or the filesystem root."""
    cur = Path(os.path.abspath(cwd))
    stop_abs = Path(os.path.abspath(stop)) if stop is not None else None
    chain = [cur]
    while True:
        if stop_abs is not None and cur == stop_abs:
            break
        parent = cur.parent
        if parent == cur:
            break
        cur = parent
        chain.append(cur)
    return list(reversed(chain))


def nested_files(top: Path, names: Sequence[str], skip_top: bool = True) -> list[Path]:
    """Files with one of ``names`` below ``top`` (not in top itself), sorted."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        if skip_top and os.path.abspath(dirpath) == os.path.abspath(top):
            continue
        for name in names:
            if name in filenames:
                found.append(Path(dirpath) / name)
    return sorted(found, key=lambda p: p.as_posix())


def glob_files(directory: Path, suffix: str = ".md") -> list[Path]:
    """All files ending with suffix under directory, recursively, sorted by relative path."""
    if not directory.is_dir():
        return []
    out = []
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in filenames:
            if name.endswith(suffix):
                out.append(Path(dirpath) / name)
    return sorted(out, key=lambda p: p.relative_to(directory).as_posix())


def find_marker_root(cwd: Path, markers: Sequence[str], stop: Path | None) -> Path | None:
    for d in reversed(walk_up(cwd, stop)):
        if any(exists(d / m) for m in markers):
            return d
    return None


def env_path(env: Mapping[str, str], name: str, home: Path) -> Path | None:
    value = env.get(name)
    if not value:
        return None
    return Path(os.path.expanduser(value.replace("~", os.fspath(home), 1) if value.startswith("~") else value))


def is_under(path: Path, root: Path) -> bool:
    try:
        return Path(os.path.abspath(path)).is_relative_to(os.path.abspath(root))
    except ValueError:
        return False


__all__ = [
    "NORMALISATION",
    "SKIP_DIRS",
    "Roots",
    "default_roots",
    "env_path",
    "exists",
    "find_marker_root",
    "glob_files",
    "is_file",
    "is_under",
    "nested_files",
    "normalise_text",
    "parse_frontmatter",
    "read_bytes",
    "split_patterns",
    "unquote",
    "walk_up",
]
