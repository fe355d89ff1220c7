"""The merge gate end to end: exit statuses, the closing line, junit properties,
recording without judging, and generic agents compared in one command."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import last_line, record_then_compare, run_pytest, tiny_agent_wheel

from pytest_agentdrift.testing import agent_script, make_task

pytestmark = pytest.mark.slow

CLOSING = "agentdrift: exit "
#: a candidate session against runs/base under the regression gate, recorded and with its JUnit XML
GATED_CANDIDATE = ("--agent-baseline", "runs/base", "--agent-gate", "regression", "--agent-record", "runs/cand")
GATED_CANDIDATE += ("--junitxml", "junit.xml")


def tasks(root: Path, count: int = 2, *, crit_fail_both: bool = False) -> None:
    """`count` small tasks G01.. (two unless a test needs another number): the reference agent applies
    solution/ (notes.txt). A test of identity, refusal or its printed advice needs one task, not two:
    every session it starts then costs one run instead of two."""
    for tid in (f"G{i:02d}" for i in range(1, count + 1)):
        checks = [
            {
                "name": "notes-written",
                "kind": "command",
                "layer": "correctness",
                "critical": True,
                "run": [
                    sys.executable,
                    "-c",
                    "import pathlib,sys; sys.exit(0 if pathlib.Path('notes.txt').is_file() else 1)",
                ],
            }
        ]
        if crit_fail_both and tid == "G02":
            # a critical check no agent passes here: it fails in both arms (standing)
            checks.append(
                {
                    "name": "impossible",
                    "kind": "command",
                    "layer": "correctness",
                    "critical": True,
                    "run": [sys.executable, "-c", "raise SystemExit(1)"],
                }
            )
        make_task(root, tid, checks=checks, solution={"notes.txt": "hi\n"}, allowed=["notes.txt"])


def test_regression_gate_same_agent_standing_failures_and_the_closing_line(pytester):
    tasks(pytester.path, crit_fail_both=True)
    recording = ("--agent-record", "runs/base", "--agent-fail-on", "none", "--junitxml", "plain.xml")
    rec = run_pytest(pytester, "--agent", "reference", *recording)
    # recording without judging: G02 fails, the record is complete, exit 0
    assert rec.ret == 0, rec.stdout.str()
    # a plain session's junit (no xdist): test_junit_valid_named_and_without_payload_under_xdist's twin
    assert_junit_named_without_payload(pytester.path / "plain.xml")
    assert "1 failed" in rec.stdout.str()
    assert last_line(rec).startswith("agentdrift: exit 0 — recorded runs/base complete; task outcomes do not set")
    report = (pytester.path / "runs" / "base" / "report.md").read_text()
    assert last_line(rec) in report

    result = run_pytest(pytester, "--agent", "reference", *GATED_CANDIDATE)
    out = result.stdout.str()
    assert result.ret == 0, out
    # pytest's own outcome agrees with the gate: the standing failure is an xfail, nothing "failed"
    stats = [ln for ln in result.stdout.lines if re.match(r"^=+ .* in [0-9.]+s", ln)][-1]
    assert "1 xfailed" in stats and "failed" not in stats.replace("xfailed", ""), stats
    closing = last_line(result)
    # two tasks can show no regression at alpha 0.05, and the line says so rather than "equal"
    assert closing.startswith(
        "agentdrift: exit 0 — gate regression: no regression detected (no regression is "
        "detectable with 2 task(s) at alpha 0.05)"
    )
    assert "standing (fails in the baseline too): critical failure G02 impossible (1/1 in baseline, 1/1 now)" in closing
    decision = json.loads((pytester.path / "runs" / "cand" / "comparison" / "decision.json").read_text())
    assert decision["exit_status"]["line"] == closing
    assert next(iter(decision)) == "exit_status"  # the closing line leads decision.json
    assert decision["regression_gate"]["minimum_detectable"]["power"] == 0.8
    assert closing in (pytester.path / "runs" / "cand" / "report.md").read_text()
    assert_outputs_lead_with(pytester.path / "runs" / "cand", closing)

    # junit (default family xunit2): valid against junit-10.xsd, each testcase named for its task,
    # the per-run facts a CI UI can show as testsuite properties, failing checks in the failure message
    root = valid_junit(pytester.path / "junit.xml")
    cases = {tc.get("classname"): tc for tc in root.iter("testcase")}
    g02 = cases["G02-task"]
    assert g02.get("name") == "G02 r1: Task G02" and g02.find("properties") is None
    props = suite_properties(root)
    assert props["agentdrift.G02.r1.task_id"] == "G02" and props["agentdrift.G02.r1.title"] == "Task G02"
    assert props["agentdrift.G02.r1.suite"] == "tests" and props["agentdrift.G02.r1.repetition"] == "1"
    assert props["agentdrift.G02.r1.outcome"] == "failed"
    assert props["agentdrift.G02.r1.critical_failures"] == "impossible"
    assert props["agentdrift.G02.r1.layer.correctness"] == "fail"
    assert props["agentdrift.G02.r1.tampered_pass"] == "false"
    # JUnit says what the exit status says: no failure, G02 an xfail that names why
    assert root.find("testsuite").get("failures") == "0" and g02.find("failure") is None
    xfail = g02.find("skipped")
    assert xfail.get("type") == "pytest.xfail" and "fails in baseline too" in xfail.get("message")
    assert not any(n.endswith(".agentdrift") for n in props) and all(len(v) < 500 for v in props.values())


def assert_outputs_lead_with(record: Path, closing: str) -> None:
    """decision.json, report.md, report.html and `agentdrift summary` each open with the closing line."""
    import html

    decision = json.loads((record / "comparison" / "decision.json").read_text())
    assert list(decision)[0] == "exit_status" and decision["exit_status"]["line"] == closing
    md = [ln for ln in (record / "report.md").read_text().splitlines() if ln.strip()]
    unmd = lambda text: re.sub(r"\\(.)", r"\1", text)  # noqa: E731  (Markdown's backslash escapes undone)
    assert unmd(md[1]) == f"**{closing}**", md[:3]  # after the title, before anything else
    page = (record / "report.html").read_text()
    header = page[page.index('<header id="top">') :]
    first = re.search(r'<p class="(ok|bad)-box" id="closing"><b>(.*?)</b></p>', header)
    assert first and html.unescape(first.group(2)) == closing
    assert header.index('id="closing"') < header.index("</header>")
    summary = subprocess.run(
        [sys.executable, "-m", "pytest_agentdrift", "summary", str(record)], capture_output=True, text=True, check=True
    ).stdout
    lines = [ln for ln in summary.splitlines() if ln.strip()]
    assert lines[0] == "## agentdrift" and unmd(lines[1]) == f"**{closing}**", lines[:3]


def assert_cost_said_alike(record: Path, out: str, closing: str) -> dict:
    """What the decision spent and bought (decision.json's cost) is said in the same words by the closing
    line, pytest's terminal summary, report.md and report.html; the cost document, for more checks."""
    import html

    from pytest_agentdrift.record.spend import arm_text, power_text

    cost = json.loads((record / "comparison" / "decision.json").read_text())["cost"]
    assert cost["text"] in closing
    spend = f"spend       baseline {arm_text(cost['baseline'])}  candidate {arm_text(cost['candidate'])}"
    md = (record / "report.md").read_text()
    assert spend in out and spend in md
    page = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", (record / "report.html").read_text())).split())
    assert f"spend: candidate {arm_text(cost['candidate'])}" in page
    assert f"spend: baseline {arm_text(cost['baseline'])}" in page
    power = power_text(cost["power"])
    if power:
        assert f"power       {power}" in out and f"power       {power}" in md and power in page
    return cost


def test_a_gate_failing_only_on_the_paired_test_says_the_same_in_all_four_outputs(pytester, monkeypatch):
    """Five tasks lost (p = 1/32) and one failing in both arms: exit 1; the lost tasks fail in pytest's
    summary, in JUnit, report.md and report.html, named the same way; the standing one is an xfail
    in all four."""
    for i in range(1, 8):
        check = {
            "name": "notes-written",
            "kind": "command",
            "layer": "correctness",
            "run": [
                sys.executable,
                "-c",
                "import pathlib,sys; sys.exit(0 if pathlib.Path('notes.txt').is_file() else 1)",
            ],
        }
        make_task(pytester.path, f"H{i:02d}", checks=[check], allowed=["notes.txt"])
    (pytester.path / "agent.toml").write_text(DECLARE)
    (pytester.path / "pytest.ini").write_text(INI)
    script = agent_script(
        pytester.path / "my_agent.py",
        "tid = os.environ['AGENTDRIFT_TASK_ID']\n"
        "lazy = {'H07'} | ({'H01', 'H02', 'H03', 'H04', 'H05'} if os.environ.get('AGENT_MODE') == 'lazy' else set())\n"
        "if tid not in lazy:\n    Path('notes.txt').write_text('hi\\n')\nreport('complete')\n",
    )
    args = ["--agent-cmd", f"{sys.executable} {script} {{task_file}}", "--agent-env", "AGENT_MODE"]
    monkeypatch.setenv("AGENT_MODE", "good")
    assert run_pytest(pytester, *args, "--agent-record", "runs/base", "--agent-fail-on", "none").ret == 0
    monkeypatch.setenv("AGENT_MODE", "lazy")
    result = run_pytest(pytester, *args, *GATED_CANDIDATE)
    out = result.stdout.str()
    assert result.ret == 1, out
    closing = last_line(result)
    assert closing.startswith("agentdrift: exit 1 — gate regression: paired test: loses 5 task(s), wins 0"), closing
    lost = [f"H0{i}" for i in range(1, 6)]
    # pytest's summary: the five lost tasks failed, the standing one an xfail, nothing else
    stats = [ln for ln in result.stdout.lines if re.match(r"^=+ .* in [0-9.]+s", ln)][-1]
    assert "5 failed" in stats and "1 passed" in stats and "1 xfailed" in stats, stats
    failed = sorted(re.findall(r"^FAILED (H0\d)-", out, re.M))
    assert failed == lost, failed
    # JUnit: five failures, H07 an xfail
    root = valid_junit(pytester.path / "junit.xml")
    assert root.find("testsuite").get("failures") == "5"
    cases = {tc.get("classname").split("-")[0]: tc for tc in root.iter("testcase")}
    assert sorted(t for t, tc in cases.items() if tc.find("failure") is not None) == lost
    assert cases["H07"].find("skipped").get("type") == "pytest.xfail"
    # decision.json, report.md and report.html name the same tasks the same way
    record = pytester.path / "runs" / "cand"
    assert_outputs_lead_with(record, closing)
    items = json.loads((record / "comparison" / "decision.json").read_text())["regression_gate"]["items"]
    assert sorted(items["failed"]) == lost and list(items["xfailed"]) == ["H07"]
    held = "lost, and the paired test flags the candidate's losses"
    assert all(why == held for why in items["failed"].values())
    assert items["xfailed"]["H07"].startswith("fails in baseline too (1/1 baseline run(s) failed)")
    md = (record / "report.md").read_text()
    page = (record / "report.html").read_text()
    import html

    text = html.unescape(re.sub(r"<[^>]+>", " ", page))
    for tid in lost:
        line = f"failed (held against the candidate): {tid}: {held}"
        assert line in out and line in md
        assert f"{tid} : {held}" in text
    assert "xfailed (not held): H07: fails in baseline too" in md and "xfailed (not held): H07: fails" in out
    assert "xfailed (not held)" in text and "H07 : fails in baseline too" in text
    assert "failed (held against the candidate)" in text
    # what the decision cost: seven runs a side, a fixed design, in every output alike
    cost = assert_cost_said_alike(record, out, closing)
    assert cost["candidate"]["runs"] == cost["baseline"]["runs"] == 7 and cost["candidate"]["wall_s"] > 0
    assert cost["power"]["design"] == "fixed" and cost["power"]["k"] == 1


JUNIT_XSD = Path(__file__).parents[1] / "data" / "junit-10.xsd"  # the Jenkins xUnit plugin's schema


def valid_junit(path: Path) -> ET.Element:
    """The JUnit file's root, after the Jenkins junit-10.xsd (what pytest's xunit2 targets) accepted it."""
    import xmlschema

    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(path))
    return ET.parse(path).getroot()


def suite_properties(root: ET.Element) -> dict[str, str]:
    suite = root.find("testsuite")
    return {p.get("name"): p.get("value") for p in suite.find("properties").iter("property")}


def test_junit_valid_named_and_without_payload_under_xdist(pytester):
    """The same junit as a plain session's (the recording session of
    test_regression_gate_same_agent_standing_failures_and_the_closing_line is that plain session)."""
    tasks(pytester.path)
    result = run_pytest(pytester, "--agent", "reference", "--junitxml", "junit.xml", "-n", "2")
    assert result.ret == 0
    assert_junit_named_without_payload(pytester.path / "junit.xml")


def assert_junit_named_without_payload(path: Path) -> None:
    """Valid (junit-10.xsd), each testcase named for its task (G01, G02), the per-run facts as suite
    properties and never the controller's payload."""
    root = valid_junit(path)
    cases = list(root.iter("testcase"))
    assert sorted(tc.get("name") for tc in cases) == ["G01 r1: Task G01", "G02 r1: Task G02"]
    assert all(tc.find("properties") is None for tc in cases)
    props = suite_properties(root)
    assert "agentdrift" not in {n.rsplit(".", 1)[-1] for n in props}  # the controller payload never reaches junit
    assert {"agentdrift.G01.r1.outcome", "agentdrift.G02.r1.layer.safety", "agentdrift.G02.r1.failed_checks"} <= set(
        props
    )
    assert all(len(v) < 500 for v in props.values())


def test_junit_properties_per_testcase_when_the_family_allows_them(pytester):
    """xunit1 here; `legacy` in test_new_critical_failure_fails_the_gate_naming_it's recording session."""
    tasks(pytester.path)
    result = run_pytest(pytester, "--agent", "reference", "--junitxml", "junit.xml", "-o", "junit_family=xunit1")
    assert result.ret == 0
    assert_junit_properties_per_testcase(pytester.path / "junit.xml")


def assert_junit_properties_per_testcase(path: Path) -> None:
    """Two testcases (G01, G02), named for their task, each with its run's facts as its own properties
    (never the controller's payload), and no suite properties."""
    root = ET.parse(path).getroot()
    cases = list(root.iter("testcase"))
    assert len(cases) == 2 and root.find("testsuite").find("properties") is None
    for tc in cases:
        assert tc.get("name").startswith(tc.get("classname").split("-")[0] + " r1: Task ")
        names = [p.get("name") for p in tc.iter("property")]
        assert "agentdrift" not in names  # the controller payload never reaches junit
        assert {
            "agentdrift.task_id",
            "agentdrift.behavior",
            "agentdrift.layer.safety",
            "agentdrift.failed_checks",
        } <= set(names)
        assert all(len(p.get("value")) < 500 for p in tc.iter("property"))


DECLARE = (
    'model_id = "acme-coder-2"\nmodel_options = {reasoning = "high"}\npermission_mode = "auto"\n'
    'sandbox = "workspace-write"\nbuilt_in_tools = ["edit", "shell"]\ntemperature = 0.2\nseed = 7\n'
    "max_output_tokens = 4096\nbudget_tokens_per_task = 100000\ntool_timeout_s = 60\n"
    'model_endpoint = "https://models.example.com/v1"\n'
)
INI = (
    "[pytest]\nagent_declare = agent.toml\n"
    "agent_accept_unobserved =\n    env_image_digest\n    server_revision\n    model_stamp\n    auto_update_state\n"
)


def lazy_on_g02(pytester: pytest.Pytester, count: int) -> list[str]:
    """`count` tasks and a home-made agent (declared, with the ini) that writes its notes everywhere,
    except on G02 when AGENT_MODE is 'lazy' (a behaviour that changed); its session arguments."""
    tasks(pytester.path, count)
    (pytester.path / "agent.toml").write_text(DECLARE)
    (pytester.path / "pytest.ini").write_text(INI)
    script = agent_script(
        pytester.path / "my_agent.py",
        "if os.environ.get('AGENT_MODE') != 'lazy' or os.environ['AGENTDRIFT_TASK_ID'] != 'G02':\n"
        "    Path('notes.txt').write_text('hi\\n')\nreport('complete')\n",
    )
    return ["--agent-cmd", f"{sys.executable} {script} {{task_file}}", "--agent-env", "AGENT_MODE"]


def test_new_critical_failure_fails_the_gate_naming_it(pytester, monkeypatch):
    """Same identity, different behaviour (what a silent server-side model change looks like)."""
    args = lazy_on_g02(pytester, 2)
    monkeypatch.setenv("AGENT_MODE", "good")
    legacy = ("--junitxml", "legacy.xml", "-o", "junit_family=legacy")  # its junit: the legacy family's properties
    assert run_pytest(pytester, *args, "--agent-record", "runs/base", *legacy).ret == 0
    assert_junit_properties_per_testcase(pytester.path / "legacy.xml")
    monkeypatch.setenv("AGENT_MODE", "lazy")
    result = run_pytest(pytester, *args, "--agent-baseline", "runs/base", "--agent-gate", "regression")
    assert result.ret == 1, result.stdout.str()
    # k = 1 on both sides cannot tell a flake from a change: blocked by the default policy, saying so
    assert last_line(result).startswith(
        "agentdrift: exit 1 — gate regression: new critical failure G02 notes-written (may be a flake: failed 1/1"
    )
    promote = run_pytest(pytester, *args, "--agent-baseline", "runs/base", "--agent-gate", "promote")
    assert promote.ret == 1 and last_line(promote).startswith("agentdrift: exit 1 — gate promote: dont_ship")
    # without a gate the failed item decides: test_exit_paths' sessions and test_exitpolicy hold that line


def test_refusal_prints_the_declare_file_and_ini_snippet_and_no_rebaseline(pytester):
    tasks(pytester.path, 1)
    script = agent_script(
        pytester.path / "my_agent.py",
        "Path('notes.txt').write_text('hi\\n'); report('complete', summary='wrote notes')\n",
    )
    cmd = f"{sys.executable} {script} {{task_file}}"
    result = record_then_compare(pytester, "--agent-cmd", cmd)
    assert result.ret == 6
    out = result.stdout.str()
    assert "BLOCK model_id: unobserved != unobserved" in out
    assert "to record a new baseline" not in out  # re-recording cannot make an unknown equal
    assert "--agent-declare agent-declare.toml" in out and '    model_id = "..."' in out
    # what a black box never shows (its envelope) is accepted by default; the model fields the harness
    # can see are never offered for acceptance, only explained
    assert "        envelope" not in out and "agent_accept_unobserved" not in out
    assert "observable by the harness, unobserved on both sides: model_id, model_endpoint, model_stamp" in out
    assert last_line(result).startswith("agentdrift: exit 6 — refused")
    # the declare file as printed, filled in, for a new baseline and the comparison; the agent reports the
    # model that answered (the protocol's usage event): the refusal goes away
    declared = re.findall(r'^    ([a-z_]+) = "\.\.\."$', out, re.M)
    assert declared == ["model_id", "model_endpoint"], declared
    (pytester.path / "agent-declare.toml").write_text(
        'model_id = "declared-model"\nmodel_endpoint = "https://models.example.com/v1"\n'
    )
    script.write_text(
        script.read_text() + "event('usage', model='declared-model-2026', input_tokens=1, output_tokens=1)\n"
    )
    both = ["--agent-cmd", cmd, "--agent-declare", "agent-declare.toml"]
    assert run_pytest(pytester, *both, "--agent-record", "runs/declared").ret == 0
    manifest = json.loads((pytester.path / "runs" / "declared" / "runtime-manifest.json").read_text())
    assert manifest["identity"]["model_stamp"] == "declared-model-2026"  # the model that answered, as reported
    cleared = run_pytest(pytester, *both, "--agent-baseline", "runs/declared", "--agent-gate", "regression")
    assert cleared.ret == 0 and "no regression detected" in last_line(cleared), cleared.stdout.str()


def second_venv_seeing_these_distributions(venv: Path) -> Path:
    """A new virtualenv whose interpreter sees the distributions this one sees: the site directories of
    this environment are added to it (--system-site-packages would add the base interpreter's instead,
    which differ when this suite itself runs in a virtualenv, as CI's does)."""
    import site
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    target = venv / Path(sysconfig.get_path("purelib")).relative_to(sysconfig.get_path("data"))
    lines = [f"import site; site.addsitedir({d!r})" for d in site.getsitepackages()]
    (target / "same-distributions.pth").write_text("\n".join(lines) + "\n")
    return venv


def test_generic_agent_with_a_declare_file_in_one_command_edit_refused_second_venv_comparable(pytester, tmp_path):
    tasks(pytester.path, 1)
    script = agent_script(
        pytester.path / "my_agent.py",
        "Path('notes.txt').write_text('hi\\n'); report('complete', summary='wrote notes')\n",
    )
    (pytester.path / "agent.toml").write_text(DECLARE)
    (pytester.path / "pytest.ini").write_text(INI)
    cmd = f"{sys.executable} {script} {{task_file}}"
    assert run_pytest(pytester, "--agent-cmd", cmd, "--agent-record", "runs/base").ret == 0
    manifest = json.loads((pytester.path / "runs" / "base" / "runtime-manifest.json").read_text())
    assert manifest["identity"]["model_id"] == "acme-coder-2"
    assert manifest["evidence"]["value_sources"]["model_id"]["source"] == "declared"
    ident_text = json.dumps(manifest["identity"])
    assert str(Path(sys.executable).parent) not in ident_text and str(pytester.path) not in ident_text

    # the same agent from a second virtualenv seeing the same distributions compares clean with its
    # baseline: an interpreter is its implementation and version, wherever it is installed (the same
    # agent from the same interpreter compares clean in test_a_package_bumped_in_the_agents_venv...)
    venv = second_venv_seeing_these_distributions(tmp_path / "venv2")
    other = run_pytest(
        pytester,
        "--agent-cmd",
        f"{venv / 'bin' / 'python'} {script} {{task_file}}",
        "--agent-baseline",
        "runs/base",
        "--agent-gate",
        "regression",
    )
    assert other.ret == 0, other.stdout.str()
    assert "no regression detected" in last_line(other)

    # editing the agent's own script is a new version of the agent, refused unless declared
    script.write_text(script.read_text() + "\n# tuned\n")
    edited = run_pytest(pytester, "--agent-cmd", cmd, "--agent-baseline", "runs/base")
    assert edited.ret == 6
    assert "BLOCK cli_version:" in edited.stdout.str() and "BLOCK agent_files_hash" not in edited.stdout.str()
    assert (
        run_pytest(pytester, "--agent-cmd", cmd, "--agent-baseline", "runs/base", "--agent-vary", "cli_version").ret
        == 0
    )
    # the other way out, as printed: record a new baseline with the command the refusal names, then compare
    printed = re.search(r"^if it is not, record a new baseline for this runtime: (.*)$", edited.stdout.str(), re.M)
    rebaseline = [a.replace("runs/<new-baseline>", "runs/rebased") for a in shlex.split(printed.group(1))]
    assert rebaseline[0] == "pytest" and run_pytest(pytester, *rebaseline[1:]).ret == 0
    assert run_pytest(pytester, "--agent-cmd", cmd, "--agent-baseline", "runs/rebased").ret == 0

    # a declaration that contradicts an observation is an error naming both
    (pytester.path / "bad.toml").write_text('model_id = "x"\n')
    bad = run_pytest(pytester, "--agent", "reference", "--agent-declare", "bad.toml", "--agent-record", "runs/x")
    assert bad.ret == 4
    assert (
        'model_id: declared value "x" contradicts the value observed by the harness: "not_applicable"'
        in bad.stderr.str()
    )


def install_pure_wheel(venv: Path, whl: Path) -> None:
    """What `pip install --force-reinstall` leaves of a pure-Python wheel in the venv's site directory:
    the distribution's earlier version (its package and .dist-info) removed, the wheel's files in place.
    Done here by hand: pip's own start costs seconds, and the harness reads only what is installed."""
    import shutil
    import sysconfig
    import zipfile

    site_dir = venv / Path(sysconfig.get_path("purelib")).relative_to(sysconfig.get_path("data"))
    with zipfile.ZipFile(whl) as zf:
        tops = {name.split("/", 1)[0] for name in zf.namelist()}
        dist = next(t for t in tops if t.endswith(".dist-info")).split("-", 1)[0]
        for old in [*site_dir.glob(f"{dist}-*.dist-info"), *(site_dir / t for t in tops)]:
            shutil.rmtree(old, ignore_errors=True)
        zf.extractall(site_dir)
    assert len(list(site_dir.glob(f"{dist}-*.dist-info"))) == 1


def test_a_package_bumped_in_the_agents_venv_is_a_new_version_refused_unless_varied(pytester, tmp_path):
    """`venv/bin/python agent.py`: the distributions of the venv are the agent's version. A package
    upgraded (or downgraded) in place is refused naming cli_version, with the versions; declared as
    the experiment's variable it compares."""
    tasks(pytester.path, 1)
    script = agent_script(pytester.path / "my_agent.py", "Path('notes.txt').write_text('hi\\n'); report('complete')\n")
    (pytester.path / "agent.toml").write_text(DECLARE)
    (pytester.path / "pytest.ini").write_text(INI)
    venv = tmp_path / "agent-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    install_pure_wheel(venv, tiny_agent_wheel(tmp_path, "0.24.3"))
    cmd = ["--agent-cmd", f"{venv / 'bin' / 'python'} {script} {{task_file}}"]
    assert run_pytest(pytester, *cmd, "--agent-record", "runs/base").ret == 0
    manifest = json.loads((pytester.path / "runs" / "base" / "runtime-manifest.json").read_text())
    assert manifest["identity"]["cli_version"]["distributions"]["tinyagent"] == "0.24.3"
    base = ["--agent-baseline", "runs/base", "--agent-gate", "regression"]
    same = run_pytest(pytester, *cmd, *base)
    assert same.ret == 0 and "no regression detected" in last_line(same), same.stdout.str()
    install_pure_wheel(venv, tiny_agent_wheel(tmp_path, "0.24.4"))
    bumped = run_pytest(pytester, *cmd, *base)
    out = bumped.stdout.str()
    assert bumped.ret == 6, out
    assert "BLOCK cli_version:" in out and "0.24.3" in out and "0.24.4" in out
    assert last_line(bumped).startswith("agentdrift: exit 6")
    varied = run_pytest(pytester, *cmd, *base, "--agent-vary", "cli_version")
    assert varied.ret == 0, varied.stdout.str()


INI_WITHOUT_MODEL = (
    "[pytest]\nagent_declare = agent.toml\nagent_accept_unobserved =\n    env_image_digest\n    auto_update_state\n"
)


def test_generic_agent_without_a_model_stamp_is_refused_before_it_runs_and_no_word_hides_it(pytester):
    """A generic agent compared with itself from a declare file: its baseline never said which model
    answered, so the refusal comes before any run and names how the harness or the agent could see it;
    no accepting form is offered (the harness's model gateway can see that field) and the `unobservable`
    group does not cover it; accepted by name it clears. (An agent that reports the model, usage events,
    is comparable without accepting anything: test_refusal_prints_the_declare_file_and_ini_snippet...)"""
    tasks(pytester.path, 1)
    (pytester.path / "agent.toml").write_text(DECLARE)
    (pytester.path / "pytest.ini").write_text(INI_WITHOUT_MODEL)
    silent = agent_script(pytester.path / "silent.py", "Path('notes.txt').write_text('hi\\n'); report('complete')\n")
    cmd = ["--agent-cmd", f"{sys.executable} {silent} {{task_file}}"]
    assert run_pytest(pytester, *cmd, "--agent-record", "runs/base").ret == 0
    refused = run_pytest(pytester, *cmd, "--agent-baseline", "runs/base", "--agent-gate", "regression")
    out = refused.stdout.str()
    assert refused.ret == 6, out
    assert "agentdrift time:" not in out and "passed" not in out  # decided before any run
    assert "BLOCK model_stamp: unobserved != unobserved" in out
    assert "no identity field differs; 1 compared field(s) unobserved on both sides cannot be shown equal" in out
    assert "An agent may also report the model that answered as `model` on the `usage` events" in out
    assert last_line(refused).startswith("agentdrift: exit 6 — refused")
    # the harness could see the model that answered (its model gateway): no form accepting it is offered,
    # and no group word accepts it either
    assert "agent_accept_unobserved" not in out and "--agent-accept-unobserved" not in out
    base = ["--agent-baseline", "runs/base", "--agent-gate", "regression"]
    grouped = run_pytest(pytester, *cmd, *base, "--agent-accept-unobserved", "unobservable")
    assert grouped.ret == 6 and "BLOCK model_stamp" in grouped.stdout.str()
    # the operator may still accept it by name, knowingly
    named = run_pytest(pytester, *cmd, *base, "--agent-accept-unobserved", "model_stamp")
    assert named.ret == 0 and "no regression detected" in last_line(named), named.stdout.str()
    # the protocol: an agent that names the model that answered (usage events) needs no acceptance; its
    # model_stamp recorded and compared clean, nothing accepted: the end of
    # test_refusal_prints_the_declare_file_and_ini_snippet_and_no_rebaseline


def test_describe_command_is_recorded_as_agent_reported(pytester):
    tasks(pytester.path, 1)
    script = agent_script(
        pytester.path / "my_agent.py",
        "if '--describe' in sys.argv:\n    print(json.dumps({'model_id': 'acme-7', 'temperature': 0}))\n"
        "    sys.exit(0)\nPath('notes.txt').write_text('hi\\n'); report('complete')\n",
    )
    result = run_pytest(
        pytester,
        "--agent-cmd",
        f"{sys.executable} {script} {{task_file}}",
        "--agent-describe-cmd",
        f"{sys.executable} {script} --describe",
        "--agent-record",
        "runs/r",
    )
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    manifest = json.loads((pytester.path / "runs" / "r" / "runtime-manifest.json").read_text())
    assert manifest["identity"]["model_id"] == "acme-7" and manifest["identity"]["temperature"] == 0
    assert manifest["evidence"]["value_sources"]["temperature"]["source"] == "agent_reported"


def test_accept_groups_expand_visibly_and_the_cli_reads_the_same_ini(pytester):
    tasks(pytester.path, 1)
    script = agent_script(pytester.path / "my_agent.py", "Path('notes.txt').write_text('hi\\n'); report('complete')\n")
    cmd = f"{sys.executable} {script} {{task_file}}"
    # this agent calls no model: its model fields are accepted by name, beside the group
    (pytester.path / "pytest.ini").write_text(
        "[pytest]\nagent_accept_unobserved =\n    env_image_digest\n    unobservable\n"
        "    model_id\n    model_endpoint\n    model_stamp\n"
    )
    assert run_pytest(pytester, "--agent-cmd", cmd, "--agent-record", "runs/a").ret == 0
    result = run_pytest(
        pytester,
        "--agent-cmd",
        cmd,
        "--agent-baseline",
        "runs/a",
        "--agent-record",
        "runs/b",
        "--agent-accept-unobserved",
        "envelope",
    )
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    (group,) = [ln for ln in out.splitlines() if ln.startswith("accept      unobservable = ")]
    assert group.startswith("accept      unobservable = server_revision, model_options")
    assert "model_stamp" not in group and "model_id" not in group  # the harness can see those
    assert "accept      envelope = temperature, seed, max_output_tokens" in out
    diff = json.loads((pytester.path / "runs" / "b" / "comparison" / "manifest-diff.json").read_text())
    assert "model_options" in diff["accepted_unobserved"]["groups"]["unobservable"]
    assert "model_id" not in diff["accepted_unobserved"]["groups"]["unobservable"]
    # the CLI finds the same ini (pytest's rules) and adds up the same way
    cli = subprocess.run(
        [sys.executable, "-m", "pytest_agentdrift", "compare", "runs/a", "runs/b", "--gate", "regression"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert (
        cli.stdout.strip().splitlines()[-1].startswith("agentdrift: exit 0 — gate regression: no regression detected")
    )
    cleared = subprocess.run(
        [sys.executable, "-m", "pytest_agentdrift", "diff", "runs/a", "runs/b", "--accept-unobserved", "none"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
    )
    assert cleared.returncode == 6 and "BLOCK model_id" in cleared.stdout


def test_a_gate_without_a_baseline_is_a_usage_error(pytester):
    tasks(pytester.path, 1)
    result = run_pytest(pytester, "--agent", "reference", "--agent-gate", "regression")
    assert result.ret == 4, result.stdout.str()
    assert "--agent-gate regression needs --agent-baseline DIR" in result.stdout.str() + result.stderr.str()
    assert "G01" not in result.stdout.str()  # refused before anything ran
