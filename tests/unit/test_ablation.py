"""The effect line, exposure, the item gate and the drop-it gate on hand-made arms."""

from __future__ import annotations

from helpers import results_doc

from pytest_agentdrift.compare import ablation as ab


def run(rep, passed, steps=None, outcome=None):
    r = {"rep": rep, "passed": passed, "tampered_pass": False, "outcome": outcome or ("passed" if passed else "failed")}
    if steps is not None:
        r["trace"] = {"source": "adapter", "steps": steps, "dropped": 0}
    return r


def arm(pattern: dict[str, list[bool]], steps=None):
    """{task: [passed per rep]} -> results; every run gets the same trace steps (None: no trace)."""
    return results_doc({t: [run(i + 1, p, steps) for i, p in enumerate(ps)] for t, ps in pattern.items()})


def read(path):
    return {"tool": "read", "target": path, "command": None, "ok": None}


REMOVE_RULE = ab.Item(ab.REMOVAL, ".claude/rules/clock.md", (("project", ".claude/rules/clock.md"),))


def bundle_with(entries_by_task):
    entries = []
    for tid, (load, apply_to) in entries_by_task.items():
        e = {
            "context": f"task:{tid}",
            "path": f"task:{tid}:.claude/rules/clock.md",
            "kind": "rules",
            "load": load,
            "status": "loaded",
        }
        if apply_to:
            e["apply_to"] = apply_to
        entries.append(e)
    return {"entries": entries}


def gate(base, cand, bundle=None, item=REMOVE_RULE, config=frozenset()):
    with_arm = base if item.kind == ab.REMOVAL else cand
    exposed = ab.exposure(with_arm, bundle, item, set(config))
    return ab.item_gate(item, base, cand, exposed)


def test_item_from_derivation():
    removal = ab.item_from_derivation({"without": ["CLAUDE.md", "~/.claude/CLAUDE.md"], "with": []})
    assert removal.kind == ab.REMOVAL and removal.paths == (("project", "CLAUDE.md"), ("user", ".claude/CLAUDE.md"))
    addition = ab.item_from_derivation(
        {"without": [], "with": ["plugin:./terse"], "added_files": ["project:.claude/skills/terse/SKILL.md"]}
    )
    assert addition.kind == ab.ADDITION and addition.paths == (("project", ".claude/skills/terse/SKILL.md"),)
    assert ab.item_from_derivation(None) is None
    assert ab.item_from_derivation({"without": ["a"], "with": ["b"]}) is None


def test_a_path_scoped_rule_fires_only_where_the_agent_touched_a_matching_file():
    base = arm({"T1": [True, True, True], "T2": [True, True, True]})
    base["tasks"]["T1"]["runs"] = [run(i + 1, True, [read("src/clock.py")]) for i in range(3)]
    base["tasks"]["T2"]["runs"] = [run(i + 1, True, [read("README.md")]) for i in range(3)]
    bundle = bundle_with({"T1": ("conditional", ["src/clock*.py"]), "T2": ("conditional", ["src/clock*.py"])})
    exposed = ab.exposure(base, bundle, REMOVE_RULE, set())
    assert exposed == {"T1": {"runs": 3, "fired": 3, "unknown": 0}, "T2": {"runs": 3, "fired": 0, "unknown": 0}}


def test_never_fired_is_unmeasured_and_no_trace_is_rerun():
    base = arm({"T1": [True, True, True]}, steps=[read("README.md")])
    cand = arm({"T1": [True, True, True]}, steps=[read("README.md")])
    g = gate(base, cand, bundle_with({"T1": ("conditional", ["src/*.py"])}))
    assert g["verdict"] == ab.UNMEASURED and g["S"] == 0 and g["fired_runs"] == 0 and g["with_runs"] == 3
    no_trace = gate(arm({"T1": [True, True, True]}), cand, bundle_with({"T1": ("conditional", ["src/*.py"])}))
    assert no_trace["verdict"] == ab.RERUN and no_trace["unknown_runs"] == 3


def startup_gate(base_pattern, cand_pattern):
    tasks = list(base_pattern)
    return gate(
        arm(base_pattern, steps=[]), arm(cand_pattern, steps=[]), bundle_with({t: ("startup", None) for t in tasks})
    )


def test_item_gate_verdicts_for_a_removal():
    # no loss and a good pass rate without it: accept the removal
    assert (
        startup_gate({"T1": [True] * 3, "T2": [True] * 3}, {"T1": [True] * 3, "T2": [True] * 3})["verdict"] == ab.ACCEPT
    )
    # the removal costs two runs
    g = startup_gate({"T1": [True] * 3, "T2": [True] * 3}, {"T1": [True, True, False], "T2": [True, True, False]})
    assert g["verdict"] == ab.REJECT and g["G"] == -2
    # one task broken by more than one run in three (2 of 3 lost on T1), though the net loss is one run elsewhere
    g = startup_gate({"T1": [True] * 3, "T2": [False] * 3}, {"T1": [True, False, False], "T2": [True, False, False]})
    assert g["verdict"] == ab.REJECT and g["D"] > 0.34
    # the removal wins two runs: accept even below 80%
    g = startup_gate({"T1": [False] * 3, "T2": [False] * 3}, {"T1": [True, False, False], "T2": [True, False, False]})
    assert g["verdict"] == ab.ACCEPT and g["G"] == 2
    # neither arm solves the exposed tasks
    assert startup_gate({"T1": [False] * 3}, {"T1": [False] * 3})["verdict"] == ab.UNCOVERED
    # passes under 80% without it and no two-run win: unmeasured (keep)
    g = startup_gate(
        {"T1": [True, False, False], "T2": [True, True, False]}, {"T1": [True, False, False], "T2": [True, True, False]}
    )
    assert g["verdict"] == ab.UNMEASURED and g["pass_rate_after"] == 0.5


def test_item_gate_for_an_addition_and_the_drop_it_gate():
    item = ab.Item(ab.ADDITION, "plugin:terse", (("project", ".claude/skills/terse/SKILL.md"),))
    skill = {
        "context": "task:T1",
        "path": "task:T1:.claude/skills/terse/SKILL.md",
        "kind": "skill",
        "load": "on_demand",
        "status": "loaded",
    }
    invoked = [{"tool": "Skill", "target": "terse", "command": None, "ok": True}]
    base = arm({"T1": [True, False, False]}, steps=[])
    cand = arm({"T1": [True, True, True]}, steps=invoked)
    g = ab.item_gate(item, base, cand, ab.exposure(cand, {"entries": [skill]}, item, set()))
    assert g["verdict"] == ab.KEEP and g["fired_runs"] == 3
    worse = arm({"T1": [False, False, False]}, steps=invoked)
    g = ab.item_gate(
        item, arm({"T1": [True, True, False]}, steps=[]), worse, ab.exposure(worse, {"entries": [skill]}, item, set())
    )
    assert g["verdict"] == ab.KILL
    undecided = arm({"T1": [True, False, False]}, steps=invoked)
    g = ab.item_gate(
        item,
        arm({"T1": [True, True, False]}, steps=[]),
        undecided,
        ab.exposure(undecided, {"entries": [skill]}, item, set()),
    )
    assert g["verdict"] == ab.RECHECK and g["recheck"] == {"tasks": ["T1"], "k": 6}
    comparison = {"comparable": True, "gate": {"quality_verdict": "hold", "blockers": [], "reason": "r"}}
    accept = startup_gate({"T1": [True] * 3}, {"T1": [True] * 3})
    assert ab.drop_it_gate(REMOVE_RULE, accept, comparison)["answer"] == ab.DROP_IT
    reject = startup_gate({"T1": [True] * 3, "T2": [True] * 3}, {"T1": [False] * 3, "T2": [True] * 3})
    assert ab.drop_it_gate(REMOVE_RULE, reject, comparison)["answer"] == ab.KEEP_IT
    blocked = {"comparable": True, "gate": {"quality_verdict": "dont_ship", "blockers": ["critical regression: T1 x"]}}
    assert ab.drop_it_gate(REMOVE_RULE, accept, blocked)["answer"] == ab.KEEP_IT
    assert ab.drop_it_gate(REMOVE_RULE, accept, {"comparable": False})["answer"] == ab.KEEP_IT


def test_config_items_are_always_in_effect():
    item = ab.Item(ab.REMOVAL, ".claude/settings.json", (("project", ".claude/settings.json"),))
    base = arm({"T1": [True, True]})  # no trace needed: settings are read at startup
    exposed = ab.exposure(base, {"entries": []}, item, {("project", ".claude/settings.json")})
    assert exposed["T1"] == {"runs": 2, "fired": 2, "unknown": 0}


def test_the_effect_is_with_minus_without():
    comparison = {"paired": {"delta": -0.25, "delta_ci": [-0.4, -0.1], "ci_method": "m"}}
    e = ab.effect(REMOVE_RULE, comparison)
    assert e["formula"] == "A − B" and e["estimate"] == 0.25 and e["ci"] == [0.1, 0.4]
    add = ab.effect(ab.Item(ab.ADDITION, "x", ()), comparison)
    assert add["formula"] == "B − A" and add["estimate"] == -0.25 and add["ci"] == [-0.4, -0.1]
    assert ab.effect(REMOVE_RULE, {"paired": None})["estimate"] is None


def test_drop_it_never_overrides_a_comparison_that_decided_nothing():
    from pytest_agentdrift.compare.experiment import drop_it_verdict
    from pytest_agentdrift.compare.outcome import Verdict

    section = {"ablation": {"drop_it": {"passed": True, "answer": "Drop it", "reason": "no loss"}}}
    prior = Verdict(4, "gate promote: not decided: candidate lost 3 of 4 run(s)")
    decided = {"comparable": True, "infra": {"exceeded": []}}
    assert drop_it_verdict(section, decided, "drop-it", prior).code == 0
    assert drop_it_verdict(section, decided, None, prior) is prior  # no drop-it gate: the comparison's own verdict
    too_many_lost = {"comparable": True, "infra": {"exceeded": ["candidate"]}}
    assert drop_it_verdict(section, too_many_lost, "drop-it", prior) is prior
    refused = {"comparable": False}
    assert drop_it_verdict(section, refused, "drop-it", prior) is prior
