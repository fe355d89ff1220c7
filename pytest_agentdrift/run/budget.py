"""Tokens and cost: budgets, the user's price table, and watching one run live. No pytest.

Figures come from the adapters' usage parsing (the product's own stream) or,
for the generic protocol, from `usage` events the agent appends to
AGENTDRIFT_EVENTS (`{"type": "usage", "input_tokens": N, "output_tokens": M,
"cost_usd": X}`, each one adding up). A run's *tokens* are input + output as
the product reports them (the same basis as the comparison's cost figures);
its *cost* is the cost the product reported (Claude Code's total_cost_usd)
or, failing that, the tokens priced with the user's price table. Nothing is
looked up on the network.

    --agent-budget tokens=2000000       stop starting runs once the session spent this
    --agent-budget cost_usd=25          the same in USD
    --agent-budget run_tokens=200000    stop one run that goes over (recorded `over_budget`)
    --agent-budget run_cost_usd=2
    --agent-price-table prices.toml     USD per million tokens, by model
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import KW_ONLY, asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, TypedDict

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.safetext import escape_path
from pytest_agentdrift.shapes import SpendRecord
from pytest_agentdrift.vocabulary import OVER_BUDGET_OUTCOME  # a run stopped for going over its per-run budget

if TYPE_CHECKING:
    from pytest_agentdrift.agents.base import AgentAdapter, Usage
    from pytest_agentdrift.run.evidence import RunEvidence

BUDGET_KEYS = ("tokens", "cost_usd", "run_tokens", "run_cost_usd")

#: price-table fields, USD per million tokens
PRICE_FIELDS = ("input", "output", "cached_input")


@dataclass(frozen=True)
class Budget:
    tokens: int | None = None  # session
    cost_usd: float | None = None  # session
    run_tokens: int | None = None  # per run
    run_cost_usd: float | None = None  # per run

    @property
    def session_limited(self) -> bool:
        return self.tokens is not None or self.cost_usd is not None

    @property
    def run_limited(self) -> bool:
        return self.run_tokens is not None or self.run_cost_usd is not None

    def per_run(self) -> dict[str, int | float] | None:
        """The per-run part: identity (it can change what a run is allowed to do)."""
        if not self.run_limited:
            return None
        return {k: v for k, v in (("tokens", self.run_tokens), ("cost_usd", self.run_cost_usd)) if v is not None}

    def to_dict(self) -> dict[str, int | float]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def parse_budget(items: Iterable[str]) -> Budget:
    """`tokens=N`, `cost_usd=X`, `run_tokens=N`, `run_cost_usd=X` (repeatable; the last wins)."""
    counts: dict[str, int] = {}
    costs: dict[str, float] = {}
    for item in items:
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            key, sep, raw = part.partition("=")
            key = key.strip()
            if not sep or key not in BUDGET_KEYS:
                raise AgentDriftError(
                    f"--agent-budget: {part!r} is not KEY=VALUE with KEY one of {', '.join(BUDGET_KEYS)}"
                )
            raw = raw.strip().replace("_", "")
            try:
                number = float(raw)
            except ValueError:
                raise AgentDriftError(f"--agent-budget: {key}={raw!r} is not a number") from None
            if not (math.isfinite(number) and number > 0):
                raise AgentDriftError(f"--agent-budget: {key} must be greater than 0, got {raw}")
            if key.endswith("tokens"):
                if number != int(number):
                    raise AgentDriftError(f"--agent-budget: {key} must be a whole number of tokens, got {raw}")
                counts[key] = int(number)
            else:
                costs[key] = number
    return Budget(
        tokens=counts.get("tokens"),
        cost_usd=costs.get("cost_usd"),
        run_tokens=counts.get("run_tokens"),
        run_cost_usd=costs.get("run_cost_usd"),
    )


# --------------------------------------------------------------------------- prices


@dataclass(frozen=True)
class PriceTable:
    """USD per million tokens by model id; `default` prices any other model."""

    models: Mapping[str, Mapping[str, float]]
    source: str

    def lookup(self, model: str | None) -> tuple[str, Mapping[str, float]] | None:
        """Exact id, else the longest key the id starts with (`claude-sonnet-4-5` prices
        `claude-sonnet-4-5-20250929`), else `default`."""
        if model:
            if model in self.models:
                return model, self.models[model]
            prefixes = [k for k in self.models if k != "default" and model.startswith(k)]
            if prefixes:
                key = max(prefixes, key=len)
                return key, self.models[key]
        if "default" in self.models:
            return "default", self.models["default"]
        return None


def _price_document(p: Path) -> object:
    """The parsed price table file (JSON by its suffix, else TOML); AgentDriftError naming it when it
    cannot be read or parsed."""
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise AgentDriftError(f"cannot read the price table: {exc.strerror or exc}", p) from None
    try:
        if p.suffix.lower() == ".json":
            doc = json.loads(raw.decode("utf-8"))
        else:
            import tomllib

            doc = tomllib.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise AgentDriftError(f"not a valid price table ({str(exc).splitlines()[0]})", p) from None
    return doc


def _model_prices(model: object, prices: object, p: Path) -> dict[str, float]:
    """One model's prices as floats by field; AgentDriftError naming the file at the first bad one."""
    if not isinstance(prices, dict):
        raise AgentDriftError(f"models.{model}: expected a table of prices", p)
    unknown = sorted(set(prices) - set(PRICE_FIELDS))
    if unknown:
        raise AgentDriftError(
            f"models.{model}: unknown field(s) {', '.join(unknown)}; known: {', '.join(PRICE_FIELDS)} (USD per million tokens)",
            p,
        )
    missing = [f for f in ("input", "output") if f not in prices]
    if missing:
        raise AgentDriftError(f"models.{model}: missing {', '.join(missing)} (USD per million tokens)", p)
    clean = {}
    for k, v in prices.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise AgentDriftError(f"models.{model}.{k}: expected a number >= 0, got {v!r}", p)
        clean[k] = float(v)
    return clean


def load_price_table(path: str | os.PathLike[str]) -> PriceTable:
    """Read a price table (TOML or JSON): `[models."<model id>"] input = 3.0, output = 15.0,
    cached_input = 0.3` in USD per million tokens. One clear error naming the file."""
    p = Path(path)
    doc = _price_document(p)
    models = doc.get("models") if isinstance(doc, dict) else None
    if not isinstance(models, dict) or not models:
        raise AgentDriftError(
            'a price table needs a non-empty [models] table: [models."<model id>"] input = ..., output = ...', p
        )
    table: dict[str, dict[str, float]] = {}
    for model, prices in models.items():
        table[str(model)] = _model_prices(model, prices, p)
    return PriceTable(table, str(p))


def price(
    usage: Mapping[str, object], table: PriceTable | None, model: str | None, input_includes_cached: bool = False
) -> tuple[float, str] | None:
    """(USD, table key) for a usage dict, or None when it cannot be priced."""
    if table is None:
        return None
    found = table.lookup(model)
    if found is None:
        return None
    key, prices = found
    inp, out, cached = (_count(usage.get(k)) for k in ("input_tokens", "output_tokens", "cached_tokens"))
    if inp is None and out is None:
        return None
    inp, out, cached = inp or 0, out or 0, cached or 0
    if input_includes_cached:  # Codex counts cached input inside input_tokens
        inp = max(0, inp - cached)
    cached_rate = prices.get("cached_input", prices["input"])
    usd = (inp * prices["input"] + out * prices["output"] + cached * cached_rate) / 1_000_000
    return round(usd, 6), key


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def tokens_of(usage: Mapping[str, object] | None) -> int | None:
    """Input + output tokens as the product reported them (None when neither was)."""
    usage = usage or {}
    parts = [_count(usage.get("input_tokens")), _count(usage.get("output_tokens"))]
    return None if parts == [None, None] else sum(p or 0 for p in parts)


def run_spend(
    usage: Mapping[str, object] | None,
    *,
    model: str | None = None,
    table: PriceTable | None = None,
    input_includes_cached: bool = False,
) -> SpendRecord:
    """What one run (one attempt) spent: tokens, cost and where the cost came from."""
    usage = usage or {}
    reported = usage.get("cost_usd")
    cost: float | None
    source: str | None
    if isinstance(reported, (int, float)) and not isinstance(reported, bool) and math.isfinite(reported):
        cost, source = float(reported), "reported"
    else:
        priced = price(usage, table, model, input_includes_cached)
        cost, source = (priced[0], f"price_table:{priced[1]}") if priced else (None, None)
    return {"tokens": tokens_of(usage), "cost_usd": cost, "cost_source": source}


def add_spend(*spends: SpendRecord | None) -> SpendRecord:
    """Sum spends; None means "not reported", so None + n is n."""
    tokens: int | None = None
    cost: float | None = None
    sources: set[str] = set()
    for s in spends:
        if not s:
            continue
        if (n := s.get("tokens")) is not None:
            tokens = (tokens or 0) + n
        if (usd := s.get("cost_usd")) is not None:
            cost = round((cost or 0.0) + usd, 6)
        if s.get("cost_source"):
            sources.add(str(s["cost_source"]).split(":")[0])
    source = None if not sources else (sources.pop() if len(sources) == 1 else "mixed")
    return {"tokens": tokens, "cost_usd": cost, "cost_source": source}


def session_exhausted(budget: Budget, spent: SpendRecord) -> str | None:
    """Why the session budget is spent, or None."""
    if budget.tokens is not None and (spent.get("tokens") or 0) >= budget.tokens:
        return f"session token budget spent: {spent['tokens']:,} of {budget.tokens:,} tokens"
    if budget.cost_usd is not None and (spent.get("cost_usd") or 0) >= budget.cost_usd:
        return f"session cost budget spent: ${spent['cost_usd']:,.2f} of ${budget.cost_usd:,.2f}"
    return None


def run_exceeded(budget: Budget, spent: SpendRecord) -> str | None:
    """Why one run went over its per-run budget, or None."""
    if budget.run_tokens is not None and (spent.get("tokens") or 0) > budget.run_tokens:
        return f"per-run token budget exceeded: {spent['tokens']:,} > {budget.run_tokens:,} tokens"
    if budget.run_cost_usd is not None and (spent.get("cost_usd") or 0) > budget.run_cost_usd:
        return f"per-run cost budget exceeded: ${spent['cost_usd']:,.4f} > ${budget.run_cost_usd:,.4f}"
    return None


# --------------------------------------------------------------------------- the generic protocol's usage

#: a spend's `usage_source`: the agent's own usage reports (its usage events, its product's output),
#: or the harness's own count of the model calls its gateway relayed (run/modelgateway.py)
USAGE_SOURCE_AGENT = "agent"
USAGE_SOURCE_HARNESS = "harness"


def usage_source(run: RunEvidence) -> str:
    """Where a finished run's token counts come from: the harness's, when its model gateway saw
    the run's calls and counted their usage (which then replaced the agent's word), else the agent's."""
    traffic = run.model_traffic
    counted = traffic.get("usage") if traffic is not None else None
    if (
        traffic is not None
        and traffic.get("calls")
        and counted is not None
        and any(v is not None for v in counted.values())
    ):
        return USAGE_SOURCE_HARNESS
    return USAGE_SOURCE_AGENT


#: the longest events line the live reader takes; a longer one is skipped, never waited on
MAX_EVENT_LINE = 1 << 20


#: the largest cost one usage event may report (anything larger is not a cost, and overflows a float)
MAX_COST_USD = 1e12


def usage_from_events(events: Iterable[Mapping[str, object]]) -> Usage | None:
    """Sum the agent's `usage` events (the generic protocol); None when there are none."""
    from pytest_agentdrift.agents.base import Usage

    found = False
    counts: dict[str, int | None] = {"input_tokens": None, "output_tokens": None, "cached_tokens": None}
    cost: float | None = None
    for e in events:
        if not isinstance(e, Mapping) or e.get("type") != "usage":
            continue
        found = True
        for key in ("input_tokens", "output_tokens", "cached_tokens"):
            n = _count(e.get(key))
            if n is not None:
                counts[key] = (counts[key] or 0) + n
        c = e.get("cost_usd")
        if isinstance(c, (int, float)) and not isinstance(c, bool) and 0 <= c < MAX_COST_USD:
            cost = round((cost or 0.0) + float(c), 6)
    if not found:
        return None
    return Usage(
        input_tokens=counts["input_tokens"],
        output_tokens=counts["output_tokens"],
        cached_tokens=counts["cached_tokens"],
        cost_usd=cost,
    )


#: the longest model id the generic protocol takes from an agent's usage event
MAX_MODEL_ID = 200


def model_from_events(events: Iterable[Mapping[str, object]]) -> str | None:
    """The model that answered, as the agent's `usage` events name it (the generic protocol:
    `{"type": "usage", "model": "<the model the response named>", ...}` per call). Several
    distinct models in one run are all kept, sorted and comma-separated; None when no usage
    event names one (then the run's model stamp stays unobserved)."""
    from pytest_agentdrift.safetext import escape_path

    named = (e.get("model") for e in events if isinstance(e, Mapping) and e.get("type") == "usage")
    seen = {escape_path(m.strip()) for m in named if isinstance(m, str) and 0 < len(m.strip()) <= MAX_MODEL_ID}
    return ", ".join(sorted(seen)) or None


# --------------------------------------------------------------------------- one run, live


class LiveProgress(TypedDict):
    """What a run's watch reports as it runs (RunWatch.on_update): its last event and its spend so far."""

    last_event: str | None
    tokens: int | None
    cost_usd: float | None


@dataclass(eq=False)
class RunWatch:
    """A sandbox monitor: reads the run's output as it arrives.

    `feed` gets stdout chunks (reader thread); `poll` (the waiting thread,
    twice a second) also reads what the agent appended to its events file,
    reports progress through `on_update` and returns a stop reason when the
    run went over its per-run budget.
    """

    adapter: AgentAdapter
    events_path: Path
    _: KW_ONLY
    budget: Budget | None = None
    table: PriceTable | None = None
    model: str | None = None
    on_update: Callable[[LiveProgress], None] | None = None
    input_includes_cached: bool = False
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self.events_path = Path(self.events_path)
        self.budget = self.budget or Budget()
        self._lock = threading.Lock()
        self._partial = b""
        self._keyed: dict[str, tuple[int | None, int | None]] = {}
        self._added: list[int | None] = [None, None]  # input, output added without a key
        self._total: tuple[int | None, int | None] | None = None  # a final total (Claude's result) replaces the rest
        self._cost: float | None = None
        self._events_offset = 0
        self._skipping = False  # inside an events line too long to read: skipped to its end
        self.long_lines = 0
        self._event_usage: dict[str, int | float | None] = {
            "input_tokens": None,
            "output_tokens": None,
            "cost_usd": None,
        }
        self.last_event: str | None = None
        self._last_sent = -1.0

    # reader thread
    def feed(self, chunk: bytes) -> None:
        with self._lock:
            data = self._partial + chunk
            lines = data.split(b"\n")
            self._partial = lines.pop()
            if len(self._partial) > (1 << 20):  # one absurd line: drop it rather than grow
                self._partial = b""
            for line in lines:
                self._record(line)

    def _record(self, line: bytes) -> None:
        line = line.strip()
        if not line.startswith(b"{"):
            return
        from pytest_agentdrift.run.agentio import loads_untrusted

        try:  # the agent's output: bounded like its events (no 401-digit number reaches float())
            rec = loads_untrusted(line.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            return
        if not isinstance(rec, dict):
            return
        note = self.adapter.live_record(rec)
        if not note:
            return
        if note.get("event"):
            self.last_event = escape_path(str(note["event"])[:200])
        inp, out = _count(note.get("input_tokens")), _count(note.get("output_tokens"))
        if note.get("total"):
            self._total = (inp, out)
            if (usd := note.get("cost_usd")) is not None:
                self._cost = float(usd)
        elif (key := note.get("usage_key")) is not None:
            self._keyed[str(key)] = (inp, out)
        elif inp is not None or out is not None:
            self._added = [(self._added[0] or 0) + (inp or 0), (self._added[1] or 0) + (out or 0)]

    def _read_events(self) -> None:
        """New lines of the agent's events file (usage and the last event), up to 16 MiB a poll. A
        line longer than MAX_EVENT_LINE is skipped to its end: it never holds the reader at its start
        (which left every later usage line unread for the rest of the run)."""
        from pytest_agentdrift.canonical import open_regular

        try:
            fd = open_regular(self.events_path)
        except OSError:
            return
        with os.fdopen(fd, "rb") as fh:
            for _ in range(16):
                fh.seek(self._events_offset)
                data = fh.read(MAX_EVENT_LINE)
                self._events_offset += self._take_lines(data)
                if len(data) < MAX_EVENT_LINE:
                    return

    def _take_lines(self, data: bytes) -> int:
        """Read the whole lines at the start of `data`; how many bytes were consumed."""
        start = 0
        if self._skipping:
            nl = data.find(b"\n")
            if nl < 0:
                return len(data)
            start, self._skipping = nl + 1, False
        end = data.rfind(b"\n")
        if end < start:
            if len(data) - start >= MAX_EVENT_LINE:  # no end in sight: skip the line, count it
                self._skipping = True
                self.long_lines += 1
                return len(data)
            return start
        self._lines(data[start : end + 1])
        return end + 1

    def _lines(self, data: bytes) -> None:
        from pytest_agentdrift.run.agentio import loads_untrusted

        for line in data.splitlines():
            try:
                e = loads_untrusted(line.decode("utf-8", "replace"))
            except (ValueError, RecursionError):
                continue
            if not isinstance(e, dict):
                continue
            if e.get("type") == "usage":
                u = usage_from_events([e])
                for key in ("input_tokens", "output_tokens", "cost_usd"):
                    v = getattr(u, key)
                    if v is not None:
                        self._event_usage[key] = (self._event_usage[key] or 0) + v
            elif isinstance(e.get("type"), str):
                # shown on the terminal by the progress display: the agent's words, escaped
                self.last_event = escape_path(
                    f"{e['type']}: {e.get('name') or e.get('path') or e.get('command') or ''}".rstrip(": ")[:200]
                )

    def usage(self) -> dict[str, int | float | None]:
        """The usage seen so far."""
        with self._lock:
            if self._total is not None:
                inp, out = self._total
            else:
                ins = [v[0] for v in self._keyed.values() if v[0] is not None] + (
                    [self._added[0]] if self._added[0] is not None else []
                )
                outs = [v[1] for v in self._keyed.values() if v[1] is not None] + (
                    [self._added[1]] if self._added[1] is not None else []
                )
                inp = sum(ins) if ins else None
                out = sum(outs) if outs else None
            ev = self._event_usage
            ev_in, ev_out = _count(ev["input_tokens"]), _count(ev["output_tokens"])
            if ev_in is not None or ev_out is not None:
                inp = (inp or 0) + (ev_in or 0)
                out = (out or 0) + (ev_out or 0)
            cost = self._cost if self._cost is not None else ev["cost_usd"]
            return {"input_tokens": inp, "output_tokens": out, "cached_tokens": None, "cost_usd": cost}

    def spend(self) -> SpendRecord:
        return run_spend(
            self.usage(), model=self.model, table=self.table, input_includes_cached=self.input_includes_cached
        )

    # waiting thread
    def poll(self) -> str | None:
        with self._lock:
            self._read_events()
        spend = self.spend()
        now = self.clock()
        if self.on_update is not None and now - self._last_sent >= 1.0:
            self._last_sent = now
            self.on_update(
                {"last_event": self.last_event, "tokens": spend.get("tokens"), "cost_usd": spend.get("cost_usd")}
            )
        return run_exceeded(self.budget, spend) if self.budget is not None else None


__all__ = [
    "Budget",
    "PriceTable",
    "RunWatch",
    "parse_budget",
    "load_price_table",
    "price",
    "run_spend",
    "add_spend",
    "session_exhausted",
    "run_exceeded",
    "usage_from_events",
    "tokens_of",
    "OVER_BUDGET_OUTCOME",
]
