"""Secrets travelling with a bundle: the configuration values to scrub from every run artifact.

No pytest here.
"""

from __future__ import annotations

import json
import re

from pytest_agentdrift.manifest.bundlemodel import Bundle
from pytest_agentdrift.record.redact import SECRET_NAME, variants  # one notion of a secret, one set of its forms

_VALUES_ARE_SECRET = frozenset({"env", "headers", "http_headers", "env_http_headers", "environment"})
_SECRET_FLAG = re.compile(r"^--?[\w-]*(token|key|secret|password|passwd|auth|bearer)[\w-]*$", re.IGNORECASE)
_SECRET_SHAPE = re.compile(r"^(sk-|ghp_|gho_|ghs_|github_pat_|xox[abpr]-|AKIA|AIza|glpat-|eyJ)[A-Za-z0-9._~+/=-]{6,}$")


def secret_strings(bundle: Bundle) -> list[str]:
    """Values in the bundle's configuration that the manifest treats as secret, to keep out of every artifact.

    A team's settings and MCP files travel with the bundle into the work
    tree, where the agent can read and print them. The runs record only
    hashes of them, and these values (environment and header values, keys
    that name a credential, the argument after a ``--token``-like flag,
    strings shaped like well-known tokens, URL userinfo), also in hex and
    base64, are scrubbed from run artifacts like the session's own secrets.
    Hook scripts are not parsed: a token written into a script is not found.
    """
    found: set[str] = set()
    for f in bundle.files:
        if f.category == "config":
            doc = _parsed_config(bundle.source(f).read_bytes(), f.path)
            if doc is not None:
                _find_secrets(doc, found)
    out: set[str] = set()
    for value in found:
        if len(value) >= 6:
            out.update(variants(value))
    return sorted(out, key=len, reverse=True)


def _parsed_config(data: bytes, path: str) -> object:
    """A TOML, JSON or JSONC configuration file's value; None for another format or a file that does not parse."""
    import tomllib

    from pytest_agentdrift.agents.discovery_base import strip_jsonc

    try:
        if path.endswith(".toml"):
            return tomllib.loads(data.decode("utf-8"))
        if path.endswith((".json", ".jsonc")):
            return json.loads(strip_jsonc(data.decode("utf-8")))
    except (ValueError, UnicodeDecodeError):
        return None
    return None


def _find_secrets(value: object, found: set[str], secret: bool = False) -> None:
    """Add to ``found`` every string of ``value`` the manifest treats as secret (see secret_strings)."""
    if isinstance(value, dict):
        for k, v in value.items():
            _find_secrets(v, found, secret or str(k).lower() in _VALUES_ARE_SECRET or bool(SECRET_NAME.search(str(k))))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            before = value[i - 1] if i > 0 else None
            flagged = isinstance(before, str) and bool(_SECRET_FLAG.match(before))
            if isinstance(item, str) and "=" in item and _SECRET_FLAG.match(item.split("=", 1)[0]):
                found.add(item.split("=", 1)[1])
            _find_secrets(item, found, secret or flagged)
    elif isinstance(value, str):
        if secret or _SECRET_SHAPE.match(value):
            found.add(value)
        if "://" in value:
            _url_secrets(value, found)


def _url_secrets(value: str, found: set[str]) -> None:
    """A URL's password, and a long user name given without one (a token in the user slot)."""
    from urllib.parse import urlsplit

    try:
        user = urlsplit(value)
    except ValueError:
        return
    if user.password:
        found.add(user.password)
    if user.username and user.password is None and len(user.username) >= 8:
        found.add(user.username)


__all__ = ["secret_strings"]
