"""A product's side output (Copilot's usage summary) goes to a directory of the harness's.

The "product" is an adapter registered by a conftest that names a side
output (`scratch_files`): its program writes the file where the harness said
(RunContext.scratch) and the adapter reads it back (`read_scratch`). Under
bubblewrap that directory is the one writable place beside the run: recorded
in the mount plan as `<product-output>`, never in the work tree, never among
the agent's changes or writes outside, gone after the run.
"""

from pathlib import Path

import pytest
from helpers import run_pytest

from pytest_agentdrift.run.sandbox import detect
from pytest_agentdrift.testing import agent_script, load_results, make_task

pytestmark = pytest.mark.slow

CONFTEST = """
import json, sys
from pytest_agentdrift.agents import AgentAdapter

class SideOutputProduct(AgentAdapter):
    name = "side-output-product"
    product = "example/side-output"
    scratch_files = ("summary.json",)

    def build_argv(self, ctx):
        return [sys.executable, {script!r}, str(ctx.scratch / "summary.json")]

    def executable(self):
        return sys.executable

    def read_scratch(self, out, files):
        data = files.get("summary.json")
        if data is not None:
            out.usage.input_tokens = json.loads(data)["input_tokens"]

def pytest_agentdrift_register_adapters(config):
    return {{"side-output-product": SideOutputProduct}}
"""

AGENT = """
summary = Path(sys.argv[1])
summary.write_text(json.dumps({"input_tokens": 1234}))
report("complete", answer=str(summary.parent))
"""


@pytest.mark.parametrize("isolation", ["bwrap", "none"])
def test_side_output_is_read_from_the_harness_directory(pytester, isolation):
    if isolation == "bwrap" and detect("auto").mode != "bwrap":
        pytest.skip("bubblewrap cannot run here")
    script = agent_script(pytester.path / "agent.py", AGENT)
    pytester.makeconftest(CONFTEST.format(script=str(script)))
    make_task(pytester.path, "S01")
    agent = ("--agent", "side-output-product", "--agent-isolation", isolation)
    result = run_pytest(pytester, *agent, "--agent-record", "runs/r", timeout=120)
    run = load_results(pytester.path / "runs" / "r")["tasks"]["S01"]["runs"][0]
    assert run["usage"]["input_tokens"] == 1234, result.stdout.str()
    ev = run["evidence"]
    assert ev["changed"] == {"added": [], "deleted": [], "mode": [], "modified": []}
    assert ev["writes_outside"] == []
    written_to = run["report"]["answer"]
    assert written_to.rsplit("/", 1)[-1].startswith(".out-S01-r1-")
    if isolation == "bwrap":
        assert any(m.startswith("rw ") and "<product-output>" in m for m in ev["isolation"]["mounts"]), ev["isolation"][
            "mounts"
        ]
    # removed with the run: nothing of it is left for another run (or a host process) to read
    assert not Path(written_to).exists()
