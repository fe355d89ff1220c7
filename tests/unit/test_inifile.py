"""inifile.read_ini, held to pytest's own answer.

Every case writes a tree of configuration files, asks pytest for its rootdir,
configuration file and `getini` of each declared name (`_prepareconfig`, the
parse `pytest.main` starts with: the oracle, used only here), and asks
read_ini (no pytest) the same from the same directory with the same `-c` and
`--rootdir`. Declared are the plugin's own options (the one table in
options.py, registered by the plugin as pytest loads it) and one name of each
ini type the plugin does not use today, with and without a default.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from _pytest.config import _prepareconfig

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.inifile import read_ini
from pytest_agentdrift.options import OPTIONS, ini_declared

#: ini types the plugin's options do not use, each declared with and without a default
OTHER_TYPES: dict[str, tuple[str, Any]] = {
    "x_args": ("args", []),
    "x_paths": ("paths", []),
    "x_int": ("int", 0),
    "x_float": ("float", 0.0),
    "x_string_default": ("string", "the default"),
    "x_bool_default": ("bool", True),
    "x_linelist_none": ("linelist", None),
}
DECLARED = {**ini_declared(*OPTIONS), **OTHER_TYPES}


class _OtherTypes:
    @staticmethod
    def pytest_addoption(parser: pytest.Parser) -> None:
        for name, (ini_type, default) in OTHER_TYPES.items():
            parser.addini(name, help=name, type=ini_type, default=default)


def _pytest_reads(config_file: str | None, rootdir: str | None) -> tuple[Path, Path | None, dict]:
    """pytest's rootdir, configuration file and getini of every declared name, invoked in the current directory."""
    argv = ["--noconftest", "-p", "no:cacheprovider", "-p", "no:xdist"]
    argv += ["-c", config_file] if config_file else []
    argv += ["--rootdir", rootdir] if rootdir else []
    config = _prepareconfig(argv, plugins=[_OtherTypes()])
    try:
        # the plugin registered its twins as ini_declared says: the reader types by the same table
        registered = {name: config._parser._inidict[name][1:] for name in DECLARED}
        assert registered == {name: tuple(decl) for name, decl in DECLARED.items()}
        return config.rootpath, config.inipath, {name: config.getini(name) for name in DECLARED}
    finally:
        config._ensure_unconfigure()


INI_TEXT = """\
agent_k = 3
agent_vary =
    model_id

    agent_version
agent_keep_workdirs = Yes
agent_null = off
agent_bundles =
x_args = -k "a b" --x
x_paths = sub "with space" /abs
x_int = 7
x_float = 0.5
x_linelist_none = one
"""
TOML_INI_MODE = """\
agent_k = 3
agent_vary = ["model_id", "agent_version"]
agent_keep_workdirs = true
agent_null = "off"
agent_accept_unobserved = "envelope"
agent_without = "\\n  one\\n\\n  two  "
x_args = "-k 'a b'"
x_paths = ["sub", "/abs"]
x_int = 7
x_float = 0.5
x_string_default = ["a", "list"]
"""
TOML_NATIVE = """\
agent_k = "3"
agent_vary = ["model_id", "agent_version"]
agent_keep_workdirs = true
agent_accept_unobserved = []
x_args = ["-k", "a b"]
x_paths = ["sub", "/abs"]
x_int = 7
x_float = 2
x_bool_default = false
"""

#: id: ({file: text}, directory pytest is invoked in, -c, --rootdir)
CASES: dict[str, tuple[dict[str, str], str, str | None, str | None]] = {
    "pytest.ini": ({"pytest.ini": "[pytest]\n" + INI_TEXT}, ".", None, None),
    ".pytest.ini": ({".pytest.ini": "[pytest]\n" + INI_TEXT}, ".", None, None),
    "pytest.ini without a section": (
        {"pytest.ini": "# nothing\n", "tox.ini": "[pytest]\nagent_k = 5\n"},
        ".",
        None,
        None,
    ),
    "tox.ini": ({"tox.ini": "[tox]\nenvlist = py\n[pytest]\n" + INI_TEXT}, ".", None, None),
    "setup.cfg": ({"setup.cfg": "[metadata]\nname = x\n[tool:pytest]\n" + INI_TEXT}, ".", None, None),
    "pyproject ini_options": ({"pyproject.toml": "[tool.pytest.ini_options]\n" + TOML_INI_MODE}, ".", None, None),
    "pyproject native": ({"pyproject.toml": "[tool.pytest]\n" + TOML_NATIVE}, ".", None, None),
    "pytest.toml": ({"pytest.toml": "[pytest]\n" + TOML_NATIVE}, ".", None, None),
    ".pytest.toml": ({".pytest.toml": "[pytest]\n" + TOML_NATIVE}, ".", None, None),
    "empty pytest.toml": ({"pytest.toml": "", "pytest.ini": "[pytest]\nagent_k = 5\n"}, ".", None, None),
    "pytest.toml before pytest.ini": (
        {"pytest.toml": "[pytest]\nagent_k = '1'\n", "pytest.ini": "[pytest]\nagent_k = 2\n"},
        ".",
        None,
        None,
    ),
    "pyproject before tox.ini and setup.cfg": (
        {
            "pyproject.toml": "[tool.pytest.ini_options]\nagent_k = 1\n",
            "tox.ini": "[pytest]\nagent_k = 2\n",
            "setup.cfg": "[tool:pytest]\nagent_k = 3\n",
        },
        ".",
        None,
        None,
    ),
    "tox.ini without [pytest] is passed over": (
        {"tox.ini": "[tox]\n", "setup.cfg": "[tool:pytest]\nagent_k = 3\n"},
        ".",
        None,
        None,
    ),
    "nested: the nearest file wins": (
        {"pytest.ini": "[pytest]\nagent_k = 1\n", "a/setup.cfg": "[tool:pytest]\nagent_k = 2\n"},
        "a/b",
        None,
        None,
    ),
    "nested: files without pytest configuration are passed over": (
        {
            "pytest.ini": "[pytest]\n" + INI_TEXT,
            "a/pyproject.toml": "[project]\nname = 'x'\n",
            "a/tox.ini": "[tox]\n",
            "a/setup.cfg": "[metadata]\n",
        },
        "a/b",
        None,
        None,
    ),
    "nested: a pyproject.toml without pytest configuration is the last resort": (
        {"a/pyproject.toml": "[project]\nname = 'x'\n", "a/b/pyproject.toml": "[tool.black]\n"},
        "a/b/c",
        None,
        None,
    ),
    "no configuration, a setup.py above": ({"setup.py": "", "a/README": ""}, "a", None, None),
    "no configuration at all": ({"a/README": ""}, "a", None, None),
    "-c an ini file elsewhere": (
        {"pytest.ini": "[pytest]\nagent_k = 1\n", "conf/custom.ini": "[pytest]\n" + INI_TEXT},
        ".",
        "conf/custom.ini",
        None,
    ),
    "-c a pyproject.toml": (
        {"pytest.ini": "[pytest]\nagent_k = 1\n", "other/pyproject.toml": "[tool.pytest]\n" + TOML_NATIVE},
        ".",
        "other/pyproject.toml",
        None,
    ),
    "-c a file with no pytest section": (
        {"pytest.ini": "[pytest]\nagent_k = 1\n", "other/tox.ini": "[tox]\n"},
        ".",
        "other/tox.ini",
        None,
    ),
    "-c a setup.cfg, absolute": ({"conf/setup.cfg": "[tool:pytest]\n" + INI_TEXT}, "a", "{root}/conf/setup.cfg", None),
    "--rootdir moves the rootdir, not the configuration file": (
        {"pytest.ini": "[pytest]\n" + INI_TEXT, "elsewhere/pytest.ini": "[pytest]\nagent_k = 9\n"},
        ".",
        None,
        "elsewhere",
    ),
    "--rootdir from an environment variable": (
        {"pytest.ini": "[pytest]\nagent_k = 1\n", "r/x": ""},
        ".",
        None,
        "$INIFILE_TEST_ROOT/r",
    ),
    "-c and --rootdir": (
        {"conf/custom.ini": "[pytest]\n" + INI_TEXT, "r/x": ""},
        ".",
        "conf/custom.ini",
        "r",
    ),
}


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


@pytest.fixture
def world(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    monkeypatch.setenv("INIFILE_TEST_ROOT", str(tmp_path))
    return tmp_path


# x_string_default gives a TOML list to a string-typed option on purpose: pytest still answers it (with a
# deprecation warning, a TypeError in a later pytest), and the reader must answer what pytest answers
@pytest.mark.filterwarnings("ignore:Passing a value that is not a string:pytest.PytestDeprecationWarning")
@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_read_ini_answers_what_pytest_getini_answers(world, monkeypatch, case):
    files, start, config_file, rootdir = CASES[case]
    _tree(world, files)
    start_dir = world / start
    start_dir.mkdir(parents=True, exist_ok=True)
    config_file = config_file.format(root=world) if config_file else None
    monkeypatch.chdir(start_dir)
    expected = _pytest_reads(config_file, rootdir)
    ours = read_ini(DECLARED, config_file, rootdir)
    assert (ours.rootdir, ours.inipath, ours.values) == expected
    # and from a start directory given rather than the current one
    monkeypatch.chdir(world.parent)
    assert read_ini(DECLARED, config_file, rootdir, start=start_dir) == ours


#: id: (PYTEST_ADDOPTS, -c, --rootdir), over one tree
ADDOPTS: dict[str, tuple[str, str | None, str | None]] = {
    "-c in PYTEST_ADDOPTS": ("-x -c conf/custom.ini -p no:randomly", None, None),
    "--config-file= and --rootdir= in PYTEST_ADDOPTS": ("--config-file=conf/custom.ini --rootdir=r", None, None),
    "the command line's -c and --rootdir win": ("-cconf/custom.ini --rootdir r", "pytest.ini", "conf"),
    "-o over the file's values": ("-o agent_k=9 --override-ini=x_paths='a b' -oagent_null=1 -o agent_k=10", None, None),
    "-o with no file": ("-o agent_vary=model_id -o x_paths=here", None, None),
}


@pytest.mark.parametrize("case", ADDOPTS, ids=list(ADDOPTS))
def test_pytest_addopts_speaks_to_the_reader_as_to_pytest(world, monkeypatch, case):
    addopts, config_file, rootdir = ADDOPTS[case]
    start = world / "a"
    files = {"a/conf/custom.ini": "[pytest]\n" + INI_TEXT, "a/r/x": ""}
    _tree(world, files if case == "-o with no file" else {**files, "a/pytest.ini": "[pytest]\nagent_k = 1\n"})
    monkeypatch.chdir(start)
    monkeypatch.setenv("PYTEST_ADDOPTS", addopts)
    expected = _pytest_reads(config_file, rootdir)
    ours = read_ini(DECLARED, config_file, rootdir)
    assert (ours.rootdir, ours.inipath, ours.values) == expected
    monkeypatch.delenv("PYTEST_ADDOPTS")
    assert read_ini(DECLARED, config_file, rootdir, environ={"PYTEST_ADDOPTS": addopts}) == ours
    # it spoke, unless the command line said otherwise
    assert (read_ini(DECLARED, config_file, rootdir) == ours) == (case == "the command line's -c and --rootdir win")


def test_the_cases_read_every_type_in_every_format(world, monkeypatch):
    """The matrix would be weak if a format's values never reached the reader: each writes non-defaults."""
    monkeypatch.chdir(world)
    for text, name in ((INI_TEXT, "pytest.ini"), (TOML_INI_MODE, "pyproject.toml"), (TOML_NATIVE, "pytest.toml")):
        section = "[tool.pytest.ini_options]\n" if name == "pyproject.toml" else "[pytest]\n"
        _tree(world, {name: section + text})
        values = read_ini(DECLARED).values
        os.remove(world / name)
        changed = {n for n, (_, default) in DECLARED.items() if values[n] != default}
        assert {"agent_k", "agent_vary", "agent_keep_workdirs", "x_args", "x_paths", "x_int", "x_float"} <= changed


#: id: ({file: text}, -c, --rootdir, the file the error names (None: no file))
BAD: dict[str, tuple[dict[str, str], str | None, str | None, str | None]] = {
    "ini syntax": ({"pytest.ini": "[pytest]\n  indented = first\n"}, None, None, "pytest.ini"),
    "toml syntax": ({"pyproject.toml": "[tool.pytest.ini_options\n"}, None, None, "pyproject.toml"),
    "both pyproject tables": (
        {"pyproject.toml": "[tool.pytest]\nagent_k = '1'\n[tool.pytest.ini_options]\nagent_k = '2'\n"},
        None,
        None,
        "pyproject.toml",
    ),
    "[pytest] in setup.cfg": ({"setup.cfg": "[pytest]\nagent_k = 1\n"}, None, None, "setup.cfg"),
    "not a truth value": ({"tox.ini": "[pytest]\nagent_null = maybe\n"}, None, None, "tox.ini"),
    "native type mismatch": ({"pytest.toml": "[pytest]\nagent_k = 3\n"}, None, None, "pytest.toml"),
    "native list of numbers": ({"pytest.toml": "[pytest]\nagent_vary = [1]\n"}, None, None, "pytest.toml"),
    "native bool as text": ({"pytest.toml": "[pytest]\nagent_null = 'true'\n"}, None, None, "pytest.toml"),
    "not a number": ({"pytest.ini": "[pytest]\nx_int = seven\n"}, None, None, "pytest.ini"),
    "unbalanced quote in args": ({"pytest.ini": "[pytest]\nx_args = 'open\n"}, None, None, "pytest.ini"),
    "-c given a file with bad syntax": ({"conf/x.toml": "= 1\n"}, "conf/x.toml", None, "conf/x.toml"),
    "--rootdir not a directory": ({"pytest.ini": "[pytest]\n"}, None, "missing", None),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_a_bad_configuration_is_one_error_naming_the_file(world, monkeypatch, case):
    files, config_file, rootdir, named = BAD[case]
    _tree(world, files)
    monkeypatch.chdir(world)
    # pytest refuses it too: a UsageError, TypeError or ValueError, or a failure (not an Exception)
    with pytest.raises((Exception, pytest.fail.Exception)):
        _pytest_reads(config_file, rootdir)
    with pytest.raises(AgentDriftError) as caught:
        read_ini(DECLARED, config_file, rootdir)
    assert caught.value.path == (str(world / named) if named else None)
    assert "\n" not in caught.value.message


def test_a_missing_c_file_is_an_error_naming_it(world, monkeypatch):
    monkeypatch.chdir(world)
    with pytest.raises(AgentDriftError) as caught:
        read_ini(DECLARED, "nowhere.ini")
    assert caught.value.path == str(world / "nowhere.ini")


def test_the_reader_imports_no_pytest():
    import subprocess
    import sys

    probe = (
        "import sys; from pytest_agentdrift.inifile import read_ini; read_ini({'agent_k': ('string', None)}); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pytest', '_pytest')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_cli_resolves_its_shared_flags_as_the_plugin_does(world, monkeypatch):
    """The `agentdrift` commands' shared flags, read outside pytest, equal the plugin's Settings read inside it."""
    from pytest_agentdrift.options import resolve, resolve_outside_pytest

    shared = [name for name, decl in OPTIONS.items() if decl.cli]
    _tree(
        world,
        {
            "conf/custom.ini": "[pytest]\nagent_gate_flakes = report\nagent_max_infra_loss = 25%\nagent_seed = 7\n"
            "agent_accept_unobserved =\n    none\n    envelope\nagent_vary =\n    model_id\n",
            "pytest.ini": "[pytest]\nagent_seed = 1\n",
        },
    )
    monkeypatch.chdir(world)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    config = _prepareconfig(["--noconftest", "-p", "no:cacheprovider", "-p", "no:xdist", "-c", "conf/custom.ini"])
    try:
        settings = resolve(config.getoption, config.getini, config.rootpath)
    finally:
        config._ensure_unconfigure()
    outside = resolve_outside_pytest(dict.fromkeys(shared), "conf/custom.ini")
    assert outside == {name: getattr(settings, name) for name in shared}
    assert (outside["seed"], outside["gate_flakes"], outside["max_infra_loss"]) == (7, "report", 0.25)


@pytest.mark.parametrize("addopts", ["-o novalue", "-c", "-k 'open"])
def test_a_bad_pytest_addopts_is_one_error_naming_it(world, monkeypatch, addopts):
    monkeypatch.chdir(world)
    monkeypatch.setenv("PYTEST_ADDOPTS", addopts)
    with pytest.raises((Exception, SystemExit)):  # pytest refuses it too
        _pytest_reads(None, None)
    with pytest.raises(AgentDriftError, match="PYTEST_ADDOPTS"):
        read_ini(DECLARED)
