"""Google Gen AI (Gemini): a ``generate_content`` request read into the engine's model, and back.

``contents`` is a list of contents whose ``role`` is ``user`` or ``model`` and whose ``parts``
hold ``text`` (``thought`` marks reasoning), ``function_call``, ``function_response``,
``inline_data``, ``file_data``, ``executable_code`` or ``code_execution_result``; a bare string
or part is one user content, as the SDK makes it. ``config`` (a dict or the SDK's
``GenerateContentConfig``) carries ``system_instruction``, ``tools`` and ``max_output_tokens``;
the REST shape (those at the top level, camelCase keys) is read too. Contents and parts may be
the SDK's pydantic objects (``response.candidates[0].content`` appended as is).

A turn is an *exchange*, the model's contents with the user contents after them, since a call
is answered in the next user content: dropping one never separates a call from its answer.

Text is counted with Gemini's own vocabulary (Gemma 3's, the ``gemini`` extra) and the framing
its bills show (:mod:`otel_ctx.adapters._gemini_rules`); media at Google's documented rates
(:mod:`otel_ctx.adapters._gemini_media`). Text and system instructions on Gemini 2.5 and 3.x are
counted exactly; tool declarations, calls, media and Gemini 2.0 are flagged estimates, and what
the server adds unseen (thought signatures, cached content, server tools, files by URI) makes the
count a bound. Vertex bills no per-content token and only tools' names: a Vertex route or path
as the model, or a Vertex-only field (``labels``), says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from otel_ctx import _families as families
from otel_ctx.adapters import _gemini_media as media
from otel_ctx.adapters import _gemini_rules as rules
from otel_ctx.adapters._base import (
    SUMMARY_PREFIX,
    Adapter,
    Fitted,
    ReadContext,
    Reading,
    State,
    as_mapping,
    as_object,
    count_replies,
    json_object,
    kept_items,
    rule,
    string_field,
    to_json,
)
from otel_ctx.engine._errors import (
    InvalidMessageError,
    InvalidRequestError,
    InvalidToolSchemaError,
    shown,
)
from otel_ctx.engine._model import Block, Component, Line, Part, RequestModel, Turn
from otel_ctx.engine._tokens import TokenCounter

#: A file by URI or of a kind whose length cannot be read offline: Gemini 3's image figure,
#: flagged a bound (the server reads the file; the body does not show it).
UNKNOWN_MEDIA_TOKENS = media.GEMINI3_IMAGE
#: A Python function the SDK declares from its signature: its name and docstring and this.
TOKENS_PER_TOOL = 8
#: Built-in (server) tools: their results are billed from what the server does, not the body.
_SERVER_TOOLS = frozenset(
    {
        "google_search",
        "googleSearch",
        "google_search_retrieval",
        "googleSearchRetrieval",
        "code_execution",
        "codeExecution",
        "file_search",
        "fileSearch",
        "url_context",
        "urlContext",
        "retrieval",
        "google_maps",
        "googleMaps",
        "enterprise_web_search",
        "enterpriseWebSearch",
        "computer_use",
        "computerUse",
    }
)


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(w.title() for w in rest)


#: Keys a function response's result conventionally sits under (the SDK's automatic
#: function calling answers ``{"result": ...}``; the API docs use ``output``/``error``).
_RESULT_KEYS = ("output", "result")
#: A part's kind: the snake_case key (the SDK's) and the camelCase one (REST).
_KINDS = ("text", "function_call", "function_response", "inline_data", "file_data", "executable_code")
_PART_KEYS = {key: kind for kind in (*_KINDS, "code_execution_result") for key in (kind, _camel(kind))}
#: Part fields that are not billed content.
_METADATA = frozenset(
    {
        "thought",
        "thought_signature",
        "thoughtSignature",
        "video_metadata",
        "videoMetadata",
        "media_resolution",
    }
)


def _get(m: Mapping[str, Any], snake: str, camel: str) -> Any:
    value = m.get(snake)
    return m.get(camel) if value is None else value


def _jsonable(raw: Any) -> Any:
    """An SDK object as plain JSON values (enums as their names); mappings and the rest as they are."""
    dump = getattr(raw, "model_dump", None)
    if callable(dump) and not isinstance(raw, Mapping):
        try:
            return dump(mode="json", exclude_none=True)
        except Exception:
            return raw
    return raw


def _config(body: Mapping[str, Any]) -> Mapping[str, Any]:
    config = body.get("config")
    if config is None:
        return {}
    found = as_mapping(config)
    if found is None:
        raise InvalidRequestError("config", f"must be an object, got {type(config).__name__}")
    return found


def _setting(body: Mapping[str, Any], snake: str, camel: str) -> tuple[Any, str]:
    """A setting from ``config`` (the SDK call) or the top level (the REST body), and where it was."""
    config = _config(body)
    value = _get(config, snake, camel)
    if value is not None:
        return value, f"config.{snake}"
    return _get(body, snake, camel), snake


def requested_output(body: Mapping[str, Any]) -> int | None:
    """The request's own ``max_output_tokens`` (the SDK's config or REST ``generationConfig``)."""
    try:
        value = _get(_config(body), "max_output_tokens", "maxOutputTokens")
        if value is None:
            generation = as_mapping(_get(body, "generation_config", "generationConfig") or {})
            value = _get(generation, "max_output_tokens", "maxOutputTokens") if generation else None
    except InvalidRequestError:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass(slots=True)
class _State(State):
    #: ``contents`` was one string or content, not a list: written back as it came when kept.
    single: bool = False


class _Reader:
    """Reads one request's contents: parts counted, pairing rules checked, results capped."""

    def __init__(self, ctx: ReadContext, state: _State, vertex: bool, framing_exact: bool) -> None:
        self.ctx = ctx
        self.state = state
        self.text = ctx.counter.text
        model = self.model = ctx.counter.model
        self.legacy = rules.is_legacy(model)
        self.third = rules.is_third(model)
        self.render = rules.Renderer(self.text)
        self.vertex = vertex
        self.framing = 0 if (vertex or self.legacy) else rules.TOKENS_PER_CONTENT
        self.framing_exact = framing_exact
        #: Text is the bill's only with Gemini's own vocabulary (not an encoding the caller chose),
        #: and on Gemini 2.0 and 1.5 Gemma's pieces bill within a few tokens, not to the token.
        family = families.family_for(model)
        own = family is not None and family.tokenizer == ctx.counter.resolved.name
        self.text_exact = own and not self.legacy
        self.unknowns: list[str] = []
        #: The request's media resolution (a part may set its own on Gemini 3).
        self.resolution: str | None = None

    def opening(self, role: Component) -> Part:
        """A content's own framing."""
        return Part(role, self.framing, exact=self.framing_exact)

    def said(self, component: Component, text: str) -> Part:
        return Part(component, self.text(text), exact=self.text_exact)

    def media(self, data: Mapping[str, Any], where: str, index: int, level: str | None = None) -> Part:
        mime = _get(data, "mime_type", "mimeType")
        if not isinstance(mime, str):
            raise InvalidMessageError(f"{where}.mime_type", "must be a MIME type string", index=index)
        mime = mime.lower()
        raw = data.get("data")
        if mime.startswith("text/") or mime in ("application/json", "application/xml"):
            text = (
                raw.decode("utf-8", "replace")
                if isinstance(raw, (bytes, bytearray))
                else media._bytes(raw).decode("utf-8", "replace")
            )
            return Part("document", self.text(text), exact=False)
        level = level or self.resolution
        if mime.startswith("image/"):
            cost = media.image_tokens(raw, self.third, level)
            return Part("image", cost.tokens, exact=False)
        if mime == "application/pdf":
            cost = media.pdf_tokens(raw, self.third, level)
        elif mime.startswith("audio/"):
            cost = media.audio_tokens(raw)
        elif mime.startswith("video/"):
            cost = media.video_tokens(raw, self.third, level)
        else:
            cost = media.MediaCost(UNKNOWN_MEDIA_TOKENS, False)
        return Part("document", cost.tokens, exact=False)

    def part(self, raw: Any, role: str, where: str, index: int) -> tuple[Part, str, Any]:
        """``(part, kind, capped part or None)`` of one part."""
        said: Component = "user" if role == "user" else "assistant"
        if isinstance(raw, str):
            return self.said(said, raw), "text", None
        p = as_object(raw, where, index, "a part object")
        if _get(p, "thought_signature", "thoughtSignature") is not None:
            # Earlier turns' hidden thinking, restored and billed server-side: not in the body.
            self.unknowns.append("thought signature")
        kind = next((_PART_KEYS[k] for k in p if k in _PART_KEYS and p[k] is not None), None)
        if kind == "text":
            value = string_field(p, "text", where, index)
            return self.said("reasoning" if p.get("thought") else said, value), kind, None
        if kind == "function_call":
            call = as_mapping(_get(p, "function_call", "functionCall"))
            name = call.get("name") if call is not None else None
            if call is None or not isinstance(name, str):
                raise InvalidMessageError(f"{where}.function_call", "needs a 'name' string", index=index)
            # Checked serialisable here (a typed error naming it), then counted as Gemini renders it.
            to_json(call.get("args") or {}, f"{where}.function_call.args", index, InvalidMessageError)
            call_id = call.get("id")
            key = call_id if isinstance(call_id, str) and call_id else name
            tokens = self.render.call(
                "call", name, _jsonable(call.get("args") or {}), self.model, self.vertex
            )
            return Part("tool_call", tokens, key, exact=False), kind, None
        if kind == "function_response":
            return self.function_response(p, where, index)
        if kind in ("inline_data", "file_data"):
            data = as_mapping(_get(p, kind, _camel(kind)))
            if data is None:
                raise InvalidMessageError(f"{where}.{kind}", "must be an object", index=index)
            if kind == "file_data":
                self.unknowns.append("file by URI")
                return Part("document", UNKNOWN_MEDIA_TOKENS, exact=False), kind, None
            level = media.resolution(_get(p, "media_resolution", "mediaResolution"))
            return self.media(data, f"{where}.{kind}", index, level), kind, None
        if kind is None and not any(k not in _METADATA for k in p):
            raise InvalidMessageError(
                where, "a part needs text, a function call or response, or data", index=index
            )
        # Code and its result, or a part this version does not know: its JSON text (errs high).
        shown_part = {k: v for k, v in p.items() if k not in _METADATA}
        body = to_json(_jsonable(shown_part), where, index, InvalidMessageError)
        component: Component = "tool_result" if kind == "code_execution_result" else "other"
        return Part(component, self.text(body), exact=False), str(kind), None

    def function_response(self, p: Mapping[str, Any], where: str, index: int) -> tuple[Part, str, Any]:
        resp = as_mapping(_get(p, "function_response", "functionResponse"))
        name = resp.get("name") if resp is not None else None
        if resp is None or not isinstance(name, str):
            raise InvalidMessageError(f"{where}.function_response", "needs a 'name' string", index=index)
        call_id = resp.get("id")
        key = call_id if isinstance(call_id, str) and call_id else name
        result = resp.get("response")
        new_part: Any = None
        cap = self.ctx.cap
        result_map = as_mapping(result) if result is not None else None
        if cap is not None and result_map is not None:
            for k in _RESULT_KEYS:
                value = result_map.get(k)
                if isinstance(value, str):
                    cut = cap(value)
                    if cut is not value:
                        result = {**result_map, k: cut}
                        field = "function_response" if "function_response" in p else "functionResponse"
                        new_part = {**p, field: {**resp, "response": result}}
                    break
        shown_result = _jsonable(result) if result is not None else {}
        to_json(shown_result, f"{where}.function_response.response", index, InvalidMessageError)
        tokens = self.render.call("response", name, shown_result, self.model, self.vertex)
        inner = resp.get("parts")
        if isinstance(inner, (list, tuple)):  # a multimodal response: its own media parts
            for j, raw_part in enumerate(inner):
                part, _, _ = self.part(raw_part, "user", f"{where}.function_response.parts[{j}]", index)
                tokens += part.tokens
        return (
            Part("tool_result", tokens, key, capped=new_part is not None, exact=False),
            "function_response",
            new_part,
        )

    def content(self, raw: Any, i: int) -> tuple[str, list[Part], list[str], list[str]]:
        """``(role, parts, call keys, answered keys)`` of one content."""
        where = f"contents[{i}]"
        if isinstance(raw, str):
            return "user", [self.opening("user"), self.said("user", raw)], [], []
        m = as_object(raw, where, i, "a content object")
        if "parts" not in m and "role" not in m:  # a bare part: the SDK sends it as (part of) a user content
            part, _, _ = self.part(raw, "user", where, i)
            return "user", [self.opening("user"), part], [], []
        role = m.get("role") or "user"
        if role not in ("user", "model", "function", "tool"):
            raise InvalidMessageError(
                f"{where}.role", f"unknown role {shown(role)}; expected user or model", index=i
            )
        line = "model" if role == "model" else "user"
        parts = [self.opening("user" if line == "user" else "assistant")]
        raw_parts = m.get("parts")
        if raw_parts is None:
            raw_parts = []
        if not isinstance(raw_parts, (list, tuple)):
            raise InvalidMessageError(
                f"{where}.parts", f"must be a list of parts, got {type(raw_parts).__name__}", index=i
            )
        if not raw_parts:
            rule(self.ctx, f"{where}.parts", "is empty", i)
        calls: list[str] = []
        answers: list[str] = []
        new_parts: list[Any] | None = None
        for k, raw_part in enumerate(raw_parts):
            here = f"{where}.parts[{k}]"
            part, kind, capped = self.part(raw_part, line, here, i)
            if kind == "function_call":
                if line != "model":
                    rule(self.ctx, here, "only the model makes function calls", i)
                assert part.call_id is not None
                calls.append(part.call_id)
            elif kind == "function_response":
                if line != "user":
                    rule(self.ctx, here, "a function response belongs in a user content", i)
                assert part.call_id is not None
                answers.append(part.call_id)
            if capped is not None:
                if new_parts is None:
                    new_parts = list(raw_parts)
                new_parts[k] = capped
            parts.append(part)
        if new_parts is not None:
            self.state.replaced[i] = {**m, "parts": new_parts}
        return line, parts, calls, answers


def _instruction_texts(raw: Any, where: str) -> list[str]:
    """The system instruction's text parts: a string, a content of text parts, or a list of them.
    Gemini tokenizes each part on its own (no separator is billed between parts)."""
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, (list, tuple)):
        return [t for k, x in enumerate(raw) for t in _instruction_texts(x, f"{where}[{k}]")]
    m = as_mapping(raw)
    if m is None:
        raise InvalidRequestError(
            where, f"must be a string or a content of text parts, got {type(raw).__name__}"
        )
    if "parts" in m:
        return _instruction_texts(m.get("parts") or [], f"{where}.parts")
    text = m.get("text")
    if not isinstance(text, str):
        raise InvalidRequestError(where, "must be a text part {'text': ...}")
    return [text]


class GoogleGenAIAdapter(Adapter):
    """Gemini ``generate_content`` requests (``client.models.generate_content(**body)``)."""

    provider = "google"
    #: Counts follow the provider's rule where the bills confirmed one (text and system
    #: instructions on Gemini 2.5 and 3.x, with Gemini's tokenizer installed); every other
    #: part is flagged an estimate part by part.
    exact = True

    def claims(self, body: Mapping[str, Any]) -> bool | None:
        # Only this API calls its transcript "contents".
        return "contents" in body

    def to_model(self, body: Any, ctx: ReadContext) -> Reading:
        body = json_object(body)
        contents = body.get("contents")
        if contents is None:
            raise InvalidRequestError("contents", "a generate_content request needs 'contents'")
        single = not isinstance(contents, (list, tuple))
        items: Sequence[Any] = [contents] if single else contents
        state = _State(single=single)
        model_name = ctx.counter.model
        vertex = rules.is_vertex(model_name, body)
        instruction, where = _setting(body, "system_instruction", "systemInstruction")
        # One token a content is the Gemini API's and not Vertex's, which a plain body does not
        # name: counted, but claimed exact only while it stays within the tolerance either way.
        framed = len(items) + (instruction is not None)
        reader = _Reader(ctx, state, vertex, framing_exact=vertex or framed <= 2)
        reader.resolution = media.resolution(_generation_setting(body, "media_resolution", "mediaResolution"))
        if not items:
            rule(ctx, "contents", "needs at least one content")
        read = [reader.content(raw, i) for i, raw in enumerate(items)]
        turns, starts = _exchanges(read, ctx)
        blocks: tuple[Block, ...] = ()
        if instruction is not None:
            texts = _instruction_texts(instruction, where)
            tokens = sum(ctx.counter.text(t) for t in texts) + reader.framing
            blocks = (Block("system_prompt", "\n".join(texts), tokens),)
        tools, tools_where = _setting(body, "tools", "tools")
        unknowns = reader.unknowns
        tool_schema = self.tools_tokens(tools, tools_where, ctx.counter, vertex=vertex, unknowns=unknowns)
        tool_schema += _response_schema_tokens(body, reader)
        if _setting(body, "cached_content", "cachedContent")[0]:
            unknowns.append("cached content")
        model = RequestModel(
            turns=turns,
            starts=starts,
            items=len(items),
            replies=count_replies(contents),
            tool_schema=tool_schema,
            priming=0,
            blocks=blocks,
            system_in_turns=False,
            capped=len(state.replaced),
            schema_inexact=tool_schema,
            unknowns=tuple(dict.fromkeys(unknowns)),
        )
        return Reading(model=model, body=body, items=items, state=state)

    @staticmethod
    def tools_tokens(
        tools: Any,
        where: str,
        counter: TokenCounter,
        *,
        vertex: bool = False,
        unknowns: list[str] | None = None,
    ) -> int:
        """Each function declaration as Gemini renders it; a built-in tool's JSON (a bound: the
        server bills what the tool does)."""
        if not tools:
            return 0
        if not isinstance(tools, (list, tuple)) and as_mapping(tools) is not None:
            tools = [tools]  # one tool object where a list is expected: the API reads it as one
        if not isinstance(tools, (list, tuple)):
            raise InvalidToolSchemaError(where, f"must be a list of tools, got {type(tools).__name__}")
        render = rules.Renderer(counter.text)
        model = counter.model
        n = 0
        for k, raw in enumerate(tools):
            here = f"{where}[{k}]"
            if callable(raw) and as_mapping(raw) is None:
                # A Python function the SDK declares from its signature: its name and docstring.
                name = getattr(raw, "__name__", "")
                n += (
                    TOKENS_PER_TOOL
                    + counter.text(str(name))
                    + counter.text(getattr(raw, "__doc__", None) or "")
                )
                continue
            tool = as_mapping(_jsonable(raw))
            if tool is None:
                raise InvalidToolSchemaError(here, f"must be a tool object, got {type(raw).__name__}")
            declarations = _get(tool, "function_declarations", "functionDeclarations")
            for key in tool:
                if key in _SERVER_TOOLS and unknowns is not None:
                    unknowns.append(f"server tool {key}")
            if declarations is None:
                n += TOKENS_PER_TOOL + counter.text(to_json(tool, here, None, InvalidToolSchemaError))
                continue
            if not isinstance(declarations, (list, tuple)):
                raise InvalidToolSchemaError(f"{here}.function_declarations", "must be a list")
            for j, raw_decl in enumerate(declarations):
                at = f"{here}.function_declarations[{j}]"
                decl = as_mapping(_jsonable(raw_decl))
                if decl is None or not isinstance(decl.get("name"), str):
                    raise InvalidToolSchemaError(at, "must be an object with a 'name' string")
                desc = decl.get("description") or ""
                if not isinstance(desc, str):
                    raise InvalidToolSchemaError(f"{at}.description", "must be a string")
                schema = None
                json_schema = False
                for key in ("parameters", "parameters_json_schema", "parametersJsonSchema"):
                    if decl.get(key) is not None:
                        schema, json_schema = decl[key], key != "parameters"
                        to_json(schema, f"{at}.{key}", None, InvalidToolSchemaError)
                        break
                if vertex:  # Vertex bills a declaration's name alone
                    n += counter.text(decl["name"])
                elif json_schema and rules.is_legacy(model):  # Gemini 2.0 bills no JSON Schema
                    n += render.declaration(decl["name"], desc, None, model)
                else:
                    n += render.declaration(decl["name"], desc, schema, model)
        return n

    def from_model(self, reading: Reading, fitted: Fitted) -> tuple[Any, list[Any]]:
        state: _State = reading.state
        out = kept_items(reading, fitted, state.replaced)
        body = dict(reading.body)
        if not (state.single and len(out) == 1 and out[0] is reading.items[0]):
            body["contents"] = out
        extra: list[Any] = [{"text": b.text} for b in fitted.blocks]
        if fitted.summary is not None:
            extra.append(fitted.summary)
        if extra:
            _, where = _setting(body, "system_instruction", "systemInstruction")
            # Added after the caller's own instruction parts, so a cached prefix stays a prefix.
            if where.startswith("config."):
                config = body["config"]
                own = _instruction_parts(
                    _get(as_mapping(config) or {}, "system_instruction", "systemInstruction")
                )
                merged = {"parts": [*own, *extra]}
                if isinstance(config, Mapping):
                    body["config"] = {**config, "system_instruction": merged}
                else:
                    body["config"] = config.model_copy(update={"system_instruction": merged})
            else:
                key = "systemInstruction" if "systemInstruction" in body else "system_instruction"
                own = _instruction_parts(body.get(key))
                body[key] = {"parts": [*own, *extra]}
        return body, out

    def block(self, kind: str, text: str, counter: TokenCounter) -> Block:
        return Block(kind, text, counter.text(text))  # type: ignore[arg-type]

    def summary(self, produced: Any, counter: TokenCounter) -> tuple[Any, Turn]:
        """A summary goes to the system instruction as a text part: among the contents it could
        part a function call from its response."""
        if isinstance(produced, str):
            item: dict[str, Any] = {"text": SUMMARY_PREFIX + produced}
        else:
            part = as_mapping(produced)
            if part is None or not isinstance(part.get("text"), str):
                raise InvalidRequestError(
                    "summarizer", "must return a string or a text part for Gemini's system instruction"
                )
            item = dict(part)
        return item, Turn("system", [Part("system", counter.text(item["text"]))], 0)


def _generation_setting(body: Mapping[str, Any], snake: str, camel: str) -> Any:
    """A generation setting: from the SDK's ``config`` or the REST body's ``generationConfig``."""
    value, _ = _setting(body, snake, camel)
    if value is None:
        generation = as_mapping(_get(body, "generation_config", "generationConfig") or {})
        value = _get(generation, snake, camel) if generation else None
    return value


def _response_schema_tokens(body: Mapping[str, Any], reader: _Reader) -> int:
    """A structured output's ``responseSchema``: Gemini 2.0 bills it with the request (as a
    declaration's parameters), later models do not; ``responseJsonSchema`` is not billed."""
    if not reader.legacy:
        return 0
    schema = _generation_setting(body, "response_schema", "responseSchema")
    if schema is None:
        return 0
    return reader.render.schema(_jsonable(schema))


def _instruction_parts(raw: Any) -> list[Any]:
    """The caller's system instruction as a list of parts (their own objects kept)."""
    if raw is None:
        return []
    if isinstance(raw, str):
        return [{"text": raw}]
    if isinstance(raw, (list, tuple)):
        return [{"text": x} if isinstance(x, str) else x for x in raw]
    m = as_mapping(raw)
    if m is not None and "parts" in m:
        parts = getattr(raw, "parts", None)
        return list(parts if parts is not None else m.get("parts") or [])
    return [raw]


def _exchanges(
    read: list[tuple[str, list[Part], list[str], list[str]]], ctx: ReadContext
) -> tuple[list[Turn], list[int]]:
    """The turns of the contents read, and where each starts: the model's contents and the user's
    that follow are one exchange, in which every function call must be answered by a function
    response of the next (user) content."""
    turns: list[Turn] = []
    starts: list[int] = []
    if read and read[0][0] != "user":
        rule(ctx, "contents[0].role", "the first content must be the user's", 0)
    i, n = 0, len(read)
    while i < n:
        start = i
        parts: list[Part] = []
        calls: list[str] = []
        answers: list[str] = []
        has_user_text = False
        while i < n and read[i][0] == "model":
            parts.extend(read[i][1])
            calls.extend(read[i][2])
            i += 1
        while i < n and read[i][0] == "user":
            _, uparts, _, answered = read[i]
            parts.extend(uparts)
            for key in answered:
                if key not in calls:
                    rule(
                        ctx,
                        f"contents[{i}].parts",
                        f"function response {shown(key)} answers no call of the model content "
                        "right before it",
                        i,
                    )
                else:
                    answers.append(key)
            has_user_text = has_user_text or any(p.component != "tool_result" for p in uparts[1:])
            i += 1
        missing = [c for c in calls if c not in answers]
        if missing:
            rule(
                ctx,
                f"contents[{start}].parts",
                f"function call {', '.join(repr(c) for c in missing)} never answered: each needs a "
                "function response in the next (user) content",
                start,
            )
        role: Line = "user" if read[start][0] == "user" else "assistant"
        # Calls are matched within their exchange, by id or (usually) by name: the exchange's
        # position makes them unique, so two exchanges calling one function stay two units.
        calls = [f"{start}:{c}" for c in calls]
        answers = [f"{start}:{a}" for a in answers]
        turns.append(
            Turn(role, parts, 0, calls=tuple(calls), answers=tuple(answers), has_user_text=has_user_text)
        )
        starts.append(start)
    return turns, starts


ADAPTER = GoogleGenAIAdapter()
