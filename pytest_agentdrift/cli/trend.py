"""`agentdrift trend RUN... [--html FILE] [--markdown FILE] [--json]`: a series of records over time (compare/trend.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pytest_agentdrift.cli.common import out as _out
from pytest_agentdrift.vocabulary import EXIT_OK


def cmd_trend(args: argparse.Namespace) -> int:
    from pytest_agentdrift.compare import trend
    from pytest_agentdrift.record.store import atomic_write

    doc = trend.analyse([trend.load_record(Path(p)) for p in args.runs])
    if args.html:
        from pytest_agentdrift.record.trendpage import trend_page

        atomic_write(Path(args.html), trend_page(doc))
    if args.markdown:
        atomic_write(Path(args.markdown), trend.markdown(doc))
    if args.json:
        _out(json.dumps(doc, indent=2, sort_keys=True))
    else:
        for line in trend.terminal(doc):
            _out(line)
        for what, path in (("html", args.html), ("markdown", args.markdown)):
            if path:
                _out(f"wrote {what}: {path}")
    return EXIT_OK


def register(sub) -> None:
    t = sub.add_parser("trend", help="pass rates per task and layer over a series of records, changes and moves marked")
    t.add_argument("runs", nargs="+")
    t.add_argument("--html", help="write the self-contained trend page here")
    t.add_argument("--markdown", help="write the Markdown table here")
    t.add_argument("--json", action="store_true", help="print the trend document as JSON")
    t.set_defaults(fn=cmd_trend)
