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
isolation record.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping

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
KINDS = ("ro", "rw", "dir", "symlink", "tmpfs", "proc", "dev", "mqueue", "remount-ro", "ro-data")


@dataclass(frozen=True)
class Mount:
    kind: str  # one of KINDS
    source: str | None  # bound path, or a symlink's target; None for dir / tmpfs / proc / dev
    dest: str

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
        if _within(path, top):
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

    def bwrap_args(self) -> list[str]:  # noqa: C901 (known debt: split by job when next touched)
        argv: list[str] = []
        if self.user is not None:
            argv += ["--unshare-user", "--uid", str(self.user), "--gid", str(self.user)]
        for m in self.mounts:
            if m.kind == "ro":
                argv += ["--ro-bind", m.source, m.dest]
            elif m.kind == "rw":
                argv += ["--bind", m.source, m.dest]
            elif m.kind == "dir":
                argv += ["--dir", m.dest]
            elif m.kind == "symlink":
                argv += ["--symlink", m.source, m.dest]
            elif m.kind == "tmpfs":
                argv += ["--tmpfs", m.dest]
            elif m.kind == "proc":
                argv += ["--proc", m.dest]
            elif m.kind == "dev":
                argv += ["--dev", m.dest]
            elif m.kind == "mqueue":
                argv += ["--mqueue", m.dest]
            elif m.kind == "remount-ro":
                argv += ["--remount-ro", m.dest]
            elif m.kind == "ro-data":
                argv += ["--ro-bind-data", m.source, m.dest]
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
        real = _real(path)
        return os.path.exists(real) and any(m.kind in ("ro", "rw") and _within(real, m.dest) for m in self.mounts)


def _real(p: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.path.abspath(os.fspath(p)))


def _within(path: str, top: str) -> bool:
    """path is top or lies below it (both absolute, normalised)."""
    return path == top or top == "/" or path.startswith(top.rstrip("/") + "/")


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
    hidden = sorted({_real(x) for x in exclude if x} | set(bundled_suite_copies()) | set(scratch_dirs()), key=_key)
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
            elif os.path.exists(p) and _real(p) == p:
                self.modes[p] = "ro"

    def allow(self, path: str | os.PathLike[str], mode: str) -> None:
        raw = os.path.abspath(os.fspath(path))
        if not os.path.lexists(raw):
            return
        real = _real(raw)
        if real == "/" or not os.path.exists(real):
            return
        if os.path.islink(raw) and _real(os.path.dirname(raw)) == os.path.dirname(raw):
            self.links.append(Mount("symlink", os.readlink(raw), raw))  # the name the caller used still works
        if self.modes.get(real) != "rw":
            self.modes[real] = mode

    def drop_read_only_inside_writable(self) -> None:
        """What is writable is not also mounted read-only inside itself."""
        for r in [r for r, m in self.modes.items() if m == "ro"]:
            if any(_within(r, w) for w, m in self.modes.items() if m == "rw"):
                del self.modes[r]


def _mount_roots(allowed: dict[str, str], hidden: list[str], ops: list[Mount], excluded: list[str]) -> None:
    """Mount each allowed path not already visible through an enclosing one of the same mode."""
    for root in sorted(allowed, key=_key):
        mode = allowed[root]
        # the nearest allowed directory above root (a lookup per ancestor, not a scan of every root:
        # a plan has about a hundred roots and is built for every sandbox)
        parent = next((a for a in _ancestors(root) if a in allowed), None)
        if parent is not None:
            cut = any(_within(x, parent) and _within(root, x) for x in hidden)
            if allowed[parent] == mode and not cut:
                continue  # already visible through its parent
        inside = [x for x in hidden if x != root and _within(x, root)] if mode == "ro" else []
        _emit(root, mode, inside, ops, excluded)


def _add_links_and_empty_dirs(ops: list[Mount], shown: _Shown, private_tmp: bool) -> None:
    taken = {m.dest for m in ops}
    allowed = shown.modes
    for link in shown.links:
        # a link inside a mounted directory is already there (and that directory is read-only)
        if link.dest in taken or any(_within(link.dest, r) for r in allowed if r != link.dest):
            continue
        ops.append(link)
        taken.add(link.dest)
    for d in EMPTY_DIRS:
        if d not in taken and not any(_within(d, r) for r in allowed):
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
        _emit(child, mode, [x for x in hidden if _within(x, child) and x != child], ops, excluded)


# ---- what the harness itself needs inside a sandbox ---------------------------------------
#: this package (run/ is one of its stage folders): mounted whole, its bundled suite excluded
PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def harness_pythonpath(*first: Path) -> str:
    """PYTHONPATH for a sandboxed helper of ours: its hook directory, then the directory holding
    this very copy of the package (mounted by harness_runtime), so a helper imports the code
    the harness runs and not whatever copy an editable install's finder points at."""
    return os.pathsep.join([*(str(p) for p in first), str(PACKAGE_ROOT.parent)])


@lru_cache(maxsize=1)
def harness_runtime() -> tuple[str, ...]:
    """The interpreter that runs agents' helpers and graded code, and this package.

    The prefixes of the running Python (a virtual environment and the
    installation it was made from), the interpreter's own installation, this
    package (its bundled suite is excluded by `build`), and pytest and its
    dependencies wherever they are installed.
    """
    from importlib.util import find_spec

    paths = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.dirname(_real(sys.executable))),
        str(PACKAGE_ROOT),
    }
    for name in ("pytest", "_pytest", "pluggy", "iniconfig", "packaging"):
        try:
            spec = find_spec(name)
        except (ImportError, ValueError):
            continue
        origin = spec.origin if spec is not None else None
        if origin and origin not in ("built-in", "frozen"):
            # a package is its directory, a module its file
            paths.add(os.path.dirname(origin) if os.path.basename(origin) == "__init__.py" else origin)
    return tuple(sorted(p for p in {_real(p) for p in paths} if p != "/"))


@lru_cache(maxsize=1)
def bundled_suite_copies() -> tuple[str, ...]:  # noqa: C901 (known debt: split by job when next touched)
    """Every copy of the bundled suite we can find: this package's, installed copies in
    the site directories of the runtimes we mount, and those editable installs point at."""
    from pytest_agentdrift.tasks.taskdirs import builtin_suite_dir

    found = {_real(builtin_suite_dir())}
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, "/usr", "/usr/local"}
    site_dirs: set[str] = {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    for prefix in prefixes:
        for pattern in (
            "lib/python3*/site-packages",
            "lib64/python3*/site-packages",
            "lib/python3*/dist-packages",
            "lib/python3/dist-packages",
            "local/lib/python3*/dist-packages",
        ):
            site_dirs.update(glob.glob(os.path.join(prefix, pattern)))
    sources: set[str] = set(site_dirs)
    for d in site_dirs:
        for pth in glob.glob(os.path.join(d, "*.pth")):
            try:
                lines = Path(pth).read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
            sources.update(ln.strip() for ln in lines if ln.strip().startswith("/"))
        for finder in glob.glob(os.path.join(d, "__editable__*finder.py")):
            try:
                text = Path(finder).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            for m in re.finditer(r"""['"]pytest_agentdrift['"]\s*:\s*['"]([^'"]+)['"]""", text):
                sources.add(os.path.dirname(m.group(1)))
    for src in sources:
        cand = os.path.join(src, "pytest_agentdrift", "suite")
        if os.path.isdir(cand):
            found.add(_real(cand))
    return tuple(sorted(found))


# ---- what an agent's command needs ---------------------------------------------------------
def _is_home_or_above(path: str) -> bool:
    home = _real(os.path.expanduser("~"))
    return _within(home, path) or path == os.path.join(home, ".local")


def install_prefix(real: str) -> str | None:
    """The directory an installed program lives in, when it is one we can name safely:
    an npm package (its directory under node_modules), a virtual environment, or the
    `<prefix>` of `<prefix>/bin/<program>`; never /, /usr, a home directory or ~/.local."""
    parts = real.split("/")
    if "node_modules" in parts:
        i = len(parts) - 1 - parts[::-1].index("node_modules")
        if i + 1 < len(parts):
            end = i + 3 if parts[i + 1].startswith("@") else i + 2
            return "/".join(parts[:end])
    parent = os.path.dirname(real)
    if os.path.basename(parent) in ("bin", "sbin"):
        prefix = os.path.dirname(parent)
        if prefix not in ("/", "/usr", "/usr/local") and not _is_home_or_above(prefix):
            return prefix
    return None


def npm_dependencies(prefix: str) -> list[tuple[str, str]]:
    """The installed packages an npm package needs that lie outside it (path, why).

    `npm install --prefix` (or a project's own node_modules) puts a package's dependencies
    beside it rather than inside it: `node_modules/@openai/codex` finds its platform binary in
    `node_modules/@openai/codex-linux-x64`, `@github/copilot` finds `detect-libc`. Each name
    of `dependencies` and `optionalDependencies` is resolved as Node does, in the nearest
    `node_modules` up from the package, transitively; the ones inside the package are already
    visible with it."""
    out: list[tuple[str, str]] = []
    seen = {_real(prefix)}
    todo = [prefix]
    while todo and len(seen) < 200:
        pkg = todo.pop()
        for name in _npm_dependency_names(pkg):
            found = _npm_resolve(pkg, name)
            if found is None or found in seen:
                continue
            seen.add(found)
            if not _within(found, _real(prefix)):
                out.append((found, f"npm dependency {name} of {pkg.rsplit('node_modules/', 1)[-1]}"))
            todo.append(found)
    return out


def _npm_dependency_names(pkg: str) -> list[str]:
    try:
        meta = json.loads(Path(pkg, "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(meta, dict):
        return []
    names: list[str] = []
    for key in ("dependencies", "optionalDependencies"):
        deps = meta.get(key)
        if isinstance(deps, dict):
            names += [n for n in deps if isinstance(n, str) and "/.." not in n and not n.startswith(".")]
    return names


def _npm_resolve(pkg: str, name: str) -> str | None:
    """Where Node finds package `name` from inside `pkg`: its own node_modules, then each
    node_modules directory above it."""
    d = _real(pkg)
    candidates = [os.path.join(d, "node_modules", name)]
    while d != "/":
        d = os.path.dirname(d)
        if os.path.basename(d) == "node_modules":
            candidates.append(os.path.join(d, name))
    for c in candidates:
        if os.path.isfile(os.path.join(c, "package.json")):
            return _real(c)
    return None


def _shebang_words(path: str) -> list[str]:
    """The words of a script's `#!` line ([] for a binary or an unreadable file)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    return head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()


def _shebang(path: str) -> str | None:
    words = _shebang_words(path)
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        return rest[0] if rest else None
    return words[0]


# ---- version managers: a shim is not the program it starts ---------------------------------
#: a shim script that execs its manager, `exec "<root>/libexec/pyenv" exec "$program" "$@"`
#: (pyenv, rbenv, nodenv, asdf, ...): it runs only where the whole manager is visible
_EXEC_SHIM = re.compile(r'^\s*exec\s+"?([^"\s]+)"?\s+exec\s', re.M)
#: managers whose shims are links to the manager's own binary (it reads argv[0]): link target -> manager
_LINK_SHIMS = {"mise": "mise", "rtx": "rtx", "volta-shim": "volta"}


@dataclass(frozen=True)
class Program:
    """What a command's first word runs on this host."""

    found: str  # where PATH (or the command itself) points
    path: str  # what really runs: `found`, or what a version manager's shim starts
    manager: str | None = None  # the version manager whose shim `found` is
    problem: str | None = None  # why a shim could not be resolved


def shim_manager(found: str, path_env: str | None) -> str | None:
    """The version manager `found` is a shim of (its executable), or None for a real program."""
    real = _real(found)
    if os.path.islink(found) and os.path.basename(real) in _LINK_SHIMS:
        name = _LINK_SHIMS[os.path.basename(real)]
        sibling = os.path.join(os.path.dirname(real), name)
        return sibling if os.path.isfile(sibling) else shutil.which(name, path=path_env) or real
    if os.path.basename(_shebang(real) or "") not in ("sh", "bash", "dash", "zsh"):
        return None
    try:
        with open(real, "rb") as fh:
            text = fh.read(8192).decode("utf-8", "replace")
    except OSError:
        return None
    m = _EXEC_SHIM.search(text)
    if m is None or "$" in m.group(1):
        return None
    manager = m.group(1)
    return manager if "/" in manager else shutil.which(manager, path=path_env) or manager


@lru_cache(maxsize=64)
def resolve_program(exe: str, path_env: str | None) -> Program | None:
    """Where `exe` points and what really runs (a shim asked with its manager's `which`, in
    the session's own directory and environment: a .python-version there counts); None
    when there is no such program."""
    import subprocess

    found = exe if "/" in exe else shutil.which(exe, path=path_env)
    if not found or not os.path.exists(found):
        return None
    found = os.path.abspath(found)
    manager = shim_manager(found, path_env)
    if manager is None:
        return Program(found, found)
    name = os.path.basename(found)
    argv = [manager, "which", name]
    try:
        out = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PATH": path_env or os.environ.get("PATH", "")},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return Program(found, found, manager, f"`{' '.join(argv)}` could not run: {exc}")
    lines = out.stdout.strip().splitlines()
    path = lines[-1].strip() if lines else ""
    if out.returncode != 0 or not os.path.isabs(path) or not os.path.isfile(path):
        why = (out.stderr.strip().splitlines() or out.stdout.strip().splitlines() or [f"exit {out.returncode}"])[-1]
        return Program(found, found, manager, f"`{' '.join(argv)}` named no program: {why}")
    return Program(found, os.path.abspath(path), manager)


def host_argv(argv: list[str], path_env: str | None) -> list[str]:
    """`argv` with its program named as the host runs it: a shim replaced by what it starts,
    a script whose shebang is `env NAME` started by the NAME the host's PATH finds (inside
    the sandbox the PATH starts with the task's toolchain, which is not the agent's)."""
    if not argv or "{" in argv[0]:
        return list(argv)
    prog = resolve_program(argv[0], path_env)
    if prog is None or prog.problem:
        return list(argv)
    words = _shebang_words(_real(prog.path))
    if len(words) == 2 and os.path.basename(words[0]) == "env" and not words[1].startswith("-"):
        interp = resolve_program(words[1], path_env)
        if interp is not None and not interp.problem:
            return [interp.path, prog.path, *argv[1:]]
    return [prog.path, *argv[1:]]


def executable_paths(  # noqa: C901 (known debt: split by job when next touched)
    exe: str, path_env: str | None, _depth: int = 0, _name: str | None = None
) -> list[tuple[str, str]]:
    """What running `exe` needs beyond the system: (path, why) pairs.

    The file (and each link on the way to it), its install prefix, a virtual
    environment's base installation, and the same for a script's interpreter.
    A version manager's shim is replaced by the program it starts (the shim
    itself needs the whole manager, and the sandbox shows no home).
    """
    prog = resolve_program(exe, path_env) if _depth <= 3 else None
    if prog is None or prog.problem:
        return []
    name = _name or exe
    if prog.manager is not None:
        how = f"{name} (a shim of {os.path.basename(prog.manager)}, {prog.found}, resolved)"
        return executable_paths(prog.path, path_env, _depth + 1, how)
    out: list[tuple[str, str]] = []
    p = prog.found
    for _ in range(40):
        if not os.path.islink(p):
            break
        out.append((p, f"link to {name}"))
        p = os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p)))
    real = _real(prog.found)
    out.append((real, f"executable {name}"))
    venv = venv_of(prog.found)
    if venv is not None and venv != install_prefix(real):
        # a venv's interpreter is a link out of it: without the venv its packages are gone
        out.append((venv, f"virtual environment of {name}"))
        out += _venv_base(venv)
    prefix = install_prefix(real)
    if prefix:
        out.append((prefix, f"install prefix of {name}"))
        out += npm_dependencies(prefix)
        out += _venv_base(prefix)
    interp = _shebang(real)
    if interp and os.path.basename(interp) not in ("sh", "bash", "dash"):
        out += executable_paths(interp, path_env, _depth + 1)
    return out


def venv_of(found: str) -> str | None:
    """The virtual environment a program's name lies in (`<venv>/bin/python`, pyvenv.cfg beside
    bin/), before its links are followed: a venv's interpreter links to the base Python, and the
    venv is only found from the name the command used. Never a home directory or above."""
    parent = os.path.dirname(os.path.abspath(found))
    if os.path.basename(parent) not in ("bin", "Scripts"):
        return None
    venv = os.path.dirname(parent)
    if not os.path.isfile(os.path.join(venv, "pyvenv.cfg")) or venv in ("/", "/usr", "/usr/local"):
        return None
    return None if _is_home_or_above(_real(venv)) else venv


def _venv_base(prefix: str) -> list[tuple[str, str]]:
    """The base installation a virtual environment at `prefix` was made from (its pyvenv.cfg
    `home`), where that is not the system's own."""
    cfg = os.path.join(prefix, "pyvenv.cfg")
    if not os.path.isfile(cfg):
        return []
    out = []
    for line in Path(cfg).read_text(encoding="utf-8", errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            base = os.path.dirname(_real(value.strip()))
            if base not in ("/", "/usr") and not _is_home_or_above(base):
                out.append((base, f"base installation of {prefix}"))
    return out


def agent_paths(
    adapter, env: Mapping[str, str], hidden: Iterable[str | os.PathLike[str]] = ()
) -> list[tuple[str, str]]:
    """(path, why) an adapter's agent reads under bubblewrap: the program its argv starts (with
    its install prefix, or a script's interpreter), every existing absolute path the argv names,
    the directory of a program file it names (the agent's own code: a module beside it), and
    what the adapter adds (`sandbox_paths`)."""
    argv = adapter.argv_template()
    first = [] if not argv or "{" in argv[0] else executable_paths(argv[0], env_path(env))
    named = named_paths(argv[1:])
    return [*first, *named, *code_dirs(named, hidden), *adapter.sandbox_paths(dict(env))]


def named_paths(argv: Iterable[str]) -> list[tuple[str, str]]:
    """Existing absolute paths an argv names (`/x/agent.py`, `--config=/x/cfg.toml`)."""
    out = []
    for arg in argv:
        for value in (arg, arg.partition("=")[2]):
            if value.startswith("/") and "{" not in value and os.path.exists(value):
                out.append((value, "named by the agent command"))
    return out


#: where the harness's scratch goes when the temporary directory lies under /dev
OUTSIDE_DEV = ("/tmp", "/var/tmp")
#: the names of the harness's scratch directories (run/scratch.py) and observer logs (run/netlog.py)
SCRATCH_PREFIX = "agentdrift-"


def scratch_places() -> list[str]:
    """Where run/scratch.py makes scratch directories: the scratch root (`work_root`) and the
    temporary directory (the root before a move)."""
    import tempfile

    tmp = tempfile.gettempdir()
    return list(dict.fromkeys(_real(p) for p in (work_root(tmp), tmp)))


def scratch_dirs() -> list[str]:
    """Every scratch directory of the harness in `scratch_places` and /tmp (observer logs,
    run/netlog.py): other sessions' and runs' trees, homes and logs. Hidden from every sandbox,
    even inside a directory shown whole (an --agent-mount of /tmp or a path the agent's argv
    names): the directory is then recreated from the entries listed when the plan is built, so
    one made later is not in it either."""
    found = []
    for place in dict.fromkeys([*scratch_places(), _real("/tmp")]):
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
    return any(p == "/dev" or p.startswith("/dev/") for p in (os.path.abspath(path), _real(path)))


def code_dirs(named: Iterable[tuple[str, str]], hidden: Iterable[str | os.PathLike[str]]) -> list[tuple[str, str]]:
    """The directory of each file the command names, where it may be shown: never a hidden path
    or a directory above one (the project itself, the records), a home or above, the temporary
    directory or the scratch directories' own (run/scratch.py) or the root; those stay hidden and
    `hidden_imports` says what the agent misses."""
    out = []
    for path, _ in named:
        if os.path.isfile(path) and code_dir_shown(os.path.dirname(_real(path)), hidden):
            out.append((os.path.dirname(_real(path)), "the agent's own code directory"))
    return out


def code_dir_shown(directory: str, hidden: Iterable[str | os.PathLike[str]]) -> bool:
    tops = [_real(h) for h in hidden if h] + scratch_places()
    return (
        directory not in ("/", "/usr", "/usr/local")
        and not _is_home_or_above(directory)
        and not any(_within(top, directory) for top in tops)
    )


def hidden_imports(named: Iterable[tuple[str, str]], hidden: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Modules beside a Python file the command names that the file imports, where that file's
    directory stays hidden: the agent would stop at its first import (ModuleNotFoundError)."""
    import ast

    hidden = list(hidden)
    missing: list[str] = []
    for path, _ in named:
        directory = os.path.dirname(_real(path))
        if not path.endswith(".py") or not os.path.isfile(path) or code_dir_shown(directory, hidden):
            continue
        try:
            tree = ast.parse(Path(path).read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        for name in sorted(names):
            for cand in (os.path.join(directory, name + ".py"), os.path.join(directory, name)):
                if os.path.exists(cand) and cand != _real(path):
                    missing.append(cand)
                    break
    return missing


def beyond_runtime(additions: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The additions a sandbox does not show anyway (the system, the harness runtime), deduplicated."""
    visible = (*harness_runtime(), "/usr")

    def shown(p: str) -> bool:
        return any(_within(p, v) for v in visible)

    out: dict[str, str] = {}
    for p, why in additions:
        p = os.path.abspath(p)
        if os.path.lexists(p) and not (shown(p) and shown(_real(p))):
            out.setdefault(p, why)
    return list(out.items())


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


def env_path(env: Mapping[str, str]) -> str:
    return env.get("PATH") or "/usr/local/bin:/usr/bin:/bin"
