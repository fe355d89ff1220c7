"""Runtime manifest capture: identity stability, secrets, read-only capture, unobserved values."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import write

from pytest_agentdrift.agents import discovery_base
from pytest_agentdrift.canonical import digest
from pytest_agentdrift.errors import AgentDriftError, RecordError
from pytest_agentdrift.manifest import capture as mf
from pytest_agentdrift.manifest import probes
from pytest_agentdrift.manifest.identity import IDENTITY_FIELDS, PROVENANCE_FIELDS

PLANTED = "sk-PLANTED-9f8e7d6c5b4a39281706"
PLANTED_ENV = "sk-PLANTED-ENV-a1b2c3d4e5f60718"
#: the identity fields the run's options fill (unobserved when none is set)
RUN_OPTIONS = (
    "temperature",
    "seed",
    "max_output_tokens",
    "budget_tokens_per_task",
    "tool_timeout_s",
    "retry_policy",
)

VERSIONS = {
    "claude": "2.1.0 (Claude Code)",
    "node": "v20.11.1",
    "npm": "10.2.4",
    "git": "git version 2.43.0",
    "bash": "GNU bash, version 5.2.21(1)-release\nCopyright (C) 2022",
}


def fake_runner(versions: dict[str, str]):
    """subprocess.run stand-in: version displays answer from a table; records every call."""
    calls: list[list[str]] = []

    def run(argv, **kw):
        calls.append(list(argv))
        assert kw.get("timeout") and kw["timeout"] <= probes.VERSION_TIMEOUT_S  # bounded
        assert kw.get("stdin") == subprocess.DEVNULL
        out = versions.get(os.path.basename(argv[0]))
        if out is None:
            raise FileNotFoundError(argv[0])
        if out == "TIMEOUT":
            raise subprocess.TimeoutExpired(argv, kw["timeout"])
        if out.startswith("EXIT:"):
            return subprocess.CompletedProcess(argv, int(out[5:]), b"", b"boom")
        return subprocess.CompletedProcess(argv, 0, out.encode() + b"\n", b"")

    run.calls = calls  # type: ignore[attr-defined]
    return run


def build_world(root: Path) -> dict:
    """A home, a project with two tasks, a system root and fake binaries, under root."""
    home, proj, sysroot, bindir = root / "home", root / "proj", root / "sys", root / "bin"
    write(home / ".claude" / "CLAUDE.md", "# user\n@~/.claude/prefs.md\n")
    write(home / ".claude" / "prefs.md", "prefer small diffs\n")
    write(
        home / ".claude" / "settings.json",
        json.dumps(
            {
                "model": "claude-sonnet-x",
                "autoUpdates": False,
                "permissions": {"allow": ["Bash(pytest:*)"]},
                "env": {"SERVICE_TOKEN": PLANTED},
                "apiKeyHelper": f"echo {PLANTED}",
                "apiKey": PLANTED,
            }
        ),
    )
    write(
        home / ".claude.json",
        json.dumps(
            {
                "oauthAccount": {"accessToken": PLANTED},
                "mcpServers": {"gh": {"command": "npx", "args": ["--token", PLANTED], "env": {"GH_TOKEN": PLANTED}}},
            }
        ),
    )
    write(home / ".claude" / ".credentials.json", json.dumps({"token": PLANTED}))
    write(proj / "pyproject.toml", "[project]\nname='x'\n")
    write(proj / "uv.lock", "version = 1\nrequires-python = '>=3.11'\n")
    for tid in ("T01", "T05"):
        task = proj / "suite" / tid
        write(task / "task.md", f"do {tid}\n")
        write(task / "task.toml", f'id = "{tid}"\n')
        write(task / "repo" / "src" / "app.py", "print('hi')\n")
        write(task / "repo" / "requirements.txt", "requests==2.31.0\n")
    write(proj / "suite" / "T05" / "repo" / "CLAUDE.md", "# task rules\n")
    write(proj / "suite" / "T05" / "repo" / "pkg" / "CLAUDE.md", "# nested rule\n")
    write(proj / "suite" / "T05" / "repo" / "pkg" / "__pycache__" / "x.pyc", b"\0cache")
    write(proj / "suite" / "T05" / "repo" / "package-lock.json", '{\n  "name": "x",\n  "lockfileVersion": 3\n}\n')
    write(sysroot / "etc" / "os-release", 'ID=ubuntu\nVERSION_ID="24.04"\n')
    for name in ("claude", "node", "npm", "git", "bash"):
        exe = write(bindir / name, "#!/bin/sh\nexit 0\n")
        exe.chmod(0o755)
    scoring = write(root / "scoring" / "checks.py", "def score(): return 1\n")
    return {"home": home, "proj": proj, "sys": sysroot, "bin": bindir, "scoring": scoring}


def make_ctx(world: dict, **over) -> mf.ManifestContext:
    proj = world["proj"]
    kw = dict(
        adapter={"name": "claude-code", "product": "anthropic/claude-code", "surface": "cli"},
        agent_argv=["claude", "-p", "{task_text}", "--output-format", "stream-json", "--verbose"],
        version_argv=["claude", "--version"],
        home=world["home"],
        project_root=proj,
        options={
            "model": "claude-sonnet-x",
            "model_options": {"effort": "medium"},
            "permission_mode": "acceptEdits",
            "sandbox": "harness",
            "tools": ["Read", "Edit", "Bash"],
            "temperature": 0,
            "seed": 7,
            "max_output_tokens": 4096,
            "budget_tokens_per_task": 60000,
            "tool_timeout_s": 120,
            "retry_policy": "none",
        },
        task_repos={t: proj / "suite" / t / "repo" for t in ("T01", "T05")},
        task_dirs={t: proj / "suite" / t for t in ("T01", "T05")},
        env={
            "PATH": str(world["bin"]),
            "SHELL": str(world["bin"] / "bash"),
            "HOME": str(world["home"]),
            "ANTHROPIC_API_KEY": PLANTED_ENV,
            "GITHUB_TOKEN": PLANTED_ENV,
            "LANG": "C.UTF-8",
            "TZ": "UTC",
            "MY_SECRET_LANG": PLANTED_ENV,
        },
        env_allowlist=["ANTHROPIC_API_KEY", "LANG", "TZ", "MY_SECRET_LANG", "NOT_SET"],
        task_set_id="sha256:tasks",
        evaluator_id="sha256:evaluator",
        isolation={"requested": "auto", "enforced": "bwrap", "network": "denied"},
        harness_version="0.1.0",
        pytest_argv=["pytest", "--agent-baseline", str(proj / "runs" / "base")],
        run_id="run-1",
        system_root=world["sys"],
        platform="linux",
        scoring_files=[world["scoring"]],
        runner=fake_runner(VERSIONS),
    )
    kw.update(over)
    return mf.ManifestContext(**kw)


@pytest.fixture
def world(tmp_path):
    return build_world(tmp_path / "w1")


def all_bytes(cap: mf.Capture) -> str:
    return json.dumps(cap.manifest) + json.dumps(cap.instruction_bundle) + json.dumps(cap.source_manifest)


# --------------------------------------------------------------------------- shape


def test_every_required_field_is_present_and_concrete_or_marked(world):
    cap = mf.capture(make_ctx(world))
    ident = cap.manifest["identity"]
    assert set(ident) == set(IDENTITY_FIELDS)
    required = {  # the identity table, the envelope, the host-reported stamps
        "surface",
        "product",
        "model_id",
        "model_options",
        "cli_version",
        "extension_id",
        "extension_version",
        "auto_update_state",
        "permission_mode",
        "sandbox",
        "built_in_tools",
        "external_tools",
        "config_hash",
        "instruction_hash",
        "source_id",
        "lockfile_hash",
        "os",
        "runtime_versions",
        "working_directory",
        "command",
        "environment_allowlist",
        "task_set_id",
        "evaluator_id",
        *RUN_OPTIONS,
        "env_image_digest",
        "scoring_script_digest",
        "harness_version",
        "model_stamp",
        "server_revision",
    }
    assert required <= set(ident)
    assert set(PROVENANCE_FIELDS) <= set(cap.manifest["provenance"])
    assert cap.manifest["provenance"]["captured_at_utc"].endswith("Z")
    for name, value in ident.items():
        assert value is not None and value != "", name
        if value in ("unobserved", "not_applicable"):
            assert name in cap.manifest["reasons"], f"{name} is {value} without a reason"
    assert cap.manifest["runtime_id"] == digest(ident)
    assert ident["cli_version"] == "2.1.0 (Claude Code)"
    assert ident["runtime_versions"]["shell"] == "bash: GNU bash, version 5.2.21(1)-release"
    assert ident["os"]["distribution"] == "ubuntu" and ident["os"]["release"] == "24.04"
    assert ident["auto_update_state"]["configured"] == "disabled"
    assert ident["instruction_hash"] == discovery_base.instruction_hash(cap.instruction_bundle)
    assert ident["source_id"] == cap.source_manifest["digest"]
    # the host-reported stamps are unknown before the runs
    assert ident["model_stamp"] == ident["server_revision"] == "unobserved"


def test_identity_is_identical_for_the_same_runtime_in_other_temp_dirs(tmp_path):
    a = mf.capture(make_ctx(build_world(tmp_path / "first")))
    b = mf.capture(make_ctx(build_world(tmp_path / "second-elsewhere")))
    assert a.manifest["identity"] == b.manifest["identity"]
    assert a.manifest["runtime_id"] == b.manifest["runtime_id"]
    assert a.instruction_bundle == b.instruction_bundle
    assert a.source_manifest == b.source_manifest
    ident_bytes = json.dumps(a.manifest["identity"]) + json.dumps(a.instruction_bundle)
    assert str(tmp_path) not in ident_bytes and "/tmp" not in ident_bytes


def test_secrets_in_environment_and_config_reach_no_artifact_byte(world):
    cap = mf.capture(make_ctx(world))
    blob = all_bytes(cap)
    assert "PLANTED" not in blob
    allow = cap.manifest["identity"]["environment_allowlist"]
    assert allow["ANTHROPIC_API_KEY"] == {"set": True}  # name always, value never
    assert allow["MY_SECRET_LANG"] == {"set": True}  # looks like a credential name: names only
    assert allow["LANG"] == {"set": True, "value": "C.UTF-8"}
    assert allow["NOT_SET"] == {"set": False}
    assert "GITHUB_TOKEN" not in allow  # not on the allowlist at all


def test_capture_leaves_every_file_unchanged_and_creates_none(world):
    proj = world["proj"]
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    subprocess.run(["git", "init", "-q", str(proj)], check=True)
    subprocess.run(["git", "-C", str(proj), "-c", "user.email=a@b", "-c", "user.name=a", "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(proj), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "fixture"], check=True
    )
    write(proj / "suite" / "T01" / "repo" / "src" / "app.py", "print('edited')\n")  # dirty
    root = world["home"].parent

    def snapshot() -> dict:
        out = {}
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                st = p.lstat()
                data = p.read_bytes() if p.is_file() and not p.is_symlink() else None
                out[str(p)] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, data)
        return out

    before = snapshot()
    cap = mf.capture(make_ctx(world))
    after = snapshot()
    assert before == after
    git = cap.manifest["provenance"]["source_git"]
    assert len(git["commit"]) == 40 and git["dirty"] is True
    count = subprocess.run(["git", "-C", str(proj), "rev-list", "--count", "HEAD"], capture_output=True, text=True)
    assert count.stdout.strip() == "1"  # no commit created


def test_source_manifest_lists_every_task_file_and_skips_caches(world):
    cap = mf.capture(make_ctx(world))
    paths = [f["path"] for f in cap.source_manifest["files"]]
    assert paths == sorted(paths)
    assert "T05/repo/pkg/CLAUDE.md" in paths and "T01/task.md" in paths
    assert not any("__pycache__" in p for p in paths)
    one = next(f for f in cap.source_manifest["files"] if f["path"] == "T01/task.md")
    assert one["size"] == len(b"do T01\n") and len(one["sha256"]) == 64


def test_source_id_changes_with_a_fixture_byte(world):
    a = mf.capture(make_ctx(world)).manifest["identity"]["source_id"]
    write(world["proj"] / "suite" / "T01" / "repo" / "src" / "app.py", "print('hi!')\n")
    b = mf.capture(make_ctx(world)).manifest["identity"]["source_id"]
    assert a != b


def test_lockfiles_with_formats(world):
    cap = mf.capture(make_ctx(world))
    locks = {lock["path"]: (lock["format"], lock["format_version"]) for lock in cap.manifest["evidence"]["lockfiles"]}
    assert locks["project:uv.lock"] == ("uv", "1")
    assert locks["task:T05:repo/package-lock.json"] == ("npm", "3")
    assert locks["task:T01:repo/requirements.txt"] == ("pip-requirements", "not_applicable")


def test_no_lockfile_is_not_applicable(tmp_path):
    world = build_world(tmp_path)
    for p in (
        list(world["proj"].rglob("*.lock"))
        + list(world["proj"].rglob("requirements.txt"))
        + list(world["proj"].rglob("package-lock.json"))
    ):
        p.unlink()
    cap = mf.capture(make_ctx(world))
    assert cap.manifest["identity"]["lockfile_hash"] == "not_applicable"


# --------------------------------------------------------------------------- unobserved, not a default


def test_missing_binary_leaves_cli_version_unobserved(world):
    (world["bin"] / "claude").unlink()
    cap = mf.capture(make_ctx(world))
    assert cap.manifest["identity"]["cli_version"] == "unobserved"
    assert "not found" in cap.manifest["reasons"]["cli_version"]


@pytest.mark.parametrize("answer", ["TIMEOUT", "EXIT:3", ""])
def test_failing_version_display_is_unobserved(world, answer):
    cap = mf.capture(make_ctx(world, runner=fake_runner({**VERSIONS, "claude": answer})))
    assert cap.manifest["identity"]["cli_version"] == "unobserved"


def test_version_display_runs_with_real_timeout(world, tmp_path):
    slow = write(world["bin"] / "claude", f"#!/bin/sh\nexec {shutil.which('sleep') or '/bin/sleep'} 5\n")
    slow.chmod(0o755)
    cap = mf.capture(make_ctx(world, runner=None, version_timeout_s=0.3))
    assert cap.manifest["identity"]["cli_version"] == "unobserved"
    assert "timed out" in cap.manifest["reasons"]["cli_version"]


def test_unset_options_are_unobserved_not_defaults(world):
    cap = mf.capture(make_ctx(world, options={}))
    ident = cap.manifest["identity"]
    for name in (*RUN_OPTIONS, "built_in_tools"):
        assert ident[name] == "unobserved", name
    # the configured model comes from the settings file, labelled as configured
    assert ident["model_id"]["configured"] == "claude-sonnet-x"
    assert ident["model_id"]["effective"] == "unobserved"


def test_reference_agent_has_no_model_fields(world):
    cap = mf.capture(
        make_ctx(
            world, adapter={"name": "reference", "product": "pytest-agentdrift/reference", "surface": "cli"}, options={}
        )
    )
    ident = cap.manifest["identity"]
    for name in ("model_id", "model_stamp", "server_revision", "model_options", "temperature", "seed"):
        assert ident[name] == "not_applicable", name


def test_missing_task_set_and_evaluator_are_unobserved(world):
    ident = mf.capture(make_ctx(world, task_set_id=None, evaluator_id=None)).manifest["identity"]
    assert ident["task_set_id"] == ident["evaluator_id"] == "unobserved"


def test_container_without_digest_is_unobserved(world):
    write(world["sys"] / ".dockerenv", "")
    ident = mf.capture(make_ctx(world)).manifest["identity"]
    assert ident["env_image_digest"] == "unobserved"
    ident = mf.capture(make_ctx(world, env_image_digest="sha256:img")).manifest["identity"]
    assert ident["env_image_digest"] == "sha256:img"


def test_duplicate_key_in_a_config_file_is_an_error_naming_it(world):
    bad = write(world["home"] / ".claude" / "settings.json", '{"model": "a", "model": "b"}')
    with pytest.raises(AgentDriftError) as exc:
        mf.capture(make_ctx(world))
    assert exc.value.exit_code == 4 and exc.value.path == str(bad) and "'model'" in exc.value.problem


def test_external_tools_inventory_without_secrets(world):
    tools = mf.capture(make_ctx(world)).manifest["identity"]["external_tools"]
    assert [t["name"] for t in tools] == ["gh"]
    assert tools[0]["spec"]["env"] == ["GH_TOKEN"] and tools[0]["schema_sha256"] == "unobserved"


def test_generic_command_agent_hashes_named_files(world):
    cfg = write(world["proj"] / "agent.toml", f'token = "{PLANTED}"\nmode = "auto"\n')
    ins = write(world["proj"] / "SYSTEM.md", "rules\n")
    ctx = make_ctx(
        world,
        adapter={"name": "cmd", "product": "generic", "surface": "cli"},
        agent_argv=["my-agent"],
        version_argv=None,
        extra_config=[cfg],
        extra_instructions=[ins],
    )
    cap = mf.capture(ctx)
    assert "PLANTED" not in all_bytes(cap)
    assert cap.manifest["identity"]["cli_version"] == "not_applicable"
    assert any(e["path"] == "project:SYSTEM.md" for e in cap.instruction_bundle["entries"])
    before = cap.manifest["identity"]["config_hash"]
    write(cfg, f'mode = "auto"\r\ntoken = "{PLANTED}"\r\n')  # reordered, CRLF: same parsed value
    assert mf.capture(ctx).manifest["identity"]["config_hash"] == before
    write(cfg, f'mode = "manual"\ntoken = "{PLANTED}"\n')
    assert mf.capture(ctx).manifest["identity"]["config_hash"] != before


# --------------------------------------------------------------------------- finalize / validate


def test_finalize_fills_model_stamp_and_recomputes_runtime_id(world):
    m = mf.capture_manifest(make_ctx(world))
    done = mf.finalize_manifest(m, {"T01/r1": "claude-sonnet-x-20260101", "T05/r1": "claude-sonnet-x-20260101"})
    assert done["identity"]["model_stamp"] == "claude-sonnet-x-20260101"
    assert done["runtime_id"] == digest(done["identity"]) != m["runtime_id"]
    assert m["identity"]["model_stamp"] == "unobserved"  # input untouched
    mixed = mf.finalize_manifest(m, {"T01/r1": "a", "T05/r1": "b"})
    assert mixed["identity"]["model_stamp"] == ["a", "b"]
    none = mf.finalize_manifest(m, {"T01/r1": None})
    assert none["identity"]["model_stamp"] == "unobserved"


def test_validate_manifest_rejects_tampered_or_incomplete(world):
    m = mf.capture_manifest(make_ctx(world))
    assert mf.validate_manifest(json.loads(json.dumps(m))) is not None
    edited = json.loads(json.dumps(m))
    edited["identity"]["model_id"] = "other"
    with pytest.raises(RecordError, match="runtime_id"):
        mf.validate_manifest(edited, "runs/base/runtime-manifest.json")
    partial = json.loads(json.dumps(m))
    del partial["identity"]["cli_version"]
    with pytest.raises(RecordError, match="cli_version"):
        mf.validate_manifest(partial)
    with pytest.raises(RecordError):
        mf.validate_manifest([1, 2])


def test_modules_import_no_pytest_and_no_gitpython_at_import():
    code = (
        "import sys; import pytest_agentdrift.manifest.capture, pytest_agentdrift.manifest.identity, "
        "pytest_agentdrift.manifest.discovery, pytest_agentdrift.agents.products;  "
        "print('pytest' in sys.modules, 'git' in sys.modules)"
    )
    out = subprocess.run([os.sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def _npm_install(root, version="10.2.4", name="npm"):
    """npm's own layout: PATH's npm is a link to lib/node_modules/npm/bin/npm-cli.js."""
    pkg = root / "lib" / "node_modules" / "npm"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "bin" / "npm-cli.js").write_text("#!/usr/bin/env node\n")
    (pkg / "bin" / "npm-cli.js").chmod(0o755)
    (pkg / "package.json").write_text(json.dumps({"name": name, "version": version}))
    (root / "bin").mkdir()
    (root / "bin" / "npm").symlink_to("../lib/node_modules/npm/bin/npm-cli.js")
    return {"PATH": str(root / "bin")}


def test_npm_version_is_read_from_the_package_json_of_the_npm_on_path(tmp_path):
    from pytest_agentdrift.manifest.probes import _npm_package_version

    assert _npm_package_version(_npm_install(tmp_path / "a")) == "10.2.4"
    # not npm's own package, or a shim of a version manager: asked by running it instead
    assert _npm_package_version(_npm_install(tmp_path / "b", name="not-npm")) is None
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "npm").write_text('#!/bin/sh\nexec real-npm "$@"\n')
    (shim / "npm").chmod(0o755)
    assert _npm_package_version({"PATH": str(shim)}) is None


@pytest.mark.skipif(shutil.which("npm") is None, reason="no npm here")
def test_the_package_json_version_is_what_npm_version_prints():
    from pytest_agentdrift.manifest.probes import _npm_package_version

    read = _npm_package_version(os.environ)
    if read is None:
        pytest.skip("this npm is not npm's own npm-cli.js (a shim): it is run instead")
    printed = subprocess.run(["npm", "--version"], capture_output=True, text=True, timeout=120).stdout.strip()
    assert read == printed
