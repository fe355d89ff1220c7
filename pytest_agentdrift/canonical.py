"""Strict parsing, canonical JSON and hashing: one place for all of it.

* JSON is parsed with duplicate keys rejected (a duplicate silently keeps the
  last value in the stdlib, which would let two different files hash alike).
* Canonical bytes are RFC 8785 (JCS) via `rfc8785`: sorted keys, no
  whitespace, explicit null kept distinct from an absent key, array order kept.
* File hashing streams in 1 MiB blocks with `hashlib.file_digest`, which runs
  at the sha256 speed of one core.
* Files an agent may have planted are opened by descriptor (never through a
  link, never blocking on a FIFO); JSON-lines streams are read leniently, what
  does not parse counted, never raised.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from pathlib import Path
from typing import Any, Iterable, Sequence

from pytest_agentdrift.errors import AgentDriftError

_BLOCK = 1 << 20


class DuplicateKeyError(ValueError):
    def __init__(self, key: str):
        self.key = key
        super().__init__(f"duplicate key {key!r}")


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(key)
        out[key] = value
    return out


def loads_json_strict(text: str, **hooks: Any) -> Any:
    """Parse JSON, raising DuplicateKeyError / json.JSONDecodeError (`hooks`: json.loads's parse_* hooks)."""
    return json.loads(text, object_pairs_hook=_reject_duplicates, **hooks)


def json_lines_objects(text: str) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of a JSON-lines text (json.loads per line, as written), and how many of its
    non-blank lines were something else: readers of a stream that may have been cut or tampered with
    keep what parses and count the rest."""
    objects: list[dict[str, Any]] = []
    others = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            others += 1
            continue
        if isinstance(obj, dict):
            objects.append(obj)
        else:
            others += 1
    return objects, others


def read_text_utf8(path: Path, error: type[AgentDriftError] = AgentDriftError) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise error("file is missing", path) from None
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", path) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"not valid UTF-8 (byte {exc.start})", path) from None


def load_json_file(path: Path, error: type[AgentDriftError] = AgentDriftError) -> Any:
    """Read a JSON file strictly; any problem is `error(problem, path)`."""
    text = read_text_utf8(path, error)
    try:
        return loads_json_strict(text)
    except DuplicateKeyError as exc:
        raise error(f"invalid JSON: duplicate key {exc.key!r}", path) from None
    except json.JSONDecodeError as exc:
        raise error(f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", path) from None


def load_toml_file(path: Path, error: type[AgentDriftError] = AgentDriftError) -> dict[str, Any]:
    """Read a TOML file (tomllib already rejects duplicate keys)."""
    text = read_text_utf8(path, error)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"invalid TOML: {exc}", path) from None


def canonical_bytes(obj: Any) -> bytes:
    """RFC 8785 canonical JSON bytes of a JSON-compatible value."""
    import rfc8785

    return rfc8785.dumps(obj)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(obj: Any) -> str:
    """`sha256:<hex>` of the canonical JSON of obj: the id of a value."""
    return "sha256:" + sha256_hex(canonical_bytes(obj))


def hash_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file's bytes, streamed."""
    with open(path, "rb", buffering=0) as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def open_regular(path: str | os.PathLike[str]) -> int:
    """Open a file an agent may have planted: never through a symlink, never
    blocking on a FIFO, and only if it is a regular file (else OSError)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    import stat

    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{os.fspath(path)}: not a regular file")
    return fd


def close_fds(fds: Iterable[int]) -> None:
    """Close each descriptor; one already closed (or never valid) is no error: callers close on
    every path, some of them twice."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """At most `limit` bytes of an untrusted regular file (OSError otherwise)."""
    with os.fdopen(open_regular(path), "rb") as fh:
        return fh.read(limit)


def dumps_pretty(obj: object, lead: Sequence[str] = ()) -> str:
    """Stable, human-readable JSON for artifacts (sorted keys, 2-space indent); the top-level keys
    named in ``lead`` come first, in that order (a verdict a reader must see before the evidence)."""
    if lead and isinstance(obj, dict):
        return json.dumps(leading(obj, lead), indent=2, ensure_ascii=False) + "\n"
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def leading(obj: dict[str, Any], lead: Sequence[str]) -> dict[str, Any]:
    """A copy of ``obj`` with keys sorted at every level, except that ``lead``'s keys open it."""
    ordered = json.loads(json.dumps(obj, sort_keys=True, ensure_ascii=False))
    return {**{k: ordered[k] for k in lead if k in ordered}, **{k: v for k, v in ordered.items() if k not in lead}}
