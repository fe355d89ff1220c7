"""The comparison's two inline SVG plots: each arm's pass rate with its Wilson interval, and the paired delta."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from pytest_agentdrift.record.html.escape import esc
from pytest_agentdrift.record.html.fmt import pct, pp
from pytest_agentdrift.shapes import JsonObject, JsonValue


def _interval_row(
    y: int,
    label: str,
    point: float | None,
    lo: float | None,
    hi: float | None,
    scale: Callable[[float], float],
    colour: str,
    text: str,
    text_x: float = 610,
) -> str:
    parts = [f'<text x="4" y="{y + 4}">{esc(label)}</text>']
    if lo is not None and hi is not None:
        parts.append(
            f'<line x1="{scale(lo):.1f}" y1="{y}" x2="{scale(hi):.1f}" y2="{y}" stroke="{colour}" stroke-width="3"/>'
            f'<line x1="{scale(lo):.1f}" y1="{y - 6}" x2="{scale(lo):.1f}" y2="{y + 6}" stroke="{colour}" stroke-width="2"/>'
            f'<line x1="{scale(hi):.1f}" y1="{y - 6}" x2="{scale(hi):.1f}" y2="{y + 6}" stroke="{colour}" stroke-width="2"/>'
        )
    if point is not None:
        parts.append(f'<circle cx="{scale(point):.1f}" cy="{y}" r="5" fill="{colour}"/>')
    parts.append(f'<text x="{text_x:.0f}" y="{y + 4}">{esc(text)}</text>')
    return "".join(parts)


def _num_or_none(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


_PLOT_LEFT, _PLOT_WIDTH = 90, 500


def rates_svg(arms: Mapping[str, JsonObject], paired: JsonObject | None) -> str:
    """Two small plots: each arm's pass rate with its Wilson interval on 0-100 %, the delta on -100..+100 pp."""
    method = (paired or {}).get("ci_method")
    note = (
        f'<p class="small mut">delta: {esc(method)}'
        + (f", {esc(paired.get('draws'))} draws" if paired and paired.get("draws") else "")
        + "</p>"
        if method
        else ""
    )
    return _pass_rate_plot(arms) + _delta_plot(paired) + note


def _pass_rate_plot(arms: Mapping[str, JsonObject]) -> str:
    def rate_x(v: float) -> float:
        return _PLOT_LEFT + _PLOT_WIDTH * min(max(v, 0.0), 1.0)

    svg = [
        (
            '<svg id="rates-plot" role="img" aria-label="pass rates with 95% Wilson intervals" width="860" height="120" '
            'viewBox="0 0 860 120" xmlns="http://www.w3.org/2000/svg">'
        )
    ]
    for i in range(11):
        x = rate_x(i / 10)
        svg.append(f'<line x1="{x:.1f}" y1="14" x2="{x:.1f}" y2="86" stroke="#d0d7de"/>')
        if i % 2 == 0:
            svg.append(f'<text x="{x - 10:.1f}" y="104">{i * 10}%</text>')
    for y, label, colour in ((34, "baseline", "#57606a"), (66, "candidate", "#0969da")):
        arm = arms.get(label) or {}
        given = arm.get("wilson")
        wilson: list[JsonValue] = given if isinstance(given, list) and len(given) == 2 else [None, None]
        rate = _num_or_none(arm.get("pass_rate"))
        text = (
            f"{arm.get('passes', '?')}/{arm.get('runs', '?')} = {pct(rate)} [{pct(wilson[0])}, {pct(wilson[1])}]"
            if arm
            else "not recorded"
        )
        svg.append(
            _interval_row(y, label, rate, _num_or_none(wilson[0]), _num_or_none(wilson[1]), rate_x, colour, text)
        )
    svg.append("</svg>")
    return "".join(svg)


def _delta_plot(paired: JsonObject | None) -> str:
    delta = _num_or_none((paired or {}).get("delta"))
    given = (paired or {}).get("delta_ci")
    ci: list[JsonValue] = given if isinstance(given, list) else [None, None]

    def delta_x(v: float) -> float:
        return _PLOT_LEFT + _PLOT_WIDTH * (min(max(v, -1.0), 1.0) + 1) / 2

    svg = [
        '<svg id="delta-plot" role="img" aria-label="paired delta with its interval" width="860" height="90" '
        'viewBox="0 0 860 90" xmlns="http://www.w3.org/2000/svg">'
    ]
    for v in (-1.0, -0.5, 0.0, 0.5, 1.0):
        x = delta_x(v)
        svg.append(
            f'<line x1="{x:.1f}" y1="10" x2="{x:.1f}" y2="56" stroke="{"#1f2328" if v == 0 else "#d0d7de"}"/>'
            f'<text x="{x - 16:.1f}" y="74">{int(v * 100):+d} pp</text>'
        )
    if delta is None:
        svg.append(
            '<text x="4" y="36">delta</text><text x="140" y="36">null: the runs are not comparable or were not paired</text>'
        )
    else:
        colour = "#cf222e" if delta < 0 else "#1a7f37"
        text = f"{pp(delta)} [{pp(ci[0])}, {pp(ci[1])}]"
        svg.append(_interval_row(32, "delta", delta, _num_or_none(ci[0]), _num_or_none(ci[1]), delta_x, colour, text))
    svg.append("</svg>")
    return "".join(svg)
