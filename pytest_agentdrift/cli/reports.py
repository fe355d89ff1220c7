"""`agentdrift html`, `agentdrift show --html / --json` and `agentdrift export atif`.

    agentdrift html RUN [BASE] [--out FILE]   render report.html (with BASE: compared against BASE)
    agentdrift show RUN --html | --json        the path of RUN's report.html (rendered when missing) / results.json
    agentdrift export atif RUN [--out DIR]     one ATIF trajectory file per run

cli.py registers these with two calls (`extend_show`, `register`); the
commands live here so the report features stay in one place.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_agentdrift.cli.common import add_ini_args
from pytest_agentdrift.cli.common import out as _out
from pytest_agentdrift.errors import EXIT_OK, AgentDriftError
from pytest_agentdrift.options import add_cli_flags, resolve_cli_flags
from pytest_agentdrift.vocabulary import COMPARISON_FILE, DECISION_FILE, MANIFEST_DIFF_FILE, REPORT_HTML_FILE


def _write_new(path: Path, text: str) -> None:
    """Atomically write a page the user asked for."""
    from pytest_agentdrift.record.store import atomic_write

    if path.exists() and path.is_dir():
        raise AgentDriftError("is a directory; give a file name", path)
    try:
        atomic_write(path, text)
    except OSError as exc:
        raise AgentDriftError(f"cannot write: {exc.strerror or exc}", path) from None


def comparison_input(
    run: Path,
    base: Path,
    vary: list[str],
    accept_unobserved: list[str] | None,
    seed: int,
    gate_scope: str,
    config_file: str | None = None,
    rootdir: str | None = None,
):
    """RUN compared with BASE the way `agentdrift compare` does it (the same resolver and comparison)."""
    from pytest_agentdrift.cli.common import load_pair
    from pytest_agentdrift.compare.outcome import compare_recorded
    from pytest_agentdrift.record.html import ReportInput

    pair = load_pair(base, run, vary, accept_unobserved, config_file, rootdir)
    base_results, cand_results, cmp, accepted, cand_manifest = (
        pair.base,
        pair.cand,
        pair.cmp,
        pair.accepted,
        pair.cand_manifest,
    )
    outcome = compare_recorded(
        base_results, cand_results, cmp, gate=None, seed=seed, accepted=accepted.to_dict(), gate_scope=gate_scope
    )
    inp = ReportInput(
        results=cand_results,
        run_dir=run,
        decision=outcome.files[DECISION_FILE],
        comparison=outcome.files[COMPARISON_FILE],
        manifest_diff=outcome.files[MANIFEST_DIFF_FILE],
        manifest=cand_manifest,
        baseline_label=f"{base} (run {base_results.get('run_id')})",
    )
    note = next((line for line in outcome.lines if line.startswith("note  compared on")), None)
    if note:
        inp.notes.append(note.removeprefix("note").strip())
    return inp, base_results


def cmd_html(args: argparse.Namespace) -> int:
    from pytest_agentdrift.record.html import load_input, render

    run = Path(args.run)
    if args.base is None:
        inp = load_input(run)
        out = Path(args.out) if args.out else run / REPORT_HTML_FILE
        if args.out is None and out.exists():
            raise AgentDriftError(
                "already holds report.html and a record is never rewritten; give --out FILE to render another copy", run
            )
    else:
        opts = resolve_cli_flags(args, "vary", "seed")
        inp, base_results = comparison_input(
            run,
            Path(args.base),
            list(opts["vary"]),
            args.accept_unobserved,
            opts["seed"],
            args.gate_scope,
            args.config_file,
            args.rootdir,
        )
        name = f"report-{inp.results.get('run_id')}-vs-{base_results.get('run_id')}.html"
        out = Path(args.out) if args.out else Path.cwd() / name
    _write_new(out, render(inp))
    _out(f"wrote {out}")
    return EXIT_OK


def cmd_show(args: argparse.Namespace, plain) -> int:
    if not (args.html or args.json):
        return plain(args)
    from pytest_agentdrift.record.store import load_results

    run = Path(args.run)
    results = load_results(run, require_complete=False)
    if args.json:
        # ensure_ascii: a file name that was not UTF-8 (a lone surrogate) still prints
        _out(json.dumps(results, indent=2, sort_keys=True, ensure_ascii=True))
        return EXIT_OK
    page = run / REPORT_HTML_FILE
    if not page.is_file():
        from pytest_agentdrift.record.html import render_record

        _write_new(page, render_record(run, results))
        print(f"agentdrift: {run} had no report.html; rendered it", file=sys.stderr)
    _out(str(page))
    return EXIT_OK


def cmd_export_atif(args: argparse.Namespace) -> int:
    from pytest_agentdrift.record.atif import SCHEMA_VERSION, export_run
    from pytest_agentdrift.record.store import load_results

    run = Path(args.run)
    results = load_results(run, require_complete=False)  # read and validated once
    out = Path(args.out) if args.out else Path.cwd() / f"atif-{results.get('run_id')}"
    paths = export_run(run, out, [Path(p) for p in args.tasks], results=results)
    _out(f"wrote {len(paths)} {SCHEMA_VERSION} trajectory file(s) to {out}")
    return EXIT_OK


def extend_show(parser: argparse.ArgumentParser) -> None:
    """`show RUN` gains --html and --json; without them it prints the summary as before."""
    plain = parser.get_default("fn")
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--html",
        action="store_true",
        help="print the path of the run's report.html (rendered first when the record has none)",
    )
    group.add_argument("--json", action="store_true", help="print results.json")
    parser.set_defaults(fn=lambda args: cmd_show(args, plain))


def register(sub: Any) -> None:
    """Add `html` and `export` to the agentdrift subcommands."""
    h = sub.add_parser("html", help="render report.html for a recorded run, or for RUN compared with BASE")
    h.add_argument("run")
    h.add_argument("base", nargs="?", default=None)
    h.add_argument(
        "--out",
        help="the file to write (default: RUN/report.html when it has none; with BASE, "
        "report-<run>-vs-<base>.html in the current directory)",
    )
    add_cli_flags(h, "vary", "accept_unobserved", "seed")
    h.add_argument("--gate-scope", choices=("all", "critical"), default="all")
    add_ini_args(h)
    h.set_defaults(fn=cmd_html)
    e = sub.add_parser("export", help="export a recorded run in another format")
    # the same parser class as every other subcommand: usage errors exit 4
    formats = e.add_subparsers(dest="format", required=True, parser_class=type(e))
    a = formats.add_parser("atif", help="one ATIF-v1.7 trajectory (Harbor's format) per run")
    a.add_argument("run")
    a.add_argument("--out", help="directory to write into (default: ./atif-<run id>)")
    a.add_argument(
        "--tasks",
        action="append",
        default=[],
        help="a task directory or suite to find each run's instruction in (the builtin suite is searched too)",
    )
    a.set_defaults(fn=cmd_export_atif)
