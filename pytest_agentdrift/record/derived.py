"""A record made from other records (`agentdrift merge`, `agentdrift regrade`), written whole. No pytest.

The new record is built in a temporary directory beside its destination and
renamed into place at the end, so the destination either does not exist or
holds the whole record; results.json is written last.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_agentdrift.shapes import Results
from pytest_agentdrift.vocabulary import REPORT_HTML_FILE, REPORT_MD_FILE


@contextmanager
def derived_record(out: Path, results: Results, purpose: str) -> Iterator[Path]:
    """The temporary directory to fill; on leaving, report.md, report.html and results.json are
    written into it and it is renamed to ``out``. On any failure nothing is left behind."""
    from pytest_agentdrift.canonical import dumps_pretty
    from pytest_agentdrift.record.html import record_page
    from pytest_agentdrift.record.report import markdown
    from pytest_agentdrift.record.store import atomic_write, write_sealed

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.{purpose}-", dir=out.parent))
    try:
        yield tmp
        atomic_write(tmp / REPORT_MD_FILE, markdown(results))
        atomic_write(tmp / REPORT_HTML_FILE, record_page(tmp, results))
        write_sealed(tmp, dumps_pretty(results))
        os.rename(tmp, out)  # fails if OUT appeared meanwhile: never over another record
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


__all__ = ["derived_record"]
