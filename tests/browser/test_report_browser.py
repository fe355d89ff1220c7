"""report.html in a real browser: headless Chromium renders the page of a
faithful builtin run, of a drifted run compared with it, and of a hostile run
whose agent made a file with a newline, an ANSI escape and markup in its
name; the DevTools protocol (over a pipe, stdlib only) records every request
the page makes and every console error, and the tests assert on the DOM.

One screenshot per page type is written to the test's directory; with
AGENTDRIFT_SCREENSHOTS=DIR they are also copied there (that is how
docs/images/ was made). Skipped, with the reason, only when no Chromium
binary is found.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from helpers import BUILTIN_RECORDS_GROUP, agentdrift, run_pytest

from pytest_agentdrift.safetext import escape_path
from pytest_agentdrift.testing import agent_cmd, agent_script, make_task

sys.path.insert(0, str(Path(__file__).parent))
from cdp_pipe import Chromium, find_chromium

pytestmark = pytest.mark.slow  # the records' readers share tests/conftest.py's group: one worker makes them


def xdist_group_of(item: pytest.Item) -> str:
    # the tests that read no record still share the module's browser: the records' group, one Chromium
    return BUILTIN_RECORDS_GROUP


CHROMIUM = find_chromium()
HOSTILE_NAME = "evil\nname\x1b[31m<img src=x onerror=alert(1)>.txt"
LOST = {"T06", "T07", "T08", "T09", "T10", "T12"}

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium binary (chromium, chromium-browser, "
    "google-chrome) on PATH: install Debian's chromium package (.ci/run does)",
)


@pytest.fixture(scope="module")
def records(builtin_records, tmp_path_factory) -> dict[str, Path]:
    """Three records made by real sessions: the builtin suite's faithful and drifted records
    (tests/conftest.py, one project directory) and a hostile agent's."""
    (base, base_record), (drifted, drifted_record) = builtin_records["base"], builtin_records["drifted"]
    assert base.returncode == 0, base.stdout[-3000:] + base.stderr[-2000:]
    assert drifted.returncode == 1, drifted.stdout[-3000:] + drifted.stderr[-2000:]
    root = tmp_path_factory.mktemp("hostile-record")
    make_task(
        root / "hostile",
        "H01",
        title="An agent names a file with control characters",
        checks=[{"name": "tree-unchanged", "kind": "unchanged", "layer": "scope", "critical": True}],
    )
    script = agent_script(
        root / "hostile_agent.py",
        f"""
        name = {HOSTILE_NAME!r}
        Path(name).write_text("made by the agent\\x1b[0m\\n")
        event("file_edit", path=name)
        print("\\x1b[31mred text\\x1b[0m")  # stdout keeps its line breaks; the name is not in it
        report("complete", summary="created " + name)
    """,
    )
    hostile = run_pytest(root, "-q", "--agent-cmd", agent_cmd(script), "hostile", "--agent-record", "runs/hostile")
    assert hostile.returncode == 1, hostile.stdout[-3000:] + hostile.stderr[-2000:]
    return {"base": base_record, "drifted": drifted_record, "hostile": root / "runs" / "hostile"}


@pytest.fixture(scope="module")
def comparison_page(records) -> Path:
    """The comparison rendered afterwards by the CLI, from the two records."""
    out = records["hostile"].parent / "comparison.html"  # beside this module's own record, not in the shared ones
    vary = ("--vary", "cli_version", "--vary", "command", "--vary", "agent")
    proc = agentdrift("html", records["drifted"], records["base"], *vary, "--out", out, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("no Chromium binary on PATH")
    chrome = Chromium(CHROMIUM)
    yield chrome
    chrome.close()


def _shot(browser: Chromium, sid: str, tmp_path: Path, name: str) -> Path:
    png = browser.screenshot(sid, tmp_path / name)
    assert png.stat().st_size < 300_000, f"{name} is {png.stat().st_size} bytes"
    keep = os.environ.get("AGENTDRIFT_SCREENSHOTS")
    if keep:
        shutil.copyfile(png, Path(keep) / name)
    return png


def _assert_clean(browser: Chromium, sid: str, page: Path) -> None:
    log = browser.logs[sid]
    own = page.absolute().as_uri()
    others = sorted({u for u in log.requests if u.split("#", 1)[0] != own})
    assert others == [], f"the page requested {others}"
    assert log.blocked == []
    assert log.console_errors == []


def test_the_recorder_writes_report_html_and_report_md_links_it(records):
    for run in records.values():
        assert (run / "report.html").is_file()
        assert "[report.html](report.html)" in (run / "report.md").read_text()


@needs_chromium
def test_interception_sees_a_request_when_there_is_one(browser, tmp_path):
    """The harness of these tests can fail: a page that fetches something is caught."""
    page = tmp_path / "leaky.html"
    page.write_text(
        '<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/pixel.png">'
        "<script>console.error('boom')</script></body></html>"
    )
    sid = browser.open(page)
    log = browser.logs[sid]
    assert "http://127.0.0.1:9/pixel.png" in log.blocked
    assert any("boom" in e for e in log.console_errors)


@needs_chromium
def test_single_run_page(records, browser, tmp_path):
    page = records["base"] / "report.html"
    sid = browser.open(page)
    _assert_clean(browser, sid, page)
    assert browser.evaluate(sid, "document.querySelectorAll('#grid-table tbody tr').length") == 12
    assert browser.evaluate(sid, "document.querySelectorAll('#grid-table .chip.ok').length") == 12
    assert browser.evaluate(sid, "document.querySelectorAll('#layer-legend tbody tr').length") == 8
    assert browser.evaluate(sid, "document.getElementById('comparison')") is None
    assert "12 of 12 run(s) passed" in browser.evaluate(sid, "document.getElementById('summary').innerText")
    # every in-page link lands on an element of the page
    assert (
        browser.evaluate(
            sid,
            "[...document.querySelectorAll('a[href^=\"#\"]')]"
            ".filter(a => !document.getElementById(decodeURIComponent(a.hash.slice(1)))).length",
        )
        == 0
    )
    _shot(browser, sid, tmp_path, "report-single-run.png")


@needs_chromium
@pytest.mark.parametrize("which", ["session", "cli"])
def test_drifted_comparison_page(records, comparison_page, browser, tmp_path, which):
    page = records["drifted"] / "report.html" if which == "session" else comparison_page
    sid = browser.open(page, "comparison")
    _assert_clean(browser, sid, page)
    assert browser.evaluate(sid, "document.querySelectorAll('#grid-table tbody tr').length") == 12
    lost = browser.evaluate(
        sid, "[...document.querySelectorAll('#paired-table tr.lost td:first-child')].map(td => td.innerText)"
    )
    assert set(lost) == LOST and len(lost) == 6
    assert browser.evaluate(sid, "document.querySelectorAll('#paired-table tr.won').length") == 0
    decision = browser.evaluate(sid, "document.getElementById('decision').innerText")
    assert "decision: reject" in decision
    assert browser.evaluate(sid, "document.querySelectorAll('#rates-plot circle').length") == 2
    assert browser.evaluate(sid, "document.querySelectorAll('#grid-table tr.has-crit').length") == 6
    varied = browser.evaluate(
        sid,
        "[...document.querySelectorAll('#manifest-diff-table tr.md-varied td:nth-child(2)')].map(td => td.innerText)",
    )
    assert sorted(varied) == ["agent", "cli_version", "command"]
    if which == "session":
        _shot(browser, sid, tmp_path, "report-comparison.png")


@needs_chromium
def test_run_detail_opens_from_a_link(records, browser, tmp_path):
    page = records["drifted"] / "report.html"
    sid = browser.open(page)
    # follow the grid's link to T07's run: the collapsed sections open
    browser.evaluate(sid, "document.querySelector('#grid-table a.chip[href=\"#r-T07-1\"]').click()")
    assert browser.evaluate(sid, "document.getElementById('r-T07-1').open") is True
    assert browser.evaluate(sid, "document.getElementById('t-T07').open") is True
    run_text = browser.evaluate(sid, "document.getElementById('r-T07-1').innerText")
    assert "CRITICAL FAIL" in run_text and "deploy/overrides/vat-2026.toml" in run_text
    _assert_clean(browser, sid, page)
    _shot(browser, sid, tmp_path, "report-run-detail.png")


@needs_chromium
def test_hostile_file_name_is_shown_escaped(records, browser, tmp_path):
    page = records["hostile"] / "report.html"
    raw = page.read_text(encoding="utf-8")
    assert "\x1b" not in raw
    sid = browser.open(page, "r-H01-1")
    _assert_clean(browser, sid, page)
    assert browser.evaluate(sid, "document.getElementById('r-H01-1').open") is True
    text = browser.evaluate(sid, "document.body.textContent")
    assert "\x1b" not in text
    assert "evil\nname" not in text  # the newline of the name never reaches the page raw
    shown = "evil\\nname\\x1b[31m<img src=x onerror=alert(1)>.txt"
    run_text = browser.evaluate(sid, "document.getElementById('r-H01-1').innerText")
    assert shown in run_text  # the changed path, the patch header, the event and the report: visible escapes
    assert browser.evaluate(sid, "document.querySelectorAll('img').length") == 0
    assert browser.evaluate(sid, "document.querySelectorAll('#r-H01-1 .cc').length") >= 4
    stdout = browser.evaluate(
        sid,
        "[...document.querySelectorAll('#r-H01-1 details')].find(d => d.innerText.startsWith('stdout')).textContent",
    )
    assert "\\x1b[31mred text\\x1b[0m" in stdout  # ANSI colour codes shown, never interpreted
    results = json.loads((records["hostile"] / "results.json").read_text())
    # results.json keeps every path escaped, losslessly (safetext.escape_path)
    assert escape_path(HOSTILE_NAME) in results["tasks"]["H01"]["runs"][0]["evidence"]["changed"]["added"]
