"""A record's spend (`{"tokens", "cost_usd", "cost_source"}`) in one line of text: the long run's
status and closing lines and the comparison's spend line. Pure: no pytest, no I/O."""

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
