"""Exceptions and exit codes shared by the plugin and the CLI.

Every error a user can cause carries the file it is about and one sentence
saying what is wrong; the plugin turns it into a clean usage error, never a
traceback.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

# The exit codes live in vocabulary.py; re-exported here (__all__), where callers have always found them.
from pytest_agentdrift.vocabulary import (
    EXIT_COLLECTION_ERROR,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
)


class AgentDriftError(Exception):
    """A problem with user input or the environment, reported as one line."""

    exit_code = EXIT_USAGE

    def __init__(self, problem: str, path: str | os.PathLike[str] | None = None):
        self.problem = problem
        self.path = None if path is None else os.fspath(path)
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return f"{self.path}: {self.problem}" if self.path else self.problem


class TaskError(AgentDriftError):
    """A task directory is malformed (collection error naming the file)."""


class RecordError(AgentDriftError):
    """A recorded run cannot be read or written."""


class PoolRefused(AgentDriftError):
    """A directory of records given as the baseline of which no record can be pooled (exit 6, refused):
    ``left_out`` says, record by record, why."""

    exit_code = EXIT_REFUSED

    def __init__(self, problem: str, path: str | os.PathLike[str] | None, left_out: Sequence[Mapping[str, object]]):
        self.left_out = left_out
        super().__init__(problem, path)


__all__ = [
    "EXIT_COLLECTION_ERROR",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "AgentDriftError",
    "PoolRefused",
    "RecordError",
    "TaskError",
]
