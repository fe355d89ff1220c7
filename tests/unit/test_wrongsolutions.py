"""wrong.toml, the judge of a wrong solution's run, and the reference agent playing one."""

import json
import sys

import pytest

from pytest_agentdrift.agents import reference
from pytest_agentdrift.agents.base import ReferenceAdapter, get_adapter
from pytest_agentdrift.agents.reference import apply, check_play
from pytest_agentdrift.errors import AgentDriftError, TaskError
from pytest_agentdrift.tasks.load import load_task
from pytest_agentdrift.tasks.wrongsolutions import judge, wrong_solutions
from pytest_agentdrift.testing import make_task


@pytest.fixture
def spec(tmp_path):
    d = make_task(
        tmp_path / "tasks",
        "WJ1",
        checks=[
            {"name": "a", "kind": "unchanged", "layer": "scope", "critical": True},
            {"name": "b", "kind": "changed", "layer": "scope", "must_change": ["x"]},
        ],
    )
    (d / "test_fn.py").write_text(
        "import pytest\n\n\n@pytest.mark.critical\ndef test_crit(agent_run):\n    pass\n\n\ndef test_plain(agent_run):\n    pass\n"
    )
    return load_task(d)


def _wrong(spec, name, toml, **files):
    d = spec.path / "solution" / "wrong" / name
    d.mkdir(parents=True)
    (d / "wrong.toml").write_text(toml)
    (d / "report.json").write_text('{"status": "failed", "summary": "x"}')
    return d


def _result(passed=False, failed=(), critical=(), observed_writes=0, network_attempts=0, observation=None):
    return {
        "passed": passed,
        "failed_checks": list(failed),
        "critical_failed": list(critical),
        "evidence": {
            "writes_observed": observed_writes,
            "network_attempts": network_attempts,
            "observation": observation or {},
        },
    }


def test_loading_and_check_names_from_functions(spec):
    _wrong(
        spec,
        "w1",
        'description = "d"\nkind = "reward-hack"\nexpect = "critical"\nchecks = ["a", "test_crit"]\n'
        'needs = ["write-observation"]\n[[observed]]\ntype = "write"\npath = "x"\n',
    )
    (w,) = wrong_solutions(spec)
    assert (w.name, w.kind, w.expect, w.checks, w.needs) == (
        "wrong/w1",
        "reward-hack",
        "critical",
        ("a", "test_crit"),
        ("write-observation",),
    )
    assert w.observed == ({"type": "write", "path": "x"},)


@pytest.mark.parametrize(
    "toml, problem",
    [
        ('description = "d"\nkind = "oops"\nexpect = "fail"\n', "'kind' must be one of"),
        ('description = "d"\nkind = "mistake"\nexpect = "fail"\nneeds = ["telepathy"]\n', "'needs' must be a list of"),
        (
            'description = "d"\nkind = "mistake"\nexpect = "fail"\nobserved = [1]\n',
            "'observed' must be a list of event tables",
        ),
        ('description = "d"\nkind = "mistake"\nexpect = "fail"\nchecks = "a"\n', "'checks' must be a list"),
    ],
)
def test_malformed_wrong_toml(spec, toml, problem):
    d = _wrong(spec, "bad", toml)
    with pytest.raises(TaskError, match=problem) as err:
        wrong_solutions(spec)
    assert err.value.path == str(d / "wrong.toml")


def test_a_wrong_solution_without_wrong_toml(spec):
    (spec.path / "solution" / "wrong" / "bare").mkdir(parents=True)
    with pytest.raises(TaskError, match="needs wrong.toml"):
        wrong_solutions(spec)


def _w(spec, expect, checks=(), needs=()):
    toml = f'description = "d"\nkind = "mistake"\nexpect = "{expect}"\nchecks = {json.dumps(list(checks))}\nneeds = {json.dumps(list(needs))}\n'
    name = f"j{len(wrong_solutions(spec))}"
    _wrong(spec, name, toml)
    return next(w for w in wrong_solutions(spec) if w.name == f"wrong/{name}")


def test_judge(spec):
    crit = _w(spec, "critical", ["a"])
    assert judge(crit, _result(failed=["a"], critical=["a"]))[0] is True
    assert judge(crit, _result(failed=["a"]))[0] is False
    ok, why = judge(crit, _result(passed=True))
    assert ok is False and why.startswith("it passed; did not fail a; no check failed critically")
    plain = _w(spec, "fail", ["b"])
    assert judge(plain, _result(failed=["b"]))[0] is True
    ok, why = judge(plain, _result(failed=["a", "b"], critical=["a"]))
    assert ok is False and "failed critically (a), expected an ordinary failure" in why


def test_judge_leaves_undecided_what_needs_an_observation_that_saw_nothing(spec):
    w = _w(spec, "critical", ["a"], ["write-observation"])
    ok, why = judge(w, _result(passed=True))
    assert ok is None and why.startswith("not decided: needs write-observation")
    assert judge(w, _result(passed=True, observed_writes=2))[0] is False  # observed, and still passed: a real miss
    n = _w(spec, "critical", ["a"], ["network-observation"])
    assert judge(n, _result(passed=True))[0] is None


def test_judge_calls_a_miss_a_miss_when_the_observation_was_there(spec):
    """The run had a write observation that saw nothing, and the mistake passed: a real miss, not 'undecided'
    (the key the runner records is `writes_observed`, the mechanism is in `observation`)."""
    w = _w(spec, "critical", ["a"], ["write-observation"])
    watched = {"writes": {"mechanism": "inotify", "events": 0}, "network": {"mechanism": None}}
    ok, why = judge(w, _result(passed=True, observation=watched))
    assert ok is False and why.startswith("it passed")
    n = _w(spec, "critical", ["a"], ["network-observation"])
    assert judge(n, _result(passed=True, observation={"network": {"mechanism": "dns-stub+proxy"}}))[0] is False


@pytest.mark.parametrize("play", ["../x", "/abs", "wrong/../../x", "", "wrong//x", "wrong/./x", "a\\b"])
def test_check_play_refuses_paths_out_of_solution(play):
    with pytest.raises(ValueError, match="name a directory below solution/"):
        check_play(play)


def test_reference_play_preset_and_version(capsys):
    adapter = get_adapter("reference:wrong/give-up")
    assert isinstance(adapter, ReferenceAdapter) and adapter.name == "reference:wrong/give-up"
    assert adapter.argv_template()[-2:] == ["--play", "wrong/give-up"]
    argv = adapter.version_argv()
    # the reference agent's module, asked in-process (the sessions of tests/integration run it as a program)
    assert argv[:3] == [sys.executable, "-m", "pytest_agentdrift.agents.reference"]
    assert reference.main(argv[3:]) == 0
    assert capsys.readouterr().out.strip() == "reference-1.0.0+wrong/give-up"
    assert get_adapter("reference").name == "reference" and get_adapter("reference").play is None
    with pytest.raises(AgentDriftError, match="--agent reference:../x"):
        get_adapter("reference:../x")


def test_playing_a_solution_the_task_lacks_reports_blocked(spec, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTDRIFT_REPORT", str(tmp_path / "report.json"))
    monkeypatch.delenv("AGENTDRIFT_EVENTS", raising=False)
    assert apply(spec.path, "faithful", tmp_path, play="wrong/none") == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["status"] == "blocked" and "no solution 'wrong/none'" in report["summary"]


def test_actions_run_first_in_the_work_tree(spec, tmp_path, monkeypatch):
    sol = spec.path / "solution" / "wrong" / "acts"
    (sol / "files").mkdir(parents=True)
    (sol / "files" / "made.txt").write_text("from files\n")
    (sol / "actions.py").write_text(
        "from pathlib import Path\nPath('made.txt').write_text('from actions')\nPath('acted.txt').write_text('yes')\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.delenv("AGENTDRIFT_REPORT", raising=False)
    monkeypatch.delenv("AGENTDRIFT_EVENTS", raising=False)
    apply(spec.path, "faithful", work, play="wrong/acts")
    assert (work / "acted.txt").read_text() == "yes"
    assert (work / "made.txt").read_text() == "from files\n"  # the overlay is the final state
