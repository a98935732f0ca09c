"""Anthropic Messages: a request body read into the engine's model, and the fitted body back.

What the Messages API takes: a top-level ``system`` (a string or text blocks), and
``messages`` of ``user`` and ``assistant`` turns whose content is a string or blocks
(``text``, ``image``, ``document``, ``tool_use``, ``tool_result`` with a string or
nested blocks, ``thinking``, ``redacted_thinking``, server tool blocks such as
``server_tool_use`` and ``web_search_tool_result``), and ``tools`` with an
``input_schema``. ``cache_control`` is metadata: never counted, never changed.
Blocks may be the SDK's own response objects (``resp.content`` appended as is).

Its rules shape how the transcript is cut into turns. Consecutive messages of one role
combine into a single turn, a ``tool_use`` must be answered by a ``tool_result`` in the
very next (user) turn, and a request starts with the user's message. So a turn here
is an *exchange*: the assistant's messages together with the user's messages that
follow them (the tool results answering its calls, then anything the user added).
Dropping whole exchanges keeps the roles alternating and never separates a call from
its result; the first user messages (the ticket) are a turn of their own.

Counting is an estimate: Anthropic publishes no offline tokenizer, so text is counted
with the fitter's encoding, images and PDF pages at the documented upper bounds, and
the result says ``exact=False``. Calibration from the reported usage
(``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``) corrects
the estimate as the conversation goes; an exact counter (the token-counting endpoint)
can be given to the fitter instead.
"""

from __future__ import annotations

import itertools
import sys
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import Any

from otel_ctx.adapters.base import (
    ARRAY,
    Adapter,
    Fitted,
    ReadContext,
    Reading,
    as_mapping,
    kept_items,
    pdf_pages,
    sized_private_copy,
    to_json,
)
from otel_ctx.engine.cache import BoundedCache, Held
from otel_ctx.engine.errors import (
    InvalidMessageError,
    InvalidRequestError,
    InvalidToolSchemaError,
    TooDeeplyNestedError,
    TranscriptRuleError,
    shown,
)
from otel_ctx.engine.model import Block, Component, Part, RequestModel, Turn
from otel_ctx.engine.tokens import REPLY_PRIMING, TOKENS_PER_MESSAGE, TOKENS_PER_TOOL_CALL, TokenCounter

Message = dict[str, Any]

#: An image costs about width × height / 750 tokens after the API scales it to at most
#: ~1.15 megapixels: 1,600 is the ceiling, used because the size is not read offline.
IMAGE_TOKENS = 1_600
#: A PDF page is sent as its text and an image of the page: up to ~3,000 text tokens
#: plus the page image (documented ranges); the upper ends keep the estimate high.
PDF_PAGE_TOKENS = 3_000 + IMAGE_TOKENS
#: A document whose pages cannot be counted offline (a URL, a file id).
UNKNOWN_DOCUMENT_TOKENS = PDF_PAGE_TOKENS
#: The wrapper of a tool result (its id and markers), like a tool call's.
TOKENS_PER_TOOL_RESULT = TOKENS_PER_TOOL_CALL
#: Documents inside documents (``source: {"type": "content"}``) deeper than this are refused.
_MAX_DOCUMENT_NESTING = 16
#: The system prompt the API adds when tools are given (documented per model; the
#: current models' figures: ``auto``/``none`` tool choice, and ``any``/``tool``).
TOOL_USE_SYSTEM_PROMPT = 346
TOOL_USE_SYSTEM_PROMPT_FORCED = 313
TOKENS_PER_TOOL = 8
SUMMARY_PREFIX = "Summary of earlier conversation (compacted by otel-ctx):\n"
#: Block types that carry a server tool's result inside the assistant's own message.
_ROLES = ("user", "assistant")


def _without_cache_control(block: Mapping[str, Any]) -> Mapping[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"} if "cache_control" in block else block


class _State:
    """The caller's messages the fit rewrote (capped tool results), by index."""

    __slots__ = ("replaced",)

    def __init__(self) -> None:
        self.replaced: dict[int, Any] = {}


class _Reader:
    """Reads one request's messages: blocks counted, rules checked, results capped."""

    def __init__(self, counter: TokenCounter, ctx: ReadContext, state: _State) -> None:
        self.counter = counter
        self.text = counter.text
        self.ctx = ctx
        self.state = state
        self.framing = {r: TOKENS_PER_MESSAGE + counter.text(r) for r in _ROLES}
        self.seen_ids: dict[str, int] = {}

    # -- blocks --------------------------------------------------------------------------

    def source_tokens(self, block: Mapping[str, Any], where: str, index: int) -> int:
        """An image or a document: the text it holds, or the documented upper bound."""
        kind = block.get("type")
        source = as_mapping(block.get("source"))
        if kind == "image":
            return IMAGE_TOKENS
        extra = 0
        for key in ("title", "context"):
            value = block.get(key)
            if isinstance(value, str):
                extra += self.text(value)
        if source is None:
            raise InvalidMessageError(f"{where}.source", "a document needs a 'source' object", index=index)
        stype = source.get("type")
        if stype == "text":
            data = source.get("data")
            if not isinstance(data, str):
                raise InvalidMessageError(f"{where}.source.data", "must be a string", index=index)
            return extra + self.text(data)
        if stype == "content":
            # A document's content may hold documents; no real request nests them deeply,
            # and an unbounded chain would end in a RecursionError instead of a typed error.
            if where.count(".source.content") >= _MAX_DOCUMENT_NESTING:
                raise TooDeeplyNestedError(
                    f"{where}.source.content", "documents are nested too deeply to be a request", index=index
                )
            content = source.get("content")
            if isinstance(content, str):
                return extra + self.text(content)
            return extra + sum(
                p.tokens for p in self.blocks(content, "user", f"{where}.source.content", index)
            )
        if stype == "base64":
            data = source.get("data")
            if not isinstance(data, str):
                raise InvalidMessageError(f"{where}.source.data", "must be a base64 string", index=index)
            return extra + PDF_PAGE_TOKENS * pdf_pages(data)
        return extra + UNKNOWN_DOCUMENT_TOKENS

    def blocks(self, content: Any, role: str, where: str, index: int) -> list[Part]:
        """Parts of nested content (a tool result's or a document's): text, images, documents."""
        if isinstance(content, str):
            return [Part("tool_result", self.text(content))]
        if content is None:
            return []
        if not isinstance(content, ARRAY):
            raise InvalidMessageError(
                where, f"must be a string or a list of blocks, got {type(content).__name__}", index=index
            )
        out = []
        for k, raw in enumerate(content):
            out.append(self.block(raw, role, f"{where}[{k}]", index, nested=True))
        return out

    def block(self, raw: Any, role: str, where: str, index: int, *, nested: bool = False) -> Part:
        block = as_mapping(raw)
        if block is None:
            raise InvalidMessageError(where, f"must be an object, got {type(raw).__name__}", index=index)
        kind = block.get("type")
        text = self.text
        if kind == "text":
            value = block.get("text")
            if not isinstance(value, str):
                raise InvalidMessageError(f"{where}.text", "must be a string", index=index)
            component: Component = "tool_result" if nested else ("user" if role == "user" else "assistant")
            return Part(component, text(value))
        if kind in ("image", "document"):
            return Part("image" if kind == "image" else "document", self.source_tokens(block, where, index))
        if kind in ("tool_use", "server_tool_use"):
            name, call_id = block.get("name"), block.get("id")
            if not isinstance(name, str) or not isinstance(call_id, str):
                raise InvalidMessageError(where, f"a {kind} block needs 'id' and 'name' strings", index=index)
            args = to_json(block.get("input", {}), f"{where}.input", index, InvalidMessageError)
            return Part("tool_call", TOKENS_PER_TOOL_CALL + text(name) + text(args), call_id)
        if kind == "thinking":
            value = block.get("thinking")
            if not isinstance(value, str):
                raise InvalidMessageError(f"{where}.thinking", "must be a string", index=index)
            return Part("reasoning", text(value))
        if kind == "redacted_thinking":
            value = block.get("data")
            if not isinstance(value, str):
                raise InvalidMessageError(f"{where}.data", "must be a string", index=index)
            return Part("reasoning", text(value))
        if not isinstance(kind, str):
            raise InvalidMessageError(f"{where}.type", "is missing or not a string", index=index)
        # A server tool's result, a search result, or a block type this version does not
        # know: charge its JSON text (errs high), never its cache_control.
        component = "tool_result" if kind.endswith("_tool_result") or nested else "other"
        body = to_json(_without_cache_control(block), where, index, InvalidMessageError)
        return Part(component, text(body))

    def tool_result(self, block: Mapping[str, Any], raw: Any, where: str, index: int) -> tuple[Part, Any]:
        """A tool result's part, and the capped block when the cap cut it (else ``None``)."""
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str):
            raise InvalidMessageError(
                f"{where}.tool_use_id", "a tool_result needs a 'tool_use_id' string", index=index
            )
        content = block.get("content")
        new_block: Any = None
        cap = self.ctx.cap
        if cap is not None:
            new_content = _cap_content(content, cap)
            if new_content is not None:
                new_block = {**block, "content": new_content}
                content = new_content
        tokens = TOKENS_PER_TOOL_RESULT
        if isinstance(content, str):
            tokens += self.text(content)
        else:
            tokens += sum(p.tokens for p in self.blocks(content, "user", f"{where}.content", index))
        return Part("tool_result", tokens, call_id, capped=new_block is not None), new_block

    # -- messages ------------------------------------------------------------------------

    def message(self, raw: Any, i: int) -> tuple[str, list[Part], list[str], list[str], list[str]]:
        """``(role, parts, tool_use ids, tool_result ids, kinds in order)`` of one message."""
        where = f"messages[{i}]"
        m = as_mapping(raw)
        if m is None:
            raise InvalidMessageError(where, f"must be an object, got {type(raw).__name__}", index=i)
        role = m.get("role")
        if role == "system":
            self.ctx.problem(
                TranscriptRuleError(
                    f"{where}.role",
                    "the Messages API has no system role in messages; put the system prompt in the "
                    "top-level 'system'",
                    index=i,
                )
            )
        elif role not in _ROLES:
            raise InvalidMessageError(
                f"{where}.role", f"unknown role {shown(role)}; expected user or assistant", index=i
            )
        line_role = "assistant" if role == "assistant" else "user"
        parts = [Part("user" if line_role == "user" else "assistant", self.framing[line_role])]
        content = m.get("content")
        uses: list[str] = []
        results: list[str] = []
        kinds: list[str] = []
        if content.__class__ is str or isinstance(content, str):
            parts.append(Part("user" if line_role == "user" else "assistant", self.text(str(content))))
            return line_role, parts, uses, results, ["text"]
        if not isinstance(content, ARRAY):
            raise InvalidMessageError(
                f"{where}.content",
                f"must be a string or a list of blocks, got {type(content).__name__}",
                index=i,
            )
        if not content:
            self.ctx.problem(TranscriptRuleError(f"{where}.content", "is an empty list", index=i))
        new_content: list[Any] | None = None
        for k, raw_block in enumerate(content):
            here = f"{where}.content[{k}]"
            block = as_mapping(raw_block)
            kind = block.get("type") if block is not None else None
            if block is not None and kind == "tool_result":
                part, capped = self.tool_result(block, raw_block, here, i)
                results.append(str(part.call_id))
                if line_role != "user":
                    self.ctx.problem(
                        TranscriptRuleError(here, "a tool_result belongs in a user message", index=i)
                    )
                if capped is not None:
                    if new_content is None:
                        new_content = list(content)
                    new_content[k] = capped
            else:
                part = self.block(raw_block, line_role, here, i)
                if kind == "tool_use":
                    assert part.call_id is not None
                    uses.append(part.call_id)
                    if line_role != "assistant":
                        self.ctx.problem(
                            TranscriptRuleError(here, "only assistant messages make tool_use", index=i)
                        )
                    first = self.seen_ids.setdefault(part.call_id, i)
                    if first != i or uses.count(part.call_id) > 1:
                        self.ctx.problem(
                            TranscriptRuleError(
                                f"{here}.id",
                                f"tool_use id {shown(part.call_id)} is already used by messages[{first}]",
                                index=i,
                            )
                        )
                elif kind == "server_tool_use":
                    part = Part(part.component, part.tokens)  # answered inside this message
            kinds.append(str(kind))
            parts.append(part)
        if new_content is not None:
            self.state.replaced[i] = {**m, "content": new_content}
        return line_role, parts, uses, results, kinds


def _cap_content(content: Any, cap: Any) -> Any:
    """A tool result's content with its text cut to the cap, or ``None`` when within it."""
    if isinstance(content, str):
        new = cap(content)
        return None if new is content else new
    if not isinstance(content, ARRAY) or not content:
        return None
    blocks = [as_mapping(b) for b in content]
    texts = [b.get("text") for b in blocks if b is not None and b.get("type") == "text"]
    if not texts or not all(isinstance(t, str) for t in texts):
        return None
    joined = "".join(texts)  # type: ignore[arg-type]
    new = cap(joined)
    if new is joined:
        return None
    # The text is one block now; images and documents of the result stay as they were.
    others = [raw for raw, b in zip(content, blocks) if b is None or b.get("type") != "text"]
    return [{"type": "text", "text": new}, *others]


class AnthropicAdapter(Adapter):
    """Anthropic Messages request bodies (``client.messages.create(**body)``)."""

    provider = "anthropic"
    exact = False

    def claims(self, body: Mapping[str, Any]) -> bool | None:
        messages = body.get("messages")
        if not isinstance(messages, ARRAY) or "input" in body:
            return False
        if "system" in body:
            return True
        tools = body.get("tools")
        # Detection only looks: a ``tools`` that is not a list is reported by the reader.
        for tool in tools if isinstance(tools, list) else ():
            tool = as_mapping(tool)
            if tool is not None:
                if "input_schema" in tool:
                    return True
                if "function" in tool:
                    return False
        for raw in messages:
            m = as_mapping(raw)
            if m is None:
                continue
            if m.get("role") in ("system", "developer", "tool", "function") or m.get("tool_calls"):
                return False
            content = m.get("content")
            if isinstance(content, ARRAY):
                for raw_block in content:
                    b = as_mapping(raw_block)
                    kind = b.get("type") if b is not None else None
                    if kind in (
                        "tool_use",
                        "tool_result",
                        "thinking",
                        "redacted_thinking",
                        "image",
                        "document",
                    ):
                        return True
                    if kind in ("image_url", "input_audio", "file", "refusal"):
                        return False
        model = body.get("model")
        if isinstance(model, str) and model.startswith("claude"):
            return True
        return None

    def to_model(self, body: Any, ctx: ReadContext) -> Reading:
        if not isinstance(body, Mapping):
            raise InvalidRequestError("request", f"must be a JSON object, got {type(body).__name__}")
        messages = body.get("messages")
        if not isinstance(messages, ARRAY):
            raise InvalidRequestError("messages", "a Messages API request needs a 'messages' list")
        counter = ctx.counter
        state = _State()
        reader = _Reader(counter, ctx, state)
        if not messages:
            ctx.problem(TranscriptRuleError("messages", "needs at least one message"))
        # Read every message, then group runs into exchanges and check the pairing rules
        # on the combined turns (consecutive same-role messages are one turn to the API).
        read = _read_messages(reader, messages, ctx)
        turns: list[Turn] = []
        starts: list[int] = []
        if read and read[0][0] != "user":
            ctx.problem(
                TranscriptRuleError("messages[0].role", "the first message must be the user's", index=0)
            )
        i = 0
        n = len(read)
        while i < n:
            start = i
            parts: list[Part] = []
            uses: list[str] = []
            answers: list[str] = []
            has_user_text = False
            while i < n and read[i][0] == "assistant":
                parts.extend(read[i][1])
                uses.extend(read[i][2])
                i += 1
            first_user = i
            while i < n and read[i][0] == "user":
                _, uparts, _, results, kinds = read[i]
                parts.extend(uparts)
                for r in results:
                    if r not in uses:
                        ctx.problem(_orphan(i, r, reader.seen_ids))
                    elif r in answers:
                        ctx.problem(
                            TranscriptRuleError(
                                f"messages[{i}].content", f"tool_use {shown(r)} is answered twice", index=i
                            )
                        )
                    else:
                        answers.append(r)
                if results and i == first_user:
                    if kinds[: len(results)] != ["tool_result"] * len(results):
                        ctx.problem(
                            TranscriptRuleError(
                                f"messages[{i}].content",
                                "tool_result blocks must come first in the message, before any text",
                                index=i,
                            )
                        )
                elif results:
                    ctx.problem(
                        TranscriptRuleError(
                            f"messages[{i}].content",
                            "tool results must be in the first user message after the tool_use",
                            index=i,
                        )
                    )
                if any(k != "tool_result" for k in kinds):
                    has_user_text = True
                i += 1
            missing = [u for u in uses if u not in answers]
            if missing:
                ids = ", ".join(repr(u) for u in missing)
                ctx.problem(
                    TranscriptRuleError(
                        f"messages[{start}].content",
                        f"tool_use {ids} never answered: every tool_use needs a tool_result in the "
                        "next (user) message",
                        index=start,
                    )
                )
            role = "user" if read[start][0] == "user" else "assistant"
            turns.append(
                Turn(
                    role,  # type: ignore[arg-type]
                    parts,
                    0,
                    calls=tuple(uses),
                    answers=tuple(answers),
                    has_user_text=has_user_text,
                )
            )
            starts.append(start)
        system = body.get("system")
        blocks: tuple[Block, ...] = ()
        if system is not None:
            text = _system_text(system)
            blocks = (Block("system_prompt", text, counter.text(text)),)
        model = RequestModel(
            turns=turns,
            starts=starts,
            items=len(messages),
            tool_schema=self.tools_tokens(body.get("tools"), body.get("tool_choice"), counter),
            priming=REPLY_PRIMING,
            blocks=blocks,
            system_in_turns=False,
            capped=len(state.replaced),
        )
        return Reading(model=model, body=body, items=messages, state=state)

    @staticmethod
    def tools_tokens(tools: Any, tool_choice: Any, counter: TokenCounter) -> int:
        """The tool definitions' text plus the tool-use system prompt the API adds with them."""
        if not tools:
            return 0
        if not isinstance(tools, ARRAY):
            raise InvalidToolSchemaError(
                "tools", f"must be a list of tool objects, got {type(tools).__name__}"
            )
        n = 0
        for k, raw in enumerate(tools):
            where = f"tools[{k}]"
            tool = as_mapping(raw)
            if tool is None or not isinstance(tool.get("name"), str):
                raise InvalidToolSchemaError(where, "must be an object with a 'name' string")
            kind = tool.get("type")
            if kind in (None, "custom"):
                schema = tool.get("input_schema")
                if not isinstance(schema, Mapping):
                    raise InvalidToolSchemaError(f"{where}.input_schema", "must be a JSON Schema object")
                desc = tool.get("description") or ""
                if not isinstance(desc, str):
                    raise InvalidToolSchemaError(f"{where}.description", "must be a string")
                n += TOKENS_PER_TOOL + counter.text(tool["name"]) + counter.text(desc)
                n += counter.text(to_json(schema, f"{where}.input_schema", None, InvalidToolSchemaError))
            else:  # a server tool (web search, code execution...): its definition's JSON
                n += TOKENS_PER_TOOL + counter.text(
                    to_json(_without_cache_control(tool), where, None, InvalidToolSchemaError)
                )
        choice = as_mapping(tool_choice) if tool_choice is not None else None
        forced = choice is not None and choice.get("type") in ("any", "tool")
        return n + (TOOL_USE_SYSTEM_PROMPT_FORCED if forced else TOOL_USE_SYSTEM_PROMPT)

    def from_model(self, reading: Reading, fitted: Fitted) -> tuple[Any, list[Any]]:
        state: _State = reading.state
        out = kept_items(reading, fitted, state.replaced)
        body = dict(reading.body)
        body["messages"] = out
        extra = [{"type": "text", "text": b.text} for b in fitted.blocks]
        if fitted.summary is not None:
            extra.append(fitted.summary)
        if extra:
            # Added after the caller's own system blocks, so a cached prefix stays a prefix.
            system = body.get("system")
            own: list[Any] = (
                []
                if system is None
                else [{"type": "text", "text": system}]
                if isinstance(system, str)
                else list(system)
            )
            body["system"] = [*own, *extra]
        return body, out

    def block(self, kind: str, text: str, counter: TokenCounter) -> Block:
        return Block(kind, text, counter.text(text))  # type: ignore[arg-type]

    def summary(self, produced: Any, counter: TokenCounter) -> tuple[Any, Turn]:
        """A summary goes to the top-level ``system`` as a text block: placed among the
        messages it would put two user (or assistant) messages in a row."""
        if isinstance(produced, str):
            item: Message = {"type": "text", "text": SUMMARY_PREFIX + produced}
        else:
            block = as_mapping(produced)
            if block is None or block.get("type") != "text" or not isinstance(block.get("text"), str):
                raise InvalidRequestError(
                    "summarizer", "must return a string or a text block for the Messages API's system"
                )
            item = dict(block)
        return item, Turn("system", [Part("system", counter.text(item["text"]))], 0)


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    if not isinstance(system, ARRAY):
        raise InvalidRequestError(
            "system", f"must be a string or a list of text blocks, got {type(system).__name__}"
        )
    texts = []
    for k, raw in enumerate(system):
        block = as_mapping(raw)
        if block is None or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise InvalidRequestError(f"system[{k}]", "must be a text block {'type': 'text', 'text': ...}")
        texts.append(block["text"])
    return "\n\n".join(texts)


def _orphan(index: int, call_id: str, seen: Mapping[str, int]) -> TranscriptRuleError:
    where = f"messages[{index}].content"
    if call_id in seen:
        problem = (
            f"tool_result answers tool_use {shown(call_id)} of messages[{seen[call_id]}], but a tool_result "
            "must answer a tool_use of the assistant turn right before it"
        )
    else:
        problem = f"tool_result answers {shown(call_id)}, which no assistant tool_use declared"
    return TranscriptRuleError(where, problem, index=index)


ADAPTER = AnthropicAdapter()


Read = tuple[str, list[Part], list[str], list[str], list[str]]


class _Prefix(Held):
    """Messages read last round with no problem and nothing cut: a private copy, what each read to."""

    __slots__ = ("cap_key", "read", "seen", "snapshot")

    def __init__(
        self, snapshot: list[Any], read: list[Read], seen: list[tuple[str, int]], cap_key: Any, held: int
    ) -> None:
        super().__init__(held)
        self.snapshot = snapshot
        self.read = read
        #: (tool_use id, the message that made it), in the order made.
        self.seen = seen
        self.cap_key = cap_key


_memo_keys = itertools.count()


def _at(pair: tuple[str, int]) -> int:
    return pair[1]


def _read_messages(reader: _Reader, messages: Sequence[Any], ctx: ReadContext) -> list[Read]:
    """Every message read; the leading run read last round (compared in one go) is not read again.

    A message is taken from the memo only when the whole run up to it equals the private copy
    kept of it, so a message changed in place, or anything before it, is read again.
    """
    cap = ctx.cap
    cap_key = ("none", None) if cap is None else ("cap", ctx.cap_key) if ctx.cap_key is not None else None
    if cap_key is None or messages.__class__ is not list:
        return [reader.message(raw, i) for i, raw in enumerate(messages)]
    counter = reader.counter
    slot = counter.dialect_state.get("anthropic-memo")
    if slot is None:
        cache: BoundedCache[_Prefix] = BoundedCache(
            max_entries=1, max_chars=1 << 62, group=counter.cache.group
        )
        slot = counter.dialect_state.setdefault("anthropic-memo", [cache, ""])
    cache, key = slot
    memo = cache.get(key)
    start = 0
    read: list[Read] = []
    if memo is not None and memo.cap_key == cap_key:
        snapshot = memo.snapshot
        n = min(len(snapshot), len(messages))
        k = n
        while k > 0 and n - k < 8 and snapshot[k - 1] != messages[k - 1]:
            k -= 1
        if k and n - k < 8 and (snapshot if k == len(snapshot) else snapshot[:k]) == messages[:k]:
            start = k
            read = memo.read[:k]
            seen = memo.seen
            reader.seen_ids = dict(seen if k == len(snapshot) else seen[: bisect_left(seen, k, key=_at)])
    copies: list[Any] = []
    held = 0
    boundary = -1
    problems = len(ctx.problems)
    replaced = reader.state.replaced
    for i in range(start, len(messages)):
        raw = messages[i]
        read.append(reader.message(raw, i))
        if boundary < 0:
            found = sized_private_copy(raw) if len(ctx.problems) == problems and i not in replaced else None
            if found is None:
                boundary = i
            else:
                copies.append(found[0])
                held += found[1]
    end = len(messages) if boundary < 0 else boundary
    if end > start and held <= counter.cache.max_chars:
        snapshot = (memo.snapshot[:start] if start and memo is not None else []) + copies
        # An id is kept where first made (never moved later), so those made before the end are exact.
        seen_items = [(c, at) for c, at in reader.seen_ids.items() if at < end]
        key = str(next(_memo_keys))
        slot[1] = key
        held += sys.getsizeof(snapshot) + 64 * len(snapshot)
        cache.put(key, _Prefix(snapshot, read[:end], seen_items, cap_key, held))
    return read
