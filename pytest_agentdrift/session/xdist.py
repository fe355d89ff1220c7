"""pytest-xdist plumbing, registered only when xdist is loaded.

Controller-decided values (the run id) go to workers through workerinput;
per-run results ride on test reports (they survive a worker crash); only a
worker's exit status travels in workeroutput, merged by worker id.
"""

from __future__ import annotations

import re

TASK_NODE = re.compile(r"^[^:]+::r\d+$")


class XdistHooks:
    """Registered on the controller with the objects it feeds: SessionInfo out, results in."""

    def __init__(self, info, collector):
        self.info = info
        self.collector = collector

    def pytest_configure_node(self, node) -> None:
        # the manifest is captured once, on the controller; workers get it for `agent_manifest`
        # (and the control directory, shard and resumed runs of record/longrun.py)
        node.workerinput.update(self.info.worker_input().to_dict())

    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        # every worker collects the same ids; the union is the expected set
        self.collector.expected_nodeids.update(i for i in ids if TASK_NODE.match(i))

    def pytest_testnodedown(self, node, error) -> None:
        out = getattr(node, "workeroutput", None) or {}
        wid = getattr(node, "workerinput", {}).get("workerid", "?")
        self.collector.workers[wid] = {
            "exitstatus": out.get("agentdrift_exitstatus"),
            "error": None if error is None else str(error)[:500],
        }
