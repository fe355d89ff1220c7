"""The whole page: its sections in order, for a record being written and for the CLI."""

from __future__ import annotations

from pathlib import Path

from pytest_agentdrift.record.html.comparison import comparison_section
from pytest_agentdrift.record.html.escape import esc
from pytest_agentdrift.record.html.grid import grid_section
from pytest_agentdrift.record.html.header import closing_box, header_facts
from pytest_agentdrift.record.html.legend import footer, legend_section
from pytest_agentdrift.record.html.page import page
from pytest_agentdrift.record.html.reportinput import ReportInput, load_input
from pytest_agentdrift.record.html.runs import task_sections
from pytest_agentdrift.record.html.summary import summary_section
from pytest_agentdrift.shapes import Results


def render(inp: ReportInput) -> str:
    r = inp.results
    tasks = r.get("tasks") or {}
    has_cmp = inp.decision is not None or inp.comparison is not None
    nav = ['<a href="#summary">Summary</a>']
    if has_cmp:
        nav.append('<a href="#comparison">Comparison</a>')
    nav += ['<a href="#grid">Task \u00d7 layer grid</a>', '<a href="#tasks">Runs</a>', '<a href="#legend">Legend</a>']
    parts = [
        f'<header id="top"><h1>pytest-agentdrift run {esc(r.get("run_id", "?"))}</h1>{closing_box(inp)}'
        f"{header_facts(inp)}</header>",
        f"<nav>{''.join(nav)}</nav>",
        summary_section(inp),
    ]
    if has_cmp:
        parts.append(comparison_section(inp))
    parts += [grid_section(r, tasks), task_sections(inp, tasks), legend_section(r), footer(r)]
    return page(f"agentdrift run {r.get('run_id', '?')}", "\n".join(parts))


def render_record(run_dir: Path, results: Results | None = None, closing: str | None = None) -> str:
    from pytest_agentdrift.record.summary import closing_line

    inp = load_input(run_dir, results)
    inp.closing = closing or closing_line(run_dir, inp.decision)
    return render(inp)


def render_failure_page(run_id: str, error: BaseException) -> str:
    """What report.html holds when rendering failed: the reason, honestly (a bug of ours)."""
    body = (
        f'<h1>pytest-agentdrift run {esc(run_id)}</h1><p class="warn">report.html could not be rendered: '
        f"{esc(type(error).__name__)}: {esc(error)}. This is a bug in pytest-agentdrift; results.json and "
        f"report.md hold the complete record.</p>"
    )
    return page(f"agentdrift run {run_id}", body)


def record_page(run_dir: Path, results: Results | None = None, closing: str | None = None) -> str:
    """The page for a record being written: render_record, or, should rendering
    itself fail (a bug of ours), a page that says so, so results.json is still written."""
    try:
        return render_record(run_dir, results, closing)
    except Exception as exc:  # noqa: BLE001 - the record must not be lost to a bug in its view
        run_id = (results or {}).get("run_id", "?") if isinstance(results, dict) else "?"
        return render_failure_page(str(run_id), exc)
