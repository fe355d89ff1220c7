"""OpenCode: everything the harness knows about this product, in one folder.

`adapter.py` runs it and reads its output; `discovery.py` knows where it
reads its instructions and configuration (for the manifest, bundles and the
sandbox).
"""

from pytest_agentdrift.agents.opencode.adapter import OpenCodeAdapter

__all__ = ["OpenCodeAdapter"]
