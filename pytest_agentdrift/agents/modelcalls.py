"""Model calls as the harness sees them on the wire. Pure functions, no I/O, no pytest.

The harness's model gateway (run/modelgateway.py) forwards an agent's model requests to the real
host and hands each request and answer to these functions; a product preset that reads the same
wire formats from its own stream may use them too. They read, per call, the model the request
asked for, the model the answer names, the token figures of the answer's usage and nothing else:
never a prompt, an answer's text, a header or a query string.

Wire formats (chosen by the request path):

* Anthropic Messages (`.../messages`): `message.model` (`message_start` when streamed), `usage`
  (`input_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens`, `output_tokens`,
  the last `message_delta` carrying the final output count);
* OpenAI Responses (`.../responses`): `response.model`, `response.usage` (`input_tokens`,
  `output_tokens`, their details) on `response.completed`;
* OpenAI Chat Completions (`.../chat/completions`): `model` of any chunk, `usage` on the last
  one (only when the client asked for it: without it the call's tokens are unobserved, never 0);
* Gemini (`...:generateContent`, `...:streamGenerateContent`): `modelVersion`, `usageMetadata`
  (`promptTokenCount`, `candidatesTokenCount`, `cachedContentTokenCount`, `thoughtsTokenCount`);
  the requested model is in the path (`models/<id>:...`).

`summarise` turns a run's calls into the run's model evidence: the main model (the model the
agent's own conversation asked for; side calls to another model and a fallback after a provider
error are recorded apart, so they never flip the identity), the model stamp (what answered the
main calls), the tokens (None when any answered call's usage was not seen) and whether the run's
last model call was a provider error (an infrastructure error, with the retries counted).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import TypedDict

#: the wire formats, by the end of the request path
API_ANTHROPIC = "anthropic_messages"
API_RESPONSES = "openai_responses"
API_CHAT = "chat_completions"
API_GEMINI = "gemini"

#: base-URL variables the harness can point at its gateway, with the API they speak. Anthropic's
#: SDKs and Claude Code read ANTHROPIC_BASE_URL; OpenAI's SDKs read OPENAI_BASE_URL (Responses or
#: Chat Completions, told apart by the path); Gemini CLI and Google's genai SDK read
#: GOOGLE_GEMINI_BASE_URL.
BASE_URL_VARS: dict[str, str] = {
    "ANTHROPIC_BASE_URL": API_ANTHROPIC,
    "OPENAI_BASE_URL": "openai",
    "GOOGLE_GEMINI_BASE_URL": API_GEMINI,
}

#: the longest model id kept from a request or an answer
MAX_MODEL_ID = 200
_GEMINI_PATH = re.compile(r"/models/([^/:?]+):(?:stream)?[Gg]enerateContent$")
_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+-]*")


def api_of(path: str) -> str | None:
    """The wire format of a request path (query string ignored), or None: not a model call
    (a model list, a token count, ...)."""
    path = path.split("?", 1)[0].rstrip("/")
    if path.endswith("/messages"):
        return API_ANTHROPIC
    if path.endswith("/responses"):
        return API_RESPONSES
    if path.endswith("/chat/completions"):
        return API_CHAT
    if _GEMINI_PATH.search(path):
        return API_GEMINI
    return None


class Tokens(TypedDict):
    """Token figures of a call or a sum of calls (None: not seen)."""

    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None


class ModelCall(TypedDict, total=False):
    """One model call the harness's gateway forwarded or refused (run/modelgateway.py), as recorded.
    The token figures are there when the call was answered (`usage_seen` False: its answer showed none)."""

    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None

    type: str
    source: str
    api: str | None
    method: str
    endpoint: str
    path: str
    requested_model: str | None
    status: int | None
    error: str
    forwarded: bool
    stream: bool
    answered_model: str | None
    usage_seen: bool
    duration_s: float
    #: main, side or fallback (mark_roles)
    role: str


class FinalFailure(TypedDict):
    """The provider error a run's model traffic ended on (final_failure)."""

    status: int | None
    error: str | None
    requested_model: str | None
    attempts: int
    retries: int


class ModelTraffic(TypedDict, total=False):
    """A run's model evidence (summarise; run/modelgateway.observed adds the routes and the agent's word)."""

    calls: int
    main_model: str | None
    model_stamp: str | None
    answered_models: dict[str, int]
    statuses: dict[str, int]
    usage: Tokens
    main_thread: Tokens
    side_calls: Tokens | None
    fallback_models: list[str]
    provider_errors: int
    final_failure: FinalFailure | None
    routes: list[dict[str, str]]
    calls_dropped: int
    agent_reported: dict[str, int | str | None]
    disagreement: list[str]


def model_id(value: object) -> str | None:
    """A model id as recorded: a short printable token, or None (never free text)."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    if value.startswith("models/"):
        value = value[len("models/") :]
    return value if 0 < len(value) <= MAX_MODEL_ID and _MODEL_ID.fullmatch(value) else None


def requested_model(api: str | None, path: str, body: bytes) -> str | None:
    """The model a request asked for: Gemini names it in the path, the others in the body."""
    if api == API_GEMINI:
        m = _GEMINI_PATH.search(path.split("?", 1)[0].rstrip("/"))
        return model_id(m.group(1)) if m else None
    try:
        obj = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError):
        return None
    return model_id(obj.get("model")) if isinstance(obj, dict) else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _tokens(
    inp: object, out: object, cached: object = None, cache_write: object = None, reasoning: object = None
) -> Tokens:
    return {
        "input_tokens": _count(inp),
        "output_tokens": _count(out),
        "cached_tokens": _count(cached),
        "cache_write_tokens": _count(cache_write),
        "reasoning_tokens": _count(reasoning),
    }


def gemini_answer(obj: object) -> tuple[str | None, Tokens | None]:
    """(model version, token figures or None) of one Gemini `GenerateContentResponse` (a whole
    answer or one streamed chunk: a stream's last chunk carries the totals)."""
    if not isinstance(obj, Mapping):
        return None, None
    meta = obj.get("usageMetadata")
    usage = None
    if isinstance(meta, Mapping) and _count(meta.get("promptTokenCount")) is not None:
        usage = _tokens(
            meta.get("promptTokenCount"),
            # an answer with no candidate text (a bare function call) may leave the count out
            meta.get("candidatesTokenCount", 0),
            meta.get("cachedContentTokenCount"),
            None,
            meta.get("thoughtsTokenCount"),
        )
    return model_id(obj.get("modelVersion")), usage


def _anthropic_usage(u: object) -> Tokens | None:
    if not isinstance(u, Mapping):
        return None
    return _tokens(
        u.get("input_tokens"),
        u.get("output_tokens"),
        u.get("cache_read_input_tokens"),
        u.get("cache_creation_input_tokens"),
    )


def _openai_usage(u: object) -> Tokens | None:
    """Responses (`input_tokens`) or Chat Completions (`prompt_tokens`) usage."""
    if not isinstance(u, Mapping):
        return None
    in_details = u.get("input_tokens_details") or u.get("prompt_tokens_details") or {}
    out_details = u.get("output_tokens_details") or u.get("completion_tokens_details") or {}
    return _tokens(
        u.get("input_tokens", u.get("prompt_tokens")),
        u.get("output_tokens", u.get("completion_tokens")),
        in_details.get("cached_tokens") if isinstance(in_details, Mapping) else None,
        None,
        out_details.get("reasoning_tokens") if isinstance(out_details, Mapping) else None,
    )


class AnswerReader:
    """Reads one answer as it passes (a JSON body or a server-sent event stream), keeping only
    the answering model and the usage. Bounded: a JSON body over `limit` bytes is not parsed (its
    model and usage stay unobserved), an event line over it is skipped."""

    def __init__(self, api: str | None, content_type: str, limit: int = 8 << 20):
        self.api = api
        self.stream = "event-stream" in (content_type or "").lower()
        self.limit = limit
        self.model: str | None = None
        self.usage: Tokens | None = None
        self.events = 0
        self._buf = bytearray()
        self._over = False

    def feed(self, data: bytes) -> None:
        if self.api is None or self._over:
            return
        self._buf += data
        if not self.stream:
            if len(self._buf) > self.limit:
                self._over = True
                self._buf.clear()
            return
        while (end := self._buf.find(b"\n")) != -1:
            line = bytes(self._buf[:end]).rstrip(b"\r")
            del self._buf[: end + 1]
            self._line(line)
        if len(self._buf) > self.limit:
            self._buf.clear()

    def finish(self) -> None:
        if self.api is None or self._over:
            return
        if self.stream:
            if self._buf:
                self._line(bytes(self._buf))
        else:
            try:
                obj = json.loads(bytes(self._buf) or b"null")
            except (ValueError, UnicodeDecodeError):
                obj = None
            for item in obj if isinstance(obj, list) else [obj]:  # Gemini streams a JSON array without alt=sse
                self._answer(item)
        self._buf.clear()

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        payload = line[5:].strip()
        if not payload or payload == b"[DONE]":
            return
        try:
            obj = json.loads(payload)
        except (ValueError, UnicodeDecodeError):
            return
        self.events += 1
        self._answer(obj)

    def _answer(self, obj: object) -> None:
        if not isinstance(obj, Mapping):
            return
        model, usage = answer_parts(self.api, obj)
        self.model = model or self.model
        if usage is not None:
            self.usage = _merge_usage(self.usage, usage)


def answer_parts(api: str | None, obj: Mapping[str, object]) -> tuple[str | None, Tokens | None]:
    """(answering model, token figures) of one answer object or one streamed event of `api`."""
    if api == API_GEMINI:
        return gemini_answer(obj)
    if api == API_ANTHROPIC:
        kind = obj.get("type")
        msg = obj.get("message")
        if kind == "message_start" and isinstance(msg, Mapping):
            return model_id(msg.get("model")), _anthropic_usage(msg.get("usage"))
        if kind == "message_delta":
            return None, _anthropic_usage(obj.get("usage"))
        if kind == "message":
            return model_id(obj.get("model")), _anthropic_usage(obj.get("usage"))
        return None, None
    if api == API_RESPONSES:
        inner = obj.get("response")
        resp = inner if isinstance(inner, Mapping) else obj
        if obj.get("type") not in (None, "response.created", "response.completed", "response.incomplete"):
            return None, None
        return model_id(resp.get("model")), _openai_usage(resp.get("usage"))
    if api == API_CHAT:
        return model_id(obj.get("model")), _openai_usage(obj.get("usage"))
    return None, None


def _merge_usage(old: Tokens | None, new: Tokens) -> Tokens:
    """A later event's figures replace an earlier one's where given (Anthropic's message_delta
    carries the final output count; the input count stays from message_start)."""
    if old is None:
        return new.copy()

    def later(a: int | None, b: int | None) -> int | None:
        return b if b is not None else a

    return {
        "input_tokens": later(old["input_tokens"], new["input_tokens"]),
        "output_tokens": later(old["output_tokens"], new["output_tokens"]),
        "cached_tokens": later(old["cached_tokens"], new["cached_tokens"]),
        "cache_write_tokens": later(old["cache_write_tokens"], new["cache_write_tokens"]),
        "reasoning_tokens": later(old["reasoning_tokens"], new["reasoning_tokens"]),
    }


# --------------------------------------------------------------------------- a run's calls


def provider_failure(http_code: object) -> bool:
    """An HTTP status that is the provider's failure, not the request's (rate limit, overload, 5xx)."""
    return isinstance(http_code, int) and (
        http_code == HTTPStatus.TOO_MANY_REQUESTS or HTTPStatus.INTERNAL_SERVER_ERROR <= http_code <= 599
    )


TOKEN_FIELDS = ("input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens", "reasoning_tokens")


def _sum(calls: list[ModelCall]) -> Tokens:
    """Token totals of answered calls; a figure any answered call did not show is None (unobserved)."""
    answered = [c for c in calls if c.get("status") == 200]

    def billed(values: list[int | None]) -> int | None:
        # no answered call: nothing was billed; an answer whose usage was not seen: unobserved
        known = [v for v in values if v is not None]
        return None if len(known) < len(values) else sum(known)

    def seen(values: list[int | None]) -> int | None:
        known = [v for v in values if v is not None]
        return sum(known) if known else None

    return {
        "input_tokens": billed([c.get("input_tokens") for c in answered]),
        "output_tokens": billed([c.get("output_tokens") for c in answered]),
        "cached_tokens": seen([c.get("cached_tokens") for c in answered]),
        "cache_write_tokens": seen([c.get("cache_write_tokens") for c in answered]),
        "reasoning_tokens": seen([c.get("reasoning_tokens") for c in answered]),
    }


def mark_roles(calls: list[ModelCall]) -> str | None:
    """Give each model call its `role` (main, side, fallback) and return the main model.

    The main model is the one the agent's conversation asked for most often, counting only calls
    made before any provider error switched it: a call to another model right after a provider
    error answered the previous one (and every later call to that model) is a `fallback`; any
    other call to another model is a `side` call (titles, summaries, a smaller model)."""
    model_calls = [c for c in calls if c.get("api")]
    fallback: set[str] = set()
    last_failed: str | None = None
    for c in model_calls:
        asked = c.get("requested_model")
        if last_failed is not None and asked not in (None, last_failed):
            fallback.add(asked)
        last_failed = asked if provider_failure(c.get("status")) else None
    counts = Counter(c.get("requested_model") for c in model_calls if c.get("requested_model") not in fallback)
    main = counts.most_common(1)[0][0] if counts else None
    for c in model_calls:
        asked = c.get("requested_model")
        c["role"] = "main" if asked == main else "fallback" if asked in fallback else "side"
    return main


def summarise(calls: Iterable[ModelCall]) -> ModelTraffic | None:
    """A run's model evidence from its calls (each marked with its role in place); None without
    any model call."""
    calls = list(calls)
    model_calls = [c for c in calls if c.get("api")]
    if not model_calls:
        return None
    main = mark_roles(calls)
    mains = [c for c in model_calls if c["role"] == "main"]
    answered = Counter(m for c in mains if c.get("status") == 200 and (m := c.get("answered_model")))
    stamp = ", ".join(sorted(answered)) if answered else None
    side = [c for c in model_calls if c["role"] != "main"]
    statuses = Counter(str(c.get("status")) for c in model_calls)
    failed = [c for c in model_calls if provider_failure(c.get("status")) or c.get("status") is None]
    out: ModelTraffic = {
        "calls": len(model_calls),
        "main_model": main,
        "model_stamp": stamp,
        "answered_models": dict(sorted(Counter(c.get("answered_model") or "?" for c in model_calls).items())),
        "statuses": dict(sorted(statuses.items())),
        "usage": _sum(model_calls),
        "main_thread": _sum(mains),
        "side_calls": _sum(side) if side else None,
        "fallback_models": sorted({c.get("requested_model") or "?" for c in side if c["role"] == "fallback"}),
        "provider_errors": len(failed),
        # a side call that failed last (a title after the work) did not end the agent's conversation
        "final_failure": final_failure([c for c in model_calls if c["role"] != "side"]),
    }
    return out


def final_failure(model_calls: list[ModelCall]) -> FinalFailure | None:
    """The provider error the run's model traffic ended on: the last model call failed (429, 5xx,
    or the host could not be reached), with the failed calls in a row before it counted as the
    product's retries; None when the last call was answered."""
    if not model_calls:
        return None
    last = model_calls[-1]
    if not (provider_failure(last.get("status")) or last.get("status") is None):
        return None
    streak = 0
    for c in reversed(model_calls):
        if provider_failure(c.get("status")) or c.get("status") is None:
            streak += 1
        else:
            break
    return {
        "status": last.get("status"),
        "error": last.get("error"),
        "requested_model": last.get("requested_model"),
        "attempts": streak,
        "retries": streak - 1,
    }


__all__ = [
    "API_ANTHROPIC",
    "API_CHAT",
    "API_GEMINI",
    "API_RESPONSES",
    "AnswerReader",
    "BASE_URL_VARS",
    "answer_parts",
    "api_of",
    "final_failure",
    "gemini_answer",
    "mark_roles",
    "model_id",
    "provider_failure",
    "requested_model",
    "summarise",
]
