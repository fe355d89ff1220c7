"""One home for each shared fact: the record's file names are spelled only in vocabulary.py.

A file name written as a literal in two modules is the start of two records
that disagree; every other module imports the name. Docstrings and comments
may mention them (they explain, they do not decide).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from pytest_agentdrift import vocabulary

PACKAGE = Path(vocabulary.__file__).parent
HOME = Path(vocabulary.__file__)
FACTS = {
    name: getattr(vocabulary, name)
    for name in (
        "RESULTS_FILE",
        "MANIFEST_FILE",
        "SOURCE_MANIFEST_FILE",
        "DECISION_FILE",
        "COMPARISON_FILE",
        "MANIFEST_DIFF_FILE",
        "FINAL_TREE_FILE",
    )
}


@functools.cache
def _literals(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return frozenset(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    )


@pytest.mark.parametrize("name", sorted(FACTS))
def test_a_record_file_name_is_spelled_in_one_module(name):
    value = FACTS[name]
    spellings = {value, value.rpartition("/")[2]}  # "comparison/decision.json" and a bare "decision.json"
    elsewhere = sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if p != HOME and "suite" not in p.relative_to(PACKAGE).parts and spellings & _literals(p)
    )
    assert elsewhere == [], f"{name} ({value}) is spelled again in {elsewhere}: import it from vocabulary"
