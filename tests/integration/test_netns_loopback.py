"""The network observer binds its listeners to 127.0.0.1 inside the sandbox's network namespace.
Where that namespace's loopback has no 127.0.0.1 yet (bubblewrap sets the loopback up after the
namespace exists, and a busy machine can enter it first) the bind fails with EADDRNOTAVAIL: the
harness waits for the address, a bounded time, instead of recording the observer as unavailable
for the whole run. The namespaces here are made with unshare and ip; the address appears late.
"""

from __future__ import annotations

import errno
import shutil
import socket
import subprocess
import time

import pytest

from pytest_agentdrift.run import netwatch

pytestmark = pytest.mark.skipif(
    not (shutil.which("unshare") and shutil.which("ip")), reason="needs util-linux's unshare and iproute2's ip"
)

#: a process in a new network namespace whose loopback has 127.0.0.1 only after `delay` seconds
LOOPBACK_LATER = """
set -e
ip link set lo up
ip addr del 127.0.0.1/8 dev lo
echo waiting
sleep "$1"
ip addr add 127.0.0.1/8 dev lo
echo up
sleep 30
"""


def in_new_netns(delay: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        ["unshare", "--net", "--user", "--map-root-user", "sh", "-c", LOOPBACK_LATER, "sh", str(delay)],
        stdout=subprocess.PIPE,
        text=True,
    )
    # unshare made the namespace and the loopback has no 127.0.0.1 (or the commands failed: no line)
    if proc.stdout.readline() != "waiting\n":
        proc.kill()
        pytest.skip("unshare and ip could not make a network namespace here")
    return proc


def try_setns(proc: subprocess.Popen[str]) -> None:
    try:
        netwatch.bind_in_netns(proc.pid, [])
    except OSError as exc:
        proc.kill()
        pytest.skip(f"cannot enter another network namespace here: {exc}")


def test_listeners_wait_for_a_loopback_that_comes_up_late():
    proc = in_new_netns(0.5)
    try:
        try_setns(proc)
        socks = netwatch.bind_in_netns(proc.pid, [(socket.SOCK_STREAM, 0), (socket.SOCK_DGRAM, 0)])
        assert proc.stdout.readline() == "up\n"  # bound only once the namespace's loopback was up
        assert [s.getsockname()[0] for s in socks] == ["127.0.0.1", "127.0.0.1"]
        for s in socks:
            s.close()
    finally:
        proc.kill()
        proc.wait()


def test_a_loopback_that_never_comes_up_is_an_error_in_bounded_time(monkeypatch):
    monkeypatch.setattr(netwatch, "LOOPBACK_WAIT_S", 0.3)
    proc = in_new_netns(60)
    try:
        try_setns(proc)
        start = time.monotonic()
        with pytest.raises(OSError) as raised:
            netwatch.bind_in_netns(proc.pid, [(socket.SOCK_STREAM, 0)])
        assert raised.value.errno == errno.EADDRNOTAVAIL
        assert time.monotonic() - start < 5
    finally:
        proc.kill()
        proc.wait()
