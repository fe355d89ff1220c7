"""Exceptions and exit codes shared by the plugin and the CLI.

Every error a user can cause carries the file it is about and one sentence
saying what is wrong; the plugin turns it into a clean usage error, never a
traceback.
"""

from __future__ import annotations

import os

EXIT_OK = 0
EXIT_FAILED = 1  # a check failed or the gate did not pass
EXIT_USAGE = 4  # usage or operational error (bad input, unreadable baseline, I/O)
EXIT_REFUSED = 6  # refused: runs are not comparable


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


class NotComparable(AgentDriftError):
    """Two runs differ in identity fields; comparing them is refused."""

    exit_code = EXIT_REFUSED
