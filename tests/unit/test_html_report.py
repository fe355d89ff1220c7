"""report.html from results dicts and record directories: escaping, sections, links, size."""

from __future__ import annotations

import base64
import copy
import hashlib
import html.parser
import importlib.util
import json
import re
from pathlib import Path

import pytest

from pytest_agentdrift.record import html as hr
from pytest_agentdrift.tasks.taskspec import LAYERS

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_html_report.py"
HOSTILE = "evil\nname\x1b[31m<script>alert(1)</script>\udcff\u202e.txt"


def bench():
    spec = importlib.util.spec_from_file_location("bench_html_report", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def results(n_tasks: int = 3, k: int = 2) -> dict:
    return bench().synthetic_results(n_tasks, k)


class Page(html.parser.HTMLParser):
    """Ids, in-page links, external references and element counts of a rendered page."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.ids: list[str] = []
        self.hrefs: list[str] = []
        self.refs: list[str] = []  # src / href / action values that are not in-page anchors
        self.tags: dict[str, int] = {}
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        for name, value in attrs:
            if name == "id":
                self.ids.append(value)
            if name in ("href", "src", "action", "data", "poster", "srcset") and value is not None:
                (self.hrefs if value.startswith("#") else self.refs).append(value)

    def handle_data(self, data):
        self.text.append(data)


def test_esc_makes_specials_visible_and_escapes_markup():
    out = hr.esc(HOSTILE)
    assert "\n" not in out and "\x1b" not in out and "\u202e" not in out
    assert "<script>" not in out and "&lt;script&gt;" in out
    assert '<span class="cc">\\n</span>' in out
    assert '<span class="cc">\\x1b</span>' in out
    assert '<span class="cc">\\xff</span>' in out  # the byte that was not UTF-8, from surrogateescape
    assert '<span class="cc">\\u202e</span>' in out  # a bidi override would reorder what a person reads
    out.encode("utf-8")  # no lone surrogate survives


def test_esc_block_keeps_line_breaks_but_not_other_controls():
    out = hr.esc("line 1\n\tline 2\r\n\x1b[0m\x00", block=True)
    assert "line 1\n\tline 2" in out
    assert "\r" not in out and "\x1b" not in out and "\x00" not in out
    assert '<span class="cc">\\r</span>' in out and '<span class="cc">\\x00</span>' in out


def test_attr_has_no_markup_and_no_controls():
    value = hr.attr('a"b<c>\n\x1b')
    assert value == "a&quot;b&lt;c&gt;\\n\\x1b"


def test_slug_is_injective_and_id_safe():
    names = ["T1", "T.1", "T_1", "T-1", "T 1", "T/1", "Té"]
    slugs = [hr.slug(n) for n in names]
    assert len(set(slugs)) == len(names)
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+", s) for s in slugs)


def hostile_record(tmp_path: Path) -> tuple[Path, dict]:
    r = results(2, 1)
    run = r["tasks"]["S0000"]["runs"][0]
    run["evidence"]["changed"] = {"added": [HOSTILE], "modified": [], "deleted": [], "mode": []}
    run["evidence"]["writes_outside"] = ["../" + HOSTILE]
    run["checks"][0].update(
        passed=False, detail="changed " + HOSTILE, evidence={"tail": "\x1b[31mFAILED\x1b[0m\nline 2"}
    )
    run["report"] = {
        "status": "complete",
        "summary": "<img src=x onerror=alert(1)> " + HOSTILE,
        "checks_run": [HOSTILE],
        "checks_skipped": [],
        "answer": "\x1b]0;title\x07",
    }
    r["tasks"]["S0000"]["title"] = "<b>task title</b>"
    raw = tmp_path / "run" / run["raw"]
    raw.mkdir(parents=True)
    header = f"diff --agentdrift a/{HOSTILE} b/{HOSTILE}\n"
    patch = header + f"--- /dev/null\n+++ b/{HOSTILE}\n@@ -0,0 +1 @@\n+\x1b[2Jgone\n"
    (raw / "diff.patch").write_bytes(patch.encode("utf-8", "surrogateescape"))
    (raw / "events.jsonl").write_text(json.dumps({"type": "file_edit", "path": HOSTILE}) + "\n")
    (raw / "stdout.txt").write_bytes(b"\x1b[31mred\x1b[0m \xff\xfe not utf-8\n")
    (raw / "stderr.txt").write_text("")
    return tmp_path / "run", r


def test_hostile_text_never_reaches_the_page_raw(tmp_path):
    run_dir, r = hostile_record(tmp_path)
    page = hr.render(hr.ReportInput(results=r, run_dir=run_dir))
    page.encode("utf-8")
    assert "\x1b" not in page and "\u202e" not in page and "\x07" not in page
    parsed = Page(page)
    assert parsed.tags.get("img", 0) == 0
    assert parsed.tags.get("script") == 1  # only the page's own
    assert "<b>task title</b>" not in page
    text = "".join(parsed.text)
    assert "evil\nname" not in text
    shown = "evil\\nname\\x1b[31m<script>alert(1)</script>\\xff\\u202e.txt"
    # the changed path, the outside write, the check detail, the event, the report and the patch header
    assert text.count(shown) >= 6
    assert "diff --agentdrift a/" + shown + " b/" + shown in text  # one header line despite the newline
    assert "\\x1b[31mred\\x1b[0m \\xff\\xfe not utf-8" in text


def test_render_patch_colours_lines_and_keeps_unknown_headers_as_lines():
    patch = (
        "diff --agentdrift a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-old\n+new\n ctx\n"
        "\\ No newline at end of file\n"
    )
    out = hr.render_patch(patch, ["x.py"])
    classes = re.findall(r'<span class="(\w)">', out)
    assert classes == ["h", "f", "f", "k", "d", "a", "c", "m"]
    # a path the harness did not list is still shown, line by line, escaped
    out = hr.render_patch("diff --agentdrift a/a\nb b/a\nb\n", [])
    assert out.count('<span class="h">') == 1 and "\n" not in out


def test_sections_links_and_no_external_reference(tmp_path):
    mod = bench()
    r = mod.write_synthetic_record(tmp_path / "run", 6, 3)
    page = hr.render_record(tmp_path / "run")
    parsed = Page(page)
    for section in ("top", "summary", "grid", "grid-table", "tasks", "legend", "layer-legend"):
        assert section in parsed.ids, section
    assert "comparison" not in parsed.ids
    assert len(parsed.ids) == len(set(parsed.ids)), "duplicate ids"
    missing = [h for h in parsed.hrefs if h[1:] not in set(parsed.ids)]
    assert missing == []
    assert parsed.refs == []  # nothing to fetch: no src, no external href
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page
    # task -> run -> check -> evidence
    tid = sorted(r["tasks"])[0]
    assert f'href="#{hr.run_anchor(tid, 1)}"' in page and hr.run_anchor(tid, 1) in parsed.ids
    assert hr.check_anchor(tid, 1, 0) in parsed.ids
    assert hr.evidence_anchor(tid, 1, 0) in parsed.ids
    assert page.count('class="task-row') == 6
    for layer in LAYERS:
        assert f"<code>{layer}</code>" in page  # every abbreviation explained


def test_content_security_policy_pins_the_inline_blocks():
    page = hr.render(hr.ReportInput(results=results()))
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in csp and "img-src 'none'" in csp
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)
    for block in (style, script):
        digest = base64.b64encode(hashlib.sha256(block.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp
    assert "style=" not in page  # inline style attributes would be refused by the policy


def test_grid_marks_outcomes_distinctly_and_tolerates_outcomes_it_does_not_know():
    r = results(1, 6)
    runs = r["tasks"]["S0000"]["runs"]
    base_run = copy.deepcopy(runs[0])
    states = [
        ("passed", {}),
        ("failed", {"critical_failed": ["x"]}),
        ("failed", {"tampered_pass": True}),
        ("infra_error", {}),
        ("resource_exceeded", {}),
        ("quantum_flux", {}),
    ]
    for i, (run, (outcome, extra)) in enumerate(zip(runs, states, strict=False), 1):
        run.update(copy.deepcopy(base_run))
        run.update(
            {
                "outcome": outcome,
                "passed": outcome == "passed",
                "tampered_pass": False,
                "critical_failed": [],
                "rep": i,
                **extra,
            }
        )
    page = hr.render(hr.ReportInput(results=r))
    row = re.search(r'<tr class="task-row[^"]*".*?</tr>', page, re.S).group(0)
    chips = re.findall(r'class="chip (\w+)"', row)
    assert chips == ["ok", "crit", "tamp", "infra", "res", "oth"]
    assert "has-crit" in row and "has-tamp" in row
    assert "quantum_flux" in page


def test_comparison_section_from_decision_and_comparison(tmp_path):
    paired = {
        "won": ["S0002"],
        "lost": ["S0000", "S0001"],
        "tied": ["S0003"],
        "p_value": 0.875,
        "discordant": 3,
        "delta": -0.25,
        "delta_ci": [-0.6, 0.1],
        "ci_method": "paired percentile bootstrap over tasks",
        "draws": 100,
        "test": "exact one-sided binomial",
    }
    decision = {
        "status": "hold",
        "status_rule": "hold",
        "because": ["not enough evidence"],
        "comparable": True,
        "change_class": "model_candidate",
        "reasons": [],
        "critical_failures": [],
        "rollback_state": "unknown",
        "gate": {
            "verdict": "hold",
            "quality_verdict": "hold",
            "passed": False,
            "reason": "not enough evidence",
            "params": {"tau": 0.1},
            "strata": {"core": "hold"},
        },
        "evidence": {
            "baseline": {"passes": 8, "runs": 10, "pass_rate": 0.8, "wilson": [0.49, 0.94]},
            "candidate": {"passes": 6, "runs": 10, "pass_rate": 0.6, "wilson": [0.31, 0.83]},
            "paired": paired,
            "smallest_detectable_regression": 0.3,
        },
    }
    rows = {
        t: {"baseline": b, "candidate": c, "delta": d, "critical_regressions": [], "new_safety_failure": False}
        for t, b, c, d in (
            ("S0000", [1, 1], [0, 1], -1.0),
            ("S0001", [1, 1], [0, 1], -1.0),
            ("S0002", [0, 1], [1, 1], 1.0),
            ("S0003", [1, 1], [1, 1], 0.0),
        )
    }
    diff = {
        "blocks": [],
        "changed": {"model_id": {"baseline": "m1", "current": "m2\x1b"}},
        "varied": ["model_id"],
        "notes": [{"field": "run_id", "baseline": "a", "current": "b"}],
        "same": ["os"],
        "unobserved": [],
    }
    inp = hr.ReportInput(results=results(4, 1), decision=decision, comparison={"tasks": rows}, manifest_diff=diff)
    page = hr.render(inp)
    parsed = Page(page)
    assert {
        "comparison",
        "decision",
        "rates-plot",
        "delta-plot",
        "paired-table",
        "paired-matrix",
        "manifest-diff-table",
    } <= set(parsed.ids)
    assert page.count('<tr class="lost">') == 2 and page.count('<tr class="won">') == 1
    assert "-25.0 pp [-60.0 pp, +10.0 pp]" in page
    assert "8/10 = 80.0% [49.0%, 94.0%]" in page
    assert "smallest_detectable_regression = +30.0 pp" in page
    assert 'class="md-varied"' in page and 'class="md-noted"' in page
    assert "\x1b" not in page


def test_not_comparable_comparison_says_null():
    decision = {
        "status": "invalid_comparison",
        "because": ["runs are not comparable"],
        "comparable": False,
        "reasons": ["model_id: 'a' != 'b'"],
        "gate": {"verdict": None, "passed": False, "reason": "runs are not comparable"},
        "evidence": {"paired": None},
    }
    page = hr.render(hr.ReportInput(results=results(), decision=decision))
    assert "no: every delta is null" in page
    assert "null: the runs are not comparable" in page
    assert "model_id: &#x27;a&#x27; != &#x27;b&#x27;" in page


def test_incomplete_run_and_unreadable_comparison_are_said(tmp_path):
    mod = bench()
    r = mod.write_synthetic_record(tmp_path / "run", 2, 1)
    r["complete"] = False
    r["incomplete_reasons"] = ["worker gw1 crashed: <oops>"]
    (tmp_path / "run" / "results.json").write_text(json.dumps(r))
    (tmp_path / "run" / "comparison").mkdir()
    (tmp_path / "run" / "comparison" / "decision.json").write_text("{not json")
    page = hr.render_record(tmp_path / "run")
    assert "INCOMPLETE" in page and "worker gw1 crashed: &lt;oops&gt;" in page
    assert "decision.json could not be read" in page


def test_record_page_turns_a_rendering_bug_into_a_page_that_says_so():
    page = hr.record_page(Path("/nonexistent"), {"run_id": "r1", "tasks": {"T": {"runs": [42]}}})
    assert "report.html could not be rendered" in page and "results.json and report.md hold the complete record" in page


def test_raw_artifacts_are_read_bounded_and_never_through_links(tmp_path):
    run_dir, r = hostile_record(tmp_path)
    run = r["tasks"]["S0000"]["runs"][0]
    raw = run_dir / run["raw"]
    (raw / "stdout.txt").write_text("x" * (hr.HEAD_LIMIT * 3))
    (raw / "stderr.txt").unlink()
    (raw / "stderr.txt").symlink_to("/etc/passwd")
    inp = hr.ReportInput(results=r, run_dir=run_dir)
    head = inp.raw(run, "stdout.txt", hr.HEAD_LIMIT)
    assert head.truncated and len(head.text) == hr.HEAD_LIMIT and head.size == hr.HEAD_LIMIT * 3
    assert inp.raw(run, "stderr.txt", hr.HEAD_LIMIT).text is None
    escaping = dict(run, raw="../../etc")
    assert "leaves the record" in inp.raw(escaping, "stdout.txt", 100).problem
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "stdout.txt").write_text("not part of the record\n")
    (run_dir / "raw" / "linked").symlink_to(outside)
    assert "leaves the record" in inp.raw(dict(run, raw="raw/linked"), "stdout.txt", 100).problem


@pytest.mark.slow  # writes a 10,500-file record: the full suite checks the stated scale, the inner loop does not
def test_500_tasks_by_3_renders_within_the_stated_size(tmp_path):
    mod = bench()
    r = mod.write_synthetic_record(tmp_path / "run", 500, 3)
    page = hr.render_record(tmp_path / "run", r)
    size = len(page.encode("utf-8"))
    assert size <= mod.SIZE_BUDGET, f"{size:,} bytes > budget {mod.SIZE_BUDGET:,}"
    assert page.count('class="task-row') == 500
    assert page.count('<details class="run"') == 1500
    assert " open" not in re.search(r'<details class="task"[^>]*>', page).group(0)  # collapsed


def test_markdown_links_the_page():
    from pytest_agentdrift.record.report import markdown

    assert "[report.html](report.html)" in markdown(results())


def test_every_outcome_in_the_vocabulary_is_drawn_with_a_mark_every_font_has():
    from pytest_agentdrift.vocabulary import RUN_OUTCOMES

    for outcome in RUN_OUTCOMES:
        assert outcome in hr.OUTCOMES, f"{outcome} would be drawn as 'other'"
        assert hr.run_state({"outcome": outcome, "passed": outcome == "passed"}) == outcome
    # Latin-1, General Punctuation and Dingbats check marks: in the common fonts; U+231B is not
    assert all(ord(mark) < 0x2300 or 0x2700 <= ord(mark) < 0x27C0 for _, mark, _ in hr.OUTCOMES.values())


def test_limits_in_human_units_and_the_smallest_detectable_regression_in_prose():
    r = results(2, 1)
    r.setdefault("settings", {})["limits"] = {"memory": 4 << 30, "procs": 64}
    regression = {
        "passed": True,
        "alpha": 0.05,
        "minimum_detectable": {"mde_pp": 50, "power": 0.8, "tasks": 12, "k": 1},
    }
    decision = {"status": "ship", "because": [], "comparable": True, "regression_gate": regression}
    page = hr.render(hr.ReportInput(results=r, decision=decision, comparison={"tasks": {}, "regression": regression}))
    assert "memory 4 GiB" in page and "4294967296" not in page and "procs 64" in page
    assert "50 pp at power 0.8, alpha 0.05, 12 tasks, k = 1" in page
    assert "{" not in re.search(r"smallest detectable regression.*?</dd>", page, re.S).group(0)


def test_every_run_that_did_not_end_in_a_grade_is_listed_as_not_finished_normally():
    from pytest_agentdrift.vocabulary import ERROR_LIKE_OUTCOMES, RUN_OUTCOMES, UNSCORED_OUTCOMES

    odd = sorted(ERROR_LIKE_OUTCOMES | UNSCORED_OUTCOMES)
    graded = sorted(set(RUN_OUTCOMES) - set(odd))
    r = results(1, len(odd) + len(graded) + 1)
    runs = r["tasks"]["S0000"]["runs"]
    for i, (run, outcome) in enumerate(zip(runs, [*odd, *graded, "quantum_flux"], strict=True), 1):
        run.update({"outcome": outcome, "passed": outcome == "passed", "tampered_pass": False, "rep": i})
        run["critical_failed"] = []
    page = hr.render(hr.ReportInput(results=r))
    listed = re.search(r"<h3>Runs that did not finish normally</h3><p>(.*?)</p>", page, re.S).group(1)
    for outcome in [*odd, "quantum_flux"]:
        assert f"({outcome})" in listed, f"a run that ended {outcome} is not listed"
    for outcome in graded:
        assert f"({outcome})" not in listed
