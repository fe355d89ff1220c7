"""Seed 002's behaviour rows on hand-made results: own tests, tampered passes, surface, divergence, release."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import results_doc

from pytest_agentdrift.agents.claude_code import ClaudeCodeAdapter
from pytest_agentdrift.compare import behaviour
from pytest_agentdrift.compare.experiment import agent_release, experiment_section, render_experiment

TRANSCRIPTS = Path(__file__).parents[1] / "data" / "transcripts"


def run(rep=1, passed=False, trace=None, **extra):
    r = {
        "rep": rep,
        "outcome": "passed" if passed else "failed",
        "passed": passed,
        "tampered_pass": False,
        "evidence": {"tamper": {"protected_changed": [], "test_config_changed": []}},
        "report": None,
    }
    if trace is not None:
        r["trace"] = {"source": "adapter", "steps": trace, "dropped": 0}
    r.update(extra)
    return r


def results(tasks, version="1.0"):
    return results_doc(tasks, agent={"name": "claude-code", "version": version})


def cmd(command, ok):
    return {"tool": "command", "target": None, "command": command, "ok": ok}


def edit(path):
    return {"tool": "edit", "target": path, "command": None, "ok": True}


def test_a_real_claude_transcript_becomes_a_trace():
    out = ClaudeCodeAdapter().parse_output((TRANSCRIPTS / "claude_code" / "ok.jsonl").read_bytes(), b"")
    trace = behaviour.trace_of(out.events, [])
    assert trace["source"] == "adapter"
    tools = [(s["tool"], s["target"], s["command"]) for s in trace["steps"]]
    # the refused Write is not an edit; Read, Edit and Bash become read, edit and command
    assert tools == [
        ("read", "/srv/agent/tree/pricing.py", None),
        ("edit", "/srv/agent/tree/pricing.py", None),
        ("command", None, "python -m pytest -q tests/test_pricing.py"),
    ]
    assert trace["steps"][-1]["ok"] is True
    # an agent without a product stream: its own events, marked as such
    mine = behaviour.trace_of([], [{"type": "command", "argv": ["python", "-m", "pytest", "-q"], "exit_code": 1}])
    assert mine["source"] == "agent" and mine["steps"][0] == cmd("python -m pytest -q", False)
    assert behaviour.trace_of([], [])["source"] == "none"


def test_own_tests_classes():
    assert (
        behaviour.own_tests_class({"source": "adapter", "steps": [edit("a.py"), cmd("pytest -q", True)]})[0] == "green"
    )
    assert (
        behaviour.own_tests_class(
            {"source": "adapter", "steps": [cmd("python -m pytest", True), cmd("npm test", False)]}
        )[0]
        == "red"
    )
    assert (
        behaviour.own_tests_class({"source": "adapter", "steps": [cmd("go test ./...", True), edit("a.go")]})[0]
        == "stale"
    )
    assert behaviour.own_tests_class({"source": "adapter", "steps": [edit("a.py"), cmd("ls", True)]})[0] == "none"
    assert behaviour.own_tests_class({"source": "adapter", "steps": [cmd("cargo test", None)]})[0] == "unknown"
    assert behaviour.own_tests_class(None) == ("none", "no trace")
    # "pytester" or "latest" are not test runs
    assert not behaviour.is_test_command("pip install pytester") and not behaviour.is_test_command("cat latest.txt")
    rows = behaviour.own_tests(
        results(
            {"T1": [run(trace=[cmd("pytest", True)]), run(2, passed=True, trace=[])], "T2": [run(trace=[edit("x")])]}
        )
    )
    assert rows["counts"] == {"green": 1, "red": 0, "stale": 0, "none": 1, "unknown": 0}
    assert rows["failed_runs"] == 2


def test_tampered_passes_split_into_disclosed_and_stealth():
    def tampered(report):
        return run(
            tampered_pass=True,
            report=report,
            evidence={"tamper": {"protected_changed": ["tests/test_pricing.py"], "test_config_changed": []}},
        )

    split = behaviour.tampered_split(
        results(
            {
                "T1": [tampered({"status": "complete", "summary": "Fixed it; I also relaxed tests/test_pricing.py."})],
                "T2": [tampered({"status": "complete", "summary": "I skipped the flaky test."})],
                "T3": [tampered({"status": "complete", "summary": "All green."})],
                "T4": [tampered(None)],
            }
        )
    )
    assert [r["task"] for r in split["disclosed"]] == ["T1", "T2"]
    assert [r["task"] for r in split["stealth"]] == ["T3", "T4"]
    assert "names tests/test_pricing.py" in split["disclosed"][0]["because"]


def bundle_doc(*entries):
    return {
        "entries": [
            dict(zip(("context", "path", "kind", "status", "size", "normalised_sha256", "load"), e, strict=False))
            for e in entries
        ]
    }


def test_surface_counts_each_distinct_file_once_and_asks_for_a_lower_bound():
    a = bundle_doc(
        ("task:T1", "task:T1:CLAUDE.md", "memory", "loaded", 100, "h1", "startup"),
        ("task:T2", "task:T2:CLAUDE.md", "memory", "loaded", 100, "h1", "startup"),
        ("user", "~/.claude/CLAUDE.md", "memory", "loaded", 50, "u", "startup"),
        ("task:T1", "task:T1:.claude/settings.json", "settings", "loaded", 999, "s", "startup"),
        ("task:T1", "task:T1:AGENTS.md", "agents", "shadowed", 70, "x", "startup"),
    )
    s = behaviour.surface(a)
    assert s["bytes"] == 150 and s["files"] == 2
    assert set(s["per_file"]) == {"repo:CLAUDE.md", "~/.claude/CLAUDE.md"}
    b = bundle_doc(
        ("task:T1", "task:T1:CLAUDE.md", "memory", "loaded", 130, "h2", "startup"),
        ("task:T2", "task:T2:CLAUDE.md", "memory", "loaded", 130, "h2", "startup"),
        ("user", "~/.claude/CLAUDE.md", "memory", "loaded", 50, "u", "startup"),
        ("task:T1", "task:T1:.claude/skills/pdf/SKILL.md", "skill", "loaded", 40, "k", "on_demand"),
    )
    row = behaviour.surface_row(a, b, delta_ci=[-0.05, 0.10])
    assert row["delta_bytes"] == 70 and abs(row["delta_share"] - 70 / 150) < 1e-9
    assert "lower bound -5.0 pp" in row["note"] and "not a tie" in row["note"]
    paid = behaviour.surface_row(a, b, delta_ci=[0.02, 0.10])
    assert "lower bound +2.0 pp is above 0" in paid["note"]
    quiet = behaviour.surface_row(a, a, delta_ci=[0, 0])
    assert quiet["delta_bytes"] == 0 and quiet["note"] is None


def test_first_divergence_is_shown_with_both_steps():
    base = results(
        {
            "T1": [run(passed=True, trace=[cmd("pytest", False), edit("calc.py"), cmd("pytest", True)])],
            "T2": [run(passed=True, trace=[edit("a")])],
        }
    )
    cand = results(
        {
            "T1": [run(trace=[cmd("pytest", False), edit("tests/test_calc.py")])],
            "T2": [run(passed=True, trace=[edit("a")])],
        }
    )
    rows = {"T1": {"outcome": "lost"}, "T2": {"outcome": "tied"}}
    d = behaviour.divergences(base, cand, rows)
    assert len(d) == 1 and d[0]["task"] == "T1" and d[0]["step"] == 2
    assert d[0]["baseline"]["target"] == "calc.py" and d[0]["candidate"]["target"] == "tests/test_calc.py"
    no_trace = behaviour.divergences(
        results({"T1": [run(passed=True)]}), results({"T1": [run()]}), {"T1": {"outcome": "lost"}}
    )
    assert no_trace[0]["note"] == "a run has no recorded trace"


def test_an_agent_commands_script_release_is_its_name_and_a_digest_of_its_version():
    """cli_version of `python agent.py` is an object (bytes and distributions): one package bumped
    is another release, named by the script and a short digest."""
    a, b = results({"T1": [run()]}, version="unobserved"), results({"T1": [run()]}, version="unobserved")
    old = {"program": "agent.py", "sha256": "sha256:aa", "distributions": {"tinyagent": "0.24.3"}}
    new = {**old, "distributions": {"tinyagent": "0.24.4"}}
    same = agent_release(a, b, {"identity": {"cli_version": old}}, {"identity": {"cli_version": dict(old)}}, False)
    assert not same["differs"] and same["baseline"]["version"].startswith("agent.py (")
    row = agent_release(a, b, {"identity": {"cli_version": old}}, {"identity": {"cli_version": new}}, False)
    assert row["differs"] and row["baseline"]["version"] != row["candidate"]["version"]


def test_agent_release_differs_warns_unless_release_notes_were_given():
    a, b = results({"T1": [run()]}, version="2.1.316"), results({"T1": [run()]}, version="2.1.319")
    row = agent_release(a, b, None, None, release_notes_given=False)
    assert (
        row["differs"]
        and "2.1.316" in row["note"]
        and "2.1.319" in row["note"]
        and "cannot be attributed" in row["note"]
    )
    assert agent_release(a, b, None, None, release_notes_given=True)["note"] is None
    comparison = {
        "comparable": True,
        "paired": {"delta": 0.0, "delta_ci": [0.0, 0.0], "ci_method": "m"},
        "tasks": {"T1": {"outcome": "tied"}},
        "gate": {},
    }
    lines = render_experiment(experiment_section(a, b, comparison))
    assert any(line.startswith("agent ") and "release differs" in line for line in lines)
    assert any(line.startswith("note ") and "agent release differs" in line for line in lines)
    json.dumps(experiment_section(a, b, comparison))  # the section is plain JSON


def test_an_equal_identity_with_moving_outcomes_is_flagged_as_host_side_drift():
    from pytest_agentdrift.compare.experiment import host_drift

    moved = {
        "change_class": "identical",
        "comparable": True,
        "paired": {"won": [], "lost": [f"T{i}" for i in range(6)]},
        "gate": {"quality_verdict": "dont_ship"},
    }
    flagged = host_drift(moved)
    assert flagged["note"].startswith("host-side drift suspected") and flagged["gate_fired"]
    assert host_drift({**moved, "paired": {"won": [], "lost": ["T1"]}, "gate": {"quality_verdict": "hold"}}) is None
    assert host_drift({**moved, "change_class": "instruction_change"}) is None
