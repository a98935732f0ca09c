"""What a request costs: a dated price table per model, and the provider's usage counts.

The table (``otel_ctx/data/prices.json``, dated ``as_of``) ships with the package and is never
fetched: an agent must not depend on a pricing page, and a cost must be reproducible from the
table it came from. Override it with ``OTEL_CTX_PRICES`` (a file of the same shape whose models
replace or add to the shipped ones), :meth:`PriceTable.load`, or a :class:`PriceTable` of your own.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from otel_ctx._tables import dated_models, family_row, in_file, read_file, read_shipped
from otel_ctx.engine._errors import InvalidPolicyError, InvalidRequestError, shown

#: Environment variable naming a price file whose models override the shipped table.
ENV_PRICES = "OTEL_CTX_PRICES"
PER_TOKENS = 1_000_000


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million tokens: uncached input, cached input (cache hits), output.

    ``cache_write`` is what a prompt-cache write costs (Anthropic bills writes above the
    input rate); ``None`` prices writes as ordinary input.
    """

    input: float
    cached_input: float
    output: float
    cache_write: float | None = None

    def __post_init__(self) -> None:
        for name in ("input", "cached_input", "output", "cache_write"):
            value = getattr(self, name)
            if value is None and name == "cache_write":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
                raise InvalidPolicyError(f"price.{name}", f"must be a finite number, got {shown(value)}")
            if value < 0:
                raise InvalidPolicyError(f"price.{name}", f"must be >= 0, got {shown(value)}")

    def cost(self, usage: Usage) -> float:
        """USD for one request's usage: each input token at the rate of its kind."""
        write_rate = self.input if self.cache_write is None else self.cache_write
        return (
            usage.uncached_input_tokens * self.input
            + usage.cached_input_tokens * self.cached_input
            + usage.cache_creation_input_tokens * write_rate
            + usage.output_tokens * self.output
        ) / PER_TOKENS


def _finite(value: float) -> bool:
    """A price that is a real float: a 400-digit integer would overflow every cost sum."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _count(where: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidRequestError(where, f"must be an int >= 0, got {value!r}")
    return value


def _field(obj: Any, name: str) -> Any:
    """``obj.name`` or ``obj[name]``: SDK usage objects and plain dicts alike; None when absent."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


@dataclass(frozen=True, slots=True)
class Usage:
    """A provider's reported token counts for one request, normalised.

    ``input_tokens`` is every prompt token, cached or not; ``cached_input_tokens`` (cache
    hits) and ``cache_creation_input_tokens`` (cache writes) are the parts of it billed
    at their own rates. OpenAI reports cached tokens inside ``prompt_tokens``; Anthropic
    reports them beside ``input_tokens`` — :meth:`from_openai` and :meth:`from_anthropic`
    take care of the difference.
    """

    input_tokens: int
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    def __post_init__(self) -> None:
        for name in ("input_tokens", "output_tokens", "cached_input_tokens", "cache_creation_input_tokens"):
            _count(f"usage.{name}", getattr(self, name))
        if self.cached_input_tokens + self.cache_creation_input_tokens > self.input_tokens:
            raise InvalidRequestError(
                "usage",
                f"cached ({self.cached_input_tokens}) plus cache-write "
                f"({self.cache_creation_input_tokens}) tokens exceed input_tokens ({self.input_tokens})",
            )

    @property
    def uncached_input_tokens(self) -> int:
        return self.input_tokens - self.cached_input_tokens - self.cache_creation_input_tokens

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @classmethod
    def reported(
        cls,
        input_tokens: int,
        output_tokens: int = 0,
        cached_input_tokens: int = 0,
        cache_creation_input_tokens: int = 0,
    ) -> Usage:
        """What a provider reported, as an observer must take it: never refused. A negative count
        reads 0, and cache reads and writes beyond the input are cut to it (a provider's report
        is what was billed; an observe-only path records it instead of raising)."""
        input_tokens = max(0, input_tokens)
        cached = min(max(0, cached_input_tokens), input_tokens)
        written = min(max(0, cache_creation_input_tokens), input_tokens - cached)
        return cls(input_tokens, max(0, output_tokens), cached, written)

    @classmethod
    def from_openai(cls, usage: Any) -> Usage:
        """From a Chat Completions ``usage`` (``prompt_tokens``, ``completion_tokens``,
        ``prompt_tokens_details.cached_tokens``) or a Responses ``usage`` (``input_tokens``,
        ``output_tokens``, ``input_tokens_details.cached_tokens``): an SDK object or a dict."""
        prompt = _field(usage, "prompt_tokens")
        if prompt is not None:
            output = _field(usage, "completion_tokens")
            details = _field(usage, "prompt_tokens_details")
        else:
            prompt = _field(usage, "input_tokens")
            output = _field(usage, "output_tokens")
            details = _field(usage, "input_tokens_details")
        if prompt is None:
            raise InvalidRequestError("usage", "has neither prompt_tokens nor input_tokens")
        cached = _field(details, "cached_tokens") or 0
        return cls(
            input_tokens=_count("usage.prompt_tokens", prompt),
            output_tokens=_count("usage.completion_tokens", output or 0),
            cached_input_tokens=_count("usage.prompt_tokens_details.cached_tokens", cached),
        )

    @classmethod
    def from_anthropic(cls, usage: Any) -> Usage:
        """From a Messages ``usage``: ``input_tokens`` (uncached only), ``output_tokens``,
        ``cache_read_input_tokens`` and ``cache_creation_input_tokens``."""
        uncached = _field(usage, "input_tokens")
        if uncached is None:
            raise InvalidRequestError("usage", "has no input_tokens")
        read = _count("usage.cache_read_input_tokens", _field(usage, "cache_read_input_tokens") or 0)
        write = _count("usage.cache_creation_input_tokens", _field(usage, "cache_creation_input_tokens") or 0)
        return cls(
            input_tokens=_count("usage.input_tokens", uncached) + read + write,
            output_tokens=_count("usage.output_tokens", _field(usage, "output_tokens") or 0),
            cached_input_tokens=read,
            cache_creation_input_tokens=write,
        )


def _price(model: str, raw: object) -> ModelPrice:
    if not isinstance(raw, Mapping):
        raise InvalidPolicyError(f"prices[{model!r}]", "must be an object of per-million-token prices")
    unknown = set(raw) - {"input", "cached_input", "output", "cache_write"}
    if unknown:
        raise InvalidPolicyError(f"prices[{model!r}]", f"unknown fields {sorted(unknown)}")
    missing = {"input", "output"} - set(raw)
    if missing:
        raise InvalidPolicyError(f"prices[{model!r}]", f"missing {sorted(missing)}")
    try:
        return ModelPrice(
            input=raw["input"],
            cached_input=raw.get("cached_input", raw["input"]),
            output=raw["output"],
            cache_write=raw.get("cache_write"),
        )
    except InvalidPolicyError as exc:
        raise InvalidPolicyError(f"prices[{model!r}].{exc.field.split('.')[-1]}", exc.problem) from None


@dataclass(frozen=True)
class PriceTable:
    """Model name -> :class:`ModelPrice`, with the date the prices were read (``as_of``).

    A model is found by its exact name, else by the longest table name it starts with
    followed by ``-``, ``@`` or ``:`` (``gpt-4o-2024-08-06`` is priced as ``gpt-4o``,
    ``claude-sonnet-4-5-20250929`` as ``claude-sonnet-4-5``). An unknown model has no
    price: its cost is reported as unknown, never as zero.
    """

    prices: Mapping[str, ModelPrice]
    as_of: str
    source: str = "otel-ctx"

    def __post_init__(self) -> None:
        object.__setattr__(self, "prices", MappingProxyType(dict(self.prices)))

    def price_for(self, model: str) -> ModelPrice | None:
        return family_row(self.prices, model)

    def cost(self, model: str, usage: Usage) -> float | None:
        """USD for ``usage`` on ``model``, or None when the model has no price."""
        price = self.price_for(model)
        return None if price is None else price.cost(usage)

    def merged(self, overrides: PriceTable) -> PriceTable:
        """This table with ``overrides``' models replacing or adding to it (its date wins)."""
        return PriceTable({**self.prices, **overrides.prices}, as_of=overrides.as_of, source=overrides.source)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str) -> PriceTable:
        """From the file's shape: ``{"as_of": "YYYY-MM-DD", "models": {name: {input, output, ...}}}``."""
        if not isinstance(data, Mapping):
            raise InvalidPolicyError(source, "a price file must hold a JSON object")
        as_of, models = dated_models(data, source, figures="prices", entries="prices")
        return cls(in_file(source, _price, models), as_of=as_of, source=source)

    @classmethod
    def load(cls, path: str | Path) -> PriceTable:
        """A price file of the shipped shape (see ``otel_ctx/data/prices.json``)."""
        data, source = read_file(path, "price file")
        return cls.from_dict(data, source=source)


def shipped_prices() -> PriceTable:
    """The table that ships with this version of otel-ctx."""
    return PriceTable.from_dict(read_shipped("prices.json"), source="otel-ctx")


def default_prices() -> PriceTable:
    """The shipped table, overridden by the file ``OTEL_CTX_PRICES`` names (if set).

    Read once per value of the variable: a run must not read a file per ticket.
    """
    return _default_prices(os.environ.get(ENV_PRICES, "").strip())


@functools.lru_cache(maxsize=4)
def _default_prices(override: str) -> PriceTable:
    table = shipped_prices()
    return table.merged(PriceTable.load(override)) if override else table
