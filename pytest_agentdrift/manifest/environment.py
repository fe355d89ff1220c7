"""The host the agent runs on, as the manifest records it: its environment variables and its system.

`environment_allowlist` records the allowlisted variables by name, and a value only for the
names that select behaviour and carry no credential (NON_SECRET_ENV_VALUES, never a
secret-looking or path-like name); `os_identity` names the operating system (edition, release,
build, architecture; the kernel is provenance); `region` reads where the session runs from the
environment, for provenance.
"""

from __future__ import annotations

import platform as _platform
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_agentdrift.agents import products
from pytest_agentdrift.record.redact import SECRET_NAME as _SECRET_NAME  # one notion of a secret-looking name
from pytest_agentdrift.vocabulary import NOT_APPLICABLE, UNOBSERVED

#: Environment variables whose VALUES may be recorded (when they are also on
#: the session's allowlist, or always for the ones in ALWAYS_RECORDED_ENV):
#: locale, timezone, terminal and CI switches select behaviour and carry no
#: credential. Everything else contributes its name only.
NON_SECRET_ENV_VALUES = (
    frozenset(
        {
            "LANG",
            "LANGUAGE",
            "LC_ALL",
            "LC_CTYPE",
            "LC_MESSAGES",
            "TZ",
            "TERM",
            "CI",
            "NO_COLOR",
            "FORCE_COLOR",
            "PYTHONHASHSEED",
            "PYTHONUTF8",
            "PYTHONDONTWRITEBYTECODE",
            "NODE_ENV",
            "DISABLE_AUTOUPDATER",
            "GIT_OPTIONAL_LOCKS",
            "SOURCE_DATE_EPOCH",
        }
    )
    | products.non_secret_env_values()
)  # each product lists its own behaviour switches
#: Names recorded with their value whenever set, allowlisted or not: they
#: change how the products and tools behave and are never secret.
ALWAYS_RECORDED_ENV = ("LANG", "LC_ALL", "TZ", "CI")
#: Even on the value list, a name that looks like a credential is names-only.

#: Names whose value is a private path or changes every session: names only.
_PATHLIKE_ENV = (
    frozenset(
        {
            "HOME",
            "PATH",
            "TMPDIR",
            "TEMP",
            "TMP",
            "PWD",
            "OLDPWD",
            "USER",
            "LOGNAME",
            "SHELL",
            "XDG_CONFIG_HOME",
            "XDG_CACHE_HOME",
        }
    )
    | products.pathlike_env()
)


def environment_allowlist(env: Mapping[str, str], allowlist: Iterable[str]) -> dict[str, Any]:
    """Names always; values only for non-secret names (see NON_SECRET_ENV_VALUES).

    For each allowlisted name: ``{"set": bool, "value": ...}`` where value
    is present only when the name is on the non-secret list and does not
    look like a credential name. A few behaviour switches (locale, TZ, CI)
    are recorded whenever set.
    """
    names = sorted(set(allowlist) | {n for n in ALWAYS_RECORDED_ENV if n in env})
    out: dict[str, Any] = {}
    for name in names:
        item: dict[str, Any] = {"set": name in env}
        if (
            name in env
            and name in NON_SECRET_ENV_VALUES
            and not _SECRET_NAME.search(name)
            and name not in _PATHLIKE_ENV
        ):
            item["value"] = env[name]
        out[name] = item
    return out


def os_identity(system_root: Path | None) -> dict[str, Any]:
    """Edition, release, build and architecture; the kernel build is provenance.

    On Linux the distribution (os-release ID, VERSION_ID, BUILD_ID) names the
    image; the kernel belongs to the host a container runs on and changes
    under CI without the image changing, so it is recorded in provenance.
    """
    info: dict[str, Any] = {"system": _platform.system() or UNOBSERVED, "machine": _platform.machine() or UNOBSERVED}
    if sys.platform.startswith("linux"):
        rel = _os_release(system_root)
        info["distribution"] = rel.get("ID", UNOBSERVED) if rel else UNOBSERVED
        info["release"] = rel.get("VERSION_ID", UNOBSERVED) if rel else UNOBSERVED
        info["build"] = rel.get("BUILD_ID", NOT_APPLICABLE) if rel else UNOBSERVED
        libc = _platform.libc_ver()
        info["libc"] = " ".join(x for x in libc if x) or UNOBSERVED
    elif sys.platform == "darwin":
        ver = _platform.mac_ver()[0]
        info["distribution"] = "macos"
        info["release"] = ver or UNOBSERVED
        info["build"] = UNOBSERVED
    else:
        info["distribution"] = _platform.system()
        info["release"] = _platform.release() or UNOBSERVED
        info["build"] = _platform.version() or UNOBSERVED
    return info


def _os_release(system_root: Path | None) -> dict[str, str] | None:
    root = Path(system_root) if system_root is not None else Path("/")
    for rel in ("etc/os-release", "usr/lib/os-release"):
        try:
            text = (root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        out = {}
        for line in text.splitlines():
            k, sep, v = line.partition("=")
            if sep:
                out[k.strip()] = v.strip().strip('"')
        return out
    return None


def region(env: Mapping[str, str]) -> str:
    for name in (
        "AGENTDRIFT_REGION",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "GOOGLE_CLOUD_REGION",
        "AZURE_REGION",
        "RUNNER_REGION",
    ):
        if env.get(name):
            return env[name]
    return UNOBSERVED
