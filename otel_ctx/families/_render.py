"""What every chat template is made of: special tokens (one token each) and text.

A template is written as calls on :class:`Rendering`: ``special()`` for a marker the tokenizer
holds as one token (``<|eot_id|>``), ``text()`` for everything else, counted with the family's
tokenizer through the fitter's cache (so a message seen last round costs one lookup).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from otel_ctx.engine._tokens import TokenCounter

#: A key a dialect that renders templates itself (Ollama) sets on the Chat Completions body it
#: builds, naming the host: its templates differ from the model's published one. Not a field
#: any API has (it starts with a NUL).
HOST = "\x00host"


@dataclass(slots=True)
class Rendering:
    """The running token count of a rendered request, by message.

    A template's tokens go to the message being rendered (``at``, its index in the request's
    ``messages``), so each message costs what its rendering costs (an earlier reply whose
    reasoning the template drops costs less than its text) and a fit that drops it drops
    exactly that; what belongs to no message (the opening marker, a default system block, the
    reply's header) is the request's own, and the tool section is booked apart.
    """

    counter: TokenCounter
    #: Tokens of the whole rendering.
    tokens: int = 0
    #: The tokens the tool definitions added (booked on the tool-schema line).
    tools: int = 0
    #: True only where bills confirmed the template to the token; otherwise the count is an
    #: estimate (its parts are flagged so).
    exact: bool = False
    #: The message being rendered (None: the request's own framing).
    at: int | None = None
    #: Tokens by message index.
    per: dict[int, int] = field(default_factory=dict)
    #: The family's price of each image of the request, in order (None: the adapter's stands).
    images: list[int | None] | None = None

    def _add(self, n: int) -> None:
        self.tokens += n
        if self.at is not None:
            self.per[self.at] = self.per.get(self.at, 0) + n

    def special(self, n: int = 1) -> None:
        self._add(n)

    def text(self, text: str) -> None:
        if text:
            self._add(self.counter.text(text))

    def tool_text(self, text: str) -> None:
        """Text of the tool section: counted, and booked on the tool schema."""
        if text:
            n = self.counter.text(text)
            self.tokens += n
            self.tools += n

    @property
    def rest(self) -> int:
        """The tokens that belong to no message and are no tool definition."""
        return self.tokens - self.tools - sum(self.per.values())


def content_text(content: Any) -> str:
    """A message's text: a string, or its text parts joined (media parts are priced apart)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, (str, bytes)):
        out = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                out.append(part["text"])
        return "".join(out)
    return ""


def functions(tools: Any) -> list[Mapping[str, Any]]:
    """The function definitions of a ``tools`` list (``{"type": "function", "function": {...}}``)."""
    out: list[Mapping[str, Any]] = []
    if not isinstance(tools, Sequence) or isinstance(tools, (str, bytes)):
        return out
    for tool in tools:
        if isinstance(tool, Mapping):
            fn = tool.get("function")
            out.append(fn if isinstance(fn, Mapping) else tool)
    return out


def calls(message: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """An assistant message's tool calls as (name, arguments), arguments parsed when they are JSON."""
    out: list[tuple[str, Any]] = []
    raw = message.get("tool_calls")
    if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)):
        return out
    for call in raw:
        fn = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping):
            continue
        args = fn.get("arguments")
        if isinstance(args, str):
            with contextlib.suppress(ValueError):  # arguments that are no JSON stay text
                args = json.loads(args)
        out.append((str(fn.get("name", "")), args))
    return out


def py_json(value: Any, indent: int | None = None) -> str:
    """``value`` as Python's ``json.dumps`` writes it by default (Jinja's ``tojson`` in the
    templates hosts run): ``", "`` and ``": "`` separators, keys in their order, non-ASCII kept."""
    try:
        return json.dumps(value, ensure_ascii=False, indent=indent)
    except (TypeError, ValueError):
        return str(value)
