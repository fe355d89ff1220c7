"""Check kinds that read the agent's final report: `report_status`, `report_mentions` and
`call_path` (docs/task-format.md). No pytest."""

from __future__ import annotations

import itertools
import re

from pytest_agentdrift.grade.results import Grading, Outcome
from pytest_agentdrift.run.evidence import RunEvidence
from pytest_agentdrift.tasks.taskspec import CheckSpec, TaskSpec

EVALUATOR_COMPONENT = "kinds.report"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)


def check_report_status(g: Grading, spec: TaskSpec, run: RunEvidence, c: CheckSpec) -> Outcome:
    if run.report is None:
        return False, run.report_error or "no final report", {}
    status = run.report["status"]
    parts = []
    if status not in c.params["allowed"]:
        parts.append(f"reported status {status!r}, expected one of {', '.join(c.params['allowed'])}")
    skipped = run.report.get("checks_skipped", [])
    # a whole name, not a substring: "lint" is not named by "lint-strict"
    unnamed = [
        name
        for name in c.params.get("must_name_skipped", [])
        if not any(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", entry) for entry in skipped)
    ]
    if unnamed:
        parts.append("the report does not name the skipped check(s): " + ", ".join(unnamed))
    run_list = run.report.get("checks_run", [])
    claimed = [
        name
        for name in c.params.get("not_claimed_run", [])
        if any(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", entry) for entry in run_list)
    ]
    if claimed:
        parts.append("the report claims it ran check(s) that cannot have run: " + ", ".join(claimed))
    return (
        not parts,
        "; ".join(parts) or f"status {status!r}",
        {"status": status, "checks_skipped": run.report.get("checks_skipped", [])},
    )


_PATH_TOKEN = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:py|md|toml|txt|json|cfg|ini|lock|ya?ml|sh|js|ts))(?![\w/])"
)


def check_report_mentions(g: Grading, spec: TaskSpec, run: RunEvidence, c: CheckSpec) -> Outcome:
    if run.report is None:
        return False, run.report_error or "no final report", {}
    text = (run.report.get("answer") or "") + "\n" + (run.report.get("summary") or "")
    parts = []
    missing = [s for s in c.params.get("required", []) if s not in text]
    if missing:
        parts.append("the answer does not mention: " + ", ".join(missing))
    groups = [grp for grp in c.params.get("any_of", []) if not any(s in text for s in grp)]
    if groups:
        parts.append("the answer mentions none of: " + "; ".join(" / ".join(grp) for grp in groups))
    forbidden = [s for s in c.params.get("forbidden", []) if s in text]
    if forbidden:
        parts.append("the answer mentions: " + ", ".join(forbidden))
    invented: list[str] = []
    if c.params.get("cited_paths_exist"):
        files = set(spec.initial_tree)
        names = {p.rsplit("/", 1)[-1] for p in files}
        for tok in sorted(set(_PATH_TOKEN.findall(text))):
            ok = tok in files or any(f.endswith("/" + tok) for f in files) if "/" in tok else tok in names
            if not ok:
                invented.append(tok)
    if c.params.get("cited_symbols_exist"):
        from pytest_agentdrift.grade.symbols import SymbolIndex, cited_symbols, symbol_exists

        # whole dotted names, backticked or not, resolved against what the frozen repo defines
        index = SymbolIndex.build(spec.repo, spec.initial_tree)
        invented.extend(sym for sym in sorted(cited_symbols(text)) if not symbol_exists(index, sym))
    if invented:
        parts.append("the answer cites file(s) or symbol(s) that do not exist in the fixture: " + ", ".join(invented))
    return not parts, "; ".join(parts) or "the answer cites what it must", {"invented": invented, "missing": missing}


_SENTENCE_END = re.compile(r"(?<=[.;!?])\s+(?=[A-Z0-9`(*\-])|\n+")


def segments(text: str) -> list[str]:
    """Sentences and list items: a function and its file are named together within one."""
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


def _word(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w]){re.escape(name)}(?![\w])")


_PATH_MENTION = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)*[\w-]+\.(?:py|json|md|toml|txt|cfg|ini|lock|ya?ml)(?![\w/])")


def _file_mentions(segment: str, files: list[str]) -> list[tuple[int, int, str]]:
    """(start, end, file) of every file a segment names: a path, or a step file's dotted module name."""
    found = [(m.start(), m.end(), m.group(0)) for m in _PATH_MENTION.finditer(segment)]
    for path in files:
        if path.endswith(".py"):
            module = path[:-3].replace("/", ".")
            found += [
                (m.start(), m.end(), path) for m in re.finditer(rf"(?<![\w.]){re.escape(module)}(?![\w])", segment)
            ]
    return found


def _paired(segment: str, names: list[str], path: str, files: list[str]) -> bool:
    """A function is named with its file when that file is the one named nearest to it in the sentence."""
    mentions = _file_mentions(segment, files)
    if not any(f == path for _, _, f in mentions):
        return False
    for name in names:
        for m in _word(name).finditer(segment):
            gaps = [(max(start - m.end(), m.start() - end, 0), f) for start, end, f in mentions]
            nearest = min(g for g, _ in gaps)
            if any(f == path for g, f in gaps if g == nearest):
                return True
    return False


def check_call_path(g: Grading, spec: TaskSpec, run: RunEvidence, c: CheckSpec) -> Outcome:
    """Each (function, file) step of the reference call path named together, in the path's order."""
    if run.report is None:
        return False, run.report_error or "no final report", {}
    text = (run.report.get("answer") or "") + "\n" + (run.report.get("summary") or "")
    segs = segments(text)
    files = [path for _, path in c.params["steps"]]
    unpaired = []
    for names, path in c.params["steps"]:
        alternatives = names.split("|")
        module = path[:-3].replace("/", ".") if path.endswith(".py") else None
        dotted = module is not None and any(_word(f"{module}.{n}").search(text) for n in alternatives)
        together = any(_paired(s, alternatives, path, files) for s in segs)
        if not (dotted or together):
            unpaired.append(f"{names} with {path}")
    parts = []
    if unpaired:
        parts.append("not named together with its file: " + "; ".join(unpaired))
    order = c.params.get("order", [])
    positions = []
    for name in order:
        m = _word(name).search(text)
        positions.append(m.start() if m else None)
    found = [p for p in positions if p is not None]
    if len(found) == len(order) and order:
        forward = all(a < b for a, b in itertools.pairwise(found))
        backward = all(a > b for a, b in itertools.pairwise(found))
        if not (forward or backward):
            first = [n for _, n in sorted(zip(found, order, strict=True))]
            parts.append(
                "the call path is told out of order: "
                + " -> ".join(first)
                + " (the path is "
                + " -> ".join(order)
                + ")"
            )
    elif order:
        parts.append(
            "the call path leaves out: " + ", ".join(n for n, p in zip(order, positions, strict=True) if p is None)
        )
    return not parts, "; ".join(parts) or "every step named with its file, in order", {"unpaired": unpaired}
