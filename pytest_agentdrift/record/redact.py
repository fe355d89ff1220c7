"""Keeping secrets out of every artifact. No pytest.

The values of the session's environment that look secret are replaced by
`[REDACTED]` wherever run data leaves for the record (session.run_task),
also in hex and base64, the usual ways of smuggling a value out. So is the
content of the host's credential files (host_file_secrets).
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Iterable

#: environment variable names whose values are secrets (shared with the manifest)
SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASS|PWD|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|CERT|DSN|BEARER", re.IGNORECASE
)


_NOT_SECRET = frozenset({"PWD", "OLDPWD", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "SSH_AUTH_SOCK"})


def variants(value: str) -> set[str]:
    """A secret as it may reach an artifact: as is, in hex and in base64 (the usual ways of smuggling it out)."""
    raw = value.encode()
    return {value, raw.hex(), base64.b64encode(raw).decode().rstrip("=")}


def secret_values(environ: dict[str, str], allow: set[str]) -> list[str]:
    """Values of the session's environment to keep out of every artifact.

    The agent never receives most of them, but without a PID namespace it can read
    its parent's /proc/PID/environ. Secret-looking names always; other long
    values unless they are paths (scrubbing those only mangles output); each
    also in hex and base64, the usual ways of smuggling a value out.
    """
    out = set()
    for name, value in environ.items():
        if len(value) < 6:
            continue
        pathlike = value.startswith(("/", "~")) or all(part.startswith("/") for part in value.split(":") if part)
        # a credential the agent is given (ANTHROPIC_API_KEY, --agent-env MY_TOKEN) is still a secret;
        # other values from 8 characters, unless they are paths (scrubbing those mangles output)
        if (SECRET_NAME.search(name) and name not in _NOT_SECRET) or (
            name not in allow and len(value) >= 8 and not pathlike
        ):
            out.update(variants(value))
    return sorted(out, key=len, reverse=True)


def scrub(text: str, secrets_: list[str]) -> str:
    """Replace any secret value that slipped into a text artifact."""
    for s in secrets_:
        if s and s in text:
            text = text.replace(s, "[REDACTED]")
    return text


#: Host files that hold credentials and that the session's uid may read. Under bwrap the
#: sandbox never shows them (the mount plan is an allow-list); under unshare or none an agent
#: can read them, so what they hold is scrubbed from every artifact. This list is the second
#: line of defence, not the first: a file missing here is still hidden under bwrap.
SYSTEM_CREDENTIAL_FILES = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-")
HOME_CREDENTIAL_FILES = (
    ".gitconfig",
    ".git-credentials",
    ".netrc",
    ".pypirc",
    ".npmrc",
    ".docker/config.json",
    ".aws/credentials",
    ".config/gh/hosts.yml",
    ".ssh/id_rsa",
    ".ssh/id_ecdsa",
    ".ssh/id_ed25519",
)
#: a shorter line or field is too common to scrub without mangling ordinary output
MIN_FRAGMENT = 12
#: what separates a line's fields: shadow's colons, `key = value`, a URL's user:token@host, JSON punctuation
_FIELD_SEPARATORS = re.compile(r"[:=@/\s,{}\[\]\"']+")
_SECTION = re.compile(r"\[[^\]]*\]")  # an ini or TOML section header
READ_LIMIT = 64 << 10  # per file: credential files are small; a huge one is not read whole


def host_file_secrets(home: Path, extra_home_files: Iterable[str] = (), system_root: Path = Path("/")) -> list[str]:
    """The lines and fields of the host's credential files, to keep out of every artifact.

    Each line of at least MIN_FRAGMENT characters, and each field of one (split at
    `_FIELD_SEPARATORS`: a shadow hash, a token after `password =`), also in
    hex and base64. Section headers and comments are not secrets. A file that
    cannot be read is skipped: what the session cannot read, neither can its agent.
    """
    paths = [system_root / p.lstrip("/") for p in SYSTEM_CREDENTIAL_FILES]
    paths += [home / p for p in (*HOME_CREDENTIAL_FILES, *extra_home_files)]
    out: set[str] = set()
    for path in paths:
        try:
            with open(path, "rb") as fh:
                text = fh.read(READ_LIMIT).decode("utf-8", "replace")
        except OSError:
            continue
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith(("#", ";")) or _SECTION.fullmatch(line):
                continue
            for fragment in (line, *_FIELD_SEPARATORS.split(line)):
                if len(fragment) >= MIN_FRAGMENT:
                    out.update(variants(fragment))
    return sorted(out, key=len, reverse=True)
