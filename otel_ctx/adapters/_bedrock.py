"""Amazon Bedrock: Converse / ConverseStream and InvokeModel bodies, for every model family.

A Converse body holds ``messages`` of ``user`` and ``assistant`` turns whose ``content`` is a
list of blocks keyed by kind (``text``, ``image``, ``document``, ``video``, ``toolUse``,
``toolResult``, ``reasoningContent``, ``guardContent``, ``cachePoint``), a ``system`` list,
``toolConfig`` (``tools`` of ``toolSpec`` with ``inputSchema.json``, ``toolChoice``),
``inferenceConfig`` and ``additionalModelRequestFields``. An InvokeModel body is the model
vendor's own: Anthropic Messages (``anthropic_version``), Nova's ``messages-v1`` (the Converse
shape), a ready-templated ``prompt`` (Llama, Mistral, Cohere, AI21), Titan's ``inputText``,
Cohere's ``message`` and ``chat_history``. The body never names the model (it is in the URL),
so the model is the fitter's ``model=``: a Bedrock id, an inference profile or its ARN.

How each is counted:

- **Claude** is billed by Anthropic's accounting. A Converse body is mapped block for block to
  the Messages body Bedrock sends Claude (:mod:`otel_ctx.adapters._bedrock_converse`) and read
  by the Anthropic adapter; an InvokeModel Messages body is read by it as it is. Measured on the
  recorded bills, Converse bills Claude as the Messages API does (tool-use prompt, tool ids,
  thinking), with two differences the mapping makes: a PDF reaches models before Claude 4 as
  its extracted text, and a document inside a tool result as its name only.
- **Every other family** is billed through its chat template: text by the family's tokenizer
  (the family table's, or ``cl100k_base`` scaled by its measured ratio), plus the template's
  framing from :mod:`otel_ctx.adapters._bedrock_families`.

Counts are estimates (``exact=False``): no family served here has a tokenizer that reproduces
Bedrock's bills offline; the reported usage calibrates them as the conversation goes.

A turn is an *exchange*, as in the Messages API: the assistant's messages with the user
messages after them, so dropping one never separates a ``toolUse`` from its ``toolResult``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from otel_ctx._families import model_key
from otel_ctx.adapters import _bedrock_converse as converse
from otel_ctx.adapters._base import (
    ARRAY,
    SUMMARY_PREFIX,
    Adapter,
    Fitted,
    ReadContext,
    Reading,
    State,
    as_mapping,
    count_replies,
    json_object,
    kept_items,
)
from otel_ctx.adapters._bedrock_families import Framing, framing, image_tokens
from otel_ctx.adapters._media import image_size, pdf_document
from otel_ctx.engine._errors import InvalidRequestError
from otel_ctx.engine._model import Block, Component, Line, Part, RequestModel, Turn
from otel_ctx.engine._tokens import TokenCounter

#: Keys only Bedrock's own bodies have (Converse, Nova's messages-v1, Titan).
_BEDROCK_KEYS = (
    "toolConfig",
    "inferenceConfig",
    "additionalModelRequestFields",
    "guardrailConfig",
    "schemaVersion",
    "inputText",
    "promptVariables",
    "performanceConfig",
)
#: Converse block kinds (a block is an object with one of these keys and no ``type``).
_BLOCK_KEYS = frozenset(
    {
        "text",
        "image",
        "document",
        "video",
        "toolUse",
        "toolResult",
        "reasoningContent",
        "guardContent",
        "cachePoint",
        "citationsContent",
    }
)
#: Claude 4 and later are given a PDF's pages (text and page images) through Converse; earlier
#: models its text only.
_NATIVE_PDF = re.compile(r"claude-(?:(?:opus|sonnet|haiku)-(?:[4-9]|\d{2})|(?:[4-9]|\d{2})[-.])")
#: The special tokens of a templated prompt (Llama 3's ``<|eot_id|>``, a sentence's ``<s>``).
_SPECIAL = re.compile(r"<\|[a-z_]{2,40}\|>|</?s>")
#: A reasoning section inside an earlier assistant turn's text (Qwen, DeepSeek, Kimi write them).
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def is_claude(model: str) -> bool:
    """``model`` is one of Anthropic's (``us.anthropic.claude-…``, an ARN of a Claude profile)."""
    return model_key(model).startswith("claude")


def body_kind(body: Mapping[str, Any], model: str) -> str:
    """Which of Bedrock's body shapes ``body`` is: ``anthropic`` (Messages), ``converse``
    (Converse, Nova's messages-v1), ``prompt`` (a templated prompt or Titan's ``inputText``),
    ``cohere`` (``message`` with ``chat_history``), or ``other``."""
    if "anthropic_version" in body:
        return "anthropic"
    messages = body.get("messages")
    if isinstance(messages, ARRAY):
        for raw in messages:
            m = as_mapping(raw)
            content = m.get("content") if m is not None else None
            if isinstance(content, str):
                return "anthropic" if is_claude(model) else "converse"
            for b in content if isinstance(content, ARRAY) else ():
                block = as_mapping(b)
                if block is None:
                    continue
                if "type" in block:
                    return "anthropic"
                if _BLOCK_KEYS.intersection(block):
                    return "converse"
        return "anthropic" if is_claude(model) and not any(k in body for k in _BEDROCK_KEYS) else "converse"
    if isinstance(body.get("prompt"), str) or isinstance(body.get("inputText"), str):
        return "prompt"
    if isinstance(body.get("message"), str):
        return "cohere"
    return "other"


def requested_output(body: Mapping[str, Any]) -> int | None:
    """The request's own output cap: Converse's ``inferenceConfig.maxTokens`` or the vendor body's
    (``max_tokens``, ``max_gen_len``, Titan's ``textGenerationConfig.maxTokenCount``)."""
    found: Any = None
    config = as_mapping(body.get("inferenceConfig"))
    if config is not None:
        found = config.get("maxTokens", config.get("max_new_tokens"))
    if found is None:
        titan = as_mapping(body.get("textGenerationConfig"))
        if titan is not None:
            found = titan.get("maxTokenCount")
    for key in ("max_tokens", "max_gen_len", "maxTokens", "max_tokens_to_sample"):
        if found is None:
            found = body.get(key)
    return found if isinstance(found, int) and not isinstance(found, bool) and found >= 0 else None


@dataclass(slots=True)
class _State(State):
    kind: str = "converse"
    #: The Anthropic reading this body was counted through (Claude), to write it back.
    inner: Reading | None = None


def _cap_messages(messages: Sequence[Any], ctx: ReadContext, replaced: dict[int, Any]) -> list[Any]:
    """The messages with each tool result's text cut to the cap (the caller's untouched: a cut
    message is a copy, recorded in ``replaced``)."""
    cap = ctx.cap
    if cap is None:
        return list(messages)
    out = list(messages)
    for i, raw in enumerate(messages):
        m = as_mapping(raw)
        content = m.get("content") if m is not None else None
        if m is None or not isinstance(content, ARRAY):
            continue
        new_content: list[Any] | None = None
        for k, raw_block in enumerate(content):
            b = as_mapping(raw_block)
            result = as_mapping(b.get("toolResult")) if b is not None else None
            parts = result.get("content") if result is not None else None
            if result is None or not isinstance(parts, ARRAY) or not parts:
                continue
            mapped = [as_mapping(p) for p in parts]
            if not all(p is not None and isinstance(p.get("text"), str) and len(p) == 1 for p in mapped):
                continue
            joined = "".join(p["text"] for p in mapped if p is not None)
            cut = cap(joined)
            if cut is joined:
                continue
            if new_content is None:
                new_content = list(content)
            new_content[k] = {"toolResult": {**result, "content": [{"text": cut}]}}
        if new_content is not None:
            out[i] = replaced[i] = {**m, "content": new_content}
    return out


class BedrockAdapter(Adapter):
    """Bedrock Converse and InvokeModel bodies (``client.converse(**body)``,
    ``invoke_model(body=json.dumps(body))``).

    Claude's bodies are read through ``anthropic``, the Anthropic adapter, whose accounting
    Bedrock bills Claude by; it is passed in (see :func:`build`) so that neither dialect module
    imports the other.
    """

    provider = "bedrock"
    exact = False

    def __init__(self, anthropic: Adapter) -> None:
        self._anthropic = anthropic

    def claims(self, body: Mapping[str, Any]) -> bool | None:
        if "anthropic_version" in body or any(k in body for k in _BEDROCK_KEYS):
            return True
        messages = body.get("messages")
        if isinstance(messages, list):
            for raw in messages:
                m = as_mapping(raw)
                content = m.get("content") if m is not None else None
                for b in content if isinstance(content, list) else ():
                    block = as_mapping(b)
                    if block is not None and "type" not in block and _BLOCK_KEYS.intersection(block):
                        return True
        return False

    # -- reading -------------------------------------------------------------------------

    def to_model(self, body: Any, ctx: ReadContext) -> Reading:
        body = json_object(body)
        model = ctx.counter.model
        kind = body_kind(body, model)
        if kind == "anthropic":
            return self._through_anthropic(
                body, {k: v for k, v in body.items() if k != "anthropic_version"}, ctx, kind
            )
        if kind == "converse":
            messages = body.get("messages")
            if not isinstance(messages, ARRAY):
                raise InvalidRequestError("messages", "a Converse request needs a 'messages' list")
            state = _State(kind=kind)
            capped = _cap_messages(messages, ctx, state.replaced)
            if is_claude(model):
                return self._claude_converse(body, capped, state, ctx)
            return _Reader(ctx, framing(model), state).converse(body, messages, capped)
        return _Reader(ctx, framing(model), _State(kind=kind)).prompt(body, kind)

    def _through_anthropic(
        self, body: Mapping[str, Any], messages_body: dict[str, Any], ctx: ReadContext, kind: str
    ) -> Reading:
        """An InvokeModel Messages body, read by the Anthropic adapter with the fitter's model."""
        if "model" not in messages_body:
            messages_body["model"] = model_key(ctx.counter.model)
        inner = self._anthropic.to_model(messages_body, ctx)
        state = _State(kind=kind, inner=inner)
        state.replaced = inner.state.replaced if isinstance(inner.state, State) else {}
        return Reading(model=inner.model, body=body, items=inner.items, state=state)

    def _claude_converse(
        self, body: Mapping[str, Any], messages: list[Any], state: _State, ctx: ReadContext
    ) -> Reading:
        model = model_key(ctx.counter.model)
        mapped = converse.to_messages_body(
            {**body, "messages": messages}, model, bool(_NATIVE_PDF.search(model))
        )
        thinking = as_mapping(mapped.get("thinking"))
        if thinking is not None and thinking.get("type") == "adaptive":
            # Adaptive thinking adds no notice to the prompt on Converse (the bills of a lone
            # question with and without it are its text alone).
            del mapped["thinking"]
        # The tool results are cut already (``state.replaced`` holds the Converse copies).
        inner_ctx = ReadContext(
            ctx.counter, None, ctx.strict, None, problems=ctx.problems, unknowns=ctx.unknowns
        )
        inner = self._anthropic.to_model(mapped, inner_ctx)
        inner.model.capped = len(state.replaced)
        raw = body.get("messages")
        assert isinstance(raw, ARRAY)
        return Reading(model=inner.model, body=body, items=raw, state=state)

    # -- writing -------------------------------------------------------------------------

    def from_model(self, reading: Reading, fitted: Fitted) -> tuple[Any, list[Any]]:
        state: _State = reading.state
        if state.kind == "anthropic" and state.inner is not None:
            summary = as_mapping(fitted.summary)
            if summary is not None and "type" not in summary:
                # This dialect's summary block, as the Messages system block it is there.
                fitted = replace(fitted, summary={"type": "text", **summary})
            out_body, out = self._anthropic.from_model(state.inner, fitted)
            # The caller's body with what the fit rewrote (``anthropic_version`` stays, and the
            # model the reading was given, which InvokeModel refuses in a body, is not added).
            body = dict(reading.body)
            for key in ("messages", "system"):
                if key in out_body:
                    body[key] = out_body[key]
            return body, out
        body = dict(reading.body)
        extra = [{"text": b.text} for b in fitted.blocks]
        if fitted.summary is not None:
            extra.append(fitted.summary)
        if state.kind != "converse":
            # A templated prompt: what the fit adds goes in front of it, as plain text.
            key = (
                "prompt"
                if isinstance(body.get("prompt"), str)
                else "inputText"
                if "inputText" in body
                else "message"
            )
            if extra and isinstance(body.get(key), str):
                body[key] = "\n\n".join([*(e["text"] for e in extra), body[key]])
            return body, list(reading.items)
        out = kept_items(reading, fitted, state.replaced)
        body["messages"] = out
        if extra:
            # After the caller's own system blocks, so a cached prefix stays a prefix.
            body["system"] = [*(body.get("system") or ()), *extra]
        return body, out

    def block(self, kind: str, text: str, counter: TokenCounter) -> Block:
        return Block(kind, text, counter.text(text))  # type: ignore[arg-type]

    def summary(self, produced: Any, counter: TokenCounter) -> tuple[Any, Turn]:
        """A summary goes to ``system`` as a text block (among the messages it would put two
        user messages in a row, which Converse refuses)."""
        if isinstance(produced, str):
            item: dict[str, Any] = {"text": SUMMARY_PREFIX + produced}
        else:
            block = as_mapping(produced)
            if block is None or not isinstance(block.get("text"), str):
                raise InvalidRequestError("summarizer", "must return a string or a Converse text block")
            item = dict(block)
        return item, Turn("system", [Part("system", counter.text(item["text"]))], 0)


def _reasoning_on(body: Mapping[str, Any]) -> bool:
    """The request asks the model to reason (``additionalModelRequestFields``: ``reasoning_config``,
    ``reasoning_effort`` or an enabled ``thinking``)."""
    fields = as_mapping(body.get("additionalModelRequestFields")) or {}
    for key in ("reasoning_config", "reasoning_effort"):
        value = fields.get(key)
        if value and str(value).lower() not in ("none", "disabled", "false", "off"):
            return True
    thinking = as_mapping(fields.get("thinking"))
    return thinking is not None and thinking.get("type") in ("enabled", "adaptive")


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _turn(role: Line, parts: list[Part], calls: list[str], answers: list[str], has_user_text: bool) -> Turn:
    """One Converse turn (a run of messages of one speaker): its framing is in its parts, so the
    turn adds none of its own."""
    return Turn(role, parts, 0, calls=tuple(calls), answers=tuple(answers), has_user_text=has_user_text)


class _Reader:
    """Reads a non-Claude body: the text by the family's tokenizer, the framing by its rule."""

    def __init__(self, ctx: ReadContext, rule: Framing, state: _State) -> None:
        self.ctx = ctx
        self.counter = ctx.counter
        self.rule = rule
        self.state = state

    def text(self, value: str) -> int:
        return self.counter.text(value) if value else 0

    def media(self, kind: str, spec: Mapping[str, Any], in_result: bool) -> Part:
        """An image, video or document block as the family bills it (all estimates)."""
        rule = self.rule
        source = as_mapping(spec.get("source")) or {}
        data = source.get("bytes")
        name = spec.get("name")
        about = rule.document + (self.text(name) if isinstance(name, str) and rule.document_name else 0)
        if data is None and source.get("text") is None and source.get("content") is None:
            self.ctx.unknown("media by S3 location")
        if kind in ("image", "video"):
            size = image_size(converse.raw_bytes(data)) if data is not None else None
            return Part("image", image_tokens(rule, size), exact=False)
        if in_result:
            # A document in a tool result reaches the model as its name (measured: the bills
            # of results holding PDFs of 3 and 900 text tokens are the same).
            return Part("document", about, exact=False)
        fmt = str(spec.get("format", "")).lower()
        if isinstance(source.get("text"), str):
            return Part("document", about + self.text(source["text"]), exact=False)
        if fmt == "pdf" and data is not None:
            doc = pdf_document(data) if isinstance(data, (str, bytes, bytearray, memoryview)) else None
            pages = len(doc.pages) if doc is not None else 1
            words = sum(self.text(t) for t in doc.texts) if doc is not None and rule.pdf_text else 0
            return Part("document", about + words + rule.pdf_page * pages, exact=False)
        raw = converse.raw_bytes(data) if data is not None else b""
        return Part("document", about + self.text((raw or b"").decode("utf-8", "replace")), exact=False)

    def block(self, raw: Any, role: str, earlier: bool) -> tuple[Part | None, str | None, str | None]:
        """``(part, call id opened, call id answered)`` of one Converse block."""
        b = as_mapping(raw)
        text_line: Component = "user" if role == "user" else "assistant"
        if b is None:
            return Part("other", self.text(_json_text(raw)), exact=False), None, None
        if isinstance(b.get("text"), str):
            value = b["text"]
            if earlier and self.rule.drops_reasoning and role == "assistant":
                value = _THINK.sub("", value)
            return Part(text_line, self.text(value)), None, None
        if "cachePoint" in b:
            return None, None, None
        for kind in ("image", "video", "document"):
            spec = as_mapping(b.get(kind))
            if spec is not None:
                return self.media(kind, spec, False), None, None
        use = as_mapping(b.get("toolUse"))
        if use is not None:
            call_id = str(use.get("toolUseId", ""))
            tokens = (
                self.rule.call
                + self.text(str(use.get("name", "")))
                + self.text(_json_text(use.get("input", {})))
            )
            return Part("tool_call", tokens, call_id), call_id, None
        result = as_mapping(b.get("toolResult"))
        if result is not None:
            call_id = str(result.get("toolUseId", ""))
            tokens = self.rule.result
            content = result.get("content")
            for raw_part in content if isinstance(content, ARRAY) else ():
                p = as_mapping(raw_part) or {}
                if isinstance(p.get("text"), str):
                    tokens += self.text(p["text"])
                elif "json" in p:
                    tokens += self.text(_json_text(p["json"]))
                else:
                    for kind in ("image", "video", "document"):
                        spec = as_mapping(p.get(kind))
                        if spec is not None:
                            tokens += self.media(kind, spec, True).tokens
            return Part("tool_result", tokens, call_id), None, call_id
        reasoning = as_mapping(b.get("reasoningContent"))
        if reasoning is not None:
            if earlier and self.rule.drops_reasoning:
                return Part("reasoning", 0), None, None
            text = as_mapping(reasoning.get("reasoningText")) or {}
            value = text.get("text")
            return Part("reasoning", self.text(value) if isinstance(value, str) else 0), None, None
        guard = as_mapping(b.get("guardContent"))
        if guard is not None:
            text = as_mapping(guard.get("text")) or {}
            if isinstance(text.get("text"), str):
                return Part(text_line, self.text(text["text"])), None, None
            image = as_mapping(guard.get("image"))
            if image is not None:
                return self.media("image", image, False), None, None
        # A block kind this version does not know: its JSON (errs high).
        return Part("other", self.text(_json_text(dict(b))), exact=False), None, None

    def converse(
        self, body: Mapping[str, Any], raw_messages: Sequence[Any], messages: Sequence[Any]
    ) -> Reading:
        rule = self.rule
        ctx = self.ctx
        # The last user message with more than tool results: reasoning before it is "earlier".
        last_user = -1
        for i in range(len(messages) - 1, -1, -1):
            found = as_mapping(messages[i]) or {}
            content = found.get("content")
            if found.get("role") == "user" and (
                isinstance(content, str)
                or any(
                    "toolResult" not in (as_mapping(b) or {})
                    for b in (content if isinstance(content, ARRAY) else ())
                )
            ):
                last_user = i
                break
        turns: list[Turn] = []
        starts: list[int] = []
        current: list[Part] = []
        calls: list[str] = []
        answers: list[str] = []
        has_user_text = False
        role_of_turn: Line = "user"
        previous = None
        for i, raw in enumerate(messages):
            m = as_mapping(raw)
            role = m.get("role") if m is not None else None
            role = "assistant" if role == "assistant" else "user"
            if role == "assistant" and previous != "assistant" and i > 0:
                turns.append(_turn(role_of_turn, current, calls, answers, has_user_text))
                current, calls, answers, has_user_text = [], [], [], False
            if not starts or (role == "assistant" and previous != "assistant"):
                starts.append(i)
                role_of_turn = "assistant" if role == "assistant" else "user"
            previous = role
            frame = rule.message if (i > 0 or rule.first_message is None) else rule.first_message
            current.append(Part("user" if role == "user" else "assistant", frame))
            if m is None:
                ctx.problems.append(f"messages[{i}]: must be an object, got {type(raw).__name__}")
                continue
            content = m.get("content")
            if isinstance(content, str):
                current.append(Part("user" if role == "user" else "assistant", self.text(content)))
                has_user_text = has_user_text or role == "user"
                continue
            for raw_block in content if isinstance(content, ARRAY) else ():
                part, opened, answered = self.block(raw_block, role, i < last_user)
                if part is None:
                    continue
                current.append(part)
                if opened is not None:
                    calls.append(opened)
                if answered is not None:
                    answers.append(answered)
                elif role == "user":
                    has_user_text = True
        if starts:
            turns.append(_turn(role_of_turn, current, calls, answers, has_user_text))
        blocks: tuple[Block, ...] = ()
        system = converse.system_text(body.get("system"))
        if system:
            text = "\n\n".join(b["text"] for b in system)
            blocks = (Block("system_prompt", text, self.text(text) + rule.system),)
        # A structured output (``outputConfig``) is enforced by decoding, not by a prompt: the
        # bills of these families show no schema text.
        tool_schema = self.tools(body.get("toolConfig"))
        vendor_tools = body.get("tools")
        if not tool_schema and isinstance(vendor_tools, ARRAY) and vendor_tools:
            # A vendor body's own tool list (Mistral's chat format on InvokeModel): its JSON.
            tool_schema = self.rule.tool_prompt + self.text(_json_text(list(vendor_tools)))
        priming = rule.request
        if rule.reasoning_off and not _reasoning_on(body):
            priming += rule.reasoning_off
        model = RequestModel(
            turns=turns,
            starts=starts,
            items=len(messages),
            replies=count_replies(list(raw_messages)),
            tool_schema=tool_schema,
            priming=priming,
            blocks=blocks,
            system_in_turns=False,
            capped=len(self.state.replaced),
            schema_inexact=tool_schema,
            unknowns=tuple(ctx.unknowns),
        )
        return Reading(model=model, body=body, items=raw_messages, state=self.state)

    def tools(self, config: Any) -> int:
        """The tool definitions as the template renders them: each ``toolSpec``'s JSON and the
        family's tool-use prompt."""
        cfg = as_mapping(config)
        tools = cfg.get("tools") if cfg is not None else None
        if not isinstance(tools, ARRAY):
            return 0
        n = 0
        specs = 0
        for raw in tools:
            t = as_mapping(raw) or {}
            spec = as_mapping(t.get("toolSpec"))
            if spec is None:
                if "systemTool" in t:
                    self.ctx.unknown("server tool")
                continue
            specs += 1
            n += self.rule.tool + self.text(_json_text(dict(spec)))
        return n + self.rule.tool_prompt if specs else 0

    def prompt(self, body: Mapping[str, Any], kind: str) -> Reading:
        """A body of one prompt (templated by the caller), Cohere's chat, or a shape this version
        does not know (its JSON, erring high)."""
        rule = self.rule
        parts: list[Part] = []
        if kind == "prompt":
            value = body.get("prompt")
            if not isinstance(value, str):
                value = body.get("inputText")
            text = value if isinstance(value, str) else ""
            # A templated prompt's special tokens (``<|start_header_id|>``, ``<s>``) are one
            # token each to the model, not the several their spelling is as text.
            specials = len(_SPECIAL.findall(text))
            plain = _SPECIAL.sub("", text) if specials else text
            parts.append(Part("user", rule.prompt + self.text(plain) + specials))
            items: list[Any] = [text]
        elif kind == "cohere":
            history = body.get("chat_history")
            for raw in history if isinstance(history, ARRAY) else ():
                m = as_mapping(raw) or {}
                message = m.get("message")
                parts.append(
                    Part("user", rule.message + (self.text(message) if isinstance(message, str) else 0))
                )
            preamble = body.get("preamble")
            if isinstance(preamble, str):
                parts.append(Part("system", rule.message + self.text(preamble)))
            parts.append(Part("user", rule.message + self.text(str(body.get("message", "")))))
            items = [body.get("message")]
        else:
            if not any(k != "model" for k in body):
                # Nothing to read (an InvokeModel body handed over as a stream, which an observer
                # must not consume): the provider refuses an empty body too.
                raise InvalidRequestError("request", "holds no request body")
            parts.append(Part("other", self.text(_json_text(dict(body))), exact=False))
            items = [body]
        model = RequestModel(
            turns=[Turn("user", parts, 0, has_user_text=True)],
            starts=[0],
            items=1,
            priming=rule.request if kind == "cohere" else 0,
            unknowns=tuple(self.ctx.unknowns),
        )
        return Reading(model=model, body=body, items=items, state=self.state)


#: This dialect reads Claude through another: the registry builds it on that provider's adapter.
BUILT_ON = "anthropic"


def build(anthropic: Adapter) -> BedrockAdapter:
    """The Bedrock dialect, reading Claude through ``anthropic`` (the Anthropic adapter)."""
    return BedrockAdapter(anthropic)
