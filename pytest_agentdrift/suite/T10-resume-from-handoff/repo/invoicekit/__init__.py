"""invoicekit: a small invoicing library (synthetic fixture for pytest-agentdrift).

The public entry points are `build_invoice` (order dict -> Invoice) and the
renderers in `invoicekit.render`. `python -m invoicekit --help` lists the CLI.
"""

__version__ = "1.4.0"

__all__ = ["__version__"]
