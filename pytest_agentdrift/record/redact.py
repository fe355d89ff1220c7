"""Keeping secrets out of every artifact. No pytest.

The values of the session's environment that look secret are replaced by
`[REDACTED]` wherever run data leaves for the record (session.run_task),
also in hex and base64, the usual ways of smuggling a value out.
"""

from __future__ import annotations

import base64
import re

#: environment variable names whose values are secrets (shared with the manifest)
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASS|PWD|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|CERT|DSN", re.IGNORECASE)


_NOT_SECRET = frozenset({"PWD", "OLDPWD", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "SSH_AUTH_SOCK"})


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
            raw = value.encode()
            out.update({value, raw.hex(), base64.b64encode(raw).decode().rstrip("=")})
    return sorted(out, key=len, reverse=True)


def scrub(text: str, secrets_: list[str]) -> str:
    """Replace any secret value that slipped into a text artifact."""
    for s in secrets_:
        if s and s in text:
            text = text.replace(s, "[REDACTED]")
    return text
