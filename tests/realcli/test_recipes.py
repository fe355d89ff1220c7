"""docs/agents.md's recipes, run for real: Qwen Code, Aider and an SDK agent through the generic
path (`--agent-cmd`), under bubblewrap, on builtin T02, against the scripted endpoint.

Each product is run as its recipe writes it, its model's base URL (OPENAI_BASE_URL) and the
endpoint's host allowed, nothing else pointed at the endpoint: the harness's model gateway
stands between them and records each call. Per product, against one endpoint:

- T02 passes, and the record holds the model, tokens and HTTP statuses the endpoint served,
  call by call; the version of what the command runs is its cli_version;
- a second identical session compares with no accept flag;
- when the endpoint starts answering with another model, the session is refused (exit 6)
  naming `model_stamp`;
- an endpoint that answers 429 to every attempt makes the run infrastructure (never the
  agent's failure), in bounded time: the product's own retries (Qwen Code's have no end,
  Aider's last a minute) are cut short by the gateway.

Qwen Code (npm) is pinned in clis.txt, Aider and the SDK agent's `openai` in pypi-clis.txt,
each in its own virtualenv; a product that is not installed skips with the reason.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from realcli_helpers import (
    PATIENCE_S,
    PREFIX,
    RealSession,
    Recipe,
    assert_no_planted_key,
    assert_record_holds_what_the_endpoint_served,
    closing_line,
    needs_cli,
    needs_venv,
    pinned,
    previous_missing_reason,
    previous_program,
    pypi_pinned,
    recipe_sessions,
    run_session,
    venv_missing_reason,
    venv_program,
)
from scripted_endpoint import ScriptedEndpoint

pytestmark = pytest.mark.slow

SDK_AGENT = Path(__file__).parents[2] / "docs" / "examples" / "sdk-agent" / "agent.py"
MARKER = "volume-discount test"
DISCOUNTS = "invoicekit/discounts.py"
OLD, NEW = "    if quantity > BULK_THRESHOLD:", "    if quantity >= BULK_THRESHOLD:"
REPORT = {"status": "complete", "summary": "the threshold was off by one", "checks_run": ["python -m pytest -q"]}
#: Aider's metadata for a model its price list does not know: without it Aider fetches that
#: list from raw.githubusercontent.com at start (the recipe's --model-metadata-file)
AIDER_METADATA = {
    "openai/qwen3-coder-plus": {
        "max_input_tokens": 131072,
        "max_output_tokens": 8192,
        "input_cost_per_token": 0.000001,
        "output_cost_per_token": 0.000005,
        "litellm_provider": "openai",
        "mode": "chat",
    }
}
#: the git identity Aider wants (else it writes one into the work tree's .git/config)
GIT_IDENTITY = {
    "GIT_CONFIG_COUNT": "2",
    "GIT_CONFIG_KEY_0": "user.name",
    "GIT_CONFIG_VALUE_0": "aider",
    "GIT_CONFIG_KEY_1": "user.email",
    "GIT_CONFIG_VALUE_1": "aider@example.invalid",
}


def qwen(tmp: Path) -> tuple[Recipe, list[dict]]:
    recipe = Recipe(
        "qwen",
        "qwen --yolo --auth-type openai --model qwen3-coder-plus {task_text}",
        {
            "OPENAI_BASE_URL": "{url}/v1",
            "OPENAI_API_KEY": "{key}",
            "QWEN_USAGE_STATISTICS_ENABLED": "false",
            "NODE_EXTRA_CA_CERTS": "{ca}",  # the gateway's trust in the scripted endpoint
        },
        ("--agent-env=OPENAI_API_KEY", "--agent-env=QWEN_USAGE_STATISTICS_ENABLED"),
    )
    path = "{cwd}/" + DISCOUNTS  # Qwen Code's file tools take absolute paths
    turns = [
        {"tools": [{"name": "read_file", "input": {"file_path": path}}], "usage": {"input": 1200, "output": 30}},
        {
            "tools": [{"name": "edit", "input": {"file_path": path, "old_string": OLD, "new_string": NEW}}],
            "usage": {"input": 1500, "output": 40},
        },
        {
            "tools": [{"name": "run_shell_command", "input": {"command": "python -m pytest -q"}}],
            "usage": {"input": 1700, "output": 20},
        },
        {"text": "Fixed: the volume discount starts at 10 units.", "usage": {"input": 1900, "output": 25}},
    ]
    return recipe, turns


def aider(tmp: Path) -> tuple[Recipe, list[dict]]:
    metadata = tmp / "aider-model-metadata.json"
    metadata.write_text(json.dumps(AIDER_METADATA))
    command = (
        f"{venv_program('aider')} --model openai/qwen3-coder-plus --model-metadata-file {metadata}"
        " --edit-format diff --no-stream --yes-always --no-auto-commits --no-dirty-commits --no-gitignore"
        " --no-check-update --analytics-disable --no-show-release-notes --no-pretty --no-fancy-input"
        " --auto-test --test-cmd 'python -m pytest -q' --message-file {task_file}"
    )
    env = {
        "OPENAI_BASE_URL": "{url}/v1",
        "OPENAI_API_KEY": "{key}",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "SSL_CERT_FILE": "{ca}",  # the gateway's trust in the scripted endpoint
        **GIT_IDENTITY,
    }
    passed = ["OPENAI_API_KEY", "LITELLM_LOCAL_MODEL_COST_MAP", *GIT_IDENTITY]
    recipe = Recipe(
        "aider",
        command,
        env,
        (*(f"--agent-env={name}" for name in passed), "--agent-product-path=.aider*"),
        toolless=True,
    )
    edit = f"{DISCOUNTS}\n```python\n<<<<<<< SEARCH\n{OLD}\n=======\n{NEW}\n>>>>>>> REPLACE\n```\n"
    turns = [
        # Aider adds a file its model names to the chat and asks again
        {"text": f"The volume discount is decided in {DISCOUNTS}.", "usage": {"input": 2400, "output": 20}},
        {"text": "The threshold check is off by one.\n\n" + edit, "usage": {"input": 3100, "output": 60}},
    ]
    return recipe, turns


def sdk_agent(tmp: Path) -> tuple[Recipe, list[dict]]:
    recipe = Recipe(
        "sdk-agent",
        f"{venv_program('sdk-agent')} {SDK_AGENT} --model gpt-5.1-mini",
        {"OPENAI_BASE_URL": "{url}/v1", "OPENAI_API_KEY": "{key}", "SSL_CERT_FILE": "{ca}"},
        ("--agent-env=OPENAI_API_KEY",),
    )
    sed = f"sed -i 's/{OLD.strip()}/{NEW.strip()}/' {DISCOUNTS}"
    turns = [
        {"tools": [{"name": "read_file", "input": {"path": DISCOUNTS}}], "usage": {"input": 900, "output": 20}},
        {"tools": [{"name": "run_command", "input": {"command": sed}}], "usage": {"input": 1400, "output": 30}},
        {
            "tools": [{"name": "run_command", "input": {"command": "python -m pytest -q"}}],
            "usage": {"input": 1600, "output": 20},
        },
        {"text": f"Fixed.\n```json\n{json.dumps(REPORT)}\n```", "usage": {"input": 1900, "output": 40}},
    ]
    return recipe, turns


def versions(name: str, recipe: Recipe, tmp: Path) -> tuple[str, str] | str:
    """(the command at an older version, the same command at the pinned one), or why there is
    no older version here. Qwen Code and Aider: the previous release, installed apart; the SDK
    agent: its script before and after its team edits it. Both commands name their program by
    an absolute path, so only the version differs between them."""
    if name == "qwen":
        reason = previous_missing_reason("qwen")
        current = PREFIX / "node_modules" / ".bin" / "qwen"
        return reason or tuple(recipe.command.replace("qwen ", f"{p} ", 1) for p in (previous_program("qwen"), current))
    if name == "aider":
        return venv_missing_reason(OLDER_AIDER) or (
            recipe.command.replace(str(venv_program("aider")), str(venv_program(OLDER_AIDER))),
            recipe.command,
        )
    edited = tmp / "edited-agent" / "agent.py"
    edited.parent.mkdir()
    edited.write_text(SDK_AGENT.read_text().replace("MAX_TURNS = 40", "MAX_TURNS = 30"))
    return recipe.command, recipe.command.replace(str(SDK_AGENT), str(edited))


PRODUCTS = {
    "qwen": (qwen, "qwen3-coder-plus", [needs_cli("qwen")]),
    "aider": (aider, "qwen3-coder-plus", [needs_venv("aider")]),
    "sdk-agent": (sdk_agent, "gpt-5.1-mini", [needs_venv("sdk-agent")]),
}
#: Aider's previous release (pypi-clis.txt), in a virtualenv of its own
OLDER_AIDER = "aider-0.86.1"


def expected_version(product: str) -> str:
    if product == "qwen":
        pkg, version = pinned()["qwen"]
        return f"npm:{pkg}@{version}"
    dist, version, _ = pypi_pinned()[product]
    return f"pip:{dist}=={version}"


def version_sessions(tmp: Path, recipe: Recipe, turns: list[dict], older: str, newer: str) -> dict:
    """`older` recorded on T02, then `newer` compared with it, against one endpoint."""
    with ScriptedEndpoint({MARKER: turns}, tmp / "endpoint-versions", toolless=recipe.toolless) as ep:

        def session(name: str, command: str, *args: str) -> RealSession:
            return run_session(
                tmp / name,
                recipe.label,
                ep.scripts,
                recipe.env,
                ("T02",),
                *recipe.args,
                *args,
                home=tmp / "home",
                endpoint=ep,
                command=command,
            )

        out = {"older": session("older", older)}
        out["newer"] = session("newer", newer, "--agent-baseline", str(out["older"].run_dir))
    return out


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(p, marks=[*marks, pytest.mark.xdist_group(f"realcli-{p}")])
        for p, (_, _, marks) in PRODUCTS.items()
    ],
)
def product(request, tmp_path_factory):
    name = request.param
    make, model, _ = PRODUCTS[name]
    tmp = tmp_path_factory.mktemp(f"recipe-{name}")
    recipe, turns = make(tmp)
    sessions = recipe_sessions(tmp, recipe, MARKER, turns, "T02", swapped=f"{model}-swapped-in")
    commands = versions(name, recipe, tmp)
    if isinstance(commands, str):
        sessions["no_versions"] = commands
    else:
        sessions.update(version_sessions(tmp, recipe, turns, *commands))
    return {"name": name, "model": model, "recipe": recipe, "tmp": tmp, **sessions}


def test_t02_passes_and_the_record_holds_what_the_endpoint_served(product):
    base = product["base"]
    assert base.ret == 0, base.out[-4000:]
    run = base.run("T02")
    assert run["outcome"] == "passed", base.out[-4000:]
    assert_record_holds_what_the_endpoint_served(base, "T02")
    model = product["model"]
    assert run["model_stamp"] == model and run["evidence"]["model_traffic"]["statuses"] == {
        "200": len(base.extra["log"])
    }
    identity = base.manifest["identity"]
    assert (identity["model_stamp"], identity["model_id"]) == (model, model)
    assert identity["model_endpoint"] == f"{base.ep.base_url}/v1"
    # the product's own calls to the gateway are not network attempts of the agent's, and it made no other
    assert run["evidence"]["network_attempts"] == 0, base.out[-3000:]
    version = identity["cli_version"]
    if product["name"] == "sdk-agent":
        # a script: its bytes and the distributions its virtualenv holds
        assert version["program"] == "agent.py" and version["distributions"]["openai"] == pypi_pinned()["sdk-agent"][1]
        assert run["report"]["status"] == "complete"
    else:
        assert version == expected_version(product["name"]), version
    if product["name"] == "aider":
        leftovers = run["evidence"]["leftovers"]
        assert ".aider.chat.history.md (product state)" in leftovers, leftovers
    assert_no_planted_key(base)


def test_two_identical_sessions_compare_with_no_accept_flag(product):
    same = product["same"]
    assert same.ret == 0, same.out[-4000:]
    assert "refused" not in closing_line(same) and "--agent-accept-unobserved" not in same.out
    assert same.run("T02")["outcome"] == "passed"


def test_an_endpoint_answering_with_another_model_is_refused_naming_model_stamp(product):
    swapped = product["swapped"]
    assert swapped.ret == 6, swapped.out[-4000:]
    line = closing_line(swapped)
    assert line.startswith("agentdrift: exit 6") and "model_stamp" in line, line
    assert f"{product['model']}-swapped-in" in swapped.out


def test_a_provider_429_is_infrastructure_in_bounded_time(product):
    limited = product["limited"]
    assert limited.ret == 4, limited.out[-4000:]  # the session's one run was lost to the provider
    assert limited.elapsed < PATIENCE_S + 60, limited.elapsed
    run = limited.run("T02")
    assert run["outcome"] == "infra_error", limited.out[-3000:]
    infra = run["infra_error"]
    assert (infra["class"], infra["source"], infra["status"]) == ("rate_limited", "harness model gateway", 429)
    served = limited.extra["log"]
    assert served and all(e["status"] == 429 for e in served)
    assert [c["status"] for c in run["evidence"]["model_calls"]] == [429] * len(served)
    assert infra["retries"] == len(served) - 1
    assert_no_planted_key(limited)


def test_a_new_version_of_the_agent_is_refused_naming_it(product):
    """Against a baseline of the older version (Qwen Code 0.24.3, Aider 0.86.1, the SDK agent's
    script before an edit), the pinned one is refused before anything runs, naming cli_version
    and both versions."""
    if "no_versions" in product:
        pytest.skip(product["no_versions"])
    older, newer = product["older"], product["newer"]
    assert older.ret == 0, older.out[-4000:]
    assert newer.ret == 6, newer.out[-4000:]
    line = closing_line(newer)
    assert line.startswith("agentdrift: exit 6") and "cli_version" in line, line
    assert "BLOCK cli_version:" in newer.out
    was = older.manifest["identity"]["cli_version"]
    if product["name"] == "sdk-agent":
        # the script's digest before and after the edit
        now = "sha256:" + hashlib.sha256((product["tmp"] / "edited-agent" / "agent.py").read_bytes()).hexdigest()
        assert was["sha256"] != now and was["sha256"] in newer.out and now in newer.out, newer.out[-3000:]
    else:
        now = product["base"].manifest["identity"]["cli_version"]
        assert was != now and was in newer.out and now in newer.out, newer.out[-3000:]
    assert not (newer.run_dir / "raw" / "T02").exists()  # refused before the run
