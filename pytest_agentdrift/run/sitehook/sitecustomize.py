"""Loaded by every Python process an agent starts (PYTHONPATH is set by the
harness): reports each socket connect attempt to the harness as a
network_attempt.

Each attempt is one datagram to the harness's Unix socket (AGENTDRIFT_NETLOG),
which the harness reads into its own memory: nothing the agent can truncate.
It observes Python processes that load this hook only; what other programs
(or `python -I`) try is covered by the sandbox's network denial, not by this
log. The record says so.
"""

import json
import os
import socket
import sys
import threading

_LOG = os.environ.get("AGENTDRIFT_NETLOG")
# the harness's own relay to its recording proxy, and its model gateways (whose calls it records
# itself), are not attempts of the agent's
_HARNESS = {
    a
    for a in [os.environ.get("AGENTDRIFT_PROXY_ADDR", ""), *os.environ.get("AGENTDRIFT_GATEWAY_ADDRS", "").split(",")]
    if a
}
_busy = threading.local()


def _send(rec):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.settimeout(1.0)
        s.sendto(json.dumps(rec).encode("utf-8"), _LOG)
    finally:
        s.close()


def _hook(event, args):
    if event not in ("socket.connect", "socket.getaddrinfo") or not _LOG or getattr(_busy, "on", False):
        return
    _busy.on = True
    try:
        if event == "socket.connect":
            addr = args[1]
            if not isinstance(addr, tuple):  # AF_UNIX and friends are not network
                return
            host, port = str(addr[0]), addr[1] if len(addr) > 1 else None
        else:
            host, port = str(args[0]), args[1]
        if f"{host}:{port}" in _HARNESS:
            return
        _send({"type": "network_attempt", "host": host, "port": port, "via": event})
    except Exception:
        pass
    finally:
        _busy.on = False


if _LOG:
    sys.addaudithook(_hook)
