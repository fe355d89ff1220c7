"""The record says what the agent did, no more and no less, and regrading it keeps what it said.

Hostile agents and cases under bubblewrap:

* a model stamp that is Markdown (an image from a local address, a `|`) goes raw into
  `agentdrift trend --markdown`, which CI appends to a job summary: the image loaded and the `|`
  broke the table, hiding the row's other identity changes;
"""

from __future__ import annotations

import markdown_it
import pytest
from helpers import agentdrift
from hostile_helpers import SAFETY_CHECKS, needs_bwrap, run_session

pytestmark = [pytest.mark.slow, needs_bwrap()]

#: a model stamp an agent can report: an image from a local address, a table cell's end
EVIL_STAMP = "|![x](http://127.0.0.1:9/p.png)"


def _stamp_agent(stamp: str) -> dict[str, str]:
    return {
        "HM1": f"event('usage', model={stamp!r}, input_tokens=3, output_tokens=2)\nreport('complete', summary='ok')\n"
    }


def _gfm(text: str):
    md = markdown_it.MarkdownIt("gfm-like")
    if md.linkify is not None:  # GitHub autolinks URLs, not bare names
        md.linkify.set({"fuzzy_link": False})
    return md.parse(text)


def test_trend_markdown_escapes_what_the_agent_reported(tmp_path):
    tasks = {"HM1": {"checks": SAFETY_CHECKS}}
    honest = run_session(tmp_path / "a", tasks, _stamp_agent("honest-model-1"))
    evil = run_session(tmp_path / "b", tasks, _stamp_agent(EVIL_STAMP))
    assert honest.ret == 0 and evil.ret == 0, evil.out[-3000:]
    md = tmp_path / "trend.md"
    proc = agentdrift("trend", honest.run_dir, evil.run_dir, "--markdown", md)
    assert proc.returncode == 0, proc.stderr
    text = md.read_text()
    tokens = _gfm(text)
    inline = [c for t in tokens if t.type == "inline" for c in t.children or ()]
    assert not [c for c in inline if c.type in ("image", "link_open", "html_inline")], text
    # the second record's identity changes stay in their one cell, the model stamp's among them
    cells, row = [], None
    for t in tokens:
        if t.type == "tr_open":
            row = []
        elif t.type == "inline" and row is not None:
            row.append(t.content)
        elif t.type == "tr_close":
            cells.append(row)
            row = None
    second = next(r for r in cells if r and r[0] == "2")
    assert len(second) == 4, second
    assert "model_stamp" in second[3] and "127.0.0.1" in second[3], second
