"""The dialect contract: what the engine needs from an adapter, and lends it.

An adapter reads a provider's request into the request model and writes the fitted request
back; this is the engine's side of that contract, so the engine depends on no adapter.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from otel_ctx.engine._errors import InvalidRequestError
from otel_ctx.engine._model import Block, RequestModel, Turn
from otel_ctx.engine._tokens import TokenCounter

#: Cuts a tool result's text to the policy's cap (the identity when nothing is capped).
CapText = Callable[[str], str]


@dataclass(slots=True)
class ReadContext:
    """What the engine lends an adapter while it reads one request.

    ``strict`` is True for ``fit``: a transcript the provider would reject raises
    :class:`~otel_ctx.engine._errors.TranscriptRuleError`. Observe-only paths pass
    False: the adapter appends the problem to ``problems`` and reads on.
    """

    counter: TokenCounter
    cap: CapText | None = None
    strict: bool = True
    #: What ``cap`` cuts at (the policy's ``tool_result_cap``): a read served from a memo of an
    #: earlier round's read must have been cut the same way.
    cap_key: int | None = None
    problems: list[str] = field(default_factory=list)
    #: What the provider bills that the body does not show (see ``RequestModel.unknowns``).
    unknowns: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # One request read: the fitter's caches are the most recently used in the process budget.
        self.counter.cache.touch()

    def problem(self, error: Exception) -> None:
        """Raise ``error`` when strict, else record it and carry on."""
        if self.strict:
            raise error
        self.problems.append(str(error))

    def unknown(self, reason: str) -> None:
        """Record that part of the bill cannot be known from the body (once per reason)."""
        if reason not in self.unknowns:
            self.unknowns.append(reason)


@dataclass(slots=True)
class Reading:
    """A request read into the model, with what the adapter needs to write it back.

    ``items`` are the caller's transcript items in order; turn ``k`` covers ``model.span(k)``.
    """

    model: RequestModel
    body: Any
    items: Sequence[Any]
    #: Adapter-private state (for example where the transcript sits in the body).
    state: Any = None


@dataclass(slots=True)
class Fitted:
    """What the fit decided, for the adapter to write back in its dialect."""

    turns: Sequence[int]
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
