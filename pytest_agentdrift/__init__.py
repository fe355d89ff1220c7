"""pytest-agentdrift: frozen coding-agent tasks as a pytest suite.

Importing this package is cheap on purpose: the pytest11 entry point
(`pytest_agentdrift.plugin`) is loaded into every pytest run of an
environment, so heavy modules are imported only where they are used.
"""

__version__ = "0.1.0"

#: Version of the evaluator (check kinds + scoring). Part of evaluator_id.
EVALUATOR_VERSION = "1"

__all__ = ["__version__", "EVALUATOR_VERSION"]
