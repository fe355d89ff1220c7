"""The plugin end to end, as a user runs it (pytester, one subprocess per session)."""

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import last_line, pytest_argv, run_pytest

from pytest_agentdrift.testing import agent_cmd, agent_script, load_results, make_task, normalise_results

pytestmark = pytest.mark.slow  # every test here starts pytest sessions with agents

PLUGIN_ARGS = [[], ["-p", "no:xdist"], ["-n", "0"], ["-n", "2"]]


def xdist_group_of(item):
    # the tests that read a shared record run on one worker, which records it once
    if "ex02_recorded" in item.fixturenames:
        return "plugin-ex02-record"
    return "plugin-xdist-records" if "xdist_records" in item.fixturenames else None


FIXTURES = Path(__file__).parents[2] / "fixtures"


def copy_task(project: pytest.Pytester | Path, name: str) -> None:
    root = project.path if isinstance(project, pytest.Pytester) else project
    shutil.copytree(FIXTURES / name, root / name)


@pytest.fixture(scope="module")
def ex02_recorded(tmp_path_factory) -> Path:
    """EX02 and its record by the reference agent (runs/base), made once for the tests that compare
    against it or record over it; each copies them into its own directory (a record travels with its
    tasks, as a CI artifact does)."""
    root = tmp_path_factory.mktemp("ex02-recorded")
    shutil.copytree(FIXTURES / "EX02-explain-readonly", root / "EX02-explain-readonly")
    proc = run_pytest(root, "--agent", "reference", "--agent-record", "runs/base", home=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return root


@pytest.fixture(scope="module")
def xdist_records(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """EX01 and EX02 recorded by the reference agent, k = 2, once per way of running xdist (plain,
    -p no:xdist, -n 0, -n 2), all in one project directory. Name -> (the session, its record)."""
    root = tmp_path_factory.mktemp("xdist-records")
    copy_task(root, "EX01-fix-discount")
    copy_task(root, "EX02-explain-readonly")
    out = {}
    for name, extra in zip(["plain", "no-xdist", "n0", "n2"], PLUGIN_ARGS, strict=True):
        record = ("--agent-record", f"runs/{name}")
        proc = run_pytest(root, "--agent", "reference", "--agent-k", "2", *record, *extra, home=True)
        out[name] = (proc, root / "runs" / name)
    return out


def with_ex02_baseline(pytester, recorded: Path) -> None:
    """EX02 and its recorded baseline runs/base, in this test's directory."""
    shutil.copytree(recorded, pytester.path, dirs_exist_ok=True)


def test_help_lists_the_options(pytester):
    result = run_pytest(pytester, "--help")
    assert result.ret == 0
    out = result.stdout.str()
    assert "coding-agent drift (pytest-agentdrift)" in out
    assert "--agent=AGENT" in out
    for flag in (
        "--agent-cmd",
        "--agent-suite",
        "--agent-k",
        "--agent-record",
        "--agent-baseline",
        "--agent-vary",
        "--agent-timeout",
        "--agent-fail-on",
        "--agent-gate",
        "--agent-isolation",
    ):
        assert flag in out, flag
    assert "agent_k (string)" in out  # ini twins


def test_markers_are_described(pytester):
    result = run_pytest(pytester, "--markers")
    out = result.stdout.str()
    assert "@pytest.mark.agent_task(id)" in out
    assert "@pytest.mark.critical" in out
    for tid in [f"T{i:02d}" for i in range(1, 13)]:
        assert f"@pytest.mark.{tid}: bundled agent task {tid} (pytest-agentdrift)" in out


def test_records_the_same_results_with_and_without_xdist(xdist_records):
    recorded = {}
    for name, (proc, record) in xdist_records.items():
        assert proc.returncode == 0, proc.stdout
        lines = pytest.LineMatcher(proc.stdout.splitlines())
        lines.fnmatch_lines(["*EX01 * 2/2 *Fix a discount bug*", "*EX02 * 2/2 *Explain a call path*", "*4 passed*"])
        results = load_results(record)
        assert results["complete"] is True
        assert sorted(results["tasks"]) == ["EX01", "EX02"]
        assert [r["rep"] for r in results["tasks"]["EX01"]["runs"]] == [1, 2]
        assert results["tasks"]["EX01"]["runs"][0]["evidence"]["changed"]["modified"] == ["shop/pricing.py"]
        recorded[name] = results
    assert sorted(recorded["n2"]["workers"]) == ["gw0", "gw1"]
    assert recorded["plain"]["workers"] == {}
    normalised = {name: normalise_results(r) for name, r in recorded.items()}
    assert normalised["no-xdist"] == normalised["plain"]
    assert normalised["n0"] == normalised["plain"]
    assert normalised["n2"] == normalised["plain"]


def test_raw_artifacts_are_recorded(xdist_records):
    proc, run_dir = xdist_records["plain"]
    assert proc.returncode == 0
    raw = run_dir / "raw" / "EX01" / "r1"
    assert sorted(p.name for p in raw.iterdir()) == [
        "argv.json",
        "checks.json",
        "diff.patch",
        "events.jsonl",
        "report.json",
        "run.json",
        "stderr.txt",
        "stdout.txt",
        "tree.json",
    ]
    assert "+    return total - total * percent // 100" in (raw / "diff.patch").read_text()
    assert json.loads((raw / "report.json").read_text())["status"] == "complete"
    for name in ("runtime-manifest.json", "instruction-bundle.json", "source-manifest.json", "report.md"):
        assert (run_dir / name).is_file(), name
    assert not (run_dir / "INCOMPLETE").exists()
    assert "### EX01: Fix a discount bug (example)" in (run_dir / "report.md").read_text()


def test_repetition_ids_and_selection(pytester):
    copy_task(pytester, "EX01-fix-discount")
    copy_task(pytester, "EX02-explain-readonly")
    result = run_pytest(pytester, "--agent", "reference", "--agent-k", "3", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "EX01-fix-discount::r1",
            "EX01-fix-discount::r2",
            "EX01-fix-discount::r3",
            "EX02-explain-readonly::r1",
            "EX02-explain-readonly::r2",
            "EX02-explain-readonly::r3",
        ]
    )
    result = run_pytest(pytester, "--agent", "reference", "--collect-only", "-q", "-k", "EX02")
    listed = [ln for ln in result.stdout.lines if "::r" in ln]
    assert listed == ["EX02-explain-readonly::r1"]
    result = run_pytest(pytester, "--agent", "reference", "--collect-only", "-q", "-m", "EX01", "--strict-markers")
    out = result.stdout.str()
    assert "EX01-fix-discount::r1" in out and "EX02-explain-readonly::r1" not in out
    assert result.ret == 0


def test_repo_python_files_are_never_imported(pytester):
    make_task(
        pytester.path,
        "I01",
        repo={
            "test_boom.py": "raise SystemExit('imported!')\n",
            "conftest.py": "raise SystemExit('conftest imported!')\n",
        },
    )
    result = run_pytest(pytester, "--agent-cmd", f"{sys.executable} -c pass")
    assert result.ret == 0, result.stdout.str()
    assert "imported!" not in result.stdout.str()


def test_no_agent_selected_skips_with_reason(pytester):
    copy_task(pytester, "EX01-fix-discount")
    result = run_pytest(pytester, "-rs")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*no agent selected: pass --agent NAME or --agent-cmd CMD*"])


def test_failure_is_domain_text_not_traceback(pytester):
    copy_task(pytester, "EX01-fix-discount")
    result = run_pytest(pytester, "--agent-cmd", f"{sys.executable} -c pass")
    assert result.ret == 1
    out = result.stdout.str()
    assert "Traceback" not in out
    for line in (
        "task EX01 (Fix a discount bug (example)), repetition 1: FAILED",
        "  CRITICAL scope/only-allowed-paths [paths]: nothing changed matching: shop/pricing.py",
        "  correctness/focused-tests-pass [pytest]: 2 of 4 frozen test(s) did not pass",
        "critical failures:",
        "  EX01 r1: only-allowed-paths",
    ):
        assert line in out, line


def test_fail_on_critical_only(pytester):
    d = make_task(
        pytester.path,
        "C01",
        checks=[
            {"name": "soft", "kind": "report_status", "layer": "verification", "allowed": ["complete"]},
            {"name": "hard", "kind": "unchanged", "layer": "safety", "critical": True},
        ],
    )
    del d
    cmd = f"{sys.executable} -c pass"
    assert run_pytest(pytester, "--agent-cmd", cmd).ret == 1
    result = run_pytest(pytester, "--agent-cmd", cmd, "--agent-fail-on", "critical", "--agent-record", "runs/c")
    assert result.ret == 0
    assert load_results(pytester.path / "runs" / "c")["tasks"]["C01"]["runs"][0]["failed_checks"] == ["soft"]


def test_builtin_suite_runs_from_any_directory(pytester):
    result = run_pytest(pytester, "--agent", "reference", "--agent-suite", "builtin", "--collect-only", "-q")
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    for i in range(1, 13):
        assert f"T{i:02d}-" in out
    assert "12 tests collected" in out


def test_refuses_to_record_over_a_complete_run(pytester, ex02_recorded):
    with_ex02_baseline(pytester, ex02_recorded)
    results = (pytester.path / "runs" / "base" / "results.json").read_bytes()
    result = run_pytest(pytester, "--agent", "reference", "--agent-record", "runs/base")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*runs/base: already holds a complete run; recorded runs are never rewritten*"])
    assert (pytester.path / "runs" / "base" / "results.json").read_bytes() == results


def test_baseline_lifecycle(pytester, ex02_recorded):
    """record -> compare (comparable) -> change a task -> refused (6) -> re-record -> comparable."""
    with_ex02_baseline(pytester, ex02_recorded)
    # a rollback state claimed without evidence of a tested restoration (test_rollback_state_needs_evidence)
    claimed = ("--agent-rollback-state", "verified")
    result = run_pytest(
        pytester, "--agent", "reference", "--agent-baseline", "runs/base", "--agent-record", "runs/cand", *claimed
    )
    assert result.ret == 0, result.stdout.str()
    assert (pytester.path / "runs" / "cand" / "comparison" / "decision.json").is_file()
    decision = json.loads((pytester.path / "runs" / "cand" / "comparison" / "decision.json").read_text())
    assert decision["status"] == "no_material_evidence"
    assert decision["rollback_state"] == "unknown"  # a claim without evidence

    task_md = pytester.path / "EX02-explain-readonly" / "task.md"
    task_md.write_text(task_md.read_text() + "Also be brief.\n")
    result = run_pytest(
        pytester,
        "--agent",
        "reference",
        "--agent-baseline",
        "runs/base",
        "--agent-record",
        "runs/cand2",
        "--junitxml",
        "runs/junit.xml",
    )
    assert result.ret == 6
    out = result.stdout.str()
    assert "BLOCK task_set_id:" in out
    assert "if it is not, record a new baseline for this runtime: pytest" in out
    closing = [ln for ln in out.splitlines() if ln.startswith("agentdrift: exit 6")][-1]
    # nothing ran, yet the refusal reports: refusal.json and report.md (no results.json), and JUnit
    cand2 = pytester.path / "runs" / "cand2"
    assert sorted(p.name for p in cand2.iterdir()) == ["refusal.json", "report.md"]
    refusal = json.loads((cand2 / "refusal.json").read_text())
    assert refusal["exit_status"]["line"] == closing
    blocked = {row["field"]: row for row in refusal["blocked"]}
    assert "task_set_id" in blocked and blocked["task_set_id"]["baseline"] != blocked["task_set_id"]["candidate"]
    assert (cand2 / "report.md").read_text().splitlines()[2] == f"**{closing}**"
    suite = ET.parse(pytester.path / "runs" / "junit.xml").getroot().find("testsuite")
    assert suite.get("failures") == "1"
    failure = suite.find("testcase").find("failure")
    assert "blocked fields: " in failure.text and "task_set_id" in failure.text.split("blocked fields: ")[1]
    summary = subprocess.run(
        [sys.executable, "-m", "pytest_agentdrift", "summary", str(cand2)], capture_output=True, text=True
    )
    assert summary.returncode == 0, summary.stderr
    assert f"**{closing}**" in summary.stdout and "`task_set_id`" in summary.stdout

    assert run_pytest(pytester, "--agent", "reference", "--agent-record", "runs/base2").ret == 0
    assert run_pytest(pytester, "--agent", "reference", "--agent-baseline", "runs/base2").ret == 0


def test_refusal_under_xdist_starts_no_workers(pytester, ex02_recorded):
    with_ex02_baseline(pytester, ex02_recorded)
    result = run_pytest(pytester, "--agent", "reference-drifted", "--agent-baseline", "runs/base", "-n", "2")
    assert result.ret == 6
    out = result.stdout.str() + result.stderr.str()
    assert "BLOCK cli_version: reference-1.0.0 != reference-1.1.0-drifted" in out
    # no worker was started: no xdist banner, no `gw0` node (a path such as .../popen-gw0/... is the test's own)
    assert "bringing up nodes" not in out and not re.search(r"(?<![\w-])gw\d+\b", out)
    # the refusal is said once, as the closing line, without pytest's exit banner or traceback
    assert "!!!" not in out and "_pytest.outcomes.Exit" not in out
    assert out.count("agentdrift: exit 6") == 1
    assert last_line(result).startswith("agentdrift: exit 6 — refused: runs are not comparable")


def test_unknown_vary_field_is_a_usage_error(pytester, ex02_recorded):
    with_ex02_baseline(pytester, ex02_recorded)
    result = run_pytest(pytester, "--agent", "reference", "--agent-baseline", "runs/base", "--agent-vary", "colour")
    assert result.ret == 4
    assert "unknown field 'colour'" in result.stderr.str()


def test_worker_crash_leaves_an_incomplete_record(pytester):
    make_task(pytester.path, "K01")
    script = agent_script(pytester.path / "agent.py", "pass\n")
    # a conftest that kills the worker process while K01 runs
    pytester.makeconftest(
        """
        import os
        def pytest_runtest_call(item):
            if "K01" in item.nodeid:
                os._exit(1)
        """
    )
    make_task(pytester.path, "K02")
    result = run_pytest(pytester, "--agent-cmd", agent_cmd(script), "--agent-record", "runs/r", "-n", "2")
    assert result.ret != 0
    results = load_results(pytester.path / "runs" / "r")
    assert results["complete"] is False
    assert any("never reported" in r for r in results["incomplete_reasons"])
    assert any(w["error"] for w in results["workers"].values()) or any(
        "crashed" in r for r in results["incomplete_reasons"]
    )
    assert (pytester.path / "runs" / "r" / "INCOMPLETE").exists()


def test_pytest_function_checks(pytester):
    d = make_task(pytester.path, "F01", checks=[], solution={"notes.txt": "hello\n"}, allowed=["notes.txt"])
    (d / "test_checks.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.critical\n@pytest.mark.agent_layer('scope')\n"
        "def test_only_notes(agent_run):\n    assert agent_run.changed_paths == ['notes.txt']\n\n"
        "def test_report(agent_run):\n    assert agent_run.report['status'] == 'complete'\n"
    )
    assert run_pytest(pytester, "--agent", "reference", "--agent-record", "runs/ok").ret == 0
    checks = load_results(pytester.path / "runs" / "ok")["tasks"]["F01"]["runs"][0]["checks"]
    assert [(c["name"], c["layer"], c["critical"], c["passed"]) for c in checks] == [
        # a task of pytest functions still gets the default safety checks
        ("default-tamper", "verification", False, True),
        ("default-scope", "scope", False, True),
        ("default-effects", "safety", False, True),
        ("test_only_notes", "scope", True, True),
        ("test_report", "correctness", False, True),
    ]
    result = run_pytest(pytester, "--agent-cmd", f"{sys.executable} -c pass", "--agent-record", "runs/bad")
    assert result.ret == 1
    r = load_results(pytester.path / "runs" / "bad")["tasks"]["F01"]["runs"][0]
    assert r["critical_failed"] == ["test_only_notes"]


@pytest.mark.plugin_autoload
@pytest.mark.parametrize("variant", ["autoload-off", "pytest-plugins-env", "no-xdist"])
def test_loading_variants(pytester, variant):
    copy_task(pytester, "EX02-explain-readonly")
    env = dict(os.environ)
    args = ["--agent", "reference"]
    if variant == "autoload-off":
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        args = ["-p", "pytest_agentdrift.plugin", *args]
    elif variant == "pytest-plugins-env":
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        env["PYTEST_PLUGINS"] = "pytest_agentdrift.plugin,xdist.plugin"
        args = [*args, "-n", "2"]
    elif variant == "no-xdist":
        args = ["-p", "no:xdist", *args]
    proc = run_pytest(pytester.path, *args, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


def test_plugin_is_inert_without_options(pytester):
    pytester.makepyfile("def test_plain():\n    assert True\n")
    result = run_pytest(pytester, "-v")
    assert result.ret == 0
    out = result.stdout.str()
    assert "agentdrift:" not in out  # no header line
    assert "agentdrift ===" not in out  # no summary section


def test_subset_selected_with_k_is_compared_on_that_subset(pytester, xdist_records):
    # the baseline: EX01 and EX02 recorded plainly (k = 2), copied here with their tasks
    root = xdist_records["plain"][1].parents[1]
    for name in ("EX01-fix-discount", "EX02-explain-readonly"):
        shutil.copytree(root / name, pytester.path / name)
    shutil.copytree(xdist_records["plain"][1], pytester.path / "runs" / "base")
    result = run_pytest(
        pytester,
        *("--agent", "reference", "--agent-k", "2", "--agent-baseline", "runs/base"),
        *("-k", "EX02", "--agent-record", "runs/sub"),
    )
    assert result.ret == 0, result.stdout.str()
    assert "note  compared on the 1 selected task(s) of the baseline's 2" in result.stdout.str()
    comparison = json.loads((pytester.path / "runs" / "sub" / "comparison" / "comparison.json").read_text())
    assert comparison["comparable"] is True
    assert comparison["paired"]["tied"] == ["EX02"]


def test_rollback_state_needs_evidence(pytester, ex02_recorded):
    # the same claim without its evidence leaves the state unknown: test_baseline_lifecycle's first session
    with_ex02_baseline(pytester, ex02_recorded)
    verified = ("--agent", "reference", "--agent-baseline", "runs/base", "--agent-rollback-state", "verified")
    (pytester.path / "restore.json").write_text(
        json.dumps({"artifact": "agent-1.0.0.tgz sha256:abc", "restoration": "restored and re-ran EX02 in the fixture"})
    )
    assert (
        run_pytest(pytester, *verified, "--agent-record", "runs/b", "--agent-rollback-evidence", "restore.json").ret
        == 0
    )
    decision = json.loads((pytester.path / "runs" / "b" / "comparison" / "decision.json").read_text())
    assert decision["rollback_state"] == "verified"


def test_agent_manifest_fixture_on_workers(pytester):
    copy_task(pytester, "EX02-explain-readonly")
    pytester.makepyfile(
        test_manifest_seen="""
        def test_manifest(agent_manifest):
            assert agent_manifest["runtime_id"].startswith("sha256:")
            assert agent_manifest["identity"]["cli_version"] == "reference-1.0.0"
    """
    )
    for extra in ([], ["-n", "2"]):
        result = run_pytest(pytester, "--agent", "reference", *extra)
        assert result.ret == 0, result.stdout.str()
        result.stdout.fnmatch_lines(["*2 passed*"])


def test_hooks_extend_manifest_relax_comparison_and_touch_report(pytester):
    copy_task(pytester, "EX02-explain-readonly")
    pytester.makeconftest("""
        import os

        def pytest_agentdrift_update_manifest(config, manifest):
            manifest["identity"]["image_label"] = os.environ.get("IMAGE_LABEL", "unobserved")

        def pytest_agentdrift_modify_report(config, results):
            results["settings"]["ticket"] = "OPS-42"
    """)
    result = run_pytest(pytester, "--agent", "reference", "--agent-record", "runs/base")
    assert result.ret == 0
    manifest = json.loads((pytester.path / "runs" / "base" / "runtime-manifest.json").read_text())
    assert manifest["identity"]["image_label"] == "unobserved"
    from pytest_agentdrift.manifest.capture import runtime_id

    assert manifest["runtime_id"] == runtime_id(manifest["identity"])  # recomputed after the hook
    assert load_results(pytester.path / "runs" / "base")["settings"]["ticket"] == "OPS-42"


def test_compare_stamps_hook_can_relax_the_comparison(pytester, ex02_recorded):
    with_ex02_baseline(pytester, ex02_recorded)
    # without the hook this comparison is refused (6, BLOCK cli_version): test_refusal_under_xdist_starts_no_workers
    pytester.makeconftest("""
        from pytest_agentdrift.manifest.identity import compare_manifests

        def pytest_agentdrift_compare_stamps(config, baseline, current, vary):
            # this team treats the reference agent's profile as the experiment's variable
            return compare_manifests(baseline, current, [*vary, "cli_version", "command", "agent"],
                                     accept_unobserved=["env_image_digest", "server_revision"])
    """)
    result = run_pytest(pytester, "--agent", "reference-drifted", "--agent-baseline", "runs/base")
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    assert "paired      won 0  lost 0  tied 1" in out
    assert "status      eligible_for_review" in out  # a client change that kept every outcome


def test_an_interrupted_session_is_recorded_incomplete(tmp_path):
    import signal
    import time

    make_task(tmp_path / "tasks", "I1")
    make_task(tmp_path / "tasks", "I2", timeout_s=60)
    script = agent_script(
        tmp_path / "agent.py",
        """
        import time
        if os.environ["AGENTDRIFT_TASK_ID"] == "I2":
            Path(PIDFILE).write_text(str(os.getpid()))
            time.sleep(60)
        report("complete")
    """.replace("PIDFILE", repr(str(tmp_path / "agent.pid"))),
    )
    # unisolated on purpose: no PID namespace would end the agent for us
    proc = subprocess.Popen(
        pytest_argv(
            "-q", "tasks", "--agent-cmd", agent_cmd(script), "--agent-record", "runs/r", "--agent-isolation", "none"
        ),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # the session hears the SIGINT below even when this suite runs as a background job, whose
        # children inherit SIGINT ignored (Python then installs no KeyboardInterrupt handler)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "agent.pid").exists():  # I1 is done, I2's agent sleeps
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out
    results = load_results(tmp_path / "runs" / "r")
    assert results["complete"] is False
    assert any(r.startswith("session interrupted: KeyboardInterrupt") for r in results["incomplete_reasons"]), results[
        "incomplete_reasons"
    ]
    assert sorted(results["tasks"]) == ["I1"]
    assert (tmp_path / "runs" / "r" / "INCOMPLETE").exists()
    agent_pid = int((tmp_path / "agent.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(agent_pid, 0)  # the interrupted agent did not outlive the session
