"""`agentdrift` commands for a team's own setup (bundles, ablation, task new, plan, null).

    agentdrift bundle snapshot NAME --agent PRESET [--dir PROJECT] [--model M]   record what the agent reads
    agentdrift bundle list | show REF                                            the bundles directory
    agentdrift task new DIR --repo PATH --instruction FILE --verifier CMD ...    a validated task from a git repo
    agentdrift plan RUN|DIR [--delta 10pp] [--alpha 0.05] [--power 0.8] [--out F]   designs and their price
    agentdrift null RUN_A RUN_B [RUN...]                                         false alarms of the gate on one runtime

`register(sub, parser_class)` adds them to the CLI's parser; `arm_documents` and
`rows_gate_mode` give `agentdrift compare` what its experiment rows read. Exit
codes are the plugin's (errors.EXIT_*).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from pytest_agentdrift.cli.common import Argument, add_arguments
from pytest_agentdrift.cli.common import out as _out
from pytest_agentdrift.errors import EXIT_FAILED, EXIT_OK, AgentDriftError
from pytest_agentdrift.vocabulary import INSTRUCTION_BUNDLE_FILE, MANIFEST_FILE


def _store(args: argparse.Namespace) -> Path:
    """The bundles directory as the plugin finds it: --bundles, ini agent_bundles, AGENTDRIFT_BUNDLES, default."""
    from pytest_agentdrift.inifile import read_ini
    from pytest_agentdrift.manifest.bundles import resolve_store
    from pytest_agentdrift.options import ini_declared

    ini = read_ini(ini_declared("bundles"))
    return resolve_store(args.bundles, ini.values["agent_bundles"] or None, os.environ, ini.rootdir)


# --------------------------------------------------------------------------- bundle


def cmd_bundle_snapshot(args: argparse.Namespace) -> int:
    from pytest_agentdrift.manifest.bundles import show_lines, snapshot

    store = _store(args)
    options = {k: v for k, v in (("permission_mode", args.permission_mode), ("sandbox", args.sandbox_mode)) if v}
    bundle, created = snapshot(
        store,
        args.name,
        agent=args.agent,
        project=Path(args.dir),
        home=Path.home(),
        env=dict(os.environ),
        model=args.model,
        options=options,
        project_only=args.project_only,
    )
    _out(f"{'stored' if created else 'unchanged (already stored)'}: bundle {args.name} = {bundle.digest} in {store}")
    for line in show_lines(bundle, store)[1:]:
        _out(line)
    return EXIT_OK


def cmd_bundle_list(args: argparse.Namespace) -> int:
    from pytest_agentdrift.manifest.bundles import list_bundles

    store = _store(args)
    rows = list_bundles(store)
    if args.json:
        _out(json.dumps({"bundles_dir": str(store), "bundles": rows}, indent=2, sort_keys=True))
        return EXIT_OK
    if not rows:
        _out(f"no bundles in {store} (make one: agentdrift bundle snapshot NAME --agent PRESET)")
        return EXIT_OK
    for row in rows:
        if "problem" in row:
            _out(f"{row['name']:<32} {row['digest'][:19]}…  {row['problem']}")
            continue
        derived = f"  derived from {origin[:19]}…" if (origin := row.get("derived_from")) else ""
        _out(
            f"{row['name']:<32} {row['digest'][:19]}…  {row['agent']:<12} model {row['model'] or '-':<20} "
            f"{row['files']} file(s) {row['bytes']} B  {row['created_at']}{derived}"
        )
    return EXIT_OK


def cmd_bundle_show(args: argparse.Namespace) -> int:
    from pytest_agentdrift.manifest.bundles import load, names_for, show_lines

    store = _store(args)
    bundle = load(store, args.ref)
    if args.json:
        _out(json.dumps({**bundle.doc, "names": names_for(store, bundle.digest)}, indent=2, sort_keys=True))
    else:
        for line in show_lines(bundle, store):
            _out(line)
    return EXIT_OK


# --------------------------------------------------------------------------- task new


def cmd_task_new(args: argparse.Namespace) -> int:
    from pytest_agentdrift.tasks.freeze import NewTask, commit_task, discard, freeze_task

    spec = NewTask(
        target=Path(args.dir),
        repo=Path(args.repo),
        instruction=Path(args.instruction),
        verifier=args.verifier,
        rev=args.rev,
        solution=args.solution,
        hidden=list(args.hidden_test or []),
        allow=list(args.allow or []),
        task_id=args.id,
        title=args.title,
        suite=args.suite,
        timeout_s=args.timeout,
    )
    if args.solution is None and not args.no_validate:
        raise AgentDriftError("give --solution REV|PATCH (the fix the task is validated against), or --no-validate")
    tmp, notes = freeze_task(spec)
    try:
        _out(
            f"froze {args.repo}@{args.rev} into a task ({sum(1 for p in (tmp / 'repo').rglob('*') if p.is_file())} file(s))"
        )
        for note in notes:
            _out(f"  note: {note}")
        if not args.no_validate:
            from pytest_agentdrift.cli.validate import cmd_validate

            code = cmd_validate(
                # what `agentdrift validate --k K` would be given (a new task has no wrong solutions yet)
                argparse.Namespace(
                    tasks=[str(tmp)], k=args.k, agent="reference", isolation=args.isolation, skip_wrong=False
                )
            )
            if code != EXIT_OK:
                _out(f"not written: the task does not decide (see above); {args.dir} is left as it was")
                discard(tmp)
                return EXIT_FAILED
        commit_task(tmp, Path(args.dir))
    except BaseException:
        discard(tmp)
        raise
    _out(
        f"wrote {args.dir}"
        + ("" if args.no_validate else f" (validated: fails untouched, solution passes {args.k}/{args.k})")
    )
    return EXIT_OK


# --------------------------------------------------------------------------- plan


def cmd_plan(args: argparse.Namespace) -> int:
    from pytest_agentdrift.compare.planning import make_plan, parse_delta, render_plan
    from pytest_agentdrift.compare.pool import is_pool, load_pool
    from pytest_agentdrift.manifest.baseline import load_baseline
    from pytest_agentdrift.record.store import atomic_write, load_results

    out = None if args.out is None else Path(args.out)
    # refused before the records are read: loading a pool of nights is the slow part
    if out is not None and out.exists():
        raise AgentDriftError(
            "already exists; a plan is a pre-registration and is never rewritten: write a new file", out
        )
    run = Path(args.run)
    # a directory of records is pooled as --agent-baseline pools it (the records of one identity)
    results = load_pool(run, load_baseline)[0] if is_pool(run) else load_results(run, require_complete=True)
    doc = make_plan(
        results,
        delta=parse_delta(args.delta),
        alpha=args.alpha,
        target=args.power,
        budget_k=args.k,
        source=str(args.run),
    )
    if out is not None:
        atomic_write(out, json.dumps(doc, indent=2, sort_keys=True) + "\n")
    if args.json:
        _out(json.dumps(doc, indent=2, sort_keys=True))
    else:
        for line in render_plan(doc):
            _out(line)
        if args.out is not None:
            _out(
                f"{'written':<11} {args.out} (record it with the experiment: pytest ... --agent-plan {args.out} --agent-record DIR)"
            )
    return EXIT_OK


# --------------------------------------------------------------------------- null


def cmd_null(args: argparse.Namespace) -> int:
    from pytest_agentdrift.compare.null import null_exit_code, null_experiment, render_null
    from pytest_agentdrift.manifest.baseline import load_baseline
    from pytest_agentdrift.options import resolve_cli_flags

    if len(args.runs) < 2:
        raise AgentDriftError("give at least two recorded runs of the same runtime")
    loaded = [load_baseline(Path(p)) for p in args.runs]
    # the defaults, then the ini, then this command line (`none` clears), as the plugin resolves them
    opts = resolve_cli_flags(args, "seed", "accept_unobserved")
    result = null_experiment(
        [r for r, _ in loaded],
        [m for _, m in loaded],
        labels=list(args.runs),
        alpha=args.alpha,
        seed=opts["seed"],
        accept_unobserved=list(opts["accept_unobserved"]),
    )
    if args.json:
        _out(json.dumps(result, indent=2, sort_keys=True))
    else:
        for line in render_null(result):
            _out(line)
    return null_exit_code(result)


# --------------------------------------------------------------------------- compare


def arm_documents(run: str) -> Any:
    """The runtime manifest and instruction bundle a recorded run holds, for its experiment rows."""
    from pytest_agentdrift.canonical import load_json_file
    from pytest_agentdrift.compare.experiment import ArmDocuments

    def doc(name: str) -> Any:
        path = Path(run) / name
        return load_json_file(path) if path.is_file() else None

    return ArmDocuments(manifest=doc(MANIFEST_FILE), instructions=doc(INSTRUCTION_BUNDLE_FILE))


def rows_gate_mode(args: argparse.Namespace) -> str | None:
    """drop-it under --drop-it or --gate drop-it: the experiment rows know no other gate here."""
    from pytest_agentdrift.compare.experiment import DROP_IT_MODE

    return DROP_IT_MODE if getattr(args, "drop_it", False) or getattr(args, "gate", None) == DROP_IT_MODE else None


def add_compare_options(c: argparse.ArgumentParser) -> None:
    c.add_argument(
        "--drop-it",
        action="store_true",
        help="for an ablation or addition (the candidate ran with --agent-without / --agent-with): exit 0 "
        "only when the drop-it gate says 'Drop it' (the same as --gate drop-it)",
    )


# --------------------------------------------------------------------------- registration


def _fraction(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not 0 < x < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return x


_BUNDLES_DIR: Argument = (
    ("--bundles",),
    {
        "help": "the bundles directory (else ini agent_bundles, AGENTDRIFT_BUNDLES, "
        ".agentdrift/bundles under the rootdir)"
    },
)
_JSON: Argument = (("--json",), {"action": "store_true"})

_BUNDLE_SNAPSHOT: tuple[Argument, ...] = (
    (("name",), {}),
    (
        ("--agent",),
        {"required": True, "help": "the product preset whose discovery rules apply (claude-code, codex, copilot)"},
    ),
    (("--dir",), {"default": ".", "help": "the project to snapshot (default: the current directory)"}),
    (("--model",), {"help": "the model the bundle runs with (recorded; --agent-model still overrides)"}),
    (("--permission-mode",), {"help": "the permission mode the bundle runs with"}),
    (("--sandbox-mode",), {"help": "the product's own sandbox mode the bundle runs with"}),
    (("--project-only",), {"action": "store_true", "help": "leave the user-level files of your home out"}),
)


def _task_new_arguments() -> tuple[Argument, ...]:
    from pytest_agentdrift.options import positive_float, positive_int

    return (
        (("dir",), {"help": "the task directory to write (must not exist, or be empty)"}),
        (("--repo",), {"required": True, "help": "a git repository"}),
        (("--rev",), {"default": "HEAD", "help": "the revision whose tree becomes repo/ (default HEAD)"}),
        (
            ("--instruction",),
            {"required": True, "help": "the task text (task.md, given to the agent verbatim)"},
        ),
        (
            ("--verifier",),
            {
                "required": True,
                "help": "the command that passes only when the work is done (pytest ... or any command)",
            },
        ),
        (
            ("--hidden-test",),
            {
                "action": "append",
                "help": "a test file of the tree the agent does not get (restored for grading); repeatable",
            },
        ),
        (
            ("--allow",),
            {"action": "append", "help": "a path pattern the agent may change (allowed-paths.txt); repeatable"},
        ),
        (("--solution",), {"help": "the fix: a later revision of the repository, or a patch file"}),
        (("--id",), {"help": "the task id (default: the directory name)"}),
        (("--title",), {}),
        (("--suite",), {"default": "team"}),
        (("--timeout",), {"type": positive_float, "default": 600.0}),
        (("--k",), {"type": positive_int, "default": 3, "help": "validation repetitions (default 3)"}),
        (("--no-validate",), {"action": "store_true", "help": "write the task without validating it"}),
    )


def _plan_arguments() -> tuple[Argument, ...]:
    from pytest_agentdrift.options import positive_int

    return (
        (("run",), {}),
        (("--delta",), {"default": "10pp", "help": "the regression to detect: 10pp, 10%% or 0.1 (default 10pp)"}),
        (("--alpha",), {"type": _fraction, "default": 0.05}),
        (("--power",), {"type": _fraction, "default": 0.80}),
        (
            ("--k",),
            {"type": positive_int, "help": "repetitions of the budget the MDE is computed for (default: the run's)"},
        ),
        (("--out",), {"help": "write plan.json here (then: pytest ... --agent-plan FILE --agent-record DIR)"}),
        _JSON,
    )


def register(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    from pytest_agentdrift.options import add_cli_flags

    _register_bundle(sub, parser_class)
    t = sub.add_parser("task", help="make tasks")
    tsub = t.add_subparsers(dest="task_command", required=True, parser_class=parser_class)
    new = tsub.add_parser(
        "new", help="freeze a task from a git repository and validate it (fails untouched, solution passes k of k)"
    )
    add_arguments(new, _task_new_arguments())
    add_cli_flags(new, "isolation")
    new.set_defaults(fn=cmd_task_new)
    from pytest_agentdrift.cli.expect import register as register_task_expect

    register_task_expect(tsub, parser_class)

    pl = sub.add_parser(
        "plan",
        help="tasks x repetitions needed to detect a regression, and the gate's design (pool, PR k, confirmation "
        "cap) priced in runs and dollars, from a recorded run or a directory of records",
    )
    add_arguments(pl, _plan_arguments())
    pl.set_defaults(fn=cmd_plan)

    nu = sub.add_parser(
        "null", help="two or more recordings of one runtime: outcome flips and false alarms of the gate"
    )
    nu.add_argument("runs", nargs="+", help="two or more recorded runs of the same runtime")
    nu.add_argument("--alpha", type=_fraction, default=0.05)
    from pytest_agentdrift.cli.common import add_ini_args
    from pytest_agentdrift.options import add_cli_flags

    add_cli_flags(nu, "seed", "accept_unobserved")
    add_ini_args(nu)
    nu.add_argument("--json", action="store_true")
    nu.set_defaults(fn=cmd_null)


def _register_bundle(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    b = sub.add_parser("bundle", help="snapshot, list and show instruction bundles (a team's agent setup)")
    bsub = b.add_subparsers(dest="bundle_command", required=True, parser_class=parser_class)
    snap = bsub.add_parser(
        "snapshot", help="record, read-only, what an agent preset reads from a project and your home"
    )
    add_arguments(snap, (*_BUNDLE_SNAPSHOT, _BUNDLES_DIR))
    snap.set_defaults(fn=cmd_bundle_snapshot)
    ls = bsub.add_parser("list", help="the named bundles")
    add_arguments(ls, (_JSON, _BUNDLES_DIR))
    ls.set_defaults(fn=cmd_bundle_list)
    show = bsub.add_parser("show", help="one bundle: files, sizes, digests, what was left out")
    add_arguments(
        show, ((("ref",), {"help": "NAME, digest (or a unique prefix) or bundle directory"}), _JSON, _BUNDLES_DIR)
    )
    show.set_defaults(fn=cmd_bundle_show)
