"""What a dialect adapter is: a provider's request read into the engine's model, and back.

An adapter reads a request body (or a bare transcript) into a
:class:`~otel_ctx.engine.model.RequestModel`, counting every billed field with the
provider's accounting, and writes the fitted request back in the caller's dialect:
the kept items are the caller's own objects, every field the fit did not touch is
left as it was, and the caller's body is never mutated.

Adapters register by provider name in :mod:`otel_ctx.adapters`; a module that
provides one defines a module-level ``ADAPTER`` instance.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from otel_ctx.engine.errors import InvalidRequestError
from otel_ctx.engine.model import Block, RequestModel, Turn
from otel_ctx.engine.tokens import TokenCounter
from otel_ctx.engine.tokens import to_json as _engine_json

#: Cuts a tool result's text to the policy's cap (the identity when nothing is capped).
CapText = Callable[[str], str]


@dataclass(slots=True)
class ReadContext:
    """What the engine lends an adapter while it reads one request.

    ``strict`` is True for ``fit``: a transcript the provider would reject raises
    :class:`~otel_ctx.engine.errors.TranscriptRuleError`. Observe-only paths pass
    False: the adapter appends the problem to ``problems`` and reads on.
    """

    counter: TokenCounter
    cap: CapText | None = None
    strict: bool = True
    problems: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # One request read: the fitter's caches are the most recently used in the process budget.
        self.counter.cache.touch()

    def problem(self, error: Exception) -> None:
        """Raise ``error`` when strict, else record it and carry on."""
        if self.strict:
            raise error
        self.problems.append(str(error))


@dataclass(slots=True)
class Reading:
    """A request read into the model, with what the adapter needs to write it back.

    ``items`` are the caller's transcript items (messages, input items) in order;
    each turn of ``model`` covers ``items[turn.start:turn.end]``.
    """

    model: RequestModel
    body: Any
    items: Sequence[Any]
    #: Adapter-private state (for example where the transcript sits in the body).
    state: Any = None


@dataclass(slots=True)
class Fitted:
    """What the fit decided, for the adapter to write back in its dialect."""

    turns: list[int]
    #: A summary of the dropped turns, already in the dialect, and the kept-turn position it goes at.
    summary: Any = None
    summary_at: int = 0
    #: The system prompt, snippets and skills to add in front of the transcript.
    blocks: tuple[Block, ...] = ()


class Adapter(ABC):
    """One provider dialect, both ways."""

    #: The provider name callers pass (``"openai"``, ``"openai-responses"``, ``"anthropic"``).
    provider: ClassVar[str]
    #: True when the counts are the provider's own (its tokenizer is available offline).
    exact: ClassVar[bool] = True

    @abstractmethod
    def claims(self, body: Mapping[str, Any]) -> bool | None:
        """True when ``body`` can only be this dialect, None when it may be, False when not."""

    @abstractmethod
    def to_model(self, body: Any, ctx: ReadContext) -> Reading:
        """Read a whole request body; raises a typed error naming the bad field."""

    @abstractmethod
    def from_model(self, reading: Reading, fitted: Fitted) -> tuple[Any, list[Any]]:
        """The fitted body in the caller's dialect, and its transcript items."""

    @abstractmethod
    def block(self, kind: str, text: str, counter: TokenCounter) -> Block:
        """A system-prompt or skills block as this dialect sends (and bills) it."""

    @abstractmethod
    def summary(self, produced: Any, counter: TokenCounter) -> tuple[Any, Turn]:
        """A summarizer's output as an item of this dialect, and the turn it costs."""

    def claims_items(self, items: Sequence[Any]) -> bool:
        """True when a bare transcript (``fit(messages)``) is in this dialect."""
        return False

    def read_items(self, items: Sequence[Any], tools: Any, ctx: ReadContext) -> Reading:
        """Read a bare transcript and its tools (dialects that ``fit(messages)`` takes)."""
        raise InvalidRequestError("messages", f"the {self.provider} dialect takes whole requests only")


def as_mapping(raw: Any) -> Mapping[str, Any] | None:
    """A message or block as a mapping: dicts and TypedDicts as they are, SDK pydantic objects dumped."""
    if raw.__class__ is dict or isinstance(raw, Mapping):
        return raw
    dump = getattr(raw, "model_dump", None)
    if callable(dump):
        try:
            out = dump(exclude_none=True)
        except Exception:  # a foreign object with a model_dump of its own shape
            return None
        return out if isinstance(out, Mapping) else None
    return None


def _plain(value: Any) -> Any:
    block = as_mapping(value)
    if block is None:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
    return dict(block)


def to_json(value: Any, where: str, index: int | None, error: type[InvalidRequestError]) -> str:
    """``value`` as the compact JSON that is counted, SDK objects inside it dumped; typed errors."""
    return _engine_json(value, where, index, error, default=_plain)


def kept_items(reading: Reading, fitted: Fitted, replaced: Mapping[int, Any]) -> list[Any]:
    """The caller's own items of the kept turns, in order; an item the fit rewrote (a capped tool
    result) in its new form. Every other object goes back as it came, untouched."""
    items = reading.items
    kept = reading.model.item_indexes(fitted.turns)
    return [replaced.get(i, items[i]) for i in kept] if replaced else [items[i] for i in kept]
