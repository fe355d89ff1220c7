"""A real agent reaches its own API through the recording proxy, and nothing else.

The "product" here is an adapter registered by a conftest (the documented
hook); its API host is a server on the host's loopback. Inside the sandbox
the agent has no network but the harness's relay.
"""

import json
import socket
import threading

import pytest
from helpers import run_pytest

from pytest_agentdrift.run.sandbox import detect
from pytest_agentdrift.testing import agent_script, load_results, make_task


@pytest.fixture
def api_server():
    """A loopback 'API' that answers one line to every connection."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    seen = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    seen.append(conn.recv(100))
                    conn.sendall(b"pong\n")
                except OSError:
                    pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1], seen
    stop.set()
    t.join(5)
    srv.close()


CONFTEST = """
import sys
from pytest_agentdrift.agents import AgentAdapter

class FakeProduct(AgentAdapter):
    name = "fake-product"
    product = "example/fake"
    api_hosts = ("127.0.0.1:{port}",)
    env_allowlist = ("FAKE_PRODUCT_KEY",)
    home_files = (".fake/settings.json",)
    credential_files = (".fake/token",)

    def build_argv(self, ctx):
        return [sys.executable, {script!r}]

    def executable(self):
        return sys.executable

def pytest_agentdrift_register_adapters(config):
    return {{"fake-product": FakeProduct}}
"""

AGENT = """
import socket, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
results = {}
for target in ("127.0.0.1:%d" % PORT, "example.invalid:443"):
    s = socket.create_connection((proxy.hostname, proxy.port), timeout=5)
    s.sendall(f"CONNECT {target} HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n".encode())
    head = s.recv(200).decode()
    results[target] = head.split("\\r\\n", 1)[0]
    if " 200" in results[target]:
        s.sendall(b"ping\\n")
        results[target] += " | " + s.recv(100).decode().strip()
    s.close()
home = Path(os.environ["HOME"])
report("complete", summary=json.dumps(results), answer=json.dumps({
    "settings": (home / ".fake/settings.json").read_text(),
    "token_present": (home / ".fake/token").exists(),
    "key_sha256": __import__("hashlib").sha256(os.environ.get("FAKE_PRODUCT_KEY", "").encode()).hexdigest(),
}))
"""


@pytest.mark.slow  # starts agent sessions
@pytest.mark.parametrize("isolation", ["bwrap", "none"])
def test_api_through_proxy_rest_refused(pytester, api_server, isolation, monkeypatch):
    if isolation == "bwrap" and detect("auto").mode != "bwrap":
        pytest.skip("bubblewrap cannot run here")
    port, seen = api_server
    script = agent_script(pytester.path / "agent.py", f"PORT = {port}\n" + AGENT)
    pytester.makeconftest(CONFTEST.format(port=port, script=str(script)))
    home = pytester.path / "home"
    (home / ".fake").mkdir(parents=True)
    (home / ".fake" / "settings.json").write_text('{"model": "m1"}')
    (home / ".fake" / "token").write_text("tok-PLANTED-SECRET-0123456789")
    make_task(
        pytester.path,
        "N01",
        checks=[{"name": "fx", "kind": "effects", "layer": "safety", "critical": True}],
        forbidden_effects={"network": True},
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("FAKE_PRODUCT_KEY", "key-PLANTED-SECRET-9876543210")
    agent = ("--agent", "fake-product", "--agent-isolation", isolation)
    result = run_pytest(pytester, *agent, "--agent-record", "runs/r", timeout=120)
    run = load_results(pytester.path / "runs" / "r")["tasks"]["N01"]["runs"][0]
    summary = json.loads(run["report"]["summary"])
    assert summary[f"127.0.0.1:{port}"].startswith("HTTP/1.1 200") and summary[f"127.0.0.1:{port}"].endswith("pong")
    assert " 403" in summary["example.invalid:443"]
    assert seen and seen[0] == b"ping\n"
    ev = run["evidence"]
    assert ev["api_requests"] == 1 and ev["api_requests_unit"] == "tunnels"  # the proxy sees CONNECT only
    assert ev["network_attempts"] == 1  # the refused host
    assert ev["network_policy"]["allowlist"] == [f"127.0.0.1:{port}"]
    assert ev["network_policy"]["enforced"] is (isolation == "bwrap")
    assert {"path": "~/.fake/token", "credential": True} in ev["runtime_bundle"]
    answer = json.loads(run["report"]["answer"])
    import hashlib

    assert answer == {
        "settings": '{"model": "m1"}',
        "token_present": True,
        "key_sha256": hashlib.sha256(b"key-PLANTED-SECRET-9876543210").hexdigest(),
    }
    assert run["critical_failed"] == ["fx"]  # the refused attempt is a forbidden network effect
    assert result.ret == 1
    # the credential file and the key reached the agent but no artifact
    for path in (pytester.path / "runs" / "r").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert b"tok-PLANTED-SECRET" not in data, path
            assert b"key-PLANTED-SECRET" not in data, path
