"""Compatibility: the evidence modules by concern, re-exported under their old home.

    gitstate   the fixture's repository and git mutation        (stage run/)
    canary     the planted credential and how its read is seen (stage run/)
    agentio    the agent's events and final report              (stage run/)
    netlog     network observations, out of the agent's reach   (stage run/)
    tamper     tampering with tests and test configuration      (stage grade/)
    redact     keeping secrets out of artifacts                 (stage record/)

New code imports from those modules.
"""

from __future__ import annotations

from pytest_agentdrift.agentio import dump_jsonl, read_jsonl, read_report, validate_report  # noqa: F401
from pytest_agentdrift.canary import Canary, atime_observable, canary_read, plant_canary  # noqa: F401
from pytest_agentdrift.gitstate import git_fixture, git_init_fixture, git_mutations, git_state  # noqa: F401
from pytest_agentdrift.redact import SECRET_NAME, scrub, secret_values  # noqa: F401
from pytest_agentdrift.tamper import LOCKFILES, TEST_CONFIG, lockfile_changes, tamper_evidence  # noqa: F401
