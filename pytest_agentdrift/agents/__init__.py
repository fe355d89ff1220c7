"""Agent adapters: how an agent is invoked and how its output is read.

`get_adapter(name)` resolves a preset name (`reference`, `claude-code`, ...);
`CommandAdapter` serves any `--agent-cmd`. Third parties register adapters
with the `pytest_agentdrift_register_adapters` hook or the
`pytest_agentdrift.adapters` entry-point group (see docs/agents.md).
"""

from pytest_agentdrift.agents.base import (
    AdapterOutput,
    AgentAdapter,
    CommandAdapter,
    RunContext,
    Usage,
    builtin_adapters,
    get_adapter,
)

__all__ = [
    "AdapterOutput",
    "AgentAdapter",
    "CommandAdapter",
    "RunContext",
    "Usage",
    "builtin_adapters",
    "get_adapter",
]
