"""Compare two runtime manifests: which identity fields differ, and may the runs be compared.

Pure functions, no pytest. The plugin calls `compare_manifests` before
collection (``pre_run=True``) and refuses the session with exit 6 when the
result is not comparable, printing `render_refusal`; `agentdrift diff`
calls it on two recorded manifests and prints the same lines.

Rules (CONTRACT §8, seeds 000, 001, 003):

* every identity field is compared; a difference is a BLOCK unless the
  field was declared with ``--agent-vary``;
* ``unobserved`` in a compared field is a BLOCK, on either side, varied or
  not: an unknown cannot be shown equal (unknown is
  non-comparable). ``accept_unobserved`` names fields the operator accepts
  as unknowable (for example ``server_revision`` for a host that never
  reports one); each acceptance is reported as a note;
* before the runs (``pre_run=True``), the post-run fields (``model_stamp``,
  ``server_revision``) of the current manifest are still unknown, as are the
  fields its product reports only when it runs (``evidence.run_reported_fields``:
  the model Claude Code's init event asks for): they are deferred, not
  blocked, and must be compared again on the finished run;
* surface / product / extension changes are split baselines and task set,
  evaluator, source, scoring or harness changes need a new baseline: those
  fields cannot be varied, and always block;
* provenance differences are notes, never blocks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pytest_agentdrift.errors import AgentDriftError, RecordError
from pytest_agentdrift.vocabulary import (  # noqa: F401  (re-exported for callers of this module)
    CHANGE_CLASSES,
    CLIENT_FIELDS,
    CONFIGURATION_FIELDS,
    ENVIRONMENT_FIELDS,
    IDENTIFYING_FIELDS,
    IDENTITY_FIELDS,
    INSTRUCTION_FIELDS,
    MODEL_FIELDS,
    NOT_APPLICABLE,
    POST_RUN_FIELDS,
    PROVENANCE_FIELDS,
    REBASELINE_FIELDS,
    SURFACE_FIELDS,
    UNOBSERVED,
    VARY_FIELDS,
)

_CLASS_TEXT = {
    "identical": "no identity field differs",
    "model_candidate": "only the model changed: differences are associated with the model swap under this fixture",
    "client_candidate": "only the client changed: differences are associated with the client swap under this fixture",
    "bundled_change": "several kinds of runtime input changed together: do not isolate one cause",
    "surface_bundle_change": "the product surface differs: split baselines, never an A/B peer",
    "instruction_change": "the instruction bundle changed: the runs are not prompt-equivalent",
    "configuration_change": "only configuration, permissions, tools or the command changed",
    "environment_change": "lockfile, OS, runtimes or environment changed: differences may be environmental",
    "invalid_comparison": "the client version or instruction hash is unknown: attribution stops",
    "re_baseline": "the task set, evaluator, fixture source or harness changed: record a new baseline",
}


@dataclass
class StampComparison:
    comparable: bool
    blocks: list[tuple[str, object, object]] = field(default_factory=list)  # (field, baseline, current)
    notes: list[tuple[str, object, object]] = field(default_factory=list)  # provenance and accepted differences
    unobserved: list[str] = field(default_factory=list)  # compared fields unobserved on either side
    varied: list[str] = field(default_factory=list)  # declared --agent-vary fields that differ
    deferred: list[str] = field(default_factory=list)  # post-run fields not yet known (pre_run)
    same: list[str] = field(default_factory=list)
    changed: dict[str, tuple[object, object]] = field(default_factory=dict)  # every differing identity field
    change_class: str = "identical"
    explanation: str = ""
    baseline_runtime_id: str | None = None
    current_runtime_id: str | None = None
    vary: list[str] = field(default_factory=list)  # as declared


def check_vary(vary: Iterable[str]) -> list[str]:
    """Validate --agent-vary names: AgentDriftError (exit 4) listing the valid names."""
    names = []
    for name in vary:
        if name in VARY_FIELDS:
            if name not in names:
                names.append(name)
            continue
        if name in SURFACE_FIELDS:
            raise AgentDriftError(
                f"--agent-vary {name}: a different surface is a separate baseline, not a variable; "
                f"record a baseline per surface"
            )
        if name in REBASELINE_FIELDS:
            raise AgentDriftError(
                f"--agent-vary {name}: the task set, evaluator, source and harness are the "
                f"measuring instrument and cannot be varied; record a new baseline"
            )
        raise AgentDriftError(f"--agent-vary: unknown field {name!r}; valid: {', '.join(VARY_FIELDS)}")
    return names


def compare_manifests(
    baseline: Mapping[str, object],
    current: Mapping[str, object],
    vary: Iterable[str] = (),
    *,
    pre_run: bool = False,
    accept_unobserved: Iterable[str] = (),
) -> StampComparison:
    """Compare identity fields; differences outside ``vary`` block, as does any unobserved value."""
    vary_list = check_vary(vary)
    accept = _accepted(accept_unobserved)
    base_id = _identity(baseline, "baseline")
    cur_id = _identity(current, "current")
    cmp = StampComparison(
        comparable=True,
        vary=vary_list,
        baseline_runtime_id=_runtime_id(baseline),
        current_runtime_id=_runtime_id(current),
    )
    # what the current agent's product reports about itself at run time (its init event)
    run_reported = _run_reported(current)
    for name in IDENTITY_FIELDS:
        b, c = base_id[name], cur_id[name]
        if pre_run and (name in POST_RUN_FIELDS or name in run_reported) and c == UNOBSERVED and b != NOT_APPLICABLE:
            cmp.deferred.append(name)
            continue
        _compare_field(cmp, name, b, c, accepted=name in accept, varies=name in vary_list)
    _provenance_notes(cmp, baseline, current)
    cmp.change_class = classify(cmp.changed, base_id, cur_id)
    cmp.explanation = _CLASS_TEXT[cmp.change_class]
    cmp.comparable = not cmp.blocks
    return cmp


def _accepted(accept_unobserved: Iterable[str]) -> set[str]:
    accept = set(accept_unobserved)
    unknown_accept = accept - set(IDENTITY_FIELDS)
    if unknown_accept:
        raise AgentDriftError(
            f"unknown field(s) accepted as unobserved: {', '.join(sorted(unknown_accept))}; "
            f"valid: {', '.join(IDENTITY_FIELDS)}"
        )
    return accept


def _compare_field(cmp: StampComparison, name: str, b: object, c: object, *, accepted: bool, varies: bool) -> None:
    """One identity field: same, changed, unobserved (a note when accepted and equal) or blocking."""
    unknown = b == UNOBSERVED or c == UNOBSERVED
    if b != c:
        cmp.changed[name] = (b, c)
    elif not unknown:
        cmp.same.append(name)
    if unknown:
        cmp.unobserved.append(name)
        if accepted and b == c:
            cmp.notes.append((name, b, c))
        else:
            cmp.blocks.append((name, b, c))
    elif b != c:
        if varies:
            cmp.varied.append(name)
        else:
            cmp.blocks.append((name, b, c))


def _provenance_notes(cmp: StampComparison, baseline: Mapping[str, object], current: Mapping[str, object]) -> None:
    """Provenance that differs is noted, never blocking."""
    base_prov = _part(baseline, "provenance")
    cur_prov = _part(current, "provenance")
    for name in PROVENANCE_FIELDS:
        b, c = base_prov.get(name, UNOBSERVED), cur_prov.get(name, UNOBSERVED)
        if b != c:
            cmp.notes.append((name, b, c))


def settle_deferred(cmp: StampComparison, baseline: Mapping[str, object], accept: Iterable[str] = ()) -> list[str]:
    """Before the runs, block the deferred fields a recorded baseline never observed (and that are not
    accepted): whatever this session's runs report, an unknown baseline cannot be shown equal, so the
    refusal is decided now instead of after every run. Returns the fields it blocked."""
    base_id = _identity(baseline, "baseline")
    accepted = set(accept)
    never = [name for name in cmp.deferred if base_id[name] == UNOBSERVED and name not in accepted]
    for name in never:
        cmp.deferred.remove(name)
        cmp.unobserved.append(name)
        cmp.blocks.append((name, UNOBSERVED, UNOBSERVED))
    cmp.comparable = not cmp.blocks
    return never


def classify(changed: Mapping[str, object], base: Mapping[str, object], cur: Mapping[str, object]) -> str:
    """Seed 000's change class of a set of differing identity fields.

    Order: a different surface first (split baselines), then a changed
    measuring instrument (re-baseline), then an unidentifiable candidate
    (invalid comparison), then the single kind of input that changed, or a
    bundled change when several kinds changed together.
    """
    fields = set(changed)
    if fields & SURFACE_FIELDS:
        return "surface_bundle_change"
    if fields & REBASELINE_FIELDS:
        return "re_baseline"
    if any(base.get(f) == UNOBSERVED or cur.get(f) == UNOBSERVED for f in IDENTIFYING_FIELDS):
        return "invalid_comparison"
    if not fields:
        return "identical"
    groups = {
        name
        for name, members in (
            ("model_candidate", MODEL_FIELDS),
            ("client_candidate", CLIENT_FIELDS),
            ("configuration_change", CONFIGURATION_FIELDS),
            ("instruction_change", INSTRUCTION_FIELDS),
            ("environment_change", ENVIRONMENT_FIELDS),
        )
        if fields & members
    }
    if len(groups) == 1:
        return groups.pop()
    return "bundled_change"


def manifest_diff_document(cmp: StampComparison) -> dict[str, object]:
    """comparison/manifest-diff.json: same / changed with both values, blocks, notes, class."""
    return {
        "diff_version": 1,
        "comparable": cmp.comparable,
        "change_class": cmp.change_class,
        "explanation": cmp.explanation,
        "baseline_runtime_id": cmp.baseline_runtime_id,
        "current_runtime_id": cmp.current_runtime_id,
        "vary": list(cmp.vary),
        "same": list(cmp.same),
        "changed": {k: {"baseline": b, "current": c} for k, (b, c) in cmp.changed.items()},
        "blocks": [
            {"field": f, "baseline": b, "current": c, "reason": "unobserved" if UNOBSERVED in (b, c) else "differs"}
            for f, b, c in cmp.blocks
        ],
        "varied": list(cmp.varied),
        "unobserved": list(cmp.unobserved),
        "deferred": list(cmp.deferred),
        "notes": [{"field": f, "baseline": b, "current": c} for f, b, c in cmp.notes],
    }


#: the fields a fixed check, hidden test or golden file moves: a regrade of the older record resolves them
REGRADE_FIELDS = frozenset({"evaluator_id", "source_id"})


def regrade_hint(cmp: StampComparison, older: str) -> str | None:
    """The way out of a refusal that only the grading caused: regrade the older record, or None."""
    import shlex

    fields = {name for name, _, _ in cmp.blocks}
    if cmp.comparable or "evaluator_id" not in fields or not fields <= REGRADE_FIELDS:
        return None
    new = older.rstrip("/") + "-regraded"
    return (
        "only the grading differs (what the agent was given is the same task set): regrade the older record: "
        f"agentdrift regrade {shlex.quote(older)} --out {shlex.quote(new)}"
    )


def render_refusal(cmp: StampComparison, rebaseline_cmd: str | None = None) -> list[str]:
    """Terminal lines: `BLOCK <field>: <baseline> != <current>`, notes, and how to re-baseline."""
    lines: list[str] = []
    if cmp.comparable:
        lines.append(f"agentdrift: runs are comparable ({cmp.change_class}: {cmp.explanation})")
    else:
        unknown = sum(1 for _, b, c in cmp.blocks if b == c == UNOBSERVED)
        # nothing observed differs, yet unknowns block: say so rather than "no identity field differs" alone
        why = f"; {unknown} compared field(s) unobserved on both sides cannot be shown equal" if unknown else ""
        lines.append(
            f"agentdrift: refused, runs are not comparable ({len(cmp.blocks)} identity field(s) block; "
            f"change class {cmp.change_class}: {cmp.explanation}{why})"
        )
    for name, b, c in cmp.blocks:
        vb, vc = _render_pair(b, c)
        lines.append(
            f"BLOCK {name}: {vb} != {vc}"
            + ("  (unobserved values cannot be shown equal)" if b == c == UNOBSERVED else "")
        )
    for name in cmp.varied:
        vb, vc = _render_pair(*cmp.changed[name])
        lines.append(f"vary  {name}: {vb} -> {vc}")
    for name in cmp.deferred:
        lines.append(f"defer {name}: known only after the runs; compared on the finished run")
    for name, b, c in cmp.notes:
        vb, vc = _render_pair(b, c)
        lines.append(f"note  {name}: {vb} != {vc}" if b != c else f"note  {name}: accepted as {vb}")
    varyable = [name for name, b, c in cmp.blocks if name in VARY_FIELDS and not b == c == UNOBSERVED]
    if not cmp.comparable and varyable:
        flags = " ".join(f"--agent-vary {name}" for name in varyable)
        lines.append(f"if this change is the experiment (what you mean to compare), declare it: {flags}")
    if not cmp.comparable and rebaseline_cmd:
        lines.append(f"if it is not, record a new baseline for this runtime: {rebaseline_cmd}")
    return lines


def _runtime_id(manifest: Mapping[str, object]) -> str | None:
    """A manifest's runtime id as recorded (a stored manifest's is a string; validated on load)."""
    value = manifest.get("runtime_id")
    return str(value) if value is not None else None


def _part(manifest: Mapping[str, object], name: str) -> Mapping[str, object]:
    """One object of a manifest (provenance, evidence), or an empty one when it has none."""
    part = manifest.get(name)
    return part if isinstance(part, dict) else {}


def _run_reported(manifest: Mapping[str, object]) -> frozenset[str]:
    evidence = manifest.get("evidence") if isinstance(manifest, Mapping) else None
    names = evidence.get("run_reported_fields") if isinstance(evidence, Mapping) else None
    return frozenset(n for n in names if isinstance(n, str)) if isinstance(names, list) else frozenset()


def _identity(manifest: Mapping[str, object], which: str) -> Mapping[str, object]:
    ident = manifest.get("identity") if isinstance(manifest, Mapping) else None
    if not isinstance(ident, Mapping):
        raise RecordError(f"{which} manifest has no identity object")
    missing = [f for f in IDENTITY_FIELDS if f not in ident]
    if missing:
        raise RecordError(f"{which} manifest is incomplete: identity lacks {', '.join(missing)}")
    return ident


def _render(value: object, limit: int = 160) -> str:
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _render_pair(b: object, c: object) -> tuple[str, str]:
    """Show only the differing keys when both sides are objects, so the line says what changed."""
    if isinstance(b, dict) and isinstance(c, dict):
        return _render(_differing(b, c)), _render(_differing(c, b))
    return _render(b), _render(c)


def _differing(one: dict[str, object], other: dict[str, object]) -> dict[str, object]:
    """`one`'s keys whose value differs from `other`'s, nested objects narrowed the same way (one
    package bumped among a venv's hundred distributions is that package)."""
    out: dict[str, object] = {}
    for k in sorted(set(one) | set(other)):
        mine, theirs = one.get(k, "<absent>"), other.get(k, "<absent>")
        if mine != theirs:
            out[k] = _differing(mine, theirs) if isinstance(mine, dict) and isinstance(theirs, dict) else mine
    return out
