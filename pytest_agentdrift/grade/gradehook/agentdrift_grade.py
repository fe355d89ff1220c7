"""pytest plugin loaded (`-p agentdrift_grade`) into the harness's own pytest
runs of a task's tests. It records, node id by node id, what was collected,
what was deselected and how each test ended, and flags reports that say
"passed" while their call raised: the signature of a hook that rewrites
outcomes. Results go to the harness over the signed result channel that
launch.py attaches (pytest_agentdrift/grade/channel.py), never to a file
graded code could rewrite; the channel is closed once they are sent.

`observe(name, value)` is for tests whose verdict the harness decides: the
test computes a value and leaves its `repr` here, and the harness compares it
with the expected value it holds outside the graded process (the check's
`expected` file). The expected value is in neither the test nor the tree, so
code that rewrites this plugin's state can say "passed" but cannot say what
the right answer was.
"""

import pytest

# launch.py imported the channel before anything of the graded tree was importable
from pytest_agentdrift.grade.channel import empty_test_report

EVALUATOR_COMPONENT = "grade_plugin"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

_state = empty_test_report()
_channel = None
_current = None  # the node id whose setup, call or teardown is running

#: bounds on what one test may observe (the channel carries at most 32 MiB in all)
MAX_OBSERVATIONS_PER_TEST, MAX_REPR = 1000, 4096


def attach(channel):
    global _channel
    _channel = channel


def observe(name, value):
    """Leave `repr(value)` under `name` for the harness to compare with the value it expects."""
    if _current is None:
        raise RuntimeError("observe() is called from a test while the harness grades it")
    seen = _state["observed"].setdefault(_current, [])
    if len(seen) >= MAX_OBSERVATIONS_PER_TEST:
        raise RuntimeError(f"a test may observe at most {MAX_OBSERVATIONS_PER_TEST} values")
    text = repr(value)
    if len(text) > MAX_REPR:
        text = text[:MAX_REPR] + f"... ({len(text) - MAX_REPR} characters left out)"
    seen.append([str(name), text])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _current
    _current = item.nodeid
    try:
        yield
    finally:
        _current = None


def pytest_deselected(items):
    _state["deselected"].extend(i.nodeid for i in items)


def pytest_collection_finish(session):
    _state["collected"] = [i.nodeid for i in session.items]
    for item in session.items:
        layer = item.get_closest_marker("agent_layer")
        _state["marks"][item.nodeid] = {
            "critical": item.get_closest_marker("critical") is not None,
            "layer": layer.args[0] if layer is not None and layer.args else None,
        }


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    exc = call.excinfo
    if exc is not None and rep.passed and not hasattr(rep, "wasxfail"):
        _state["forged"].append(item.nodeid)
    if exc is not None and call.when == "call" and rep.failed:
        # why a test failed: an assertion about the code, or an error before it got that far
        _state["exc_types"][item.nodeid] = exc.typename


def pytest_runtest_logreport(report):
    nodeid = report.nodeid
    prev = _state["outcomes"].get(nodeid)
    if report.failed:
        new = "failed" if report.when == "call" else "error"
    elif report.skipped:
        new = "xfailed" if hasattr(report, "wasxfail") else "skipped"
    elif report.when == "call":
        new = "xpassed" if hasattr(report, "wasxfail") else "passed"
    else:
        return
    # the worst outcome of setup / call / teardown wins
    rank = {"passed": 0, "xpassed": 1, "skipped": 2, "xfailed": 2, "failed": 3, "error": 4}
    if prev is None or rank[new] >= rank[prev]:
        _state["outcomes"][nodeid] = new
    if report.failed and report.longrepr is not None:
        text = getattr(report.longrepr, "reprcrash", None)
        _state["messages"][nodeid] = _head_and_tail(str(text.message if text is not None else report.longrepr))


#: how much of a failure message crosses the channel: the head holds the assertion message, the
#: tail the comparison pytest adds after it (a long object dump in between is what is left out)
MESSAGE_HEAD, MESSAGE_TAIL = 1200, 800


def _head_and_tail(text: str) -> str:
    if len(text) <= MESSAGE_HEAD + MESSAGE_TAIL:
        return text
    left_out = len(text) - MESSAGE_HEAD - MESSAGE_TAIL
    return f"{text[:MESSAGE_HEAD]}\n… ({left_out} characters left out) …\n{text[-MESSAGE_TAIL:]}"


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    global _channel
    channel, _channel = _channel, None
    if channel is not None:
        # the final status, after every other plugin had its say
        channel.send("result", {**_state, "exitstatus": int(session.exitstatus)})
        channel.close()
