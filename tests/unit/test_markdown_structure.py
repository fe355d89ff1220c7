"""report.md and the PR summary render as meant: parsed by markdown-it-py (GitHub-flavoured) and
the structure checked: each run's checks in one list, no stray emphasis from paths or pytest output,
multi-line details and output tails in code blocks, blank lines around lists."""

from __future__ import annotations

import json

import markdown_it
from test_report import check, results, run
from test_summary import all_passed, synthetic

from pytest_agentdrift.compare.comparison import compare_runs
from pytest_agentdrift.compare.gates import GateParams
from pytest_agentdrift.compare.status import decision_document
from pytest_agentdrift.record.report import markdown
from pytest_agentdrift.record.summary import run_summary

#: what pytest prints for a failed assertion: the message, then `+  where` lines
PYTEST_DETAIL = (
    "tests/__init__.py::test_add failed: assert add(2, 3) == 5\n +  where 1 = add(2, 3)\n +  and   *args = (2, 3)"
)
TAIL = "E   assert 1 == 5\n```\n![pixel](http://127.0.0.1:9/p.png)\n<img src=x>"


def parse(text: str):
    md = markdown_it.MarkdownIt("gfm-like")
    if md.linkify is not None:  # GitHub autolinks URLs and www. names, not bare names such as calc.py
        md.linkify.set({"fuzzy_link": False})
    return md.parse(text)


def report_tokens():
    r = results()
    failing = check("tests", "correctness", False, kind="pytest", detail=PYTEST_DETAIL, evidence={"tail": TAIL})
    r["tasks"]["T2"]["runs"] = [run(1, "failed", [check("ok", "scope", True), failing, check("later", "safety", True)])]
    return markdown(r), parse(markdown(r))


def test_report_md_checks_of_a_run_stay_one_list_with_their_details_in_code_blocks():
    text, tokens = report_tokens()
    section = text[text.index("### T2: Second") :].split("\n### ")[0]
    toks = parse(section)
    # the run is one item of a top-level list; its checks are the items of one nested list
    nested = [t for t in toks if t.type == "bullet_list_open" and t.level > 0]
    assert len(nested) == 1, [t.type for t in toks]
    items = [t for t in toks if t.type == "list_item_open" and t.level == nested[0].level + 1]
    check_lines = [ln for ln in section.splitlines() if ln.startswith("  - ")]
    assert len(items) == len(check_lines) >= 4
    # the `+  where` lines and the tail are code blocks inside the check's item, not new lists
    fences = [t for t in toks if t.type == "fence"]
    assert any("+  where 1 = add(2, 3)" in f.content for f in fences)
    assert any("![pixel]" in f.content and "```" in f.content for f in fences)  # the tail's fence closer is content


def test_report_md_has_no_stray_emphasis_image_or_html():
    text, tokens = report_tokens()
    inline = [c for t in tokens if t.type == "inline" for c in t.children or ()]
    assert not [c for c in inline if c.type == "image"]
    assert not [c for c in inline if c.type in ("html_inline",)] and not [t for t in tokens if t.type == "html_block"]
    strong_or_em = [c for c in inline if c.type in ("strong_open", "em_open")]
    # the only emphasis is the harness's own (the outcome of each run, in bold)
    assert len(strong_or_em) == text.count("**") // 2
    rendered = markdown_it.MarkdownIt("gfm-like").render(text)
    assert "tests/__init__.py" in rendered and "<strong>init</strong>" not in rendered


def summary_run(tmp_path, with_decision: bool):
    cand = synthetic(6, 1)
    base = all_passed(cand)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "results.json").write_text(json.dumps(cand))
    if with_decision:
        (run_dir / "comparison").mkdir()
        c = compare_runs(base, cand, comparable=True, reasons=[], change_class="identical", gate=GateParams(draws=200))
        doc = decision_document(c)
        doc["exit_status"] = {"code": 1, "reason": "r", "line": "agentdrift: exit 1 — gate regression: new T1 __x__"}
        (run_dir / "comparison" / "comparison.json").write_text(json.dumps(c))
        (run_dir / "comparison" / "decision.json").write_text(json.dumps(doc))
    return run_summary(run_dir)


def test_the_summary_decision_line_is_its_own_paragraph(tmp_path):
    text = summary_run(tmp_path, with_decision=True)
    tokens = parse(text)
    assert any(t.type == "bullet_list_open" for t in tokens), text
    depth, found = 0, False
    for t in tokens:
        depth += t.nesting if t.type.startswith("list_item") else 0
        if t.type == "inline" and t.content.startswith("Decision:"):
            found = True
            assert depth == 0, "the Decision line renders inside the last bullet"
    assert found
    # the closing line is bold text, its underscores are not emphasis
    rendered = markdown_it.MarkdownIt("gfm-like").render(text)
    assert "<strong>agentdrift: exit 1 — gate regression: new T1 __x__</strong>" in rendered


def test_a_summary_without_a_baseline_points_only_at_what_exists(tmp_path):
    text = summary_run(tmp_path, with_decision=False)
    assert "decision.json" not in text and "`report.md`" in text


def test_a_long_failure_message_keeps_its_head_and_its_tail():
    import importlib.util
    from pathlib import Path

    import pytest_agentdrift.grade

    path = Path(pytest_agentdrift.grade.__file__).parent / "gradehook" / "agentdrift_grade.py"
    spec = importlib.util.spec_from_file_location("agentdrift_grade_under_test", path)
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    message = "assert total == 5, 'the VAT is applied twice'\n" + repr(list(range(5000))) + "\n+  where 7 = total"
    kept = hook._head_and_tail(message)
    assert kept.startswith("assert total == 5, 'the VAT is applied twice'") and kept.endswith("+  where 7 = total")
    assert "characters left out" in kept and len(kept) < 2100
    assert hook._head_and_tail("short") == "short"
