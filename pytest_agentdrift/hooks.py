"""Hook specifications of pytest-agentdrift (registered in pytest_addhooks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_agentdrift.agents.base import AgentAdapter
    from pytest_agentdrift.manifest.identity import StampComparison
    from pytest_agentdrift.shapes import Results


@pytest.hookspec(firstresult=True)
def pytest_agentdrift_generate_manifest(config: pytest.Config) -> dict[str, object] | None:
    """Return the runtime manifest (a dict) to use instead of the default capture.

    Example::

        def pytest_agentdrift_generate_manifest(config):
            return my_company.capture(config)
    """


def pytest_agentdrift_update_manifest(config: pytest.Config, manifest: dict[str, object]) -> None:
    """Add or change fields of the captured manifest in place, before it is hashed.

    Example::

        def pytest_agentdrift_update_manifest(config, manifest):
            manifest["identity"]["image_digest"] = os.environ.get("IMAGE_DIGEST", "unobserved")
    """


@pytest.hookspec(firstresult=True)
def pytest_agentdrift_compare_stamps(
    config: pytest.Config, baseline: dict[str, object], current: dict[str, object], vary: list[str]
) -> StampComparison | None:
    """Compare two manifests; return a stamps.StampComparison to replace the strict default.

    Example (relax one field)::

        def pytest_agentdrift_compare_stamps(config, baseline, current, vary):
            from pytest_agentdrift.manifest.identity import compare_manifests
            return compare_manifests(baseline, current, [*vary, "os"])
    """


def pytest_agentdrift_register_adapters(config: pytest.Config) -> dict[str, type[AgentAdapter]] | None:
    """Return {preset name: AgentAdapter subclass} to add agent presets.

    Example::

        def pytest_agentdrift_register_adapters(config):
            return {"my-agent": MyAgentAdapter}
    """


def pytest_agentdrift_modify_report(config: pytest.Config, results: Results) -> None:
    """Touch the results dict in place just before results.json and report.md are written."""
