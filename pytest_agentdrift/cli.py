"""`agentdrift`: what is not a test session.

    agentdrift validate TASK_DIR... [--k N]   a task decides: fails untouched, passes solved k of k
    agentdrift freeze TASK_DIR...             (re)write initial-tree.sha256 from repo/
    agentdrift show RUN                       the summary of a recorded run
    agentdrift diff BASE CAND [--vary F]      compare two runs' manifests (exit 6 when not comparable)
    agentdrift compare BASE CAND [...]        the plugin's statistics and decision on two recorded runs
    agentdrift merge OUT SHARD...             one run from shards of one runtime recorded on several machines
    agentdrift bundle | task new | plan | null    a team's own setup (cli_experiments.py)

Exit codes are the plugin's: 0 good, 1 a check or the gate failed, 4 usage or
operational error, 6 refused (not comparable).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from pytest_agentdrift.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, AgentDriftError


def _out(line: str = "") -> None:
    print(line, flush=True)


def cmd_validate(args: argparse.Namespace) -> int:
    from pytest_agentdrift.run import sandbox
    from pytest_agentdrift.agents.base import CommandAdapter, get_adapter
    from pytest_agentdrift.grade.checks import Grader
    from pytest_agentdrift.run.runner import RunSettings, cleanup, run_agent
    from pytest_agentdrift.grade.scoring import score
    from pytest_agentdrift.tasks.load import find_task_dirs, load_task

    dirs = [d for p in args.tasks for d in (find_task_dirs(Path(p)) or [Path(p)])]
    iso = sandbox.detect(args.isolation)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="agentdrift-validate-") as tmp:
        base = Path(tmp)
        grader = Grader(iso, base / "grading", hide=base / "runs")
        settings = RunSettings(isolation=iso)
        noop = CommandAdapter(f"{sys.executable} -c pass")
        ref = get_adapter(args.agent)
        for d in dirs:
            spec = load_task(d)  # every file validated; initial-tree verified on each copy
            problems = []
            run = run_agent(spec, 0, noop, settings, base / "runs")
            untouched = score(run, grader.evaluate(spec, run))
            cleanup(run)
            if untouched["passed"]:
                problems.append("passes on the untouched repo with an agent that does nothing: the checks decide nothing")
            passes = 0
            for rep in range(1, args.k + 1):
                run = run_agent(spec, rep, ref, settings, base / "runs")
                solved = score(run, grader.evaluate(spec, run))
                cleanup(run)
                if solved["passed"]:
                    passes += 1
                else:
                    detail = "; ".join(f"{c['name']}: {c['detail']}" for c in solved["checks"] if not c["passed"])
                    problems.append(f"reference solution failed repetition {rep}: {detail}")
            status = "ok" if not problems else "FAIL"
            _out(f"{status:4} {spec.id} {spec.title}: untouched fails ({', '.join(untouched['failed_checks']) or 'none'}); "
                 f"solution passes {passes}/{args.k}")
            for p in problems:
                _out(f"     - {p}")
            failures += bool(problems)
    _out(f"{len(dirs) - failures} of {len(dirs)} task(s) valid")
    return EXIT_FAILED if failures else EXIT_OK


def cmd_freeze(args: argparse.Namespace) -> int:
    from pytest_agentdrift.record.store import atomic_write
    from pytest_agentdrift.tasks.load import check_symlinks, hash_repo, render_tree_file

    for p in args.tasks:
        d = Path(p)
        if not (d / "repo").is_dir():
            raise AgentDriftError("no repo/ directory", d)
        check_symlinks(d)
        atomic_write(d / "initial-tree.sha256", render_tree_file(hash_repo(d / "repo")))
        _out(f"froze {d / 'initial-tree.sha256'}")
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    from pytest_agentdrift.record.store import load_run
    from pytest_agentdrift.record.report import summary_lines

    results = load_run(Path(args.run), require_complete=False)
    for line in summary_lines(results):
        _out(line)
    return EXIT_OK


def _load_pair(args: argparse.Namespace):
    from pytest_agentdrift.session.baseline import load_baseline
    from pytest_agentdrift.manifest.identity import compare_manifests

    base_results, base_manifest = load_baseline(Path(args.base))
    cand_results, cand_manifest = load_baseline(Path(args.cand))
    cmp = compare_manifests(base_manifest, cand_manifest, args.vary or [], pre_run=False,
                            accept_unobserved=args.accept_unobserved if args.accept_unobserved is not None else ["env_image_digest", "server_revision"])
    return base_results, cand_results, cmp


def cmd_diff(args: argparse.Namespace) -> int:
    from pytest_agentdrift.manifest.identity import manifest_diff_document, render_refusal

    _, _, cmp = _load_pair(args)
    if args.json:
        _out(json.dumps(manifest_diff_document(cmp), indent=2, sort_keys=True))
    else:
        for line in render_refusal(cmp):
            _out(line)
    return EXIT_OK if cmp.comparable else 6


def cmd_compare(args: argparse.Namespace) -> int:
    from pytest_agentdrift.compare.decision import GateParams, compare_runs, comparison_exit_code, decision_document, render_comparison
    from pytest_agentdrift.compare.ledger import read_release_notes
    from pytest_agentdrift.manifest.identity import render_refusal

    from pytest_agentdrift.canonical import load_json_file
    from pytest_agentdrift.session.baseline import selected_baseline

    base, cand, cmp = _load_pair(args)
    base, note = selected_baseline(base, cand)
    ledger = read_release_notes(args.release_notes) if args.release_notes else None
    evidence = load_json_file(args.rollback_evidence) if args.rollback_evidence else None
    comparison = compare_runs(
        base, cand, comparable=cmp.comparable, reasons=[f"{n}: {b!r} != {c!r}" for n, b, c in cmp.blocks],
        change_class=cmp.change_class, gate=GateParams(scope=args.gate_scope), seed=args.seed, ledger=ledger,
        rollback_state=args.rollback_state, rollback_evidence=evidence,
    )
    from pytest_agentdrift.cli_experiments import compare_rows

    section, rows, drop_it = compare_rows(args, base, cand, comparison)
    if args.json:
        _out(json.dumps({"comparison": comparison, "decision": {**decision_document(comparison), "experiment": section},
                         "experiment": section}, indent=2, sort_keys=True))
    else:
        change = [f"change      {cmp.change_class}: {cmp.explanation}" + (f" (declared variable: {', '.join(cmp.varied)})" if cmp.varied else "")]
        for line in (render_refusal(cmp) if not cmp.comparable else change) + ([note] if note else []) + render_comparison(comparison) + rows:
            _out(line)
    code = comparison_exit_code(comparison, args.gate)
    return drop_it if drop_it is not None and comparison["comparable"] else code


def cmd_merge(args: argparse.Namespace) -> int:
    import shutil

    from pytest_agentdrift.session.baseline import MANIFEST_FILE, load_baseline
    from pytest_agentdrift.record.store import RunRecorder, merge_results
    from pytest_agentdrift.record.report import markdown
    from pytest_agentdrift.session.state import new_run_id
    from pytest_agentdrift.manifest.identity import compare_manifests, render_refusal

    shards = [(Path(p), *load_baseline(Path(p))) for p in args.shards]
    _, _, first_manifest = shards[0]
    for path, _, manifest in shards[1:]:
        cmp = compare_manifests(first_manifest, manifest, [], accept_unobserved=args.accept_unobserved or ["env_image_digest", "server_revision"])
        if not cmp.comparable:
            print(f"agentdrift: {path} is not the same runtime as {shards[0][0]}", file=sys.stderr)
            for line in render_refusal(cmp):
                print(line, file=sys.stderr)
            return 6
    merged = merge_results([r for _, r, _ in shards], new_run_id())
    out = Path(args.out)
    rec = RunRecorder(out)
    rec.start(f"merging {len(shards)} shard(s)")
    for path, results, _ in shards:
        for name in (MANIFEST_FILE, "instruction-bundle.json", "source-manifest.json"):
            if path is shards[0][0] and (path / name).is_file():
                shutil.copyfile(path / name, out / name)
        for tid in results["tasks"]:
            if (path / "raw" / tid).is_dir():
                shutil.copytree(path / "raw" / tid, out / "raw" / tid)
    rec.write_raw(".", {"report.md": markdown(merged)})
    rec.finish(merged)
    _out(f"merged {len(shards)} shard(s), {len(merged['tasks'])} task(s), into {out}")
    return EXIT_OK


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 4, like every other usage error of the plugin and the CLI."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    from pytest_agentdrift.run.sandbox import ISOLATION_MODES

    parser = _Parser(prog="agentdrift", description="pytest-agentdrift outside a test session")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    v = sub.add_parser("validate", help="check that tasks decide: fail untouched, pass the reference solution k of k")
    v.add_argument("tasks", nargs="+")
    v.add_argument("--k", type=_positive, default=1)
    v.add_argument("--agent", default="reference", help="the agent whose solution must pass (default: reference)")
    v.add_argument("--isolation", choices=ISOLATION_MODES, default="auto")
    v.set_defaults(fn=cmd_validate)
    f = sub.add_parser("freeze", help="(re)write initial-tree.sha256 from repo/")
    f.add_argument("tasks", nargs="+")
    f.set_defaults(fn=cmd_freeze)
    s = sub.add_parser("show", help="print the summary of a recorded run")
    s.add_argument("run")
    s.set_defaults(fn=cmd_show)
    m = sub.add_parser("merge", help="merge complete shards of one runtime (disjoint task sets) into a new run")
    m.add_argument("out")
    m.add_argument("shards", nargs="+")
    m.add_argument("--accept-unobserved", action="append", default=None)
    m.set_defaults(fn=cmd_merge)
    for name, fn, help_ in (("diff", cmd_diff, "compare two recorded runs' manifests"),
                            ("compare", cmd_compare, "statistics and decision for two recorded runs")):
        c = sub.add_parser(name, help=help_)
        c.add_argument("base")
        c.add_argument("cand")
        c.add_argument("--vary", action="append", default=[], help="a manifest field that may differ; repeatable")
        c.add_argument("--json", action="store_true")
        c.add_argument("--accept-unobserved", action="append", default=None,
                       help="a field that may stay unobserved on both sides; repeatable (default: env_image_digest, server_revision)")
        c.set_defaults(fn=fn)
        if name == "compare":
            c.add_argument("--gate", action="store_true", help="exit 1 unless the gate says ship")
            c.add_argument("--gate-scope", choices=("all", "critical"), default="all")
            c.add_argument("--seed", type=int, default=0)
            c.add_argument("--release-notes", type=Path)
            c.add_argument("--rollback-state", choices=("verified", "prepared_unverified", "unavailable", "unknown"), default="unknown")
            c.add_argument("--rollback-evidence", type=Path, help="JSON evidence of a tested restoration")
            from pytest_agentdrift.cli_experiments import add_compare_options

            add_compare_options(c)
    from pytest_agentdrift.cli_experiments import register

    register(sub, _Parser)
    return parser


def _positive(value: str) -> int:
    from pytest_agentdrift.session.options import positive_int

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
