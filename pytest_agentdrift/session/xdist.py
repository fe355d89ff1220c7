"""pytest-xdist plumbing, registered only when xdist is loaded.

Controller-decided values (the run id) go to workers through workerinput;
per-run results ride on test reports (they survive a worker crash); only a
worker's exit status travels in workeroutput, merged by worker id.
"""

from __future__ import annotations

import re

TASK_NODE = re.compile(r"^[^:]+::r\d+$")


def is_worker(config) -> bool:
    return hasattr(config, "workerinput")


class XdistHooks:
    def __init__(self, config):
        self.config = config

    def pytest_configure_node(self, node) -> None:
        from pytest_agentdrift.plugin import get_session

        s = get_session(self.config)
        node.workerinput["agentdrift_run_id"] = s.run_id
        node.workerinput["agentdrift_started_at"] = s.started_at
        # the manifest is captured once, on the controller; workers get it for `agent_manifest`
        node.workerinput["agentdrift_manifest"] = s.manifest
        if s.longrun is not None:  # control directory, shard, resumed runs (session/longrun.py)
            node.workerinput.update(s.longrun.workerinput())

    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        from pytest_agentdrift.plugin import get_session

        s = get_session(self.config)
        # every worker collects the same ids; the union is the expected set
        s.expected_nodeids.update(i for i in ids if TASK_NODE.match(i))

    def pytest_testnodedown(self, node, error) -> None:
        from pytest_agentdrift.plugin import get_session

        s = get_session(self.config)
        out = getattr(node, "workeroutput", None) or {}
        wid = getattr(node, "workerinput", {}).get("workerid", "?")
        s.workers[wid] = {"exitstatus": out.get("agentdrift_exitstatus"), "error": None if error is None else str(error)[:500]}
