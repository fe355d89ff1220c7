"""The runtime manifest diff: which identity fields blocked, changed, varied or were deferred."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_agentdrift.record.html.escape import esc
from pytest_agentdrift.record.html.fmt import code, short_json


def manifest_diff_section(md: Mapping[str, Any] | None) -> str:  # noqa: C901 (known debt: split by job when next touched)
    if not md:
        return '<h3>Runtime manifest diff</h3><p class="mut">not recorded (comparison/manifest-diff.json)</p>'
    out = ['<h3 id="manifest-diff">Runtime manifest diff</h3>']
    if md.get("explanation"):
        out.append(f"<p>{esc(md.get('change_class', ''))}: {esc(md['explanation'])}</p>")
    rows = []
    for block in md.get("blocks") or []:
        if isinstance(block, Mapping):
            rows.append(("blocked", block.get("field"), block.get("baseline"), block.get("current")))
        elif isinstance(block, list) and len(block) == 3:
            rows.append(("blocked", *block))
    for name, change in sorted((md.get("changed") or {}).items()):
        kind = "varied" if name in (md.get("varied") or []) else "changed"
        rows.append((kind, name, (change or {}).get("baseline"), (change or {}).get("current")))
    for note in md.get("notes") or []:
        if isinstance(note, Mapping):
            rows.append(("noted", note.get("field"), note.get("baseline"), note.get("current")))
    for name in md.get("deferred") or []:
        rows.append(("deferred", name, "", "compared after the runs"))
    if rows:
        body = "".join(
            f'<tr class="md-{esc(kind)}"><td><b>{esc(kind)}</b></td><td>{code(name)}</td>'
            f"<td>{short_json(b)}</td><td>{short_json(cur)}</td></tr>"
            for kind, name, b, cur in rows
        )
        out.append(
            f'<table id="manifest-diff-table"><thead><tr><th></th><th>field</th><th>baseline</th><th>candidate</th></tr></thead>'
            f"<tbody>{body}</tbody></table>"
        )
    if md.get("unobserved"):
        out.append(
            f'<p class="small">unobserved on both sides (accepted): {esc(", ".join(map(str, md["unobserved"])))}</p>'
        )
    if md.get("same"):
        out.append(
            f'<details class="ev"><summary>{len(md["same"])} identity field(s) the same</summary>'
            f'<p class="small">{esc(", ".join(map(str, md["same"])))}</p></details>'
        )
    return "".join(out)
