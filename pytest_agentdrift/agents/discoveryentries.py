"""Instruction entries and the instruction bundle: what discovery found, in order, and the
instruction-bundle.json document whose digest is instruction_hash.

Part of the generic discovery machinery (agents/discovery_base.py re-exports it).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypedDict

from pytest_agentdrift.agents.discoveryconfig import ConfigSource, Fact
from pytest_agentdrift.agents.discoveryfiles import NORMALISATION, Roots, normalise_text, read_bytes
from pytest_agentdrift.canonical import digest, sha256_hex


class EntryRecord(TypedDict):
    """One instruction source as instruction-bundle.json records it (InstructionEntry.to_dict)."""

    order: int
    context: str
    path: str
    scope: str
    kind: str
    load: str
    status: str
    size: int | None
    raw_sha256: str | None
    normalised_sha256: str | None
    depth: int
    imported_by: str | None
    imports: list[str]
    apply_to: NotRequired[list[str]]
    loaded_bytes: NotRequired[int]


class InstructionBundle(TypedDict):
    """The instruction-bundle.json document (instruction_bundle)."""

    bundle_version: int
    surface_rules: str
    normalisation: str
    discovery_roots: dict[str, str]
    limits: dict[str, object]
    entries: list[EntryRecord]
    import_graph: dict[str, list[str]]
    missing: list[dict[str, str]]


@dataclass
class InstructionEntry:
    """One instruction source, in discovery order."""

    path: str  # label relative to a named root
    scope: str  # managed / user / project / local / nested / rules / import / task / user-named ...
    kind: str  # memory / rules / import / agents / copilot-instructions / path-instructions / named
    load: str  # startup / on_demand / conditional
    status: str  # loaded / missing / unreadable / empty_skipped / over_cap / truncated / shadowed
    raw_sha256: str | None = None
    normalised_sha256: str | None = None
    size: int | None = None
    depth: int = 0
    imported_by: str | None = None
    imports: list[str] = field(default_factory=list)
    apply_to: list[str] | None = None
    loaded_bytes: int | None = None
    context: str = "session"

    def to_dict(self, order: int) -> EntryRecord:
        out: EntryRecord = {
            "order": order,
            "context": self.context,
            "path": self.path,
            "scope": self.scope,
            "kind": self.kind,
            "load": self.load,
            "status": self.status,
            "size": self.size,
            "raw_sha256": self.raw_sha256,
            "normalised_sha256": self.normalised_sha256,
            "depth": self.depth,
            "imported_by": self.imported_by,
            "imports": list(self.imports),
        }
        if self.apply_to is not None:
            out["apply_to"] = list(self.apply_to)
        if self.loaded_bytes is not None:
            out["loaded_bytes"] = self.loaded_bytes
        return out


def entry_for(
    path: Path,
    roots: Roots,
    *,
    scope: str,
    kind: str,
    load: str,
    context: str,
    depth: int = 0,
    imported_by: str | None = None,
) -> tuple[InstructionEntry, bytes | None]:
    data, status = read_bytes(path)
    entry = InstructionEntry(
        path=roots.label(path),
        scope=scope,
        kind=kind,
        load=load,
        status=status,
        depth=depth,
        imported_by=imported_by,
        context=context,
    )
    if data is not None:
        entry.size = len(data)
        entry.raw_sha256 = sha256_hex(data)
        entry.normalised_sha256 = sha256_hex(normalise_text(data))
    return entry, data


@dataclass
class Discovery:
    """What one surface's discovery found, before it is assembled into a bundle."""

    surface_rules: str
    entries: list[InstructionEntry] = field(default_factory=list)
    missing: list[dict[str, str]] = field(default_factory=list)  # referenced but absent / unreadable
    config: list[ConfigSource] = field(default_factory=list)
    discovery_roots: dict[str, str] = field(default_factory=dict)  # context -> cwd label discovery started from
    limits: dict[str, object] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    facts: dict[str, dict[str, Fact]] = field(default_factory=dict)  # context -> {fact: {value, source}}

    def extend(self, other: Discovery) -> None:
        self.entries.extend(other.entries)
        self.missing.extend(other.missing)
        self.config.extend(other.config)
        self.discovery_roots.update(other.discovery_roots)
        self.limits.update(other.limits)
        self.notes.extend(n for n in other.notes if n not in self.notes)
        for ctx, facts in other.facts.items():
            self.facts.setdefault(ctx, {}).update(facts)


def instruction_bundle(discovery: Discovery) -> InstructionBundle:
    """The ordered instruction-bundle.json document; its digest is instruction_hash."""
    entries = [e.to_dict(i) for i, e in enumerate(discovery.entries)]
    graph: dict[str, list[str]] = {}
    for e in discovery.entries:
        if e.imports:
            graph.setdefault(f"{e.context}|{e.path}", []).extend(e.imports)
    return {
        "bundle_version": 1,
        "surface_rules": discovery.surface_rules,
        "normalisation": NORMALISATION,
        "discovery_roots": dict(sorted(discovery.discovery_roots.items())),
        "limits": dict(sorted(discovery.limits.items())),
        "entries": entries,
        "import_graph": {k: sorted(set(v)) for k, v in sorted(graph.items())},
        "missing": sorted(
            discovery.missing, key=lambda m: (m.get("context", ""), m["path"], m.get("referenced_by", ""))
        ),
    }


#: bundle entry keys left out of instruction_hash: the exact bytes. A file
#: re-saved with CRLF line endings or trailing spaces is the same instruction
#: (the hash is over normalised text); its raw hash stays in the
#: bundle and in the manifest's provenance, compared as a note.
RAW_ENTRY_KEYS = ("raw_sha256", "size")


def instruction_hash(bundle: Mapping[str, object]) -> str:
    """digest of the bundle without the raw-bytes keys of its entries."""
    view = dict(bundle)
    entries = bundle.get("entries", [])
    if not isinstance(entries, list):
        raise TypeError(f"a bundle's entries are a list, not {type(entries).__name__}")
    view["entries"] = [{k: v for k, v in dict(e).items() if k not in RAW_ENTRY_KEYS} for e in entries]
    return digest(view)


def applies_to(entry: Mapping[str, object], rel_path: str) -> bool:
    """Whether a path-specific instruction entry applies to a repository-relative file path."""
    patterns = entry.get("apply_to")
    if not patterns:
        return entry.get("load") != "conditional"
    if not isinstance(patterns, list):
        patterns = [patterns]
    patterns = [str(p) for p in patterns]
    return any(
        fnmatch.fnmatchcase(rel_path, p) or fnmatch.fnmatchcase(rel_path, p.replace("**/", "")) for p in patterns
    )


__all__ = [
    "RAW_ENTRY_KEYS",
    "Discovery",
    "EntryRecord",
    "InstructionBundle",
    "InstructionEntry",
    "applies_to",
    "entry_for",
    "instruction_bundle",
    "instruction_hash",
]
