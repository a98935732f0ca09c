"""Prompt-token counting as the provider counts it, with tiktoken and no network.

A chat message costs its text plus a fixed overhead, a name one token more, and every reply
is primed with three tokens (OpenAI's documented accounting for gpt-3.5, gpt-4 and gpt-4o);
how a dialect renders what is not plain text is its adapter's. Text is tokenized once: the
bounded cache makes the next round of a conversation cost only its new messages.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tiktoken

from otel_ctx import _encodings as encodings
from otel_ctx import _families as families
from otel_ctx.engine._cache import BoundedCache
from otel_ctx.engine._errors import (
    InvalidMessageError,
    InvalidRequestError,
    TooDeeplyNestedError,
)

log = logging.getLogger("otel_ctx")
#: The fallback is announced once per process (later models at DEBUG): a proxy that sees a
#: new model name per request must neither flood the log nor grow a set of names.
_fallback_warned = False

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
#: Per tool call on an assistant message: the call's id, type and function wrapper.
TOKENS_PER_TOOL_CALL = 7

DEFAULT_ENCODING = "cl100k_base"
#: The warning a fallback to ``DEFAULT_ENCODING`` logs (a filter can match it by this template).
FALLBACK_MESSAGE = (
    "otel-ctx: %s; counting with %s (the calibration factor learns the difference from reported "
    "usage; further models are reported at DEBUG)"
)
_OFFLINE_SUFFIX = "_offline"


@dataclass(frozen=True, slots=True)
class ResolvedEncoding:
    """The encoding a fitter counts with, and whether it is the model's own.

    ``ratio`` scales a fallback's counts toward the model family's (measured from its bills),
    so an estimate made without the family's tokenizer is not off by the vocabularies' gap.
    """

    encoding: families.Tokenizer
    name: str
    native: str | None
    fallback: bool
    ratio: float = 1.0


def resolve_encoding(model: str, encoding: str | tiktoken.Encoding | None = None) -> ResolvedEncoding:
    """Pick an encoding that loads without the network (:mod:`otel_ctx._encodings`).

    An explicit :class:`tiktoken.Encoding` is used as given, an explicit name if it is
    installed offline. Otherwise the model's own encoding (gpt-4o, gpt-4.1, the o-series
    and gpt-5 count with o200k_base, gpt-4 and gpt-3.5 with cl100k_base), and for a model
    no table knows cl100k_base, with a warning: counts then differ from the provider's by
    a few percent, which the calibration factor absorbs.
    """
    global _fallback_warned
    if isinstance(encoding, tiktoken.Encoding):
        return ResolvedEncoding(encoding, encoding.name.removesuffix(_OFFLINE_SUFFIX), None, False)
    available = encodings.offline_names()
    if encoding is not None:
        base = encoding.removesuffix(_OFFLINE_SUFFIX)
        if base in available:
            return ResolvedEncoding(encodings.get_encoding(base), base, base, False)
        raise InvalidRequestError(
            "encoding", f"{encoding!r} is not available offline; installed: {', '.join(available)}"
        )
    native = encodings.encoding_name_for_model(model)
    if native is not None and native in available:
        return ResolvedEncoding(encodings.get_encoding(native), native, native, False)
    family = families.family_for(model) if native is None else None
    if family is not None and family.tokenizer is not None:
        own = families.tokenizer(family.tokenizer)
        if own is not None:
            return ResolvedEncoding(own, own.name, own.name, False)
    if family is not None:
        # A family otel-ctx knows, whose vocabulary is not installed (or not published): the
        # estimate is scaled by the family's measured ratio, and the log names the extra.
        extra = f"; install otel-ctx[{family.extra}] for its tokenizer" if family.extra else ""
        log.debug(FALLBACK_MESSAGE, f"model {model!r} ({family.name}){extra}", DEFAULT_ENCODING)
        return ResolvedEncoding(
            encodings.get_encoding(DEFAULT_ENCODING),
            DEFAULT_ENCODING,
            family.tokenizer,
            True,
            family.fallback_ratio,
        )
    # Anthropic publishes no offline tokenizer: cl100k_base is the closest there is, every
    # count is an estimate (``exact=False``) by design, and a warning would say nothing new.
    if families.model_key(model).startswith("claude"):  # also a Bedrock id or ARN of Claude
        level = logging.DEBUG
    else:
        level = logging.DEBUG if _fallback_warned else logging.WARNING
        _fallback_warned = True
    why = (
        f"no encoding is known for model {model!r}"
        if native is None
        else f"the {native} encoding of model {model!r} is not installed offline"
    )
    log.log(level, FALLBACK_MESSAGE, why, DEFAULT_ENCODING)
    return ResolvedEncoding(encodings.get_encoding(DEFAULT_ENCODING), DEFAULT_ENCODING, native, True)


class TokenCounter:
    """Counts text, messages and tool definitions for one encoding."""

    def __init__(
        self,
        resolved: ResolvedEncoding,
        *,
        model: str = "",
        cache: BoundedCache[int] | None = None,
    ) -> None:
        self.resolved = resolved
        self.encoding = resolved.encoding
        self._encode = resolved.encoding.encode_ordinary
        self._ratio = resolved.ratio
        self.cache = cache if cache is not None else BoundedCache()
        #: The model counted for: adapters price what the provider bills per model (images), and
        #: a dialect whose framing differs by model family reads it.
        self.model = model
        #: What dialect adapters keep between rounds for this counter (their turn caches),
        #: by provider: it lives and dies with the fitter that owns the counter.
        self.dialect_state: dict[str, Any] = {}
        #: Text counts in a family tokenizer of a dialect's own (by the tokenizer's name): counts of
        #: texts like :attr:`cache`'s, so a reset of the dialects' turn state keeps them.
        self.text_caches: dict[str, BoundedCache[int]] = {}

    # -- text ----------------------------------------------------------------------------

    def text(self, text: str) -> int:
        """Tokens in ``text``; special-token look-alikes (``<|endoftext|>``) are ordinary text."""
        cache = self.cache
        n = cache.get(text)
        if n is None:
            n = len(self._encode(text))
            if self._ratio != 1.0:
                n = int(n * self._ratio + 0.5)
            cache.misses += 1
            cache.put(text, n)
        return n

    def encode(self, text: str) -> list[int]:
        return self._encode(text)


def to_json(
    value: Any,
    where: str,
    index: int | None,
    error: type[InvalidRequestError] = InvalidMessageError,
    *,
    default: Callable[[Any], Any] | None = None,
) -> str:
    """``value`` as the compact JSON that is counted, or a typed error naming ``where``.

    ``default`` turns objects JSON does not know into ones it does (an adapter passes one
    that dumps SDK objects); too deep a value is :class:`TooDeeplyNestedError`, not a
    RecursionError from the encoder.
    """
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=default)
    except RecursionError:
        raise TooDeeplyNestedError(where, "is nested too deeply to be a request", index=index) from None
    except (TypeError, ValueError) as exc:
        raise error(where, f"is not JSON-serialisable: {exc}", index=index) from exc
