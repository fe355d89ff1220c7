"""The page's ids: one per task, run, check and piece of evidence, made from names an agent may have chosen."""

from __future__ import annotations


def slug(text: object) -> str:
    """An id fragment: ASCII letters, digits, - and _ kept, anything else as .hex. (injective)."""
    return "".join(c if (c.isascii() and (c.isalnum() or c in "-_")) else f".{ord(c):x}." for c in str(text))


def task_anchor(tid: str) -> str:
    return f"t-{slug(tid)}"


def run_anchor(tid: str, rep: object) -> str:
    return f"r-{slug(tid)}-{slug(rep)}"


def check_anchor(tid: str, rep: object, index: int) -> str:
    return f"c-{slug(tid)}-{slug(rep)}-{index}"


def evidence_anchor(tid: str, rep: object, index: int) -> str:
    return f"e-{slug(tid)}-{slug(rep)}-{index}"
