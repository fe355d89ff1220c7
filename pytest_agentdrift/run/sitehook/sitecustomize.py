"""Loaded by every Python process an agent starts (PYTHONPATH is set by the
harness): records each socket connect attempt as a network_attempt event.

It observes Python processes only; what non-Python programs try is covered
by the sandbox's network denial, not by this log. The manifest says so.
"""

import json
import os
import sys

_LOG = os.environ.get("AGENTDRIFT_NETLOG")
# the harness's own relay to its recording proxy is not an attempt of the agent's
_PROXY = os.environ.get("AGENTDRIFT_PROXY_ADDR", "")


def _hook(event, args):
    if event not in ("socket.connect", "socket.getaddrinfo") or not _LOG:
        return
    try:
        if event == "socket.connect":
            addr = args[1]
            if not isinstance(addr, tuple):  # AF_UNIX and friends are not network
                return
            host, port = str(addr[0]), addr[1] if len(addr) > 1 else None
        else:
            host, port = str(args[0]), args[1]
        if _PROXY and f"{host}:{port}" == _PROXY:
            return
        rec = {"type": "network_attempt", "host": host, "port": port, "via": event, "source": "harness"}
        with open(_LOG, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec) + "\n")
    except Exception:
        pass


if _LOG:
    sys.addaudithook(_hook)
