"""OpenAI Responses API: ``instructions`` and ``input`` read into the engine's model.

``input`` is a string (one user message) or a list of items: messages with
``input_text``/``input_image``/``input_file`` parts (and a previous answer's
``output_text``/``refusal``), ``function_call``, ``function_call_output``,
``reasoning``; any other item is counted as its JSON text, which errs high. Items may
be dicts or the SDK's own objects (an agent loop that does ``input += resp.output``).

An assistant's consecutive items (reasoning, text, function calls) are one turn, and
the outputs answering them the next: a reasoning item goes with the calls it led to,
which the API requires, and compaction drops a call with its outputs. Counting uses
the Chat Completions accounting, which the Responses API shares for text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from otel_ctx.adapters._base import (
    ARRAY,
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
    cap_text,
    cut_key,
    json_object,
    kept_items,
    rule,
    string_field,
    to_json,
)
from otel_ctx.adapters._media import (
    audio_tokens,
    image_size,
    openai_file_bound,
    openai_file_tokens,
    openai_image_tokens,
)
from otel_ctx.adapters._openai_tools import (
    add_forced_function,
    add_output_schema,
    call_overhead,
    count_functions,
    is_reasoning_model,
    other_tool_tokens,
    responses_call_framing,
    section_framing,
    unconfirmed_tools,
)
from otel_ctx.engine._errors import (
    InvalidMessageError,
    InvalidRequestError,
    InvalidToolSchemaError,
    shown,
)
from otel_ctx.engine._model import Block, Component, Line, Part, RequestModel, Turn
from otel_ctx.engine._tokens import (
    REPLY_PRIMING,
    TOKENS_PER_MESSAGE,
    TokenCounter,
)
from otel_ctx.families._chat import note_untemplated

Item = dict[str, Any]
_ROLE_LINES: Mapping[str, Line] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
}
_TEXT_COMPONENT: Mapping[Line, Component] = {
    "system": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool_result",
}
#: The side of the conversation an item is on: assistant items group into one turn,
#: outputs into the next.
_ASSISTANT, _OUTPUT, _OWN = "assistant", "output", "own"


def _side(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    if kind is None or kind == "message":
        return _ASSISTANT if item.get("role") == "assistant" else _OWN
    if kind == "reasoning" or kind == "function_call":
        return _ASSISTANT
    if isinstance(kind, str):
        if kind.endswith("_output"):
            return _OUTPUT
        if kind.endswith("_call") and "call_id" in item:
            return _ASSISTANT
    return _OWN


@dataclass(slots=True)
class _State(State):
    input_was_string: bool = False


class _Reader:
    """Counts one request's items and checks the call/output pairing."""

    def __init__(self, counter: TokenCounter, ctx: ReadContext, state: _State) -> None:
        self.counter = counter
        self.ctx = ctx
        self.state = state
        self.declared: dict[str, int] = {}
        self.answered: dict[str, int] = {}
        self.role_cost = {r: TOKENS_PER_MESSAGE + counter.text(r) for r in (*_ROLE_LINES, "tool")}
        self.call_framing, self.grouped_call_framing = responses_call_framing(counter.model)
        if is_reasoning_model(counter.model):
            # The reasoning models read an earlier answer with its channel marked (measured).
            self.role_cost["assistant"] += REASONING_ANSWER_CHANNEL

    def call_tokens(self, name: str, args: str) -> int:
        """A function call with its framing: the function's name is read twice, in the call and
        in the header of the output that answers it (measured), so it is booked with the call.
        What a stored call costs more is its item's framing (see :func:`_group_turn`)."""
        text = self.counter.text
        return call_overhead(self.counter.model, 1) + self.call_framing + 2 * text(name) + text(args)

    def content(self, content: Any, line: Line, where: str, index: int) -> list[Part]:
        text = self.counter.text
        component = _TEXT_COMPONENT[line]
        if isinstance(content, str):
            return [Part(component, text(content))]
        if content is None:
            return []
        if not isinstance(content, ARRAY):
            raise InvalidMessageError(
                f"{where}.content",
                f"must be a string or a list of parts, got {type(content).__name__}",
                index=index,
            )
        out = []
        for k, raw in enumerate(content):
            here = f"{where}.content[{k}]"
            part = as_object(raw, here, index)
            kind = part.get("type")
            if kind in ("input_text", "output_text", "text", "refusal"):
                key = "refusal" if kind == "refusal" else "text"
                value = string_field(part, key, here, index)
                out.append(Part(component if kind != "refusal" else "assistant", text(value)))
            elif kind == "input_image":
                # Billed by pixel size and detail, by the model family's rule; a URL's or a
                # file id's size is unknown.
                url = part.get("image_url")
                size = image_size(url) if isinstance(url, str) and url.startswith("data:") else None
                cost = openai_image_tokens(self.counter.model, size, part.get("detail"))
                out.append(cost.part("image", self.ctx))
            elif kind == "input_audio":
                audio = as_mapping(part.get("input_audio"))
                data = audio.get("data") if audio is not None else None
                out.append(Part("other", audio_tokens(data) if isinstance(data, str) else 1, exact=False))
            elif kind == "input_file":
                # Billed by the document's extracted text (never its base64): the recorded bills
                # show no PDF page images here, unlike Chat Completions. A file by id or URL is unknown.
                data, name = part.get("file_data"), part.get("filename")
                if isinstance(data, str):
                    cost = openai_file_tokens(data, name, text, page_images=False)
                else:
                    cost = openai_file_bound(self.counter.model)
                out.append(cost.part("document", self.ctx))
            elif isinstance(kind, str):
                # Anything newer: its JSON text (errs high).
                out.append(Part("other", text(to_json(part, here, index, InvalidMessageError))))
            else:
                raise InvalidMessageError(f"{here}.type", "is missing or not a string", index=index)
        return out

    def item(self, item: Mapping[str, Any], where: str, i: int) -> ItemRead:
        """(line, parts, overhead, calls opened, calls answered) of one input item."""
        kind = item.get("type")
        if kind is None or kind == "message":
            return self._message(item, where, i)
        if kind == "function_call":
            return self._function_call(item, where, i)
        if kind == "reasoning":
            return self._reasoning(item)
        if isinstance(kind, str) and kind.endswith("_output"):
            return self._output(item, kind, where, i)
        if not isinstance(kind, str):
            raise InvalidMessageError(f"{where}.type", "is missing or not a string", index=i)
        return self._other(item, kind, where, i)

    def _message(self, item: Mapping[str, Any], where: str, i: int) -> ItemRead:
        """A message of any role: its content's parts and the role's framing."""
        role = item.get("role")
        line = _ROLE_LINES.get(role) if isinstance(role, str) else None
        if line is None:
            raise InvalidMessageError(
                f"{where}.role",
                f"unknown role {shown(role)}; expected one of {', '.join(_ROLE_LINES)}",
                index=i,
            )
        return line, self.content(item.get("content"), line, where, i), self.role_cost[str(role)], [], []

    def _function_call(self, item: Mapping[str, Any], where: str, i: int) -> ItemRead:
        """A call the model made: its id must be new."""
        ctx = self.ctx
        call_id, name, args = item.get("call_id"), item.get("name"), item.get("arguments", "")
        if not isinstance(call_id, str) or not isinstance(name, str) or not isinstance(args, str):
            raise InvalidMessageError(
                where, "a function_call needs 'call_id', 'name' and 'arguments' strings", index=i
            )
        if call_id in self.declared:
            rule(
                ctx,
                f"{where}.call_id",
                f"call id {shown(call_id)} is already used by input[{self.declared[call_id]}]",
                i,
            )
            opened: list[str] = []
        else:
            self.declared[call_id] = i
            opened = [call_id]
        # A call replayed with the id of the item the server stored is framed 3 tokens longer when
        # it was made alone; booked as the item's framing, which a parallel group's calls drop.
        stored = STORED_CALL_EXTRA if item.get("id") else 0
        return "assistant", [Part("tool_call", self.call_tokens(name, args), call_id)], stored, opened, []

    def _reasoning(self, item: Mapping[str, Any]) -> ItemRead:
        """A reasoning item: the text of its summary and content, a floor."""
        text = self.counter.text
        n = 0
        for entries in (item.get("summary") or [], item.get("content")):
            for entry in entries if isinstance(entries, ARRAY) else ():
                t = entry.get("text") if isinstance(entry, Mapping) else None
                n += text(t) if isinstance(t, str) else 0
        # What a reasoning item costs when replayed is the server's to say (its encrypted
        # content is opaque): the summary's text is a floor, and the bill a bound.
        self.ctx.unknown("reasoning item")
        return "assistant", [Part("reasoning", n, exact=False)], 0, [], []

    def _output(self, item: Mapping[str, Any], kind: str, where: str, i: int) -> ItemRead:
        """A call's output: it must answer a call made before, once; a function's is cut at the cap."""
        text = self.counter.text
        ctx = self.ctx
        call_id = item.get("call_id")
        if call_id is None and kind not in ("function_call_output", "custom_tool_call_output"):
            # A server tool's own output replayed (a tool search's, say): the API takes it
            # without a call id and bills what its server side made of it. Counted as its
            # JSON text, an estimate, and said to be a bound.
            self.ctx.unknown(f"server tool {kind.removesuffix('_output')}")
            shown_json = to_json(item, where, i, InvalidMessageError)
            return "assistant", [Part("other", text(shown_json), exact=False)], 0, [], []
        if not isinstance(call_id, str):
            raise InvalidMessageError(f"{where}.call_id", f"a {kind} needs a 'call_id' string", index=i)
        answers: list[str] = []
        if call_id in self.answered:
            rule(
                ctx,
                f"{where}.call_id",
                f"call {shown(call_id)} is already answered by input[{self.answered[call_id]}]",
                i,
            )
        elif call_id not in self.declared:
            rule(ctx, f"{where}.call_id", f"no earlier item declared call {shown(call_id)}", i)
        else:
            answers = [call_id]
        self.answered.setdefault(call_id, i)
        output = item.get("output")
        if kind == "function_call_output" and self.ctx.cap is not None:
            new = cap_text(output, self.ctx.cap, "input_text")
            if new is not None:
                self.state.replaced[i] = {**item, "output": new}
                output = new
        if isinstance(output, str):
            parts = [Part("tool_result", text(output), call_id, capped=i in self.state.replaced)]
        elif isinstance(output, ARRAY):
            parts = [Part("tool_result", p.tokens, call_id) for p in self.content(output, "tool", where, i)]
        else:
            rest = {k: v for k, v in item.items() if k not in ("type", "call_id", "id", "status")}
            parts = [Part("tool_result", text(to_json(rest, where, i, InvalidMessageError)), call_id)]
        return "tool", parts, self.role_cost["tool"], [], answers

    def _other(self, item: Mapping[str, Any], kind: str, where: str, i: int) -> ItemRead:
        """Any other item (web search calls, item references, custom tool calls...): its JSON text."""
        text = self.counter.text
        opened: list[str] = []
        call_id = item.get("call_id")
        if isinstance(call_id, str) and kind.endswith("_call") and call_id not in self.declared:
            self.declared[call_id] = i
            opened = [call_id]
        comp: Component = "tool_call" if opened else "other"
        own_line: Line = "assistant" if _side(item) == _ASSISTANT else "user"
        if not kind.startswith("custom_tool_call"):
            # A server tool's item (a web search call, a compaction, an item reference...): billed
            # by what the server holds, not by the body.
            self.ctx.unknown(f"item {kind}")
        part = Part(
            comp, text(to_json(item, where, i, InvalidMessageError)), call_id if opened else None, exact=False
        )
        return own_line, [part], 0, opened, []


class OpenAIResponsesAdapter(Adapter):
    """Responses API request bodies (``client.responses.create(**body)``)."""

    provider = "openai-responses"
    exact = True

    def claims(self, body: Mapping[str, Any]) -> bool | None:
        if "messages" in body:
            return False
        return "input" in body or "instructions" in body

    def to_model(self, body: Any, ctx: ReadContext) -> Reading:
        body = json_object(body)
        if "messages" in body and "input" not in body:
            raise InvalidRequestError(
                "input",
                "an OpenAI Responses request has 'input'; this body has 'messages' "
                "(Chat Completions or Anthropic Messages)",
            )
        counter = ctx.counter
        # An open-weight model's host renders its own chat template, which Responses counting
        # does not reproduce: the count is a bound.
        note_untemplated(counter, ctx.unknown)
        items, state = _input_items(body.get("input"))
        turns, starts, replies = self._turns(items, _Reader(counter, ctx, state), ctx)

        model = RequestModel(
            turns=turns,
            starts=starts,
            items=len(items),
            replies=replies,
            # The reasoning models prime the reply with one token less (measured on their bills).
            priming=REPLY_PRIMING - 1 if is_reasoning_model(counter.model) else REPLY_PRIMING,
            system_in_turns=bool(turns) and turns[0].role == "system",
            capped=len(state.replaced),
        )
        instructions = body.get("instructions")
        if instructions is not None:
            if not isinstance(instructions, str):
                raise InvalidRequestError(
                    "instructions", f"must be a string, got {type(instructions).__name__}"
                )
            model.blocks = (self.block("system_prompt", instructions, counter),)
            if not instructions.strip():
                # An empty instructions string is not the same as none: every bill of one is
                # higher than its body, by tens of tokens and by hundreds with tools (measured), so
                # the API writes text of its own the body does not show; the count is a bound.
                ctx.unknown("empty instructions")
        has_system = instructions is not None or "system" in map(attrgetter("role"), turns)
        self._tools(model, body.get("tools"), has_system, counter, ctx.unknowns)
        for key, reason in _SERVER_STATE:
            value = body.get(key)
            if value and value != "disabled":
                ctx.unknown(reason)
        reasoning = body.get("reasoning")
        if isinstance(reasoning, Mapping) and reasoning.get("mode"):
            ctx.unknown("reasoning mode")
        add_forced_function(model, body.get("tool_choice"), counter, responses=True, tools=body.get("tools"))
        text_config = body.get("text")
        if isinstance(text_config, Mapping):
            add_output_schema(model, text_config.get("format"), counter, responses=True)
        model.unknowns = tuple(ctx.unknowns)  # images and files the body only names
        return Reading(model=model, body=body, items=items, state=state)

    def _turns(
        self, items: Sequence[Any], reader: _Reader, ctx: ReadContext
    ) -> tuple[list[Turn], list[int], int]:
        """The turns of ``items``, where each starts, and the model's answers in them: an
        assistant's consecutive items are one turn, the outputs answering them the next; every
        call must be answered before the next item of another side. The leading run read last
        round is served by the memo."""
        turns: list[Turn] = []
        starts: list[int] = []
        group: list[ItemRead] = []
        group_side = ""
        pending: dict[str, int] = {}
        state = reader.state
        memo = PrefixRound(reader.counter, "responses-memo", items, cut_key(ctx), lambda: Prefix(2))
        reader.declared, reader.answered = memo.ids()
        reads = memo.reads
        item: Mapping[str, Any] = {}
        for i, raw in enumerate(items):
            # An item the memo serves equals its copy: its side and read are the memo's.
            if i < memo.start:
                side, read = reads[i]
            else:
                found = as_object(raw, f"input[{i}]", i)
                item = found
                side = _side(item)
            if side != group_side or side == _OWN:
                if group:
                    turns.append(_group_turn(group, group_side, reader.grouped_call_framing))
                    group = []
                if side != _OUTPUT:
                    self._unanswered(pending, i, ctx)
                    pending = {}
                group_side = side
                starts.append(i)
            if i >= memo.start:
                problems, unknowns = len(ctx.problems), len(ctx.unknowns)
                read = reader.item(item, f"input[{i}]", i)
                reads.append((side, read))
                if memo.boundary < 0:
                    clean = len(ctx.problems) == problems and len(ctx.unknowns) == unknowns
                    memo.add(i, raw, clean and i not in state.replaced)
            for c in read[3]:
                pending[c] = i
            for a in read[4]:
                pending.pop(a, None)
            group.append(read)
        if group:
            turns.append(_group_turn(group, group_side, reader.grouped_call_framing))
        memo.keep(reader.counter, (reader.declared, reader.answered))
        self._unanswered(pending, len(items), ctx)
        return turns, starts, memo.replies

    @staticmethod
    def _unanswered(pending: dict[str, int], before: int, ctx: ReadContext) -> None:
        for call_id, at in pending.items():
            rule(
                ctx,
                f"input[{at}].call_id",
                f"function call {shown(call_id)} is never answered by a function_call_output "
                f"(before input[{before}])",
                at,
            )

    @staticmethod
    def _tools(
        model: RequestModel, tools: Any, has_system: bool, counter: TokenCounter, unknown: list[str]
    ) -> None:
        """The tool section's tokens on ``model``: function tools rendered as the model reads them,
        built-in tools (web search, file search, MCP...) their JSON text, an estimate."""
        if not tools:
            return
        if not isinstance(tools, Sequence) or isinstance(tools, (str, bytes)):
            raise InvalidToolSchemaError(
                "tools", f"must be a list of tool objects, got {type(tools).__name__}"
            )
        functions: list[Any] = []
        other = 0
        for k, raw in enumerate(tools):
            tool = as_mapping(raw)
            if tool is None:
                raise InvalidToolSchemaError(f"tools[{k}]", f"must be an object, got {type(raw).__name__}")
            if tool.get("type") == "function":
                fn = {
                    key: tool[key]
                    for key in ("name", "description", "parameters")
                    if tool.get(key) is not None
                }
                functions.append({"type": "function", "function": fn})
            elif tool.get("type") == "custom":  # its definition is all the body says: an estimate
                other += other_tool_tokens(counter, tool, f"tools[{k}]")
            else:  # built-in tools (web search, file search, MCP...): their JSON text, a bound
                other += counter.text(to_json(tool, f"tools[{k}]", None, InvalidToolSchemaError))
                reason = f"server tool {tool.get('type')}"
                if reason not in unknown:
                    unknown.append(reason)
        n = 0
        if functions:
            try:
                section = count_functions(counter, functions, lone_titles=True)
            except InvalidToolSchemaError as exc:
                # The counter names the wrapped shape; name the caller's flat tool instead.
                raise InvalidToolSchemaError(exc.where.replace(".function", ""), exc.problem) from None
            framing = section_framing(
                counter.model, counter.resolved.name, has_system, section, responses=True
            )
            # An estimate, as in Chat Completions: most bills to the token, not all of them.
            n = max(0, section.tokens + framing)
        model.tool_schema += n + other
        model.schema_inexact += unconfirmed_tools(n, other)

    def from_model(self, reading: Reading, fitted: Fitted) -> tuple[Any, list[Any]]:
        state: _State = reading.state
        out = kept_items(reading, fitted, state.replaced)
        if fitted.summary is not None:
            out.insert(fitted.summary_at, fitted.summary)
        body = dict(reading.body)
        prefix = [self.block_message(b) for b in fitted.blocks]
        unchanged = len(out) == len(reading.items) and not state.replaced and fitted.summary is None
        if state.input_was_string and unchanged and not prefix:
            return body, out  # input stays the caller's string
        body["input"] = prefix + out
        return body, out

    @staticmethod
    def block_message(block: Block) -> Item:
        return {"role": "system", "content": block.text}

    def block(self, kind: str, text: str, counter: TokenCounter) -> Block:
        return Block(kind, text, TOKENS_PER_MESSAGE + counter.text("system") + counter.text(text))  # type: ignore[arg-type]

    def summary(self, produced: Any, counter: TokenCounter) -> tuple[Any, Turn]:
        if isinstance(produced, str):
            item: Item = {"role": "system", "content": SUMMARY_PREFIX + produced}
        else:
            m = as_mapping(produced)
            role = m.get("role") if m is not None else None
            if m is None or not isinstance(role, str) or role not in _ROLE_LINES:
                raise InvalidRequestError("summarizer", "must return a message item or a string")
            item = dict(m)
        role = str(item["role"])
        line = _ROLE_LINES[role]
        parts = _Reader(counter, ReadContext(counter), _State()).content(
            item.get("content"), line, "summary", -1
        )
        return item, Turn(line, parts, TOKENS_PER_MESSAGE + counter.text(role))


ADAPTER = OpenAIResponsesAdapter()


ItemRead = tuple[Line, list[Part], int, list[str], list[str]]
#: Request fields whose bill depends on what the server holds: the count is then of the body only.
_SERVER_STATE = (
    ("previous_response_id", "stored response"),
    ("conversation", "stored conversation"),
    ("context_management", "server context management"),
    ("truncation", "server truncation"),
)
#: What the reasoning models add to an earlier answer of theirs: its channel (measured).
REASONING_ANSWER_CHANNEL = 2
#: A function call replayed with the ``id`` of the stored output item it came from costs three
#: tokens more than one without (measured on calls of several agents; identical bodies but for the
#: ids were billed with and without them, so the server's stored item, not the body, has the last
#: word). The calls of a parallel group cost what unstored ones do, stored or not (measured on
#: gpt-4o: every bill of a stored group, two recording dates, is the unstored count).
STORED_CALL_EXTRA = 3


def _input_items(raw_input: Any) -> tuple[Sequence[Any], _State]:
    """``input`` as a list of items (a string is one user message), and the read's state."""
    state = _State(input_was_string=isinstance(raw_input, str))
    if raw_input is None:
        return [], state
    if isinstance(raw_input, str):
        return [{"role": "user", "content": raw_input}], state
    if isinstance(raw_input, Sequence) and not isinstance(raw_input, bytes):
        return raw_input, state
    raise InvalidRequestError("input", f"must be a string or a list of items, got {type(raw_input).__name__}")


def _is_call(read: ItemRead) -> bool:
    """``read`` is a function call's (its one part a tool call, its framing the stored extra)."""
    parts = read[1]
    return read[0] == "assistant" and len(parts) == 1 and parts[0].component == "tool_call"


def _group_turn(group: list[ItemRead], side: str, grouped_call: int = 0) -> Turn:
    """The turn of one side's consecutive items (``grouped_call``: what each call of a parallel
    group costs more, by the model family's row)."""
    role: Line = "assistant" if side == _ASSISTANT else ("tool" if side == _OUTPUT else group[0][0])
    parts = [p for g in group for p in g[1]]
    calls = tuple(c for g in group for c in g[3])
    answers = tuple(a for g in group for a in g[4])
    overhead = sum(g[2] for g in group)
    if len(calls) > 1:
        # A parallel group: its stored calls cost what unstored ones do (the stored extra is the
        # framing of a call the model made alone; measured on gpt-4o's bills of stored groups),
        # and each call what the model family's row adds in a group.
        overhead -= sum(g[2] for g in group if _is_call(g))
        overhead += grouped_call * len(calls)
    has_user = any(g[0] == "user" and any(p.component == "user" for p in g[1]) for g in group)
    return Turn(role, parts, overhead, calls=calls, answers=answers, has_user_text=has_user)
