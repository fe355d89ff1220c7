"""The runtime manifest diff: which identity fields blocked, changed, varied or were deferred."""

from __future__ import annotations

from pytest_agentdrift.record.html.escape import esc
from pytest_agentdrift.record.html.fmt import code, json_list, json_object, short_json
from pytest_agentdrift.shapes import JsonObject, JsonValue


def manifest_diff_section(md: JsonObject | None) -> str:
    if not md:
        return '<h3>Runtime manifest diff</h3><p class="mut">not recorded (comparison/manifest-diff.json)</p>'
    out = ['<h3 id="manifest-diff">Runtime manifest diff</h3>']
    if md.get("explanation"):
        out.append(f"<p>{esc(md.get('change_class', ''))}: {esc(md['explanation'])}</p>")
    rows = _diff_rows(md)
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
    unobserved = json_list(md.get("unobserved"))
    if unobserved:
        out.append(f'<p class="small">unobserved on both sides (accepted): {esc(", ".join(map(str, unobserved)))}</p>')
    same = json_list(md.get("same"))
    if same:
        out.append(
            f'<details class="ev"><summary>{len(same)} identity field(s) the same</summary>'
            f'<p class="small">{esc(", ".join(map(str, same)))}</p></details>'
        )
    return "".join(out)


def _diff_rows(md: JsonObject) -> list[tuple[str, JsonValue, JsonValue, JsonValue]]:
    """(kind, field, baseline, candidate): the blocking fields, the changed or varied ones, the noted, the deferred."""
    rows: list[tuple[str, JsonValue, JsonValue, JsonValue]] = []
    for block in json_list(md.get("blocks")):
        if isinstance(block, dict):
            rows.append(("blocked", block.get("field"), block.get("baseline"), block.get("current")))
        elif isinstance(block, list) and len(block) == 3:
            rows.append(("blocked", block[0], block[1], block[2]))
    varied = json_list(md.get("varied"))
    for name, change in sorted(json_object(md.get("changed")).items()):
        kind = "varied" if name in varied else "changed"
        sides = json_object(change)
        rows.append((kind, name, sides.get("baseline"), sides.get("current")))
    for note in json_list(md.get("notes")):
        if isinstance(note, dict):
            rows.append(("noted", note.get("field"), note.get("baseline"), note.get("current")))
    for field in json_list(md.get("deferred")):
        rows.append(("deferred", field, "", "compared after the runs"))
    return rows
