"""Machine-readable exporters: Invoice -> text for other systems (accounting, ERP).

Every exporter module registers itself in EXPORTERS: name -> callable(Invoice) -> str.
Read AGENTS.md in this directory before adding one.
"""

from __future__ import annotations

from typing import Callable

EXPORTERS: dict[str, Callable] = {}


def register(name: str):
    """Decorator: add an exporter function to EXPORTERS under `name`."""
    def wrap(func):
        EXPORTERS[name] = func
        return func
    return wrap
