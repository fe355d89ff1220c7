"""Identity across sessions for the real Gemini CLI (npm, pinned) with its preset defaults.

Two sessions against the same scripted endpoint compare with no accept flag;
a session whose endpoint starts answering with another model (same URL, same
requested model) is refused naming `model_stamp` (exit 6): the model that
answered is read from the CLI's own per-model statistics, and from the
harness's model gateway, which sees the calls too.
"""

from __future__ import annotations

import pytest
from realcli_helpers import needs_cli, run_session
from scripted_endpoint import ScriptedEndpoint
from test_gemini import ENV, MODEL, SCRIPTS

pytestmark = [pytest.mark.slow, needs_cli("gemini"), pytest.mark.xdist_group("realcli-gemini")]

#: T02 answered throughout by the model asked for
T02 = {
    "volume-discount test": [
        {k: v for k, v in turn.items() if k != "model"} for turn in SCRIPTS["volume-discount test"]
    ]
}
SWAPPED = "gemini-2.5-flash-swapped-in"


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("realcli-gemini-identity")
    home = tmp / "home"
    home.mkdir()
    out = {}
    with ScriptedEndpoint(T02, tmp / "endpoint") as ep:
        args = ("--agent-model", MODEL)
        out["base"] = run_session(tmp / "base", "gemini-cli", T02, ENV, ("T02",), *args, home=home, endpoint=ep)
        baseline = str(out["base"].run_dir)
        out["same"] = run_session(
            tmp / "same", "gemini-cli", T02, ENV, ("T02",), *args, "--agent-baseline", baseline, home=home, endpoint=ep
        )
        ep.model = SWAPPED  # the endpoint starts answering with another model
        out["swapped"] = run_session(
            tmp / "swapped",
            "gemini-cli",
            T02,
            ENV,
            ("T02",),
            *args,
            "--agent-baseline",
            baseline,
            home=home,
            endpoint=ep,
        )
    return out


def closing(session) -> str:
    return next(ln for ln in session.out.splitlines() if ln.startswith("agentdrift: exit"))


def test_two_identical_sessions_compare_with_no_accept_flag(sessions):
    base, same = sessions["base"], sessions["same"]
    assert base.ret == 0, base.out[-3000:]
    assert base.run("T02")["model_stamp"] == MODEL and base.manifest["identity"]["model_stamp"] == MODEL
    assert same.ret == 0, same.out[-3000:]
    assert "--agent-accept-unobserved" not in same.out and "refused" not in closing(same)
    assert same.run("T02")["outcome"] == "passed"


def test_an_endpoint_answering_with_another_model_is_refused_naming_model_stamp(sessions):
    swapped = sessions["swapped"]
    assert swapped.ret == 6, swapped.out[-4000:]
    line = closing(swapped)
    assert line.startswith("agentdrift: exit 6") and "model_stamp" in line, line
    assert SWAPPED in swapped.out
