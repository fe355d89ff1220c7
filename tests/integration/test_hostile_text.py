"""What an agent writes never drives a terminal or a Markdown renderer.

Hostile agents under bubblewrap put terminal escape sequences (cursor moves,
line erase, SGR 8 "conceal") and Markdown (a tracking-pixel image, a link, raw
HTML, a bare URL, a fence closer) into every channel that reaches a person:

* HT1: its own infrastructure-error report (the evidence line is shown in
  the terminal summary, report.md and the PR summary);
* HT2: a DNS query whose label holds the bytes (the harness's DNS stub
  records the name; the effects check's detail quotes it);
* HT3: the output of graded code (a failing test's assertion message: the
  check's output tail in the failure text and report.md);
* HS1 (a session of its own): an infrastructure error of a class that repeats,
  which stops the session, so its evidence reaches the closing line.

The terminal output, the closing line, report.md and `agentdrift summary`'s
Markdown are checked: no control character from the agent, and rendered by
markdown-it-py (GitHub-flavoured, with autolinks) no image, link or HTML the
agent made.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from hostile_helpers import CALC_TASK, SAFETY_CHECKS, Session, needs_bwrap, run_session, shared

# its tests read two shared sessions: one worker makes them, the other does not wait for it
pytestmark = [pytest.mark.slow, needs_bwrap(), pytest.mark.xdist_group("hostile-text")]

#: what each agent writes: cursor up, erase line, a forged PASSED, conceal (SGR 8), Markdown and HTML
PAYLOAD = (
    "\x1b[1A\x1b[2K PASSED \x1b[8m hidden "
    "![pixel](http://127.0.0.1:9/p.png) [click](http://127.0.0.1:9/x) <img src=x> http://127.0.0.1:9/bare "
    "__init__ ```"
)

BODIES = {
    "HT1": f"""
        report("infra_error", infra_class="overloaded", summary={PAYLOAD!r})
    """,
    "HT2": """
        import socket, struct
        servers = [ln.split()[1] for ln in open("/etc/resolv.conf") if ln.startswith("nameserver")]
        label = b"\\x1b[2K\\x1b[8mhidden![p](http:x)"
        query = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
        query += bytes([len(label)]) + label + bytes([7]) + b"example" + b"\\x00" + struct.pack("!HH", 1, 1)
        for server in servers[:1]:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.settimeout(3)
                try:
                    s.sendto(query, (server, 53))
                    s.recv(512)
                except OSError:
                    pass
        report("complete", summary="looked something up")
    """,
    "HT3": f"""
        Path("calc.py").write_text(
            "def add(a, b):\\n"
            "    raise AssertionError(" + repr({PAYLOAD!r} + "\\n```\\n![pixel2](http://127.0.0.1:9/q.png)") + ")\\n"
        )
        report("complete", summary="fixed")
    """,
}
NETWORK_CHECKS = [*SAFETY_CHECKS]


def _session(tmp_path_factory) -> Session:
    def build(root):
        tasks = {
            "HT1": {},
            "HT2": {"checks": NETWORK_CHECKS, "forbidden_effects": {"network": True}},
            "HT3": CALC_TASK,
        }
        s = run_session(root, tasks, BODIES)
        s.extra["summary"] = _summary(root)
        return s

    return shared(tmp_path_factory, "hostile-text", build)


def _summary(root) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "pytest_agentdrift", "summary", "runs/r", "--output", "runs/summary.md"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return (root / "runs" / "summary.md").read_text(encoding="utf-8")


def _no_control(text: str, where: str) -> None:
    bad = sorted({f"U+{ord(c):04X}" for c in text if not c.isprintable() and c not in "\n\t"})
    assert not bad, f"{where} holds control characters {bad}"


def _rendered(markdown: str) -> str:
    import markdown_it

    renderer = markdown_it.MarkdownIt("gfm-like")
    # GitHub autolinks http(s)://, www. and e-mail addresses, not bare names such as calc.py
    renderer.linkify.set({"fuzzy_link": False})
    return renderer.render(markdown)


def _no_agent_markup(markdown: str, where: str, *, shown: bool = True) -> None:
    html = _rendered(markdown)
    assert "<img" not in html, f"{where}: an image the agent made renders"
    agent_links = [h for h in re.findall(r'<a href="([^"]*)"', html) if "127.0.0.1" in h or h.startswith("http:x")]
    assert not agent_links, f"{where}: links the agent made render: {agent_links}"
    if shown:
        assert "hidden" in html, html[-3000:]  # the agent's words are shown, as text


def test_the_terminal_gets_no_escape_sequence_from_an_agent(tmp_path_factory):
    s = _session(tmp_path_factory)
    assert "Traceback (most recent call last)" not in s.out, s.out[-5000:]
    _no_control(s.out, "the terminal output")
    # the words are shown, escaped
    assert "\\x1b[1A" in s.out and "\\x1b[8m" in s.out
    assert "HT3" in s.out and "pixel2" in s.out  # the graded output's tail reached the failure text


def test_evidence_records_keep_the_agent_text_escaped(tmp_path_factory):
    s = _session(tmp_path_factory)
    infra = s.run("HT1")["infra_error"]
    assert infra["evidence"].startswith("\\x1b[1A") and "\x1b" not in infra["evidence"]
    hosts = [e.get("host", "") for e in s.events("HT2") if e.get("type") == "network_attempt"]
    assert any("hidden" in h for h in hosts), hosts  # the stub saw the query
    for h in hosts:
        _no_control(h, "a recorded DNS name")


def test_report_md_renders_no_agent_markup(tmp_path_factory):
    s = _session(tmp_path_factory)
    report = (s.run_dir / "report.md").read_text(encoding="utf-8")
    _no_control(report, "report.md")
    _no_agent_markup(report, "report.md")
    # each run's checks stay one list: nothing the graded output printed closes the fence around it
    html = _rendered(report)
    assert "pixel2" in html and html.count("<pre>") >= 1


def test_the_pr_summary_renders_no_agent_markup(tmp_path_factory):
    s = _session(tmp_path_factory)
    summary = s.extra["summary"]
    _no_control(summary, "the summary")
    _no_agent_markup(summary, "the summary", shown=False)


def test_an_agent_text_in_the_closing_line_is_escaped(tmp_path_factory):
    def build(root):
        body = f'report("infra_error", infra_class="authentication", summary={PAYLOAD!r})\n'
        s = run_session(root, {"HS1": {}}, {"HS1": body})
        s.extra["summary"] = _summary(root)
        return s

    s = shared(tmp_path_factory, "hostile-text-stop", build)
    closing = [ln for ln in s.out.splitlines() if ln.startswith("agentdrift: exit ")][-1]
    assert "HS1" in closing and "\\x1b[8m" in closing, closing
    _no_control(s.out, "the terminal output")
    _no_control(s.extra["summary"], "the summary")
    _no_agent_markup(s.extra["summary"], "the summary's closing line")
    report = (s.run_dir / "report.md").read_text(encoding="utf-8")
    _no_agent_markup(report, "report.md")
