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

Counting is an estimate (``exact=False``): Anthropic publishes no offline tokenizer, so text
is counted with the fitter's encoding and images and PDF pages by the documented rules; the
reported usage (``input_tokens`` plus both cache counts) calibrates it as the conversation goes.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from otel_ctx.adapters._base import (
    ANTHROPIC_BLOCKS,
    ARRAY,
    OPENAI_PARTS,
    SUMMARY_PREFIX,
    Adapter,
    Fitted,
    Prefix,
    PrefixRound,
    ReadContext,
    Reading,
    State,
    as_mapping,
    as_object,
    as_plain,
    cut_key,
    json_object,
    kept_items,
    rule,
    string_field,
    to_json,
)
from otel_ctx.adapters._claude_tokens import claude_text, tokenizer_name
from otel_ctx.adapters._media import (
    ANTHROPIC_DOCUMENT_FRAMING,
    anthropic_document_bound,
    anthropic_image_tokens,
    anthropic_pdf_tokens,
    image_size,
)
from otel_ctx.engine._errors import (
    InvalidMessageError,
    InvalidRequestError,
    InvalidToolSchemaError,
    TooDeeplyNestedError,
    TranscriptRuleError,
    shown,
)
from otel_ctx.engine._model import Block, Component, Line, Part, RequestModel, Turn
from otel_ctx.engine._tokens import REPLY_PRIMING, TOKENS_PER_MESSAGE, TOKENS_PER_TOOL_CALL, TokenCounter

Message = dict[str, Any]

#: The wrapper of a tool result (its id and markers), like a tool call's.
TOKENS_PER_TOOL_RESULT = TOKENS_PER_TOOL_CALL
#: Documents inside documents (``source: {"type": "content"}``) deeper than this are refused.
_MAX_DOCUMENT_NESTING = 16
#: The tool-use system prompt of the current models (Claude 4.5 and 4.6): ``auto``/``none``
#: tool choice, and ``any``/``tool`` (see :data:`FAMILIES` for the others).
TOOL_USE_SYSTEM_PROMPT = 501
TOOL_USE_SYSTEM_PROMPT_FORCED = 594
#: What a caller's system prompt costs beyond its text when tools are given: the API sets it
#: inside the tool-use system prompt, between separators.
SYSTEM_WITH_TOOLS = 7
#: The framing in the reconstructed Claude tokenizer's tokens, measured from the bills: a
#: message's role marker, the reply's opening (together the reconstruction's single-message
#: frame: 7 tokens; the later vocabulary's frame is 6, its reply opening 3), a message that
#: continues a turn of its role, a tool call's and a tool result's wrapper, and a system prompt
#: set into the tool-use prompt (see :class:`Framing`).
OWN_MESSAGE = 3
OWN_PRIMING = 4
OWN_TOOL_CALL = 7
OWN_TOOL_RESULT = 7
OWN_SYSTEM_WITH_TOOLS = 1
OWN_JOINED = 1
#: Structured outputs (``output_config.format`` / ``output_format`` of type ``json_schema``):
#: the schema is set, indented two spaces, into a fixed instruction of this many tokens.
OUTPUT_SCHEMA_PROMPT = 102
#: ``output_config.task_budget``: the API tells the model what is left of its budget in a short
#: fixed notice (an estimate: its figures change the count by a token or two).
TASK_BUDGET_TOKENS = 40
_ROLES = ("user", "assistant")
#: A thinking block's text field, and a redacted one's (its opaque data, billed as sent).
_THINKING = {"thinking": "thinking", "redacted_thinking": "data"}


@dataclass(frozen=True, slots=True)
class Family:
    """What a model family adds to the billed input beyond the body's own text.

    The tool-use prompt pairs are per ``tool_choice`` (``auto``/``none``, ``any``/``tool``), in
    the tokens this module counts with: Claude 3's are Anthropic's published figures, the
    others the hidden prompt that the recorded bills show on top of the definitions rendered
    as :func:`render_tools` does. ``thinking`` is what ``thinking: {"type": "enabled"}``
    adds, ``adaptive`` what ``{"type": "adaptive"}`` adds; ``keeps_thinking`` says the model
    keeps the thinking blocks of earlier assistant turns in context (later Opus and Sonnet
    models do; the others keep only the current turn's and the API strips the rest).
    """

    name: str
    tool_prompt: int
    tool_prompt_forced: int
    thinking: int = 30
    adaptive: int = 17
    keeps_thinking: bool = False
    #: Billed text tokens per token of this module's encoding: an estimate where the family's
    #: tokenizer is known to differ (1.0 where the bills match the encoding).
    text_ratio: float = 1.0
    #: The family's vocabulary in the reconstructed Claude tokenizer (``"3.0"``, ``"4.7"``,
    #: ``"4.8"``; see :mod:`otel_ctx.adapters._claude_tokens`), ``None`` for none.
    generation: str | None = "3.0"
    #: What the request adds around its text in that tokenizer's tokens (used when it is installed).
    own: Framing | None = None


@dataclass(frozen=True, slots=True)
class Framing:
    """What a request adds around its text, in the tokens of the tokenizer that counts it.

    ``message`` is a message's role marker, ``priming`` the opening of the reply; a tool call
    and a tool result are framed by ``tool_call``/``tool_result`` beside their ids and text;
    the tool-use prompt pair is per ``tool_choice`` (as :class:`Family`'s), and
    ``system_with_tools`` is what the caller's system prompt costs beyond its text when the
    tool-use prompt holds it.
    """

    message: int
    priming: int
    #: A message that continues a turn (the one before it has the same role): its separator.
    joined: int
    tool_call: int
    tool_result: int
    tool_prompt: int
    tool_prompt_forced: int
    #: ``tool_choice`` naming one tool (``{"type": "tool"}``): its own prompt where bills show it.
    tool_prompt_named: int
    system_with_tools: int
    #: The fixed instruction a ``json_schema`` output format is set into.
    output_schema: int


def _fallback_framing(fam: Family) -> Framing:
    """The figures measured with the fallback encoding (a role is one token in it)."""
    return Framing(
        TOKENS_PER_MESSAGE + 1,
        REPLY_PRIMING,
        TOKENS_PER_MESSAGE + 1,
        TOKENS_PER_TOOL_CALL,
        TOKENS_PER_TOOL_RESULT,
        fam.tool_prompt,
        fam.tool_prompt_forced,
        fam.tool_prompt_forced,
        SYSTEM_WITH_TOOLS,
        OUTPUT_SCHEMA_PROMPT,
    )


@dataclass(frozen=True, slots=True)
class Counting:
    """How one request's text is counted: the counter, the framing in its tokens, and a key
    that tells a memo of earlier counts made another way apart."""

    text: Callable[[str], int]
    framing: Framing
    key: Any
    #: The reconstructed tokenizer's name when it counts (``None``: the fitter's encoding).
    encoding: str | None


def counting(counter: TokenCounter, fam: Family) -> Counting:
    """The reconstructed Claude tokenizer of the family when it is installed and the family has
    measured framing for it; otherwise the fitter's encoding times the family's ratio."""
    if fam.generation is not None and fam.own is not None:
        own = claude_text(counter, fam.generation)
        if own is not None:
            return Counting(own, fam.own, ("claude", fam.generation), tokenizer_name(fam.generation))
    text = counter.text if fam.text_ratio == 1.0 else _scaled(counter.text, fam.text_ratio)
    return Counting(text, _fallback_framing(fam), fam.text_ratio, None)


def _fallback_counting(counter: TokenCounter, ratio: float) -> Counting:
    """The fallback encoding's count times ``ratio``, framed as every family frames it there
    (what a reader given only a text ratio counts with)."""
    text = counter.text if ratio == 1.0 else _scaled(counter.text, ratio)
    return Counting(text, _fallback_framing(CURRENT), ratio, None)


def _scaled(count: Callable[[str], int], ratio: float) -> Callable[[str], int]:
    def text(value: str) -> int:
        return int(count(value) * ratio + 0.5)

    return text


def _own(
    auto: int, forced: int, named: int | None = None, schema: int = 81, priming: int = OWN_PRIMING
) -> Framing:
    """A family's framing in the reconstructed tokenizer's tokens: its tool-use prompts
    (``auto``/``none``, ``any``, a named tool) and structured-output instruction as the bills
    show them over that tokenizer's count of the rendered definitions, and the framing of
    messages, calls and results every family shares."""
    return Framing(
        message=OWN_MESSAGE,
        priming=priming,
        joined=OWN_JOINED,
        tool_call=OWN_TOOL_CALL,
        tool_result=OWN_TOOL_RESULT,
        tool_prompt=auto,
        tool_prompt_forced=forced,
        tool_prompt_named=forced if named is None else named,
        system_with_tools=OWN_SYSTEM_WITH_TOOLS,
        output_schema=schema,
    )


#: Claude 4.5 and 4.6 (Sonnet 4.5's hidden tool prompt grew to these figures in November 2025;
#: requests of that model recorded before then were billed about 180 tokens less).
CURRENT = Family("claude-4.5", TOOL_USE_SYSTEM_PROMPT, TOOL_USE_SYSTEM_PROMPT_FORCED, own=_own(497, 589, 598))
#: The families. The first figures are the fallback encoding's, ``own`` the reconstructed
#: tokenizer's; a figure no bill shows (Claude 3 Sonnet; a named tool on most families; the
#: forced prompt of Opus 4.7 and later) is carried over from the nearest that one does.
FAMILIES: dict[str, Family] = {
    "claude-3-opus": Family("claude-3-opus", 530, 281, 0, 0, own=_own(534, 297)),
    "claude-3-sonnet": Family("claude-3-sonnet", 159, 235, 0, 0, own=_own(159, 235)),
    "claude-3-haiku": Family("claude-3-haiku", 264, 340, 0, 0, own=_own(264, 356, 361)),
    "claude-3.5-haiku": Family("claude-3.5-haiku", 271, 340, 0, 0, own=_own(265, 340)),
    "claude-3.5-sonnet": Family("claude-3.5-sonnet", 303, 261, 0, 0, own=_own(293, 261)),
    # Claude 3.7 Sonnet, Claude 4 and 4.1 (published as 346 / 313 tokens).
    "claude-4": Family("claude-4", 317, 324, own=_own(314, 309, 286)),
    "claude-4.5": CURRENT,
    "claude-4.5-keeps": Family(
        "claude-4.5-keeps",
        TOOL_USE_SYSTEM_PROMPT,
        TOOL_USE_SYSTEM_PROMPT_FORCED,
        keeps_thinking=True,
        own=CURRENT.own,
    ),
    # Opus 4.7 and later have a new tokenizer, which Anthropic says bills 1.0-1.35 times the
    # tokens of its predecessors for the same text: without the reconstruction, the bills of
    # Opus 4.7, 4.8 and 5 read as 1.25 times the fallback encoding's count (an estimate;
    # number-heavy text runs higher). Their hidden tool prompt is the bills' remainder after the
    # definitions; the forced figure keeps the 4.5 family's difference between the two, as no
    # bill shows it. Opus 4.8, Sonnet 5 and later read the 4.7 vocabulary in a shorter frame.
    "claude-4.7": Family(
        "claude-4.7",
        305,
        398,
        adaptive=0,
        keeps_thinking=True,
        text_ratio=1.25,
        generation="4.7",
        own=_own(289, 382),
    ),
    "claude-4.8": Family(
        "claude-4.8",
        305,
        398,
        adaptive=0,
        keeps_thinking=True,
        text_ratio=1.25,
        generation="4.8",
        own=_own(292, 385, priming=3),
    ),
    "claude-5": Family(
        "claude-5",
        403,
        496,
        adaptive=0,
        keeps_thinking=True,
        text_ratio=1.25,
        generation="4.8",
        own=_own(382, 475, priming=3),
    ),
    "claude-5-sonnet": Family(
        "claude-5-sonnet",
        TOOL_USE_SYSTEM_PROMPT,
        TOOL_USE_SYSTEM_PROMPT_FORCED,
        keeps_thinking=True,
        generation="4.8",
        own=_own(448, 541, priming=3),
    ),
}
_VERSION = re.compile(r"claude-(?:(\d+)(?:[-.](\d))?-([a-z]+)|([a-z]+)-(\d+)(?:[-.](\d{1,2}))?)(?![0-9])")


@functools.lru_cache(maxsize=256)
def family(model: str) -> Family:
    """The family of a model name (``claude-sonnet-4-5``, ``claude-3-5-haiku-20241022``,
    ``claude-opus-4-20250514``); a name no rule places (a newer model, an alias) is taken for
    the newest family of its tier, and a non-Claude name for the current models."""
    m = _VERSION.search(model.lower())
    if m is None:
        old = re.search(r"claude-(\d+)(?![0-9])", model)
        return FAMILIES["claude-3-haiku"] if old is not None and int(old.group(1)) < 3 else CURRENT
    if m.group(3) is not None:
        tier, major, minor = m.group(3), int(m.group(1)), int(m.group(2) or 0)
    else:
        tier, major, minor = m.group(4), int(m.group(5)), int(m.group(6) or 0)
    version = (major, minor)
    if version < (3, 0):
        return FAMILIES["claude-3-haiku"]
    if version < (3, 5):
        return FAMILIES.get(f"claude-3-{tier}", FAMILIES["claude-3-haiku"])
    if version < (3, 7):
        return FAMILIES["claude-3.5-haiku" if tier == "haiku" else "claude-3.5-sonnet"]
    if version < (4, 5):
        return FAMILIES["claude-4"]
    if tier == "opus":
        if version >= (5, 0):
            return FAMILIES["claude-5"]
        if version >= (4, 8):
            return FAMILIES["claude-4.8"]
        return FAMILIES["claude-4.7" if version >= (4, 7) else "claude-4.5-keeps"]
    if tier == "sonnet":
        if version >= (5, 0):
            return FAMILIES["claude-5-sonnet"]
        return FAMILIES["claude-4.5-keeps" if version >= (4, 6) else "claude-4.5"]
    if tier == "haiku":
        return FAMILIES["claude-4.5"]
    # A tier this table does not know (a new model line): the newest family.
    return FAMILIES["claude-5"]


def _dumps(value: Any, where: str, error: type[InvalidRequestError], indent: int | None = None) -> str:
    """``value`` as the API renders JSON into a prompt: keys in the caller's order, ``", "``
    and ``": "`` between items (SDK objects dumped); typed errors for what JSON cannot say."""
    try:
        return json.dumps(value, indent=indent, ensure_ascii=False, default=as_plain)
    except RecursionError:
        raise TooDeeplyNestedError(where, "is nested too deeply to be a request") from None
    except (TypeError, ValueError) as exc:
        raise error(where, f"is not JSON-serialisable: {exc}") from exc


def _without_cache_control(block: Mapping[str, Any]) -> Mapping[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"} if "cache_control" in block else block


class _Reader:
    """Reads one request's messages: blocks counted, rules checked, results capped."""

    def __init__(
        self, counter: TokenCounter, ctx: ReadContext, state: State, how: Counting | float = 1.0
    ) -> None:
        if not isinstance(how, Counting):
            how = _fallback_counting(counter, how)
        self.counter = counter
        #: How text is counted (its key is part of what a memo of this reader's counts is keyed on).
        self.how = how
        self.text = how.text
        self.ctx = ctx
        self.state = state
        self.framing = how.framing
        self.seen_ids: dict[str, int] = {}

    # -- blocks --------------------------------------------------------------------------

    def source_tokens(self, block: Mapping[str, Any], where: str, index: int) -> int:
        """An image or a document as the API bills it: an image by its pixel size, a PDF by its
        pages (text and page images), a text document by its text; what the body only names
        (a URL, a file id) by the tier's bound, recorded as unknown."""
        kind = block.get("type")
        source = as_mapping(block.get("source"))
        model = self.counter.model
        stype = source.get("type") if source is not None else None
        if kind == "image":
            data = source.get("data") if source is not None else None
            size = image_size(data) if stype == "base64" and isinstance(data, str) else None
            cost = anthropic_image_tokens(model, size)
            if cost.unknown is not None:
                self.ctx.unknown("file by id" if stype == "file" else "image by URL")
            return cost.tokens
        # A document's title and context are billed with it; a text document is framed, a PDF's
        # framing is in its own rule.
        about = sum(self.text(v) for v in (block.get("title"), block.get("context")) if isinstance(v, str))
        extra = ANTHROPIC_DOCUMENT_FRAMING + about
        if source is None:
            raise InvalidMessageError(f"{where}.source", "a document needs a 'source' object", index=index)
        if stype == "text":
            data = string_field(source, "data", f"{where}.source", index)
            return extra + self.text(data)
        if stype == "content":
            # A document's content may hold documents; no real request nests them deeply,
            # and an unbounded chain would end in a RecursionError instead of a typed error.
            if where.count(".source.content") >= _MAX_DOCUMENT_NESTING:
                raise TooDeeplyNestedError(
                    f"{where}.source.content", "documents are nested too deeply to be a request", index=index
                )
            nested = self.blocks(source.get("content"), "user", f"{where}.source.content", index)
            return extra + sum(p.tokens for p in nested)
        if stype == "base64":
            data = string_field(source, "data", f"{where}.source", index, "a base64 string")
            return about + anthropic_pdf_tokens(model, data, self.text).tokens
        # A document by URL or file id: its pages are not in the body.
        self.ctx.unknown("document by URL" if stype == "url" else "file by id")
        return about + anthropic_document_bound(model).tokens

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
        block = as_object(raw, where, index)
        kind = block.get("type")
        text = self.text
        if kind == "text":
            value = string_field(block, "text", where, index)
            component: Component = "tool_result" if nested else ("user" if role == "user" else "assistant")
            return Part(component, text(value))
        if kind in ("image", "document"):
            tokens = self.source_tokens(block, where, index)
            return Part("image" if kind == "image" else "document", tokens, exact=False)
        if kind in ("tool_use", "server_tool_use"):
            name, call_id = block.get("name"), block.get("id")
            if not isinstance(name, str) or not isinstance(call_id, str):
                raise InvalidMessageError(where, f"a {kind} block needs 'id' and 'name' strings", index=index)
            args = to_json(block.get("input", {}), f"{where}.input", index, InvalidMessageError)
            # The call's id is in the prompt too (the bills grow with it), as is its result's.
            tokens = self.framing.tool_call + text(name) + text(args) + text(call_id)
            return Part("tool_call", tokens, call_id)
        if not isinstance(kind, str):
            raise InvalidMessageError(f"{where}.type", "is missing or not a string", index=index)
        if kind in _THINKING:
            return Part("reasoning", text(string_field(block, _THINKING[kind], where, index)))
        # A server tool's result, a search result, or a block type this version does not
        # know: charge its JSON text (errs high), never its cache_control.
        component = "tool_result" if kind.endswith("_tool_result") or nested else "other"
        body = to_json(_without_cache_control(block), where, index, InvalidMessageError)
        return Part(component, text(body))

    def tool_result(self, block: Mapping[str, Any], where: str, index: int) -> tuple[Part, Any]:
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
        tokens = self.framing.tool_result + self.text(call_id)
        tokens += sum(p.tokens for p in self.blocks(content, "user", f"{where}.content", index))
        return Part("tool_result", tokens, call_id, capped=new_block is not None), new_block

    # -- messages ------------------------------------------------------------------------

    def message(
        self, raw: Any, i: int, previous: str | None = None
    ) -> tuple[str, list[Part], list[str], list[str], list[str]]:
        """``(role, parts, tool_use ids, tool_result ids, kinds in order)`` of one message.

        ``previous`` is the role of the message before it: the API combines consecutive
        messages of one role into one turn, so such a message is framed as a continuation.
        """
        where = f"messages[{i}]"
        m = as_object(raw, where, i)
        role = m.get("role")
        # A ``system`` message among the messages is the API's mid-conversation system message:
        # read as a message of the user's side (it sits between the user's turns).
        if role != "system" and role not in _ROLES:
            raise InvalidMessageError(
                f"{where}.role", f"unknown role {shown(role)}; expected user or assistant", index=i
            )
        line_role = "assistant" if role == "assistant" else "user"
        framing = self.framing.joined if previous == line_role else self.framing.message
        parts = [Part("user" if line_role == "user" else "assistant", framing)]
        content = m.get("content")
        uses: list[str] = []
        results: list[str] = []
        kinds: list[str] = []
        if isinstance(content, str):
            parts.append(Part("user" if line_role == "user" else "assistant", self.text(content)))
            return line_role, parts, uses, results, ["text"]
        if not isinstance(content, ARRAY):
            raise InvalidMessageError(
                f"{where}.content",
                f"must be a string or a list of blocks, got {type(content).__name__}",
                index=i,
            )
        if not content:
            rule(self.ctx, f"{where}.content", "is an empty list", i)
        new_content: list[Any] | None = None
        for k, raw_block in enumerate(content):
            here = f"{where}.content[{k}]"
            block = as_mapping(raw_block)
            kind = block.get("type") if block is not None else None
            if block is not None and kind == "tool_result":
                part, capped = self.tool_result(block, here, i)
                results.append(str(part.call_id))
                if line_role != "user":
                    rule(self.ctx, here, "a tool_result belongs in a user message", i)
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
                        rule(self.ctx, here, "only assistant messages make tool_use", i)
                    first = self.seen_ids.setdefault(part.call_id, i)
                    if first != i or uses.count(part.call_id) > 1:
                        # The API bills a reused id as sent: recorded, not refused.
                        problem = f"tool_use id {shown(part.call_id)} is already used by messages[{first}]"
                        _note(self.ctx, TranscriptRuleError(f"{here}.id", problem, index=i))
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
                    if kind in ANTHROPIC_BLOCKS:
                        return True
                    if kind in OPENAI_PARTS:
                        return False
        model = body.get("model")
        if isinstance(model, str) and model.startswith("claude"):
            return True
        return None

    def to_model(self, body: Any, ctx: ReadContext) -> Reading:
        body = json_object(body)
        messages = body.get("messages")
        if not isinstance(messages, ARRAY):
            raise InvalidRequestError("messages", "a Messages API request needs a 'messages' list")
        counter = ctx.counter
        state = State()
        model_name = body.get("model")
        fam = family(model_name) if isinstance(model_name, str) else CURRENT
        how = counting(counter, fam)
        reader = _Reader(counter, ctx, state, how)
        text = reader.text
        if not messages:
            rule(ctx, "messages", "needs at least one message")
        # Read every message, then group runs into exchanges and check the pairing rules
        # on the combined turns (consecutive same-role messages are one turn to the API).
        read, replies = _read_messages(reader, messages, ctx)
        if not fam.keeps_thinking:
            read = _without_earlier_thinking(read)
        turns, starts = _exchanges(read, ctx, reader.seen_ids)
        system = body.get("system")
        blocks: tuple[Block, ...] = ()
        if system is not None:
            system_text = _system_text(system)
            blocks = (Block("system_prompt", system_text, text(system_text)),)
        tools = body.get("tools")
        tool_schema, schema_inexact = self.tools_tokens(tools, body.get("tool_choice"), fam, ctx, how)
        if tool_schema and blocks:
            tool_schema += how.framing.system_with_tools
        output, output_inexact = _output_config_tokens(body, text, how.framing.output_schema)
        # A request that ends with the assistant's message (a prefill) has the model continue
        # that message: no new reply is opened.
        priming = 0 if read and read[-1][0] == "assistant" else how.framing.priming
        model = RequestModel(
            turns=turns,
            starts=starts,
            items=len(messages),
            replies=replies,
            tool_schema=tool_schema + output,
            priming=priming + _thinking_tokens(body.get("thinking"), fam),
            blocks=blocks,
            system_in_turns=False,
            capped=len(state.replaced),
            schema_inexact=schema_inexact + output_inexact,
            unknowns=tuple(ctx.unknowns),
            encoding=how.encoding,
        )
        return Reading(model=model, body=body, items=messages, state=state)

    @staticmethod
    def tools_tokens(
        tools: Any, tool_choice: Any, fam: Family, ctx: ReadContext, how: Counting | None = None
    ) -> tuple[int, int]:
        """``(tokens, estimated)``: what the tool definitions add, and the part of it estimated.

        The API renders each definition the model can see into a hidden tool-use system prompt
        (:func:`render_tools`); that prompt's fixed text is the family's documented or measured
        figure, the rendering is counted with this module's encoding, so it is the estimate.
        """
        if not tools:
            return 0, 0
        if not isinstance(tools, ARRAY):
            raise InvalidToolSchemaError(
                "tools", f"must be a list of tool objects, got {type(tools).__name__}"
            )
        how = how if how is not None else counting(ctx.counter, fam)
        rendered, unknown = _rendered_tools(tools, ctx.counter, how)
        for kind in unknown:
            ctx.unknown(f"server tool {kind}")
        choice = as_mapping(tool_choice) if tool_choice is not None else None
        choice_type = choice.get("type") if choice is not None else None
        framing = how.framing
        if choice_type == "tool":
            prompt = framing.tool_prompt_named
        else:
            prompt = framing.tool_prompt_forced if choice_type == "any" else framing.tool_prompt
        return prompt + rendered, rendered

    def from_model(self, reading: Reading, fitted: Fitted) -> tuple[Any, list[Any]]:
        state: State = reading.state
        out = kept_items(reading, fitted, state.replaced)
        body = dict(reading.body)
        body["messages"] = out
        extra = [{"type": "text", "text": b.text} for b in fitted.blocks]
        if fitted.summary is not None:
            extra.append(fitted.summary)
        if extra:
            # Added after the caller's own system blocks, so a cached prefix stays a prefix.
            system = body.get("system")  # read as a string or a list of blocks, or absent
            own = [{"type": "text", "text": system}] if isinstance(system, str) else list(system or ())
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


#: Anthropic-defined client tools whose definition the API writes itself: the documented
#: tokens each adds to the input (the bash tool 245, the text editor 700, computer use 735).
DEFINED_TOOL_TOKENS: tuple[tuple[str, int], ...] = (
    ("bash_", 245),
    ("text_editor_", 700),
    ("computer_", 735),
)


def render_tools(tools: Sequence[Any]) -> tuple[str, list[tuple[int, str]]]:
    """The definitions as the tool-use system prompt holds them, and ``(index, type)`` of the
    tools of Anthropic's own types.

    A custom tool is one ``<function>`` element of JSON (its description when it has one, its
    name, its ``input_schema`` as ``parameters``) on a line of its own. A tool with
    ``defer_loading`` is not in the prompt until tool search loads it, so it is left out.
    Anthropic's own tool types are returned apart: their cost is the API's, not the JSON's.
    """
    lines: list[str] = []
    kinds: list[tuple[int, str]] = []
    for k, raw in enumerate(tools):
        where = f"tools[{k}]"
        tool = as_mapping(raw)
        if tool is None or not isinstance(tool.get("name"), str):
            raise InvalidToolSchemaError(where, "must be an object with a 'name' string")
        kind = tool.get("type")
        if kind not in (None, "custom"):
            if not isinstance(kind, str):
                raise InvalidToolSchemaError(f"{where}.type", "must be a string")
            kinds.append((k, kind))
            continue
        schema = tool.get("input_schema")
        if as_mapping(schema) is None:
            raise InvalidToolSchemaError(f"{where}.input_schema", "must be a JSON Schema object")
        desc = tool.get("description")
        if desc is not None and not isinstance(desc, str):
            raise InvalidToolSchemaError(f"{where}.description", "must be a string")
        if tool.get("defer_loading") is True:
            continue
        shown_def: dict[str, Any] = {"description": desc} if desc else {}
        shown_def["name"] = tool["name"]
        shown_def["parameters"] = schema
        lines.append(
            f"<function>{_dumps(shown_def, f'{where}.input_schema', InvalidToolSchemaError)}</function>"
        )
    return "\n".join(lines), kinds


def _rendered_tools(
    tools: Sequence[Any], counter: TokenCounter, how: Counting | float = 1.0
) -> tuple[int, list[str]]:
    """The rendered definitions' tokens (custom and Anthropic's own types) and the server tool
    types whose cost the body does not show.

    A conversation sends the same tool list round after round: the count is kept while the same
    list holds the same objects, or the same JSON, so a warm round renders nothing again.
    """
    if not isinstance(how, Counting):
        how = _fallback_counting(counter, how)
    items = tuple(tools)
    last = counter.dialect_state.get("anthropic-tools")
    if last is not None and last[5] != how.key:
        last = None
    if (
        last is not None
        and last[0] is tools
        and len(last[1]) == len(items)
        and all(a is b for a, b in zip(last[1], items))
    ):
        return last[3], last[4]
    key = to_json(tools, "tools", None, InvalidToolSchemaError)
    if last is not None and key == last[2]:
        counter.dialect_state["anthropic-tools"] = (tools, items, key, last[3], last[4], how.key)
        return last[3], last[4]
    text, kinds = render_tools(tools)
    count = how.text
    n = count(text) if text else 0
    unknown: list[str] = []
    for k, kind in kinds:
        fixed = next((t for prefix, t in DEFINED_TOOL_TOKENS if kind.startswith(prefix)), None)
        if fixed is not None:
            n += fixed
            continue
        # A server tool (web search, code execution, tool search...): its definition's JSON as
        # an estimate; what the server adds to the prompt is not in the body.
        tool = as_mapping(tools[k]) or {}
        n += count(to_json(_without_cache_control(tool), f"tools[{k}]", None, InvalidToolSchemaError))
        unknown.append(kind)
    counter.dialect_state["anthropic-tools"] = (tools, items, key, n, unknown, how.key)
    return n, unknown


def _exchanges(read: list[Read], ctx: ReadContext, seen: Mapping[str, int]) -> tuple[list[Turn], list[int]]:
    """The turns of the messages read, and where each starts: a run of the assistant's messages
    and the user's that follow is one exchange to the API (consecutive same-role messages are one
    turn), and the pairing rules are checked on it: every tool_use answered once, in the first
    user message after it, its tool_result blocks first."""
    turns: list[Turn] = []
    starts: list[int] = []
    if read and read[0][0] != "user":
        # The API takes a history that opens with the assistant (it bills it as sent).
        _note(ctx, TranscriptRuleError("messages[0].role", "the first message is the assistant's", index=0))
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
            if results:
                _check_results(i, results, kinds, i == first_user, uses, answers, ctx, seen)
            has_user_text = has_user_text or any(k != "tool_result" for k in kinds)
            i += 1
        missing = [u for u in uses if u not in answers]
        if missing:
            ids = ", ".join(repr(u) for u in missing)
            rule(
                ctx,
                f"messages[{start}].content",
                f"tool_use {ids} never answered: every tool_use needs a tool_result in the "
                "next (user) message",
                start,
            )
        role: Line = "user" if read[start][0] == "user" else "assistant"
        turns.append(
            Turn(role, parts, 0, calls=tuple(uses), answers=tuple(answers), has_user_text=has_user_text)
        )
        starts.append(start)
    return turns, starts


def _check_results(
    i: int,
    results: list[str],
    kinds: list[str],
    first: bool,
    uses: list[str],
    answers: list[str],
    ctx: ReadContext,
    seen: Mapping[str, int],
) -> None:
    """The pairing rules on user message ``i``'s tool_results (adding those that hold to
    ``answers``): each answers a tool_use of the exchange once, in its first user message, before
    any text."""
    for r in results:
        if r not in uses:
            ctx.problem(_orphan(i, r, seen))
        elif r in answers:
            rule(ctx, f"messages[{i}].content", f"tool_use {shown(r)} is answered twice", i)
        else:
            answers.append(r)
    if first:
        if kinds[: len(results)] != ["tool_result"] * len(results):
            rule(
                ctx,
                f"messages[{i}].content",
                "tool_result blocks must come first in the message, before any text",
                i,
            )
    else:
        rule(
            ctx,
            f"messages[{i}].content",
            "tool results must be in the first user message after the tool_use",
            i,
        )


def _note(ctx: ReadContext, error: TranscriptRuleError) -> None:
    """Record a rule the API states but does not enforce: the body is billed as sent, so no
    read of it (a count, nor a fit, which keeps the caller's messages as they are) refuses it."""
    ctx.problems.append(str(error))


def _without_earlier_thinking(read: list[Read]) -> list[Read]:
    """``read`` with the thinking blocks of earlier assistant turns at no tokens.

    A model that keeps only the current turn's thinking has the API strip the rest: every
    assistant message before the last user message that is more than tool results is billed
    without its ``thinking`` and ``redacted_thinking`` blocks.
    """
    last = -1
    for i in range(len(read) - 1, -1, -1):
        if read[i][0] == "user" and any(k != "tool_result" for k in read[i][4]):
            last = i
            break
    out: list[Read] | None = None
    for i in range(last):
        role, parts, uses, results, kinds = read[i]
        if role != "assistant" or ("thinking" not in kinds and "redacted_thinking" not in kinds):
            continue
        if out is None:
            out = list(read)
        # parts[0] is the message's framing; parts[k + 1] is the part of block k.
        kept = [parts[0]] + [
            Part(p.component, 0) if kinds[k] in ("thinking", "redacted_thinking") else p
            for k, p in enumerate(parts[1:])
        ]
        out[i] = (role, kept, uses, results, kinds)
    return read if out is None else out


def _thinking_tokens(thinking: Any, fam: Family) -> int:
    """The tokens the ``thinking`` configuration adds to the prompt (its budget is output)."""
    config = as_mapping(thinking) if thinking is not None else None
    kind = config.get("type") if config is not None else None
    if kind == "enabled":
        return fam.thinking
    if kind == "adaptive":
        return fam.adaptive
    return 0


def _output_config_tokens(
    body: Mapping[str, Any], count: Callable[[str], int], prompt: int = OUTPUT_SCHEMA_PROMPT
) -> tuple[int, int]:
    """``(tokens, estimated)`` of structured outputs and the task budget.

    A ``json_schema`` format (``output_config.format``, or the earlier ``output_format``) puts
    the schema, indented, into a fixed instruction: the instruction's figure is the rule, the
    schema's text the estimate. ``effort`` adds nothing to the prompt.
    """
    n = estimated = 0
    fmt: Any = None
    where = "output_format"
    config = as_mapping(body.get("output_config"))
    if config is not None:
        fmt = config.get("format")
        where = "output_config.format"
        if config.get("task_budget") is not None:
            n += TASK_BUDGET_TOKENS
            estimated += TASK_BUDGET_TOKENS
    if fmt is None:
        fmt = body.get("output_format")
        where = "output_format"
    spec = as_mapping(fmt) if fmt is not None else None
    if spec is not None and spec.get("type") == "json_schema":
        schema = count(_dumps(spec.get("schema"), f"{where}.schema", InvalidRequestError, indent=2))
        n += prompt + schema
        estimated += schema
    return n, estimated


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


def _read_messages(reader: _Reader, messages: Sequence[Any], ctx: ReadContext) -> tuple[list[Read], int]:
    """Every message read, and the model's answers in them; the leading run read last round
    (compared in one go) is not read again.

    A message is taken from the memo only when the whole run up to it equals the private copy
    kept of it, so a message changed in place, or anything before it, is read again. A message
    that said a problem or an unknown, or was cut, is read every round, so it is recorded.
    """
    key = cut_key(ctx)
    if key is not None and reader.how.key != 1.0:
        key = (*key, reader.how.key)
    memo = PrefixRound(reader.counter, "anthropic-memo", messages, key, lambda: Prefix(1))
    (reader.seen_ids,) = memo.ids()
    read = memo.reads
    replaced = reader.state.replaced
    for i in range(memo.start, len(messages)):
        raw = messages[i]
        problems, unknowns = len(ctx.problems), len(ctx.unknowns)
        read.append(reader.message(raw, i, read[-1][0] if read else None))
        if memo.boundary < 0:
            clean = len(ctx.problems) == problems and len(ctx.unknowns) == unknowns
            memo.add(i, raw, clean and i not in replaced)
    memo.keep(reader.counter, (dict(reader.seen_ids),))  # the pairing rules name the ids' messages
    return read, memo.replies
