"""Comparing manifests: each single-field change refuses, unobserved blocks, change classes, rendering."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import write

from pytest_agentdrift.errors import AgentDriftError, RecordError
from pytest_agentdrift.manifest import capture as mf
from pytest_agentdrift.manifest import identity as stamps

VERSIONS = {
    "claude": "2.1.0 (Claude Code)",
    "node": "v20.11.1",
    "npm": "10.2.4",
    "git": "git version 2.43.0",
    "bash": "GNU bash, version 5.2.21(1)-release",
}


def runner_for(versions: dict[str, str]):
    def run(argv, **kw):
        out = versions.get(os.path.basename(argv[0]))
        if out is None:
            raise FileNotFoundError(argv[0])
        return subprocess.CompletedProcess(argv, 0, out.encode() + b"\n", b"")

    return run


class World:
    """A fully observed runtime (every option set, every probe answered) that tests mutate one input of."""

    def __init__(self, root: Path):
        self.root = root
        self.home, self.proj, self.sys, self.bin = root / "home", root / "proj", root / "sys", root / "bin"
        write(self.home / ".claude" / "CLAUDE.md", "# user rules\n")
        write(
            self.home / ".claude" / "settings.json",
            json.dumps({"permissions": {"allow": ["Bash(pytest:*)"], "deny": ["WebFetch"]}, "autoUpdates": False}),
        )
        write(self.proj / "uv.lock", "version = 1\n")
        write(self.proj / "suite" / "T02" / "task.md", "fix the bug\n")
        write(self.proj / "suite" / "T02" / "repo" / "src" / "pricing.py", "def price(): return 1\n")
        write(self.proj / "suite" / "T02" / "repo" / "AGENTS.md", "run the tests\n")
        write(self.sys / "etc" / "os-release", 'ID=ubuntu\nVERSION_ID="24.04"\n')
        for name in VERSIONS:
            write(self.bin / name, "#!/bin/sh\n").chmod(0o755)
        self.scoring = write(root / "scoring.py", "SCORE = 1\n")
        self.versions = dict(VERSIONS)
        self.over: dict = {}

    def ctx(self) -> mf.ManifestContext:
        kw = dict(
            adapter={
                "name": "claude-code",
                "product": "anthropic/claude-code",
                "surface": "cli",
                "endpoint_env": ["ANTHROPIC_BASE_URL"],
                "default_endpoint": "https://api.anthropic.com",
            },
            agent_argv=["claude", "-p", "{task_text}", "--output-format", "stream-json"],
            version_argv=["claude", "--version"],
            home=self.home,
            project_root=self.proj,
            options={
                "model": "claude-model-a",
                "model_options": {"effort": "high"},
                "permission_mode": "acceptEdits",
                "sandbox": "harness",
                "tools": ["Bash", "Edit", "Read"],
                "temperature": 0,
                "seed": 1,
                "max_output_tokens": 4096,
                "budget_tokens_per_task": 50000,
                "tool_timeout_s": 60,
                "retry_policy": "none",
            },
            task_repos={"T02": self.proj / "suite" / "T02" / "repo"},
            task_dirs={"T02": self.proj / "suite" / "T02"},
            env={"PATH": str(self.bin), "SHELL": str(self.bin / "bash"), "LANG": "C.UTF-8"},
            env_allowlist=["LANG"],
            task_set_id="sha256:taskset-1",
            evaluator_id="sha256:evaluator-1",
            isolation={"enforced": "bwrap", "network": "denied"},
            harness_version="0.1.0",
            system_root=self.sys,
            platform="linux",
            scoring_files=[self.scoring],
            runner=runner_for(self.versions),
            run_id="run-a",
        )
        kw.update(self.over)
        return mf.ManifestContext(**kw)

    def manifest(self) -> dict:
        return json.loads(json.dumps(mf.capture_manifest(self.ctx())))  # as stored and reloaded


@pytest.fixture
def world(tmp_path):
    return World(tmp_path / "world")


def options_with(world: World, **changes) -> dict:
    return {**world.ctx().options, **changes}


# One mutation per identity input the issue lists; each must refuse with
# exactly that field (and nothing else) blocking.
MUTATIONS = {
    "model": ("model_id", lambda w: w.over.update(options=options_with(w, model="claude-model-b"))),
    "cli version": ("cli_version", lambda w: w.versions.update(claude="2.2.0 (Claude Code)")),
    "configuration": (
        "config_hash",
        lambda w: write(
            w.home / ".claude" / "settings.json",
            json.dumps(
                {
                    "permissions": {"allow": ["Bash(pytest:*)", "Bash(curl:*)"], "deny": ["WebFetch"]},
                    "autoUpdates": False,
                }
            ),
        ),
    ),
    "instructions": ("instruction_hash", lambda w: write(w.home / ".claude" / "CLAUDE.md", "# user rules, edited\n")),
    # a task repository's file is also fixture source: both fields move
    "task instructions": (
        ("instruction_hash", "source_id"),
        lambda w: write(w.proj / "suite" / "T02" / "repo" / "CLAUDE.md", "# a new task-level rule\n"),
    ),
    "lockfile": ("lockfile_hash", lambda w: write(w.proj / "uv.lock", "version = 1\n# re-resolved\n")),
    "os": ("os", lambda w: write(w.sys / "etc" / "os-release", 'ID=ubuntu\nVERSION_ID="26.04"\n')),
    "task set": ("task_set_id", lambda w: w.over.update(task_set_id="sha256:taskset-2")),
    "evaluator": ("evaluator_id", lambda w: w.over.update(evaluator_id="sha256:evaluator-2")),
    "agent command": (
        "command",
        lambda w: w.over.update(
            agent_argv=[
                "claude",
                "-p",
                "{task_text}",
                "--output-format",
                "stream-json",
                "--dangerously-skip-permissions",
            ]
        ),
    ),
    "node runtime": ("runtime_versions", lambda w: w.versions.update(node="v22.1.0")),
    "temperature": ("temperature", lambda w: w.over.update(options=options_with(w, temperature=0.7))),
    "retry policy": ("retry_policy", lambda w: w.over.update(options=options_with(w, retry_policy="2 on 5xx"))),
}


def test_the_fixture_runtime_is_comparable_to_itself(world):
    base = world.manifest()
    cmp = stamps.compare_manifests(base, world.manifest(), pre_run=True)
    assert cmp.comparable, cmp.blocks
    assert cmp.change_class == "identical"
    assert sorted(cmp.deferred) == ["model_stamp", "server_revision"]


@pytest.mark.parametrize("what", sorted(MUTATIONS))
def test_each_single_field_change_is_refused(world, what):
    fields, mutate = MUTATIONS[what]
    fields = (fields,) if isinstance(fields, str) else fields
    field = fields[0]
    base = world.manifest()
    mutate(world)
    cur = world.manifest()
    cmp = stamps.compare_manifests(base, cur, pre_run=True)
    assert not cmp.comparable
    assert [b[0] for b in cmp.blocks] == list(fields)
    lines = stamps.render_refusal(cmp, "pytest --agent-record runs/new")
    assert any(line.startswith(f"BLOCK {field}: ") for line in lines)
    assert lines[-1] == "if it is not, record a new baseline for this runtime: pytest --agent-record runs/new"
    # both ways out: a field that may be the experiment is named with its --agent-vary flag
    varyable = [f for f in fields if f in stamps.VARY_FIELDS]
    hint = [line for line in lines if line.startswith("if this change is the experiment")]
    assert hint == (
        [
            "if this change is the experiment (what you mean to compare), declare it: "
            + " ".join(f"--agent-vary {f}" for f in varyable)
        ]
        if varyable
        else []
    )
    doc = stamps.manifest_diff_document(cmp)
    assert list(doc["changed"]) == list(fields)
    assert doc["changed"][field]["baseline"] == base["identity"][field]
    assert doc["changed"][field]["current"] == cur["identity"][field]
    assert field not in doc["same"]
    assert len(doc["same"]) == len(stamps.IDENTITY_FIELDS) - len(fields) - 2  # the two deferred stamps


def test_configuration_differing_only_in_key_order_and_line_endings_is_comparable(world):
    base = world.manifest()
    write(
        world.home / ".claude" / "settings.json",
        '{\r\n  "autoUpdates": false,\r\n  "permissions": {\r\n    "deny": ["WebFetch"],\r\n'
        '    "allow": ["Bash(pytest:*)"]\r\n  }\r\n}\r\n',
    )
    write(world.home / ".claude" / "CLAUDE.md", "# user rules   \r\n\r\n")  # instructions: raw differs only
    cur = world.manifest()
    cmp = stamps.compare_manifests(base, cur, pre_run=True)
    assert cmp.comparable, cmp.blocks
    noted = {n[0] for n in cmp.notes}
    assert {"config_sources_raw", "instruction_sources_raw"} <= noted  # raw hashes differ: notes, never blocks


def test_instruction_content_change_is_not_hidden_by_normalisation(world):
    base = world.manifest()
    write(world.home / ".claude" / "CLAUDE.md", "# user rules\nnew rule\n")
    assert not stamps.compare_manifests(base, world.manifest(), pre_run=True).comparable


def test_explicit_null_differs_from_absent(world):
    base = world.manifest()
    write(
        world.home / ".claude" / "settings.json",
        json.dumps(
            {"permissions": {"allow": ["Bash(pytest:*)"], "deny": ["WebFetch"]}, "autoUpdates": False, "model": None}
        ),
    )
    cmp = stamps.compare_manifests(base, world.manifest(), pre_run=True)
    assert [b[0] for b in cmp.blocks] == ["config_hash"]


def test_unobserved_compared_field_blocks_even_when_equal(world):
    world.over["options"] = options_with(world, temperature=None)
    base, cur = world.manifest(), world.manifest()
    assert base["identity"]["temperature"] == "unobserved"
    cmp = stamps.compare_manifests(base, cur, pre_run=True)
    assert not cmp.comparable
    assert cmp.blocks == [("temperature", "unobserved", "unobserved")]
    assert "temperature" in cmp.unobserved
    line = next(line for line in stamps.render_refusal(cmp) if line.startswith("BLOCK"))
    assert line.startswith("BLOCK temperature: unobserved != unobserved")
    # accepted explicitly: a note instead of a block
    ok = stamps.compare_manifests(base, cur, pre_run=True, accept_unobserved=["temperature"])
    assert ok.comparable and ("temperature", "unobserved", "unobserved") in ok.notes


def test_unobserved_cli_version_is_an_invalid_comparison(world):
    base = world.manifest()
    del world.versions["claude"]
    cmp = stamps.compare_manifests(base, world.manifest(), vary=["cli_version"], pre_run=True)
    assert not cmp.comparable and cmp.change_class == "invalid_comparison"
    assert ("cli_version", "2.1.0 (Claude Code)", "unobserved") in cmp.blocks


def test_post_run_stamps_block_after_the_runs(world):
    base = mf.finalize_manifest(world.manifest(), {"T02/r1": "model-a-2026"})
    cur = world.manifest()
    pre = stamps.compare_manifests(base, cur, pre_run=True)
    assert pre.comparable and "model_stamp" in pre.deferred
    post = stamps.compare_manifests(
        base, mf.finalize_manifest(cur, {"T02/r1": "model-a-2027"}), accept_unobserved=["server_revision"]
    )
    assert [b[0] for b in post.blocks] == ["model_stamp"]
    assert post.change_class == "model_candidate"
    same = stamps.compare_manifests(base, mf.finalize_manifest(cur, {"T02/r1": "model-a-2026"}))
    assert [b[0] for b in same.blocks] == ["server_revision"]  # unknown is non-comparable unless accepted


# --------------------------------------------------------------------------- vary and change classes


def test_vary_model_is_a_model_candidate(world):
    base = world.manifest()
    MUTATIONS["model"][1](world)
    cmp = stamps.compare_manifests(base, world.manifest(), vary=["model_id"], pre_run=True)
    assert cmp.comparable and cmp.varied == ["model_id"] and cmp.change_class == "model_candidate"
    assert any(line.startswith("vary  model_id: ") for line in stamps.render_refusal(cmp))


def test_vary_cli_version_is_a_client_candidate(world):
    base = world.manifest()
    MUTATIONS["cli version"][1](world)
    cmp = stamps.compare_manifests(base, world.manifest(), vary=["cli_version"], pre_run=True)
    assert cmp.comparable and cmp.change_class == "client_candidate"


def test_cli_and_tools_changing_together_is_a_bundled_change(world):
    base = world.manifest()
    MUTATIONS["cli version"][1](world)
    world.over["options"] = options_with(world, tools=["Bash", "Edit", "Read", "TestDiscovery"])
    cur = world.manifest()
    only_cli = stamps.compare_manifests(base, cur, vary=["cli_version"], pre_run=True)
    assert not only_cli.comparable and [b[0] for b in only_cli.blocks] == ["built_in_tools"]
    both = stamps.compare_manifests(base, cur, vary=["cli_version", "built_in_tools"], pre_run=True)
    assert both.comparable and both.change_class == "bundled_change"


@pytest.mark.parametrize(
    "what,vary,klass",
    [
        ("instructions", "instruction_hash", "instruction_change"),
        ("lockfile", "lockfile_hash", "environment_change"),
        ("os", "os", "environment_change"),
        ("configuration", "config_hash", "configuration_change"),
    ],
)
def test_change_classes(world, what, vary, klass):
    base = world.manifest()
    MUTATIONS[what][1](world)
    cmp = stamps.compare_manifests(base, world.manifest(), vary=[vary], pre_run=True)
    assert cmp.comparable and cmp.change_class == klass


def test_task_set_change_needs_a_new_baseline_and_cannot_be_varied(world):
    base = world.manifest()
    MUTATIONS["task set"][1](world)
    cmp = stamps.compare_manifests(base, world.manifest(), pre_run=True)
    assert cmp.change_class == "re_baseline" and not cmp.comparable
    with pytest.raises(AgentDriftError, match="new baseline"):
        stamps.compare_manifests(base, world.manifest(), vary=["task_set_id"])


def test_a_different_surface_is_split_baselines(world):
    base = world.manifest()
    world.over["adapter"] = {"name": "claude-code", "product": "anthropic/claude-code", "surface": "vscode_extension"}
    cmp = stamps.compare_manifests(base, world.manifest(), vary=["cli_version"], pre_run=True)
    assert not cmp.comparable and cmp.change_class == "surface_bundle_change"
    assert "surface" in [b[0] for b in cmp.blocks]
    with pytest.raises(AgentDriftError, match="separate baseline"):
        stamps.check_vary(["surface"])


def test_unknown_vary_name_lists_the_valid_names():
    with pytest.raises(AgentDriftError) as exc:
        stamps.check_vary(["model"])
    assert "unknown field 'model'" in exc.value.problem
    for name in ("model_id", "cli_version", "instruction_hash", "config_hash"):
        assert name in exc.value.problem
    assert exc.value.exit_code == 4
    with pytest.raises(AgentDriftError):
        stamps.compare_manifests({}, {}, accept_unobserved=["nope"])


def test_provenance_differences_are_notes_not_blocks(world):
    base = world.manifest()
    world.over["run_id"] = "run-b"
    cmp = stamps.compare_manifests(base, world.manifest(), pre_run=True)
    assert cmp.comparable
    assert ("run_id", "run-a", "run-b") in cmp.notes
    assert "note  run_id: run-a != run-b" in stamps.render_refusal(cmp)


def test_incomplete_baseline_is_a_record_error(world):
    base = world.manifest()
    del base["identity"]["os"]
    with pytest.raises(RecordError, match="os"):
        stamps.compare_manifests(base, world.manifest())
    with pytest.raises(RecordError):
        stamps.compare_manifests({"runtime_id": "x"}, world.manifest())


def test_field_lists_are_disjoint_and_vary_names_are_identity_fields():
    assert not set(stamps.IDENTITY_FIELDS) & set(stamps.PROVENANCE_FIELDS)
    assert set(stamps.VARY_FIELDS) < set(stamps.IDENTITY_FIELDS)
    groups = (
        stamps.SURFACE_FIELDS
        | stamps.REBASELINE_FIELDS
        | stamps.MODEL_FIELDS
        | stamps.CLIENT_FIELDS
        | stamps.CONFIGURATION_FIELDS
        | stamps.INSTRUCTION_FIELDS
        | stamps.ENVIRONMENT_FIELDS
    )
    assert groups == set(stamps.IDENTITY_FIELDS)  # every field has a change class


def test_render_shows_only_the_differing_keys_of_objects():
    cmp = stamps.StampComparison(
        comparable=False,
        blocks=[("os", {"release": "24.04", "machine": "x86_64"}, {"release": "26.04", "machine": "x86_64"})],
    )
    assert 'BLOCK os: {"release":"24.04"} != {"release":"26.04"}' in stamps.render_refusal(cmp)


def test_a_stamp_the_recorded_baseline_never_observed_blocks_before_the_runs(world):
    """Deferred post-run fields are settled against a recorded baseline: unobserved there, they can
    never be shown equal, so they block now (unless accepted); a concrete baseline stamp stays deferred."""
    base = world.manifest()
    cmp = stamps.compare_manifests(base, world.manifest(), pre_run=True)
    assert sorted(cmp.deferred) == ["model_stamp", "server_revision"]
    assert stamps.settle_deferred(cmp, base, accept=["server_revision"]) == ["model_stamp"]
    assert not cmp.comparable and cmp.blocks == [("model_stamp", "unobserved", "unobserved")]
    assert cmp.deferred == ["server_revision"]
    header = stamps.render_refusal(cmp)[0]
    assert "no identity field differs; 1 compared field(s) unobserved on both sides cannot be shown equal" in header
    told = dict(base, identity={**base["identity"], "model_stamp": "claude-answer"})
    later = stamps.compare_manifests(told, world.manifest(), pre_run=True)
    assert stamps.settle_deferred(later, told, accept=["server_revision"]) == []
    assert later.comparable and "model_stamp" in later.deferred


def test_the_generic_protocol_names_the_model_that_answered_on_usage_events():
    from pytest_agentdrift.run.budget import model_from_events

    assert model_from_events([{"type": "usage", "input_tokens": 3}]) is None
    events = [
        {"type": "usage", "model": "acme-2"},
        {"type": "message", "model": "ignored"},
        {"type": "usage", "model": " acme-2 "},
        {"type": "usage", "model": "x" * 201},  # too long to be a model id: not taken
        {"type": "usage", "model": 7},
    ]
    assert model_from_events(events) == "acme-2"
    assert model_from_events([*events, {"type": "usage", "model": "acme-1"}]) == "acme-1, acme-2"
