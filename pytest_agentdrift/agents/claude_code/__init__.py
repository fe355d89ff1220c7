"""Claude Code (Anthropic): everything the harness knows about this product, in one folder.

`adapter.py` runs it and reads its output; `discovery.py` knows where it
reads its instructions and configuration (for the manifest, bundles and the
sandbox).
"""

from pytest_agentdrift.agents.claude_code.adapter import ClaudeCodeAdapter

__all__ = ["ClaudeCodeAdapter"]
