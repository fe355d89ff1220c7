"""What every agentdrift subcommand shares."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def out(line: str = "") -> None:
    """One line of the command's answer, flushed (a CI log interleaves it with the sessions' output)."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        # `agentdrift show RUN --json | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


#: one argument of a subcommand, as a row of its table: its names and add_argument's keywords
Argument = tuple[tuple[str, ...], dict[str, Any]]


def add_arguments(parser: argparse.ArgumentParser, arguments: tuple[Argument, ...]) -> None:
    for names, options in arguments:
        parser.add_argument(*names, **options)


def add_ini_args(p: argparse.ArgumentParser) -> None:
    """-c and --rootdir, as pytest takes them: which ini the command reads agent_* options from."""
    p.add_argument(
        "-c", dest="config_file", default=None, help="the pytest ini to read agent_* options from (as pytest -c)"
    )
    p.add_argument("--rootdir", default=None, help="as pytest --rootdir: where the ini search starts")


def accepted_tokens(cli_values: list[str] | None, config_file: str | None, rootdir: str | None) -> list[str]:
    """The plugin's accept-unobserved resolver over the plugin's ini (-c / --rootdir as pytest), then the command line."""
    from pytest_agentdrift.options import resolve_outside_pytest

    return list(resolve_outside_pytest({"accept_unobserved": cli_values}, config_file, rootdir)["accept_unobserved"])


@dataclass(frozen=True)
class RunPair:
    base: dict[str, Any]
    cand: dict[str, Any]
    base_manifest: dict[str, Any]
    cand_manifest: dict[str, Any]
    cmp: Any  # manifest.identity's comparison
    accepted: Any  # manifest.accept.Accepted


def load_pair(
    base: Path,
    cand: Path,
    vary: list[str],
    cli_accept: list[str] | None,
    config_file: str | None = None,
    rootdir: str | None = None,
    window: int | None = None,
):
    """Two recorded runs and their identity comparison, as `agentdrift compare` and the reports make it;
    the baseline may be a directory of records, pooled (compare/pool.py, the ``window`` newest)."""
    from pytest_agentdrift.compare.pool import load_any_baseline
    from pytest_agentdrift.manifest.accept import resolve_for
    from pytest_agentdrift.manifest.baseline import load_baseline
    from pytest_agentdrift.manifest.identity import compare_manifests

    base_results, base_manifest = load_any_baseline(base, load_baseline, window)
    cand_results, cand_manifest = load_baseline(cand)
    accepted = resolve_for(accepted_tokens(cli_accept, config_file, rootdir), base_manifest, cand_manifest)
    cmp = compare_manifests(base_manifest, cand_manifest, vary, pre_run=False, accept_unobserved=accepted.fields)
    return RunPair(base_results, cand_results, base_manifest, cand_manifest, cmp, accepted)
