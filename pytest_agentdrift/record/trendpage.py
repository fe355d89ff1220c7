"""The trend page: one self-contained HTML file of a series of records (compare/trend.py's document).

Inline CSS and inline SVG only, under a Content-Security-Policy that allows
that one style block and nothing else (no script, no request). Per task and
layer one plot: the pass rate of each record with its 95% Wilson interval,
dashed lines where the runtime's identity changed (named above the plots),
and a ring where the rate moved significantly. Records outside the series are
listed apart with the reason. No pytest.
"""

from __future__ import annotations

from typing import Any, Mapping

from pytest_agentdrift.record.html import csp_hash, esc

_CSS = """
body{font:14px system-ui,sans-serif;color:#1f2328;margin:16px 24px;max-width:1400px}
h1{font-size:20px}h2{font-size:16px;margin-top:24px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d0d7de;padding:2px 8px;text-align:left;vertical-align:top}
code{font:12px ui-monospace,monospace}.mut{color:#656d76}.moved{color:#cf222e;font-weight:600}
.plots{display:flex;flex-wrap:wrap;gap:8px}.plot{border:1px solid #d0d7de;border-radius:6px;padding:4px}
svg text{font:11px system-ui,sans-serif;fill:#1f2328}
"""
_CSP = f"default-src 'none'; style-src {csp_hash(_CSS)}; img-src 'none'; base-uri 'none'; form-action 'none'"
_W, _H, _PAD = 46, 110, 26


def _plot(row: Mapping[str, Any], changed_at: set[int]) -> str:
    pts = row["points"]
    width = _PAD * 2 + _W * max(1, len(pts) - 1)
    moved = {m["at"] for m in row["moves"]}

    def x(i: int) -> float:
        return _PAD + _W * i

    def y(rate: float) -> float:
        return 12 + (1 - rate) * (_H - 30)

    parts = [
        f'<line x1="{_PAD - 4}" y1="{y(0)}" x2="{width - _PAD + 4}" y2="{y(0)}" stroke="#d0d7de"/>',
        f'<line x1="{_PAD - 4}" y1="{y(1)}" x2="{width - _PAD + 4}" y2="{y(1)}" stroke="#d0d7de"/>',
        f'<text x="2" y="{y(1) + 4}">1</text><text x="2" y="{y(0) + 4}">0</text>',
    ]
    for i in sorted(changed_at):
        xm = x(i) - _W / 2
        parts.append(f'<line x1="{xm}" y1="6" x2="{xm}" y2="{_H - 14}" stroke="#8250df" stroke-dasharray="4 3"/>')
    line = []
    for i, p in enumerate(pts):
        parts.append(f'<text x="{x(i) - 6}" y="{_H - 2}">#{i + 1}</text>')
        if not p or not p["n"]:
            continue
        lo, hi = p["ci"]
        parts.append(f'<line x1="{x(i)}" y1="{y(lo)}" x2="{x(i)}" y2="{y(hi)}" stroke="#57606a" stroke-width="2"/>')
        line.append(f"{x(i)},{y(p['rate'])}")
        title = f"#{i + 1}: {p['passes']}/{p['n']} ({p['rate']:.0%}), 95% CI {lo:.0%}-{hi:.0%}"
        parts.append(
            f'<circle cx="{x(i)}" cy="{y(p["rate"])}" r="3.5" fill="#0969da"><title>{esc(title)}</title></circle>'
        )
        if i in moved:
            parts.append(
                f'<circle cx="{x(i)}" cy="{y(p["rate"])}" r="8" fill="none" stroke="#cf222e" stroke-width="2"/>'
            )
    if len(line) > 1:
        parts.insert(3, f'<polyline points="{" ".join(line)}" fill="none" stroke="#0969da" stroke-opacity="0.5"/>')
    label = f"{row['task']} {row['layer']}"
    return (
        f'<div class="plot"><div>{esc(label)}</div><svg width="{width}" height="{_H}" role="img" '
        f'aria-label="{esc(label)} pass rate over the series">{"".join(parts)}</svg></div>'
    )


def trend_page(doc: Mapping[str, Any]) -> str:
    recs = doc["records"]
    changed_at = {r["index"] - 1 for r in recs if r["changes"]}
    body = [f"<h1>agentdrift trend: {len(recs)} record(s) in the series</h1>"]
    body.append("<table><tr><th>#</th><th>started</th><th>run</th><th>identity changed since the previous</th></tr>")
    for r in recs:
        changes = "<br>".join(
            f"<code>{esc(c['field'])}</code> {esc(_short(c['from']))} \u2192 {esc(_short(c['to']))}"
            for c in r["changes"]
        )
        regraded = f' <span class="mut">(regraded from {esc(r["regraded_from"])})</span>' if r["regraded_from"] else ""
        body.append(
            f"<tr><td>{r['index']}</td><td>{esc(r['started_at'])}</td><td><code>{esc(r['run_id'])}</code>{regraded}</td>"
            f"<td>{changes}</td></tr>"
        )
    body.append("</table>")
    t = doc["test"]
    moves = [(row, m) for row in doc["rows"] for m in row["moves"]]
    body.append(
        f'<h2>Moves</h2><p class="mut">{esc(t["name"])}; flagged at p \u2264 {t["threshold"]:.2g} '
        f"({t['alpha']} over {t['tests']} neighbour tests). Dashed lines: the runtime's identity changed.</p><ul>"
    )
    body += [
        f'<li class="moved">{esc(row["task"])} {esc(row["layer"])}: #{m["at"]} \u2192 #{m["at"] + 1} '
        f"{esc(m['direction'])} ({m['from']:.0%} \u2192 {m['to']:.0%}, p = {m['p']:.2g})</li>"
        for row, m in moves
    ] or ['<li class="mut">none</li>']
    body.append("</ul><h2>Pass rate per task and layer (95% Wilson intervals)</h2>")
    tasks: dict[str, list[Mapping[str, Any]]] = {}
    for row in doc["rows"]:
        tasks.setdefault(row["task"], []).append(row)
    for tid, rows in tasks.items():
        body.append(f'<h2>{esc(tid)}</h2><div class="plots">{"".join(_plot(r, changed_at) for r in rows)}</div>')
    if doc["apart"]:
        body.append("<h2>Not in the series (never pooled)</h2><ul>")
        body += [f"<li><code>{esc(a['path'])}</code>: {esc(a['why'])}</li>" for a in doc["apart"]]
        body.append("</ul>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>agentdrift trend</title><style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _short(value: Any, limit: int = 40) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
