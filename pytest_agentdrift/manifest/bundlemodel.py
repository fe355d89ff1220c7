"""An instruction bundle as data: its files, its bundle.json document, the digests it is known by.

The digest is the canonical digest of ``bundle.json["identity"]``; the two
sub-digests split the files the way the runtime identity does (the design is
in manifest/bundles.py). Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path, PurePosixPath
from typing import Any

from pytest_agentdrift.canonical import digest
from pytest_agentdrift.shapes import BundleEntry

BUNDLE_VERSION = 1
BUNDLE_FILE = "bundle.json"
SCOPES = ("project", "user")
CATEGORIES = ("instructions", "config")


@dataclass(frozen=True)
class BundleFile:
    scope: str  # project | user
    path: str  # posix, relative to the project root or the home directory
    size: int
    sha256: str
    normalised_sha256: str
    executable: bool
    category: str  # instructions | config
    kind: str  # memory, rules, skill, subagent, command, settings, mcp, hook, ...

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BundleFile:
        given = {f.name: d[f.name] for f in fields(cls)}
        return cls(**{**given, "size": int(d["size"]), "executable": bool(d["executable"])})


@dataclass(frozen=True)
class Bundle:
    root: Path  # the object directory
    doc: dict[str, Any]  # bundle.json
    name: str | None = None  # the name it was loaded by, when it was

    @property
    def digest(self) -> str:
        return self.doc["digest"]

    @property
    def short(self) -> str:
        return self.digest.split(":", 1)[1][:12]

    @property
    def label(self) -> str:
        return self.name or self.short

    @property
    def identity(self) -> dict[str, Any]:
        return self.doc["identity"]

    @property
    def agent(self) -> str:
        return self.identity["agent"]

    @property
    def model(self) -> str | None:
        return self.identity.get("model")

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.identity.get("options") or {})

    @property
    def files(self) -> list[BundleFile]:
        return [BundleFile.from_dict(f) for f in self.identity["files"]]

    def source(self, f: BundleFile) -> Path:
        return self.root / "files" / f.scope / f.path

    def scoped(self, scope: str) -> list[BundleFile]:
        return [f for f in self.files if f.scope == scope]

    @property
    def removes(self) -> list[str]:
        """Project paths a derived bundle also deletes from each task's repo (``--agent-without``)."""
        return [p for p in (self.identity.get("derivation") or {}).get("without", []) if not p.startswith("~/")]

    def describe(self) -> BundleEntry:
        """What a run records about the bundle it ran with (no contents, no machine paths)."""
        ident = self.identity
        return {
            "name": self.name,
            "digest": self.digest,
            "agent": ident["agent"],
            "model": ident.get("model"),
            "options": ident.get("options") or {},
            "derived_from": ident.get("derived_from"),
            "derivation": ident.get("derivation"),
            "digests": self.doc["digests"],
            "files": [
                {"scope": f.scope, "path": f.path, "size": f.size, "category": f.category, "kind": f.kind}
                for f in self.files
            ],
        }


def identity_doc(
    agent: str,
    rules: str,
    model: str | None,
    options: Mapping[str, object],
    files: Sequence[BundleFile],
    derived_from: str | None = None,
    derivation: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    return {
        "bundle_version": BUNDLE_VERSION,
        "agent": agent,
        "surface_rules": rules,
        "model": model,
        "options": {k: v for k, v in sorted(options.items()) if v is not None},
        "files": [f.to_dict() for f in sorted(files, key=lambda f: (f.scope, f.path))],
        "derived_from": derived_from,
        "derivation": dict(derivation) if derivation else None,
    }


def sub_digests(files: Iterable[BundleFile]) -> dict[str, str]:
    """The instruction and configuration parts, hashed the way the manifest hashes them."""
    files = sorted(files, key=lambda f: (f.scope, f.path))
    return {
        # instruction text by its normalised form: a CRLF re-save is the same instruction
        "instructions": digest([[f.scope, f.path, f.normalised_sha256] for f in files if f.category == "instructions"]),
        "config": digest([[f.scope, f.path, f.sha256, f.executable] for f in files if f.category == "config"]),
    }


def safe_rel(rel: str) -> bool:
    p = PurePosixPath(rel)
    return bool(rel) and not p.is_absolute() and ".." not in p.parts and "\\" not in rel


__all__ = [
    "BUNDLE_FILE",
    "BUNDLE_VERSION",
    "CATEGORIES",
    "SCOPES",
    "Bundle",
    "BundleFile",
    "identity_doc",
    "safe_rel",
    "sub_digests",
]
