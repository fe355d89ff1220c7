"""Runs inside the sandbox in front of a real agent: listens on the sandbox's
own loopback and relays every connection to the harness's recording proxy
through a Unix socket bound into the sandbox, then runs the agent.

The sandbox has no network of its own; this relay is the only way out, and
the proxy on the other end decides (allowlist) and records every attempt.

    python -m pytest_agentdrift.run.forwarder --port 3128 --unix SOCK [--relay PORT=SOCK]... -- AGENT ARGV...

Each `--relay` is one more loopback port relayed to a Unix socket of the harness's (its model
gateways, run/modelgateway.py).
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import threading

from pytest_agentdrift.vocabulary import EXIT_AGENT_NOT_STARTED


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(1 << 16)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _serve(listener: socket.socket, unix_path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(unix_path)
        except OSError:
            client.close()
            upstream.close()
            continue
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _relay_spec(parser: argparse.ArgumentParser, spec: str) -> tuple[int, str]:
    port, sep, path = spec.partition("=")
    if not sep or not port.isdigit() or not path:
        parser.error(f"--relay {spec!r}: expected PORT=SOCK")
    return int(port), path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentdrift-forwarder")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--unix", required=True)
    parser.add_argument("--relay", action="append", default=[], metavar="PORT=SOCK")
    parser.add_argument("agent", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    agent = args.agent[1:] if args.agent[:1] == ["--"] else args.agent
    if not agent:
        parser.error("no agent command after --")
    for port, path in [(args.port, args.unix), *(_relay_spec(parser, r) for r in args.relay)]:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    try:
        return subprocess.call(agent)
    except OSError as exc:
        print(f"agentdrift-forwarder: cannot start {agent[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_AGENT_NOT_STARTED


if __name__ == "__main__":
    sys.exit(main())
