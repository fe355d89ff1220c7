"""The trend page in a real browser: headless Chromium renders `agentdrift trend --html` of the seeded
nightly series (tests/unit/test_trend.py) with no request and no console error, one plot per task and
layer, the two identity changes drawn on the time axis and the one move ringed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))
from cdp_pipe import Chromium, find_chromium
from test_trend import write_series

pytestmark = pytest.mark.slow
CHROMIUM = find_chromium()


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary on PATH: install Debian's chromium package")
def test_trend_page_renders_clean(tmp_path):
    paths = write_series(tmp_path / "series")
    page = tmp_path / "trend.html"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_agentdrift", "trend", *map(str, paths), "--html", str(page)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    chrome = Chromium(CHROMIUM)
    try:
        sid = chrome.open(page)
        log = chrome.logs[sid]
        own = page.absolute().as_uri()
        assert sorted({u for u in log.requests if u.split("#", 1)[0] != own}) == []
        assert log.blocked == [] and log.console_errors == []
        plots = chrome.evaluate(sid, "document.querySelectorAll('.plot svg').length")
        assert plots == 8  # four tasks, overall and correctness each
        # the two changes: one dashed line each in every plot
        assert chrome.evaluate(sid, "document.querySelectorAll('.plot svg line[stroke-dasharray]').length") == 2 * plots
        # the one move, ringed in T03's two plots
        assert chrome.evaluate(sid, "document.querySelectorAll('circle[stroke=\"#cf222e\"]').length") == 2
        moves = chrome.evaluate(sid, "[...document.querySelectorAll('li.moved')].map(e => e.innerText)")
        assert [m.split(":")[0] for m in moves] == ["T03 overall", "T03 correctness"]
        rows = chrome.evaluate(sid, "document.querySelectorAll('table tr').length")
        assert rows == 11  # header + ten records
        chrome.screenshot(sid, tmp_path / "trend.png")
    finally:
        chrome.close()
