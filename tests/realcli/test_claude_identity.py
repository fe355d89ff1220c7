"""The model endpoint is identity, for the real Claude Code CLI (npm, pinned) with its preset defaults.

Two sessions against the same scripted endpoint compare with no accept flag
and no --agent-model: what Claude Code reports itself (the model its init
record asks for, its tools, its own sandbox) fills the manifest after the
runs, and what it cannot report (the envelope, its model options, its
auto-update state) is accepted by default for the preset. A session against
another endpoint is refused before collection (exit 6) unless the endpoint is
the declared experiment (--agent-vary model_endpoint).

The sessions' HOME holds the product's own user settings and is snapshotted
around every session: manifest capture, the version display and the runs
write nothing there (as root a read-only mode would not stop a write, so the
tree is compared instead).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from realcli_helpers import PLANTED_KEY, TASK_SCRIPT, preset_marks, run_session, sessions_group
from scripted_endpoint import ScriptedEndpoint
from test_claude_code import ENV, SCRIPTS

pytestmark = preset_marks("claude")


def xdist_group_of(item: pytest.Item) -> str | None:
    return sessions_group(item, "claude-identity", "sessions")


#: the shortest of the scripts (T07 fails as scripted: a critical failure)
T07 = {TASK_SCRIPT["T07"]: SCRIPTS[TASK_SCRIPT["T07"]]}
HOME_FILES = {".claude/settings.json": '{"cleanupPeriodDays": 30}\n', ".claude/CLAUDE.md": "Be brief.\n"}


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every entry under `root`: mode, modification time and content digest."""
    out = {}
    for p in sorted([root, *root.rglob("*")]):
        st = p.lstat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
        out[str(p.relative_to(root))] = (st.st_mode, st.st_mtime_ns, digest)
    return out


def seeded_home(tmp: Path) -> Path:
    home = tmp / "home"
    for rel, text in HOME_FILES.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    return home


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    """A baseline and a same-endpoint candidate against endpoint A, then two sessions against B."""
    tmp = tmp_path_factory.mktemp("realcli-identity")
    home = seeded_home(tmp)
    out = {}
    with ScriptedEndpoint(T07, tmp / "endpoint-a") as a:
        before = snapshot(home)
        out["base"] = run_session(tmp / "base", "claude-code", T07, ENV, ("T07",), home=home, endpoint=a)
        out["home_after_base"] = (before, snapshot(home))
        baseline = str(out["base"].run_dir)
        out["same"] = run_session(
            tmp / "same", "claude-code", T07, ENV, ("T07",), "--agent-baseline", baseline, home=home, endpoint=a
        )
        out["home_after_same"] = (before, snapshot(home))
        with ScriptedEndpoint(T07, tmp / "endpoint-b") as b:
            out["other"] = run_session(
                tmp / "other", "claude-code", T07, ENV, ("T07",), "--agent-baseline", baseline, home=home, endpoint=b
            )
            out["other_log"] = list(b.log)
            out["varied"] = run_session(
                tmp / "varied",
                "claude-code",
                T07,
                ENV,
                ("T07",),
                "--agent-baseline",
                baseline,
                "--agent-vary",
                "model_endpoint",
                home=home,
                endpoint=b,
            )
        out["urls"] = (a.base_url, b.base_url)
    return out


def test_the_endpoint_and_the_requested_model_are_recorded(sessions):
    base = sessions["base"]
    assert base.ret == 1, base.out  # T07 fails as scripted
    ident = base.manifest["identity"]
    url_a, _ = sessions["urls"]
    assert ident["model_endpoint"] == url_a
    assert base.manifest["evidence"]["model_endpoint"] == {"source": "ANTHROPIC_BASE_URL"}
    # the model the CLI asked for, as every request to the endpoint named it (no --agent-model given)
    requested = {c["model"] for c in base.ep.main_calls()}
    assert len(requested) == 1 and ident["model_id"] == requested.pop()
    assert base.manifest["evidence"]["post_run"]["model_id"]["source"] == "the product's own report at run time"
    assert "Bash" in ident["built_in_tools"] and ident["sandbox"] == {"sandbox_enabled": False}
    # the endpoint is only "the model endpoint" in the isolation: a gateway change is not an isolation change
    assert "model_endpoint" in ident["isolation"]["network_allowlist"]
    assert base.ep.host_port not in ident["isolation"]["network_allowlist"]
    assert PLANTED_KEY not in str(base.manifest)


def test_same_endpoint_compares_with_no_accept_flag(sessions):
    same = sessions["same"]
    assert same.ret == 1, same.out
    assert "--agent-accept-unobserved" not in " ".join(same.out.split())
    assert "refused" not in same.out
    assert (
        "accept      unreportable = model_options, auto_update_state, temperature, seed, max_output_tokens, "
        "budget_tokens_per_task, tool_timeout_s"
    ) in same.out
    assert same.run("T07")["outcome"] == "failed" and same.run("T07")["critical_failed"]


def test_another_endpoint_is_refused_before_collection(sessions):
    other = sessions["other"]
    assert other.ret == 6, other.out
    url_a, url_b = sessions["urls"]
    assert f"BLOCK model_endpoint: {url_a} != {url_b}" in other.out
    assert "--agent-vary model_endpoint" in other.out
    assert sessions["other_log"] == []  # no request reached endpoint B: nothing ran


def test_another_endpoint_declared_as_the_experiment_is_compared(sessions):
    varied = sessions["varied"]
    assert varied.ret == 1, varied.out  # compared: T07 fails as scripted, nothing refused
    assert "refused" not in varied.out
    url_a, url_b = sessions["urls"]
    assert "model_candidate" in varied.out and "(declared variable: model_endpoint)" in varied.out
    diff = json.loads((varied.run_dir / "comparison" / "manifest-diff.json").read_text())
    assert diff["varied"] == ["model_endpoint"] and diff["comparable"] is True
    assert diff["changed"]["model_endpoint"] == {"baseline": url_a, "current": url_b}
    assert varied.manifest["identity"]["model_endpoint"] == url_b


def test_nothing_is_written_into_the_users_home(sessions):
    for key in ("home_after_base", "home_after_same"):
        before, after = sessions[key]
        assert after == before, key
