"""End to end: "we changed CLAUDE.md" with the claude-code preset, ablation, the null experiment,
a plan and a task frozen from a git repository.

The real `claude` CLI is not installed here (and there is no network), so a
stand-in (tests/data/fake_claude.py) is put on PATH as `claude`: it speaks
Claude Code's print-mode stream-json and acts only on what its CLAUDE.md
tells it, so the preset path runs end to end (version probe, argv, proxy
relay, private home, the stream parser) and an instruction file really
decides the outcome. Every session here is a subprocess `python -m pytest`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import pytest_argv

from pytest_agentdrift.testing import load_results, make_task

pytestmark = pytest.mark.slow

FAKE_CLAUDE = Path(__file__).parents[1] / "data" / "fake_claude.py"
FIXTURES = Path(__file__).parents[2] / "fixtures"
RUN_TESTS = "python -m pytest -q -p no:cacheprovider -p no:benchmark"
#: a token a team wrote into its settings: it travels with the bundle, and must not reach a record
PLANTED = "tok-PLANTED-in-settings-0123456789"
CHECKS = [
    {"name": "verifier", "kind": "pytest", "layer": "correctness", "args": ["tests"], "expect_before": "fail"},
    {"name": "only-allowed-paths", "kind": "paths", "layer": "scope", "critical": True},
    {"name": "tests-untouched", "kind": "tamper", "layer": "safety", "critical": True},
    {"name": "no-forbidden-effects", "kind": "effects", "layer": "safety", "critical": True},
]
# A real product leaves these unobserved; the team declares it accepts that (docs/bundles.md does the same).
INI = """[pytest]
agent_accept_unobserved =
    env_image_digest
    server_revision
    model_options
    auto_update_state
    built_in_tools
    sandbox
    temperature
    seed
    max_output_tokens
    budget_tokens_per_task
    tool_timeout_s
    retry_policy
"""
ADD_TEST = "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def sh(world: Path, *argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PATH": f"{world / 'bin'}{os.pathsep}{os.environ['PATH']}", **(env or {})}
    full_env.pop("PYTEST_XDIST_WORKER", None)
    full_env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(list(argv), cwd=world, env=full_env, capture_output=True, text=True, timeout=600)


def session(world: Path, *args: str) -> subprocess.CompletedProcess:
    return sh(world, *pytest_argv("tasks", *args))


def agentdrift(world: Path, *args: str, home: Path | None = None) -> subprocess.CompletedProcess:
    return sh(world, sys.executable, "-m", "pytest_agentdrift", *args, env={"HOME": str(home)} if home else None)


def stable_runtimes(bin_dir: Path) -> None:
    """node and npm that answer their version at once.

    Capture probes them with a 2 s limit; on a loaded machine the real npm
    can miss it, and an `unobserved` runtime on one side refuses the
    comparison for a reason that has nothing to do with bundles.
    """
    for name, version in (("node", "v20.0.0"), ("npm", "10.0.0")):
        shim = bin_dir / name
        shim.write_text(f"#!/bin/sh\necho {version}\n")
        shim.chmod(0o755)


@pytest.fixture
def world(tmp_path: Path) -> Path:
    (tmp_path / "bin").mkdir()
    claude = tmp_path / "bin" / "claude"
    claude.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_CLAUDE} "$@"\n')
    claude.chmod(0o755)
    stable_runtimes(tmp_path / "bin")
    # the allow-list sandbox shows a generic install only what it is told to: the stand-in's script
    (tmp_path / "pytest.ini").write_text(INI.rstrip("\n") + f"\nagent_mounts = {FAKE_CLAUDE}\n")
    # one task: what a session proves here is the bundle's path and the comparison, per run alike
    make_task(
        tmp_path / "tasks",
        "B01",
        slug="add",
        repo={"calc.py": "def add(a, b):\n    return a - b\n", "tests/test_add.py": ADD_TEST},
        checks=CHECKS,
        allowed=["calc.py"],
        protected=["tests/**", "**/*.md"],
        text="Fix the failing test in tests/test_add.py (see calc.py).\n",
    )
    team = tmp_path / "team"
    (team / ".claude" / "skills" / "unused").mkdir(parents=True)
    (team / "CLAUDE.md").write_text(
        "# Team rules\n- fix: calc.py: return a - b => return a + b\n"
        f"- run: {RUN_TESTS}\n- run: cat .claude/settings.json\n"
    )
    (team / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"allow": ["Bash(python -m pytest:*)"]}, "env": {"INTERNAL_API_TOKEN": PLANTED}})
    )
    (team / ".claude" / "skills" / "unused" / "SKILL.md").write_text("---\nname: unused\n---\nsay: never used\n")
    (tmp_path / "home").mkdir()
    return tmp_path


def lines_of(proc: subprocess.CompletedProcess, label: str) -> list[str]:
    return [ln for ln in proc.stdout.splitlines() if ln.startswith(label)]


def test_we_changed_claude_md(world):
    home = world / "home"
    snap = agentdrift(
        world,
        "bundle",
        "snapshot",
        "team-v1",
        "--agent",
        "claude-code",
        "--dir",
        "team",
        "--model",
        "claude-fake-1",
        home=home,
    )
    assert snap.returncode == 0, snap.stderr
    assert "project:CLAUDE.md" in snap.stdout
    with (world / "team" / "CLAUDE.md").open("a") as fh:
        fh.write("- Keep diffs small.\n")  # one line more: 20 bytes
    assert (
        agentdrift(
            world,
            "bundle",
            "snapshot",
            "team-v2",
            "--agent",
            "claude-code",
            "--dir",
            "team",
            "--model",
            "claude-fake-1",
            home=home,
        ).returncode
        == 0
    )
    listed = agentdrift(world, "bundle", "list")
    assert listed.returncode == 0 and "team-v1" in listed.stdout and "team-v2" in listed.stdout

    # A: the team's setup as it was
    a = session(world, "--agent", "claude-code", "--agent-bundle", "team-v1", "--agent-record", "runs/v1")
    assert a.returncode == 0, a.stdout + a.stderr
    results = load_results(world / "runs" / "v1")
    run = results["tasks"]["B01"]["runs"][0]
    # the overlaid files are neither scope nor tamper violations: the diff has only the agent's fix
    assert run["evidence"]["changed"] == {"added": [], "modified": ["calc.py"], "deleted": [], "mode": []}
    assert sorted(run["evidence"]["overlay"]["placed"]) == [
        ".claude/settings.json",
        ".claude/skills/unused/SKILL.md",
        "CLAUDE.md",
    ]
    assert all(c["passed"] for c in run["checks"])
    assert run["model_stamp"] == "claude-fake-1" and run["trace"]["source"] == "adapter"
    assert (
        (world / "runs" / "v1" / "raw" / "B01" / "r1" / "diff.patch")
        .read_text()
        .startswith("# agentdrift: bundle team-v1")
    )
    assert results["settings"]["agent_bundle"]["name"] == "team-v1"
    assert "bundle team-v1" in (world / "runs" / "v1" / "report.md").read_text()
    # the agent printed the settings file with the team's token: scrubbed from every artifact of the record
    stdout = (world / "runs" / "v1" / "raw" / "B01" / "r1" / "stdout.txt").read_text()
    assert "INTERNAL_API_TOKEN" in stdout and "[REDACTED]" in stdout
    assert not [p for p in (world / "runs").rglob("*") if p.is_file() and PLANTED.encode() in p.read_bytes()]

    # B without declaring the change: refused, and instruction_hash is the only field that blocks
    refused = session(world, "--agent", "claude-code", "--agent-bundle", "team-v2", "--agent-baseline", "runs/v1")
    assert refused.returncode == 6
    assert [ln.split(":")[0] for ln in lines_of(refused, "BLOCK")] == ["BLOCK instruction_hash"]

    # B with only --agent-vary instruction_hash
    b = session(
        world,
        "--agent",
        "claude-code",
        "--agent-bundle",
        "team-v2",
        "--agent-baseline",
        "runs/v1",
        "--agent-vary",
        "instruction_hash",
        "--agent-record",
        "runs/v2",
    )
    assert b.returncode == 0, b.stdout + b.stderr
    assert "change      instruction_change" in b.stdout
    surface = lines_of(b, "surface")
    assert len(surface) == 1 and "+20 B" in surface[0], b.stdout
    decision = json.loads((world / "runs" / "v2" / "comparison" / "decision.json").read_text())
    sizes = decision["experiment"]["surface"]
    assert (
        sizes["candidate"]["per_file"]["repo:CLAUDE.md"]["bytes"]
        - sizes["baseline"]["per_file"]["repo:CLAUDE.md"]["bytes"]
        == 20
    )
    assert "surface" in (world / "runs" / "v2" / "report.md").read_text()

    # ablation: the same bundle without CLAUDE.md
    c = session(
        world,
        "--agent",
        "claude-code",
        "--agent-bundle",
        "team-v1",
        "--agent-without",
        "CLAUDE.md",
        "--agent-baseline",
        "runs/v1",
        "--agent-vary",
        "instruction_hash",
        "--agent-gate",
        "drop-it",
        "--agent-record",
        "runs/no-claude-md",
    )
    assert c.returncode == 1, c.stdout + c.stderr  # "Keep it": only "Drop it" exits 0
    assert lines_of(c, "effect")[0].startswith(
        "effect      effect of CLAUDE.md = A − B: +100.0 pp [+100.0 pp, +100.0 pp]"
    )
    assert "REJECT" in lines_of(c, "item gate")[0]
    assert lines_of(c, "drop-it")[0].startswith("drop-it     drop-it gate: Keep it")
    assert "none 1" in lines_of(c, "own tests")[1]
    assert lines_of(c, "diverge")
    derived = load_results(world / "runs" / "no-claude-md")["settings"]["agent_bundle"]
    show = agentdrift(world, "bundle", "show", derived["name"])  # the derived bundle is findable again
    assert show.returncode == 0 and derived["digest"] in show.stdout

    # removing configuration the tasks do not need: "Drop it", exit 0
    d = session(
        world,
        "--agent",
        "claude-code",
        "--agent-bundle",
        "team-v1",
        "--agent-without",
        ".claude/settings.json",
        "--agent-baseline",
        "runs/v1",
        "--agent-vary",
        "config_hash",
        "--agent-gate",
        "drop-it",
    )
    assert d.returncode == 0, d.stdout + d.stderr
    assert "ACCEPT" in lines_of(d, "item gate")[0]
    assert lines_of(d, "drop-it")[0].startswith("drop-it     drop-it gate: Drop it")

    # an addition: a plugin whose skill no task invokes never reaches the agent, so it need not be added
    plugin = world / "terse-plugin"
    (plugin / "skills" / "terse").mkdir(parents=True)
    (plugin / "skills" / "terse" / "SKILL.md").write_text("---\nname: terse\n---\nsay: (terse)\n")
    (plugin / ".claude-plugin").mkdir()
    (plugin / ".claude-plugin" / "plugin.json").write_text('{"name": "terse"}')
    e = session(
        world,
        "--agent",
        "claude-code",
        "--agent-bundle",
        "team-v1",
        "--agent-with",
        "plugin:terse-plugin",
        "--agent-baseline",
        "runs/v1",
        "--agent-vary",
        "instruction_hash",
        "--agent-gate",
        "drop-it",
    )
    assert e.returncode == 0, e.stdout + e.stderr
    assert lines_of(e, "effect")[0].startswith("effect      effect of plugin:terse-plugin = B − A: +0.0 pp")
    assert "UNMEASURED" in lines_of(e, "item gate")[0] and "B adds plugin:terse-plugin" in e.stdout
    assert lines_of(e, "drop-it")[0].startswith("drop-it     drop-it gate: Drop it")

    # and the CLI reads the same from the records
    cli = agentdrift(
        world,
        "compare",
        "runs/v1",
        "runs/no-claude-md",
        "--vary",
        "instruction_hash",
        "--drop-it",
        *[f"--accept-unobserved={f}" for f in INI.split()[3:]],
    )
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert "effect of CLAUDE.md = A − B: +100.0 pp" in cli.stdout and "drop-it gate: Keep it" in cli.stdout


def test_bad_bundle_options_are_one_clear_usage_error(world):
    no_bundle = session(world, "--agent", "claude-code", "--agent-without", "CLAUDE.md")
    assert no_bundle.returncode == 4 and "give --agent-bundle" in no_bundle.stderr
    missing = session(world, "--agent", "claude-code", "--agent-bundle", "nope")
    assert missing.returncode == 4 and "no bundle 'nope'" in missing.stderr
    assert (
        agentdrift(
            world, "bundle", "snapshot", "team", "--agent", "claude-code", "--dir", "team", home=world / "home"
        ).returncode
        == 0
    )
    wrong = session(world, "--agent", "reference", "--agent-bundle", "team")
    assert wrong.returncode == 4 and "is a claude-code setup" in wrong.stderr
    typo = session(world, "--agent", "claude-code", "--agent-bundle", "team", "--agent-without", "CLAUD.md")
    assert typo.returncode == 4 and "nothing would be removed" in typo.stderr
    assert not (world / "runs").exists()


def test_null_experiment_and_a_pre_registered_plan_with_the_reference_agent(tmp_path):
    world = tmp_path
    # two cheap tasks (a plan needs two), one run each: what the null and the plan compute is test_null_and_plan.py's
    shutil.copytree(FIXTURES / "EX02-explain-readonly", world / "tasks" / "EX02-explain-readonly")
    notes = {"name": "notes-written", "kind": "files", "layer": "correctness", "exist": ["notes.txt"]}
    make_task(world / "tasks", "N01", checks=[notes], allowed=["notes.txt"], solution={"notes.txt": "hi\n"})
    (world / "bin").mkdir()
    stable_runtimes(world / "bin")
    for name in ("a", "b"):
        r = session(world, "--agent", "reference", "--agent-k", "1", "--agent-record", f"runs/{name}")
        assert r.returncode == 0, r.stdout + r.stderr
    null = agentdrift(world, "null", "runs/a", "runs/b")
    assert null.returncode == 0, null.stdout + null.stderr
    assert "runs/a vs runs/b: 0 flip(s); regression gate pass, would not fire" in null.stdout
    assert "status      no_material_evidence" in null.stdout

    plan = agentdrift(world, "plan", "runs/a", "--delta", "20pp", "--out", "plan.json")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "recommend" in plan.stdout and (world / "plan.json").is_file()
    # refused before any record is read: the run it names does not even exist
    again = agentdrift(world, "plan", "runs/missing", "--out", "plan.json")
    assert again.returncode == 4 and "never rewritten" in again.stderr

    c = session(
        world,
        "--agent",
        "reference",
        "--agent-k",
        "1",
        "--agent-baseline",
        "runs/a",
        "--agent-null",
        "--agent-plan",
        "plan.json",
        "--agent-record",
        "runs/c",
    )
    assert c.returncode == 0, c.stdout + c.stderr
    assert "0 flip(s); regression gate pass, would not fire" in c.stdout
    assert "NOT followed" in c.stdout  # the plan asked for more tasks or repetitions than this run had
    assert (
        json.loads((world / "runs" / "c" / "plan.json").read_text())["digest"]
        == json.loads((world / "plan.json").read_text())["digest"]
    )
    assert (
        json.loads((world / "runs" / "c" / "comparison" / "null.json").read_text())["status"] == "no_material_evidence"
    )


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_SYSTEM": "/dev/null",
    }
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def test_task_new_from_a_git_repository_with_a_failing_test(tmp_path):
    repo = tmp_path / "shop"
    (repo / "tests").mkdir(parents=True)
    (repo / "pricing.py").write_text("def total(prices):\n    return sum(prices[:-1])\n")
    (repo / "tests" / "test_pricing.py").write_text(
        "from pricing import total\n\ndef test_total():\n    assert total([1, 2, 3]) == 6\n"
    )
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "pricing with a bug")
    broken = git(repo, "rev-parse", "HEAD")
    (repo / "pricing.py").write_text("def total(prices):\n    return sum(prices)\n")
    git(repo, "commit", "-q", "-am", "fix total")
    fixed = git(repo, "rev-parse", "HEAD")
    (tmp_path / "task.md").write_text("The total test fails since last week. Fix it.\n")
    (tmp_path / "bin").mkdir()
    new = agentdrift(
        tmp_path,
        "task",
        "new",
        "tasks/pricing-total",
        "--repo",
        str(repo),
        "--rev",
        broken,
        "--solution",
        fixed,
        "--instruction",
        "task.md",
        "--verifier",
        "python -m pytest -q tests/test_pricing.py",
        "--hidden-test",
        "tests/test_pricing.py",
        "--allow",
        "pricing.py",
    )
    assert new.returncode == 0, new.stdout + new.stderr
    assert "ok   pricing-total" in new.stdout and "solution passes 3/3" in new.stdout
    task = tmp_path / "tasks" / "pricing-total"
    assert not (task / "repo" / ".git").exists()
    assert (task / "repo" / "pricing.py").read_text() == "def total(prices):\n    return sum(prices[:-1])\n"
    assert (task / "solution" / "files" / "pricing.py").read_text() == "def total(prices):\n    return sum(prices)\n"
    toml = (task / "task.toml").read_text()
    assert 'hidden = ["tests/test_pricing.py"]' in toml and 'kind = "pytest"' in toml
    assert git(repo, "status", "--porcelain") == "" and git(repo, "rev-parse", "HEAD") == fixed  # untouched
    # and `agentdrift validate --k 3` accepts it on its own
    v = agentdrift(tmp_path, "validate", "tasks/pricing-total", "--k", "3")
    assert v.returncode == 0, v.stdout + v.stderr
    # a solution that does not fix it: nothing is written
    bad = agentdrift(
        tmp_path,
        "task",
        "new",
        "tasks/no-fix",
        "--repo",
        str(repo),
        "--rev",
        broken,
        "--solution",
        broken,
        "--instruction",
        "task.md",
        "--verifier",
        "python -m pytest -q tests/test_pricing.py",
    )
    assert bad.returncode == 4 and "changes nothing" in bad.stderr
    assert not (tmp_path / "tasks" / "no-fix").exists()
