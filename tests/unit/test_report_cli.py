"""`agentdrift html`, `show --html / --json` and `export atif` on record directories (in process)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from pytest_agentdrift.cli import main
from pytest_agentdrift.errors import EXIT_OK, EXIT_USAGE
from pytest_agentdrift.record import atif


@pytest.fixture
def record(tmp_path) -> Path:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_html_report.py"
    spec = importlib.util.spec_from_file_location("bench_html_report", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.write_synthetic_record(tmp_path / "run", 4, 2)
    return tmp_path / "run"


def test_html_renders_into_the_record_once_and_never_over_it(record, tmp_path, capsys):
    assert main(["html", str(record)]) == EXIT_OK
    page = record / "report.html"
    assert capsys.readouterr().out.strip() == f"wrote {page}"
    before = page.read_bytes()
    assert main(["html", str(record)]) == EXIT_USAGE
    assert "never rewritten" in capsys.readouterr().err
    assert page.read_bytes() == before
    other = tmp_path / "copy.html"
    assert main(["html", str(record), "--out", str(other)]) == EXIT_OK
    assert other.read_text().startswith("<!DOCTYPE html>")


def test_html_of_something_that_is_not_a_record_is_one_clear_error(tmp_path, capsys):
    assert main(["html", str(tmp_path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "not a recorded run (no results.json)" in err and "Traceback" not in err
    (tmp_path / "results.json").write_text('{"run_id": 1}')
    assert main(["html", str(tmp_path)]) == EXIT_USAGE
    assert "does not match the schema" in capsys.readouterr().err
    assert not (tmp_path / "report.html").exists()


def test_html_with_a_base_needs_manifests(record, tmp_path, capsys):
    assert main(["html", str(record), str(record)]) == EXIT_USAGE
    assert "runtime manifest" in capsys.readouterr().err


def test_show_html_prints_the_path_and_renders_only_when_missing(record, capsys):
    assert main(["show", str(record), "--html"]) == EXIT_OK
    captured = capsys.readouterr()
    assert captured.out.strip() == str(record / "report.html")
    assert "had no report.html; rendered it" in captured.err
    mtime = (record / "report.html").stat().st_mtime_ns
    assert main(["show", str(record), "--html"]) == EXIT_OK
    assert capsys.readouterr().err == ""
    assert (record / "report.html").stat().st_mtime_ns == mtime


def test_show_json_prints_results_json(record, capsys):
    assert main(["show", str(record), "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out) == json.loads((record / "results.json").read_text())
    assert main(["show", str(record)]) == EXIT_OK  # the plain summary is unchanged
    assert "run(s) passed" in capsys.readouterr().out


def test_show_html_and_json_together_is_a_usage_error(record, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["show", str(record), "--html", "--json"])
    assert exc.value.code == EXIT_USAGE


def test_export_atif(record, tmp_path, capsys):
    out = tmp_path / "atif"
    assert main(["export", "atif", str(record), "--out", str(out)]) == EXIT_OK
    assert f"wrote 8 ATIF-v1.7 trajectory file(s) to {out}" in capsys.readouterr().out
    files = sorted(out.iterdir())
    assert len(files) == 8
    assert all(atif.validate(json.loads(f.read_text())) == [] for f in files)
    with pytest.raises(SystemExit) as exc:
        main(["export", "csv", str(record)])
    assert exc.value.code == EXIT_USAGE
