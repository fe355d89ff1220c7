"""docs/agents.md's recipes, run for real: Qwen Code, Aider and an SDK agent through the generic
path (`--agent-cmd`), under bubblewrap, on builtin T02, against the scripted endpoint.

Each product is run as its recipe writes it, its model's base URL (OPENAI_BASE_URL) and the
endpoint's host allowed, nothing else pointed at the endpoint: the harness's model gateway
stands between them and records each call. Per product, against one endpoint:

- T02 passes, and the record holds the model, tokens and HTTP statuses the endpoint served,
  call by call; the version of what the command runs is its cli_version;
- a second identical session compares with no accept flag;
- another version of what the command runs is refused before anything runs, naming cli_version;
- an endpoint that answers 429 to every attempt makes the run infrastructure (never the
  agent's failure), in bounded time: the product's own retries (Qwen Code's have no end,
  Aider's last a minute) are cut short by the gateway.

The answering model is read by the gateway whatever the product: the base session holds it call
by call, and test_model_gateway.py shows that an endpoint answering with another model is refused.

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
    Recipe,
    assert_compares_with_no_accept_flag,
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


def other_version(name: str, recipe: Recipe, tmp: Path) -> tuple[str, str | None]:
    """The recipe's command at another version of what it runs, or ("", why there is none here).
    Qwen Code and Aider: the previous release, installed apart; the SDK agent: its script after
    its team edits it. A command's program is in its identity by file name only, so only the
    version differs from the recipe's."""
    if name == "qwen":
        reason = previous_missing_reason("qwen")
        return ("", reason) if reason else (recipe.command.replace("qwen ", f"{previous_program('qwen')} ", 1), None)
    if name == "aider":
        reason = venv_missing_reason(OLDER_AIDER)
        return (
            ("", reason)
            if reason
            else (recipe.command.replace(str(venv_program("aider")), str(venv_program(OLDER_AIDER))), None)
        )
    edited = tmp / "edited-agent" / "agent.py"
    edited.parent.mkdir()
    edited.write_text(SDK_AGENT.read_text().replace("MAX_TURNS = 40", "MAX_TURNS = 30"))
    return recipe.command.replace(str(SDK_AGENT), str(edited)), None


PRODUCTS = {
    "qwen": (qwen, "qwen3-coder-plus", [needs_cli("qwen")]),
    "aider": (aider, "qwen3-coder-plus", [needs_venv("aider")]),
    "sdk-agent": (sdk_agent, "gpt-5.1-mini", [needs_venv("sdk-agent")]),
}
#: Aider's previous release (pypi-clis.txt), in a virtualenv of its own
OLDER_AIDER = "aider-0.86.1"


def expected_version(product: str, older: bool = False) -> str:
    """The cli_version of the pinned product (`older`: of its previous release)."""
    if product == "qwen":
        pkg, version = pinned("previous" if older else "")["qwen"]
        return f"npm:{pkg}@{version}"
    dist, version, _ = pypi_pinned()[OLDER_AIDER if older else product]
    return f"pip:{dist}=={version}"


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
    sessions: dict = recipe_sessions(tmp, recipe, MARKER, turns, "T02")
    command, sessions["no_other_version"] = other_version(name, recipe, tmp)
    if command:
        # compared with the recorded base: refused before the run, so its endpoint is not needed
        base = sessions["base"]
        sessions["other_version"] = run_session(
            tmp / "other-version",
            recipe.label,
            {},
            recipe.env,
            ("T02",),
            *recipe.args,
            "--agent-baseline",
            str(base.run_dir),
            home=tmp / "home",
            endpoint=base.ep,
            command=command,
        )
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
    assert_compares_with_no_accept_flag(product["base"], product["same"], "T02")


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


def test_another_version_of_the_agent_is_refused_naming_it(product):
    """Against the baseline of the pinned product, another version of it (Qwen Code 0.24.3, Aider
    0.86.1, the SDK agent's script after an edit) is refused before anything runs, naming
    cli_version and both versions. (The rule is the same whichever of the two is the baseline.)"""
    if product["no_other_version"]:
        pytest.skip(product["no_other_version"])
    other = product["other_version"]
    assert other.ret == 6, other.out[-4000:]
    line = closing_line(other)
    assert line.startswith("agentdrift: exit 6") and "cli_version" in line, line
    assert "BLOCK cli_version:" in other.out
    was = product["base"].manifest["identity"]["cli_version"]
    if product["name"] == "sdk-agent":
        # the script's digest before and after the edit
        now = "sha256:" + hashlib.sha256((product["tmp"] / "edited-agent" / "agent.py").read_bytes()).hexdigest()
        was = was["sha256"]
    else:
        now = expected_version(product["name"], older=True)
    assert was != now and was in other.out and now in other.out, other.out[-3000:]
    assert not (other.run_dir / "raw" / "T02").exists()  # refused before the run
