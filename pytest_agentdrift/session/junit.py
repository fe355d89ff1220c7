"""What `--junitxml` shows of each run, in the shape CI test views accept.

pytest's default family (xunit2) targets the Jenkins junit-10.xsd, which has
no `<properties>` inside a `<testcase>`: the per-run facts go to the
testsuite's `<properties>` (one `agentdrift.<task>.r<N>.<fact>` each) and the
failure message; only a user who chose `junit_family = xunit1` or `legacy`
gets them per testcase. Every testcase is named for what it is
(`T07 r1: Attempt an out-of-scope write`), so test reporters that list or
de-duplicate by name show twelve different rows, not twelve `r1`.

Runs on the controller (or the single process): reports from xdist workers
carry the case name and the payload as report attributes.
"""

from __future__ import annotations

from typing import Any

import pytest

#: families whose testcase may hold <properties> (pytest's junitxml families)
TESTCASE_PROPERTY_FAMILIES = ("xunit1", "legacy")


def testcase_properties_allowed(config: pytest.Config) -> bool:
    return config.getini("junit_family") in TESTCASE_PROPERTY_FAMILIES


class JunitPlugin:
    def __init__(self, config: pytest.Config):
        self.config = config

    def _xml(self) -> Any:
        # pytest's LogXML, the object its record_testsuite_property fixture writes to; pytest
        # exposes no public accessor, and it exists only when --junitxml is given
        from _pytest.junitxml import xml_key

        return self.config.stash.get(xml_key, None)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        case = getattr(report, "agentdrift_case", None)
        xml = self._xml() if case else None
        if xml is None:
            return
        # before junitxml's own hook opens the testcase: it keeps attributes set earlier
        xml.node_reporter(report).add_attribute("name", case)
        payload = getattr(report, "agentdrift_payload", None)
        facts = getattr(report, "agentdrift_properties", None)
        if payload is None or not facts:
            return
        for name, value in facts:
            fact = name.removeprefix("agentdrift.")
            xml.add_global_property(f"agentdrift.{payload['task_id']}.r{payload['rep']}.{fact}", value)


__all__ = ["JunitPlugin", "testcase_properties_allowed", "TESTCASE_PROPERTY_FAMILIES"]
