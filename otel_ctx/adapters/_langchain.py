"""LangChain: ``BaseMessage`` lists in and out, tools as LangChain tools.

Counting follows the Chat Completions accounting, so a conversation costs the same as OpenAI
dicts or as LangChain messages: each message is read as the dict LangChain's own
``convert_to_openai_messages`` makes of it (mapped directly for plain messages, through that
helper for anything richer). The fit comes back as the caller's message objects; a capped tool
result is a copy of its ``ToolMessage``. Tools (dicts, ``@tool`` functions, pydantic models,
plain functions) go through LangChain's ``convert_to_openai_tool``.

``langchain-core`` stays optional: this module imports it only when LangChain objects
arrive, and a plain dict fit never loads it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from otel_ctx.adapters._base import Adapter, Fitted, ReadContext, Reading, State, kept_items
from otel_ctx.adapters._langchain_tools import tool_dicts
from otel_ctx.engine._errors import InvalidMessageError, InvalidRequestError, TooDeeplyNestedError
from otel_ctx.engine._model import Block, Turn
from otel_ctx.engine._tokens import TokenCounter

#: LangChain message type -> Chat Completions role.
_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def _base_message() -> type | None:
    """``BaseMessage`` when LangChain is already loaded; no LangChain object exists otherwise."""
    module = sys.modules.get("langchain_core.messages")
    return getattr(module, "BaseMessage", None) if module is not None else None


def is_langchain_message(item: Any) -> bool:
    base = _base_message()
    return base is not None and isinstance(item, base)


def as_chat_dicts(messages: Sequence[Any]) -> list[list[dict[str, Any]]]:
    """Each message as the Chat Completions dicts LangChain sends for it (usually one)."""
    out: list[list[dict[str, Any]]] = []
    for i, m in enumerate(messages):
        if m.__class__ is dict:
            out.append([m])
            continue
        if not is_langchain_message(m):
            if isinstance(m, Mapping):
                out.append([dict(m)])
                continue
            raise InvalidMessageError(
                f"messages[{i}]", f"must be a message object or dict, got {type(m).__name__}", index=i
            )
        try:
            fast = _plain(m)
        except RecursionError:
            raise TooDeeplyNestedError(
                f"messages[{i}]", "is nested too deeply to be a message", index=i
            ) from None
        except (KeyError, TypeError, AttributeError, ValueError):  # malformed: LangChain's helper says why
            fast = None
        out.append([fast] if fast is not None else _converted(m, i))
    return out


def _plain(m: Any) -> dict[str, Any] | None:
    """The dict of a plain message (string content), as LangChain's converter makes it."""
    content = m.content
    role = _ROLES.get(m.type)
    if role is None or content.__class__ is not str:
        return None
    d: dict[str, Any] = {"role": role, "content": content}
    if m.name:
        d["name"] = m.name
    if role == "tool":
        d["tool_call_id"] = m.tool_call_id
    elif role == "assistant":
        calls = m.tool_calls
        if calls:
            d["tool_calls"] = [
                {
                    "type": "function",
                    "id": c["id"],
                    "function": {"name": c["name"], "arguments": json.dumps(c["args"], ensure_ascii=False)},
                }
                for c in calls
            ]
        if m.invalid_tool_calls:
            return None  # the converter's own handling
    return d


def _converted(m: Any, index: int) -> list[dict[str, Any]]:
    from langchain_core.messages import convert_to_openai_messages

    try:
        out = convert_to_openai_messages([m])
    except RecursionError:
        raise TooDeeplyNestedError(
            f"messages[{index}]", "is nested too deeply to be a message", index=index
        ) from None
    except Exception as exc:  # whatever the helper trips on, the caller gets the place and the reason
        raise InvalidMessageError(
            f"messages[{index}]", f"LangChain cannot convert this {type(m).__name__}: {exc}", index=index
        ) from exc
    return [dict(d) if isinstance(d, Mapping) else d for d in out]


class LangChainAdapter(Adapter):
    """LangChain message lists (``fit(messages)``, ``run.fit``).

    Read through ``chat``, the Chat Completions adapter, whose accounting LangChain's
    messages are billed by; it is passed in (see :func:`build`) so that neither dialect
    module imports the other.
    """

    provider = "langchain"
    exact = True

    def __init__(self, chat: Adapter) -> None:
        self._chat = chat

    def claims(self, body: Mapping[str, Any]) -> bool | None:
        return False  # a transcript dialect, not a request body

    def claims_items(self, items: Sequence[Any]) -> bool:
        base = _base_message()
        if base is None:
            return False
        for m in items:
            if m.__class__ is not dict:
                return isinstance(m, base)
        return False

    def to_model(self, body: Any, ctx: ReadContext) -> Reading:
        raise InvalidRequestError(
            "request", "LangChain messages are fitted with fit(messages), not as a body"
        )

    def read_items(self, messages: Sequence[Any], tools: Any, ctx: ReadContext) -> Reading:
        groups = as_chat_dicts(messages)
        flat = [d for g in groups for d in g]
        reading = self._chat.read_items(flat, tool_dicts(tools), ctx)
        model = reading.model
        state = State()
        owner: list[int] = []
        if len(flat) != len(messages):
            # A message LangChain sends as several: its dicts are one turn's worth of items.
            owner = [i for i, g in enumerate(groups) for _ in g]
            model.starts = _regroup(model.starts, owner)
            model.turns = _merge_turns(model.turns, owner)
        model.items = len(messages)
        chat_state = reading.state
        for k, new in chat_state.replaced.items():  # capped tool results: copies of the ToolMessage
            i = owner[k] if owner else k
            original = messages[i]
            if is_langchain_message(original):
                state.replaced[i] = original.model_copy(update={"content": new["content"]})
            else:
                state.replaced[i] = new
        return Reading(model=model, body=None, items=messages, state=state)

    def from_model(self, reading: Reading, fitted: Fitted) -> tuple[Any, list[Any]]:
        state: State = reading.state
        out = kept_items(reading, fitted, state.replaced)
        if fitted.summary is not None:
            out.insert(fitted.summary_at, fitted.summary)
        return None, out

    @staticmethod
    def block_message(block: Block) -> Any:
        from langchain_core.messages import SystemMessage

        return SystemMessage(block.text)

    def block(self, kind: str, text: str, counter: TokenCounter) -> Block:
        return self._chat.block(kind, text, counter)

    def summary(self, produced: Any, counter: TokenCounter) -> tuple[Any, Turn]:
        from langchain_core.messages import convert_to_messages

        if is_langchain_message(produced):
            (as_dict,) = as_chat_dicts([produced])
            return produced, self._chat.summary(as_dict[0], counter)[1]
        item, turn = self._chat.summary(produced, counter)
        try:
            return convert_to_messages([item])[0], turn
        except Exception as exc:  # LangChain's ValueError for a dict it cannot make a message of
            raise InvalidMessageError(
                "summarizer", f"returned a dict LangChain cannot make a message of ({type(exc).__name__})"
            ) from None


def _regroup(starts: Sequence[int], owner: list[int]) -> list[int]:
    out: list[int] = []
    for s in starts:
        i = owner[s]
        if not out or out[-1] != i:
            out.append(i)
    return out


def _merge_turns(turns: list[Turn], owner: list[int]) -> list[Turn]:
    """Turns of dicts that came from one LangChain message, merged into one turn."""
    out: list[Turn] = []
    last = -1
    for t, i in zip(turns, owner):
        if i == last:
            prev = out[-1]
            out[-1] = Turn(
                prev.role,
                [*prev.parts, *t.parts],
                prev.overhead + t.overhead,
                calls=(*prev.calls, *t.calls),
                answers=(*prev.answers, *t.answers),
                has_user_text=prev.has_user_text or t.has_user_text,
            )
        else:
            out.append(t)
        last = i
    return out


#: This dialect reads through another: the registry builds it on that provider's adapter.
BUILT_ON = "openai"


def build(chat: Adapter) -> LangChainAdapter:
    """The LangChain dialect, reading through ``chat`` (the Chat Completions adapter)."""
    return LangChainAdapter(chat)
