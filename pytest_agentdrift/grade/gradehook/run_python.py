"""Runs a graded `python ...` command for the harness.

Started as `python [interpreter options] -P run_python.py (-c CODE | -m MODULE | SCRIPT) ARGS`.
A command check used to trust the exit status alone, and graded code owns
it: `os._exit(0)` while the project imports passes any command. Here the
command runs the way `python` would run it (same argv, same sys.path[0], a
fresh `__main__`), and when it returns, this wrapper tells the harness how it
ended over the signed result channel (pytest_agentdrift/grade/channel.py). The
harness passes the check only when that message says 0 and the process
exits 0: `os._exit` before the command returned sends nothing, and anything
written on the channel by graded code is detected as forged.

As in launch.py, the channel is taken and the standard-library guard
installed before the graded tree is importable.
"""

import os
import sys

from pytest_agentdrift.grade.channel import GradedEnd

EVALUATOR_COMPONENT = "python_check_runner"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

_channel = GradedEnd.from_env()

import runpy  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402

from pytest_agentdrift.run import stdlib_guard as gradeguard

gradeguard.install(list(sys.path), [n for n in os.environ.pop("AGENTDRIFT_GRADE_PROVIDED", "").split(",") if n])


def _run(args: list[str]) -> None:
    if args[0] == "-c":
        sys.argv = ["-c", *args[2:]]
        sys.path.insert(0, "")
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        exec(compile(args[1], "<string>", "exec"), main.__dict__)
    elif args[0] == "-m":
        sys.argv = [args[1], *args[2:]]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(args)
        sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
        runpy.run_path(args[0], run_name="__main__")


def _status(code: str | int | None) -> int:
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


_exit_value: str | int | None = 0  # as SystemExit.code
try:
    _run(sys.argv[1:])
except SystemExit as exc:
    _exit_value = exc.code
except BaseException as exc:
    # as python itself would show it: without this wrapper's and runpy's frames
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)
    _exit_value = 1
try:
    sys.stdout.flush()
    sys.stderr.flush()
except (OSError, ValueError):
    pass
if _channel is not None:
    _channel.send("exit", {"code": _status(_exit_value)})
    _channel.close()
sys.exit(_exit_value)
