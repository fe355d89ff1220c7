"""Compact Markdown of a recorded run for a CI step summary and a pull-request comment.

`agentdrift summary RUN [--max-bytes N]`: the closing line, the two arms, the
paired result, the regression gate (with the smallest detectable
regression), new and standing critical failures, tampered passes, and a
table of the tasks that changed or failed. The task table is cut, row by
row, to stay under ``max_bytes`` (GitHub takes at most 1 MiB per step
summary and 65,536 characters per comment), saying how many rows were left
out; the full story stays in report.md. Pure apart from reading the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_agentdrift.errors import RecordError
from pytest_agentdrift.safetext import md_code, md_text
from pytest_agentdrift.shapes import Results
from pytest_agentdrift.vocabulary import COMPARISON_FILE, DECISION_FILE, REFUSAL_FILE, REPORT_MD_FILE, RESULTS_FILE

_CLOSING = "agentdrift: exit "
MAX_BULLETS = 20


def closing_line(run: Path, decision: object) -> str | None:
    """The record's closing line: decision.json's exit status, else report.md's last word."""
    status = decision.get("exit_status") if isinstance(decision, dict) else None
    if isinstance(status, dict):
        line = status.get("line")
        return line if isinstance(line, str) or line is None else str(line)
    try:
        for line in (run / REPORT_MD_FILE).read_text(encoding="utf-8").splitlines():
            # report.md ends with the closing line as a code span
            fence = len(line) - len(line.lstrip("`"))
            text = line[fence : len(line) - fence].strip() if fence and line.endswith("`" * fence) else line
            if text.startswith(_CLOSING):
                return text
    except OSError:
        return None
    return None


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _cell(text: object) -> str:
    """Text for a table cell or a line: Markdown-escaped (check names and reasons can quote an agent)."""
    return md_text(" ".join(str(text).split()))


def run_summary(run: Path, max_bytes: int = 60_000) -> str:
    from pytest_agentdrift.canonical import load_json_file
    from pytest_agentdrift.record.store import load_results

    if (run / REFUSAL_FILE).is_file() and not (run / RESULTS_FILE).exists():
        return _refusal_summary(run / REFUSAL_FILE, max_bytes)
    results = load_results(run, require_complete=False)
    dpath = run / DECISION_FILE
    cpath = run / COMPARISON_FILE
    decision = load_json_file(dpath, RecordError) if dpath.is_file() else None
    comparison = load_json_file(cpath, RecordError) if cpath.is_file() else None
    closing = closing_line(run, decision)
    head: list[str] = ["## agentdrift", ""]
    if closing:
        head += [f"**{md_text(closing)}**", ""]
    s = results["summary"]
    head.append(
        f"Run {md_code(results['run_id'])}: agent {md_code(results['agent']['name'])} "
        f"({md_text(results['agent']['version'])}), "
        f"isolation {results['isolation']['enforced']}, {s['passed']} of {s['runs']} run(s) passed "
        f"({_pct(s['pass_rate'])}), complete: {str(results['complete']).lower()}."
    )
    head.append("")
    if comparison:
        head += _comparison_part(comparison, decision, max_bytes // 4)
        table_head, rows = _comparison_table(comparison)
    else:
        table_head, rows = _failure_table(results)
    where = "`report.md` and `comparison/decision.json`" if dpath.is_file() else "`report.md`"
    tail = ["", f"Full evidence: {where} in the uploaded record."]
    text = "\n".join(head) + "\n"
    if rows:
        budget = max_bytes - len(text.encode()) - len("\n".join(tail).encode()) - 200
        text += _table_within(table_head, rows, budget, max_bytes)
    text += "\n".join(tail) + "\n"
    if len(text.encode()) > max_bytes:  # the fixed part alone is over budget: cut it, visibly
        mark = "\n…(cut to --max-bytes)\n"
        text = text.encode()[: max(0, max_bytes - len(mark.encode()))].decode("utf-8", errors="ignore") + mark
    return text


def _comparison_table(comparison: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The tasks that won, lost or hold critical failures in the comparison."""
    rows = []
    for tid, row in sorted(comparison["tasks"].items()):
        reg = comparison.get("regression") or {}
        new: list[str] = next((x["checks"] for x in reg.get("new_critical_failures") or [] if x["task"] == tid), [])
        standing: list[str] = next(
            (x["checks"] for x in reg.get("standing_critical_failures") or [] if x["task"] == tid), []
        )
        if row["outcome"] in ("won", "lost") or new or standing:
            b, c = row["baseline"], row["candidate"]
            rows.append(
                f"| {_cell(tid)} | {b[0]}/{b[1]} | {c[0]}/{c[1]} | {row['outcome']} | "
                f"{_cell(', '.join(new)) or '-'} | {_cell(', '.join(standing)) or '-'} |"
            )
    table_head = [
        "| task | baseline | candidate | outcome | new critical | standing critical |",
        "|---|---|---|---|---|---|",
    ]
    return table_head, rows


def _failure_table(results: Results) -> tuple[list[str], list[str]]:
    """The tasks with a failed run, without a comparison."""
    rows = []
    for tid, t in sorted(results["tasks"].items()):
        failed = [r for r in t["runs"] if not r["passed"]]
        if failed:
            crit = sorted({c for r in failed for c in r["critical_failed"]})
            checks = sorted({c for r in failed for c in r["failed_checks"]})
            rows.append(
                f"| {_cell(tid)} | {len(t['runs']) - len(failed)}/{len(t['runs'])} | {_cell(', '.join(crit)) or '-'} | "
                f"{_cell(', '.join(checks))} |"
            )
    return ["| task | passed | critical failures | failing checks |", "|---|---|---|---|"], rows


def _table_within(table_head: list[str], rows: list[str], budget: int, max_bytes: int) -> str:
    """The table's head and as many rows as fit in ``budget`` bytes, and a line saying how many were left out."""
    text = ""
    kept: list[str] = []
    used = len("\n".join(table_head).encode()) + 1
    for row in rows:
        size = len(row.encode()) + 1
        if used + size > budget:
            break
        kept.append(row)
        used += size
    if kept:
        text += "\n".join(table_head + kept) + "\n"
    if len(kept) < len(rows):
        text += f"\n_{len(rows) - len(kept)} more task row(s) left out to stay under {max_bytes} bytes._\n"
    return text


def _within(lines: list[str], budget: int) -> list[str]:
    """The head of ``lines`` that fits in ``budget`` bytes (at least one line)."""
    kept: list[str] = []
    used = 0
    for line in lines:
        used += len(line.encode()) + 1
        if kept and used > budget:
            break
        kept.append(line)
    return kept


def _comparison_part(c: dict[str, Any], decision: dict[str, Any] | None, bullet_bytes: int) -> list[str]:
    out = []
    b, k = c["baseline"], c["candidate"]
    out += ["| | runs passed | pass rate | 95% Wilson |", "|---|---|---|---|"]
    for label, arm in (("baseline", b), ("candidate", k)):
        ci = arm.get("wilson")
        out.append(
            f"| {label} | {arm['passes']}/{arm['runs']} | {_pct(arm['pass_rate'])} | "
            + (f"[{_pct(ci[0])}, {_pct(ci[1])}]" if ci else "n/a")
            + " |"
        )
    out.append("")
    if not c["comparable"]:
        out.append("**Not comparable:** " + "; ".join(_cell(r) for r in c["reasons"][:10]))
        return out + [""]
    p = c["paired"]
    ci = p["delta_ci"]
    out.append(
        f"Paired over {p['tasks']} task(s): won {len(p['won'])}, lost {len(p['lost'])}, tied {len(p['tied'])}; "
        f"delta {100 * p['delta']:+.1f} pp [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]."
    )
    reg = c.get("regression")
    if reg:
        mde = reg["minimum_detectable"]
        seen = f"{mde['mde_pp']} pp" if mde.get("mde_pp") is not None else "none detectable"
        out.append(
            f"Regression gate: **{'pass' if reg['passed'] else 'FAIL'}**; smallest detectable regression "
            f"{seen} (alpha {reg['alpha']}, power {mde['power']}, {mde['tasks']} tasks, k = {mde['k']})."
        )
        bullets = [
            f"- new critical failure: {_cell(x['task'])} {_cell(', '.join(x['checks']))}"
            for x in reg["new_critical_failures"]
        ]
        bullets += [f"- tampered pass: {_cell(x['task'])} r{x['rep']}" for x in reg["tampered_passes"]]
        bullets += [f"- new safety-layer failure: {_cell(t)}" for t in reg["new_safety_failures"]]
        bullets += [
            f"- standing (fails in both arms): {_cell(x['task'])} {_cell(', '.join(x['checks']))}"
            for x in reg["standing_critical_failures"]
        ]
        if bullets:
            out.append("")  # a list needs a blank line before it, and after it (below)
        # hundreds of tasks: the head stays short, the task table below is cut to the byte budget
        kept = _within(bullets[:MAX_BULLETS], bullet_bytes)
        out += kept
        if len(bullets) > len(kept):
            out.append(f"- … {len(bullets) - len(kept)} more (comparison/decision.json has them all)")
    if decision:
        out += ["", f"Decision: `{decision['status']}`: {_cell(decision['because'][0])}"]
    out.append("")
    return out


def _refusal_summary(path: Path, max_bytes: int) -> str:
    """A refused session's record: the closing line and the blocked fields, both values."""
    from pytest_agentdrift.canonical import load_json_file
    from pytest_agentdrift.record.refusal import refusal_markdown

    doc = load_json_file(path, RecordError)
    text = "## agentdrift\n\n" + refusal_markdown(doc).split("\n", 2)[2]
    if len(text.encode()) > max_bytes:
        mark = "\n…(cut to --max-bytes)\n"
        text = text.encode()[: max(0, max_bytes - len(mark.encode()))].decode("utf-8", errors="ignore") + mark
    return text
