"""The release-note CSV reader and the ledger it produces."""

from __future__ import annotations

import csv
import io

import pytest

from pytest_agentdrift.compare.ledger import (
    LEDGER_COLUMNS,
    TAGS,
    ledger_csv,
    mark_changes,
    parse_release_notes,
    read_release_notes,
)
from pytest_agentdrift.errors import AgentDriftError

GOOD = (
    "version,tag,tasks,text,url\n"
    "1.5.0,execution,T09,Retries failed tool calls once,https://example.test/notes/1.5.0\n"
    '1.5.1,permissions,"T07; T08","Protected paths now include ""tests/**""",\n'
    "1.5.1,output,,JSON events reordered,\n"
)


def write(tmp_path, text, name="notes.csv", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return path


def test_reads_a_valid_file(tmp_path):
    notes = read_release_notes(write(tmp_path, GOOD))
    assert [(n.line, n.version, n.tag, n.tasks) for n in notes] == [
        (2, "1.5.0", "execution", ("T09",)),
        (3, "1.5.1", "permissions", ("T07", "T08")),
        (4, "1.5.1", "output", ()),
    ]
    assert notes[1].text == 'Protected paths now include "tests/**"'
    assert notes[0].url == "https://example.test/notes/1.5.0"


def test_column_order_is_free_and_optional_columns_may_be_absent(tmp_path):
    notes = read_release_notes(write(tmp_path, "text,tag,version\nNew default model,MODEL,2.0\n"))
    assert notes[0].tag == "model" and notes[0].tasks == () and notes[0].url == ""


def test_bom_and_blank_lines_are_accepted(tmp_path):
    notes = read_release_notes(write(tmp_path, "\ufeff" + GOOD + "\n\n"))
    assert len(notes) == 3


def test_every_tag_is_accepted():
    text = "version,tag,text\n" + "".join(f"1,{t},x\n" for t in TAGS)
    assert [n.tag for n in parse_release_notes(text)] == list(TAGS)


@pytest.mark.parametrize(
    "text,problem",
    [
        ("version,tag,text\n1.0,modle,typo\n", "line 2: unknown tag 'modle'"),
        ("version,tag,text,colour\n", "line 1: unknown column 'colour'"),
        ("version,text\n1.0,x\n", "line 1: missing required column 'tag'"),
        ("version,tag,tag,text\n", "line 1: column 'tag' appears twice"),
        ("version,tag,text\n1.0,model,ok\n1.1,model,\n", "line 3: empty 'text'"),
        ("version,tag,text\n,model,x\n", "line 2: empty 'version'"),
        ("version,tag,text,url\n1.0,model,x,ftp://h/n\n", "line 2: url 'ftp://h/n' is not an http(s) address"),
        ("version,tag,text\n1.0,model,x,extra\n", "line 2: 4 fields, the header has 3"),
        ('version,tag,text\n1.0,model,"unterminated\n', "malformed CSV"),
        ("", "empty file"),
    ],
)
def test_bad_input_names_file_line_and_problem(tmp_path, text, problem):
    path = write(tmp_path, text)
    with pytest.raises(AgentDriftError) as info:
        read_release_notes(path)
    assert info.value.path == str(path)
    assert problem in info.value.problem
    assert str(path) in str(info.value)


def test_non_utf8_and_missing_files_are_clean_errors(tmp_path):
    path = write(tmp_path, b"version,tag,text\n1.0,model,caf\xe9\n")
    with pytest.raises(AgentDriftError, match="not valid UTF-8"):
        read_release_notes(path)
    with pytest.raises(AgentDriftError, match="file is missing"):
        read_release_notes(tmp_path / "absent.csv")


def test_mark_changes_gives_each_status():
    notes = parse_release_notes(GOOD)
    changes = [
        {"task": "T09", "change": "won (baseline 0/3, candidate 3/3)"},
        {"task": "T02", "change": "lost (baseline 3/3, candidate 0/3)"},
    ]
    rows = mark_changes(notes, changes)
    by = [(r["status"], r["task"], r["note_line"]) for r in rows]
    assert by == [
        ("observed_unconfirmed", "T02", None),
        ("documented_change", "T09", 2),
        ("not_observed", "T07 T08", 3),
        ("not_observed", "", 4),
    ]


def test_without_notes_every_change_is_unconfirmed():
    rows = mark_changes(None, [{"task": "T01", "change": "lost"}])
    assert [r["status"] for r in rows] == ["observed_unconfirmed"]
    assert mark_changes([], []) == []


def test_ledger_csv_round_trips():
    notes = parse_release_notes(GOOD)
    rows = mark_changes(notes, [{"task": "T08", "change": 'critical check broke: "paths", scope'}])
    text = ledger_csv(rows)
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert tuple(parsed[0]) == LEDGER_COLUMNS
    assert parsed[0]["status"] == "documented_change"
    assert parsed[0]["observed_change"] == 'critical check broke: "paths", scope'
    assert parsed[0]["text"] == 'Protected paths now include "tests/**"'
    assert parsed[-1]["note_line"] == "4"
    assert text.endswith("\n") and "\r" not in text
