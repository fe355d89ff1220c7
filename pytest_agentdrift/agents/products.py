"""The products the harness knows, and the one place that dispatches to their rules.

Each product keeps its knowledge in its own folder (``agents/<product>/``):
``adapter.py`` (how it is run and read) and ``discovery.py`` (where it reads
instructions and configuration, which trees a bundle snapshot takes, which
environment names are its own). Everything else asks here: capture (facts;
manifest.discovery.discover runs a product's discovery), bundles (snapshot
rules) and the manifest (environment names whose values are safe).

Product modules are imported on first use, never at plugin import time.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from pytest_agentdrift.errors import AgentDriftError

if TYPE_CHECKING:
    from collections.abc import Callable

    from pytest_agentdrift.agents.discovery_base import ConfigSource, Fact

    #: a product's `facts(sources, env, profile)`: what its configuration files say
    FactsReader = Callable[[Sequence[ConfigSource], Mapping[str, str], str | None], dict[str, Fact]]

#: rules name -> package of the product (``<package>.discovery`` holds the rules)
PRODUCT_PACKAGES: dict[str, str] = {
    "claude-code": "pytest_agentdrift.agents.claude_code",
    "codex": "pytest_agentdrift.agents.codex",
    "copilot": "pytest_agentdrift.agents.copilot",
    "gemini": "pytest_agentdrift.agents.gemini",
    "opencode": "pytest_agentdrift.agents.opencode",
}
#: the rules of an agent whose product we do not know (--agent-cmd): only user-named files
GENERIC = "generic"
SURFACE_RULES = (*PRODUCT_PACKAGES, GENERIC)


def rules_module(rules: str) -> ModuleType | None:
    """The product's discovery module, or None for ``generic``; unknown names are a usage error."""
    if rules == GENERIC:
        return None
    if rules not in PRODUCT_PACKAGES:
        raise AgentDriftError(f"unknown surface rules {rules!r}; known: {', '.join(SURFACE_RULES)}")
    return importlib.import_module(PRODUCT_PACKAGES[rules] + ".discovery")


def surface_rules_for(adapter: Mapping[str, object]) -> str:
    """Which product's documented rules apply to an adapter description."""
    text = f"{adapter.get('name', '')} {adapter.get('product', '')}".lower()
    if "claude" in text:
        return "claude-code"
    if "codex" in text:
        return "codex"
    if "copilot" in text:
        return "copilot"
    if "gemini" in text:
        return "gemini"
    if "opencode" in text:
        return "opencode"
    return GENERIC


def surface_facts(
    rules: str, sources: Sequence[ConfigSource], env: Mapping[str, str], profile: str | None = None
) -> dict[str, Fact]:
    """What a product's configuration files say about model, permissions, sandbox, auto-update."""
    module = rules_module(rules)
    if module is None:
        return {}
    facts: FactsReader = module.facts
    return facts(sources, env, profile)


def _all(attribute: str) -> list[frozenset[str]]:
    """One set-valued attribute (environment names) of every product's rules module."""
    return [frozenset(getattr(rules_module(name), attribute)) for name in PRODUCT_PACKAGES]


def non_secret_env_values() -> frozenset[str]:
    """Product environment names whose values select behaviour and are never secret."""
    return frozenset().union(*_all("NON_SECRET_ENV_VALUES"))


def pathlike_env() -> frozenset[str]:
    """Product environment names that hold a private path (names only in the manifest)."""
    return frozenset().union(*_all("PATHLIKE_ENV"))


def bundle_trees(rules: str) -> dict[str, tuple[str, ...]]:
    """Directories a bundle snapshot of this product takes whole: {"project": (...), "user": (...)}."""
    module = rules_module(rules)
    if module is None:
        return {"project": (), "user": ()}
    return {scope: tuple(module.BUNDLE_TREES.get(scope, ())) for scope in ("project", "user")}
