"""What an agent, or graded code, sees of the file system under bubblewrap. No pytest.

An allow-list, not a deny-list: the sandbox starts from an empty root and
mounts only what a program needs to run, read-only: the system directories
(/usr, /bin, /lib*, /sbin, the CPU topology of /sys), a fixed list of /etc entries, the Python
runtime the harness runs (its prefixes and this package, without the bundled
suite), the files and directories the caller names, and, writable, the run's
own directory. /tmp, /home, /root, /run, /var/run, /srv, /mnt, /media and /opt
exist but are empty; everything else does not exist at all (the project, the
records, other runs' and sessions' trees, other virtual environments, host
unix sockets, the real home).

Why /etc is an allow-list too: masking secrets means knowing every secret's
name on every distribution (shadow, gshadow and their backups, ssh host keys,
sudoers, ssl/private, keytabs, network passwords, tokens in pip.conf or npmrc,
...); one unknown name leaks. A missing allow-list entry fails loudly instead
(a program cannot find its configuration), and never leaks.

A path that is excluded (the bundled suite inside the package, the session's
task directories, ...) but lies inside a directory that is allowed is never
mounted, and never named: the allowed directory is recreated in the sandbox's
own tmpfs and its other entries bound one by one. So /proc/self/mountinfo
names only paths the sandbox shows, never a hidden one. A path the caller
allows explicitly (the reference agent's own task directory) is mounted even
when it lies inside an excluded one.

The plan is data (`MountPlan.mounts`, a list of `Mount(kind, source, dest)`):
it is turned into bwrap arguments and recorded, as is, in each run's
isolation record. `run/harnessruntime.py` says what the harness itself
needs inside, `run/agentpaths.py` (with `run/hostprogram.py`) what an
agent's command needs, `run/scratchplaces.py` which scratch directories
every sandbox hides.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from pytest_agentdrift.run.harnessruntime import bundled_suite_copies
from pytest_agentdrift.run.hostpaths import resolved, within
from pytest_agentdrift.run.scratchplaces import scratch_dirs

#: read-only system directories (a symlink such as /bin -> usr/bin is recreated as a symlink);
#: of /sys only the CPU topology runtimes size their thread pools by (not the cgroup tree,
#: which lists host processes)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys/devices/system/cpu")

#: the /etc entries a program needs: name service and users (getpwuid for git, ssh, getpass),
#: the dynamic linker, time zone and locale, TLS trust anchors (never ssl/private), the
#: alternatives links /usr/bin points into, OS identity, shells, git's and Python's system config
ETC_ALLOW = (
    "passwd",
    "group",
    "nsswitch.conf",
    "host.conf",
    "hosts",
    "hostname",
    "resolv.conf",
    "gai.conf",
    "services",
    "protocols",
    "networks",
    "rpc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "locale.alias",
    "locale.conf",
    "default/locale",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "pki/tls/certs",
    "pki/tls/openssl.cnf",
    "pki/ca-trust/extracted",
    "alternatives",
    "os-release",
    "lsb-release",
    "debian_version",
    "mtab",
    "bash.bashrc",
    "profile",
    "shells",
    "inputrc",
    "terminfo",
    "mime.types",
    "magic",
    "magic.mime",
    "gitconfig",
    "python3",
    *(f"python3.{minor}" for minor in range(8, 20)),
)

#: directories that exist in the sandbox, empty and read-only
EMPTY_DIRS = ("/tmp", "/var", "/var/tmp", "/home", "/root", "/run", "/srv", "/mnt", "/media", "/opt")

#: kinds of Mount, in the words of the record; `ro-data` is a file bubblewrap writes from a
#: descriptor onto its own tmpfs (the source is the descriptor, never recorded)
#: each mount kind's bubblewrap option, and whether the mount's source comes before its destination
BWRAP_OPTIONS = {
    "ro": ("--ro-bind", True),
    "rw": ("--bind", True),
    "dir": ("--dir", False),
    "symlink": ("--symlink", True),
    "tmpfs": ("--tmpfs", False),
    "proc": ("--proc", False),
    "dev": ("--dev", False),
    "mqueue": ("--mqueue", False),
    "remount-ro": ("--remount-ro", False),
    "ro-data": ("--ro-bind-data", True),
}


@dataclass(frozen=True)
class Mount:
    kind: str  # a key of BWRAP_OPTIONS
    source: str | None  # bound path, or a symlink's target; None for dir / tmpfs / proc / dev
    dest: str

    def bwrap_args(self) -> list[str]:
        """This mount as bubblewrap's arguments."""
        if self.kind not in BWRAP_OPTIONS:  # fail closed: a mount the sandbox would silently not make
            raise ValueError(f"unknown mount kind {self.kind!r}: {self.dest}")
        option, sourced = BWRAP_OPTIONS[self.kind]
        if not sourced:
            return [option, self.dest]
        if self.source is None:
            raise ValueError(f"a {self.kind} mount needs a source: {self.dest}")
        return [option, self.source, self.dest]

    def record(self, labels: Mapping[str, str] | None = None) -> str:
        def show(p: str | None) -> str | None:
            return labelled(p, labels) if p is not None else None

        if self.kind == "symlink":
            return f"symlink {show(self.dest)} -> {self.source}"
        if self.kind == "ro-data":
            return f"ro-data {show(self.dest)}"
        if self.source is not None and self.source != self.dest:
            return f"{self.kind} {show(self.source)} -> {show(self.dest)}"
        return f"{self.kind} {show(self.dest)}"


def labelled(path: str, labels: Mapping[str, str] | None) -> str:
    """`path`, a part under a key of `labels` shown under its label (`<run>/box/work`)."""
    for top, label in (labels or {}).items():
        if within(path, top):
            return label + path[len(top.rstrip("/")) :]
    return path


@dataclass(frozen=True)
class MountPlan:
    mounts: tuple[Mount, ...]
    #: allowed directories' entries that were left out because they are hidden
    excluded: tuple[str, ...] = ()
    #: what callers added and why (adapter install prefixes, named files): for the record
    additions: tuple[tuple[str, str], ...] = field(default=())
    #: run as this uid (and gid) in a user namespace of the sandbox's own, mapped to the caller's
    #: uid: the run's files are its own, it holds no capability outside, and a product that starts
    #: its own bubblewrap inside (Codex) can map its own user namespace; None: the caller's uid
    user: int | None = None

    def bwrap_args(self) -> list[str]:
        argv: list[str] = []
        if self.user is not None:
            argv += ["--unshare-user", "--uid", str(self.user), "--gid", str(self.user)]
        for m in self.mounts:
            argv += m.bwrap_args()
        return argv

    def with_mounts(self, extra: Iterable[Mount]) -> MountPlan:
        """This plan with `extra` mounted last, before the root is made read-only (over what it shows)."""
        body, last = list(self.mounts[:-1]), self.mounts[-1]
        return MountPlan((*body, *extra, last), self.excluded, self.additions, self.user)

    def to_record(self, labels: Mapping[str, str] | None = None) -> dict[str, list[str]]:
        """The plan as lines; a path under a key of `labels` is shown under its label
        (`<run>` for a run's own, randomly named directory: two recordings of one run agree)."""
        user = [f"user {self.user} (own user namespace, mapped to the harness's uid)"] if self.user is not None else []
        return {"mounts": user + [m.record(labels) for m in self.mounts], "excluded": list(self.excluded)}

    @property
    def writable(self) -> list[str]:
        return [m.dest for m in self.mounts if m.kind == "rw"]

    def shows(self, path: str) -> bool:
        """Whether `path` (as the host resolves it) exists in the sandbox: it lies inside a bound
        directory (a hidden entry of a recreated directory is never bound, so it is not)."""
        real = resolved(path)
        return os.path.exists(real) and any(m.kind in ("ro", "rw") and within(real, m.dest) for m in self.mounts)


def _ancestors(path: str) -> list[str]:
    """The directories above an absolute, normalised path, nearest first ("/a/b/c": "/a/b", "/a", "/")."""
    found = []
    while path != "/":
        path = os.path.dirname(path.rstrip("/")) or "/"
        found.append(path)
    return found


def _key(path: str) -> tuple[str, ...]:
    # parents sort before their children, whatever the characters in the names
    return tuple(p for p in path.split("/") if p)


#: the directories `private_tmp` makes a private tmpfs
PRIVATE_TMP_DIRS = ("/tmp", "/var/tmp")


def build(
    *,
    writable: Iterable[str | os.PathLike[str]] = (),
    readable: Iterable[str | os.PathLike[str]] = (),
    exclude: Iterable[str | os.PathLike[str]] = (),
    additions: Iterable[tuple[str, str]] = (),
    private_tmp: bool = False,
    user: int | None = None,
) -> MountPlan:
    """The plan for one sandbox: system allow-list + readable (read-only) + writable, minus exclude.

    With `private_tmp` the empty /tmp and /var/tmp are a tmpfs of the sandbox's own instead of
    read-only directories: writable, seen by nothing outside, gone with the sandbox (a product
    whose own sandbox needs /tmp, as Codex's does); the plan says so (`tmpfs /tmp`).

    Paths are resolved (a symlinked path is mounted where it really lives). A
    path that does not exist is left out. The root directory itself is never
    allowed as a whole.
    """
    ops: list[Mount] = [Mount("dev", None, "/dev"), Mount("tmpfs", None, "/dev/shm"), Mount("proc", None, "/proc")]
    shown = _Shown()
    shown.system()
    for p in readable:
        shown.allow(p, "ro")
    for p in writable:
        shown.allow(p, "rw")
    hidden = sorted({resolved(x) for x in exclude if x} | set(bundled_suite_copies()) | set(scratch_dirs()), key=_key)
    shown.drop_read_only_inside_writable()
    excluded: list[str] = []
    _mount_roots(shown.modes, hidden, ops, excluded)
    _add_links_and_empty_dirs(ops, shown, private_tmp)
    base, rest = ops[:3], ops[3:]
    rest.sort(key=lambda m: _key(m.dest))
    return MountPlan(
        tuple(base + rest + [Mount("remount-ro", None, "/")]),
        tuple(sorted(set(excluded))),
        tuple((str(p), str(why)) for p, why in additions),
        user,
    )


@dataclass
class _Shown:
    """What a plan shows before it becomes mounts: real path -> "ro" or "rw", and the symlinks
    to recreate so that the names callers used still work."""

    modes: dict[str, str] = field(default_factory=dict)
    links: list[Mount] = field(default_factory=list)

    def system(self) -> None:
        for d in SYSTEM_DIRS:
            if os.path.islink(d):
                self.links.append(Mount("symlink", os.readlink(d), d))
            elif os.path.isdir(d):
                self.modes[d] = "ro"
        for name in ETC_ALLOW:
            p = "/etc/" + name
            if os.path.islink(p):
                self.links.append(Mount("symlink", os.readlink(p), p))
            elif os.path.exists(p) and resolved(p) == p:
                self.modes[p] = "ro"

    def allow(self, path: str | os.PathLike[str], mode: str) -> None:
        raw = os.path.abspath(os.fspath(path))
        if not os.path.lexists(raw):
            return
        real = resolved(raw)
        if real == "/" or not os.path.exists(real):
            return
        if os.path.islink(raw) and resolved(os.path.dirname(raw)) == os.path.dirname(raw):
            self.links.append(Mount("symlink", os.readlink(raw), raw))  # the name the caller used still works
        if self.modes.get(real) != "rw":
            self.modes[real] = mode

    def drop_read_only_inside_writable(self) -> None:
        """What is writable is not also mounted read-only inside itself."""
        for r in [r for r, m in self.modes.items() if m == "ro"]:
            if any(within(r, w) for w, m in self.modes.items() if m == "rw"):
                del self.modes[r]


def _mount_roots(allowed: dict[str, str], hidden: list[str], ops: list[Mount], excluded: list[str]) -> None:
    """Mount each allowed path not already visible through an enclosing one of the same mode."""
    for root in sorted(allowed, key=_key):
        mode = allowed[root]
        # the nearest allowed directory above root (a lookup per ancestor, not a scan of every root:
        # a plan has about a hundred roots and is built for every sandbox)
        parent = next((a for a in _ancestors(root) if a in allowed), None)
        if parent is not None:
            cut = any(within(x, parent) and within(root, x) for x in hidden)
            if allowed[parent] == mode and not cut:
                continue  # already visible through its parent
        inside = [x for x in hidden if x != root and within(x, root)] if mode == "ro" else []
        _emit(root, mode, inside, ops, excluded)


def _add_links_and_empty_dirs(ops: list[Mount], shown: _Shown, private_tmp: bool) -> None:
    taken = {m.dest for m in ops}
    allowed = shown.modes
    for link in shown.links:
        # a link inside a mounted directory is already there (and that directory is read-only)
        if link.dest in taken or any(within(link.dest, r) for r in allowed if r != link.dest):
            continue
        ops.append(link)
        taken.add(link.dest)
    for d in EMPTY_DIRS:
        if d not in taken and not any(within(d, r) for r in allowed):
            ops.append(Mount("tmpfs" if private_tmp and d in PRIVATE_TMP_DIRS else "dir", None, d))
            taken.add(d)
    if "/var/run" not in taken:
        ops.append(Mount("symlink", "../run", "/var/run"))


def _emit(path: str, mode: str, hidden: list[str], ops: list[Mount], excluded: list[str]) -> None:
    """Mount path; when hidden paths lie inside it, recreate it and mount its other entries."""
    if not hidden or not os.path.isdir(path) or os.path.islink(path):
        ops.append(Mount(mode, path, path))
        return
    ops.append(Mount("dir", None, path))
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return
    for name in names:
        child = os.path.join(path, name)
        if child in hidden:
            excluded.append(child)
            continue
        if os.path.islink(child):
            try:
                ops.append(Mount("symlink", os.readlink(child), child))
            except OSError:
                pass
            continue
        if not (os.path.isdir(child) or os.path.isfile(child)):
            continue  # sockets, FIFOs and devices of a recreated directory are not carried over
        _emit(child, mode, [x for x in hidden if within(x, child) and x != child], ops, excluded)


def describe_additions(additions: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    seen: dict[str, str] = {}
    for path, why in additions:
        seen.setdefault(str(path), why)
    return [{"path": p, "why": w} for p, w in sorted(seen.items())]


def not_hidden(mode: str) -> list[str]:
    """What the agent and graded code can see under a mode that does not isolate the file system."""
    if mode == "bwrap":
        return []
    net = (
        "abstract unix sockets and the network are cut off (own network namespace)"
        if mode == "unshare"
        else "the host network is reachable"
    )
    return [
        "nothing of the host file system is hidden: the agent and graded code run with the host's view",
        "readable: the task directory (solution/, golden files, checks), the installed package's bundled suite, "
        "source checkouts and other virtual environments, the project and its records",
        "readable: other runs' and sessions' trees in the scratch directory (agentdrift-* in the temporary directory, "
        "or in /tmp when that lies under /dev)",
        "readable to the uid the session runs as: host files such as /etc/shadow (when root) and the real home (~/.gitconfig, ...)",
        "reachable: host unix sockets on the file system (/run, /tmp, ...); " + net,
    ]
