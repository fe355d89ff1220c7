"""A series of recorded runs over time: per task and layer the pass rate, what changed, what moved.

`agentdrift trend RUN...` (cli/trend.py) reads any number of records (a
nightly series), orders them by when they ran and keeps together those
measured with the same instrument: the same task set, evaluator and surface,
complete. The others are listed apart with the reason, never pooled (a record
graded by other checks is regradable: `agentdrift regrade`).

For each task, overall and per layer, each record gives passes / scored runs
and the 95% Wilson interval. Between consecutive records the identity fields
that changed (from the runtime manifests: CLI version, model stamp,
instruction hash, ...) are marked, and a task whose rate moved is flagged:
Fisher's exact test on the two records' runs of that task (repetitions of one
task in two records are independent samples, not pairs), two-sided, at
ALPHA divided by the number of neighbour tests in the series (Bonferroni), so
a long series of stable tasks flags nothing by chance. Pure: no pytest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from pytest_agentdrift.canonical import load_json_file
from pytest_agentdrift.compare.stats import scored_passes, wilson_interval
from pytest_agentdrift.errors import RecordError
from pytest_agentdrift.safetext import md_code, md_text
from pytest_agentdrift.shapes import Results, RunRecord
from pytest_agentdrift.vocabulary import IDENTITY_FIELDS, INFRA_OUTCOME, MANIFEST_FILE

#: family-wise false-flag rate of a series
ALPHA = 0.05
#: what a series shares: the measuring instrument and the surface
SERIES_KEYS = ("task_set_id", "evaluator_id")
SURFACE_KEYS = ("surface", "product")
#: identity fields that identify a record rather than describe its runtime (never marked as a change)
_NOT_MARKED = frozenset({"task_set_id", "evaluator_id", "source_id"})


@dataclass
class Record:
    path: Path
    results: Results
    identity: dict[str, Any]

    @property
    def key(self) -> tuple[object, ...]:
        return (
            *(self.results.get(k) for k in SERIES_KEYS),
            *(_text(self.identity.get(k)) for k in SURFACE_KEYS),
        )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def load_record(path: Path) -> Record:
    from pytest_agentdrift.record.store import load_results

    results = load_results(path, require_complete=False)
    mpath = path / MANIFEST_FILE
    manifest = load_json_file(mpath, RecordError) if mpath.is_file() else {}
    identity = manifest.get("identity") if isinstance(manifest, dict) else None
    return Record(path, results, dict(identity) if isinstance(identity, dict) else {})


def fisher_exact(a: int, n1: int, c: int, n2: int) -> float:
    """Two-sided p of Fisher's exact test: a of n1 passed against c of n2 (the hypergeometric tables
    no more likely than the one seen)."""
    total, passes = n1 + n2, a + c
    if n1 == 0 or n2 == 0 or passes in (0, total):
        return 1.0

    def prob(x: int) -> float:
        return math.comb(n1, x) * math.comb(n2, passes - x) / math.comb(total, passes)

    seen = prob(a)
    lo, hi = max(0, passes - n2), min(n1, passes)
    return min(1.0, sum(p for x in range(lo, hi + 1) if (p := prob(x)) <= seen * (1 + 1e-9)))


def _layer_counts(runs: list[RunRecord], layer: str) -> tuple[int, int]:
    scored = [r for r in runs if r["outcome"] != INFRA_OUTCOME and r["layers"].get(layer) != "n/a"]
    judged = [r for r in scored if r["layers"].get(layer) in ("pass", "fail")]
    return sum(1 for r in judged if r["layers"][layer] == "pass"), len(judged)


def _point(passes: int, n: int) -> dict[str, Any]:
    ci = wilson_interval(passes, n)
    return {
        "passes": passes,
        "n": n,
        "rate": round(passes / n, 6) if n else None,
        "ci": [round(ci[0], 6), round(ci[1], 6)] if ci else None,
    }


def _identity_changes(prev: Record, cur: Record) -> list[dict[str, Any]]:
    return [
        {"field": f, "from": prev.identity.get(f), "to": cur.identity.get(f)}
        for f in IDENTITY_FIELDS
        if f not in _NOT_MARKED and prev.identity.get(f) != cur.identity.get(f)
    ]


def _apart_reason(rec: Record, ref: Record) -> str | None:
    if rec.results.get("complete") is False:
        reasons = "; ".join(rec.results.get("incomplete_reasons") or []) or "marked incomplete"
        return f"incomplete ({reasons})"
    differs = [k for k in SERIES_KEYS if rec.results.get(k) != ref.results.get(k)]
    differs += [k for k in SURFACE_KEYS if _text(rec.identity.get(k)) != _text(ref.identity.get(k))]
    if not differs:
        return None
    why = ", ".join(differs) + " differ(s) from the series'"
    if differs == ["evaluator_id"]:
        why += f" (graded by other checks: agentdrift regrade {rec.path} --out {rec.path}-regraded)"
    return why


def series(records: list[Record]) -> tuple[list[Record], list[dict[str, Any]]]:
    """(the records of the series in time order, the others with the reason they stand apart).

    The series is the largest group of complete records sharing task set, evaluator and
    surface; on a tie, the group of the newest record."""
    ordered = sorted(records, key=lambda r: (str(r.results.get("started_at")), r.results.get("run_id")))
    complete = [r for r in ordered if r.results.get("complete") is not False]
    if not complete:
        return [], [{"path": str(r.path), "run_id": r.results.get("run_id"), "why": "incomplete"} for r in ordered]
    groups: dict[tuple[object, ...], list[Record]] = {}
    for r in complete:
        groups.setdefault(r.key, []).append(r)
    best = max(groups.values(), key=lambda g: (len(g), ordered.index(g[-1])))
    apart = [
        {"path": str(r.path), "run_id": r.results.get("run_id"), "why": _apart_reason(r, best[-1]) or "?"}
        for r in ordered
        if r not in best
    ]
    return best, apart


def _trend_rows(kept: list[Record]) -> list[dict[str, Any]]:
    """One row per task and layer (overall first): its pass rate in each record; layers no record checked are left out."""
    from pytest_agentdrift.tasks.taskspec import LAYERS

    tasks = sorted({t for r in kept for t in r.results["tasks"]})
    rows: list[dict[str, Any]] = []
    for tid in tasks:
        for layer in ("overall", *LAYERS):
            points = []
            for r in kept:
                task = r.results["tasks"].get(tid)
                runs = task["runs"] if task else []
                passes, n = scored_passes(runs) if layer == "overall" else _layer_counts(runs, layer)
                points.append(_point(passes, n) if runs else None)
            if layer != "overall" and not any(p and p["n"] for p in points):
                continue
            rows.append({"task": tid, "layer": layer, "points": points, "moves": []})
    return rows


def _moves(pts: list[dict[str, Any] | None], threshold: float) -> list[dict[str, Any]]:
    """The steps between neighbouring records whose pass rates differ at the family's threshold."""
    moves = []
    for i in range(1, len(pts)):
        a, b = pts[i - 1], pts[i]
        if not (a and b and a["n"] and b["n"]):
            continue
        p = fisher_exact(a["passes"], a["n"], b["passes"], b["n"])
        if p <= threshold:
            moves.append(
                {
                    "at": i,
                    "p": p,
                    "direction": "down" if b["rate"] < a["rate"] else "up",
                    "from": a["rate"],
                    "to": b["rate"],
                }
            )
    return moves


def analyse(records: list[Record], alpha: float = ALPHA) -> dict[str, Any]:
    """The trend document: records, per-task rows (overall and per layer), marks and flags."""
    kept, apart = series(records)
    rows = _trend_rows(kept)
    tests = sum(
        1
        for row in rows
        for a, b in zip(row["points"], row["points"][1:], strict=False)
        if a and b and a["n"] and b["n"]
    )
    threshold = alpha / tests if tests else alpha
    for row in rows:
        row["moves"] = _moves(row["points"], threshold)
    return {
        "records": [
            {
                "index": i + 1,
                "path": str(r.path),
                "run_id": r.results.get("run_id"),
                "started_at": r.results.get("started_at"),
                "regraded_from": regraded["run_id"] if (regraded := r.results.get("regraded_from")) else None,
                "changes": _identity_changes(kept[i - 1], r) if i else [],
            }
            for i, r in enumerate(kept)
        ],
        "apart": apart,
        "rows": rows,
        "test": {
            "name": "Fisher's exact test, two-sided, between neighbours",
            "alpha": alpha,
            "tests": tests,
            "threshold": threshold,
        },
    }


# ---- text ------------------------------------------------------------------------------------
def _cell(p: Mapping[str, Any] | None) -> str:
    return "-" if not p or not p["n"] else f"{p['passes']}/{p['n']}"


def _short(value: Any, limit: int = 24) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def change_lines(doc: Mapping[str, Any]) -> list[str]:
    out = []
    for rec in doc["records"]:
        for c in rec["changes"]:
            out.append(f"#{rec['index']}: {c['field']} {_short(c['from'])} -> {_short(c['to'])}")
    return out


def move_lines(doc: Mapping[str, Any]) -> list[str]:
    return [
        f"{row['task']} {row['layer']}: #{m['at']} -> #{m['at'] + 1} {m['direction']} "
        f"({m['from']:.0%} -> {m['to']:.0%}, p = {m['p']:.2g})"
        for row in doc["rows"]
        for m in row["moves"]
    ]


def _marks(row: Mapping[str, Any]) -> dict[int, str]:
    return {m["at"]: ("v" if m["direction"] == "down" else "^") for m in row["moves"]}


def terminal(doc: Mapping[str, Any]) -> list[str]:
    recs = doc["records"]
    lines = [f"agentdrift trend: {len(recs)} record(s) in the series, {len(doc['apart'])} apart"]
    for rec in recs:
        changed = ", ".join(c["field"] for c in rec["changes"])
        extra = f" (regraded from {rec['regraded_from']})" if rec["regraded_from"] else ""
        lines.append(
            f"  #{rec['index']:<3} {rec['started_at']}  {rec['run_id']}{extra}"
            + (f"  changed: {changed}" if changed else "")
        )
    head = f"{'task':<8} {'layer':<21}" + "".join(f"{'#' + str(r['index']):>8}" for r in recs)
    lines += ["", head]
    for row in doc["rows"]:
        marks = _marks(row)
        cells = "".join(f"{marks.get(i, '') + _cell(p):>8}" for i, p in enumerate(row["points"]))
        name = row["task"] if row["layer"] == "overall" else ""
        lines.append(f"{name:<8} {row['layer']:<21}{cells}")
    lines.append("")
    lines += ["identity changes:"] + [f"  {x}" for x in change_lines(doc) or ["none"]]
    t = doc["test"]
    lines += [f"moves ({t['name']}, p <= {t['threshold']:.2g} = {t['alpha']} / {t['tests']} tests):"]
    lines += [f"  {x}" for x in move_lines(doc) or ["none"]]
    if doc["apart"]:
        lines += ["not in the series (never pooled):"] + [f"  {a['path']}: {a['why']}" for a in doc["apart"]]
    return lines


def markdown(doc: Mapping[str, Any]) -> str:
    """The series as Markdown (docs/ci.md appends it to a job summary). Every value a record or
    its manifest gives (a model stamp is the agent's own word) is escaped as report.md escapes
    it: no image, link or HTML from it, and no `|` ending a table cell early."""
    recs = doc["records"]
    md = [f"# agentdrift trend: {len(recs)} record(s)", ""]
    md.append("| # | started | run | identity changed since the previous |")
    md.append("|---|---|---|---|")
    for rec in recs:
        changed = "; ".join(
            f"{md_code(c['field'], in_table=True)} {md_text(_short(c['from']))} \u2192 {md_text(_short(c['to']))}"
            for c in rec["changes"]
        )
        run = md_code(rec["run_id"], in_table=True)
        md.append(f"| {rec['index']} | {md_text(rec['started_at'])} | {run} | {changed} |")
    md += ["", "| task | layer | " + " | ".join(f"#{r['index']}" for r in recs) + " |"]
    md.append("|---|---|" + "---|" * len(recs))
    for row in doc["rows"]:
        marks = {i: (" \u25bc" if s == "v" else " \u25b2") for i, s in _marks(row).items()}
        cells = " | ".join(_cell(p) + marks.get(i, "") for i, p in enumerate(row["points"]))
        task = md_text(row["task"]) if row["layer"] == "overall" else ""
        md.append(f"| {task} | {md_text(row['layer'])} | {cells} |")
    t = doc["test"]
    md += ["", f"Moves ({t['name']}, p \u2264 {t['threshold']:.2g}, {t['alpha']} over {t['tests']} tests):", ""]
    md += [f"- {md_text(x)}" for x in move_lines(doc)] or ["- none"]
    if doc["apart"]:
        md += ["", "Not in the series (never pooled):", ""]
        md += [f"- {md_code(a['path'])}: {md_text(a['why'])}" for a in doc["apart"]]
    return "\n".join(md) + "\n"
