"""Identity across sessions for the real OpenCode (npm `opencode-ai`, pinned) with its preset defaults.

Two sessions against the same scripted endpoint compare with no accept flag:
the endpoint is ANTHROPIC_BASE_URL, the model the user's opencode.json
selects, the version `opencode --version`'s, the model that answered what the
harness's model gateway saw (OpenCode's stream names none), and what OpenCode
cannot report (its tool set, a sandbox it does not have, the envelope) is
accepted by default for the preset. When the endpoint starts answering with
another model the session is refused naming `model_stamp` (exit 6).
"""

from __future__ import annotations

import pytest
from realcli_helpers import needs_cli, run_session
from scripted_endpoint import ScriptedEndpoint
from test_opencode import CONFIG, ENV, SCRIPTS

pytestmark = [pytest.mark.slow, needs_cli("opencode"), pytest.mark.xdist_group("realcli-opencode")]

T07 = {"Swedish VAT rate": SCRIPTS["Swedish VAT rate"]}
SWAPPED = "claude-swapped-in"


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("realcli-opencode-identity")
    home = tmp / "home"
    out = {}
    with ScriptedEndpoint(T07, tmp / "endpoint") as ep:
        for rel, text in CONFIG.items():
            (home / rel).parent.mkdir(parents=True, exist_ok=True)
            (home / rel).write_text(text.replace("{url}", ep.base_url))
        out["base"] = run_session(tmp / "base", "opencode", T07, ENV, ("T07",), home=home, endpoint=ep)
        out["same"] = run_session(
            tmp / "same",
            "opencode",
            T07,
            ENV,
            ("T07",),
            "--agent-baseline",
            str(out["base"].run_dir),
            home=home,
            endpoint=ep,
        )
        ep.model = SWAPPED  # the endpoint starts answering with another model
        out["swapped"] = run_session(
            tmp / "swapped",
            "opencode",
            T07,
            ENV,
            ("T07",),
            "--agent-baseline",
            str(out["base"].run_dir),
            home=home,
            endpoint=ep,
        )
        out["url"] = ep.base_url
    return out


def test_two_identical_sessions_compare_with_no_accept_flag(sessions):
    base, same = sessions["base"], sessions["same"]
    assert base.ret == 1, base.out[-3000:]  # T07 fails as scripted
    identity = base.manifest["identity"]
    assert identity["model_endpoint"] == f"{sessions['url']}/v1"
    assert identity["cli_version"] == same.manifest["identity"]["cli_version"]
    closing = next(ln for ln in same.out.splitlines() if ln.startswith("agentdrift: exit"))
    assert "refused" not in closing, same.out[-3000:]
    assert "--agent-accept-unobserved" not in same.out
    assert same.run("T07")["outcome"] == "failed"


def test_an_endpoint_answering_with_another_model_is_refused_naming_model_stamp(sessions):
    swapped = sessions["swapped"]
    assert swapped.ret == 6, swapped.out[-4000:]
    closing = next(ln for ln in swapped.out.splitlines() if ln.startswith("agentdrift: exit"))
    assert closing.startswith("agentdrift: exit 6") and "model_stamp" in closing, closing
    assert SWAPPED in swapped.out
