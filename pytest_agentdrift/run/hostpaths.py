"""Paths as the host resolves them, shared by the mount plan and what it is built from: where a
path really lives, whether it lies inside another, and the home directories never shown whole. No pytest.
"""

from __future__ import annotations

import os


def resolved(p: str | os.PathLike[str]) -> str:
    """`p` made absolute, its links resolved."""
    return os.path.realpath(os.path.abspath(os.fspath(p)))


def within(path: str, top: str) -> bool:
    """path is top or lies below it (both absolute, normalised)."""
    return path == top or top == "/" or path.startswith(top.rstrip("/") + "/")


def is_home_or_above(path: str) -> bool:
    """`path` is the home directory, a directory above it, or ~/.local."""
    home = resolved(os.path.expanduser("~"))
    return within(home, path) or path == os.path.join(home, ".local")
