"""Google Gemini CLI: everything the harness knows about this product, in one folder.

`adapter.py` runs it and reads its output; `discovery.py` knows where it
reads its instructions and configuration (for the manifest, bundles and the
sandbox); `defaults.json` and `system.json` are the settings the preset gives
every run.
"""

from pytest_agentdrift.agents.gemini.adapter import GeminiAdapter

__all__ = ["GeminiAdapter"]
