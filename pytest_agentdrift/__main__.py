import sys

from pytest_agentdrift.cli import main

sys.exit(main())
