"""Results of grading commands on untouched task fixtures, kept between sessions. No pytest.

A `pytest`/`command` check first runs on a fresh copy of the untouched
fixture (which tests exist, whether they fail before the fix) and then on
the agent's tree. The first half depends only on things the harness owns:
the task directory's bytes, the grading code, the interpreter, the
isolation and the limits. So it is keyed by all of them and kept on disk,
and the next session (or the next xdist worker, or `agentdrift regrade`)
reads it instead of starting a sandbox.

Only clean results are kept: a timeout, a missing or forged report, a
launch error or a broken limit is the machine's state at that moment, not a
fact about the fixture, so it is never stored. The store lives in the
harness's own directories (pytest's cache directory by default), which the
allow-list sandbox never shows an agent; an entry that cannot be read or
parsed is treated as absent, and entries are written atomically, so two
workers writing one key leave one whole file.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pytest_agentdrift.canonical import digest

#: the subdirectory of pytest's cache directory used when no other directory is given
PYTEST_CACHE_SUBDIR = "agentdrift-grading"
#: an entry larger than this is never written (the outcomes of a very large suite still fit)
MAX_ENTRY_BYTES = 8 << 20


def named_directory(chosen: str, base: Path) -> Path | None:
    """The directory a grading-cache option names (relative to base), or None for 'none': the
    results are then kept for the process only."""
    return None if chosen.lower() == "none" else base / chosen


@functools.cache
def _harness_code() -> str:
    from pytest_agentdrift.grade.evaluator import code_digest

    return code_digest()


def cache_key(task_digest: str, check_key: str, context: dict[str, Any]) -> str:
    """Everything the untouched-fixture result depends on, as one digest."""
    return digest(
        {
            "task": task_digest,
            "check": check_key,
            "harness": _harness_code(),
            "python": [sys.version, sys.executable],
            **context,
        }
    )


class FixtureResults:
    """A directory of {key}.json entries; `None` as the directory keeps nothing."""

    def __init__(self, directory: Path | None):
        self.directory = directory
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> dict[str, Any] | None:
        if self.directory is None:
            return None
        try:
            with open(self.directory / f"{key}.json", "rb") as fh:
                data = fh.read(MAX_ENTRY_BYTES + 1)
            value = json.loads(data) if len(data) <= MAX_ENTRY_BYTES else None
        except (OSError, ValueError):
            value = None
        if isinstance(value, dict):
            self.hits += 1
            return value
        self.misses += 1
        return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        if self.directory is None:
            return
        data = json.dumps(value, sort_keys=True).encode()
        if len(data) > MAX_ENTRY_BYTES:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, self.directory / f"{key}.json")
        except OSError:
            return  # a cache that cannot be written only costs time


def clean_pytest_result(data: dict[str, Any]) -> bool:
    """A grading pytest's result that says something about the fixture, not about the moment."""
    res = data.get("exec")
    return bool(
        res is not None
        and not res.timed_out
        and res.exit_code is not None
        and not data.get("missing_report")
        and not data.get("channel_problems")
    )


def encode_pytest_result(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "exec": asdict(data["exec"])}


def encode_command_result(result: Any, problems: list[str]) -> dict[str, Any]:
    return {"exec": asdict(result), "problems": list(problems)}
