"""Where the harness's scratch goes and which directories are its scratch: the scratch root (never
under /dev), the places scratch directories are made in, and those found there, which every sandbox
hides (run/scratch.py makes and sweeps them). No pytest.
"""

from __future__ import annotations

import os

from pytest_agentdrift.run.hostpaths import resolved

#: where the harness's scratch goes when the temporary directory lies under /dev
OUTSIDE_DEV = ("/tmp", "/var/tmp")
#: the names of the harness's scratch directories (run/scratch.py) and observer logs (run/netlog.py)
SCRATCH_PREFIX = "agentdrift-"


def scratch_places() -> list[str]:
    """Where run/scratch.py makes scratch directories: the scratch root (`work_root`) and the
    temporary directory (the root before a move)."""
    import tempfile

    tmp = tempfile.gettempdir()
    return list(dict.fromkeys(resolved(p) for p in (work_root(tmp), tmp)))


def scratch_dirs() -> list[str]:
    """Every scratch directory of the harness in `scratch_places` and /tmp (observer logs,
    run/netlog.py): other sessions' and runs' trees, homes and logs. Hidden from every sandbox,
    even inside a directory shown whole (an --agent-mount of /tmp or a path the agent's argv
    names): the directory is then recreated from the entries listed when the plan is built, so
    one made later is not in it either."""
    found = []
    for place in dict.fromkeys([*scratch_places(), resolved("/tmp")]):
        try:
            names = os.listdir(place)
        except OSError:
            continue
        found += [os.path.join(place, n) for n in names if n.startswith(SCRATCH_PREFIX)]
    return found


def work_root(tmp: str) -> str:
    """Where the harness makes its scratch (work trees, private homes): `tmp`, unless it lies under
    /dev (TMPDIR=/dev/shm/...). An agent's own sandbox may mount a /dev of its own over the one it
    is shown (Codex's bubblewrap does): a work tree there vanishes from the agent's tools, every
    edit fails, and the run would be scored as the agent's failure. The first writable of
    OUTSIDE_DEV then (tmp itself when there is none)."""
    if not under_dev(tmp):
        return tmp
    usable = (d for d in OUTSIDE_DEV if os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK) and not under_dev(d))
    return next(usable, tmp)


def under_dev(path: str) -> bool:
    """`path` lies under /dev, as written or once its links are resolved."""
    return any(p == "/dev" or p.startswith("/dev/") for p in (os.path.abspath(path), resolved(path)))
