"""The record's JSON schemas are valid against their metaschema (the package does not re-check them
at run time) and each validator catches what its schema forbids."""

import json
from pathlib import Path

import jsonschema
import pytest

from pytest_agentdrift.record import store

SCHEMAS = sorted((Path(store.__file__).parent / "schema").glob("*.json"))


@pytest.mark.parametrize("path", SCHEMAS, ids=lambda p: p.name)
def test_a_schema_is_valid_against_its_metaschema(path):
    schema = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.validators.validator_for(schema).check_schema(schema)


@pytest.mark.parametrize("path", SCHEMAS, ids=lambda p: p.name)
def test_the_cached_validator_is_built_from_the_schema_and_rejects_a_wrong_document(path):
    validator = store.schema_validator(path.name)
    assert validator is store.schema_validator(path.name)  # one per process
    assert validator.schema == json.loads(path.read_text(encoding="utf-8"))
    assert list(validator.iter_errors([])), "a list is no record of either kind"


def test_the_results_validator_reports_a_missing_field():
    problems = store.schema_problems({"complete": True})
    assert problems and all(isinstance(p, str) for p in problems)
