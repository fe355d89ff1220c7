"""The page's shell: its one inline style and one inline script, read once from the package's static
files, and the Content-Security-Policy that allows exactly those two blocks (by hash) and nothing else."""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from importlib.resources import files

from pytest_agentdrift.record.html.escape import esc


@cache
def static_text(name: str) -> str:
    """static/NAME as the page holds it: the CSP hash covers these exact characters."""
    return (files("pytest_agentdrift.record.html") / "static" / name).read_text(encoding="utf-8")


def csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


@cache
def content_security_policy() -> str:
    return (
        f"default-src 'none'; style-src {csp_hash(static_text('report.css'))}; "
        f"script-src {csp_hash(static_text('report.js'))}; img-src 'none'; base-uri 'none'; form-action 'none'"
    )


def page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{content_security_policy()}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{esc(title)}</title><style>{static_text('report.css')}</style></head><body>\n{body}\n"
        f"<script>{static_text('report.js')}</script></body></html>\n"
    )
