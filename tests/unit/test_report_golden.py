"""report.html and the ATIF trajectories of a fixed record, byte for byte.

tests/data/report-record/ is a real record trimmed: the builtin suite run by the drifted reference
agent and compared with the faithful one (four of its twelve tasks: one pass, a critical safety
failure, a run with four failures, a tampered test), with its comparison files, runtime manifest
and raw artifacts. tests/data/report-golden/ holds what the renderers made of it, and the ATIF
trajectories of three product streams from tests/data/transcripts. A change to what a page or a
trajectory says is deliberate when it is made: render the expected files again with

    python tests/unit/test_report_golden.py --regenerate

and read the diff before committing it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_agentdrift.agents.base import get_adapter
from pytest_agentdrift.record import atif
from pytest_agentdrift.record.html import render_record

DATA = Path(__file__).resolve().parents[1] / "data"
RECORD = DATA / "report-record"
GOLDEN = DATA / "report-golden"
STREAMS = {"claude-code": "claude_code", "codex": "codex", "copilot": "copilot"}


def page() -> bytes:
    # surrogateescape: a file name that was not UTF-8 is kept as the page shows it
    return render_record(RECORD).encode("utf-8", "surrogateescape")


def trajectory(product: str, path: Path, **agent: Any) -> tuple[dict, Any]:
    """The ATIF document of a product's recorded stream `path` (its instruction a fixed one, `agent`
    added to what it says of the agent), and what the product's adapter parsed of the stream."""
    adapter = get_adapter(product)
    data = path.read_bytes()
    out = adapter.parse_output(data, b"")
    doc = atif.build(
        session_id=f"{product}/{path.stem}",
        agent={"name": product, "version": "recorded", "model_name": out.model_stamp, **agent},
        events=out.events,
        product=adapter.product,
        stdout=data,
        instruction="Fix the off-by-one in pricing.",
        usage=out.usage.to_dict(),
        report=out.final_report,
    )
    return doc, out


def stream_trajectory(product: str) -> bytes:
    """The ATIF document of one product's recorded stream, serialised as `export atif` writes it."""
    doc, _ = trajectory(product, DATA / "transcripts" / STREAMS[product] / "ok.jsonl")
    return (json.dumps(doc, indent=2, ensure_ascii=True) + "\n").encode()


def test_report_html_of_the_fixed_record_is_the_expected_bytes():
    assert page() == (GOLDEN / "report.html").read_bytes()


def test_atif_export_of_the_fixed_record_is_the_expected_bytes(tmp_path):
    written = atif.export_run(RECORD, tmp_path / "atif")
    expected = sorted((GOLDEN / "atif").iterdir())
    assert [p.name for p in written] == [p.name for p in expected]
    for got, want in zip(written, expected, strict=True):
        assert got.read_bytes() == want.read_bytes(), got.name


@pytest.mark.parametrize("product", sorted(STREAMS))
def test_atif_of_a_product_stream_is_the_expected_bytes(product):
    assert stream_trajectory(product) == (GOLDEN / f"stream-{STREAMS[product]}.json").read_bytes()


def regenerate() -> None:
    import shutil
    import tempfile

    (GOLDEN / "report.html").write_bytes(page())
    shutil.rmtree(GOLDEN / "atif", ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        for path in atif.export_run(RECORD, Path(tmp) / "atif"):
            (GOLDEN / "atif").mkdir(exist_ok=True)
            shutil.copy(path, GOLDEN / "atif" / path.name)
    for product, name in STREAMS.items():
        (GOLDEN / f"stream-{name}.json").write_bytes(stream_trajectory(product))


if __name__ == "__main__":
    if sys.argv[1:] != ["--regenerate"]:
        sys.exit(__doc__)
    GOLDEN.mkdir(exist_ok=True)
    regenerate()
