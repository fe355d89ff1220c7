"""A record's spend (`{"tokens", "cost_usd", "cost_source"}`) in one line of text: the long run's
status and closing lines and the comparison's spend line; and the words of a gated comparison's cost
(decision.json's ``cost``, compare/cost.py), which the terminal, report.md, report.html and the closing
line share. Pure: no pytest, no I/O."""

from __future__ import annotations

from typing import Any, Mapping


def spend_text(spend: Mapping[str, Any] | None, sep: str = ", ", nothing: str = "no usage reported") -> str:
    """`1,234,567 tokens, $3.41`, or what is known of it (`nothing` when neither figure is)."""
    spend = spend or {}
    parts = []
    if spend.get("tokens") is not None:
        parts.append(f"{spend['tokens']:,} tokens")
    if spend.get("cost_usd") is not None:
        parts.append(f"${spend['cost_usd']:,.2f}")
    return sep.join(parts) or nothing


def power_text(power: Mapping[str, Any] | None) -> str | None:
    """'82% against a critical behaviour in half the runs of one task (weakest T07); a fixed design of
    that power: k 8, 96 runs', or None when no power was computed."""
    if not power or power.get("power") is None:
        return None
    text = (
        f"{100 * power['power']:.0f}% against a critical behaviour in half the runs of one task "
        f"(weakest {power['task']})"
    )
    eq = power.get("fixed_equivalent") or {}
    if power.get("design") == "confirm":
        text += (
            f"; a fixed design of that power: k {eq['k']}, {eq['runs']} runs"
            if eq.get("k")
            else f"; no fixed design up to k {eq.get('k_max')} has that power"
        )
    return text


def arm_text(arm: Mapping[str, Any]) -> str:
    """'42 run(s), 1,234 tokens, $1.20, 95 s' (runs always; what else the record says)."""
    records = arm.get("records") or 1
    runs = f"{arm['runs']} run(s)" + (f" from {records} record(s)" if records > 1 else "")
    if arm.get("not_needed"):
        runs += f" ({arm['not_needed']} not needed)"
    bits = [runs]
    if arm.get("tokens") is not None:
        bits.append(f"{arm['tokens']:,} tokens")
    if arm.get("cost_usd") is not None:
        bits.append(f"${arm['cost_usd']:,.2f}")
    if arm.get("wall_s") is not None:
        bits.append(f"{arm['wall_s']:.0f} s")
    return ", ".join(bits)
