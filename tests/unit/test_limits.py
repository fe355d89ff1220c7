"""The pure parts of resource limits and of the observers: option values, cgroup discovery
(against a fake /proc and /sys), tmpfs sizing, DNS messages, socket lookup, event merging,
and the write watcher and the sandbox's first process on a plain directory (no sandbox)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.options import add_options, resolve
from pytest_agentdrift.run import dnsstub, limits, netwatch, sandboxinit
from pytest_agentdrift.run.watch import WriteWatcher, usage

GiB, MiB = 1 << 30, 1 << 20


# ---- option values ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "text", "value"),
    [
        ("memory", "1G", GiB),
        ("memory", "200M", 200 * MiB),
        ("memory", "1.5GiB", GiB + GiB // 2),
        ("memory", "4096", 4096),
        ("disk", "512mb", 512 * MiB),
        ("shm", "64k", 64 << 10),
        ("procs", "256", 256),
        ("files", "10k", 10_000),
        ("memory", "none", None),
        ("procs", "unlimited", None),
        ("files", "OFF", None),
    ],
)
def test_parse_value(key, text, value):
    assert limits.parse_value(key, text) == value


@pytest.mark.parametrize(
    ("key", "text", "message"),
    [
        ("memory", "lots", "'lots' is not a size"),
        ("memory", "0", "must be greater than 0"),
        ("procs", "1.5", "'1.5' is not a whole number"),
        ("procs", "2G", "'2G' is not a whole number"),
        ("files", "-3", "is not a whole number"),
    ],
)
def test_parse_value_refuses(key, text, message):
    with pytest.raises(ValueError, match=message):
        limits.parse_value(key, text)


def test_entries_errors_name_the_source_and_the_key():
    with pytest.raises(
        AgentDriftError, match=r"--agent-limit: unknown limit 'cpu' \(keys: memory, procs, disk, shm, tmp, files\)"
    ):
        limits.parse_entries(["cpu=2"], "--agent-limit")
    with pytest.raises(AgentDriftError, match=r"--agent-limit: 'memory' is not KEY=VALUE"):
        limits.parse_entries(["memory"], "--agent-limit")
    with pytest.raises(AgentDriftError, match=r"ini option agent_limits: memory=big: 'big' is not a size"):
        limits.parse_entries(["memory=big"], "ini option agent_limits")


def test_defaults_then_ini_then_cli_per_key():
    got = limits.resolve_limits(["memory=2G", "procs=100"], ["procs=50", "files=none"])
    assert got == {**limits.DEFAULT_LIMITS, "memory": 2 * GiB, "procs": 50, "files": None}
    assert limits.resolve_limits([], []) == limits.DEFAULT_LIMITS
    assert list(got) == ["memory", "procs", "disk", "shm", "tmp", "files"]


def _settings(cli: list[str] | None, ini: list[str]):
    opts, inis = {}, {}

    def addoption(flag, dest, **kw):
        opts[dest] = None

    def addini(name, help, type, default):
        inis[name] = default

    add_options(addoption, addini)
    opts["agentdrift_limits"] = cli
    inis["agent_limits"] = ini
    return resolve(opts.get, inis.get, Path("."))


def test_option_and_ini_twin():
    s = _settings(["memory=1G", "procs=256"], ["memory=3G", "disk=1G"])
    assert s.limits["memory"] == GiB and s.limits["procs"] == 256 and s.limits["disk"] == GiB
    assert s.limits["shm"] == limits.DEFAULT_LIMITS["shm"]
    with pytest.raises(AgentDriftError, match="ini option agent_limits: unknown limit 'cores'"):
        _settings(None, ["cores=2"])


def test_human():
    assert (
        limits.describe({"memory": GiB, "procs": 256, "disk": 200 * MiB, "files": None})
        == "memory 1 GiB, procs 256, disk 200 MiB, files off"
    )
    assert limits.human("memory", 12345) == "12345 B"


# ---- tmpfs sizes ---------------------------------------------------------------------------------


def test_size_tmpfs_sizes_every_tmpfs_and_leaves_the_command_alone():
    argv = "bwrap --ro-bind / / --tmpfs /dev/shm --tmpfs /tmp/x --size 5 --tmpfs /y --bind /w /w -- sh --tmpfs /z"
    sized = "bwrap --ro-bind / / --size 64 --tmpfs /dev/shm --size 128 --tmpfs /tmp/x --size 5 --size 128 --tmpfs /y"
    assert limits.size_tmpfs(argv.split(), 64, 128) == f"{sized} --bind /w /w -- sh --tmpfs /z".split()
    argv = argv.split()
    assert limits.size_tmpfs(argv[:8], None, None) == argv[:8]


# ---- cgroups against a fake root -----------------------------------------------------------------


def _fake_root(tmp_path: Path, cgroup: str, mountinfo: str, dirs: dict[str, dict[str, str]]) -> Path:
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text(cgroup)
    (tmp_path / "proc/self/mountinfo").write_text(mountinfo)
    for d, files in dirs.items():
        p = tmp_path / d.lstrip("/")
        p.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            if content is None:
                (p / name).mkdir()  # a file that cannot be written
            else:
                (p / name).write_text(content)
    return tmp_path


V1_MOUNTS = """\
30 25 0:26 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
31 25 0:27 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
32 25 0:28 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def test_v1_layout_like_this_machine(tmp_path):
    root = _fake_root(
        tmp_path,
        "8:pids:/\n4:memory:/process_api/abc\n0::/\n",
        V1_MOUNTS,
        {
            "/sys/fs/cgroup/memory/process_api/abc": {"cgroup.procs": ""},
            "/sys/fs/cgroup/pids": {"cgroup.procs": ""},
            "/sys/fs/cgroup/unified": {"cgroup.controllers": "hugetlb\n", "cgroup.subtree_control": ""},
        },
    )
    lay = limits.CgroupLayout.discover(root)
    assert lay.controllers["memory"] == limits.Controller("memory", 1, root / "sys/fs/cgroup/memory/process_api/abc")
    assert lay.controllers["pids"] == limits.Controller("pids", 1, root / "sys/fs/cgroup/pids")
    assert lay.notes == ()


def test_v2_root_cgroup_enables_controllers_for_children(tmp_path):
    root = _fake_root(
        tmp_path,
        "0::/\n",
        "40 25 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n",
        {
            "/sys/fs/cgroup": {
                "cgroup.controllers": "cpu memory pids\n",
                "cgroup.subtree_control": "",
                "cgroup.procs": "",
            }
        },
    )
    lay = limits.CgroupLayout.discover(root)
    mnt = root / "sys/fs/cgroup"
    assert lay.controllers == {"memory": limits.Controller("memory", 2, mnt), "pids": limits.Controller("pids", 2, mnt)}
    assert (mnt / "cgroup.subtree_control").read_text() == "+pids"  # the last write: one per controller


def test_v2_delegated_parent_hosts_the_runs_beside_the_harness(tmp_path):
    root = _fake_root(
        tmp_path,
        "0::/user.slice/harness.scope\n",
        "40 25 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n",
        {
            "/sys/fs/cgroup/user.slice": {
                "cgroup.controllers": "memory pids\n",
                "cgroup.subtree_control": "memory pids\n",
            },
            "/sys/fs/cgroup/user.slice/harness.scope": {
                "cgroup.controllers": "memory pids\n",
                "cgroup.subtree_control": "",
                "cgroup.procs": "1234\n",
            },
        },
    )
    lay = limits.CgroupLayout.discover(root)
    parent = root / "sys/fs/cgroup/user.slice"
    assert lay.controllers["memory"] == limits.Controller("memory", 2, parent, "beside the harness's own cgroup")
    assert lay.controllers["pids"].parent == parent
    assert (root / "sys/fs/cgroup/user.slice/harness.scope/cgroup.subtree_control").read_text() == ""  # never touched


def test_v2_controller_that_cannot_be_handed_down_falls_back_and_says_why(tmp_path):
    root = _fake_root(
        tmp_path,
        "0::/busy\n",
        "40 25 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
        {
            "/sys/fs/cgroup": {"cgroup.controllers": "memory pids\n", "cgroup.subtree_control": ""},
            "/sys/fs/cgroup/busy": {"cgroup.controllers": "memory pids\n", "cgroup.subtree_control": ""},
        },
    )
    lay = limits.CgroupLayout.discover(root)
    assert lay.controllers == {}
    assert lay.notes[0].startswith("cgroup v2 memory: neither ")
    assert "delegated cgroup" in lay.notes[0] and lay.notes[1].startswith("cgroup v2 pids")


def test_no_cgroups_at_all(tmp_path):
    root = _fake_root(tmp_path, "0::/\n", "20 1 0:2 / / rw - ext4 /dev/vda rw\n", {})
    lay = limits.CgroupLayout.discover(root)
    assert lay.controllers == {}
    assert lay.notes == ("no memory cgroup controller is mounted here", "no pids cgroup controller is mounted here")


def test_run_cgroups_write_limits_and_read_what_bit(tmp_path):
    mem, pids = tmp_path / "mem", tmp_path / "pids"
    for d in (mem, pids):
        d.mkdir()
    lay = limits.CgroupLayout(
        {"memory": limits.Controller("memory", 1, mem), "pids": limits.Controller("pids", 2, pids)}
    )
    cg = limits.RunCgroups.create(lay, "agentdrift-1-run", {"memory": 200 * MiB, "procs": 64})
    assert (mem / "agentdrift-1-run/memory.limit_in_bytes").read_text() == str(200 * MiB)
    assert (pids / "agentdrift-1-run/pids.max").read_text() == "64"
    (mem / "agentdrift-1-run/memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    (mem / "agentdrift-1-run/memory.max_usage_in_bytes").write_text(f"{200 * MiB}\n")
    (mem / "agentdrift-1-run/memory.failcnt").write_text("17\n")
    (pids / "agentdrift-1-run/pids.events").write_text("max 5\n")
    (pids / "agentdrift-1-run/pids.peak").write_text("64\n")
    assert cg.stats() == {
        "memory": {"peak": 200 * MiB, "failcnt": 17, "oom_kill": 2},
        "pids": {"peak": 64, "refused": 5},
    }


def test_stale_run_cgroups_of_dead_harnesses_are_removed(tmp_path):
    dead = tmp_path / "agentdrift-999999999-aaaa"
    dead.mkdir()
    (tmp_path / f"agentdrift-{os.getpid()}-bbbb").mkdir()
    limits._remove_stale(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"agentdrift-{os.getpid()}-bbbb"]


# ---- DNS messages ----------------------------------------------------------------------------------


def _query(name: str, qtype: int = 1, qid: int = 0x1234) -> bytes:
    q = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q + struct.pack("!HH", qtype, 1)


def test_dns_query_answered_nxdomain():
    q = dnsstub.parse_query(_query("rates.invoicekit.invalid", 28))
    assert (q.name, q.qtype_name, q.id) == ("rates.invoicekit.invalid", "AAAA", 0x1234)
    reply = dnsstub.nxdomain(q)
    qid, flags, qd, an, ns, ar = struct.unpack_from("!HHHHHH", reply)
    assert (qid, flags & 0x8000, flags & 0x0100, flags & 0xF, qd, an, ns, ar) == (0x1234, 0x8000, 0x0100, 3, 1, 0, 0, 0)
    assert reply[12:] == _query("rates.invoicekit.invalid", 28)[12:]


@pytest.mark.parametrize(
    "msg",
    [
        b"",
        b"\x00" * 11,
        struct.pack("!HHHHHH", 1, 0x8000, 1, 0, 0, 0) + b"\0\0\1\0\1",
        struct.pack("!HHHHHH", 1, 0, 1, 0, 0, 0) + b"\x05ab",
        struct.pack("!HHHHHH", 1, 0, 1, 0, 0, 0) + b"\xc0\x0c\0\1\0\1",
    ],
)
def test_dns_malformed(msg):
    with pytest.raises(ValueError):
        dnsstub.parse_query(msg)


def test_dns_stub_answers_on_its_udp_and_tcp_sockets_until_stopped():
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    events = []
    stub = dnsstub.DnsStub(udp, tcp, events.append).start()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
            client.settimeout(30)
            client.sendto(_query("udp.example", qid=7), udp.getsockname())
            reply, _ = client.recvfrom(4096)
        with socket.create_connection(tcp.getsockname(), timeout=30) as conn:
            msg = _query("tcp.example", qid=8)
            conn.sendall(struct.pack("!H", len(msg)) + msg)
            (n,) = struct.unpack("!H", conn.recv(2))
            reply_tcp = conn.recv(n)
    finally:
        stub.stop()
    assert struct.unpack("!H", reply[:2])[0] == 7 and reply[3] & 0xF == 3  # NXDOMAIN
    assert struct.unpack("!H", reply_tcp[:2])[0] == 8 and reply_tcp[3] & 0xF == 3
    assert [(e["host"], e["via"]) for e in events] == [("udp.example", "dns"), ("tcp.example", "dns")]
    assert not any(t.is_alive() for t in stub._threads)  # the wake pipe ended both waits


def test_dns_stub_counts_a_lookup_once_and_names_the_program():
    events, now = [], [100.0]
    stub = dnsstub.DnsStub(None, None, events.append, lambda proto, addr: "curl", clock=lambda: now[0])
    for qtype in (1, 28):  # a resolver asks A and AAAA from one socket
        assert stub.answer(_query("example.com", qtype), "udp", ("127.0.0.1", 40000)) is not None
    stub.answer(_query("example.com"), "udp", ("127.0.0.1", 40001))  # the next attempt: a new socket
    now[0] += 5
    stub.answer(_query("example.com"), "udp", ("127.0.0.1", 40000))
    assert [e["host"] for e in events] == ["example.com"] * 3
    assert events[0] == {
        "source": "harness",
        "type": "network_attempt",
        "host": "example.com",
        "port": None,
        "program": "curl",
        "allowed": False,
        "via": "dns",
        "qtype": "A",
    }
    assert stub.queries == 4
    assert stub.answer(b"\x00\x01garbage-but-long-enough", "udp", ("127.0.0.1", 1))[3] & 0xF == 1  # FORMERR


def test_dns_stub_over_udp_and_tcp_on_loopback():
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(4)
    events = []
    stub = dnsstub.DnsStub(udp, tcp, events.append).start()
    try:
        c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        c.settimeout(5)
        c.sendto(_query("one.example"), udp.getsockname())
        assert c.recv(512)[3] & 0xF == 3
        t = socket.create_connection(tcp.getsockname(), timeout=5)
        msg = _query("two.example")
        t.sendall(struct.pack("!H", len(msg)) + msg)
        n = struct.unpack("!H", t.recv(2))[0]
        assert t.recv(n)[3] & 0xF == 3
        t.close()
    finally:
        stub.stop()
    assert sorted(e["host"] for e in events) == ["one.example", "two.example"]


# ---- which program owns a socket; merging the Python hook's events ----------------------------------


def test_parse_proc_net_addresses():
    assert netwatch._parse_addr("0100007F:0035") == ("127.0.0.1", 53)
    assert netwatch._parse_addr("0000000000000000FFFF00000100007F:0C38") == ("::ffff:127.0.0.1", 3128)


def test_owner_program_finds_this_process():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    try:
        addr = s.getsockname()
        assert netwatch.socket_inode(os.getpid(), "udp", addr) == os.fstat(s.fileno()).st_ino
        prog = netwatch.owner_program(os.getpid(), "udp", addr, lambda: [os.getpid()])
        assert prog == os.path.basename(os.readlink("/proc/self/exe"))
        assert netwatch.owner_program(os.getpid(), "udp", ("127.0.0.1", 1), lambda: [os.getpid()]) is None
    finally:
        s.close()


def test_python_hook_lookups_seen_by_the_stub_count_once():
    hook = [
        {"type": "network_attempt", "host": "rates.example", "port": 443, "via": "socket.getaddrinfo"},
        {"type": "network_attempt", "host": "rates.example", "port": 443, "via": "socket.getaddrinfo"},
        {"type": "network_attempt", "host": "10.0.0.1", "port": 80, "via": "socket.connect"},
    ]
    dns = [{"type": "network_attempt", "host": "rates.example", "via": "dns"}]
    assert netwatch.merge_python_hook_events(hook, dns) == hook[1:]


# ---- the write watcher on a plain directory ----------------------------------------------------------


def _watch(tmp_path, **kw):
    root = tmp_path / "run"
    work = root / "box" / "work"
    work.mkdir(parents=True)
    (work / "a.txt").write_text("a")
    (root / "box" / ".harness").mkdir()
    w = WriteWatcher(root, work, unreported=(root / "box" / ".harness",), **kw).start()
    w.mark_start()
    return root, work, w


def _settle(w, cond, timeout=120.0):
    # returns as soon as the watcher caught up: the bound is only for a watcher that never does,
    # and a loaded machine (the suite's other sessions) can keep a sound one behind for seconds
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not cond():
        time.sleep(0.02)


def test_watcher_records_writes_moves_and_deletes(tmp_path):
    root, work, w = _watch(tmp_path)

    def step(action, kind, path):
        action()
        _settle(w, lambda: (kind, path) in [(e["kind"], e["path"]) for e in w.events])

    try:
        (work / "a.txt").write_text("changed")
        step(lambda: (work / "a.txt").write_text("a"), "modify", "a.txt")  # reverted at once: still two edits
        step(lambda: (work / "pkg").mkdir(), "create", "pkg")
        step(lambda: (work / "pkg" / "m.py").write_text("x = 1\n"), "create", "pkg/m.py")
        step(lambda: os.rename(work / "pkg", work / "lib"), "move", "lib")
        step(lambda: (work / "lib" / "m.py").write_text("x = 2\n"), "modify", "lib/m.py")
        step(lambda: os.unlink(work / "lib" / "m.py"), "delete", "lib/m.py")
        home = root / "box" / "home"
        step(lambda: (home / "sub").mkdir(parents=True), "create", str(home))
        step(lambda: (home / "sub" / ".cache").write_text("c"), "create", str(home / "sub" / ".cache"))
        (root / "box" / ".harness" / "report.json").write_text("{}")  # the protocol's own file: not a write event
        # made faster than a watch can follow: found by the scan of the new directory, reported as created
        step(
            lambda: (work / "x" / "y").mkdir(parents=True) or (work / "x" / "y" / "z.txt").write_text("z"),
            "create",
            "x",
        )
        _settle(w, lambda: ("create", "x/y/z.txt") in [(e["kind"], e["path"]) for e in w.events])
        # two writes in one open are one edit: the second is coalesced. The first is seen before the
        # second is made, so the kernel's own merging of unread identical events cannot hide it
        with open(work / "log.txt", "w") as fh:
            fh.write("1")
            fh.flush()
            _settle(w, lambda: ("modify", "log.txt") in [(e["kind"], e["path"]) for e in w.events])
            fh.write("2")
            fh.flush()
            _settle(w, lambda: w.coalesced >= 1)
    finally:
        w.stop()
    got = [(e["kind"], e["path"]) for e in w.events]
    assert got[:2] == [("modify", "a.txt")] * 2 and ("modify", "a.txt") not in got[2:]
    for want in [
        ("create", "pkg"),
        ("create", "pkg/m.py"),
        ("move", "pkg"),
        ("move", "lib"),
        ("modify", "lib/m.py"),
        ("delete", "lib/m.py"),
        ("create", str(root / "box" / "home")),
        ("create", str(root / "box" / "home" / "sub" / ".cache")),
        ("create", "x"),
        ("create", "x/y/z.txt"),
    ]:
        assert want in got, (want, got)
    assert got.index(("move", "pkg")) + 1 == got.index(("move", "lib"))  # a rename: the old path, then the new
    assert not any("report.json" in p for _, p in got)
    assert all(set(e) == {"source", "type", "path", "t", "kind"} for e in w.events)
    assert all(e["source"] == "harness" and e["type"] == "write" and e["t"] >= 0 for e in w.events)
    assert w.coalesced >= 1 and got.count(("modify", "log.txt")) == 1
    # `files`: the work tree's entries and every one the run made beside it (home, home/sub,
    # home/sub/.cache and the protocol's report.json)
    assert w.entries == len(list(work.rglob("*"))) + 4


def test_watcher_caps_its_events_and_counts_the_rest(tmp_path):
    _root, work, w = _watch(tmp_path, max_events=5)
    try:
        for i in range(20):
            (work / f"f{i}").write_text("")
        _settle(w, lambda: len(w.events) + w.dropped >= 20)
    finally:
        w.stop()
    assert len(w.events) == 5 and w.dropped == 15
    assert w.summary()["dropped"] == w.dropped


def test_watcher_stops_a_run_past_the_files_and_disk_limits(tmp_path):
    hits = []
    _root, work, w = _watch(
        tmp_path, limits={"files": 50, "disk": 1 << 20}, on_exceeded=lambda k, v: hits.append((k, v))
    )
    try:
        for i in range(60):
            (work / f"f{i}").write_text("")
        _settle(w, lambda: any(k == "files" for k, _ in hits))
        with open(work / "big", "wb") as fh:
            fh.write(b"x" * (2 << 20))
        _settle(w, lambda: any(k == "disk" for k, _ in hits))
    finally:
        w.stop()
    assert [k for k, _ in hits] == ["files", "disk"]
    assert dict(hits)["files"] > 50 and dict(hits)["disk"] > 2 << 20
    assert w.peaks["files"] > 50


def test_files_count_every_entry_the_run_made_and_disk_the_space_each_takes(tmp_path):
    hits = []
    root, work, w = _watch(
        tmp_path, limits={"files": 2_000, "disk": 16 << 20}, on_exceeded=lambda k, v: hits.append((k, v))
    )
    tmp = root / "box" / "tmp"
    try:
        tmp.mkdir()
        for i in range(500):  # links that hold nothing but a long target: a block each
            os.symlink("t" * 4000, tmp / f"l{i}")
        for i in range(500):
            (tmp / f"d{i}").mkdir()
        made = len(list(work.rglob("*"))) + 1_001  # tmp/ itself and its thousand entries
        _settle(w, lambda: w.entries >= made)
        assert not hits and w.entries == made
        # the space the file system gives each (a directory takes a block on a disk, next to none on a tmpfs)
        assert w.total_bytes >= sum(usage(os.lstat(p)) for p in tmp.iterdir()) >= 500 * 4000
        dirs_take_space = usage(os.lstat(tmp / "d0")) >= 512
        w.note_extra("files", 200)  # what the sandbox's tmpfs mounts hold (the guard's probe)
        assert w.entries == len(list(work.rglob("*"))) + 1_201
        for i in range(1_000):  # $TMPDIR is the run's as much as the work tree
            (tmp / f"d{i % 500}" / f"f{i}").write_bytes(b"")
        _settle(w, lambda: any(k == "files" for k, _ in hits))
        if dirs_take_space:  # on a tmpfs directories cost memory, which the memory limit binds
            big = tmp / "dirs"
            big.mkdir()
            for i in range(5_000):  # directories alone: no regular file grows
                (big / f"{i:04d}").mkdir()
            _settle(w, lambda: any(k == "disk" for k, _ in hits))
    finally:
        w.stop()
    assert [k for k, _ in hits] == (["files", "disk"] if dirs_take_space else ["files"]), hits
    found = dict(hits)
    assert found["files"] > 2_000 and ("disk" not in found or found["disk"] > 16 << 20)


# ---- the sandbox's first process, outside a PID namespace -------------------------------------------


def _init(argv: list[str]) -> tuple[int, dict, bytes]:
    go_r, go_w = os.pipe()
    st_r, st_w = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", sandboxinit.__file__, "--go-fd", str(go_r), "--status-fd", str(st_w), "--", *argv],
        pass_fds=(go_r, st_w),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    os.close(go_r)
    os.close(st_w)
    time.sleep(0.2)
    assert proc.poll() is None  # it waits for the harness
    os.write(go_w, b"x")
    os.close(go_w)
    out, _err = proc.communicate(timeout=30)
    status = {}
    for line in os.read(st_r, 65536).splitlines():
        status.update(json.loads(line))
    os.close(st_r)
    return proc.returncode, status, out


def test_init_waits_then_becomes_the_agent_without_holding_the_status_pipe():
    code, status, out = _init(
        [sys.executable, "-c", "import os; print(os.getpid(), sorted(os.listdir('/proc/self/fd')))"]
    )
    assert code == 0 and status == {}
    assert out.split()[1:] == [b"['0',", b"'1',", b"'2',", b"'3']"]  # stdio and listdir's own fd, no status pipe


def test_init_reports_a_command_that_cannot_start():
    code, status, _ = _init(["/nonexistent/agent"])
    assert code == 127
    assert status == {"launch_error": "cannot start '/nonexistent/agent': No such file or directory"}


def test_a_file_system_larger_than_the_sized_tmpfs_is_not_measured():
    # bubblewrap names its child before the child's mounts exist: its /tmp, seen through /proc, is then
    # the host's disk, which once read as "tmp exceeded" and killed honest runs
    from pytest_agentdrift.run.limits import statvfs_used

    assert statvfs_used("/") is not None
    assert statvfs_used("/", capacity=1 << 20) is None


def test_one_open_write_close_is_one_edit_however_many_writes(tmp_path):
    root, work, w = _watch(tmp_path)
    try:
        with open(work / "a.txt", "w") as fh:
            for _ in range(50):
                fh.write("x" * 100)
                fh.flush()
        _settle(w, lambda: any(e["path"] == "a.txt" for e in w.events))
        time.sleep(0.3)
    finally:
        w.stop()
    # (the kernel may merge the identical modify events itself before the watcher reads them)
    assert [(e["kind"], e["path"]) for e in w.events] == [("modify", "a.txt")]


# ---- the sandbox's first process as PID 1 (under bubblewrap) ------------------------------------------


# ---- the write watcher's reserved inotify instance ---------------------------------------------------


def test_an_edit_through_a_hard_link_is_the_linked_files_write(tmp_path):
    root = tmp_path / "run"
    work, tmp = root / "box" / "work", root / "box" / "tmp"
    work.mkdir(parents=True)
    tmp.mkdir()
    (work / "a.txt").write_text("a")
    sibling = root / "sibling.txt"  # the decoy: not the agent's
    sibling.write_text("s")
    w = WriteWatcher(root, work, private=(tmp,)).start()
    w.mark_start()
    # the links stay until the watcher has read the events: a link gone first cannot be named
    # (the run's evidence then falls back on the file's changed inode: runner's `touched`)
    for i, target in enumerate((work / "a.txt", sibling)):
        with open(os.link(target, tmp / f"link{i}") or tmp / f"link{i}", "r+b") as fh:
            fh.write(b"X")
    _settle(w, lambda: len([e for e in w.events if e.get("via")]) >= 2)
    w.stop()
    via = {e["path"]: e["via"] for e in w.events if e.get("via")}
    assert via == {"a.txt": str(tmp / "link0"), str(sibling): str(tmp / "link1")}, w.events


def test_an_edit_through_a_shared_mapping_is_a_write(tmp_path):
    import mmap

    root, work, w = _watch(tmp_path)
    with open(work / "a.txt", "r+b") as fh:
        m = mmap.mmap(fh.fileno(), 0)
        m[:1] = b"Z"
        m.flush()
        m.close()
    _settle(w, lambda: any(e["path"] == "a.txt" for e in w.events))
    w.stop()
    assert [e["kind"] for e in w.events if e["path"] == "a.txt"] == ["modify"], w.events


def test_settle_judges_every_queued_write_before_it_returns(tmp_path):
    """A watcher that outlives a process (the grading server's) is asked to judge at the end of each
    request: a breach made just before, within the recount interval, is confirmed before settle
    returns, not on a later pass after the process's copy is gone and its files with it."""
    hits = []
    root, work, w = _watch(tmp_path, limits={"files": 200}, on_exceeded=lambda k, v: hits.append((k, v)))
    try:
        many = work / "many"
        many.mkdir()
        for i in range(300):
            (many / str(i)).touch()
        assert w.settle()
        assert [k for k, _ in hits] == ["files"] and w.exceeded["files"] > 200
        shutil.rmtree(many)  # what the server does with the request's copy next
        assert w.settle() and [k for k, _ in hits] == ["files"]
    finally:
        w.stop()
    assert not w.settle()  # a stopped watcher judges nothing more, and says so
