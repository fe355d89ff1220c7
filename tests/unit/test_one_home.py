"""One home for each shared fact: the record's vocabulary is defined once, every other module imports it.

A fact written out in two modules is the start of two records that disagree
(an outcome drawn as "other" because a renderer kept its own list). The
package is parsed, never imported, so a second definition is found wherever it
hides; docstrings and comments may mention the values (they explain, they do
not decide). The facts and their homes:

* the file names of the record, of the agent's protocol and of a task directory
  (every `*_FILE` name of the vocabulary), the timestamp format, the schema version, the run outcomes (and
  which are error-like and unscored; no outcome spelled as a literal anywhere
  else) and the exit codes: vocabulary.py;
* a run's key and raw directory: tasks.shard.item_key, record.store.raw_path.

Each check is shown to find a planted second definition, and to pass a use of
the home. An option's default is declared in options.py's table; where a stage
takes the same value as a parameter's default (the stages cannot import
options.py, which imports them), both read it from vocabulary.py, and no
parameter named after an option writes the option's default as a literal.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest
from package_source import GROUP, PACKAGE, modules, nodes

from pytest_agentdrift import vocabulary

pytestmark = pytest.mark.xdist_group(GROUP)

HOME = Path(vocabulary.__file__)
#: every file name of a record, of the agent's protocol and of a task directory: each `*_FILE` the vocabulary names
FILE_NAMES = {name: getattr(vocabulary, name) for name in dir(vocabulary) if name.endswith("_FILE")}
#: modules that use one of those names for a file of their own, outside any record
OTHER_FILES_OF_THE_SAME_NAME = {
    # the function checks' scratch description of the run, in the grader's own temporary directory
    ("RUN_FILE", "grade/grader.py"),
    # the reference agent speaks the protocol from the agent's side, with the standard library
    # only (it runs under `python -I -S`, see STANDALONE): it cannot import the vocabulary
    ("EVENTS_FILE", "agents/reference.py"),
    ("AGENT_REPORT_FILE", "agents/reference.py"),
}
#: the outcomes, each by the name the vocabulary gives it
NAMED_OUTCOMES = {name: getattr(vocabulary, name) for name in dir(vocabulary) if name.endswith("_OUTCOME")}


def _modules() -> Iterator[Path]:
    """Every module of the package but the home (the bundled suite is task data, not the harness)."""
    return (path for path in modules() if path != HOME)


@functools.cache
def _literals(path: Path) -> frozenset[str]:
    docstrings = {id(n.value) for n in nodes(path) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    return frozenset(
        node.value
        for node in nodes(path)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    )


def _where(path: Path, node: ast.AST) -> str:
    shown = path.relative_to(PACKAGE).as_posix() if path.is_relative_to(PACKAGE) else path.name
    return f"{shown}:{node.lineno}"


def _string(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _name(node: ast.AST) -> str | None:
    """`NAME` or `module.NAME`: how a module refers to a vocabulary constant."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _mentions_key(node: ast.AST, key: str) -> bool:
    """`key` (a variable), `x[key]` or `x.get(key)`: an expression that reads the field `key`."""
    if isinstance(node, ast.Name):
        return node.id == key
    if isinstance(node, ast.Subscript):
        return _string(node.slice) == key
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        return _string(node.args[0]) == key
    return False


def _compared_with(path: Path, key: str) -> Iterator[tuple[ast.Compare, ast.AST]]:
    """(comparison, the side it compares against) for each comparison in `path` that reads the field `key`."""
    for node in nodes(path):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_mentions_key(side, key) for side in sides):
                yield from ((node, side) for side in sides if not _mentions_key(side, key))


# ---------------------------------------------------------------- record file names


@pytest.mark.parametrize("name", sorted(FILE_NAMES))
def test_a_record_file_name_is_spelled_in_one_module(name):
    value = FILE_NAMES[name]
    spellings = {value, value.rpartition("/")[2]}  # "comparison/decision.json" and a bare "decision.json"
    elsewhere = [
        rel
        for p in _modules()
        if spellings & _literals(p)
        and (name, rel := p.relative_to(PACKAGE).as_posix()) not in OTHER_FILES_OF_THE_SAME_NAME
    ]
    assert elsewhere == [], f"{name} ({value}) is spelled again in {elsewhere}: import it from vocabulary"


@pytest.mark.parametrize(("name", "module"), sorted(OTHER_FILES_OF_THE_SAME_NAME))
def test_each_exception_is_still_needed(name, module):
    value = FILE_NAMES[name]
    assert {value, value.rpartition("/")[2]} & _literals(PACKAGE / module), f"drop ({name}, {module}): it is gone"


# ---------------------------------------------------------------- item keys and raw paths


def item_path_definitions(path: Path) -> list[str]:
    """Where `path` spells a run's key (`<task>/r<rep>`) or its raw directory (`raw/...`) itself."""
    found = []
    for node in nodes(path):
        if isinstance(node, ast.JoinedStr):
            parts = [_string(v) for v in node.values]
            if any(p is not None and p.endswith("/r") for p in parts[:-1]):
                found.append(f"{_where(path, node)}: a run's key spelled ({ast.unparse(node)})")
            elif parts and parts[0] is not None and parts[0].startswith(vocabulary.RAW_DIR + "/"):
                found.append(f"{_where(path, node)}: a raw path spelled ({ast.unparse(node)})")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _string(node.right) == vocabulary.RAW_DIR:
            found.append(f"{_where(path, node)}: the raw directory spelled ({ast.unparse(node)})")
    return found


# ---------------------------------------------------------------- record format


def test_the_timestamp_format_is_spelled_in_one_module():
    elsewhere = [str(p.relative_to(PACKAGE)) for p in _modules() if vocabulary.TIMESTAMP_FORMAT in _literals(p)]
    assert elsewhere == [], f"the timestamp format is spelled again in {elsewhere}: use vocabulary.utc_timestamp"


def _int(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def schema_version_definitions(path: Path) -> list[str]:
    """Where `path` writes or expects a schema version of its own: a number as the value of
    `schema_version`, compared with one, or a name for one."""
    found = []
    for node in nodes(path):
        if isinstance(node, ast.Dict):
            found += [
                f"{_where(path, v)}: schema_version {v.value} written"
                for k, v in zip(node.keys, node.values, strict=True)
                if k is not None and _string(k) == "schema_version" and _int(v)
            ]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and _int(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [
                f"{_where(path, node)}: a name for a schema version" for t in targets if "SCHEMA" in (_name(t) or "")
            ]
    found += [
        f"{_where(path, c)}: schema_version compared with {s.value}"
        for c, s in _compared_with(path, "schema_version")
        if _int(s)
    ]
    return found


# ---------------------------------------------------------------- run outcomes


#: outcomes that are also pytest's own test outcomes and the products' event states: a module that
#: reads a pytest report or an agent's stream says them about something else
SHARED_WORDS = frozenset({"passed", "failed", "error"})
#: the outcomes no other vocabulary uses: a literal of one of them is a run outcome
OWN_OUTCOMES = frozenset(vocabulary.RUN_OUTCOMES) - SHARED_WORDS


def _outcome_element(node: ast.AST) -> bool:
    return _string(node) in vocabulary.RUN_OUTCOMES or _name(node) in NAMED_OUTCOMES


def _own_outcome(node: ast.AST) -> bool:
    return _string(node) in OWN_OUTCOMES or _name(node) in NAMED_OUTCOMES


def outcome_definitions(path: Path) -> list[str]:
    """Where `path` defines an outcome fact again: a name bound to an outcome, a group of outcomes
    (error-like, unscored, ...) typed out, or a named outcome compared as a literal."""
    found = []
    for node in nodes(path):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and _string(node.value) in OWN_OUTCOMES:
            found.append(f"{_where(path, node)}: a name for the outcome {_string(node.value)!r}")
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 2:
            if all(_outcome_element(e) for e in node.elts) and any(_own_outcome(e) for e in node.elts):
                found.append(f"{_where(path, node)}: a group of outcomes typed out ({ast.unparse(node)})")
    for compare, side in _compared_with(path, "outcome"):
        if _string(side) in OWN_OUTCOMES:
            found.append(f"{_where(path, compare)}: the outcome {_string(side)!r} spelled out (vocabulary names it)")
    return found


def test_the_outcome_groups_are_drawn_from_the_outcomes():
    v = vocabulary
    assert set(NAMED_OUTCOMES.values()) <= set(v.RUN_OUTCOMES)
    assert v.ERROR_LIKE_OUTCOMES <= set(v.RUN_OUTCOMES) and v.UNSCORED_OUTCOMES <= set(v.RUN_OUTCOMES)
    assert not v.ERROR_LIKE_OUTCOMES & v.UNSCORED_OUTCOMES  # an error-like run is the agent's, and scored
    assert len(set(v.RUN_OUTCOMES)) == len(v.RUN_OUTCOMES)
    assert set(NAMED_OUTCOMES.values()) == set(v.RUN_OUTCOMES)  # each outcome has its name


# ---------------------------------------------------------------- outcome literals

#: functions whose argument at this index is a key or an attribute's name (`r.get("infra_error")`)
_KEY_READERS = {"get": 0, "pop": 0, "setdefault": 0, "getattr": 1, "hasattr": 1, "setattr": 1}


def _is_outcome_table(node: ast.Dict) -> bool:
    """A dict display keyed mostly by outcomes (outcome -> how it is drawn) says the outcomes; a
    record's dict that holds an `infra_error` or `undecided` key among its others does not."""
    said = sum(_string(k) in vocabulary.RUN_OUTCOMES for k in node.keys if k is not None)
    return said >= 2 and 2 * said > len(node.keys)


def _keys(path: Path) -> set[int]:
    """The string constants `path` uses as a key or an attribute's name, never as an outcome:
    `r["undecided"]`, `r.get("infra_error")`, `getattr(run, "resource_exceeded")`, `{"infra_error":
    ...}` (a record's key of that name: the run's loss, its reasons), and the names `__all__` exports."""
    found: set[int] = set()
    for node in nodes(path):
        if isinstance(node, ast.Subscript):
            found.add(id(node.slice))
        elif isinstance(node, ast.Call) and (at := _KEY_READERS.get(_name(node.func) or "")) is not None:
            found.update(id(a) for a in node.args[at : at + 1])
        elif isinstance(node, ast.Dict) and not _is_outcome_table(node):
            found.update(id(k) for k in node.keys if k is not None)
        elif isinstance(node, ast.Assign) and any(_name(t) == "__all__" for t in node.targets):
            found.update(id(n) for n in ast.walk(node.value))
    return found


def _results(node: ast.AST) -> Iterator[ast.AST]:
    """What an expression can evaluate to, as far as its literals go (`"passed" if ok else "failed"`)."""
    if isinstance(node, ast.IfExp):
        yield from _results(node.body)
        yield from _results(node.orelse)
    elif isinstance(node, ast.BoolOp):
        for value in node.values:
            yield from _results(value)
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for element in node.elts:
            yield from _results(element)
    else:
        yield node


def _said_as_outcome(path: Path) -> Iterator[ast.AST]:
    """Expressions `path` says as a run's outcome: compared with its `outcome` (`r["outcome"] ==
    ...`, `outcome in (...)`), written as it (`{"outcome": ...}`, `outcome=...`) or returned by a
    function named for it."""
    for _, side in _compared_with(path, "outcome"):
        yield from _results(side)
    for node in nodes(path):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if k is not None and _string(k) == "outcome":
                    yield from _results(v)
        elif isinstance(node, ast.keyword) and node.arg == "outcome":
            yield from _results(node.value)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "outcome" in node.name:
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and ret.value is not None:
                    yield from _results(ret.value)


def outcome_literals(path: Path) -> list[tuple[str, str]]:
    """(where, outcome) for each outcome `path` spells as a literal instead of naming it: an outcome
    no other vocabulary uses (timeout, infra_error, ...) said anywhere but as a key, the keys of an
    outcome table, and passed, failed or error where a run's outcome is compared, written or returned."""
    docstrings = {id(n.value) for n in nodes(path) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    keys = _keys(path)
    tables = {id(k) for n in nodes(path) if isinstance(n, ast.Dict) and _is_outcome_table(n) for k in n.keys}
    spelled = {
        id(n): n
        for n in nodes(path)
        if _string(n) in vocabulary.RUN_OUTCOMES
        and id(n) not in docstrings
        and (id(n) in tables or (_string(n) in OWN_OUTCOMES and id(n) not in keys))
    }
    spelled.update({id(n): n for n in _said_as_outcome(path) if _string(n) in vocabulary.RUN_OUTCOMES})
    return sorted((_where(path, n), str(_string(n))) for n in spelled.values())


#: (module, outcome word) spelled on purpose, each with what it means there
OUTCOME_WORD_ELSEWHERE = {
    ("options.py", "timeout"): "the --agent-timeout option's Settings field, not a run's outcome",
    ("compare/checkrates.py", "undecided"): "a confirmation's verdict on a check's failure rate, not a run's outcome",
    ("record/regrade.py", "undecided"): "a run's `undecided` key (its reasons), dropped and copied by name",
    ("grade/grader.py", "passed"): "pytest's own outcome of a function check's test, not a run's outcome",
    ("session/refused.py", "failed"): "the outcome of the pytest report a refused item gets, not a run's outcome",
    ("compare/nullsim.py", "passed"): "pending: file being changed",
    ("compare/nullsim.py", "failed"): "pending: file being changed",
}


def test_no_outcome_is_spelled_outside_its_home():
    found = [
        f"{where}: {word!r}"
        for path in _modules()
        for where, word in outcome_literals(path)
        if (path.relative_to(PACKAGE).as_posix(), word) not in OUTCOME_WORD_ELSEWHERE
    ]
    assert found == [], "outcomes spelled as literals (import their names from vocabulary):\n" + "\n".join(found)


@pytest.mark.parametrize(("module", "word"), sorted(OUTCOME_WORD_ELSEWHERE))
def test_each_outcome_word_elsewhere_is_still_needed(module, word):
    assert word in {w for _, w in outcome_literals(PACKAGE / module)}, f"drop ({module}, {word}): it is gone"


#: outcomes spelled in a module of its own: each must be found
PLANTED_OUTCOMES = [
    'if run.timed_out:\n    status = "timeout"\n',
    'lost = [r for r in runs if r.get("outcome") == "infra_error"]\n',
    'def _outcome(run):\n    return "passed" if run.ok else "failed"\n',
    'result = {"rep": 1, "outcome": "error"}\n',
    'passed = [r for r in runs if r["outcome"] in ("passed",)]\n',
    'MARKS = {"passed": "ok", "failed": "x", "timeout": "t"}\n',
    "finish(run, outcome='over_budget')\n",
]

#: strings that equal an outcome and say something else: each must pass
NOT_OUTCOMES = [
    'infra = result.get("infra_error") or {}\n',
    'reasons = run["undecided"]\n',
    'hit = getattr(run, "resource_exceeded", None)\n',
    'doc = {"rep": 1, "outcome": OUTCOME, "passed": True, "checks": [], "infra_error": None, "undecided": []}\n',
    'ok = report.when == "call" and report.outcome == "passed"\n',
    'counts = {"failed": 1, "xfailed": 2}\n',
    '__all__ = ["infra_error"]\n',
    '"""A run that ended in a timeout."""\n',
    "if outcome == vocabulary.TIMEOUT_OUTCOME: pass\n",
]


@pytest.mark.parametrize("second", PLANTED_OUTCOMES)
def test_a_planted_outcome_literal_is_found(tmp_path, second):
    assert outcome_literals(_write(tmp_path, second)) != []


@pytest.mark.parametrize("use", NOT_OUTCOMES)
def test_a_string_that_only_equals_an_outcome_is_not_one(tmp_path, use):
    assert outcome_literals(_write(tmp_path, use)) == []


# ---------------------------------------------------------------- exit codes

#: programs that run on their own, with the standard library only (`python -I -S`), so they cannot
#: import the vocabulary: the sandbox's first process, and the reference agent (an agent, not the harness)
STANDALONE = {"run/sandboxinit.py", "agents/reference.py"}
EXIT_NAMES = ("exit_code", "returncode", "exitstatus", "exit_status", "status")


def _status_read(node: ast.AST) -> bool:
    name = _name(node) or (_string(node.slice) if isinstance(node, ast.Subscript) else None) or ""
    return any(n in name.lower() for n in EXIT_NAMES)


def _codes(node: ast.AST) -> bool:
    """A number other than 0, or a group holding one."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_codes(e) for e in node.elts)
    return _int(node) and node.value != 0


def exit_code_definitions(path: Path) -> list[str]:
    """Where `path` writes an exit code as a number: exiting with one, comparing a status with one,
    or naming a group of them."""
    found = []
    for node in nodes(path):
        if isinstance(node, ast.Call) and _name(node.func) in ("exit", "_exit", "SystemExit") and node.args:
            if _codes(node.args[0]):
                found.append(f"{_where(path, node)}: exits with {ast.unparse(node.args[0])}")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_status_read(s) for s in sides) and any(_codes(s) for s in sides):
                found.append(f"{_where(path, node)}: a status compared with a number ({ast.unparse(node)})")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, (ast.Tuple, ast.Set)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if _codes(node.value) and any(_status_read(t) or "EXIT" in (_name(t) or "") for t in targets):
                found.append(f"{_where(path, node)}: exit codes named ({ast.unparse(node)})")
    return found


# ---------------------------------------------------------------- is this value concrete

#: the vocabulary's placeholders, by name or spelled
_PLACEHOLDERS = {"UNOBSERVED", "NOT_APPLICABLE", vocabulary.UNOBSERVED, vocabulary.NOT_APPLICABLE}


def no_value_sets(path: Path) -> list[str]:
    """Where `path` writes its own set of values that mean "no value": a placeholder grouped with
    further spellings of nothing ("", "unknown"), which is vocabulary.is_concrete's one decision.
    Naming one placeholder (`== UNOBSERVED`, `in (UNOBSERVED, NOT_APPLICABLE)`) asks a narrower
    question on purpose and is not one."""
    found = []
    for node in nodes(path):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            said = {_name(e) or _string(e) for e in node.elts}
            if said & _PLACEHOLDERS and said & {"", "unknown"}:
                found.append(f"{_where(path, node)}: a set of no-values of its own ({ast.unparse(node)})")
    return found


# ---------------------------------------------------------------- each check over the package, and its proof


#: each fact's finder, the modules that are its home (or cannot import it), and the home to use
FINDERS = {
    "item keys and raw paths": (
        item_path_definitions,
        {"tasks/shard.py", "record/store.py"},
        "tasks.shard.item_key, record.store.raw_path, vocabulary.RAW_DIR",
    ),
    "schema versions": (schema_version_definitions, set(), "vocabulary.SCHEMA_VERSION"),
    "run outcomes": (outcome_definitions, set(), "vocabulary's outcome names and groups"),
    "exit codes": (exit_code_definitions, STANDALONE, "vocabulary's EXIT_ names"),
    "no-value sets": (no_value_sets, set(), "vocabulary.is_concrete"),
}


@pytest.mark.parametrize("fact", sorted(FINDERS))
def test_a_fact_is_defined_only_in_its_home(fact):
    find, homes, home = FINDERS[fact]
    found = [line for path in _modules() if path.relative_to(PACKAGE).as_posix() not in homes for line in find(path)]
    assert found == [], f"{fact} defined outside their home (use {home}):\n" + "\n".join(found)


#: a second definition of each kind, planted in a module of its own: each must be found
PLANTED = [
    ("item keys and raw paths", 'key = f"{spec.id}/r{rep}"\n'),
    ("item keys and raw paths", 'raw = f"raw/{task}/r{rep}"\n'),
    ("item keys and raw paths", 'd = record / "raw" / task\n'),
    ("item keys and raw paths", 'sid = f"{run_id}/{task_id}/r{rep}"\n'),
    ("schema versions", 'doc = {"schema_version": 1, "status": "refused"}\n'),
    ("schema versions", "MANIFEST_SCHEMA_VERSION = 1\n"),
    ("schema versions", 'ok = doc.get("schema_version") != 1\n'),
    ("schema versions", 'ok = 2 == manifest["schema_version"]\n'),
    ("run outcomes", '_INFRA = "infra_error"\n'),
    ("run outcomes", 'KEPT: frozenset[str] = frozenset({"infra_error", "undecided"})\n'),
    ("run outcomes", "SKIP = (INFRA_OUTCOME, UNDECIDED_OUTCOME)\n"),
    ("run outcomes", 'ERRORS = ("error", "timeout", vocabulary.OVER_BUDGET_OUTCOME)\n'),
    ("run outcomes", 'ERRORS = frozenset({"error", "timeout", "resource_exceeded"})\n'),
    ("run outcomes", 'STOPPED = "resource_exceeded"\n'),
    ("run outcomes", 'lost = [r for r in runs if r["outcome"] == "infra_error"]\n'),
    ("run outcomes", 'kept = [r for r in runs if r.get("outcome") != "undecided"]\n'),
    ("exit codes", "NOT_STARTED_STATUSES = (126, 127)\n"),
    ("exit codes", "NOT_STARTED_STATUSES = (126, EXIT_AGENT_NOT_STARTED)\n"),
    ("exit codes", "os._exit(127)\n"),
    ("exit codes", "if proc.returncode == 4: pass\n"),
    ("exit codes", 'refused = result["exit_status"] in (6, 4)\n'),
    ("no-value sets", 'def _concrete(v):\n    return v not in (None, "", "unobserved", "not_applicable", "unknown")\n'),
    ("no-value sets", '_UNKNOWN = (None, "", UNOBSERVED, "unknown")\n'),
    ("no-value sets", 'if value in {None, vocabulary.UNOBSERVED, vocabulary.NOT_APPLICABLE, ""}: pass\n'),
]

#: uses that look like a definition and are not: each must pass
USES = [
    # the home's name, written and compared
    ("schema versions", 'doc = {"schema_version": SCHEMA_VERSION}\n'),
    ("schema versions", 'ok = doc.get("schema_version") == vocabulary.SCHEMA_VERSION\n'),
    # a key that shares an outcome's name, pytest's own outcomes, a scorer returning an outcome
    ("run outcomes", 'infra = result.get("infra_error")\n'),
    ("run outcomes", 'new = {k: v for k, v in r.items() if k != "undecided"}\n'),
    ("run outcomes", 'if any(o in ("failed", "error") for o in pytest_outcomes): pass\n'),
    ("run outcomes", 'def outcome(run):\n    return "timeout"\n'),
    ("exit codes", "if proc.returncode == EXIT_OK: pass\n"),
    ("no-value sets", "if not is_concrete(value): pass\n"),
    ("no-value sets", "v = version if version not in (UNOBSERVED, NOT_APPLICABLE) else UNOBSERVED\n"),
    ("no-value sets", 'empty = value in (None, "")\n'),
]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "second.py"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("fact", "second"), PLANTED)
def test_a_planted_second_definition_is_found(tmp_path, fact, second):
    assert FINDERS[fact][0](_write(tmp_path, second)) != []


@pytest.mark.parametrize(("fact", "use"), USES)
def test_a_use_of_the_home_is_not_a_definition(tmp_path, fact, use):
    assert FINDERS[fact][0](_write(tmp_path, use)) == []


#: stage parameters that take an option's value under another name
OPTION_PARAMETERS = {"backoff_s": "retry_backoff"}


def _literal_option_defaults(path: Path, defaults: dict[str, object]) -> list[str]:
    """`name=<literal>` parameters of path's functions, named after an option, whose literal is its default."""
    found = []
    for node in nodes(path):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.ClassDef):  # dataclass fields: `name: type = <literal>`
            pairs = [
                (n.target.id, n.value)
                for n in node.body
                if isinstance(n, ast.AnnAssign) and n.value is not None and isinstance(n.target, ast.Name)
            ]
        else:
            args = [*node.args.posonlyargs, *node.args.args]
            pairs = list(
                zip([a.arg for a in args[len(args) - len(node.args.defaults) :]], node.args.defaults, strict=True)
            )
            pairs += [
                (a.arg, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True) if d is not None
            ]
        for name, value in pairs:
            option = OPTION_PARAMETERS.get(name, name)
            if option in defaults and isinstance(value, ast.Constant) and value.value == defaults[option]:
                found.append(f"{path.relative_to(PACKAGE)}:{value.lineno} {name}={value.value!r}")
    return found


def _option_defaults() -> dict[str, object]:
    from pytest_agentdrift.options import TABLE

    return {o.dest: o.default for o in TABLE if o.default is not None and not isinstance(o.default, bool)}


def test_no_stage_writes_an_option_default_again():
    defaults = _option_defaults()
    found = [hit for path in modules() if path.name != "options.py" for hit in _literal_option_defaults(path, defaults)]
    assert found == [], f"option defaults written again (read them from vocabulary.py): {found}"


def test_a_planted_option_default_is_found(tmp_path):
    planted = PACKAGE / "compare" / "__planted_default_for_the_test__.py"
    source = "def bootstrap(seed: int = 0):\n    pass\n\n\ndef wait(*, backoff_s: float = 30.0):\n    pass\n"
    planted.write_text(source)
    try:
        hits = _literal_option_defaults(planted, _option_defaults())
    finally:
        planted.unlink()
    assert [h.split(" ", 1)[1] for h in hits] == ["seed=0", "backoff_s=30.0"]


def _cli_actions() -> Iterator[tuple[str, object]]:
    """(subcommand, argparse action) of every option of the agentdrift CLI."""
    import argparse

    from pytest_agentdrift.cli import build_parser

    def walk(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, object]]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, f"{path} {name}".strip())
            elif action.option_strings:
                yield path, action

    yield from walk(build_parser(), "")


def test_every_cli_twin_of_a_plugin_option_is_built_from_its_declaration():
    from pytest_agentdrift.options import TABLE

    by_flag = {o.cli: o for o in TABLE if o.cli}
    hand_made = [
        f"agentdrift {name} {flag}"
        for name, action in _cli_actions()
        for flag in action.option_strings
        if flag in by_flag and (action.dest != by_flag[flag].dest or action.help != by_flag[flag].help)
    ]
    assert hand_made == [], f"declared again by hand (use options.add_cli_flags): {hand_made}"
    assert any(flag in by_flag for _, action in _cli_actions() for flag in action.option_strings)
