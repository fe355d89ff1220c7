"""pytest's own outcomes agree with the regression gate: what it does not hold against the candidate is xfail.

An item reports as its run ends, before the comparison exists; the gate
decides over all the runs at the session's end. So the controller keeps the
failed task items' reports (and their JUnit test cases), and once the gate
has spoken (compare.outcome.gate_item_outcomes says which tasks it does not
hold against the candidate, and why), turns those failures into xfails: in
the terminal's counts and short summary, in ``session.testsfailed`` and in
the JUnit file, so a passing gate never ends on "N failed" or
``failures="N"``. Nothing else about the reports changes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest


class FailedItems:
    """The failed task items of a session: (report, task id, JUnit test case reporter or None)."""

    def __init__(self) -> None:
        self.items: list[tuple[pytest.TestReport, str, Any]] = []

    def add(self, config: pytest.Config, report: pytest.TestReport, task_id: str) -> None:
        from _pytest.junitxml import xml_key

        xml = config.stash.get(xml_key, None)
        self.items.append((report, task_id, xml.node_reporter(report) if xml is not None else None))

    def agree(self, session: pytest.Session, reasons: dict[str, str]) -> int:
        """Turn the failures of the tasks in ``reasons`` into xfails; returns how many."""
        from _pytest.junitxml import xml_key

        config = session.config
        terminal = config.pluginmanager.get_plugin("terminalreporter")
        xml = config.stash.get(xml_key, None)
        moved = 0
        for report, task_id, case in self.items:
            if task_id not in reasons or not report.failed:
                continue
            reason = f"fails in baseline too or within noise: {reasons[task_id]}"
            report.outcome = "skipped"
            report.wasxfail = reason
            if terminal is not None and report in terminal.stats.get("failed", []):
                terminal.stats["failed"].remove(report)
                terminal.stats.setdefault("xfailed", []).append(report)
            if case is not None and xml is not None:
                _junit_as_xfail(case.to_xml(), reason, xml)
            moved += 1
        session.testsfailed = max(0, session.testsfailed - moved)
        return moved


def _junit_as_xfail(testcase: ET.Element, reason: str, xml: Any) -> None:
    for failure in testcase.findall("failure"):
        testcase.remove(failure)
        xml.stats["failure"] -= 1
        testcase.append(ET.Element("skipped", type="pytest.xfail", message=reason))
        xml.stats["skipped"] += 1
