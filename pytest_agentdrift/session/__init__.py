"""session/: the pytest layer. Process roles (controller, worker), collection nodes, xdist hooks, options,
the baseline glue. Only this layer and plugin.py import pytest."""
