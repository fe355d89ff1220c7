"""One vocabulary: every shared name lives in vocabulary.py, with one meaning, and no literal exit code elsewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import pytest_agentdrift
from pytest_agentdrift import errors, options, shapes, vocabulary
from pytest_agentdrift.agents import discovery_base
from pytest_agentdrift.compare import comparison, status
from pytest_agentdrift.manifest import capture, identity

PACKAGE = Path(pytest_agentdrift.__file__).parent


def test_exit_codes_are_reexported_by_errors():
    for name in ("EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_REFUSED"):
        assert getattr(errors, name) == getattr(vocabulary, name)
    assert (
        len(
            {
                vocabulary.EXIT_OK,
                vocabulary.EXIT_FAILED,
                vocabulary.EXIT_COLLECTION_ERROR,
                vocabulary.EXIT_USAGE,
                vocabulary.EXIT_REFUSED,
            }
        )
        == 5
    )


def test_each_shared_name_is_the_vocabulary_object():
    assert identity.IDENTITY_FIELDS is vocabulary.IDENTITY_FIELDS
    assert capture.POST_RUN_FIELDS is identity.POST_RUN_FIELDS is vocabulary.POST_RUN_FIELDS
    assert capture.UNOBSERVED is identity.UNOBSERVED is discovery_base.UNOBSERVED is vocabulary.UNOBSERVED
    assert identity.CHANGE_CLASSES is vocabulary.CHANGE_CLASSES
    assert comparison.ROLLBACK_STATES is vocabulary.ROLLBACK_STATES
    assert options.ISOLATION_MODES is vocabulary.ISOLATION_MODES
    # the names that used to mean something else in the comparison now say what they are
    assert not hasattr(comparison, "IDENTITY_FIELDS")
    # the comparison's identity of a run is shapes.RunIdentity, whose keys are the vocabulary's
    assert tuple(shapes.RunIdentity.__annotations__) == vocabulary.RUN_IDENTITY_KEYS
    assert vocabulary.RUN_IDENTITY_KEYS == ("runtime_id", "task_set_id", "evaluator_id")
    assert set(vocabulary.CHANGE_CLASSES) < set(status.ACCEPTED_CHANGE_CLASSES)


def test_field_sets_are_consistent():
    v = vocabulary
    assert set(v.POST_RUN_FIELDS) <= set(v.IDENTITY_FIELDS)
    assert set(v.ENVELOPE_FIELDS) <= set(v.DECLARABLE_FIELDS) <= set(v.IDENTITY_FIELDS)
    assert set(v.DEFAULT_ACCEPT_UNOBSERVED) <= set(v.IDENTITY_FIELDS) | set(v.ACCEPT_GROUPS)
    assert not set(v.IDENTITY_FIELDS) & set(v.PROVENANCE_FIELDS)
    groups = (
        v.SURFACE_FIELDS
        | v.REBASELINE_FIELDS
        | v.MODEL_FIELDS
        | v.CLIENT_FIELDS
        | v.CONFIGURATION_FIELDS
        | v.INSTRUCTION_FIELDS
        | v.ENVIRONMENT_FIELDS
    )
    assert groups == set(v.IDENTITY_FIELDS)


def test_isolation_modes_say_whether_they_enforce_the_network():
    assert vocabulary.enforces_network("bwrap") and vocabulary.enforces_network("unshare")
    assert not vocabulary.enforces_network("none") and not vocabulary.enforces_network("auto")


_LITERAL_EXIT = re.compile(
    r"returncode=\d|exitstatus\s*=\s*\d|sys\.exit\(\d|SystemExit\(\d|return [1-9]\d*\s*$|ret(urn)?_?code\s*=\s*[1-9]"
)


def test_no_literal_exit_code_outside_the_vocabulary():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        # the bundled suite is frozen task fixtures; the reference agent is an agent program, not the harness
        if rel.startswith("suite/") or rel in ("vocabulary.py", "agents/reference.py"):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            code = line.split("#", 1)[0]
            if _LITERAL_EXIT.search(code):
                offenders.append(f"{rel}:{n}: {line.strip()}")
    assert offenders == []


# ---------------------------------------------------------------- is this value concrete


@pytest.mark.parametrize("value", [None, "", vocabulary.UNOBSERVED, vocabulary.NOT_APPLICABLE, "unknown"])
def test_a_placeholder_is_no_value(value):
    assert not vocabulary.is_concrete(value)


@pytest.mark.parametrize("value", ["claude-sonnet-4", "0", 0, False, [], {}, {"program": "x"}, "Unknown model"])
def test_anything_else_is_a_value_whatever_its_type(value):
    assert vocabulary.is_concrete(value)


# The four homes this replaced disagreed; these pin the one behaviour chosen for each difference.


def test_a_run_identity_key_not_applicable_is_missing():
    """The comparison's own set lacked not_applicable: a record whose runtime_id says it has none
    was compared as if identified. It is missing, as an unobserved one is (fail closed)."""
    ident = comparison._identity(
        {"runtime_id": vocabulary.NOT_APPLICABLE, "task_set_id": "t", "evaluator_id": "e"},
        {"runtime_id": "r", "task_set_id": "t", "evaluator_id": "e"},
    )
    assert ident["missing"] == ["baseline runtime_id"]


def test_a_declaration_of_unknown_is_refused():
    """The declarations' own set lacked "unknown": declaring a field "unknown" vouched for nothing,
    yet two such declarations compared equal. A declaration must be a value."""
    from pytest_agentdrift.errors import AgentDriftError
    from pytest_agentdrift.manifest.declare import _check

    assert _check({"cli_version": "2.1.0"}, "declare.toml") == {"cli_version": "2.1.0"}
    for nothing in ("unknown", "", vocabulary.UNOBSERVED, vocabulary.NOT_APPLICABLE, None):
        with pytest.raises(AgentDriftError, match="concrete value"):
            _check({"cli_version": nothing}, "declare.toml")


def test_atif_names_a_model_only_by_text():
    """ATIF's model_name is a string: a concrete value that is not text (an object) is no name there,
    while the HTML report shows any concrete value. The difference is on purpose."""
    from pytest_agentdrift.record.atif.fromrecord import agent_schema

    def model(stamp, model_id):
        return agent_schema({}, {"model_stamp": stamp}, {"identity": {"model_id": model_id}})["model_name"]

    assert model("claude-x", "asked") == "claude-x"
    assert model("unknown", "asked") == "asked"
    assert model(None, vocabulary.UNOBSERVED) is None
    assert model({"program": "x"}, {"name": "y"}) is None
