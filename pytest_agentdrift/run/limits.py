"""Resource limits of one agent run: parsing, cgroups, rlimits, tmpfs sizes. No pytest.

`--agent-limit KEY=VALUE` (ini `agent_limits`) sets, per key:

* ``memory``: bytes of RAM the run's process tree may use (page cache,
  tmpfs and /dev/shm pages it writes included): a cgroup's memory limit
  (v2 ``memory.max`` or v1 ``memory.limit_in_bytes``); without a usable
  cgroup, RLIMIT_DATA on each process (per process, so much weaker).
* ``procs``: processes and threads alive at once: a cgroup's ``pids.max``;
  without one, RLIMIT_NPROC (counted per user, and ignored for root).
* ``disk``: bytes of the run directory (work tree, private home and tmp):
  a watcher sums the space its entries take (allocated blocks, or the
  apparent size when larger; directories and symbolic links included) as
  writes happen and stops the run past the limit; RLIMIT_FSIZE caps every
  single file at the same size, so one file can never overshoot. A write
  refused by that cap is a hit too: a process killed by SIGXFSZ, or a
  sandbox tmpfs that filled up to the cap.
* ``shm`` / ``tmp``: the size of the RAM-backed tmpfs mounted at /dev/shm and
  of every other tmpfs the sandbox mounts (bubblewrap only).
* ``files``: entries (files, directories, links) in the work tree plus every
  entry the run made elsewhere (the rest of the run directory, the
  sandbox's tmpfs mounts), counted by the watcher; past the limit the run
  is stopped.

A value of ``none`` (or ``off``, ``unlimited``) switches a limit off. Which
mechanism enforced each limit and whether it was hit is recorded per run; a
run that hit one is recorded with outcome ``resource_exceeded``.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentdrift.errors import AgentDriftError

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

#: key -> (kind, default): sized so that an ordinary agent run (a model CLI,
#: a test suite, a package install into the work tree) never meets them
DEFAULT_LIMITS: dict[str, int | None] = {
    "memory": 4 * GiB,
    "procs": 1024,
    "disk": 2 * GiB,
    "shm": 256 * MiB,
    "tmp": 256 * MiB,
    "files": 100_000,
}
#: graded code's own limits (`--agent-grade-limit`), never the agent's: the untouched fixture's own
#: grading runs under them too, so a limit only the agent's tree breaks is the agent's finding, and
#: one the untouched fixture already breaks is the harness's (the check is undecided, never failed)
GRADING_LIMITS: dict[str, int | None] = dict(DEFAULT_LIMITS)
SIZE_KEYS = frozenset({"memory", "disk", "shm", "tmp"})
COUNT_KEYS = frozenset({"procs", "files"})
OFF_WORDS = frozenset({"none", "off", "unlimited"})

_SIZE_RX = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)
_COUNT_RX = re.compile(r"(\d+)\s*([k]?)", re.IGNORECASE)
_UNIT = {"": 1, "k": KiB, "m": MiB, "g": GiB, "t": 1 << 40}


def parse_value(key: str, text: str) -> int | None:
    """One limit's value: a size (512M, 2G, 1.5GiB, 4096) or a count (256, 10k); None = off."""
    raw = text.strip()
    if raw.lower() in OFF_WORDS:
        return None
    if key in SIZE_KEYS:
        m = _SIZE_RX.fullmatch(raw)
        if not m:
            raise ValueError(f"{raw!r} is not a size (e.g. 512M, 2G, or a number of bytes)")
        value = int(float(m.group(1)) * _UNIT[m.group(2).lower()])
    else:
        m = _COUNT_RX.fullmatch(raw)
        if not m:
            raise ValueError(f"{raw!r} is not a whole number (e.g. 256 or 10k)")
        value = int(m.group(1)) * (1000 if m.group(2) else 1)
    if value < 1:
        raise ValueError(f"{raw!r} must be greater than 0 (use 'none' to switch the limit off)")
    return value


def parse_entries(entries: Iterable[str], source: str) -> dict[str, int | None]:
    """`KEY=VALUE` entries -> {key: value}; one clear error naming `source` otherwise."""
    out: dict[str, int | None] = {}
    for entry in entries:
        key, sep, value = str(entry).partition("=")
        key = key.strip().lower()
        if not sep or not key:
            raise AgentDriftError(f"{source}: {entry!r} is not KEY=VALUE (keys: {', '.join(DEFAULT_LIMITS)})")
        if key not in DEFAULT_LIMITS:
            raise AgentDriftError(f"{source}: unknown limit {key!r} (keys: {', '.join(DEFAULT_LIMITS)})")
        try:
            out[key] = parse_value(key, value)
        except ValueError as exc:
            raise AgentDriftError(f"{source}: {key}={value.strip()}: {exc}") from None
    return out


def resolve_limits(
    ini_entries: Iterable[str],
    cli_entries: Iterable[str],
    *,
    defaults: dict[str, int | None] = DEFAULT_LIMITS,
    ini_name: str = "agent_limits",
    flag: str = "--agent-limit",
) -> dict[str, int | None]:
    """Defaults, then the ini's entries, then the command line's, per key."""
    limits = dict(defaults)
    limits.update(parse_entries(ini_entries, f"ini option {ini_name}"))
    limits.update(parse_entries(cli_entries, flag))
    return limits


def human(key: str, value: int | None) -> str:
    if value is None:
        return "off"
    if key in COUNT_KEYS:
        return str(value)
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if value >= size and value % (size // 16 or 1) == 0:
            n = value / size
            return f"{n:g} {unit}"
    return f"{value} B"


def describe(limits: dict[str, int | None]) -> str:
    return ", ".join(f"{k} {human(k, v)}" for k, v in limits.items())


# ---- cgroups ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Controller:
    """Where one controller (memory or pids) can host the runs' cgroups."""

    name: str  # memory | pids
    version: int  # 1 | 2
    parent: Path  # the harness's own cgroup directory for this controller
    note: str = ""


@dataclass(frozen=True)
class CgroupLayout:
    controllers: dict[str, Controller]
    notes: tuple[str, ...] = ()

    @classmethod
    def discover(cls, root: Path = Path("/")) -> CgroupLayout:  # noqa: C901 (known debt: split by job when next touched)
        """Find, for memory and pids, the harness's own cgroup in which a child can be made.

        `root` is "/" here; tests pass a directory that mimics /proc and /sys.
        cgroup v2 is used for a controller when it is enabled for children of
        our cgroup (or can be enabled there); else the v1 hierarchy of that
        controller; else the controller is unavailable and the notes say why.
        """
        notes: list[str] = []
        try:
            membership = (root / "proc/self/cgroup").read_text()
            mountinfo = (root / "proc/self/mountinfo").read_text()
        except OSError as exc:
            return cls({}, (f"cgroups unreadable: {exc}",))
        v1_paths: dict[str, str] = {}
        v2_path: str | None = None
        for line in membership.splitlines():
            parts = line.split(":", 2)
            if len(parts) != 3:
                continue
            if parts[0] == "0" and parts[1] == "":
                v2_path = parts[2]
            for ctrl in parts[1].split(","):
                if ctrl:
                    v1_paths[ctrl] = parts[2]
        v1_mounts: dict[str, Path] = {}
        v2_mount: Path | None = None
        for line in mountinfo.splitlines():
            left, sep, right = line.partition(" - ")
            if not sep:
                continue
            fields, rfields = left.split(), right.split()
            if len(fields) < 5 or len(rfields) < 3:
                continue
            mnt_root, point, fstype = fields[3], unescape_mount_path(fields[4]), rfields[0]
            if mnt_root != "/":
                continue  # a bind of part of a hierarchy: our path inside it is not knowable
            if fstype == "cgroup2" and v2_mount is None:
                v2_mount = root / point.lstrip("/")
            elif fstype == "cgroup":
                for opt in rfields[2].split(","):
                    if opt in ("memory", "pids"):
                        v1_mounts.setdefault(opt, root / point.lstrip("/"))
        controllers: dict[str, Controller] = {}
        for name in ("memory", "pids"):
            found, whys = None, []
            if v2_mount is not None and v2_path is not None:
                found, why = _v2_controller(name, v2_mount / v2_path.lstrip("/"), v2_mount)
                whys += [why] if why else []
            if found is None and name in v1_mounts and name in v1_paths:
                parent = v1_mounts[name] / v1_paths[name].lstrip("/")
                if (parent / "cgroup.procs").is_file() and os.access(parent, os.W_OK):
                    found = Controller(name, 1, parent)
                else:
                    whys.append(f"cgroup v1 {name}: {parent} is not writable here")
            if found is not None:
                controllers[name] = found
            else:
                notes += whys or [f"no {name} cgroup controller is mounted here"]
        return cls(controllers, tuple(notes))


def unescape_mount_path(path: str) -> str:
    """A mount point as /proc/PID/mountinfo spells it (space, tab, newline, backslash as octal), unescaped."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def _v2_controller(name: str, own: Path, mount: Path) -> tuple[Controller | None, str]:
    """Where run cgroups with controller `name` can be made under cgroup v2, or why not.

    The kernel lets no cgroup but the root hold processes and hand a
    controller to children at once, and the harness lives in its own cgroup.
    So the runs' cgroups are children of the harness's cgroup only when that
    is the root (or already hands the controller down); otherwise they are
    made beside it, under its parent, when the parent hands the controller
    down and is writable (systemd: a delegated scope or service).
    """

    def has(d: Path, file: str) -> bool:
        try:
            return name in (d / file).read_text().split()
        except OSError:
            return False

    if not has(own, "cgroup.controllers"):
        return None, ""
    candidates = [own]
    if own != mount and own.parent != own:
        candidates.append(own.parent)
    for parent in candidates:
        if has(parent, "cgroup.subtree_control") and os.access(parent, os.W_OK):
            return Controller(name, 2, parent, "" if parent == own else "beside the harness's own cgroup"), ""
    if own == mount:  # the root may hand controllers down while it holds processes
        try:
            (own / "cgroup.subtree_control").write_text(f"+{name}")
            return Controller(name, 2, own), ""
        except OSError as exc:
            return None, f"cgroup v2 {name}: cannot enable it in {own}: {exc.strerror or exc}"
    return None, (
        f"cgroup v2 {name}: neither {own} nor its parent hands it to child cgroups that the harness may make "
        "(run the harness in a delegated cgroup, e.g. systemd-run --scope -p Delegate=yes)"
    )


_layout_cache: CgroupLayout | None = None


def layout() -> CgroupLayout:
    global _layout_cache
    if _layout_cache is None:
        _layout_cache = CgroupLayout.discover()
    return _layout_cache


@dataclass
class RunCgroups:
    """The per-run child cgroups (one per controller; with v2 they may coincide)."""

    dirs: dict[str, tuple[int, Path]] = field(default_factory=dict)  # controller -> (version, dir)
    problems: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, lay: CgroupLayout, name: str, limits: dict[str, int | None]) -> RunCgroups:
        cg = cls()
        for ctrl in ("memory", "pids"):
            c = lay.controllers.get(ctrl)
            if c is None:
                continue
            _remove_stale(c.parent)
            d = c.parent / name
            try:
                d.mkdir(exist_ok=True)
            except OSError as exc:
                cg.problems.append(f"cgroup v{c.version} {ctrl}: cannot create {d}: {exc.strerror or exc}")
                continue
            try:
                if ctrl == "memory" and (memory := limits.get("memory")):
                    _write_memory_limit(c.version, d, memory)
                if ctrl == "pids" and limits.get("procs"):
                    (d / "pids.max").write_text(str(limits["procs"]))
            except OSError as exc:
                cg.problems.append(f"cgroup v{c.version} {ctrl}: cannot set the limit in {d}: {exc.strerror or exc}")
                _rmdir(d)
                continue
            cg.dirs[ctrl] = (c.version, d)
        return cg

    def attach(self, pid: int) -> None:
        for _version, d in self.dirs.values():
            (d / "cgroup.procs").write_text(str(pid))

    def pids(self) -> set[int]:
        out: set[int] = set()
        for _v, d in self.dirs.values():
            try:
                out.update(int(x) for x in (d / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                pass
        return out

    def kill_all(self, rounds: int = 20) -> None:
        """SIGKILL every process in the run's cgroups, until they are empty (fork races included)."""
        for version, d in self.dirs.values():
            if version == 2 and (d / "cgroup.kill").exists():
                try:
                    (d / "cgroup.kill").write_text("1")
                except OSError:
                    pass
        for _ in range(rounds):
            alive = self.pids()
            if not alive:
                return
            for pid in alive:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)

    def stats(self) -> dict[str, dict[str, Any]]:
        """What the controllers saw: peaks and whether a limit bit."""
        out: dict[str, dict[str, Any]] = {}
        if "memory" in self.dirs:
            v, d = self.dirs["memory"]
            if v == 1:
                oom = _kv(d / "memory.oom_control")
                out["memory"] = {
                    "peak": _int(d / "memory.max_usage_in_bytes"),
                    "failcnt": _int(d / "memory.failcnt"),
                    "oom_kill": oom.get("oom_kill"),
                }
            else:
                ev = _kv(d / "memory.events")
                out["memory"] = {
                    "peak": _int(d / "memory.peak"),
                    "failcnt": ev.get("max"),
                    "oom_kill": ev.get("oom_kill"),
                }
        if "pids" in self.dirs:
            v, d = self.dirs["pids"]
            ev = _kv(d / "pids.events")
            out["pids"] = {"peak": _int(d / "pids.peak"), "refused": ev.get("max")}
        return out

    def remove(self) -> None:
        self.kill_all()
        for _v, d in self.dirs.values():
            _rmdir(d)


def _write_memory_limit(version: int, d: Path, value: int) -> None:
    if version == 2:
        (d / "memory.max").write_text(str(value))
        if (d / "memory.swap.max").exists():
            (d / "memory.swap.max").write_text("0")  # swap would let the run exceed the limit unseen
        return
    (d / "memory.limit_in_bytes").write_text(str(value))
    memsw = d / "memory.memsw.limit_in_bytes"
    if memsw.exists():
        try:
            memsw.write_text(str(value))
        except OSError:
            pass  # swap accounting off: nothing to close


def _kv(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            if v.strip().lstrip("-").isdigit():
                out[k] = int(v)
    except OSError:
        pass
    return out


def _int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _rmdir(d: Path) -> None:
    for _ in range(50):
        try:
            d.rmdir()
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                return
            time.sleep(0.02)  # a killed task leaves its cgroup a moment later


def _remove_stale(parent: Path) -> None:
    """Remove run cgroups left by a harness process that no longer exists (a crash, a kill -9)."""
    try:
        names = [p.name for p in parent.iterdir() if p.name.startswith("agentdrift-")]
    except OSError:
        return
    for name in names:
        pid = name.split("-")[1] if name.count("-") >= 2 else ""
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            d = parent / name
            try:
                procs = d / "cgroup.procs"
                if not (procs.exists() and procs.read_text().strip()):
                    d.rmdir()
            except OSError:
                pass


def cgroup_name(token: str) -> str:
    return f"agentdrift-{os.getpid()}-{token[:12]}"


# ---- rlimits and tmpfs sizes ------------------------------------------------------------------


def rlimits_for(limits: dict[str, int | None], cgroups: RunCgroups) -> tuple[dict[int, int], dict[str, str]]:
    """The rlimits to put on the run's first process, and the fallbacks they stand for."""
    import resource

    rl: dict[int, int] = {}
    used: dict[str, str] = {}
    if disk := limits.get("disk"):
        rl[resource.RLIMIT_FSIZE] = disk
    if (memory := limits.get("memory")) and "memory" not in cgroups.dirs:
        rl[resource.RLIMIT_DATA] = memory
        used["memory"] = "rlimit-data"
    if (procs := limits.get("procs")) and "pids" not in cgroups.dirs and os.geteuid() != 0:
        # counted per user: the processes this user already runs come on top
        rl[resource.RLIMIT_NPROC] = procs + _user_process_count()
        used["procs"] = "rlimit-nproc"
    return rl, used


def _user_process_count() -> int:
    uid = os.getuid()
    n = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                n += os.stat(f"/proc/{name}").st_uid == uid
            except OSError:
                pass
    return n


def apply_rlimits(pid: int, rl: dict[int, int]) -> list[str]:
    import resource

    problems = []
    for res, value in rl.items():
        try:
            _soft, hard = resource.prlimit(pid, res)
            new_hard = value if hard == resource.RLIM_INFINITY or hard > value else hard
            resource.prlimit(pid, res, (min(value, new_hard), new_hard))
        except (OSError, ValueError) as exc:
            problems.append(f"rlimit {res} on {pid}: {exc}")
    return problems


def size_tmpfs(bwrap_argv: list[str], shm: int | None, tmp: int | None) -> list[str]:
    """Put `--size N` before every `--tmpfs` of a bubblewrap argv (shm for /dev/shm, tmp for the rest).

    Stops at the first `--` (the command); bubblewrap >= 0.8 knows `--size`.
    """
    out: list[str] = []
    i = 0
    while i < len(bwrap_argv):
        a = bwrap_argv[i]
        if a == "--":
            out.extend(bwrap_argv[i:])
            break
        if a == "--tmpfs" and i + 1 < len(bwrap_argv):
            size = shm if bwrap_argv[i + 1] == "/dev/shm" else tmp
            if size:
                out += ["--size", str(size)]
            out += [a, bwrap_argv[i + 1]]
            i += 2
            continue
        if a in ("--size", "--perms"):  # an option that belongs to the next argument: keep the pair
            out += bwrap_argv[i : i + 2]
            i += 2
            continue
        out.append(a)
        i += 1
    return out


_bwrap_size: bool | None = None


def bwrap_knows_size() -> bool:
    global _bwrap_size
    if _bwrap_size is None:
        import subprocess

        try:
            out = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10, check=False)
            _bwrap_size = "--size" in out.stdout + out.stderr
        except (OSError, subprocess.SubprocessError):
            _bwrap_size = False
    return _bwrap_size


def statvfs_entries(path: str, capacity: int | None = None) -> int | None:
    """Entries made on the file system at `path` (its used inodes but its root); None as statvfs_used."""
    st = _sized_statvfs(path, capacity)
    return None if st is None else max(0, st.f_files - st.f_ffree - 1)


def statvfs_used(path: str, capacity: int | None = None) -> int | None:
    """Bytes used on the file system at `path`; None when it cannot be read or is not ours.

    With `capacity` (the size we gave a tmpfs), a file system larger than that is not the
    sized tmpfs: the sandbox has not mounted it yet (bubblewrap reports its child's pid before
    the child's mounts are done) or the pid is gone and was reused. Measuring the host's disk
    there once stopped honest runs as "tmp exceeded".
    """
    st = _sized_statvfs(path, capacity)
    return None if st is None else (st.f_blocks - st.f_bfree) * st.f_frsize


def _sized_statvfs(path: str, capacity: int | None) -> os.statvfs_result | None:
    """statvfs of `path`, or None when it cannot be read or is larger than the tmpfs we sized."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    if capacity is not None and st.f_blocks * st.f_frsize > capacity + (1 << 20):
        return None
    return st
