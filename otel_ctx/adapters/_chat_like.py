"""Dialects that are Chat Completions in another shape (Ollama, Cohere): the body is turned into
Chat Completions messages one for one, read by that adapter (with the model family's template),
and the fitted transcript written back as the caller's own items.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from otel_ctx.adapters._base import Adapter, Fitted, ReadContext, Reading, json_object
from otel_ctx.engine._model import Block, Turn
from otel_ctx.engine._tokens import TokenCounter

#: Turns a body into (a Chat Completions body, the caller's items its messages stand for).
Convert = Callable[[Mapping[str, Any], ReadContext], tuple[dict[str, Any], Sequence[Any]]]
#: Writes the kept items (and the fit's added system blocks) back into the caller's body.
WriteBack = Callable[[Mapping[str, Any], list[Any], list[str]], Any]


class ChatLikeAdapter(Adapter):
    """A dialect read through the Chat Completions adapter after a one-for-one conversion."""

    exact = True

    def __init__(
        self,
        chat: Adapter,
        convert: Convert,
        write_back: WriteBack,
        claims: Callable[[Mapping[str, Any]], bool | None],
    ) -> None:
        self._chat = chat
        self._convert = convert
        self._write_back = write_back
        self._claims = claims

    def claims(self, body: Mapping[str, Any]) -> bool | None:
        return self._claims(body)

    def claims_items(self, items: Sequence[Any]) -> bool:
        return False

    def to_model(self, body: Any, ctx: ReadContext) -> Reading:
        body = json_object(body)
        converted, items = self._convert(body, ctx)
        reading = self._chat.to_model(converted, ctx)
        reading.body = body
        reading.items = items
        return reading

    def from_model(self, reading: Reading, fitted: Fitted) -> tuple[Any, list[Any]]:
        _, kept = self._chat.from_model(Reading(reading.model, None, reading.items, reading.state), fitted)
        if fitted.summary is not None and kept and kept[fitted.summary_at] is fitted.summary:
            kept.pop(fitted.summary_at)  # a Chat Completions message: not this dialect's
        blocks = [b.text for b in fitted.blocks]
        return self._write_back(reading.body, kept, blocks), kept

    def block(self, kind: str, text: str, counter: TokenCounter) -> Block:
        return self._chat.block(kind, text, counter)

    def summary(self, produced: Any, counter: TokenCounter) -> tuple[Any, Turn]:
        return self._chat.summary(produced, counter)
