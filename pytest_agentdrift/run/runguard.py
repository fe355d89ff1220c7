"""Everything the harness puts around one agent run: limits, observers, the survivor count. No pytest.

`sandbox.run(..., guard=RunGuard(...))` calls, in order:

* `wrap(full_argv, agent_argv, mode)`: the command with the first process
  (sandboxinit.py) in front of the agent, tmpfs sizes, the private
  resolv.conf and `--as-pid-1` for bubblewrap; `pass_fds` for Popen;
* `started(proc)`: while that first process waits, put the run's processes
  into its cgroups, set rlimits, bind the network observer inside the
  sandbox's namespace, start the clock, and let the agent go;
* `stop_requested`, polled while waiting: a limit that the watcher saw broken;
* `leftovers(proc, timed_out)`: processes that outlived the agent, or None
  when this guard cannot tell (the caller's own count stands);
* `close()`: stop the observers, read the cgroups' counters, remove them.

What was enforced, by which mechanism, and what was hit is `record()`.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pytest_agentdrift.canonical import close_fds, json_lines_objects
from pytest_agentdrift.run import limits as lim
from pytest_agentdrift.run.sandbox import _state, descendants
from pytest_agentdrift.run.sandbox import proc_stat as _stat
from pytest_agentdrift.vocabulary import NETWORK_FILE

if TYPE_CHECKING:
    from pytest_agentdrift.run.modelgateway import ModelGateway
    from pytest_agentdrift.run.netwatch import NetObserver
    from pytest_agentdrift.run.watch import WriteWatcher


def _init_script() -> str:
    from pytest_agentdrift.run import sandboxinit

    return sandboxinit.__file__


class RunGuard:
    def __init__(
        self,
        *,
        limits: dict[str, int | None],
        mode: str,
        root: Path,
        work: Path,
        harness_dir: Path,
        token: str,
        allow_hosts: list[str] | None = None,
        observe_network: bool = True,
        unreported: tuple[Path, ...] = (),
        private: tuple[Path, ...] = (),
        watch_writes: bool = True,
        keep_write_events: bool = True,
    ):
        self.limits = dict(limits)
        self.mode = mode
        self.root = Path(root)
        self.work = Path(work)
        self.harness_dir = Path(harness_dir)
        self.token = token
        self.allow_hosts = list(allow_hosts or [])
        self.observe_network = observe_network and mode == "bwrap"
        self.unreported = tuple(unreported)
        self.private = tuple(private)  # the agent's own places beside the work tree (watch.WriteWatcher)
        self.watch_writes = watch_writes
        self.keep_write_events = keep_write_events  # graded code: its totals bound it, its writes are not evidence
        self.notes: list[str] = []
        self.enforced: dict[str, str] = {}
        self.hit: dict[str, Any] = {}
        self.survivors: int | None = None
        self.survivor_programs: dict[str, int] = {}
        self.agent_exit_code: int | None = None
        self.launch_error: str | None = None
        self.stop_requested = threading.Event()
        self.net: NetObserver | None = None
        #: the run's model gateway (run/modelgateway.py), served in the sandbox's namespace beside the proxy
        self.gateway: ModelGateway | None = None
        self.watcher: WriteWatcher | None = None
        #: called with the sandbox's first process (bwrap) once its mounts exist, before the agent starts
        self.on_sandbox_up: Callable[[int], None] | None = None
        self.cgroups = lim.RunCgroups()
        self._rlimits: dict[int, int] = {}
        self._init_pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._tmpfs: list[str] = []
        self._fds: dict[str, int] = {}
        self._killed_count: int | None = None
        self._closed = False
        self.harness_dir.mkdir(parents=True, exist_ok=True)
        self.resolv_conf = self.harness_dir / "resolv.conf"

    # -- before the launch -------------------------------------------------------------------------
    def prepare(self) -> None:  # noqa: C901 (known debt: split by job when next touched)
        lay = lim.layout()
        wanted = {k: v for k, v in self.limits.items() if v}
        if wanted.get("memory") or wanted.get("procs"):
            self.cgroups = lim.RunCgroups.create(lay, lim.cgroup_name(self.token), self.limits)
            self.notes += self.cgroups.problems
        for key, ctrl in (("memory", "memory"), ("procs", "pids")):
            if key in wanted and ctrl in self.cgroups.dirs:
                self.enforced[key] = f"cgroup-v{self.cgroups.dirs[ctrl][0]}"
        self._rlimits, fallbacks = lim.rlimits_for(self.limits, self.cgroups)
        for key, how in fallbacks.items():
            self.enforced.setdefault(key, how)
        for key in ("memory", "procs"):
            if key in wanted and key not in self.enforced:
                ctrl = "memory" if key == "memory" else "pids"
                why = "; ".join(n for n in (*lay.notes, *self.cgroups.problems) if ctrl in n) or f"no {ctrl} cgroup"
                self.enforced[key] = "not-enforced"
                self.notes.append(
                    f"{key} limit not enforced: {why}"
                    + ("; RLIMIT_NPROC does not bind root" if key == "procs" and os.geteuid() == 0 else "")
                )
        for key in ("shm", "tmp"):
            if key in wanted:
                if self.mode == "bwrap" and lim.bwrap_knows_size():
                    self.enforced[key] = "bwrap-tmpfs-size"
                else:
                    self.enforced[key] = "not-enforced"
                    self.notes.append(
                        f"{key} limit not enforced: "
                        + (
                            "bubblewrap here has no --size"
                            if self.mode == "bwrap"
                            else f"no private tmpfs under {self.mode} isolation"
                        )
                    )
        if self.watch_writes:
            self._start_watcher()
        watcher = "watcher" if self.watcher is not None else None
        if "disk" in wanted:
            self.enforced["disk"] = "+".join(filter(None, (watcher, "rlimit-fsize")))
        if "files" in wanted:
            self.enforced["files"] = watcher or "not-enforced"
        if self.observe_network:
            self.resolv_conf.write_text(_resolv_conf())

    def _start_watcher(self) -> None:
        from pytest_agentdrift.run.watch import MAX_EVENTS, InotifyUnavailable, WriteWatcher

        try:  # its write events are evidence even with both of its limits off
            self.watcher = WriteWatcher(
                self.root,
                self.work,
                limits=self.limits,
                on_exceeded=self._exceeded,
                probes=self._probes(),
                unreported=self.unreported,
                private=self.private,
                max_events=MAX_EVENTS if self.keep_write_events else 0,
            ).start()
        except (InotifyUnavailable, OSError) as exc:
            from pytest_agentdrift.run.watch import RESERVE

            self.notes.append(
                f"write watcher unavailable: {exc}" + (f" ({RESERVE.problem})" if RESERVE.problem else "")
            )

    def _probes(self) -> dict[str, Callable[[], int | None]]:
        def used(paths_fn: Callable[[], list[str]], key: str) -> Callable[[], int | None]:
            def probe() -> int | None:
                pid = self._init_pid
                if pid is None:
                    return None
                read = [lim.statvfs_used(f"/proc/{pid}/root{p}", self.limits.get(key)) for p in paths_fn()]
                vals = [v for v in read if v is not None]
                return max(vals) if vals else None

            return probe

        def entries() -> int | None:
            pid = self._init_pid
            if pid is None:
                return None
            # only a sized tmpfs is known to be the sandbox's own (not the host's, before it is mounted)
            sized = [(p, self._tmpfs_size(p)) for p in self._tmpfs]
            read = [lim.statvfs_entries(f"/proc/{pid}/root{p}", size) for p, size in sized if size]
            vals = [v for v in read if v is not None]
            return sum(vals) if vals else None

        if self.mode != "bwrap":
            return {}
        return {
            "shm": used(lambda: ["/dev/shm"], "shm"),
            "tmp": used(lambda: [p for p in self._tmpfs if p != "/dev/shm"], "tmp"),
            "files": entries,  # what the sandbox's own tmpfs mounts hold counts towards `files`
        }

    def _tmpfs_size(self, path: str) -> int | None:
        return self.limits.get("shm" if path == "/dev/shm" else "tmp")

    def wrap(self, full: list[str], argv: list[str], mode: str) -> list[str]:
        prefix = full[: len(full) - len(argv)]
        go_r, go_w = os.pipe()
        self._fds.update(go_r=go_r, go_w=go_w)
        st_r, st_w = os.pipe()
        self._fds.update(st_r=st_r, st_w=st_w)
        init = [sys.executable, "-I", "-S", _init_script(), "--go-fd", str(go_r), "--status-fd", str(st_w)]
        measure: list[str] = []
        if mode == "bwrap":
            info_r, info_w = os.pipe()
            self._fds.update(info_r=info_r, info_w=info_w)
            assert prefix and prefix[-1] == "--", prefix
            sized = (
                lim.size_tmpfs(prefix[:-1], self.limits.get("shm"), self.limits.get("tmp"))
                if lim.bwrap_knows_size()
                else prefix[:-1]
            )
            self._tmpfs = [sized[i + 1] for i, a in enumerate(sized[:-1]) if a == "--tmpfs"]
            extra = ["--as-pid-1", "--info-fd", str(info_w)]
            if "--dev" in sized and lim.bwrap_knows_size():
                # bubblewrap's /dev is an unsized RAM-backed tmpfs of its own: read-only, so that
                # only the sized /dev/shm (a mount of its own, still writable) takes data
                extra += ["--remount-ro", "/dev"]
            if self.observe_network:
                extra += ["--ro-bind", str(self.resolv_conf), "/etc/resolv.conf"]
            prefix = sized + extra + ["--"]
            # the tmpfs mounts die with the sandbox: its init measures them last
            measure = [a for p in self._tmpfs for a in ("--measure", p)]
        return prefix + init + measure + ["--"] + list(argv)

    @property
    def tmpfs_mounts(self) -> list[str]:
        """The sandbox's own tmpfs mounts (known once `wrap` has run)."""
        return list(self._tmpfs)

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return tuple(self._fds[k] for k in ("go_r", "st_w", "info_w") if k in self._fds)

    # -- after the launch --------------------------------------------------------------------------
    def started(self, proc: subprocess.Popen[bytes]) -> None:  # noqa: C901 (known debt: split by job when next touched)
        """The first process waits for us: guard it, then let the agent start."""
        self._proc = proc
        for k in ("go_r", "st_w", "info_w"):
            if k in self._fds:
                os.close(self._fds.pop(k))
        if self.mode == "bwrap":
            self._init_pid = self._read_child_pid(proc)
        for pid in [proc.pid, *descendants(proc.pid)]:
            try:
                self.cgroups.attach(pid)
            except OSError as exc:
                self.notes.append(f"cannot put process {pid} into the run's cgroups: {exc.strerror or exc}")
            self.notes += lim.apply_rlimits(pid, self._rlimits)
        if self._init_pid is not None:
            try:  # init must outlive an out-of-memory agent to report the survivors
                Path(f"/proc/{self._init_pid}/oom_score_adj").write_text("-1000")
            except OSError:
                pass
        if self.observe_network and self._init_pid is not None:
            from pytest_agentdrift.run.netwatch import NetObserver

            self.net = NetObserver(self.allow_hosts, self.harness_dir / NETWORK_FILE, gateway=self.gateway)
            try:
                self.net.start(self._init_pid, self._sandbox_pids if self.cgroups.dirs else None)
            except OSError as exc:
                self.notes.append(f"network observer unavailable: {exc.strerror or exc}")
                self.net = None
        if self.watcher is not None:
            self.watcher.mark_start()
        if self.on_sandbox_up is not None and self._init_pid is not None and self._init_started(proc):
            self.on_sandbox_up(self._init_pid)
        try:
            os.write(self._fds["go_w"], b"x")
        except OSError:
            pass  # the first process is already gone (bwrap failed): its exit status says why
        os.close(self._fds.pop("go_w"))

    def _init_started(self, proc: subprocess.Popen[bytes]) -> bool:
        """Wait until the sandbox's first process runs our init: bubblewrap reports its pid before
        its mounts exist, and execs the init only once they all do."""
        init = [os.fsencode(sys.executable), os.fsencode(_init_script())]  # bubblewrap's own argv names it too
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{self._init_pid}/cmdline", "rb") as fh:
                    args = fh.read().split(b"\0")
                if args[:1] == init[:1] and init[1] in args[:4]:
                    return True
            except OSError:
                break  # gone: bubblewrap failed, and its exit status says why
            if proc.poll() is not None:
                break
            time.sleep(0.005)
        self.notes.append("the sandbox's init never started: what is set up inside the sandbox is unobserved")
        return False

    def _read_child_pid(self, proc: subprocess.Popen[bytes]) -> int | None:
        fd = self._fds.pop("info_r")
        buf = b""
        deadline = time.monotonic() + 30
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([fd], [], [], 0.5)
                if not ready:
                    if proc.poll() is not None:
                        break
                    continue
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                buf += chunk
                try:
                    return int(json.loads(buf)["child-pid"])
                except (ValueError, KeyError):
                    continue
        finally:
            os.close(fd)
        self.notes.append("bubblewrap reported no sandbox process: limits and observers may not apply")
        return None

    def settle_writes(self) -> None:
        """Judge the disk and files limits on every write made so far (the watcher reads what is
        queued before this returns): for a sandbox that serves several processes, read when one ends.
        A watcher that does not answer leaves a note, and the limits it could not judge unconfirmed."""
        if self.watcher is not None and not self.watcher.settle():
            self.notes.append("the write watcher did not catch up at the end of a request: its limits were judged late")

    def poll(self) -> None:
        """While the agent runs: a limit the kernel enforced has bitten; the run ends now.

        A refused fork or an out-of-memory kill already makes the run
        `resource_exceeded`; letting a fork loop spin on until the timeout
        would only burn the machine.
        """
        if self.stop_requested.is_set():
            return
        stats = self.cgroups.stats()
        if (stats.get("memory") or {}).get("oom_kill"):
            self._exceeded("memory", stats["memory"].get("peak"))
        elif (stats.get("pids") or {}).get("refused"):
            self._exceeded("procs", stats["pids"].get("peak"))
        elif self.watcher is not None:
            for key in ("shm", "tmp"):
                limit, peak = self.limits.get(key), self.watcher.peaks.get(key)
                if (
                    limit
                    and peak is not None
                    and self.enforced.get(key, "").startswith("bwrap")
                    and limit - peak < 64 * 1024
                ):
                    self._exceeded(key, peak)
                    break

    def _sandbox_pids(self) -> list[int]:
        return sorted(self.cgroups.pids())

    def _exceeded(self, key: str, value: int | None) -> None:
        """`value`: what the limit's counter peaked at, None when it was not read (a cgroup without it)."""
        self.hit.setdefault(key, value)
        self.kill()

    def kill(self) -> None:
        """Stop the whole run now (a limit was broken)."""
        if self._killed_count is None:
            self._killed_count = self._count_alive(exclude_agent=True)
        self.stop_requested.set()
        self.cgroups.kill_all(rounds=3)
        if self._proc is not None:
            for kill in (os.killpg, os.kill):  # its process group, then the process itself
                try:
                    kill(self._proc.pid, signal.SIGKILL)
                except OSError:
                    pass

    def _count_alive(self, exclude_agent: bool) -> int | None:
        """Processes of the run other than the harness's own helpers (bwrap, init)."""
        if self.cgroups.dirs:
            pids = self.cgroups.pids()
        elif self._init_pid is not None:
            from pytest_agentdrift.run.netwatch import pids_in_netns

            pids = set(pids_in_netns(self._init_pid))
        else:
            return None
        helpers = {p for p in (self._proc.pid if self._proc else None, self._init_pid) if p}
        live = [p for p in pids - helpers if _state(p) not in ("Z", "?")]
        if exclude_agent and live and self._init_pid is not None:
            first = min((p for p in live if _ppid(p) == self._init_pid), key=_starttime, default=None)
            if first is not None:
                live.remove(first)
        return len(live)

    def on_timeout(self) -> None:
        if self._killed_count is None:
            self._killed_count = self._count_alive(exclude_agent=True)

    def finished(self) -> None:
        """The first process has exited: read its report (PID 1 under bubblewrap)."""
        fd = self._fds.pop("st_r", None)
        if fd is None:
            return
        buf = b""
        try:
            while True:
                ready, _, _ = select.select([fd], [], [], 2.0)
                if not ready:
                    break
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                buf += chunk
        finally:
            os.close(fd)
        status: dict[str, Any] = {}
        for doc in json_lines_objects(buf.decode("utf-8", "replace"))[0]:
            status.update(doc)
        if isinstance(status.get("launch_error"), str):
            self.launch_error = status["launch_error"]
        try:
            if "survivors" in status:
                self.survivors = int(status["survivors"])
                self.agent_exit_code = int(status["exit_code"])
                self.survivor_programs = {str(k): int(v) for k, v in dict(status.get("programs", {})).items()}
        except (ValueError, KeyError, TypeError):
            pass
        self._last_word(status)

    def _last_word(self, status: dict[str, Any]) -> None:
        """What init measured as the sandbox ended (its tmpfs mounts), and the file-size limit's kills."""
        measured = status.get("measured")
        if not isinstance(measured, dict):
            measured = {}
        entries = 0
        for path, m in measured.items():
            if path not in self._tmpfs or not isinstance(m, dict):
                continue
            used, made = m.get("bytes"), m.get("entries")
            if isinstance(used, int) and self.watcher is not None:
                key = "shm" if path == "/dev/shm" else "tmp"
                self.watcher.peaks[key] = max(self.watcher.peaks.get(key) or 0, used)
            entries += made if isinstance(made, int) and made >= 0 else 0
        if measured and self.watcher is not None:
            self.watcher.note_extra("files", entries)  # judged by the watcher's last pass as it stops
        signals = status.get("signals")
        if not isinstance(signals, dict):
            signals = {}
        killed = signals.get("SIGXFSZ")
        if self.mode != "bwrap" and self._proc is not None and self._proc.returncode == -signal.SIGXFSZ:
            killed = 1  # no init of our own in between: the agent itself is the one we see
        if isinstance(killed, int) and killed > 0 and self.limits.get("disk"):
            self.hit.setdefault("disk", self.limits["disk"])
            self.notes.append(f"{killed} process(es) killed by the file-size limit (SIGXFSZ): a write past it")

    def leftovers(self, timed_out: bool) -> int | None:
        if self._killed_count is not None:
            return self._killed_count
        if self.survivors is not None:
            return self.survivors
        if self.mode != "bwrap" and self.cgroups.dirs:
            return self._count_alive(exclude_agent=False)  # the agent itself is gone: the rest outlived it
        return None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.cgroups.kill_all()
        if self.watcher is not None:
            self.watcher.stop()
        if self.net is not None:
            self.net.stop()
        stats = self.cgroups.stats()
        self.cgroups.remove()
        close_fds(self._fds.values())
        self._fds.clear()
        self._stats = stats
        mem, pids = stats.get("memory", {}), stats.get("pids", {})
        if mem.get("oom_kill"):
            self.hit.setdefault("memory", mem.get("peak"))
        if pids.get("refused"):
            self.hit.setdefault("procs", pids.get("peak"))
        peaks: dict[str, int] = dict(self.watcher.peaks) if self.watcher is not None else {}
        disk = self.limits.get("disk")
        if disk and any((peaks.get(key) or 0) >= disk - 64 * 1024 for key in ("shm", "tmp")):
            # a tmpfs holding as much as the file-size cap: a file met it (a write past it was refused)
            held = max(peaks.get("shm") or 0, peaks.get("tmp") or 0)
            self.hit.setdefault("disk", held)
            self.notes.append(f"a sandbox tmpfs held {held} bytes, as much as the file-size cap (the disk limit)")
        for key in ("shm", "tmp"):
            limit = self.limits.get(key)
            if (
                limit
                and self.enforced.get(key, "").startswith("bwrap")
                and peaks.get(key) is not None
                and limit - peaks[key] < 64 * 1024
            ):
                self.hit.setdefault(key, peaks[key])
        exceeded: dict[str, int] = self.watcher.exceeded if self.watcher is not None else {}
        for key, v in exceeded.items():
            self.hit.setdefault(key, v)

    # -- what goes into the record -----------------------------------------------------------------
    def record(self) -> dict[str, Any]:
        stats = getattr(self, "_stats", {})
        peaks: dict[str, int] = dict(self.watcher.peaks) if self.watcher is not None else {}
        mem, pids = stats.get("memory", {}), stats.get("pids", {})
        peak = {
            "memory": mem.get("peak"),
            "procs": pids.get("peak"),
            "disk": peaks.get("disk"),
            "files": peaks.get("files"),
            "shm": peaks.get("shm"),
            "tmp": peaks.get("tmp"),
        }
        out: dict[str, Any] = {}
        for key, value in self.limits.items():
            entry: dict[str, Any] = {
                "limit": value,
                "enforced_by": self.enforced.get(key, "not-enforced") if value else "off",
                "hit": key in self.hit,
                "peak": peak.get(key),
            }
            if key == "memory" and mem:
                entry["oom_kills"] = mem.get("oom_kill")
            if key == "procs" and pids:
                entry["forks_refused"] = pids.get("refused")
            if value and entry["enforced_by"] in ("rlimit-data", "rlimit-nproc"):
                entry["hit"] = None  # an rlimit refusal is seen only by the process it refused
            out[key] = entry
        return out

    def exceeded(self) -> list[str]:
        return sorted(self.hit)

    @property
    def write_events(self) -> list[dict[str, Any]]:
        return list(self.watcher.events) if self.watcher is not None else []

    def observation(self) -> dict[str, Any]:
        obs: dict[str, Any] = {"writes": self.watcher.summary() if self.watcher is not None else {"mechanism": None}}
        if self.net is not None:
            obs["network"] = {
                "mechanism": "dns-stub+proxy in the sandbox's namespace",
                "dns_queries": self.net.dns.queries if self.net.dns else 0,
                "dropped": self.net.dropped + (self.net.proxy.dropped if self.net.proxy is not None else 0),
            }
        else:
            obs["network"] = {"mechanism": None}
        if self.survivor_programs:
            obs["survivor_programs"] = self.survivor_programs
        obs["notes"] = list(self.notes)
        return obs


def _resolv_conf() -> str:
    from pytest_agentdrift.run.netwatch import RESOLV_CONF

    return RESOLV_CONF


def _ppid(pid: int) -> int:
    f = _stat(pid)
    return int(f[1]) if len(f) > 1 else -1


def _starttime(pid: int) -> int:
    f = _stat(pid)
    return int(f[19]) if len(f) > 19 else 1 << 62
