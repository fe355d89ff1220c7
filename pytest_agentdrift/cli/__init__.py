"""`agentdrift`: what is not a test session.

    agentdrift validate TASK_DIR... [--k N]   a task decides: fails untouched, passes solved k of k,
                                              and each wrong solution it ships fails as its wrong.toml says
    agentdrift freeze TASK_DIR...             (re)write initial-tree.sha256 from repo/
    agentdrift show RUN [--html | --json]     the summary of a recorded run (or its report.html path / results.json)
    agentdrift html RUN [BASE] [--out FILE]   render report.html (with BASE: the comparison with BASE)
    agentdrift export atif RUN [--out DIR]    one ATIF trajectory file per run
    agentdrift diff BASE CAND [--vary F]      compare two runs' manifests (exit 6 when not comparable)
    agentdrift compare BASE CAND [...]        the plugin's statistics and decision on two recorded runs
    agentdrift summary RUN [--max-bytes N]    compact Markdown of a run for a CI step summary / PR comment
    agentdrift merge OUT SHARD...             one run from shards of one runtime recorded on several machines
    agentdrift regrade RUN --out NEW          RUN graded again by the current checks, without the agent (cli/regrade.py)
    agentdrift trend RUN... [--html FILE]     pass rates over a series of records, changes and moves marked (cli/trend.py)
    agentdrift bundle | task new | plan | null    a team's own setup (cli/experiments.py)

Exit codes are the plugin's: 0 good, 1 a check or the gate failed, 4 usage or
operational error, 6 refused (not comparable).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_agentdrift.cli.common import accepted_tokens, add_arguments, add_ini_args, load_pair
from pytest_agentdrift.cli.common import out as _out
from pytest_agentdrift.cli.validate import cmd_validate, protected_disagreement  # noqa: F401  (protected_disagreement: public)
from pytest_agentdrift.errors import AgentDriftError, PoolRefused
from pytest_agentdrift.options import add_cli_flags, resolve_cli_flags
from pytest_agentdrift.shapes import Results
from pytest_agentdrift.vocabulary import (
    DECISION_FILE,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_STATUS_KEY,
    EXIT_USAGE,
    INITIAL_TREE_FILE,
    SOURCE_MANIFEST_FILE,
)


def cmd_freeze(args: argparse.Namespace) -> int:
    from pytest_agentdrift.record.store import atomic_write
    from pytest_agentdrift.tasks.initialtree import check_symlinks, hash_repo, render_tree_file

    for p in args.tasks:
        d = Path(p)
        if not (d / "repo").is_dir():
            raise AgentDriftError("no repo/ directory", d)
        check_symlinks(d)
        atomic_write(d / INITIAL_TREE_FILE, render_tree_file(hash_repo(d / "repo")))
        _out(f"froze {d / INITIAL_TREE_FILE}")
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    from pytest_agentdrift.record.report import summary_lines
    from pytest_agentdrift.record.store import load_results

    results = load_results(Path(args.run), require_complete=False)
    for line in summary_lines(results):
        _out(line)
    return EXIT_OK


def _accepted_tokens(args: argparse.Namespace) -> list[str]:
    return accepted_tokens(args.accept_unobserved, args.config_file, args.rootdir)


def _load_pair(args: argparse.Namespace, vary: tuple[str, ...]):
    window = resolve_cli_flags(args, "baseline_window")["baseline_window"]
    p = load_pair(
        Path(args.base), Path(args.cand), list(vary), args.accept_unobserved, args.config_file, args.rootdir, window
    )
    return p.base, p.cand, p.cmp, p.accepted


def cmd_diff(args: argparse.Namespace) -> int:
    from pytest_agentdrift.manifest.identity import manifest_diff_document, render_refusal

    base, cand, cmp, accepted = _load_pair(args, resolve_cli_flags(args, "vary")["vary"])
    if args.json:
        doc = manifest_diff_document(cmp)
        doc["accepted_unobserved"] = accepted.to_dict()
        _out(json.dumps(doc, indent=2, sort_keys=True))
    else:
        for line in accepted.lines() + render_refusal(cmp) + _regrade_hint(args, base, cand, cmp):
            _out(line)
    return EXIT_OK if cmp.comparable else EXIT_REFUSED


#: the options `agentdrift compare` shares with the plugin (declared once in options.py)
COMPARE_FLAGS = (
    "gate",
    "gate_flakes",
    "seed",
    "release_notes",
    "rollback_state",
    "rollback_evidence",
    "max_infra_loss",
)


def cmd_compare(args: argparse.Namespace) -> int:
    from pytest_agentdrift.cli.experiments import arm_documents, rows_gate_mode
    from pytest_agentdrift.compare.experiment import compare_with_rows

    opts = resolve_cli_flags(args, "vary", *COMPARE_FLAGS)
    try:
        base, cand, cmp, accepted = _load_pair(args, opts.pop("vary"))
    except PoolRefused as exc:
        return _pool_refused(exc)
    # the experiment rows; under --gate drop-it (or --drop-it) the drop-it gate sets the exit status
    compared = compare_with_rows(
        base,
        cand,
        cmp,
        base_docs=arm_documents(((base.get("pool") or {}).get("records") or [{"path": args.base}])[0]["path"]),
        cand_docs=arm_documents(args.cand),
        rows_gate_mode=rows_gate_mode(args),
        release_notes_given=args.release_notes is not None,
        accepted=accepted.to_dict(),
        gate_scope=args.gate_scope,
        **opts,
    )
    outcome, section, rows, verdict = compared.outcome, compared.section, compared.lines, compared.verdict
    decision = outcome.files[DECISION_FILE]
    decision[EXIT_STATUS_KEY] = verdict.to_dict()
    if args.json:
        from pytest_agentdrift.canonical import leading

        # the closing line first, in the decision as in decision.json
        doc = {"comparison": outcome.comparison, "decision": decision, "experiment": section}
        _out(json.dumps({**leading(doc, ()), "decision": leading(decision, (EXIT_STATUS_KEY,))}, indent=2))
    else:
        for line in accepted.lines() + outcome.lines + rows + _regrade_hint(args, base, cand, cmp):
            _out(line)
        _out(verdict.line)
    return verdict.code


def _pool_refused(exc: PoolRefused) -> int:
    """A directory of records none of which can be pooled: the refusal, each record's reason, the closing line."""
    from pytest_agentdrift.compare.outcome import Verdict
    from pytest_agentdrift.compare.pool import refusal_lines

    for line in refusal_lines(exc):
        _out(line)
    verdict = Verdict(EXIT_REFUSED, f"refused: {exc.message}")
    _out(verdict.line)
    return verdict.code


def _regrade_hint(args: argparse.Namespace, base: dict, cand: dict, cmp) -> list[str]:
    from pytest_agentdrift.manifest.identity import regrade_hint

    older = args.base if str(base.get("started_at", "")) <= str(cand.get("started_at", "")) else args.cand
    hint = regrade_hint(cmp, older)
    return [hint] if hint else []


def cmd_summary(args: argparse.Namespace) -> int:
    from pytest_agentdrift.record.summary import run_summary

    text = run_summary(Path(args.run), max_bytes=args.max_bytes)
    if args.output:
        from pytest_agentdrift.record.store import atomic_write

        atomic_write(Path(args.output), text)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_merge(args: argparse.Namespace) -> int:
    """One record from shards: one runtime, one task set, together complete and disjoint.

    The merged record is written into a temporary directory beside OUT and
    renamed into place at the end: OUT either does not exist or holds the
    whole record.
    """
    from pytest_agentdrift.errors import RecordError
    from pytest_agentdrift.record.merge import merge_shards, write_merged
    from pytest_agentdrift.record.results import new_run_id
    from pytest_agentdrift.record.store import check_record_target, schema_problems

    out = Path(args.out)
    check_record_target(out)  # nothing there, or an empty directory (the final rename replaces it)
    shards = [_load_shard(Path(p)) for p in args.shards]
    if not _one_runtime(shards, _accepted_tokens(args)):
        return EXIT_REFUSED
    merged = merge_shards([r for _, r, _ in shards], new_run_id(), _expected_items(shards))
    problems = schema_problems(merged)
    if problems:
        raise RecordError("the merged results do not match the schema: " + "; ".join(problems[:3]))
    write_merged(out, [(path, results) for path, results, _ in shards], merged)
    runs = merged["summary"]["runs"]
    _out(f"merged {len(shards)} shard(s), {len(merged['tasks'])} task(s), {runs} run(s), into {out}")
    return EXIT_OK


def _load_shard(path: Path) -> tuple[Path, Results, dict[str, Any]]:
    """(directory, results, validated runtime manifest) of one shard."""
    from pytest_agentdrift.canonical import load_json_file
    from pytest_agentdrift.errors import RecordError
    from pytest_agentdrift.manifest.capture import validate_manifest
    from pytest_agentdrift.record.store import load_results
    from pytest_agentdrift.vocabulary import MANIFEST_FILE

    results = load_results(path, require_complete=False)
    mpath = path / MANIFEST_FILE
    if not mpath.is_file():
        raise RecordError("the shard has no runtime manifest", mpath)
    return path, results, validate_manifest(load_json_file(mpath, RecordError), mpath)


def _one_runtime(shards: list[tuple[Path, Results, dict[str, Any]]], tokens: list[str]) -> bool:
    """Every shard's manifest is the first one's runtime; else the refusal on stderr and False."""
    from pytest_agentdrift.manifest.accept import resolve_for
    from pytest_agentdrift.manifest.identity import compare_manifests, render_refusal

    first_path, _, first_manifest = shards[0]
    for path, _, manifest in shards[1:]:
        accepted = resolve_for(tokens, first_manifest, manifest)
        cmp = compare_manifests(first_manifest, manifest, [], accept_unobserved=accepted.fields)
        if not cmp.comparable:
            print(f"agentdrift: {path} is not the same runtime as {first_path}", file=sys.stderr)
            for line in render_refusal(cmp):
                print(line, file=sys.stderr)
            return False
    return True


def _expected_items(shards: list[tuple[Path, Results, dict[str, Any]]]) -> set[str] | None:
    """The task set every shard was drawn from: the tasks its source manifest lists, k times each, or
    up to the cap when the shards confirmed (None when a shard has no source manifest)."""
    from pytest_agentdrift.canonical import load_json_file
    from pytest_agentdrift.errors import RecordError
    from pytest_agentdrift.record.merge import universe

    task_lists = set()
    for path, _, _ in shards:
        src = path / SOURCE_MANIFEST_FILE
        if src.is_file():
            doc = load_json_file(src, RecordError)
            task_lists.add(tuple(doc.get("tasks") or ()) if isinstance(doc, dict) else ())
    if len(task_lists) > 1:
        raise RecordError(
            "the shards were drawn from different task sets (their source manifests list different tasks)"
        )
    if len(task_lists) == 1 and all((path / SOURCE_MANIFEST_FILE).is_file() for path, _, _ in shards):
        first = shards[0][1]
        # a confirming session collects every repetition up to the cap (each run, or skipped as not needed)
        reps = first["confirm"]["cap"] if "confirm" in first else int(first["settings"].get("k", 1))
        return universe(next(iter(task_lists)), reps)
    return None


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 4, like every other usage error of the plugin and the CLI."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="agentdrift", description="pytest-agentdrift outside a test session")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _register_record_commands(sub)
    _register_comparison_commands(sub)
    from pytest_agentdrift.cli.reports import register

    register(sub)
    from pytest_agentdrift.cli.regrade import register as register_regrade

    register_regrade(sub)
    from pytest_agentdrift.cli.trend import register as register_trend

    register_trend(sub)
    from pytest_agentdrift.cli.experiments import register as register_experiments

    register_experiments(sub, _Parser)
    return parser


def _register_record_commands(sub: Any) -> None:
    """validate, freeze, show, merge and summary."""
    v = sub.add_parser("validate", help="check that tasks decide: fail untouched, pass the reference solution k of k")
    add_arguments(
        v,
        (
            (("tasks",), {"nargs": "+"}),
            (("--k",), {"type": _positive, "default": 1}),
            (("--agent",), {"default": "reference", "help": "the agent whose solution must pass (default: reference)"}),
            (
                ("--skip-wrong",),
                {"action": "store_true", "help": "do not play the tasks' wrong solutions (solution/wrong/*/)"},
            ),
        ),
    )
    add_cli_flags(v, "isolation", "grading_cache")
    add_ini_args(v)
    v.set_defaults(fn=cmd_validate)
    f = sub.add_parser("freeze", help="(re)write initial-tree.sha256 from repo/")
    f.add_argument("tasks", nargs="+")
    f.set_defaults(fn=cmd_freeze)
    s = sub.add_parser("show", help="print the summary of a recorded run")
    s.add_argument("run")
    s.set_defaults(fn=cmd_show)
    from pytest_agentdrift.cli.reports import extend_show

    extend_show(s)
    m = sub.add_parser(
        "merge", help="merge complete shards of one runtime and task set (disjoint, together complete) into a new run"
    )
    m.add_argument("out")
    m.add_argument("shards", nargs="+")
    add_cli_flags(m, "accept_unobserved")
    add_ini_args(m)
    m.set_defaults(fn=cmd_merge)
    su = sub.add_parser(
        "summary", help="compact Markdown of a recorded run (and its comparison) for a CI summary or PR comment"
    )
    su.add_argument("run")
    su.add_argument(
        "--max-bytes",
        type=_positive,
        default=DEFAULT_SUMMARY_BYTES,
        help=f"cut the Markdown to at most this many bytes (default {DEFAULT_SUMMARY_BYTES}; GitHub's step summary takes 1 MiB)",
    )
    su.add_argument("--output", "-o", help="write to this file instead of standard output")
    su.set_defaults(fn=cmd_summary)


def _register_comparison_commands(sub: Any) -> None:
    """diff and compare: two recorded runs."""
    for name, fn, help_ in (
        ("diff", cmd_diff, "compare two recorded runs' manifests"),
        ("compare", cmd_compare, "statistics and decision for two recorded runs"),
    ):
        c = sub.add_parser(name, help=help_)
        c.add_argument("base")
        c.add_argument("cand")
        add_cli_flags(c, "vary", "accept_unobserved", "baseline_window")
        c.add_argument("--json", action="store_true")
        add_ini_args(c)
        c.set_defaults(fn=fn)
        if name == "compare":
            c.add_argument(
                "--gate-scope",
                choices=("all", "critical"),
                default="all",
                help="promote gate only: critical lets only critical regressions and new safety failures block",
            )
            add_cli_flags(c, *COMPARE_FLAGS)
            from pytest_agentdrift.cli.experiments import add_compare_options

            add_compare_options(c)


DEFAULT_SUMMARY_BYTES = 60_000


def _share(value: str) -> float:
    from pytest_agentdrift.options import share

    return share(value)


def _positive(value: str) -> int:
    from pytest_agentdrift.options import positive_int

    return positive_int(value)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except AgentDriftError as exc:
        print(f"agentdrift: error: {exc.message}", file=sys.stderr)
        return exc.exit_code if exc.exit_code != EXIT_FAILED else EXIT_USAGE
    except KeyboardInterrupt:
        print("agentdrift: interrupted", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
