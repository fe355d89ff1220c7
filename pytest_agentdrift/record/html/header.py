"""The page's header: the closing line first, then the agent, its isolation, limits, ids, times and usage."""

from __future__ import annotations

from collections.abc import Mapping

from pytest_agentdrift.record.html.escape import esc
from pytest_agentdrift.record.html.fmt import code, dl, duration, human_limit, json_object, num, parse_time
from pytest_agentdrift.record.html.reportinput import ReportInput
from pytest_agentdrift.shapes import IsolationRecord, Results, SettingsRecord, TaskEntry
from pytest_agentdrift.vocabulary import is_concrete


def closing_box(inp: ReportInput) -> str:
    """The closing line first, as the terminal, report.md and the summary say it."""
    if not inp.closing:
        return ""
    box = "ok-box" if inp.closing.startswith("agentdrift: exit 0 ") else "bad-box"
    return f'<p class="{box}" id="closing"><b>{esc(inp.closing)}</b></p>'


def _usage_totals(tasks: Mapping[str, TaskEntry]) -> tuple[dict[str, float], int, int]:
    totals: dict[str, float] = {}
    reported = runs = 0
    for t in tasks.values():
        for run in t.get("runs", []):
            runs += 1
            usage = run.get("usage") or {}
            seen = False
            for key in ("input_tokens", "output_tokens", "cached_tokens", "cost_usd"):
                v = usage.get(key)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    totals[key] = totals.get(key, 0) + v
                    seen = True
            reported += seen
    return totals, reported, runs


def header_facts(inp: ReportInput) -> str:
    r = inp.results
    settings = r.get("settings") or {}
    tasks = r.get("tasks") or {}
    rows = _agent_rows(r.get("agent") or {}, tasks, json_object((inp.manifest or {}).get("identity")))
    rows.append(("isolation enforced", _isolation_text(r.get("isolation") or {})))
    rows.append(("limits", _limits_text(r, settings)))
    rows.append(("repetitions", f"k = {esc(settings.get('k', '?'))}; fail on {esc(settings.get('fail_on', 'any'))}"))
    for key in ("runtime_id", "task_set_id", "evaluator_id"):
        rows.append((key.replace("_", " "), code(r.get(key)) if r.get(key) else '<span class="mut">none</span>'))
    start, end = parse_time(r.get("started_at")), parse_time(r.get("finished_at"))
    when = f"{esc(r.get('started_at', '?'))} \u2192 {esc(r.get('finished_at', '?'))}"
    if start and end:
        when += f" ({duration((end - start).total_seconds())})"
    rows.append(("when", when))
    rows.append(("tokens and cost", _usage_text(tasks)))
    if r.get("merged_from"):
        rows.append(("merged from", ", ".join(code(x) for x in r["merged_from"])))
    if isinstance(r.get("regraded_from"), Mapping):
        src = r["regraded_from"]
        rows.append(
            (
                "regraded",
                f"{esc(src.get('at', '?'))} from run {code(src.get('run_id'))}, graded then by evaluator "
                f"{code(src.get('evaluator_id'))}: the agent's runs are that record's, the checks are today's",
            )
        )
    rows.append(("plugin", f"pytest-agentdrift {esc(r.get('plugin_version', '?'))}"))
    return dl(rows)


def _agent_rows(
    agent: Mapping[str, object], tasks: Mapping[str, TaskEntry], identity: Mapping[str, object]
) -> list[tuple[str, str]]:
    """The agent, its command line and the model stamps the runs reported."""
    rows: list[tuple[str, str]] = []
    rows.append(
        (
            "agent",
            f"{code(agent.get('name', '?'))} version {code(agent.get('version', '?'))}"
            + (
                f' <span class="mut">({esc(agent.get("product"))}, {esc(agent.get("surface"))})</span>'
                if agent.get("product")
                else ""
            ),
        )
    )
    argv = agent.get("argv")
    if isinstance(argv, list) and argv:
        rows.append(("command", code(" ".join(str(a) for a in argv))))
    stamps = sorted(
        {str(run.get("model_stamp")) for t in tasks.values() for run in t.get("runs", []) if run.get("model_stamp")}
    )
    model = ", ".join(code(s) for s in stamps) if stamps else "none reported by the host"
    if is_concrete(identity.get("model_id")):
        model += f' <span class="mut">(requested {code(identity["model_id"])})</span>'
    rows.append(("model stamp", model))
    return rows


def _isolation_text(iso: IsolationRecord) -> str:
    iso_text = (
        f"<b>{esc(iso.get('enforced', '?'))}</b> (network {esc(iso.get('network', '?'))}, file system "
        f"{esc(iso.get('filesystem', '?'))}"
        + (", PID namespace" if iso.get("pid_namespace") else "")
        + (", capabilities dropped" if iso.get("cap_drop") else "")
        + ")"
    )
    if iso.get("requested"):
        iso_text += f' <span class="mut">requested {esc(iso["requested"])}</span>'
    if iso.get("enforced") == "none":
        iso_text += ' <span class="warn">runs were NOT isolated: effects were detected, not prevented</span>'
    for note in iso.get("notes") or []:
        iso_text += f'<br><span class="mut">{esc(note)}</span>'
    return iso_text


def _limits_text(r: Results, settings: SettingsRecord) -> str:
    limits = [
        f"timeout {esc(settings['timeout_s'])} s per run"
        if settings.get("timeout_s") is not None
        else "timeout: each task's own timeout_s"
    ]
    for source in (r.get("limits"), settings.get("limits")):
        if isinstance(source, Mapping):
            limits += [f"{esc(k)} {esc(human_limit(k, v))}" for k, v in sorted(source.items())]
    return "; ".join(limits)


def _usage_text(tasks: Mapping[str, TaskEntry]) -> str:
    totals, reported, runs = _usage_totals(tasks)
    if not totals:
        return '<span class="mut">not reported by the agent</span>'
    usage = ", ".join(
        f"{k.replace('_', ' ')} {num(round(v, 4) if isinstance(v, float) else v)}" for k, v in totals.items()
    )
    return f'{usage} <span class="mut">({reported} of {runs} run(s) reported usage)</span>'
