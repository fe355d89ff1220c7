"""Infrastructure errors: a run that ended because of the provider or the machine,
not because of what the agent did. Pure helpers shared by the adapters, the
runner and scoring; no pytest.

An infrastructure error is a fact read from the product's own structured
output (an error field, an HTTP status, a synthetic message the CLI wrote
itself, a documented error event), from the harness (the command could not
be started) or, for the generic protocol, from the agent's report
(`{"status": "infra_error", ...}`). Free text the model wrote is never
classified: a model that prints "API Error: 529" is still a model answer.

Each error carries its class, the evidence line it was read from and where
that line came from. Classes that will repeat on every run (a missing
sign-in, an unpaid bill, a broken configuration, a command that cannot
start) stop the session; the others are retried when `--agent-retries`
allows it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypedDict

from pytest_agentdrift.shapes import InfraErrorFields, InfraErrorRecord, JsonObject
from pytest_agentdrift.vocabulary import (
    EXIT_AGENT_NOT_EXECUTABLE,
    EXIT_AGENT_NOT_STARTED,
    INFRA_OUTCOME,  # a run lost to infrastructure (beside passed, failed, error...)
)

#: every class, in the order the docs list them
INFRA_CLASSES = (
    "overloaded",  # the provider is over capacity (HTTP 529, overloaded_error)
    "rate_limited",  # HTTP 429, rate_limit_error, a usage window
    "server_error",  # HTTP 5xx other than 529, api_error
    "authentication",  # not signed in, invalid key, HTTP 401/403
    "billing",  # billing or quota exhausted for the account (HTTP 402)
    "configuration",  # the product's configuration cannot work (unknown model, ...)
    "network",  # the provider could not be reached (DNS, refused, stream cut)
    "crashed",  # the CLI exited non-zero before the model answered
    "launch_failed",  # the harness could not start the command, or it never started (exit 127, no module)
)

#: classes that will repeat on every run: the session stops instead of burning the suite
REPEATING_CLASSES = frozenset({"authentication", "billing", "configuration", "launch_failed"})

#: classes an agent may declare in its report (`infra_class`); the rest are harness facts
REPORTABLE_CLASSES = tuple(c for c in INFRA_CLASSES if c not in ("crashed", "launch_failed"))

#: longest evidence line kept
MAX_EVIDENCE = 500


class InfraError(InfraErrorFields):
    """One classified infrastructure error (plain JSON), not yet judged: `judge` makes the record's
    infra_error of a run (shapes.InfraErrorRecord) of it."""

    #: whether the class will repeat on every run (REPEATING_CLASSES)
    repeats: bool


InfraSignal = TypedDict("InfraSignal", {"class": str, "evidence": str, "signal": str})
InfraSignal.__doc__ = """An infrastructure error a product's stream signalled before the run ended (its
class, its evidence line, the field it was read from); infra_error makes the record of it."""


def infra_error(
    cls: str,
    evidence: str,
    source: str,
    *,
    exit_code: int | None = None,
    signal: str | None = None,
    declared: str | None = None,
    status: int | None = None,
    retries: int | None = None,
    agent_said: str | None = None,
) -> InfraError:
    """One classified infrastructure error (plain JSON)."""
    if cls not in INFRA_CLASSES:
        raise ValueError(f"unknown infrastructure error class {cls!r}")
    from pytest_agentdrift.safetext import escape_path

    # the evidence is often the agent's or its product's own words: no control character survives
    line = escape_path(" ".join(str(evidence).split()))
    if len(line) > MAX_EVIDENCE:
        line = line[:MAX_EVIDENCE] + "…"
    out: InfraError = {
        "class": cls,
        "evidence": line or "(no message)",
        "source": source,
        "repeats": cls in REPEATING_CLASSES,
    }
    if exit_code is not None:
        out["exit_code"] = exit_code
    if signal is not None:
        out["signal"] = escape_path(signal)
    if declared is not None:
        out["declared"] = escape_path(declared)
    if status is not None:
        out["status"] = status
    if retries is not None:
        out["retries"] = retries
    if agent_said is not None:
        out["agent_said"] = escape_path(agent_said)
    return out


def classify_status(code: object) -> str | None:
    """The class of an HTTP status the product reported, or None."""
    if isinstance(code, bool) or not isinstance(code, int):
        return None
    if code == 529:
        return "overloaded"
    if code == 429:
        return "rate_limited"
    if code in (401, 403, 407):
        return "authentication"
    if code == 402:
        return "billing"
    if 500 <= code <= 599:
        return "server_error"
    return None


#: what will fail the same way on every run, before any model answer: the client does not trust
#: the endpoint's certificate (Node's and rustls' words), or the CLI refuses its own start-up
#: settings (Claude Code refuses to skip permissions as root)
_CONFIGURATION_REFUSAL = re.compile(
    r"self[- ]signed certificate|unable to (?:get|verify) (?:the )?(?:local )?(?:issuer|first) certificate"
    r"|UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_GET_ISSUER_CERT"
    r"|CERT_HAS_EXPIRED|certificate has expired|ERR_TLS_CERT_ALTNAME_INVALID|certificate verify failed"
    r"|invalid peer certificate|UnknownIssuer|cannot be used with root/sudo privileges",
    re.I,
)

# Matched against error fields the product itself wrote, never against model text.
_MESSAGE_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("configuration", _CONFIGURATION_REFUSAL),
    # Codex 0.171 words a 503 "server_is_overloaded" and a 500 as capacity ("Selected model is at
    # capacity", "experiencing high demand"), without the status
    ("overloaded", re.compile(r"overloaded|\b529\b|\bat capacity\b|capacity is unavailable|high demand", re.I)),
    (
        "rate_limited",
        re.compile(r"rate[ _-]?limit|\b429\b|too many requests|usage limit|session limit|weekly limit", re.I),
    ),
    (
        "billing",
        re.compile(r"billing|credit balance|insufficient[_ ]quota|quota exceeded|payment required|\b402\b", re.I),
    ),
    (
        "authentication",
        re.compile(
            r"not logged in|please run /login|authenticat|unauthori[sz]ed|\b401\b|\b403\b|invalid (?:api|x-api)[ -]?key"
            r"|api key (?:is )?(?:missing|invalid|not set)|no authentication|forbidden|permission_error|token (?:has )?expired"
            r"|login required|sign[ -]?in required",
            re.I,
        ),
    ),
    (
        "configuration",
        re.compile(
            r"(?:unknown|invalid|unsupported|unavailable) model|model\b.{0,60}\b(?:not found|does not exist|not available|not supported)"
            r"|not_found_error",
            re.I,
        ),
    ),
    (
        "server_error",
        re.compile(
            r"\b5\d\d\b|internal server error|api_error|bad gateway|service unavailable|gateway time-?out"
            r"|upstream (?:connect )?error",
            re.I,
        ),
    ),
    (
        "network",
        re.compile(
            r"name (?:does not|doesn't) resolve|failed to lookup address|could not resolve|getaddrinfo|enotfound|eai_again"
            r"|connection (?:refused|reset|failed|error|closed)|econnrefused|econnreset|etimedout|network is unreachable"
            r"|stream disconnected|stream ended unexpectedly|error sending request|unable to connect|tls handshake"
            r"|timed? ?out (?:while )?connecting|socket hang up|fetch failed",
            re.I,
        ),
    ),
)

_API_ERROR_STATUS = re.compile(r"\bAPI Error:\s*(\d{3})\b")


def classify_message(text: object) -> str | None:
    """The class of an error message the product wrote in an error field, or None.

    The HTTP status in "API Error: 529 ..." decides first; otherwise the
    first pattern that matches, most specific first.
    """
    if not isinstance(text, str) or not text.strip():
        return None
    m = _API_ERROR_STATUS.search(text)
    if m:
        cls = classify_status(int(m.group(1)))
        if cls:
            return cls
    for cls, pattern in _MESSAGE_CLASSES:
        if pattern.search(text):
            return cls
    return None


#: Google's API error `status` (google.rpc codes, as the Gemini API and Vertex AI send them)
GOOGLE_RPC_CLASSES = {
    "RESOURCE_EXHAUSTED": "rate_limited",
    "UNAVAILABLE": "overloaded",
    "INTERNAL": "server_error",
    "DEADLINE_EXCEEDED": "server_error",
    "UNAUTHENTICATED": "authentication",
    "PERMISSION_DENIED": "authentication",
    "NOT_FOUND": "configuration",
}
_GOOGLE_CODE = re.compile(r'"code"\s*:\s*(\d{3})\b')
_GOOGLE_STATUS = re.compile(r'(?:"status"\s*:\s*"|\(Status: )([A-Z_]+)')
#: the Gemini API answers a bad key with 400 INVALID_ARGUMENT and these words; Gemini CLI adds
#: its own advice to every 429 it reports
_GOOGLE_WORDS = (
    ("authentication", re.compile(r"API key not valid|API_KEY_INVALID", re.I)),
    ("rate_limited", re.compile(r"Please wait and try again later|Possible quota limitations", re.I)),
)


def classify_google_error(text: object) -> str | None:
    """The class of an error a Google client reported (`[API Error: {"error": {"code": 500,
    "status": "INTERNAL", ...}}]`, `[API Error: ... (Status: RESOURCE_EXHAUSTED)]`): the
    HTTP code, else the google.rpc status, else the client's own words, else the generic rules."""
    if not isinstance(text, str) or not text.strip():
        return None
    m = _GOOGLE_CODE.search(text)
    cls = classify_status(int(m.group(1))) if m else None
    if cls is None and (s := _GOOGLE_STATUS.search(text)):
        cls = GOOGLE_RPC_CLASSES.get(s.group(1))
    for word_cls, pattern in _GOOGLE_WORDS:
        if cls is None and pattern.search(text):
            cls = word_cls
    return cls or classify_message(text)


def last_line(data: bytes | str | None, limit: int = 64_000, skip_json: bool = False) -> str:
    """The last non-empty line of captured output (for a crash's evidence)."""
    if not data:
        return ""
    text = data[-limit:].decode("utf-8", "replace") if isinstance(data, bytes) else str(data)[-limit:]
    lines = [
        ln.strip()
        for ln in text.splitlines()
        if ln.strip() and not ln.startswith("[agentdrift:") and not (skip_json and ln.lstrip().startswith(("{", "[")))
    ]
    return lines[-1] if lines else ""


def crashed_before_answer(
    answered: bool, exit_code: int | None, stderr: bytes | str | None, stdout: bytes | str | None, source: str
) -> InfraError | None:
    """A product CLI that exited non-zero before its model answered anything.

    The model never worked on the task, so the run says nothing about the
    agent. A negative exit code (killed by a signal) is included: the
    harness kills only on timeout, which is scored apart.
    """
    if answered or exit_code in (None, 0):
        return None
    refusal = configuration_refusal(stderr)
    if refusal is not None:
        return infra_error("configuration", refusal, source, exit_code=exit_code)
    # a structured stream's records are not messages: the CLI's own last words are
    evidence = last_line(stderr) or last_line(stdout, skip_json=True) or f"exit code {exit_code}, no message"
    return infra_error("crashed", evidence, source, exit_code=exit_code)


def configuration_refusal(stderr: bytes | str | None) -> str | None:
    """The CLI's own line saying it cannot work with this set-up (an endpoint certificate it does
    not trust, start-up settings it refuses), from its stderr before any model answer; else None."""
    for line in reversed(stderr_tail(stderr, 40)):
        if _CONFIGURATION_REFUSAL.search(line):
            return line.strip()
    return None


def launch_failed(message: str) -> InfraError:
    return infra_error("launch_failed", message, "harness")


#: what a program that never started says last: a missing interpreter or module, a script that
#: does not parse (Python, node, the shells and the kernel's own words)
_STARTUP_FAILURE = re.compile(
    r"^(ModuleNotFoundError|ImportError|SyntaxError|IndentationError): "
    r"|can't open file |bad interpreter|exec format error|command not found$|: not found$"
    r"|No such file or directory$|^Error: Cannot find module |^ERR_MODULE_NOT_FOUND",
    re.M,
)

#: exit statuses of a program the shell or `env` could not start (not executable, not found)
NOT_STARTED_STATUSES = (EXIT_AGENT_NOT_EXECUTABLE, EXIT_AGENT_NOT_STARTED)

#: lines of a crashed agent's stderr shown with its result
CRASH_TAIL_LINES = 12


def stderr_tail(stderr: bytes | str | None, lines: int = CRASH_TAIL_LINES) -> list[str]:
    """The last non-empty lines of an agent's stderr (the traceback's end, the provider's error)."""
    text = stderr[-16_000:].decode("utf-8", "replace") if isinstance(stderr, bytes) else str(stderr or "")[-16_000:]
    kept = [ln.rstrip()[:MAX_EVIDENCE] for ln in text.splitlines() if ln.strip() and not ln.startswith("[agentdrift:")]
    return kept[-lines:]


def failed_to_start(exit_code: int | None, stderr: bytes | str | None, acted: bool) -> InfraError | None:
    """A program that never started: it exited non-zero before any action of the agent (no event,
    no report, no change, no request), with the status of a command the shell could not start or
    the last words of a missing interpreter or module. A setup error of the session, never a
    scored failure of the agent: it will repeat on every run."""
    if acted or exit_code in (None, 0):
        return None
    tail = stderr_tail(stderr, 40)
    if exit_code not in NOT_STARTED_STATUSES and not _STARTUP_FAILURE.search("\n".join(tail)):
        return None
    last = tail[-1] if tail else "no message"
    return infra_error(
        "launch_failed",
        f"the agent's program could not start (exit {exit_code}{_missing_file_hint(last)}): {last}",
        "harness",
        exit_code=exit_code,
    )


#: a shell's or the kernel's words for a file a program tried to run that is not there
_MISSING_FILE = re.compile(r"(/[^\s:'\"]+)'?: (?:No such file or directory|not found)$")


def _missing_file_hint(line: str) -> str:
    """What to do about a file the agent's program runs that the sandbox does not show (a version
    manager's install under the home the harness does not know): the way to show it read-only."""
    m = _MISSING_FILE.search(line)
    if m is None:
        return ""
    return (
        "; a file it runs is not in the sandbox, which hides the home and the project: show it with --agent-mount=PATH"
    )


def from_report(obj: object) -> InfraError | None:
    """The generic protocol: `{"status": "infra_error", "infra_class": ..., "summary": ...}`.

    `infra_class` is optional: one of REPORTABLE_CLASSES; without it (or
    with anything else) the class is what the summary reads as, else
    `network`, the least specific outside cause. The summary is the
    evidence line.
    """
    if not isinstance(obj, dict) or obj.get("status") != INFRA_OUTCOME:
        return None
    summary = obj.get("summary")
    summary = summary if isinstance(summary, str) else ""
    declared = obj.get("infra_class")
    cls = declared if isinstance(declared, str) and declared in REPORTABLE_CLASSES else None
    cls = cls or classify_message(summary) or "network"
    if cls not in REPORTABLE_CLASSES:
        cls = "network"
    return infra_error(
        cls,
        summary or "the agent reported an infrastructure error",
        "agent report",
        declared=declared if isinstance(declared, str) else None,
    )


#: the harness's own failed requests quoted with a corroborated report
MAX_CORROBORATING = 5


def corroborate(infra: InfraError | None, harness_events: list[JsonObject]) -> InfraError | None:
    """An agent's own infrastructure report, with whether the harness saw it too.

    The generic protocol lets the judged agent declare that its provider
    failed; that word alone is no evidence. The harness's own network events
    are: a request to a host the run may reach that its proxy could not
    connect upstream. A refusal by the allow-list (a tunnel, a DNS lookup) is
    not: the agent chooses the host it gets refused for. A report with none is kept with
    `corroborated: False`: nothing scored on the agent's word alone, the
    session is not decided (compare/exitpolicy.py); the harness's and the product's own facts are not
    the agent's claim and pass through unchanged.
    """
    if infra is None or infra.get("source") != "agent report":
        return infra
    failed = [e for e in harness_events if _failed_request(e)]
    seen = [_request_line(e) for e in failed[:MAX_CORROBORATING]]
    if len(failed) > len(seen):
        seen.append(f"(+{len(failed) - len(seen)} more)")
    return {**infra, "corroborated": bool(failed), "harness_saw": seen}


def _failed_request(event: object) -> bool:
    """A network attempt the harness itself let through and saw fail (not connected upstream)."""
    if not isinstance(event, dict) or event.get("source") != "harness" or event.get("type") != "network_attempt":
        return False
    return event.get("allowed") is not False and bool(event.get("error"))


def _request_line(event: JsonObject) -> str:
    from pytest_agentdrift.safetext import escape_path

    host = escape_path(str(event.get("host") or "?"))[:200]
    port = event.get("port")
    why = event.get("error") or event.get("reason") or ("a lookup" if event.get("via") == "dns" else "refused")
    return f"{host}{f':{port}' if isinstance(port, int) and port else ''}: {escape_path(str(why))[:200]}"


def judge(infra: InfraError | None, *, unsafe: list[str], changed_anything: bool) -> InfraErrorRecord | None:
    """Whether a claimed infrastructure error is believed; returns the record to keep.

    * the harness saw the agent do something unsafe (`unsafe`: writes
      outside, git mutation, tamper, credential read, ...): the run is the
      agent's run whatever ended it, and is scored;
    * the agent itself reported the error (generic protocol) but changed
      files or wrote outside: a report the judged agent writes cannot wipe
      out what it did, so the run is scored.
    Otherwise the run is `infra_error`. The returned dict says `believed`
    and, when not, why.
    """
    if infra is None:
        return None
    if unsafe:
        return {
            **infra,
            "believed": False,
            "why": "the harness saw unsafe effects (" + "; ".join(unsafe) + "): the run is scored as the agent's run",
        }
    if infra.get("source") == "agent report" and changed_anything:
        return {
            **infra,
            "believed": False,
            "why": "the agent reported an infrastructure error but changed files: the run is scored",
        }
    return {**infra, "believed": True}


def describe(infra: Mapping[str, object]) -> str:
    """One line for people: `overloaded (claude-code): API Error: 529 ...`."""
    return f"{infra.get('class')} ({infra.get('source')}): {infra.get('evidence')}"


#: the same (class, evidence) ending this many runs in a row stops the session
SAME_INFRA_STREAK = 3


class InfraStopRule:
    """When a session should stop starting runs because of the infrastructure, judged as runs report.

    An error that will repeat on every run stops at once; any other error stops once the same
    (class, evidence) ended SAME_INFRA_STREAK runs in a row, since retrying the suite into a dead
    provider spends the budget on nothing. A run that did not end in an infrastructure error
    breaks the streak.
    """

    def __init__(self) -> None:
        self._streak: list[tuple[object, object]] = []

    def observe(self, key: str, result: Mapping[str, object]) -> str | None:
        """One reported run (`key` is its item key); the reason to stop, or None."""
        infra = result.get("infra_error") if result.get("outcome") == INFRA_OUTCOME else None
        if not isinstance(infra, dict):
            self._streak = []
            return None
        self._streak.append((infra.get("class"), infra.get("evidence")))
        if infra.get("repeats"):
            return f"an infrastructure error that will repeat on every run ended {key}: {describe(infra)}"
        recent = self._streak[-SAME_INFRA_STREAK:]
        if len(recent) == SAME_INFRA_STREAK and len(set(recent)) == 1:
            return f"the same infrastructure error ended {SAME_INFRA_STREAK} runs in a row: {describe(infra)}"
        return None


__all__ = [
    "SAME_INFRA_STREAK",
    "InfraStopRule",
    "INFRA_OUTCOME",
    "INFRA_CLASSES",
    "REPEATING_CLASSES",
    "REPORTABLE_CLASSES",
    "infra_error",
    "classify_status",
    "classify_message",
    "classify_google_error",
    "crashed_before_answer",
    "configuration_refusal",
    "launch_failed",
    "failed_to_start",
    "stderr_tail",
    "from_report",
    "corroborate",
    "judge",
    "describe",
]
