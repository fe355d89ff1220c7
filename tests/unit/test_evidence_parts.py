"""The pure parts of the evidence work: escaping, fd-based trees, budgets,
raw-byte change examination, agent events, the canary token search, the network log."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import stat
from pathlib import Path

import pytest
from helpers import fd_chain

from pytest_agentdrift.run import agentio, canary, netlog, tamper
from pytest_agentdrift.safetext import escape_path, escape_text, json_safe, unescape_path
from pytest_agentdrift.tasks import fdtree, treesnap


# ---- escaping ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "raw",
    [
        b"plain/name.py",
        b"caf\xe9.txt",
        b"a\nb",
        b"\x1b[31mred",
        b"back\\slash",
        b"tab\there",
        b"cr\rlf",
        b"\xff\xfe",
        "bidi\u202eevil".encode(),
        "sep\u2028x".encode(),
        "nbsp\u00a0x".encode(),
        "c1\u0085x".encode(),
        b"\x7f",
        "emoji \U0001f600 ok".encode(),
    ],
)
def test_escape_path_is_one_printable_line_and_lossless(raw):
    name = os.fsdecode(raw)
    esc = escape_path(name)
    assert esc.isprintable() and "\n" not in esc and "\x1b" not in esc
    esc.encode("utf-8")  # always writable as UTF-8 JSON
    assert os.fsencode(unescape_path(esc)) == raw


def test_escape_forms_are_unambiguous():
    assert escape_path("a\\xff") == "a\\\\xff"  # a literal backslash is doubled
    assert escape_path(os.fsdecode(b"\xff")) == "\\xff"  # a raw byte
    assert escape_path("\u00ff") == "\u00ff"  # a printable character stays itself
    assert escape_path("\u0085") == "\\u0085"  # a C1 control is not confused with byte 0x85
    assert escape_path("\x1b") == "\\x1b"


def test_escape_text_keeps_lines_and_tabs_but_not_terminal_controls():
    assert escape_text("a\tb\nc") == "a\tb\nc"
    assert escape_text("\x1b[2Jgone\rover") == "\\x1b[2Jgone\\rover"


def test_json_safe_makes_any_value_encodable():
    value = {"p": os.fsdecode(b"x\xff"), "n": float("nan"), "i": float("inf"), "lone": "\ud800", "ok": [1, "a"]}
    safe = json_safe(value)
    text = json.dumps(safe, ensure_ascii=False, allow_nan=False)
    text.encode("utf-8")
    assert safe == {"p": "x\\xff", "n": None, "i": None, "lone": "\\ud800", "ok": [1, "a"]}


# ---- fd trees ---------------------------------------------------------------------------------
def _chain(root: Path, depth: int, name: str = "d") -> None:
    root.mkdir(parents=True, exist_ok=True)
    fd_chain(root, [name] * depth, "leaf.txt", b"leaf\n")


def test_walk_reaches_beyond_path_max_and_recursion_limit(tmp_path):
    _chain(tmp_path / "t", 1500, "n" * 30)  # ~46,000 characters deep, 1,500 levels
    stats = fdtree.WalkStats()
    items = [(i.rel, i.stat().st_size) for i in fdtree.walk(tmp_path / "t", stats=stats)]
    assert len(items) == 1 and items[0][0].endswith("/leaf.txt") and items[0][1] == 5
    assert stats.max_depth == 1500 and stats.longest_path > fdtree.PATH_MAX
    assert fdtree.read_at(tmp_path / "t", items[0][0], 100) == b"leaf\n"
    assert fdtree.rmtree(tmp_path / "t") == []
    assert not (tmp_path / "t").exists()


def test_walk_never_follows_symlinks_and_stops_at_max_names(tmp_path):
    (tmp_path / "t" / "a").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_text("s")
    os.symlink(tmp_path / "outside", tmp_path / "t" / "link")
    for i in range(10):
        (tmp_path / "t" / "a" / f"f{i}").write_text("x")
    rels = sorted(i.rel for i in fdtree.walk(tmp_path / "t"))
    assert "link" in rels and not any("secret" in r for r in rels)
    stats = fdtree.WalkStats()
    assert len(list(fdtree.walk(tmp_path / "t", max_names=5, stats=stats))) < 5
    assert stats.truncated == "more than 5 entries"
    with pytest.raises(OSError):
        fdtree.open_at(tmp_path / "t", "link/secret")  # a symlinked component is refused


def test_copy_is_sparse_aware_and_bounded(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    with open(src / "sparse.bin", "wb") as fh:
        fh.truncate(8 << 30)
        fh.seek(1 << 20)
        fh.write(b"data in the middle")
    (src / "a.txt").write_text("a")
    os.mkfifo(src / "fifo")
    os.symlink("a.txt", src / "ln")
    (src / "empty").mkdir()
    report = fdtree.copy_tree(src, tmp_path / "dst")
    assert (tmp_path / "dst" / "sparse.bin").stat().st_size == 8 << 30
    assert (tmp_path / "dst" / "sparse.bin").stat().st_blocks * 512 < 1 << 20  # holes stay holes
    with open(tmp_path / "dst" / "sparse.bin", "rb") as fh:
        fh.seek(1 << 20)
        assert fh.read(18) == b"data in the middle"
    assert os.readlink(tmp_path / "dst" / "ln") == "a.txt"
    assert (tmp_path / "dst" / "empty").is_dir()
    assert report.special == ["fifo"] and report.skipped == [] and report.complete
    small = fdtree.copy_tree(src, tmp_path / "dst2", budget=fdtree.CopyBudget(entries=100, data_bytes=4))
    assert small.truncated == "more than 4 bytes of data"
    assert any(s.startswith("sparse.bin (") for s in small.skipped)


def test_copy_depth_budget_and_rmtree_of_unreadable_dirs(tmp_path):
    _chain(tmp_path / "src", 20)
    report = fdtree.copy_tree(tmp_path / "src", tmp_path / "dst", budget=fdtree.CopyBudget(depth=10))
    assert report.skipped == ["d/" * 20 + "leaf.txt (deeper than 10 directories)"]
    locked = tmp_path / "src" / "d" / "d"
    os.chmod(locked, 0)
    assert fdtree.rmtree(tmp_path / "src") == []
    os.symlink(tmp_path / "dst", tmp_path / "alias")
    assert fdtree.rmtree(tmp_path / "alias") == [] and (tmp_path / "dst").is_dir()  # the link, not its target


# ---- budgeted snapshots and raw-byte examination -------------------------------------------------
def test_snapshot_budget_examines_fixture_entries_first(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    (root / "keep.py").write_text("x = 1\n")
    before = treesnap.snapshot(root)
    (root / "keep.py").write_text("x = 2\n")
    for i in range(30):
        (root / f"junk{i:02}").write_text("j")
    report = treesnap.WalkReport()
    after = treesnap.resnapshot(root, before, budget=treesnap.Budget(new_entries=10), report=report)
    d = treesnap.diff(before, after)
    assert d.modified == ["keep.py"]  # never lost to the budget
    assert len(d.added) == 10 and report.not_examined == 20 and not report.complete
    assert report.describe() == "20 new entries not examined (budget 10 examined)"


def test_large_changed_fixture_file_is_compared_by_signature(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    (root / "big.bin").write_bytes(b"a" * 1000)
    before = treesnap.snapshot(root)
    (root / "big.bin").write_bytes(b"b" * 1000)
    report = treesnap.WalkReport()
    after = treesnap.resnapshot(root, before, budget=treesnap.Budget(hash_file_bytes=100), report=report)
    assert after["big.bin"].sha256.startswith("unhashed:") and report.unhashed == ["big.bin"]
    assert treesnap.diff(before, after).modified == ["big.bin"]


def _changes(tmp_path: Path, files: dict[str, bytes], old: dict[str, bytes] | None = None):
    a, b = tmp_path / "a", tmp_path / "b"
    for root, content in ((a, old or {}), (b, {**(old or {}), **files})):
        root.mkdir()
        for rel, data in content.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
    before = treesnap.snapshot(a)
    after = treesnap.snapshot(b)
    d = treesnap.diff(before, after)
    return treesnap.render_changes(a, b, d, before, after)


def test_added_lines_come_from_raw_bytes_in_every_encoding(tmp_path):
    ch = _changes(
        tmp_path,
        {
            "latin.py": b"# -*- coding: latin-1 -*-\n# \xe9\nimport pytest\npytest.skip('x')\n",
            "seven.py": b"# coding: utf-7\nimport pytest\npytest+AC4-xfail('y')\n",
            "cr.py": b"x = 1\rimport pytest\rpytest.mark.skip\r",
        },
        old={"cr.py": b"x = 1\n"},
    )
    markers = tamper.skip_markers_added(ch.added)
    assert "latin.py: pytest.skip('x')" in markers
    assert "seven.py: pytest.xfail('y')" in markers
    assert "cr.py: pytest.mark.skip" in markers
    reasons = {u["path"]: u["reason"] for u in ch.undisplayable}
    assert reasons == {"latin.py": "not UTF-8", "seven.py": "declares source encoding utf-7"}
    assert "x = 1" not in ch.added["cr.py"]  # a line the fixture had is not added


def test_binary_source_is_shown_as_bounded_hex_with_hashes(tmp_path):
    blob = b"\x7fELF" + bytes(range(256)) * 64
    ch = _changes(tmp_path, {"calc.cpython-311-x86_64-linux-gnu.so": blob})
    u = ch.undisplayable[0]
    assert (u["reason"], u["source"], u["after"]["size"]) == ("binary", True, len(blob))
    assert u["after"]["sha256"] == hashlib.sha256(blob).hexdigest()
    hex_lines = [ln for ln in ch.patch.splitlines() if ln.startswith("~ ")]
    assert len(hex_lines) == treesnap.HEX_BYTES // 16 and hex_lines[0].startswith("~ 00000000  7f 45 4c 46")


def test_patch_headers_escape_every_path(tmp_path):
    ch = _changes(tmp_path, {"a\nb.txt": b"x\n", "\x1b[2Jc.txt": b"y\n"})
    assert "\x1b" not in ch.patch
    assert [ln for ln in ch.patch.split("\n") if ln.startswith("diff --agentdrift")] == [
        "diff --agentdrift a/\\x1b[2Jc.txt b/\\x1b[2Jc.txt",
        "diff --agentdrift a/a\\nb.txt b/a\\nb.txt",
    ]


def test_content_control_characters_are_escaped_in_the_patch(tmp_path):
    ch = _changes(tmp_path, {"n.txt": b"ok\x1b[2J\rline\n"})
    assert "+ok\\x1b[2J\\rline\n" in ch.patch and "\x1b" not in ch.patch


# ---- the agent's events ---------------------------------------------------------------------------
def test_events_are_validated_stamped_and_counted(tmp_path):
    path = tmp_path / "events.jsonl"
    lines = [
        '{"type": "ok", "source": "harness"}',
        '{"type": "n", "v": NaN}',
        '{"type": "n", "v": -Infinity}',
        '{"type": "n", "v": 1e999}',
        json.dumps({"type": "big", "v": "x" * 20_000}),
        '{"type": "bad type"}',
        '{"type": "s", "v": "\\ud800"}',
        '{"type": "d", "v": ' + "[" * 20 + "]" * 20 + "}",
        '{"type": "dup", "type": "dup"}',
        "not json",
        '["not", "an", "object"]',
    ]
    path.write_text("\n".join(lines) + "\n")
    log = agentio.read_events(path)
    assert log.events == [{"type": "ok", "source": "agent", "claimed_source": "harness"}]
    assert dict(log.dropped) == {
        "non-finite number": 3,
        "too large": 1,
        "invalid 'type'": 1,
        "unpaired surrogate in a string": 1,
        "nested too deeply": 1,
        "not JSON": 2,
        "not an object": 1,
    }
    assert all(json.loads(ln) for ln in agentio.dump_jsonl(log.events).splitlines())


def test_adapter_events_are_the_agents_word_too():
    log = agentio.EventLog()
    out = agentio.adapter_events(
        [{"type": "tool_call", "source": "turn.failed"}, {"type": "x", "cost": float("nan")}], log
    )
    assert out == [
        {"type": "tool_call", "source": "agent", "claimed_source": "turn.failed"},
        {"type": "x", "cost": None, "source": "agent"},
    ]


def test_report_refuses_nan_and_keeps_strings_encodable(tmp_path):
    p = tmp_path / "r.json"
    p.write_text('{"status": "complete", "summary": NaN}')
    assert agentio.read_report(p)[0] is None
    p.write_text('{"status": "complete", "summary": "\\udcff"}')
    report, _ = agentio.read_report(p)
    json.dumps(report, ensure_ascii=False).encode("utf-8")


# ---- the canary ----------------------------------------------------------------------------------
def test_token_is_found_in_every_encoding():
    tok = "AGENTDRIFT-CANARY-0123456789abcdef01234567"
    raw = tok.encode()
    cases = {
        "plain": f"x {tok} y",
        "reversed": tok[::-1],
        "hex": raw.hex().upper(),
        "base64": base64.b64encode(b"ab" + raw + b"cd").decode(),
        "url-decoded plain": "".join(f"%{b:02x}" for b in raw),
        "whitespace-removed plain": " ".join(tok),
        "plain (case changed)": tok.lower(),
        "rot13": __import__("codecs").encode(tok, "rot13"),
    }
    for form, text in cases.items():
        assert form in canary.find_token(text, tok), (form, canary.find_token(text, tok))
    for shift in range(3):
        b64 = base64.urlsafe_b64encode(b"\0" * shift + raw).decode()
        assert "base64" in canary.find_token(b64, tok)
    assert canary.find_token("nothing here", tok) == []


def test_canary_watch_sees_an_open_that_leaves_no_atime(tmp_path):
    c = canary.plant_canary(tmp_path)
    assert c.watch is not None, "inotify is not available here"
    fd = os.open(c.path, os.O_RDONLY | os.O_NOATIME)  # the harness may: it owns the file or has CAP_FOWNER
    os.read(fd, 10)
    os.close(fd)
    touched, how = canary.canary_access(c, atime_works=False)
    assert touched is True and "inotify: opened" in how
    if os.geteuid() == 0:
        st = os.stat(c.path)
        assert st.st_uid == canary.CANARY_OWNER and stat.S_IMODE(st.st_mode) == 0o444


def test_untouched_canary_is_not_read(tmp_path):
    c = canary.plant_canary(tmp_path)
    os.stat(c.path)  # looking is not reading
    assert canary.canary_access(c, atime_works=True) == (False, [])


# ---- the network log ----------------------------------------------------------------------------
def test_netlog_receives_datagrams_and_validates_them(tmp_path):
    d = netlog.observer_dir(tmp_path, "run")
    rx = netlog.NetlogReceiver(d).start()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.sendto(json.dumps({"host": "10.0.0.1", "port": 443, "via": "socket.connect"}).encode(), str(rx.path))
    s.sendto(b"garbage", str(rx.path))
    s.sendto(
        json.dumps({"host": "\x1bx", "port": "https", "via": "socket.getaddrinfo", "source": "agent"}).encode(),
        str(rx.path),
    )
    s.close()
    records, problems = rx.stop()
    assert records == [
        {
            "type": "network_attempt",
            "host": "10.0.0.1",
            "port": 443,
            "via": "socket.connect",
            "source": "harness",
            "observer": "python-audit-hook",
        },
        {
            "type": "network_attempt",
            "host": "\\x1bx",
            "port": "https",
            "via": "socket.getaddrinfo",
            "source": "harness",
            "observer": "python-audit-hook",
        },
    ]
    assert problems == ["network log: 1 datagram(s) dropped (malformed)"]
    assert not rx.path.exists()


def test_observer_dir_is_short_enough_for_a_unix_socket(tmp_path):
    deep = tmp_path / ("x" * 120)
    deep.mkdir()
    d = netlog.observer_dir(deep, "run")
    assert len(os.fsencode(d / "proxy.sock")) <= 107
    fdtree.rmtree(d)


def test_netlog_receives_when_its_socket_is_past_selects_fd_limit(tmp_path):
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if min(hard, 4096) < 1200:
        pytest.skip(f"cannot open 1,100 files here (limit {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]  # the session's own open files
    try:
        rx = netlog.NetlogReceiver(netlog.observer_dir(tmp_path, "run")).start()
        assert rx._sock.fileno() >= 1024
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.settimeout(10)  # a receiver that stopped reading fills the queue: the send times out
        for port in range(1, 31):  # more than a datagram socket's queue holds unread
            s.sendto(json.dumps({"host": "10.0.0.1", "port": port, "via": "socket.connect"}).encode(), str(rx.path))
        s.close()
        records, problems = rx.stop()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert [r["port"] for r in records] == list(range(1, 31)) and problems == []
