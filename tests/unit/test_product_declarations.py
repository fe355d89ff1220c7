"""What an --agent-cmd agent's operator declares of its product (--agent-product-path,
--agent-background-host): which paths, git state and refused requests it excuses, and nothing more."""

from __future__ import annotations

from pytest_agentdrift.agents.base import CommandAdapter
from pytest_agentdrift.run.evidence import split_background
from pytest_agentdrift.run.treeseen import declared_path, split_product_state


def test_a_declared_glob_covers_its_matches_and_what_lies_below_them():
    globs = (".aider*", ".myproduct")
    assert declared_path(".aider.chat.history.md", globs)
    assert declared_path(".aider.tags.cache.v3/cache.db", globs)
    assert declared_path(".myproduct/", globs) and declared_path(".myproduct/state.json", globs)
    assert not declared_path("src/.aider.conf.yml", globs)  # anchored at the work tree's root
    assert not declared_path(".myproduct2/x", globs) and not declared_path("invoicekit/cli.py", globs)


def test_declared_git_state_is_the_products_and_the_rest_of_git_stays_the_agents():
    adapter = CommandAdapter("python3 agent.py", product_paths=[".git/mystate", ".aider*"])
    assert adapter.product_state == (".git/mystate",)
    mutations = [".git/mystate/db (added)", ".git/config (modified)", ".git/mystate (added)", ".git/hooks/x (added)"]
    agents, own = split_product_state(mutations, adapter.product_state)
    assert own == [".git/mystate/db (added)", ".git/mystate (added)"]
    assert agents == [".git/config (modified)", ".git/hooks/x (added)"]


def test_a_declared_background_host_excuses_only_a_refused_request_to_it():
    adapter = CommandAdapter("python3 agent.py", background_hosts=["Telemetry.Example.com"])
    attempts = [
        {"host": "telemetry.example.com", "program": "python3.11", "allowed": False},
        {"host": "telemetry.example.com", "program": "curl", "allowed": True},  # opened: never excused
        {"host": "evil.example.com", "program": "python3.11", "allowed": False},
    ]
    net, background = split_background(attempts, adapter)
    assert [b["host"] for b in background] == ["telemetry.example.com"]
    assert background[0]["type"] == "background_request"
    assert [(a["host"], a["allowed"]) for a in net] == [("telemetry.example.com", True), ("evil.example.com", False)]


def test_what_is_declared_is_described_and_nothing_when_nothing_is():
    plain = CommandAdapter("python3 agent.py")
    assert plain.declared_product() == {} and "product_paths" not in plain.describe()
    declared = CommandAdapter("python3 agent.py", product_paths=["/.aider*/"], background_hosts=["a.example"])
    assert declared.describe()["product_paths"] == [".aider*"]
    assert declared.describe()["background_hosts"] == ["a.example"]


def test_ca_files_of_passed_variables_are_shown_and_the_systems_own_store_is_not_an_addition(tmp_path):
    from pytest_agentdrift.run.agentview import ca_mounts

    ca = tmp_path / "gateway.pem"
    ca.write_text("CA\n")
    env = {
        "SSL_CERT_FILE": str(ca),  # passed by default
        "NODE_EXTRA_CA_CERTS": str(ca),  # passed only with --agent-env
        "CURL_CA_BUNDLE": "/etc/ssl/certs",  # the system's store: shown anyway
        "GIT_SSL_CAINFO": "relative.pem",  # not a path the harness can show
    }
    assert ca_mounts((), env) == [(str(ca), "SSL_CERT_FILE: CA certificates the agent is passed")]
    shown = ca_mounts(("NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"), env)
    assert [why.split(":")[0] for _, why in shown] == ["SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS"]
