"""report.html: one self-contained page for a recorded run and its comparison. No pytest.

    load_input(run_dir, results=None)  -> ReportInput   the record's files, read leniently
    render(inp)                        -> str           the page (pure: no I/O)
    render_record(run_dir, results)    -> str           both, for the controller and the CLI
    record_page(run_dir, results)      -> str           render_record, or a page saying why it failed

The page loads nothing: inline CSS, inline SVG and a few lines of inline
script (opening collapsed sections on link navigation), pinned by a
Content-Security-Policy that allows only those two inline blocks (by hash),
so a string that slipped past escaping still could not fetch or run anything.

Everything the agent could influence (file names, patch, events, report,
stdout, check details and evidence) goes through `esc`: HTML-escaped, and
control characters, lone surrogates (bytes that were not UTF-8, kept by
surrogateescape) and bidirectional overrides shown as visible escapes such
as ``\\x1b`` or ``\\n``, never emitted raw.

A large suite stays usable: every task and every run is a collapsed
<details>; raw artifacts are read only up to a bound and the cut is marked.

One module a job, in the page's order: `document` puts the sections together
inside `page`'s shell (static/report.css and static/report.js, the only inline
blocks); `header`, `summary`, `comparison` (with `plots`, `paired`,
`manifestdiff`), `grid`, `runs` (with `artifacts`, the raw files) and `legend`
are the sections; `reportinput` reads the record, `escape`, `anchors`, `marks`
and `fmt` are what every section writes with.
"""

from pytest_agentdrift.record.html.anchors import check_anchor, evidence_anchor, run_anchor, slug, task_anchor
from pytest_agentdrift.record.html.artifacts import EVENTS_LIMIT, HEAD_LIMIT, PATCH_LIMIT, SMALL_LIMIT, render_patch
from pytest_agentdrift.record.html.document import record_page, render, render_failure_page, render_record
from pytest_agentdrift.record.html.escape import attr, esc, visible
from pytest_agentdrift.record.html.marks import LAYER_MEANING, OUTCOMES, run_state
from pytest_agentdrift.record.html.page import csp_hash
from pytest_agentdrift.record.html.reportinput import RawArtifact, ReportInput, inside, load_input

__all__ = [
    "EVENTS_LIMIT",
    "HEAD_LIMIT",
    "LAYER_MEANING",
    "OUTCOMES",
    "PATCH_LIMIT",
    "SMALL_LIMIT",
    "RawArtifact",
    "ReportInput",
    "attr",
    "check_anchor",
    "csp_hash",
    "esc",
    "evidence_anchor",
    "inside",
    "load_input",
    "record_page",
    "render",
    "render_failure_page",
    "render_patch",
    "render_record",
    "run_anchor",
    "run_state",
    "slug",
    "task_anchor",
    "visible",
]
