"""The accepted-unobserved list: one resolver for the plugin and every CLI command.

Tokens come from the ini (`agent_accept_unobserved`, the defaults when the
ini says nothing) and then the command line, adding up; `none` clears what
came before it. A token is an identity field or a group name: `envelope`
(the six envelope fields), `unobservable` (every field the agents' adapters
record, in their manifests, as beyond their sight) or `unreportable` (of
those, what a product preset documents its product cannot report: accepted
by default). Groups expand visibly: the expansion travels with the
comparison. Pure, no pytest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.vocabulary import (
    ACCEPT_GROUP_ENVELOPE,
    ACCEPT_GROUP_UNOBSERVABLE,
    ACCEPT_GROUP_UNREPORTABLE,
    ACCEPT_GROUPS,
    ACCEPT_NONE,
    DEFAULT_ACCEPT_UNOBSERVED,
    ENVELOPE_FIELDS,
    IDENTITY_FIELDS,
)


def _as_list(value: Any) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        return value.split()
    return [str(v).strip() for v in value if str(v).strip()]


def accept_tokens(ini_value: Any, cli_values: Iterable[str] | None) -> list[str]:
    """The defaults, then the ini's tokens, then the command line's: each adds; `none` clears what came before."""
    tokens: list[str] = []
    for name in [*DEFAULT_ACCEPT_UNOBSERVED, *_as_list(ini_value), *_as_list(list(cli_values or []))]:
        tokens = [] if name == ACCEPT_NONE else [*tokens, name]
    unknown = [t for t in tokens if t not in IDENTITY_FIELDS and t not in ACCEPT_GROUPS]
    if unknown:
        raise AgentDriftError(
            f"--agent-accept-unobserved: unknown field(s) {', '.join(unknown)}; valid: the groups "
            f"{', '.join(ACCEPT_GROUPS)}, 'none', or an identity field: {', '.join(IDENTITY_FIELDS)}"
        )
    return list(dict.fromkeys(tokens))


@dataclass
class Accepted:
    fields: list[str] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    groups: dict[str, list[str]] = field(default_factory=dict)  # group -> the fields it stood for here

    def to_dict(self) -> dict[str, Any]:
        return {"tokens": list(self.tokens), "fields": list(self.fields), "groups": dict(self.groups)}

    def lines(self) -> list[str]:
        # a default group that stands for nothing here (an agent that is no preset) says nothing
        return [
            f"accept      {g} = {', '.join(fs) or '(nothing)'}"
            for g, fs in self.groups.items()
            if fs or g != ACCEPT_GROUP_UNREPORTABLE
        ]


def unobservable_fields(*manifests: Mapping[str, Any] | None, key: str = "unobservable_fields") -> list[str]:
    """What the manifests' adapters recorded as beyond their sight (evidence.unobservable_fields),
    or with ``key="unreportable_fields"``, what a preset records its product cannot report."""
    found: set[str] = set()
    for m in manifests:
        ev = (m or {}).get("evidence") if isinstance(m, Mapping) else None
        names = ev.get(key) if isinstance(ev, Mapping) else None
        if isinstance(names, list):
            found.update(n for n in names if n in IDENTITY_FIELDS)
    return [f for f in IDENTITY_FIELDS if f in found]


def expand(tokens: Iterable[str], unobservable: Iterable[str], unreportable: Iterable[str] = ()) -> Accepted:
    out = Accepted(tokens=list(tokens))
    unobs = list(unobservable)
    for token in out.tokens:
        if token == ACCEPT_GROUP_ENVELOPE:
            names = list(ENVELOPE_FIELDS)
            out.groups[token] = names
        elif token == ACCEPT_GROUP_UNOBSERVABLE:
            names = unobs
            out.groups[token] = names
        elif token == ACCEPT_GROUP_UNREPORTABLE:
            names = list(unreportable)
            out.groups[token] = names
        else:
            names = [token]
        out.fields.extend(n for n in names if n not in out.fields)
    return out


def resolve_for(
    tokens: Iterable[str], baseline: Mapping[str, Any] | None, current: Mapping[str, Any] | None
) -> Accepted:
    """The accepted fields for comparing these two manifests."""
    return expand(
        tokens,
        unobservable_fields(baseline, current),
        unobservable_fields(baseline, current, key="unreportable_fields"),
    )
