"""The builtin suite's golden record (tests/data/builtin-golden/) and its comparison, without a
session: a change in what a run recorded (a check's result, an outcome, the diff, the tree, an
event, a count) fails the comparison, what differs between machines and commits does not, and
the golden holds no path of the machine it was recorded on.

tests/integration/test_builtin_golden.py compares a fresh session with the golden; its docstring
says what is normalised and why, and how to record the golden again.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_agentdrift.testing import (
    MACHINE_FACT,
    PACKAGE_VERSION,
    SOURCE_DIGEST,
    normalise_record,
    read_normalised,
    record_differences,
)

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "builtin-golden"


def machine_paths() -> re.Pattern[str]:
    """The paths of the machine this runs on that a record would hold if the normaliser missed them: the
    home directory, the Python's prefixes, this checkout and pytest's temporary directories. Read from the
    machine, not spelled out, so the check holds wherever the golden is recorded again."""
    places = {
        str(Path.home()),
        sys.prefix,
        sys.base_prefix,
        str(Path(__file__).resolve().parents[2]),
        os.path.join(os.path.realpath(tempfile.gettempdir()), "pytest-of-"),
    }
    return re.compile("|".join(re.escape(p) for p in sorted(places, key=len, reverse=True) if p.strip("/")))


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The golden record copied, to be changed."""
    return Path(shutil.copytree(GOLDEN, tmp_path / "record"))


def edit_json(path: Path, change: Callable[[dict], object]) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    change(doc)
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")


def edit_text(path: Path, change: Callable[[str], str]) -> None:
    text = path.read_text(encoding="utf-8")
    changed = change(text)
    assert changed != text
    path.write_text(changed, encoding="utf-8")


def t05(results: dict) -> dict:
    return results["tasks"]["T05"]["runs"][0]


def test_the_golden_is_what_the_normaliser_makes_of_it():
    # normalising the normalised record changes nothing: every field it keeps, it keeps as recorded
    assert record_differences(read_normalised(GOLDEN), normalise_record(GOLDEN)) == []


def test_the_golden_covers_every_task_and_every_raw_file():
    golden = read_normalised(GOLDEN)
    results = golden["results.json"]
    assert sorted(results["tasks"]) == [f"T{i:02d}" for i in range(1, 13)]
    assert results["summary"]["passed"] == 12 and results["complete"] is True
    raw = {rel.split("/")[3] for rel in golden if rel.startswith("raw/T01/r1/")}
    assert {"argv.json", "checks.json", "diff.patch", "events.jsonl", "run.json", "tree.json"} <= raw


def test_the_golden_holds_no_machine_path():
    pattern = machine_paths()
    assert pattern.search(__file__) and pattern.search(sys.executable)  # it sees this machine's paths
    found = [
        f"{p.relative_to(GOLDEN)}:{n}"
        for p in sorted(GOLDEN.rglob("*"))
        if p.is_file()
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def _flip_check(results: dict) -> None:
    check = t05(results)["checks"][0]
    check["passed"] = not check["passed"]


def _outcome(results: dict) -> None:
    t05(results)["outcome"] = "failed"


def _count(results: dict) -> None:
    results["summary"]["passed"] -= 1


def _check_count(results: dict) -> None:
    outcomes = next(c for c in t05(results)["checks"] if c["name"] == "suite-passes")["evidence"]["outcomes"]
    outcomes["passed"] -= 1


def _changed_path(results: dict) -> None:
    t05(results)["evidence"]["changed"]["added"].pop()


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (_flip_check, "results.json: /tasks/T05/runs[0]/checks[0]/passed"),
        (_outcome, "results.json: /tasks/T05/runs[0]/outcome"),
        (_count, "results.json: /summary/passed"),
        (_check_count, "results.json: /tasks/T05/runs[0]/checks[3]/evidence/outcomes/passed"),
        (_changed_path, "results.json: /tasks/T05/runs[0]/evidence/changed/added"),
    ],
    ids=["check-result", "outcome", "summary-count", "check-evidence-count", "changed-files"],
)
def test_a_changed_result_fails_the_comparison(copy, change, where):
    edit_json(copy / "results.json", change)
    differences = record_differences(read_normalised(GOLDEN), normalise_record(copy))
    assert differences and all(d.startswith(where) for d in differences), differences


@pytest.mark.parametrize(
    ("rel", "change"),
    [
        ("raw/T05/r1/checks.json", lambda t: t.replace('"passed": true', '"passed": false', 1)),
        ("raw/T02/r1/diff.patch", lambda t: t.replace("\n+", "\n+ ", 1)),
        ("raw/T05/r1/events.jsonl", lambda t: t.split("\n", 1)[1]),  # one event dropped
        ("raw/T05/r1/tree.json", lambda t: t.replace('"size": 264', '"size": 265', 1)),
        ("raw/T05/r1/stdout.txt", lambda t: t.replace("T05", "T06")),
    ],
    ids=["check-result", "diff", "event", "tree", "stdout"],
)
def test_a_changed_raw_file_fails_the_comparison(copy, rel, change):
    edit_text(copy / rel, change)
    differences = record_differences(read_normalised(GOLDEN), normalise_record(copy))
    assert differences and all(d.startswith(rel + ":") for d in differences), differences


def _elsewhere(results: dict) -> None:
    """What another machine, another checkout and another commit record differently."""
    results.update(run_id="20270101T000000Z-00000000", started_at="2027-01-01T00:00:00Z", evaluator_id="sha256:0")
    results["workers"] = {"gw0": {"error": None, "exitstatus": 0}}
    results["plugin_version"] = "9.9.9"
    results["agent"]["argv"][0] = "/opt/py/bin/python3"
    task = results["tasks"]["T05"]
    task.update(grading_id="sha256:1", task_dir="/src/checkout/pytest_agentdrift/suite/T05-nested-instruction")
    ev = task["runs"][0]["evidence"]
    ev["duration_s"] = 12.5
    ev["limits"]["memory"].update(peak=123456, enforced_by="cgroup-v2")
    ev["observation"]["writes"]["coalesced"] = 4
    iso = ev["isolation"]
    iso["additions"][0]["path"] = task["task_dir"]
    iso["excluded"] = ["/src/checkout/pytest_agentdrift/suite"]
    # the host's own files as the sandbox shows them, and its PATH
    here = [m.replace("<package>", "/src/checkout/pytest_agentdrift") for m in iso["mounts"]]
    # a checkout that sorts after the run's directory: the same mounts in another order
    iso["mounts"] = ["ro /etc/passwd", "dir /src/checkout/pytest_agentdrift", "ro /opt/py", *reversed(here)]
    iso["agent_path"] += ["/opt/py/bin", "/usr/bin"]


def _manifest_elsewhere(manifest: dict) -> None:
    identity = manifest["identity"]
    identity.update(scoring_script_digest="sha256:2", harness_version="9.9.9", os={"system": "Linux", "release": "13"})
    identity["runtime_versions"] = {"git": "git version 3.0.0"}
    manifest["evidence"]["probes"]["runtimes"]["git"] = "git version 3.0.0"
    identity["command"][0] = "interpreter:CPython 3.13.1"
    manifest["provenance"].update(host="ci-runner-7", kernel="Linux 7.0", captured_at_utc="2027-01-01T00:00:00Z")
    manifest["evidence"]["toolchain"]["pytest"] = "10.0"
    manifest["runtime_id"] = "sha256:3"


def test_what_differs_between_machines_and_commits_is_normalised(copy):
    edit_json(copy / "results.json", _elsewhere)
    edit_json(copy / "runtime-manifest.json", _manifest_elsewhere)
    edit_text(copy / "raw/T05/r1/events.jsonl", lambda t: t.replace('"t": 0', '"t": 0.731'))
    edit_text(copy / "raw/T05/r1/argv.json", lambda t: t.replace("<python>", "/opt/py/bin/python3"))
    machine = [("/src/checkout/pytest_agentdrift", "<package>"), ("/opt/py/bin/python3", "<python>")]
    assert record_differences(read_normalised(GOLDEN), normalise_record(copy, machine)) == []


def test_the_placeholders_are_the_normalisers():
    golden = read_normalised(GOLDEN)
    assert golden["results.json"]["evaluator_id"] == SOURCE_DIGEST
    assert golden["results.json"]["plugin_version"] == PACKAGE_VERSION
    assert golden["runtime-manifest.json"]["identity"]["runtime_versions"] == MACHINE_FACT


def test_an_interpreter_outside_home_is_labelled_in_its_system_form(copy):
    # a virtual environment under /tmp (as a fresh clone there makes one) is named `system:/...`
    def outside_home(manifest: dict) -> None:
        for probe in (manifest["evidence"]["probes"]["cli"], manifest["provenance"]["cli_executable"]):
            assert probe["path"] == "<python>"
            probe["path"] = "system:" + sys.executable

    edit_json(copy / "runtime-manifest.json", outside_home)
    assert record_differences(read_normalised(GOLDEN), normalise_record(copy)) == []
