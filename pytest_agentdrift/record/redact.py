"""Keeping secrets out of every artifact. No pytest.

What is secret in the session's environment (secret_values: the variables given
to the agent with --agent-env, names that say key/token/secret/password, values
shaped like a credential) is replaced by `[REDACTED]` wherever run data leaves
for the record (session.run_task), also in hex and base64, the usual ways of
smuggling a value out. So is the content of the host's credential files
(host_file_secrets). Only what is secret: an ordinary value of the environment
(`GITHUB_EVENT_NAME=pull_request`, `LANG=en_US.UTF-8`, a model name) may well be
a word of the record, and replacing it there corrupts the record, never a
secret kept. The record's own names and vocabulary are never replaced
(scrub_record).
"""

from __future__ import annotations

import base64
import functools
import json
import re
from pathlib import Path
from typing import Any, Iterable

#: environment variable names whose values are secrets (shared with the manifest)
SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASS|PWD|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|CERT|DSN|BEARER", re.IGNORECASE
)


#: names SECRET_NAME matches that hold no secret: paths, a socket, a desktop session, a commit's author
_NOT_SECRET = re.compile(
    r"(PWD|OLDPWD|SSL_CERT_FILE|SSL_CERT_DIR|REQUESTS_CA_BUNDLE|SSH_AUTH_SOCK|DBUS_SESSION_BUS_ADDRESS"
    r"|XDG_SESSION_\w+|GIT_(AUTHOR|COMMITTER)_\w+)"
)
#: a value shaped like a credential, whatever its variable is called: a provider's key prefix
SECRET_SHAPE = re.compile(
    r"(?<![A-Za-z0-9_])(?:sk-[A-Za-z0-9_-]{12,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|AIza[0-9A-Za-z_-]{30,}|AKIA[0-9A-Z]{16}|xox[abposr]-[A-Za-z0-9-]{10,}|glpat-[A-Za-z0-9_-]{16,})"
)
#: a URL's `user:password@`: the password, and the pair
URL_CREDENTIALS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(([^\s/@:]*):([^\s/@]+))@")
#: a shorter value of a secret variable is not scrubbed (it would match all over ordinary text)
MIN_SECRET = 6
REDACTED = "[REDACTED]"


def variants(value: str) -> set[str]:
    """A secret as it may reach an artifact: as is, in hex and in base64 (the usual ways of smuggling it out)."""
    raw = value.encode()
    return {value, raw.hex(), base64.b64encode(raw).decode().rstrip("=")}


def _secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name)) and not _NOT_SECRET.fullmatch(name)


def shaped_secrets(value: str) -> list[str]:
    """The parts of a value shaped like a credential: a provider's key, a URL's password."""
    found = [m.group(0) for m in SECRET_SHAPE.finditer(value)]
    for m in URL_CREDENTIALS.finditer(value):
        if len(m.group(3)) >= 4:  # `user:password@` as it stands in a URL: specific enough whatever its length
            found.append(m.group(1) + "@")
        if len(m.group(3)) >= MIN_SECRET:
            found.append(m.group(3))
    return found


def secret_values(environ: dict[str, str], given: set[str]) -> list[str]:
    """Values of the session's environment to keep out of every artifact, each also in hex and base64.

    What is secret: the values of the variables given to the agent with --agent-env (`given`: the
    user said they are never recorded), of every variable whose name says key, token, secret,
    password or credential (without a PID namespace an agent can read its parent's
    /proc/PID/environ), and what is shaped like a credential in any value. Nothing else: an
    ordinary value is no secret, and replacing it corrupts the record (its words, a model's name).
    """
    out = set()
    for name, value in environ.items():
        found = shaped_secrets(value)
        if (name in given or _secret_name(name)) and len(value) >= MIN_SECRET:
            found.append(value)
        for secret in found:
            out.update(variants(secret))
    return sorted(out, key=len, reverse=True)


def scrub(text: str, secrets_: list[str]) -> str:
    """Replace any secret value that slipped into a text artifact."""
    for s in secrets_:
        if s and s in text:
            text = text.replace(s, REDACTED)
    return text


@functools.lru_cache(maxsize=1)
def record_words() -> frozenset[str]:
    """The record's own names and vocabulary: every property name, enum value and constant of
    the record's schemas. A secret never replaces one (the record would no longer be itself)."""
    words: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "properties" and isinstance(value, dict):
                    words.update(value)
                elif key == "enum" and isinstance(value, list):
                    words.update(v for v in value if isinstance(v, str))
                elif key == "const" and isinstance(value, str):
                    words.add(value)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for schema in sorted((Path(__file__).parent / "schema").glob("*.schema.json")):
        walk(json.loads(schema.read_text(encoding="utf-8")))
    return frozenset(words)


def scrub_record(obj: Any, secrets_: list[str]) -> Any:
    """A JSON value with every secret replaced in its strings and in the keys that are data (a
    path, a file's name), never in a key or value that is one of the record's own words."""
    if not secrets_:
        return obj
    words = record_words()

    def one(text: str) -> str:
        return text if text in words else scrub(text, secrets_)

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            return one(node)
        if isinstance(node, list):
            return [walk(v) for v in node]
        if isinstance(node, dict):
            return {one(k) if isinstance(k, str) else k: walk(v) for k, v in node.items()}
        return node

    return walk(obj)


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
