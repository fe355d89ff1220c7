"""Per task and per run: how each run ended, its checks and their evidence, what the harness observed,
and the agent's own report."""

from __future__ import annotations

import json
from collections.abc import Mapping

from pytest_agentdrift.record.html.anchors import check_anchor, evidence_anchor, run_anchor, slug, task_anchor
from pytest_agentdrift.record.html.artifacts import SMALL_LIMIT, event_list, events_section, head_section, patch_section
from pytest_agentdrift.record.html.escape import attr, esc
from pytest_agentdrift.record.html.fmt import code, dl, json_block, json_list, path_list, short_json
from pytest_agentdrift.record.html.marks import OUTCOMES, layer_abbr, run_state
from pytest_agentdrift.record.html.reportinput import ReportInput
from pytest_agentdrift.shapes import EvidenceRecord, JsonValue, RunRecord, TaskEntry
from pytest_agentdrift.vocabulary import ARGV_FILE, PASSED_OUTCOME, STDERR_FILE, STDOUT_FILE


def task_sections(inp: ReportInput, tasks: Mapping[str, TaskEntry]) -> str:
    out = [
        (
            '<section id="tasks"><h2>Runs</h2><p><button id="expand-all" type="button">expand all</button>'
            '<button id="collapse-all" type="button">collapse all</button> <span class="small mut">Each task links '
            "its runs; each run its checks; each check its evidence.</span></p>"
        )
    ]
    for tid in sorted(tasks):
        t = tasks[tid]
        runs = t.get("runs") or []
        states = [run_state(run) for run in runs]
        npass = sum(1 for st in states if st == PASSED_OUTCOME)
        flag = " \u00b7 <b>CRITICAL</b>" if "critical" in states else ""
        flag += " \u00b7 <b>tampered pass</b>" if "tampered" in states else ""
        out.append(
            f'<details class="task" id="{task_anchor(tid)}"><summary><b>{esc(tid)}</b> {esc(t.get("title", ""))}'
            f" \u00b7 {npass}/{len(runs)} passed{flag}</summary>"
        )
        out.append(
            f'<p class="small">behaviour under test: {esc(t.get("behavior") or "n/a")}; suite {code(t.get("suite"))}; '
            f'task digest {code(t.get("task_digest"))} \u00b7 <a href="#g-{slug(tid)}">grid row</a></p>'
        )
        for run, state in zip(runs, states, strict=False):
            out.append(_run_section(inp, tid, run, state))
        out.append("</details>")
    out.append("</section>")
    return "\n".join(out)


def _run_section(inp: ReportInput, tid: str, run: RunRecord, state: str) -> str:
    rep = run.get("rep")
    ev = run.get("evidence") or {}
    cls, mark, meaning = OUTCOMES[state]
    out = [
        f'<details class="run" id="{run_anchor(tid, rep)}"><summary><span class="chip {cls}">{mark}</span> '
        f"<b>{esc(tid)} r{esc(rep)}</b>: {esc(run.get('outcome'))}"
        + (
            f" \u00b7 critical: {esc(', '.join(map(str, run.get('critical_failed') or [])))}"
            if run.get("critical_failed")
            else ""
        )
        + (" \u00b7 tampered pass" if run.get("tampered_pass") else "")
        + "</summary>"
    ]
    out.append(dl(_run_facts(run, ev, meaning)))
    out.append(_checks(tid, run))
    out.append(_harness_evidence(inp, run, ev))
    # a run that did not pass is opened to find out why: its patch and events open with it
    unfolded = state != PASSED_OUTCOME
    out.append(patch_section(inp, run, unfolded))
    out.append(events_section(inp, run, unfolded))
    out.append(_agent_report(inp, run))
    for name, label, key in ((STDOUT_FILE, "stdout", "stdout"), (STDERR_FILE, "stderr", "stderr")):
        out.append(head_section(inp, run, name, label, ev.get(f"{key}_bytes"), ev.get(f"{key}_truncated")))
    argv = inp.raw(run, ARGV_FILE, SMALL_LIMIT)
    if argv.text:
        out.append(f'<details class="ev"><summary>argv</summary><pre>{esc(argv.text, block=True)}</pre></details>')
    out.append("</details>")
    return "".join(out)


def _run_facts(run: RunRecord, ev: EvidenceRecord, meaning: str) -> list[tuple[str, str]]:
    """How the run ended: outcome, exit code, duration, crash, model stamp, usage."""
    facts = [
        ("outcome", f'{esc(run.get("outcome"))} <span class="mut">({esc(meaning)})</span>'),
        ("exit code", esc(ev.get("exit_code"))),
        ("duration", f"{ev['duration_s']:.2f} s" if isinstance(ev.get("duration_s"), (int, float)) else "?"),
    ]
    if ev.get("timed_out"):
        facts.append(("timed out", "yes: the process tree was killed"))
    if ev.get("launch_error"):
        facts.append(("launch error", esc(ev["launch_error"])))
    crash = ev.get("crash")
    if crash:
        tail = "\n".join(str(ln) for ln in crash.get("stderr_tail") or []) or "(nothing on stderr)"
        facts.append(
            ("crash", f"exit {esc(crash.get('exit_code'))}, no final report<pre>{esc(tail, block=True)}</pre>")
        )
    if run.get("model_stamp"):
        facts.append(("model stamp", code(run["model_stamp"])))
    usage = {k: v for k, v in (run.get("usage") or {}).items() if v is not None}
    if usage:
        facts.append(("usage", esc(", ".join(f"{k} {v}" for k, v in sorted(usage.items())))))
    facts.append(("raw artifacts", code(run.get("raw", "(not recorded)"))))
    return facts


def _checks(tid: str, run: RunRecord) -> str:
    checks = list(run.get("checks") or [])
    if not checks:
        return '<h4>Checks</h4><p class="mut">no checks recorded</p>'
    rows = []
    for i, c in enumerate(checks):
        passed = c.get("passed") is True
        crit = bool(c.get("critical"))
        result = (
            '<span class="chip ok">\u2713</span>'
            if passed
            else (
                '<span class="chip crit">!</span> <b>CRITICAL FAIL</b>'
                if crit
                else '<span class="chip bad">\u2717</span> fail'
            )
        )
        evidence = c.get("evidence")
        ev_html = ""
        if evidence:
            compact = json.dumps(evidence, sort_keys=True, ensure_ascii=False, default=str)
            if len(compact) <= 160 and "\\n" not in compact:
                ev_html = (
                    f'<div class="evi" id="{evidence_anchor(tid, run.get("rep"), i)}"><code>{esc(compact)}</code></div>'
                )
            else:
                ev_html = (
                    f'<details class="ev" id="{evidence_anchor(tid, run.get("rep"), i)}"{"" if passed else " open"}>'
                    f"<summary>evidence</summary>{_evidence_block(evidence)}"
                    f'<a class="small" href="#{check_anchor(tid, run.get("rep"), i)}">back to the check</a></details>'
                )
        lay = str(c.get("layer"))
        crit_note = ' <span class="mut">(critical)</span>' if crit else ""
        rows.append(
            f'<tr id="{check_anchor(tid, run.get("rep"), i)}" class="{"pass" if passed else "fail"}"><td>{result}</td>'
            f'<td><abbr title="{attr(lay)}">{esc(layer_abbr(lay))}</abbr></td><td>{esc(c.get("name"))}'
            f"{crit_note}</td><td>{esc(c.get('kind'))}</td>"
            f"<td>{esc(c.get('detail', ''))}{ev_html}</td></tr>"
        )
    return (
        '<h4>Checks</h4><table class="checks"><thead><tr><th>result</th><th>layer</th><th>check</th><th>kind</th>'
        f"<th>detail and evidence</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _evidence_block(evidence: JsonValue) -> str:
    """A check's evidence: multi-line text (a test's output tail, a diff) as text, the rest as JSON."""
    if not isinstance(evidence, Mapping):
        return json_block(evidence)
    rows = []
    for key, value in sorted(evidence.items(), key=lambda kv: str(kv[0])):
        if isinstance(value, str) and "\n" in value:
            shown = f"<pre>{esc(value, block=True)}</pre>"
        else:
            shown = f"<code>{esc(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str))}</code>"
        rows.append((str(key), shown))
    return dl(rows)


#: evidence fields the run section shows in its own rows; the rest go under "other evidence fields"
_SHOWN_EVIDENCE = frozenset(
    {
        "changed",
        "writes_outside",
        "network_attempts",
        "api_requests",
        "api_requests_unit",
        "network_policy",
        "git_mutations",
        "tamper",
        "lockfile_changes",
        "credential_access",
        "leftover_processes",
        "work_tree_deleted",
        "event_problems",
        "exit_code",
        "duration_s",
        "timed_out",
        "launch_error",
        "stdout_bytes",
        "stdout_truncated",
        "stderr_bytes",
        "stderr_truncated",
    }
)


def _harness_evidence(inp: ReportInput, run: RunRecord, ev: EvidenceRecord) -> str:
    rows: list[tuple[str, str]] = []
    changed = ev.get("changed") or {}
    for kind in ("added", "modified", "deleted", "mode"):
        if changed.get(kind):
            rows.append((f"{kind}", path_list(changed[kind])))
    if not any(changed.get(k) for k in ("added", "modified", "deleted", "mode")):
        rows.append(("changed paths", '<span class="mut">none</span>'))
    rows.append(("writes outside", path_list(ev.get("writes_outside"))))
    rows.extend(_network_rows(inp, run, ev))
    rows.append(("git mutations", path_list(ev.get("git_mutations"))))
    tamper = ev.get("tamper") or {}
    if any(tamper.values()):
        rows.append(("tamper", "".join(f"{esc(k)}: {path_list(v)}" for k, v in tamper.items() if v)))
    if ev.get("lockfile_changes"):
        rows.append(("lockfile changes", path_list(ev["lockfile_changes"])))
    cred = ev.get("credential_access")
    rows.append(("credential canary read", "not observable here" if cred is None else ("<b>yes</b>" if cred else "no")))
    if ev.get("leftover_processes"):
        rows.append(("leftover processes", f"{esc(ev['leftover_processes'])} outlived the agent and were killed"))
    if ev.get("work_tree_deleted"):
        rows.append(("work tree", "<b>deleted by the agent</b>"))
    if ev.get("event_problems"):
        rows.append(("event problems", path_list(ev["event_problems"])))
    rest = {k: v for k, v in ev.items() if k not in _SHOWN_EVIDENCE and v not in (None, [], {}, "")}
    extra = f'<details class="ev"><summary>other evidence fields</summary>{json_block(rest)}</details>' if rest else ""
    return "<h4>What the harness observed</h4>" + dl(rows) + extra


def _network_rows(inp: ReportInput, run: RunRecord, ev: EvidenceRecord) -> list[tuple[str, str]]:
    attempts = [e for e in event_list(inp, run)[0] if e.get("type") == "network_attempt"]
    net = f"{esc(ev.get('network_attempts', 0))} counted by the harness"
    if attempts:
        net += path_list(
            [
                f"{e.get('host', '?')}:{e.get('port', '?')}"
                + (f" (source {e.get('source')})" if e.get("source") else "")
                for e in attempts
            ]
        )
    rows = [("network attempts", net)]
    if ev.get("api_requests"):
        unit = f" {ev['api_requests_unit']}" if ev.get("api_requests_unit") else ""
        rows.append(("API requests through the proxy", esc(f"{ev['api_requests']}{unit}")))
    if ev.get("network_policy"):
        rows.append(("network policy", short_json(ev["network_policy"])))
    return rows


def _agent_report(inp: ReportInput, run: RunRecord) -> str:
    report = run.get("report")
    if run.get("report_error"):
        head = f'<p class="warn">{esc(run["report_error"])}</p>'
    else:
        head = ""
    if not isinstance(report, Mapping):
        return "<h4>The agent's report</h4>" + (head or '<p class="mut">none</p>')
    rows = [("status", f"<b>{esc(report.get('status'))}</b>"), ("summary", esc(report.get("summary", "")))]
    for key in ("checks_run", "checks_skipped"):
        listed = json_list(report.get(key))
        if listed:
            rows.append((key.replace("_", " "), path_list(list(map(str, listed)))))
    if report.get("answer"):
        rows.append(("answer", f"<pre>{esc(report['answer'], block=True)}</pre>"))
    return '<h4>The agent\'s report <span class="mut small">(its claim, not evidence)</span></h4>' + head + dl(rows)
