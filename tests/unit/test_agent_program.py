"""The program an agent command runs, identified read-only (manifest/agentcmd.program_identity):
an npm package's bin, a console script pip installed, `python -m`, a script and its venv."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import pip_install, tiny_agent_wheel

from pytest_agentdrift.manifest import capture as mf
from pytest_agentdrift.manifest.agentcmd import program_identity


def identify(argv, tmp_path, path=None):
    env = {"PATH": os.pathsep.join(str(p) for p in (path or []))}
    return program_identity([str(a) for a in argv], env, tmp_path, tmp_path / "probe-home")


# --------------------------------------------------------------------------- npm


def npm_package(root: Path, name: str, version: str) -> Path:
    """`root/lib/node_modules/<name>/` with its package.json and a bin script; its path."""
    pkg = root / "lib" / "node_modules" / name
    (pkg / "dist").mkdir(parents=True, exist_ok=True)
    (pkg / "dist" / "cli.js").write_text("#!/usr/bin/env node\nconsole.log('hi')\n")
    (pkg / "dist" / "cli.js").chmod(0o755)  # npm makes a bin executable
    (pkg / "package.json").write_text(json.dumps({"name": name, "version": version, "bin": "dist/cli.js"}))
    return pkg


def test_an_npm_global_bin_is_its_packages_name_and_version(tmp_path):
    prefix = tmp_path / "prefix"
    npm_package(prefix, "@acme/coder", "0.24.3")
    (prefix / "bin").mkdir()
    os.symlink("../lib/node_modules/@acme/coder/dist/cli.js", prefix / "bin" / "acme")
    found = identify(["acme", "-p", "{task_text}"], tmp_path, [prefix / "bin"])
    assert found["version"] == "npm:@acme/coder@0.24.3" and found["kind"] == "npm package"
    # a patch release is a different version (0.24.3 against 0.24.4 is not "identical")
    npm_package(prefix, "@acme/coder", "0.24.4")
    assert identify(["acme"], tmp_path, [prefix / "bin"])["version"] == "npm:@acme/coder@0.24.4"


def test_a_projects_node_modules_bin_link_and_node_running_a_package_file(tmp_path):
    proj = tmp_path / "proj"
    pkg = proj / "node_modules" / "qwen-code"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "bin" / "qwen.js").write_text("console.log(1)\n")
    (pkg / "package.json").write_text('{"name": "qwen-code", "version": "1.0.0"}')
    (proj / "node_modules" / ".bin").mkdir()
    os.symlink("../qwen-code/bin/qwen.js", proj / "node_modules" / ".bin" / "qwen")
    link = proj / "node_modules" / ".bin" / "qwen"
    assert identify([link], tmp_path)["version"] == "npm:qwen-code@1.0.0"
    # `node <file of a package>`: the package, not node
    bindir = tmp_path / "bin"
    bindir.mkdir()
    node = bindir / "node"
    node.write_text("#!/bin/sh\n")
    node.chmod(0o755)
    assert identify(["node", pkg / "bin" / "qwen.js"], tmp_path, [bindir])["version"] == "npm:qwen-code@1.0.0"


def test_a_package_json_without_a_version_is_unobserved_with_a_reason(tmp_path):
    pkg = tmp_path / "node_modules" / "broken"
    pkg.mkdir(parents=True)
    (pkg / "cli.js").write_text("x\n")
    (pkg / "package.json").write_text('{"name": "broken"}')
    found = identify([pkg / "cli.js"], tmp_path)
    assert found["version"] == "unobserved" and "package.json" in found["reason"]


# --------------------------------------------------------------------------- pip


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("venv")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip_install(venv, tiny_agent_wheel(tmp, "1.0"))
    return venv


def test_a_console_script_pip_installed_is_its_distributions_version_and_nothing_is_imported(
    venv, tmp_path, monkeypatch
):
    marker = tmp_path / "imported"
    monkeypatch.setenv("TINYAGENT_MARKER", str(marker))
    script = venv / "bin" / "tinyagent"
    found = identify([script, "{task_file}"], tmp_path)
    assert found["version"] == "pip:tinyagent==1.0" and found["kind"] == "console script"
    # by name on the agent's PATH too, and as `python -m`
    assert identify(["tinyagent"], tmp_path, [venv / "bin"])["version"] == "pip:tinyagent==1.0"
    assert identify([venv / "bin" / "python", "-u", "-m", "tinyagent"], tmp_path)["version"] == "pip:tinyagent==1.0"
    # metadata was read; the agent's package never ran (not here, not in the probe)
    assert not marker.exists()
    assert "tinyagent" not in sys.modules


def test_a_script_is_its_bytes_and_its_venvs_distributions_not_its_interpreter(venv, tmp_path):
    script = tmp_path / "agent.py"
    script.write_text("import tinyagent\n")
    python = venv / "bin" / "python"
    first = identify([python, script, "{task_file}"], tmp_path)["version"]
    assert first["program"] == "agent.py" and first["sha256"].startswith("sha256:")
    assert first["distributions"] == {"tinyagent": "1.0"}
    assert "python" not in json.dumps(first).lower().replace("agent.py", "")  # no interpreter version
    assert identify([python, script], tmp_path)["version"] == first
    script.write_text("import tinyagent  # tuned\n")
    edited = identify([python, script], tmp_path)["version"]
    assert edited["sha256"] != first["sha256"] and edited["distributions"] == first["distributions"]


def test_a_bumped_package_in_the_venv_changes_the_version(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip_install(venv, tiny_agent_wheel(tmp_path, "1.0"))
    script = tmp_path / "agent.py"
    script.write_text("import tinyagent\n")
    before = identify([venv / "bin" / "python", script], tmp_path)["version"]
    pip_install(venv, tiny_agent_wheel(tmp_path, "1.1"))
    after = identify([venv / "bin" / "python", script], tmp_path)["version"]
    assert before["distributions"] == {"tinyagent": "1.0"} and after["distributions"] == {"tinyagent": "1.1"}
    assert identify([venv / "bin" / "tinyagent"], tmp_path)["version"] == "pip:tinyagent==1.1"


# --------------------------------------------------------------------------- other commands


def test_a_bare_script_inline_code_and_launchers(tmp_path):
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    found = identify([script], tmp_path)
    assert found["version"]["program"] == "agent.sh" and "distributions" not in found["version"]
    assert identify(["sh", script], tmp_path, ["/bin", "/usr/bin"])["version"] == found["version"]
    # inline code may start any program: not identified, and the reason says how to declare it
    inline = identify(["sh", "-c", "exec aider"], tmp_path, ["/bin", "/usr/bin"])
    assert inline["version"] == "unobserved" and "inline" in inline["reason"] and "--agent-declare" in inline["reason"]
    assert identify([sys.executable, "-c", "pass"], tmp_path)["version"] == "unobserved"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "npx").write_text("#!/bin/sh\n")
    (bindir / "npx").chmod(0o755)
    launched = identify(["npx", "some-agent"], tmp_path, [bindir])
    assert launched["version"] == "unobserved" and "npx" in launched["reason"]
    missing = identify(["no-such-agent"], tmp_path, [bindir])
    assert missing["version"] == "unobserved" and "not found" in missing["reason"]
    # a python -m module no distribution owns cannot be named by a version
    local = identify([sys.executable, "-m", "no_such_module_here"], tmp_path)
    assert local["version"] == "unobserved" and "no_such_module_here" in local["reason"]


def test_capture_records_it_as_cli_version_and_the_script_only_there(tmp_path):
    home, proj = tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    script = proj / "agent.py"
    script.write_text("print('agent')\n")
    argv = [sys.executable, str(script), "{task_file}"]
    ctx = mf.ManifestContext(
        adapter={"name": "cmd", "product": "generic", "surface": "cli", "command": argv},
        agent_argv=argv,
        version_argv=None,
        home=home,
        project_root=proj,
        env={"PATH": os.environ.get("PATH", "")},
        system_root=None,
        scoring_files=[],
        probe_home=tmp_path / "probe",
    )
    (tmp_path / "probe").mkdir()
    man = mf.capture_manifest(ctx)
    version = man["identity"]["cli_version"]
    assert (
        version["program"] == "agent.py"
        and version["sha256"] == "sha256:" + hashlib.sha256(b"print('agent')\n").hexdigest()
    )
    assert "pytest" in version["distributions"]
    # the script's bytes are one field's, not two: editing it is one change
    assert man["identity"]["agent_files_hash"] == "not_applicable"
    assert "cli_version" in man["reasons"]["agent_files_hash"]
    assert man["provenance"]["cli_executable"]["path"] == "project:agent.py"
    assert str(proj) not in json.dumps(man["identity"])


def test_a_declaration_fills_what_cannot_be_identified_and_never_overrides_what_was(tmp_path):
    from pytest_agentdrift.errors import AgentDriftError
    from pytest_agentdrift.manifest.declare import apply_facts

    def manifest(argv):
        (tmp_path / "home").mkdir(exist_ok=True)
        ctx = mf.ManifestContext(
            adapter={"name": "cmd", "product": "generic", "surface": "cli", "command": argv},
            agent_argv=argv,
            version_argv=None,
            home=tmp_path / "home",
            project_root=tmp_path,
            env={"PATH": "/bin:/usr/bin"},
            system_root=None,
            scoring_files=[],
        )
        return mf.capture_manifest(ctx)

    hidden = manifest(["sh", "-c", "exec aider --yes"])
    assert hidden["identity"]["cli_version"] == "unobserved"
    assert "--agent-declare" in hidden["reasons"]["cli_version"]
    assert apply_facts(hidden, {"cli_version": "aider 0.86.1"}, "declared", "agent.toml") == ["cli_version"]
    assert hidden["identity"]["cli_version"] == "aider 0.86.1"
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\n")
    seen = manifest([str(script)])
    with pytest.raises(AgentDriftError, match="cli_version: declared value .* contradicts the value observed"):
        apply_facts(seen, {"cli_version": "1.0"}, "declared", "agent.toml")
