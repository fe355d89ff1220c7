"""A fresh session of the builtin suite with the reference agent records what the golden holds.

tests/data/builtin-golden/ is the record of `--agent reference --agent-suite builtin` (all twelve
tasks, one repetition, under xdist: tests/conftest.py's builtin_records, which the builtin suite's
and the report's tests share, so this test starts no session of its own), normalised by
pytest_agentdrift.testing.normalise_record. A change that only moves code between modules must
leave it as it is; a change to what a session records (an outcome, a check, a diff, an event, a
count, a field) shows here as the files and JSON paths that differ.

Compared: results.json, runtime-manifest.json, instruction-bundle.json and every file of every
run's raw directory (argv, checks, diff, events, the agent's report, the run's payload, stdout,
stderr, the final tree). Not compared: report.md and report.html (renderings, held byte for byte by
tests/unit/test_report_golden.py), source-manifest.json (its digest is the manifest's source_id,
which is compared), blobs/ (named by tree.json's sha256) and results.json.sha256 (a digest of
results.json's bytes, times and all).

What is normalised, and why (everything else is compared as recorded):

* run ids, start and end times, the runtime id and the workers (the record's provenance), each
  run's duration, memory, process, disk and file peaks, and the write watcher's counters
  (normalise_results: they depend on timing, as the xdist equivalence test already holds);
* the time (`t`) of each event in events.jsonl: seconds since the agent started; the events
  themselves, their order and their number are compared;
* the machine's paths: this checkout's package directory (`<package>`), the Python running the
  harness (`<python>`, `<python-prefix>`, also in `~/` form), the home directory and the record's
  own directory;
* the host's file system as the sandbox showed it (which /etc entries and system directories
  exist, the Python installation, the package's own files) and the host's PATH: only the
  sandbox's own mounts (dev, proc, /dev/shm, the run, the observers, the credential decoy, the
  task directory, the final remount) and PATH entries (the run's toolchain) are kept, the mounts
  ordered by their labelled places (the sandbox orders them by host path, so a checkout under
  /tmp puts the task directory before the run's and one elsewhere after it);
* which cgroup version enforced a limit (`cgroup-v<N>`): the kernel's;
* digests of the package's own source (evaluator_id, each task's grading_id,
  scoring_script_digest) and its version (plugin_version, harness_version): they change with every
  edit to the package;
* the machine's facts in the runtime manifest: tool versions, the interpreter's version and
  digest, OS, environment allow-list values, container image, host, kernel, operator, region,
  capture time.

A record made where bubblewrap cannot isolate, or where the harness has no memory and pids
cgroups to enforce limits with, is another record (its isolation, mounts and limits say so): the
test is skipped there, on probes of the machine (never on what the record says: a change that
lost the isolation must fail here, not skip). To record the golden again after a deliberate change, run

    AGENTDRIFT_REGENERATE_GOLDEN=1 python -m pytest -p no:randomly tests/integration/test_builtin_golden.py

(the test then writes tests/data/builtin-golden/ and is skipped, saying so) and read the diff
before committing it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hostile_helpers import needs_bwrap

from pytest_agentdrift.run.limits import layout
from pytest_agentdrift.testing import normalise_record, read_normalised, record_differences, write_normalised

#: the cgroup controllers the golden's runs were limited with
CONTROLLERS = {"memory", "pids"}
pytestmark = [
    pytest.mark.slow,  # reads the builtin suite's shared recording (two sessions when run alone)
    needs_bwrap(),
    pytest.mark.skipif(
        not CONTROLLERS <= set(layout().controllers), reason="no memory and pids cgroups for the harness here"
    ),
]

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "builtin-golden"
#: set (to anything but empty) to record the golden again from this session
REGENERATE = "AGENTDRIFT_REGENERATE_GOLDEN"


def test_a_fresh_builtin_session_records_what_the_golden_holds(builtin_records):
    proc, record = builtin_records["base"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    fresh = normalise_record(record)
    if os.environ.get(REGENERATE):
        write_normalised(fresh, GOLDEN)
        pytest.skip(f"{REGENERATE} is set: {GOLDEN} recorded again; read its diff before committing it")
    differences = record_differences(read_normalised(GOLDEN), fresh)
    assert not differences, (
        f"the session recorded something else than {GOLDEN.name} holds (expected != recorded); "
        f"after a deliberate change record it again with {REGENERATE}=1 (see this module's docstring):\n"
        + "\n".join(differences[:60])
    )
