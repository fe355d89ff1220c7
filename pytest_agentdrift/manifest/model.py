"""The model the agent talks to, as identity: the endpoint its requests go to.

`model_endpoint` reads it from the product's configuration, then its environment, then the
product's built-in endpoint, labelled so it never holds a credential. The model's id and options
are read with the other options and configured facts (manifest/capture.py), and the stamp the host
reports fills in after the runs (capture.finalize_manifest).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_agentdrift.canonical import digest
from pytest_agentdrift.vocabulary import UNOBSERVED


def model_endpoint(
    adapter: Mapping[str, Any],
    env: Mapping[str, str],
    facts: Mapping[str, Any],
    reasons: dict[str, str],
    evidence: dict[str, Any],
) -> str:
    """The base URL the product sends its model requests to, as identity (never a credential:
    agents.base.endpoint_label drops user, password, query and fragment).

    The product's configuration first (Codex's selected provider; a Claude Code settings file
    whose `env` block sets its base URL, which the CLI applies over its environment), then its
    environment (ANTHROPIC_BASE_URL, ...), then the product's built-in endpoint."""
    from pytest_agentdrift.agents.base import endpoint_label

    candidates: list[tuple[str, Any]] = []
    fact = facts.get("model_endpoint")
    if isinstance(fact, Mapping):
        per = fact.get("configured_per_context")
        values = {digest(v): v for v in per.values()} if isinstance(per, Mapping) else {"": fact.get("configured")}
        value = next(iter(values.values())) if len(values) == 1 else None
        candidates.append((f"configuration ({fact.get('source', 'config')})", value or fact))
    candidates += [(name, env.get(name)) for name in adapter.get("endpoint_env", ())]
    candidates.append(("the product's built-in endpoint", adapter.get("default_endpoint")))
    for source, value in candidates:
        if not value:
            continue
        label = endpoint_label(value) if isinstance(value, str) else None
        if label is None:
            why = "sets it in an env block, recorded by name only" if "settings_env" in str(value) else None
            return _unobserved(reasons, "model_endpoint", f"{source} {why or 'does not name one http(s) URL'}")
        evidence["model_endpoint"] = {"source": source}
        return label
    return _unobserved(reasons, "model_endpoint", "the agent names no model endpoint the harness can read")


def _unobserved(reasons: dict[str, str], name: str, why: str) -> str:
    reasons.setdefault(name, why)
    return UNOBSERVED
