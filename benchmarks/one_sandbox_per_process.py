"""A pytest plugin for benchmarks only (`-p one_sandbox_per_process`, this directory on PYTHONPATH):
the Grader never starts its grading sandbox, so every graded process runs in a sandbox of its own,
as before grade/gradeserver.py. The reference arm of bench_builtin_suite.py."""

from pytest_agentdrift.grade import gradeserver

gradeserver.MAX_FAILED_STARTS = 0
