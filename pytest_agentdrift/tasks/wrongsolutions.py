"""Wrong solutions as data: `solution/wrong/NAME/` of a task, and what each must fail. No pytest.

A wrong solution has the layout of solution/ (files/, delete.txt,
events.jsonl, report.json, optionally actions.py) plus `wrong.toml`:

    description = "Adds a debug print to tax.py, runs the CLI, then restores the file"
    kind = "mistake"            # mistake | reward-hack | give-up
    expect = "critical"         # critical: at least one critical check fails
                                # fail: the run fails, and no check fails critically
    checks = ["no-changes"]     # checks that must be among the failed ones
    needs = ["write-observation"]   # optional: evidence only a live harness observation gives
                                    # (write-observation, network-observation)

    [[observed]]                # optional: what that observation is expected to see; fast
    type = "write"              # oracle tests grade with these events in its place
    path = "invoicekit/tax.py"
    kind = "modify"

`agentdrift validate` plays each one through the reference agent
(`--agent reference:wrong/NAME`) and reports whether it failed as expected.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentdrift.canonical import load_toml_file
from pytest_agentdrift.errors import TaskError
from pytest_agentdrift.vocabulary import AGENT_REPORT_FILE

KINDS = ("mistake", "reward-hack", "give-up")
EXPECTS = ("critical", "fail")
NEEDS = ("write-observation", "network-observation")
_KEYS = frozenset({"description", "kind", "expect", "checks", "needs", "observed"})


@dataclass(frozen=True)
class WrongSolution:
    name: str  # what the reference agent plays: "wrong/<dir>"
    path: Path
    description: str
    kind: str
    expect: str
    checks: tuple[str, ...]
    needs: tuple[str, ...]
    observed: tuple[dict[str, Any], ...]


def _fail(problem: str, path: Path) -> None:
    raise TaskError(problem, path)


def _check_verdict_fields(meta: dict[str, Any], toml_path: Path) -> None:
    """Returns when wrong.toml's description, kind and expect are valid; raises TaskError at the first that is not."""
    if not isinstance(meta.get("description"), str) or not meta["description"].strip():
        _fail("'description' (what this wrong agent does) is required", toml_path)
    if meta.get("kind") not in KINDS:
        _fail(f"'kind' must be one of {', '.join(KINDS)}", toml_path)
    if meta.get("expect") not in EXPECTS:
        _fail(f"'expect' must be one of {', '.join(EXPECTS)}", toml_path)


def _checked_lists(
    meta: dict[str, Any], check_names: set[str], toml_path: Path
) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    """wrong.toml's (checks, needs, observed), each a valid list (the checks all the task's); TaskError
    at the first that is not."""
    checks = meta.get("checks", [])
    if not isinstance(checks, list) or not all(isinstance(c, str) for c in checks):
        _fail("'checks' must be a list of check names", toml_path)
    missing = sorted(set(checks) - check_names)
    if missing:
        _fail(f"'checks' names check(s) the task does not have: {', '.join(missing)}", toml_path)
    needs = meta.get("needs", [])
    if not isinstance(needs, list) or not set(needs) <= set(NEEDS):
        _fail(f"'needs' must be a list of: {', '.join(NEEDS)}", toml_path)
    observed = meta.get("observed", [])
    if not isinstance(observed, list) or not all(
        isinstance(e, dict) and isinstance(e.get("type"), str) for e in observed
    ):
        _fail("'observed' must be a list of event tables, each with a 'type'", toml_path)
    return checks, needs, observed


def load_wrong(path: Path, check_names: set[str]) -> WrongSolution:
    """The wrong solution in directory `path`, its wrong.toml checked against the task's `check_names`
    (TaskError at the first problem)."""
    toml_path = path / "wrong.toml"
    if not toml_path.is_file():
        _fail("a wrong solution needs wrong.toml (what it must fail)", toml_path)
    meta = load_toml_file(toml_path, TaskError)
    unknown = sorted(set(meta) - _KEYS)
    if unknown:
        _fail(f"unknown key(s): {', '.join(unknown)}", toml_path)
    _check_verdict_fields(meta, toml_path)
    checks, needs, observed = _checked_lists(meta, check_names, toml_path)
    if not ((path / AGENT_REPORT_FILE).is_file() or (path / "files").is_dir() or (path / "actions.py").is_file()):
        _fail("a wrong solution needs at least one of report.json, files/, actions.py", path)
    return WrongSolution(
        name=f"wrong/{path.name}",
        path=path,
        description=meta["description"].strip(),
        kind=meta["kind"],
        expect=meta["expect"],
        checks=tuple(checks),
        needs=tuple(needs),
        observed=tuple(observed),
    )


def wrong_solutions(spec) -> list[WrongSolution]:
    """The task's wrong solutions, sorted by name (none when it ships none)."""
    base = spec.path / "solution" / "wrong"
    if not base.is_dir():
        return []
    names = {c.name for c in spec.checks} | set(function_checks(spec))
    return [load_wrong(d, names) for d in sorted(base.iterdir()) if d.is_dir()]


def function_checks(spec) -> dict[str, bool]:
    """The checks a task writes as pytest functions (test_* in its test_*.py files) -> marked critical."""
    import ast

    out: dict[str, bool] = {}
    for f in spec.function_files:
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                out[node.name] = any(ast.unparse(d).endswith("mark.critical") for d in node.decorator_list)
    return out


def deciding_checks(spec, wrong: WrongSolution) -> set[str]:
    """The checks a verdict on this wrong solution rests on: those it names, and every critical one."""
    critical = {c.name for c in spec.checks if c.critical} | {n for n, crit in function_checks(spec).items() if crit}
    return set(wrong.checks) | critical


def _observed(evidence: dict[str, Any], need: str) -> bool:
    """Whether the run had the observation a wrong solution needs: a mechanism was watching, or it saw something.

    Only then is a missed mistake a real miss; without it the final tree alone cannot decide."""
    kind, count = ("writes", "writes_observed") if need == "write-observation" else ("network", "network_attempts")
    mechanism = (((evidence.get("observation") or {}).get(kind)) or {}).get("mechanism")
    return bool(mechanism) or bool(evidence.get(count))


def judge(wrong: WrongSolution, result: dict[str, Any]) -> tuple[bool | None, str]:
    """Did the run fail as the wrong solution says? (True, why) / (False, why) / (None, why undecided)."""
    failed = set(result["failed_checks"])
    critical = set(result["critical_failed"])
    problems = []
    if result["passed"]:
        problems.append("it passed")
    absent = [c for c in wrong.checks if c not in failed]
    if absent:
        problems.append("did not fail " + ", ".join(absent))
    if wrong.expect == "critical" and not critical:
        problems.append("no check failed critically")
    if wrong.expect == "fail" and critical:
        problems.append("failed critically (" + ", ".join(sorted(critical)) + "), expected an ordinary failure")
    seen = f"failed {', '.join(sorted(failed)) or 'nothing'}" + (
        f"; critical: {', '.join(sorted(critical))}" if critical else ""
    )
    if not problems:
        return (
            True,
            f"{'fails critically' if wrong.expect == 'critical' else 'fails, not critically'} as expected ({seen})",
        )
    evidence = result.get("evidence", {})
    unobserved = [n for n in wrong.needs if not _observed(evidence, n)]
    if unobserved:
        return None, (
            f"not decided: needs {', '.join(unobserved)}, which this run did not have ({'; '.join(problems)})"
        )
    return False, "; ".join(problems) + f" ({seen})"
