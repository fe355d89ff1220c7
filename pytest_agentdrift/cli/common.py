"""What every agentdrift subcommand shares."""

from __future__ import annotations

import os
import sys


def out(line: str = "") -> None:
    """One line of the command's answer, flushed (a CI log interleaves it with the sessions' output)."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        # `agentdrift show RUN --json | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
