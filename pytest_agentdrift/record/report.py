"""What a person reads: terminal summary lines, failure text and report.md.

Pure functions over the results dict; no pytest, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_agentdrift.record.provenance import regraded_line
from pytest_agentdrift.safetext import escape_text, md_code, md_fence, md_text
from pytest_agentdrift.shapes import (
    AgentRecord,
    ChangedRecord,
    CheckRecord,
    CrashRecord,
    EvidenceRecord,
    IsolationRecord,
    Results,
    RunRecord,
    SettingsRecord,
    SpendRecord,
    SummaryRecord,
    TaskEntry,
)
from pytest_agentdrift.tasks.taskspec import LAYERS
from pytest_agentdrift.vocabulary import INFRA_OUTCOME

_LAYER_ABBR = {
    "safety": "safe",
    "correctness": "corr",
    "scope": "scop",
    "instruction_fidelity": "inst",
    "verification": "veri",
    "efficiency": "effi",
    "operator_load": "oper",
    "recovery": "reco",
}
_MARK = {"pass": "ok", "fail": "FAIL", "n/a": "-"}


def failure_text(task_id: str, title: str, result: RunRecord) -> str:
    """The domain text shown for a failed item: which checks failed and why."""
    lines = [f"task {task_id} ({title}), repetition {result['rep']}: {result['outcome'].upper()}"]
    ev = result["evidence"]
    lines += _how_it_ended(result, ev)
    lines += _failed_check_lines(result["checks"])
    lines += _evidence_lines(result, ev)
    # what graded code printed and the agent named reaches the terminal: no escape sequence gets through
    return escape_text("\n".join(lines))


def _how_it_ended(result: RunRecord, ev: EvidenceRecord) -> list[str]:
    """Why the run was not an ordinary pass or fail: undecided, not started, crashed, stopped, tampered."""
    lines = []
    for reason in result.get("undecided") or ():
        lines.append(f"  UNDECIDED (the harness could not judge this run; never a pass): {reason}")
    if ev.get("launch_error"):
        lines.append(f"  the agent could not be started: {ev['launch_error']}")
    crash = ev.get("crash")
    if crash:
        lines.extend(crash_lines(crash))
    if ev.get("timed_out"):
        lines.append(f"  the agent timed out after {ev['duration_s']:.1f}s; its process tree was killed")
    for key in ev.get("resource_exceeded") or ():
        lim = (ev.get("limits") or {}).get(key)
        limit, peak = (lim.get("limit"), lim.get("peak")) if lim else (None, None)
        lines.append(
            f"  RESOURCE LIMIT HIT: {key} (limit {_limit_text(key, limit)}, enforced by {lim.get('enforced_by', '?') if lim else '?'}"
            f", peak {_limit_text(key, peak)}); the run was stopped or refused"
        )
    if ev.get("stopped"):
        lines.append(f"  the run was stopped: {ev['stopped']}; its process tree was killed")
    infra = result.get("infra_error")
    if infra and not infra.get("believed"):
        lines.append(
            f"  an infrastructure error was claimed ({infra['class']}: {infra['evidence']}) but {infra.get('why')}"
        )
    if result["tampered_pass"]:
        lines.append("  TAMPERED PASS: the run changed protected tests or test configuration; counted as a fail")
    return lines


def _failed_check_lines(checks: list[CheckRecord]) -> list[str]:
    """The failed checks, critical first, each with the last lines of its output."""
    lines = []
    for check in sorted(checks, key=lambda c: (not c["critical"], c["passed"])):
        if check["passed"]:
            continue
        tag = "CRITICAL " if check["critical"] else ""
        lines.append(f"  {tag}{check['layer']}/{check['name']} [{check['kind']}]: {check['detail']}")
        tail = check.get("evidence", {}).get("tail") or check.get("evidence", {}).get("diff")
        if tail:
            lines.extend("      | " + ln for ln in str(tail).splitlines()[-10:])
    return lines


def _evidence_lines(result: RunRecord, ev: EvidenceRecord) -> list[str]:
    """What the harness observed, the final report, and where the raw artifacts are."""
    changed = ev["changed"]
    n = sum(len(v) for v in _change_lists(changed)) + sum(
        v for k, v in (ev.get("omitted") or {}).items() if k.startswith("changed.")
    )
    lines = _budget_lines(ev)
    lines.append(
        f"  evidence: exit {ev['exit_code']}, {ev['duration_s']:.2f}s, {n} changed path(s)"
        f", {len(ev['writes_outside'])} write(s) outside, {ev['network_attempts']} network attempt(s) observed by the harness"
        f", {len(ev['git_mutations'])} git mutation(s)"
    )
    if ev.get("leftover_processes"):
        lines.append(f"  {ev['leftover_processes']} process(es) outlived the agent and were killed")
    if ev.get("leftovers"):
        shown = ", ".join(ev["leftovers"][:8]) + (
            f" (+{len(ev['leftovers']) - 8} more)" if len(ev["leftovers"]) > 8 else ""
        )
        lines.append(f"  tool leftovers, not counted as changes: {shown}")
    if result.get("report_error"):
        lines.append(f"  final report: {result['report_error']}")
    elif report := result.get("report"):
        lines.append(f"  final report: status {report['status']!r}")
    lines.append(f"  raw artifacts: {result.get('raw', '(not recorded)')}")
    return lines


def _change_lists(changed: ChangedRecord) -> tuple[list[str], ...]:
    return changed["added"], changed["modified"], changed["deleted"], changed["mode"]


def crash_lines(crash: CrashRecord) -> list[str]:
    """A crashed agent: its exit status and the last lines of its stderr, as they were."""
    tail = crash.get("stderr_tail") or []
    head = f"  the agent crashed: exit {crash.get('exit_code')}, no final report"
    return [head + ("; the last lines of its stderr:" if tail else "; it wrote nothing to stderr")] + [
        "      | " + ln for ln in tail
    ]


def _budget_lines(ev: EvidenceRecord) -> list[str]:
    """What the harness did not examine, and changes the patch cannot show plainly."""
    out = []
    for note in (ev.get("harness_budget") or {}).get("notes", []):
        out.append(f"  NOT EXAMINED: {note}")
    graded = (ev.get("harness_budget") or {}).get("graded_copy") or {}
    if graded.get("incomplete"):
        out.append(f"  NOT GRADED: {graded['incomplete']}")
    hidden = ev.get("undisplayable_changes") or []
    if hidden:
        shown = ", ".join(f"{u['path']} ({u['reason']})" for u in hidden[:5])
        out.append(f"  {len(hidden)} change(s) the patch cannot show as plain text: {shown}")
    return out


def summary_lines(results: Results) -> list[str]:
    """Per task and per layer, critical failures first."""
    tasks = results["tasks"]
    out = _isolation_lines(results["agent"], results["isolation"])
    out.extend(_experiment_lines(results.get("settings") or {}))
    out.extend(_notable_run_lines(tasks))
    out.extend(_layer_table(tasks))
    no_defaults = sorted(tid for tid, t in tasks.items() if t.get("default_checks") is False)
    if no_defaults:
        out.append("default safety checks turned off (default_checks = false): " + ", ".join(no_defaults))
    out += _spend_lines(tasks, results["summary"])
    out.append(_totals_line(results["summary"]))
    hit = [
        f"{tid} r{r['rep']} ({', '.join(r['evidence']['resource_exceeded'])})"
        for tid, t in tasks.items()
        for r in t["runs"]
        if r["evidence"].get("resource_exceeded")
    ]
    if hit:
        out.append("resource limits hit: " + ", ".join(hit))
    if not results["complete"]:
        out.append("INCOMPLETE: " + "; ".join(results["incomplete_reasons"]))
    return [escape_text(line) for line in out]  # infrastructure evidence is the agent's words


def _isolation_lines(agent: AgentRecord, iso: IsolationRecord) -> list[str]:
    out = [
        f"agent {agent['name']} ({agent['version']}), isolation {iso['enforced']}"
        f" (network {iso['network']}, file system {iso['filesystem']})"
    ]
    if iso["enforced"] == "none":
        out.append("WARNING: runs were NOT isolated; effects were only detected, not prevented")
    if iso.get("not_hidden"):
        out.append(f"NOT HIDDEN from the agent and graded code under {iso['enforced']}:")
        out += [f"  - {line}" for line in iso["not_hidden"]]
    return out


def _notable_run_lines(tasks: Mapping[str, TaskEntry]) -> list[str]:
    """Critical failures, tampered passes, infrastructure errors and undecided runs, by run."""
    out = []
    crit = [(tid, r) for tid, t in tasks.items() for r in t["runs"] if r["critical_failed"]]
    if crit:
        out.append("critical failures:")
        for tid, r in crit:
            out.append(f"  {tid} r{r['rep']}: " + ", ".join(r["critical_failed"]))
    tampered = [(tid, r["rep"]) for tid, t in tasks.items() for r in t["runs"] if r["tampered_pass"]]
    if tampered:
        out.append("tampered passes (counted as fails): " + ", ".join(f"{t} r{rep}" for t, rep in tampered))
    out += _infra_lines(tasks)
    undecided = [(tid, r) for tid, t in tasks.items() for r in t["runs"] if r.get("undecided")]
    if undecided:
        out.append("undecided runs (the harness failed to judge them: never a pass, never scored):")
        out += [f"  {tid} r{r['rep']}: " + "; ".join(r["undecided"][:3]) for tid, r in undecided]
    return out


def _layer_table(tasks: Mapping[str, TaskEntry]) -> list[str]:
    """One row per task: scored passes and each layer's worst state."""
    out = [f"{'task':<10} {'pass':>5}  " + " ".join(f"{_LAYER_ABBR[layer]:>4}" for layer in LAYERS) + "  title"]
    for tid in sorted(tasks):
        t = tasks[tid]
        # a run lost to infrastructure is not scored, nor one the harness could not judge
        runs = [r for r in t["runs"] if r["outcome"] != INFRA_OUTCOME and not r.get("undecided")]
        lost = len(t["runs"]) - len(runs)
        npass = sum(1 for r in runs if r["passed"])
        cols = []
        for layer in LAYERS:
            states = {r["layers"][layer] for r in runs}
            state = "fail" if "fail" in states else ("pass" if "pass" in states else "n/a")
            cols.append(f"{_MARK[state]:>4}")
        out.append(
            f"{tid:<10} {npass:>2}/{len(runs):<2}  "
            + " ".join(cols)
            + f"  {t['title']}"
            + (f" ({lost} run(s) lost to infrastructure)" if lost else "")
        )
    out.append(
        "layers: "
        + ", ".join(f"{_LAYER_ABBR[layer]} {layer}" for layer in LAYERS)
        + "; ok = passed, FAIL = failed in a run, - = no check in that layer"
    )
    return out


def _totals_line(s: SummaryRecord) -> str:
    rate = "n/a" if s["pass_rate"] is None else f"{100 * s['pass_rate']:.0f}%"
    scored = s["runs"] - (s.get("infra_errors") or 0) - (s.get("undecided") or 0)
    line = (
        f"{s['passed']} of {scored} run(s) passed ({rate}); {s['critical_failures']} with critical failures; "
        f"{s['tampered_passes']} tampered pass(es); {s['errors']} error(s)/timeout(s)"
    )
    if s.get("infra_errors"):
        line += f"; {s['infra_errors']} infrastructure error(s), not scored"
    if s.get("undecided"):
        line += f"; {s['undecided']} run(s) UNDECIDED (the harness could not judge them)"
    if s.get("retried_runs"):
        line += f"; {s['retried_runs']} run(s) retried"
    return line


def _limit_text(key: str, value: int | None) -> str:
    from pytest_agentdrift.run.limits import human

    return "n/a" if value is None else human(key, value)


def limits_line(results: Results) -> str | None:
    """The limits the session asked for, and how the first run enforced each."""
    asked = (results.get("settings") or {}).get("limits")
    if not asked:
        return None
    first = next((r for t in results["tasks"].values() for r in t["runs"]), None)
    how = (first["evidence"].get("limits") if first else None) or {}
    return ", ".join(
        f"{k} {_limit_text(k, v) if v else 'off'}" + (f" ({how[k]['enforced_by']})" if k in how and v else "")
        for k, v in asked.items()
    )


def _infra_lines(tasks: Mapping[str, TaskEntry]) -> list[str]:
    """Runs lost to infrastructure (not scored), and claims that were not believed."""
    lost, doubted = [], []
    for tid, t in tasks.items():
        for r in t["runs"]:
            infra = r.get("infra_error")
            if not infra:
                continue
            text = f"  {tid} r{r['rep']}: {infra['class']} ({infra['source']}): {infra['evidence']}"
            if infra.get("believed"):
                tries = len(r.get("attempts") or ()) or 1
                lost.append(text + (f" (after {tries} attempts)" if tries > 1 else ""))
            else:
                doubted.append(text + f"; not believed: {infra.get('why')}")
    out = []
    if lost:
        out += ["infrastructure errors (not scored, not the agent's failures):", *lost]
    if doubted:
        out += ["infrastructure errors claimed but scored as the agent's run:", *doubted]
    return out


def _spend_text(spend: SpendRecord | SummaryRecord) -> str:
    parts = []
    tokens, cost = spend.get("tokens"), spend.get("cost_usd")
    if tokens is not None:
        parts.append(f"{tokens:>12,} tokens")
    if cost is not None:
        parts.append(f"{'$' + format(cost, ',.4f'):>11}")
    return "  ".join(parts)


def _spend_lines(tasks: Mapping[str, TaskEntry], summary: SummaryRecord) -> list[str]:
    """Tokens and cost per task and in total (every attempt counts), when any run reported usage."""
    if summary.get("tokens") is None and summary.get("cost_usd") is None:
        return []
    out = ["spend (all attempts):"]
    for tid in sorted(tasks):
        total: SpendRecord = {"tokens": None, "cost_usd": None}
        sources = set()
        for r in tasks[tid]["runs"]:
            sp: SpendRecord = r.get("spend") or {}
            tokens, cost = sp.get("tokens"), sp.get("cost_usd")
            if tokens is not None:
                total["tokens"] = (total.get("tokens") or 0) + tokens
            if cost is not None:
                total["cost_usd"] = (total.get("cost_usd") or 0) + cost
            if sp.get("cost_source"):
                sources.add(str(sp.get("cost_source")).split(":")[0])
        out.append(
            f"  {tid:<10} {_spend_text(total) or 'no usage reported'}"
            + (f"  ({', '.join(sorted(sources))})" if sources else "")
        )
    out.append(f"  {'total':<10} {_spend_text(summary)}")
    return out


def _experiment_lines(settings: SettingsRecord) -> list[str]:
    """The bundle the runs used and the plan they were registered under (session/experiments.py)."""
    out = []
    bundle = settings.get("agent_bundle")
    if bundle:
        ov = bundle.get("overlay")
        derived_from = bundle.get("derived_from")
        derived = f", derived from {derived_from[:19]}…" if derived_from else ""
        out.append(
            f"bundle {bundle.get('name') or '(unnamed)'} ({bundle['digest'][:19]}…{derived}): "
            f"{ov['project_files'] if ov else 0} project file(s) overlaid into each work tree, "
            f"{ov['user_files'] if ov else 0} into the private home"
            + (f", {', '.join(ov['removed'])} removed" if ov and ov["removed"] else "")
            + "; harness-placed files are never counted as changes"
        )
    plan = settings.get("plan")
    if plan:
        planned = plan["planned"]
        state = "followed" if plan["followed"] else "NOT followed (" + "; ".join(plan["problems"]) + ")"
        out.append(
            f"plan {plan['digest'][:19]}… ({'pre-registered ' + str(plan['created_at']) if plan['pre_registered'] else 'not older than the run'}): "
            f"{planned.get('tasks')} task(s) × k={planned.get('k')} for {100 * plan['delta']:.1f} pp at alpha "
            f"{plan['alpha']:g}, power {plan['power']:.2f}; this run {plan['ran']['tasks']} × k={plan['ran']['k']}: {state}"
        )
    return out


def markdown(results: Results, comparison_lines: list[str] | None = None, closing: str | None = None) -> str:
    """report.md: the same facts as the terminal, with every failed check's evidence."""
    md = [f"# pytest-agentdrift run {results['run_id']}", ""]
    if closing:
        md += [f"**{md_text(closing)}**", ""]  # the verdict first, in the words the terminal ends with
    md += _md_facts(results, closing)
    md += ["", "## Summary", "", *md_fence("\n".join(summary_lines(results))), ""]
    if comparison_lines:
        md += ["## Comparison with the baseline", "", *md_fence("\n".join(comparison_lines)), ""]
    md += ["## Tasks", ""]
    for tid in sorted(results["tasks"]):
        t = results["tasks"][tid]
        md.append(f"### {tid}: {t['title']}")
        md.append(f"Behaviour under test: {t['behavior'] or 'n/a'}; suite `{t['suite']}`.")
        md.append("")
        for r in t["runs"]:
            md += _md_run(r)
        md.append("")
    if closing:
        md += ["", md_code(closing)]
    return "\n".join(md) + "\n"


def _md_facts(results: Results, closing: str | None) -> list[str]:
    """The bullet list under the title: agent, times, isolation, ids, shard, resume, merge, budget."""
    md = [f"- agent: {md_code(results['agent']['name'])} version {md_code(results['agent']['version'])}"]
    md.append(
        f"- started {results['started_at']}, finished {results['finished_at']}; complete: {str(results['complete']).lower()}"
    )
    iso = results["isolation"]
    md.append(f"- isolation: {iso['enforced']} (network {iso['network']}, file system {iso['filesystem']})")
    limits = limits_line(results)
    if limits:
        md.append(f"- resource limits per run: {limits}")
    for key, value in (
        ("runtime_id", results.get("runtime_id")),
        ("task_set_id", results.get("task_set_id")),
        ("evaluator_id", results.get("evaluator_id")),
    ):
        if value:
            md.append(f"- {key}: `{value}`")
    md.append("- the same run as a page (grid, plots, patches, events; self-contained): [report.html](report.html)")
    if closing:
        md.append(f"- exit status: {md_code(closing)}")
    if results.get("shard"):
        sh = results["shard"]
        md.append(
            f"- shard {sh['index']}/{sh['count']} ({sh.get('source', 'option')}): {sh.get('selected', '?')} item(s)"
        )
    for note in results.get("resumed") or []:
        md.append(f"- resumed {note['at']}: kept {note['kept_runs']} finished run(s), ran {note['ran_runs']}")
    if results.get("regraded_from"):
        md.append("- " + regraded_line(results["regraded_from"]))
    if results.get("merged_from"):
        md.append(
            f"- merged from {len(results['merged_from'])} shard(s): "
            + ", ".join(f"`{r}`" for r in results["merged_from"])
        )
    if results.get("budget"):
        b = results["budget"]
        md.append(
            "- budget: "
            + ", ".join(f"{k} {v:,}" for k, v in b["limits"].items())
            + f"; spent {' '.join(_spend_text(b['spent']).split()) or 'nothing reported'}"
        )
    return md


def _md_run(r: RunRecord) -> list[str]:
    """One run of a task: its outcome, infrastructure error and retries, spend, checks and evidence."""
    md = [
        f"- r{r['rep']}: **{r['outcome']}**"
        + (" (tampered pass)" if r["tampered_pass"] else "")
        + (f"; critical failures: {', '.join(r['critical_failed'])}" if r["critical_failed"] else "")
    ]
    infra = r.get("infra_error")
    if infra:
        verdict = "not scored" if infra.get("believed") else f"scored anyway: {infra.get('why')}"
        md.append(
            f"  - infrastructure error {infra['class']} ({infra['source']}, {md_text(verdict)}): "
            + md_text(infra["evidence"])
        )
    for a in r.get("attempts") or []:
        ai = a.get("infra_error")
        md.append(
            f"  - attempt {a['attempt']}: {a['outcome']}"
            + (f" ({ai.get('class')}: {md_text(ai.get('evidence'))})" if ai else "")
            + f", exit {a.get('exit_code')}, {a.get('duration_s') or 0:.2f}s; raw: `{a['raw']}`"
        )
    spend = r.get("spend") or {}
    if spend.get("tokens") is not None or spend.get("cost_usd") is not None:
        md.append(
            f"  - spend: {' '.join(_spend_text(spend).split())}"
            + (f" ({spend.get('cost_source')})" if spend.get("cost_source") else "")
        )
    for c in r["checks"]:
        mark = "pass" if c["passed"] else ("CRITICAL FAIL" if c["critical"] else "fail")
        md += _check_lines(mark, c)
    return md + _md_run_evidence(r)


def _md_run_evidence(r: RunRecord) -> list[str]:
    md = []
    ev = r["evidence"]
    crash = ev.get("crash")
    if crash:
        head, *tail = crash_lines(crash)
        md.append("  - " + md_text(head.strip()))
        md += ["", *md_fence("\n".join(ln.strip()[2:] for ln in tail), indent="    "), ""] if tail else []
    md.extend("  - " + md_text(line.strip()) for line in _budget_lines(ev))
    overlay = ev.get("overlay")
    if overlay:
        placed = sorted([*overlay["placed"], *overlay["replaced"]])
        md.append(
            f"  - harness-placed from bundle {overlay['bundle'] or overlay['digest']} (not changes): "
            f"{md_text(', '.join(placed) or 'nothing')}"
            + (f"; removed first: {md_text(', '.join(overlay['removed']))}" if overlay["removed"] else "")
        )
    more = sum(v for k, v in (ev.get("omitted") or {}).items() if k.startswith("changed."))
    md.append(
        f"  - evidence: exit {ev['exit_code']}, {ev['duration_s']:.2f}s; changed "
        f"{md_text(', '.join(sorted(p for v in _change_lists(ev['changed']) for p in v)) or 'nothing')}"
        + (f" (+{more} more)" if more else "")
        + f"; writes outside: {md_text(', '.join(ev['writes_outside']) or 'none')}"
        f"; network attempts observed by the harness: {ev['network_attempts']}"
        f"; git mutations: {md_text(', '.join(ev['git_mutations']) or 'none')}; raw: {md_code(r.get('raw', ''))}"
    )
    return md


def _check_lines(mark: str, c: CheckRecord) -> list[str]:
    """One check in report.md: its first detail line in the bullet (Markdown-escaped: graded output
    and paths the agent chose), further lines and a failing check's output tail in a fenced block
    under it that no line of theirs can close."""
    first, *rest = str(c["detail"]).splitlines() or [""]
    out = [f"  - {mark}: {c['layer']}/{c['name']} ({c['kind']}): {md_text(first)}"]
    if rest:
        out += ["", *md_fence("\n".join(rest), indent="    "), ""]
    tail = None if c["passed"] else (c.get("evidence") or {}).get("tail") or (c.get("evidence") or {}).get("diff")
    if tail:
        out += ["", *md_fence("\n".join(str(tail).splitlines()[-15:]), indent="    "), ""]
    return out
