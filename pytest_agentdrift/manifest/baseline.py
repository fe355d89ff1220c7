"""The baseline a session compares with. No pytest.

`load_baseline` reads a complete recorded run and its manifest (the plugin and `agentdrift null`
share it); `rebaseline_command` and `unobserved_hint` are what a refused comparison tells the user
to do.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from pytest_agentdrift.canonical import load_json_file
from pytest_agentdrift.errors import RecordError
from pytest_agentdrift.vocabulary import MANIFEST_FILE


def load_baseline(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(results, manifest) of a complete recorded run, or RecordError (exit 4)."""
    from pytest_agentdrift.manifest.capture import validate_manifest
    from pytest_agentdrift.record.store import load_run

    results = load_run(path, require_complete=True)
    mpath = path / MANIFEST_FILE
    if not mpath.is_file():
        raise RecordError("the baseline has no runtime manifest", mpath)
    manifest = validate_manifest(load_json_file(mpath, RecordError), mpath)
    return results, manifest


def resume_identity_blocks(recorded: dict[str, Any], current: dict[str, Any] | None) -> list[str]:
    """The BLOCK lines of a resume whose runtime is not the recorded one (record/resume.resume_refusal).

    A resume continues one session: a field unobserved on both sides is as unknown as it was while
    the session ran, so it does not block here (it still blocks a comparison); every observed
    difference does."""
    from pytest_agentdrift.manifest.identity import IDENTITY_FIELDS, compare_manifests, render_refusal

    if current is None or "identity" not in current:
        return []
    cmp = compare_manifests(recorded, current, [], pre_run=True, accept_unobserved=list(IDENTITY_FIELDS))
    return [] if cmp.comparable else render_refusal(cmp)


def refusal_reason(blocks: list[tuple[str, Any, Any]]) -> str:
    """The closing line's reason when identity fields block the comparison (the first six named)."""
    names = ", ".join(f for f, _, _ in blocks[:6]) + (f" (+{len(blocks) - 6} more)" if len(blocks) > 6 else "")
    return f"refused: runs are not comparable ({len(blocks)} identity field(s) block: {names})"


def rebaseline_command(argv: list[str]) -> str:
    """The command that records a new baseline: this session's, without what compared it with the old one."""
    args = list(argv)
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("--agent-baseline", "--agent-record", "--agent-vary", "--agent-gate"):
            skip = True
            continue
        if a.startswith(("--agent-baseline=", "--agent-record=", "--agent-vary=", "--agent-gate=")):
            continue
        out.append(a)
    return "pytest " + " ".join(shlex.quote(a) for a in out + ["--agent-record", "runs/<new-baseline>"])


def unobserved_hint(
    fields: list[str], declare_path: Path | None, unobservable: list[str] | tuple[str, ...] | None = None
) -> list[str]:
    """The exact declare file, ini snippet and flags that would make the comparison possible.

    Both sides hold the same unknown: a new recording helps only where the harness can start
    seeing the value (the model traffic, through its model gateway) or the agent can start
    reporting it (the model that answered, under the generic protocol); otherwise only the
    operator can vouch for it or accept it. Declarable fields go in a declare file; the rest can
    only be accepted. Only what cannot be observed for this agent is offered for acceptance
    (`unobservable`: the adapter's list): a model field the gateway could see is explained
    instead, and no one word that accepts a whole group is suggested, since it would hide a
    model swap the harness can see. Every form printed here is tested to make the refusal go
    away (tests/integration/test_gate.py).
    """
    from pytest_agentdrift.vocabulary import (
        DECLARABLE_FIELDS,
        DEFAULT_ACCEPT_UNOBSERVED,
        ENVELOPE_FIELDS,
        GATEWAY_FIELDS,
    )

    observable = [f for f in fields if f in GATEWAY_FIELDS and f not in (unobservable or ())]
    # the operator may still vouch for an observable field (a declaration an observation contradicts
    # is an error), but accepting it as unknowable is never offered
    declarable = [f for f in fields if f in DECLARABLE_FIELDS]
    fields = [f for f in fields if f not in observable]
    lines = []
    if observable:
        lines.append(
            f"observable by the harness, unobserved on both sides: {', '.join(observable)}. The harness reads the "
            "model asked for, the endpoint and the model that answered from the agent's model traffic when it "
            "reaches its model API through a base URL the harness knows (ANTHROPIC_BASE_URL, OPENAI_BASE_URL, "
            "GOOGLE_GEMINI_BASE_URL) on a host it may reach (--agent-allow-host HOST:PORT): record a new baseline "
            'that way (docs/agents.md, "The model traffic the harness observes"). An agent may also report the '
            "model that answered as `model` on the `usage` events it appends to $AGENTDRIFT_EVENTS."
        )
    if fields:
        lines.append(
            f"unobserved on both sides: {', '.join(fields)}. The harness cannot see these values itself; "
            "only you can supply them."
        )
    if declarable:
        target = declare_path or Path("agent-declare.toml")
        # the baseline holds the unknown too: a declaration counts once both arms were recorded with it
        lines.append(
            f"Either declare what you know in {target} and record a new baseline with it (both sessions pass "
            f"--agent-declare {target}, or ini agent_declare = {target}):"
        )
        lines += [f'    {f} = "..."' for f in declarable]
    groups = []
    rest = list(fields)
    if set(ENVELOPE_FIELDS) <= set(fields):
        groups.append("envelope")
        rest = [f for f in rest if f not in ENVELOPE_FIELDS]
    # the ini adds to the defaults (as the command line does): the snippet names only what is missing
    tokens = list(dict.fromkeys(t for t in (*groups, *rest) if t not in DEFAULT_ACCEPT_UNOBSERVED))
    if not tokens:
        return lines
    lines.append(("or " if declarable else "") + "accept them as unknowable, in pytest.ini:")
    lines += ["    [pytest]", "    agent_accept_unobserved ="]
    lines += [f"        {t}" for t in tokens]
    lines.append(
        "  (or in pyproject.toml: [tool.pytest.ini_options] agent_accept_unobserved = ["
        + ", ".join(f'"{t}"' for t in tokens)
        + "])"
    )
    lines.append("  (or on the command line: " + " ".join(f"--agent-accept-unobserved {t}" for t in tokens) + ")")
    return lines


__all__ = ["load_baseline", "rebaseline_command", "refusal_reason", "resume_identity_blocks", "unobserved_hint"]
