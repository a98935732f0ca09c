"""OpenAI Chat Completions: ``messages`` (dicts, TypedDict params or the SDK's pydantic
objects) read into the engine's model, and the fitted request written back.

Counting follows OpenAI's documented accounting: every message costs its text plus
three tokens of framing and its role, a name one more, the reply is primed with
three. Every field the provider bills is counted: content and its parts, names,
tool calls, the legacy ``function_call``, ``refusal``. A part type the accounting
does not cover is charged its JSON text, which errs high, the safe direction for a
budget.

The transcript rules the API enforces (a tool result answers a call of the assistant
message right before it, every call is answered, call ids are unique) are checked while
the messages are read, by :class:`~otel_ctx.adapters._chat_calls.ChatCalls`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
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
    cap_text,
    cut_key,
    json_object,
    kept_items,
    rule,
    string_field,
    text_parts,
    to_json,
)
from otel_ctx.adapters._chat_calls import LEGACY, ChatCalls
from otel_ctx.adapters._langchain_tools import is_langchain_tool, tool_dicts
from otel_ctx.adapters._media import (
    AUDIO_PART_FRAMING,
    audio_tokens,
    image_size,
    openai_file_bound,
    openai_file_tokens,
    openai_image_tokens,
)
from otel_ctx.adapters._openai_tools import (
    add_forced_function,
    add_output_schema,
    answer_channel,
    chat_call_tokens,
    count_functions,
    is_reasoning_model,
    parallel_results,
    section_framing,
    unconfirmed_tools,
)
from otel_ctx.engine._cache import BoundedCache
from otel_ctx.engine._errors import (
    InvalidMessageError,
    InvalidRequestError,
    shown,
)
from otel_ctx.engine._model import (
    NO_SUMS,
    NOTHING_KNOWN,
    Block,
    Component,
    Known,
    Line,
    Part,
    RequestModel,
    Sums,
    Turn,
    add_sums,
    split_units,
)
from otel_ctx.engine._tokens import (
    REPLY_PRIMING,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_NAME,
    TokenCounter,
)
from otel_ctx.families._chat import apply as apply_chat_template

Message = dict[str, Any]

#: Role -> the transcript line it is counted in (``developer`` is the newer name for
#: system; ``function`` is the legacy tool-result role).
ROLE_LINES: Mapping[str, Line] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",
}
_TEXT_COMPONENT: Mapping[str, Component] = {
    "system": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool_result",
}
#: Framing of the legacy ``function_call`` (the same wrapper a tool call has, less the id).
TOKENS_PER_FUNCTION_CALL = 3
#: The first reasoning models, which take no system or developer message, bill framing of their
#: own that no rule reproduces (measured: 8 tokens over the rules on a two-message request), so
#: their count is a bound.
FIRST_REASONING_MODELS = ("o1-mini", "o1-preview")
FIRST_REASONING_FRAMING = "the framing o1-mini and o1-preview add (not measured)"


@dataclass(slots=True)
class _State(State):
    """The items the fit rewrote, what the memo's leading run gives the fit to go on from, and
    the model's replies in the transcript."""

    known: Known = NOTHING_KNOWN
    replies: int = 0


class ChatReader:
    """Reads Chat Completions messages; shared by a fitter's rounds (its turn cache)."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.role_cost = {role: TOKENS_PER_MESSAGE + counter.text(role) for role in ROLE_LINES}
        # An assistant message that makes tool calls is framed as the calls are (see
        # :func:`chat_call_tokens`); an earlier answer of a harmony-format model is read with its
        # channel marked, as in the Responses API (see :func:`answer_channel`).
        self.call_cost = self.role_cost["assistant"]
        self.role_cost["assistant"] += answer_channel(counter.model)

        # A plain {"role", "content": str} message costs the same every round: its turn is
        # kept by content, one cache per role, so an already-seen message costs one lookup.
        def cache() -> BoundedCache[Turn]:
            return BoundedCache(
                max_entries=8_192, max_chars=counter.cache.max_chars, group=counter.cache.group
            )

        self.simple = {role: cache() for role in ROLE_LINES}
        # The shapes of a tool-calling transcript, kept by content like the plain messages: an
        # assistant message that only makes tool calls (keyed by its content and every call's id,
        # name and arguments) and a tool result (keyed by its text; the turn names its call id).
        # A message that changed has another key, so it is read again, never served stale.
        self.call_turns = cache()
        self.tool_turns = cache()

    # -- content -------------------------------------------------------------------------

    def content(
        self, content: Any, role: str, where: str, index: int, ctx: ReadContext | None = None
    ) -> list[Part]:
        """The parts of a message's ``content``: a string, ``None`` or a list of parts."""
        text_component = _TEXT_COMPONENT.get(role, "tool_result")
        if isinstance(content, str):
            return [Part(text_component, self.counter.text(str(content)))]
        if content is None:
            return []
        if not isinstance(content, ARRAY):
            raise InvalidMessageError(
                f"{where}.content",
                f"must be a string, a list of parts or null, got {type(content).__name__}",
                index=index,
            )
        return [
            self.part(p, text_component, f"{where}.content[{k}]", index, ctx) for k, p in enumerate(content)
        ]

    def part(
        self, raw: Any, text_component: Component, where: str, index: int, ctx: ReadContext | None = None
    ) -> Part:
        part = as_object(raw, where, index)
        kind = part.get("type")
        text = self.counter.text
        if kind == "text" or kind == "refusal":
            value = string_field(part, kind, where, index)
            return Part(text_component if kind == "text" else "assistant", text(value))
        if kind == "image_url":
            # Billed by pixel size and detail, by the model family's rule; a URL's size is unknown.
            image = as_mapping(part.get("image_url"))
            url = image.get("url") if image is not None else part.get("image_url")
            detail = image.get("detail") if image is not None else None
            size = image_size(url) if isinstance(url, str) and url.startswith("data:") else None
            cost = openai_image_tokens(self.counter.model, size, detail)
            return cost.part("image", ctx)
        if kind == "input_audio":
            audio = as_mapping(part.get("input_audio"))
            data = audio.get("data") if audio is not None else None
            if not isinstance(data, str):
                raise InvalidMessageError(f"{where}.input_audio.data", "must be a base64 string", index=index)
            return Part("other", audio_tokens(data) + AUDIO_PART_FRAMING, exact=False)
        if not isinstance(kind, str):
            raise InvalidMessageError(f"{where}.type", "is missing or not a string", index=index)
        if kind == "file":
            # Billed by the document (its pages' text and images), never by its base64 text.
            file = as_mapping(part.get("file"))
            data = file.get("file_data") if file is not None else None
            name = file.get("filename") if file is not None else None
            model = self.counter.model
            if isinstance(data, str):
                cost = openai_file_tokens(data, name, text, page_images=True, model=model)
                return cost.part("document", ctx)
            return openai_file_bound(model).part("document", ctx)
        # A part type the accounting does not know: charge its JSON text (errs high).
        return Part("other", text(to_json(part, where, index, InvalidMessageError)))

    def tool_calls(self, calls: Any, where: str, index: int) -> list[Part]:
        if not isinstance(calls, ARRAY):
            raise InvalidMessageError(
                f"{where}.tool_calls", f"must be a list, got {type(calls).__name__}", index=index
            )
        named: list[tuple[str, str, str]] = []
        for k, raw in enumerate(calls):
            here = f"{where}.tool_calls[{k}]"
            call = as_mapping(raw)
            kind = call.get("type", "function") if call is not None else None
            fn = call.get(kind) if call is not None and isinstance(kind, str) else None
            if call is None or not isinstance(fn, Mapping) or not isinstance(call.get("id"), str):
                raise InvalidMessageError(
                    here, "must be an object with an 'id' string and a 'function' object", index=index
                )
            payload = fn.get("arguments", "") if kind == "function" else fn.get("input", "")
            name = fn.get("name")
            if not isinstance(name, str) or not isinstance(payload, str):
                raise InvalidMessageError(
                    f"{here}.{kind}", "needs a 'name' string and an 'arguments' JSON string", index=index
                )
            named.append((call["id"], name, payload))
        tokens = chat_call_tokens(self.counter, [(name, payload) for _, name, payload in named])
        return [Part("tool_call", n, call_id) for (call_id, _, _), n in zip(named, tokens)]

    # -- messages ------------------------------------------------------------------------

    def read(
        self,
        messages: Sequence[Any],
        ctx: ReadContext,
        state: _State,
        where: str = "messages",
    ) -> tuple[list[Turn], range]:
        """One turn per message, with the API's transcript rules checked.

        The transcript read last round, up to the first message the fast paths did not take,
        is served by the memo (one C-level comparison with its copy), so the history already
        seen costs no Python work per message; the memo stops at a message that said a problem.
        """
        if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
            raise InvalidRequestError(
                where, f"must be a list of message objects, got {type(messages).__name__}"
            )
        memo = PrefixRound(self.counter, "openai-memo", messages, cut_key(ctx), _ChatPrefix)
        turns: list[Turn] = memo.reads
        (declared,) = memo.ids()
        calls = ChatCalls(declared)
        calls.resume(turns)
        cap = ctx.cap
        problems = len(ctx.problems)
        for i in range(memo.start, len(messages)):
            raw = messages[i]
            # The hot path of every round: a plain message seen before is one cache lookup.
            turn = self._plain(raw)
            fast = turn is not None
            if turn is None:
                turn = self._known_call_turn(raw, i, cap, calls) if raw.__class__ is dict else None
                fast = turn is not None
                if turn is None:
                    turn = self._message(raw, f"{where}[{i}]", i, ctx, calls, state)
                if turn.role == "tool" and calls.group_answered(turn):
                    turn = self._group_answered(messages, calls.at, turns, turn, cap)
            calls.after(turn, i, ctx)
            turns.append(turn)
            if memo.boundary < 0:
                # A message that said a problem is read again next round, and says it again.
                memo.add(i, raw, fast and len(ctx.problems) == problems)
        if memo.slot is not None:

            def known(kept: _ChatPrefix) -> None:
                # Units and sums the fit goes on from (copies: the memo changes them next round).
                end = len(kept.reads)
                units = kept.units[:] if end == len(turns) else kept.units[:-1]
                state.known = Known(end, units, kept.sums[end])

            memo.keep(self.counter, (declared,), known)
        else:
            memo.keep(self.counter, (declared,))
        state.replies = memo.replies
        if calls.pending:
            calls.close(len(messages), ctx)
        return turns, range(len(turns))

    def _plain(self, raw: Any) -> Turn | None:
        """The turn of a plain ``{"role", "content": str}`` message (kept by content, one cache per
        role), or ``None``. Not a tool or function result: those answer a call, which the full
        path checks."""
        if raw.__class__ is not dict or len(raw) != 2:
            return None
        role = raw.get("role")
        content = raw.get("content")
        if content.__class__ is not str or role.__class__ is not str or role in ("tool", "function"):
            return None
        cache = self.simple.get(role)
        if cache is None:
            return None
        hit = cache.get(content)
        if hit is None:
            line = ROLE_LINES[role]
            hit = Turn(
                line,
                [Part(_TEXT_COMPONENT[line], self.counter.text(content))],
                self.role_cost[role],
                has_user_text=line == "user",
            )
            cache.put(content, hit)
        return hit

    def _message(
        self, raw: Any, here: str, i: int, ctx: ReadContext, calls: ChatCalls, state: _State
    ) -> Turn:
        """A message read field by field (every shape the fast paths do not take)."""
        m = as_object(raw, here, i)
        role = m.get("role")
        line = ROLE_LINES.get(role) if isinstance(role, str) else None
        if line is None:
            raise InvalidMessageError(
                f"{here}.role",
                f"unknown role {shown(role)}; expected one of {', '.join(ROLE_LINES)}",
                index=i,
            )
        if role == "tool":
            parts, replaced, answers = self._tool_result(m, here, i, ctx, calls)
            if replaced is not None:
                state.replaced[i] = replaced
            made: tuple[str, ...] = ()
        else:
            parts, made, answers = self._said(m, str(role), line, here, i, ctx, calls)
        name = m.get("name")
        if name is not None and not isinstance(name, str):
            raise InvalidMessageError(f"{here}.name", "must be a string", index=i)
        # A tool result's ``name`` is not billed: the API names a result after its call (measured).
        if name is not None and role != "tool":
            # o200k models write the name after the role with a colon (``user:alice``), which the
            # encoding merges; the older ones add a token to the name (measured on the bills).
            text = self.counter.text
            cost = (
                text(":" + name)
                if self.counter.resolved.name == "o200k_base"
                else text(name) + TOKENS_PER_NAME
            )
            parts.append(Part(_TEXT_COMPONENT.get(line, "tool_result"), cost))
        cost = self.call_cost if made else self.role_cost[str(role)]
        return Turn(line, parts, cost, calls=made, answers=answers, has_user_text=line == "user")

    def _tool_result(
        self, m: Mapping[str, Any], here: str, i: int, ctx: ReadContext, calls: ChatCalls
    ) -> tuple[list[Part], Any, tuple[str, ...]]:
        """A tool message's parts, its capped form (``None`` when within the cap) and the call it answers."""
        call_id = m.get("tool_call_id")
        if not isinstance(call_id, str):
            raise InvalidMessageError(
                f"{here}.tool_call_id", "a tool result needs a 'tool_call_id' string", index=i
            )
        if m.get("tool_calls") is not None:
            rule(ctx, f"{here}.tool_calls", "a tool message cannot make tool calls", i)
        answers = (call_id,) if calls.answer(call_id, here, i, ctx) else ()
        content = m.get("content")
        replaced: Any = None
        if ctx.cap is not None:
            new = cap_text(content, ctx.cap, "text")
            if new is not None:
                replaced, content = {**m, "content": new}, new
        text = self.counter.text
        if isinstance(content, ARRAY) and text_parts(content, "text"):
            parts = [Part("tool_result", text("".join(p["text"] for p in content)), call_id)]
        elif isinstance(content, str):
            parts = [Part("tool_result", text(content), call_id, capped=replaced is not None)]
        else:
            parts = self.content(content, "tool", here, i, ctx)
        return parts, replaced, answers

    def _said(
        self,
        m: Mapping[str, Any],
        role: str,
        line: Line,
        here: str,
        i: int,
        ctx: ReadContext,
        calls: ChatCalls,
    ) -> tuple[list[Part], tuple[str, ...], tuple[str, ...]]:
        """A message that is no tool result: its parts, the calls it makes and the one it answers
        (a legacy function result answers its call by name)."""
        answers: tuple[str, ...] = ()
        if role == "function":
            fname = m.get("name")
            answers = (f"{LEGACY}{fname}",) if isinstance(fname, str) else ()
        parts = self.content(m.get("content"), role if role != "function" else "tool", here, i, ctx)
        made: tuple[str, ...] = ()
        tool_calls = m.get("tool_calls")
        if tool_calls is not None:
            if line != "assistant":
                rule(ctx, f"{here}.tool_calls", "only assistant messages may make tool calls", i)
            call_parts = self.tool_calls(tool_calls, here, i)
            if not call_parts:
                rule(ctx, f"{here}.tool_calls", "is an empty list (leave the field out instead)", i)
            ids = [str(p.call_id) for p in call_parts]
            calls.declare(ids, here, i, ctx)
            parts.extend(call_parts)
            if line == "assistant":
                made = tuple(dict.fromkeys(ids))
        text = self.counter.text
        function_call = m.get("function_call")
        if function_call is not None:
            fc = as_mapping(function_call)
            name = fc.get("name") if fc is not None else None
            args = fc.get("arguments", "") if fc is not None else None
            if not isinstance(name, str) or not isinstance(args, str):
                raise InvalidMessageError(
                    f"{here}.function_call", "needs a 'name' string and an 'arguments' JSON string", index=i
                )
            parts.append(Part("tool_call", TOKENS_PER_FUNCTION_CALL + text(name) + text(args)))
            made = (*made, f"{LEGACY}{name}")
        refusal = m.get("refusal")
        if refusal is not None:
            if not isinstance(refusal, str):
                raise InvalidMessageError(f"{here}.refusal", "must be a string", index=i)
            parts.append(Part("assistant", text(refusal)))
        audio = m.get("audio")
        if audio is not None:  # a reference to an earlier audio reply, billed as audio
            parts.append(Part("other", text(to_json(audio, f"{here}.audio", i, InvalidMessageError))))
        return parts, made, answers

    def _group_answered(
        self, messages: Sequence[Any], at: int, turns: list[Turn], last: Turn, cap: Any
    ) -> Turn:
        """``last``, the result that answers a parallel group's last open call, with what the group
        costs besides its results' own tokens: a chat model reads the group's results back as one
        message (see :func:`parallel_results`), so the further results' framing goes and the
        re-serialised list's tokens replace theirs (measured). Booked on the last result's framing."""
        if is_reasoning_model(self.counter.model):
            return last
        results: list[str] = []
        for j in range(at + 1, len(turns) + 1):
            m = as_mapping(messages[j])
            content = m.get("content") if m is not None else None
            if cap is not None:
                new = cap_text(content, cap, "text")
                content = new if new is not None else content
            if isinstance(content, ARRAY) and text_parts(content, "text"):
                content = "".join(p["text"] for p in content)
            if not isinstance(content, str):
                return last  # not all text: read as written
            results.append(content)
        group = turns[at + 1 :]
        if len(results) != len(group) + 1 or any(t.role != "tool" or len(t.parts) != 1 for t in group):
            return last
        booked = sum(t.parts[0].tokens for t in group) + sum(p.tokens for p in last.parts)
        extra = self.counter.text(parallel_results(results)) - booked - len(group) * self.role_cost["tool"]
        # On the framing: the results' parts keep their own text's tokens (a unit is dropped whole).
        return Turn(last.role, last.parts, last.overhead + extra, calls=last.calls, answers=last.answers)

    def _known_call_turn(self, m: dict[str, Any], i: int, cap: Any, rules: ChatCalls) -> Turn | None:
        """The turn of a tool-call or tool-result message read before, or ``None`` (read it in full).

        Only the exact shapes the API sends back are taken here, and only when the transcript
        rules hold (an open call answered once, call ids not used before, a result within the
        cap); anything else, and every problem, is left to the full read, which says what is
        wrong and where.
        """
        role = m.get("role")
        if role == "tool":
            content, call_id = m.get("content"), m.get("tool_call_id")
            if len(m) != 3 or content.__class__ is not str or call_id.__class__ is not str:
                return None
            if not rules.is_open(call_id):
                return None
            if cap is not None and cap(content) is not content:
                return None  # cut at the cap: the full read writes the cut text back
            turn = self.tool_turns.get(content)
            if turn is None or turn.answers[0] != call_id:
                turn = Turn(
                    ROLE_LINES["tool"],
                    [Part("tool_result", self.counter.text(content), call_id)],
                    self.role_cost["tool"],
                    answers=(call_id,),
                )
                self.tool_turns.put(content, turn)
            rules.pending[call_id] = True
            return turn
        if role != "assistant":
            return None
        calls, content = m.get("tool_calls"), m.get("content", _ABSENT)
        if calls.__class__ is not list or not calls or len(m) != (2 if content is _ABSENT else 3):
            return None
        if content is _ABSENT or content is None:
            key = "\x02"
        elif content.__class__ is str:
            key = "\x03" + content
        else:
            return None
        ids: list[str] = []
        for call in calls:
            if call.__class__ is not dict or len(call) != 3 or call.get("type") != "function":
                return None
            call_id, fn = call.get("id"), call.get("function")
            if call_id.__class__ is not str or fn.__class__ is not dict or len(fn) != 2:
                return None
            name, arguments = fn.get("name"), fn.get("arguments")
            if name.__class__ is not str or arguments.__class__ is not str:
                return None
            if call_id in rules.declared or call_id in ids:
                return None
            ids.append(call_id)
            key += f"\x00{call_id}\x01{name}\x01{arguments}"
        turn = self.call_turns.get(key)
        if turn is None:
            text = self.counter.text
            parts = [] if content is _ABSENT or content is None else [Part("assistant", text(content))]
            tokens = chat_call_tokens(
                self.counter, [(c["function"]["name"], c["function"]["arguments"]) for c in calls]
            )
            parts += [Part("tool_call", n, c["id"]) for c, n in zip(calls, tokens)]
            turn = Turn(ROLE_LINES["assistant"], parts, self.call_cost, calls=tuple(ids))
            self.call_turns.put(key, turn)
        for call_id in ids:
            rules.declared[call_id] = i
        return turn


#: A key that is not there (``content`` may be absent, ``None`` or a string: three readings).
_ABSENT: Any = object()


class _ChatPrefix(Prefix):
    """The memo of a transcript read with the fast paths only (its reads are the turns), and what
    the fit goes on from: the turns' units and running sums."""

    __slots__ = ("sums", "units")

    def __init__(self) -> None:
        super().__init__(1)  # the calls made, by message
        #: The units of the turns (the last one may go on past them).
        self.units: list[tuple[int, int]] = []
        #: ``sums[k]``: the raw tokens of ``turns[:k]`` added up.
        self.sums: list[Sums] = [NO_SUMS]

    def cut(self, n: int) -> None:
        super().cut(n)
        del self.sums[n + 1 :]
        # A unit ending at the cut may go on in the next round: it is split again.
        units = self.units
        while units and units[-1][1] >= n:
            units.pop()

    def grow(self, reads: list[Any], start: int, end: int, copies: list[tuple[Any, int]]) -> None:
        super().grow(reads, start, end, copies)
        sums = self.sums
        acc = sums[-1]
        for t in reads[start:end]:
            acc = add_sums(acc, t)
            sums.append(acc)
        split_units(self.reads, self.units)


class OpenAIChatAdapter(Adapter):
    """Chat Completions request bodies and bare ``messages`` lists."""

    provider = "openai"
    exact = True

    @staticmethod
    def reader(counter: TokenCounter) -> ChatReader:
        """The reader of ``counter``'s fitter (it holds that fitter's turn cache)."""
        reader = counter.dialect_state.get("openai")
        if reader is None:
            reader = counter.dialect_state.setdefault("openai", ChatReader(counter))
        return reader  # type: ignore[no-any-return]

    def claims(self, body: Mapping[str, Any]) -> bool | None:
        messages = body.get("messages")
        if not isinstance(messages, ARRAY) or "input" in body:
            return False
        if "system" in body:  # a top-level system prompt is the Messages API's
            return False
        tools = body.get("tools")
        for tool in tools if isinstance(tools, ARRAY) else ():
            if isinstance(tool, Mapping):
                if "input_schema" in tool:
                    return False
                if "function" in tool:
                    return True
        for raw in messages:
            m = as_mapping(raw)
            if m is None:
                continue
            role = m.get("role")
            if (
                role in ("system", "developer", "tool", "function")
                or m.get("tool_calls")
                or m.get("function_call")
            ):
                return True
            content = m.get("content")
            if isinstance(content, ARRAY):
                for part in content:
                    kind = part.get("type") if isinstance(part, Mapping) else None
                    if kind in OPENAI_PARTS:
                        return True
                    if kind in ANTHROPIC_BLOCKS:
                        return False
        model = body.get("model")
        if isinstance(model, str) and model.startswith(("gpt-", "o1", "o3", "o4", "chatgpt")):
            return True
        return None

    def claims_items(self, items: Sequence[Any]) -> bool:
        return True

    def to_model(self, body: Any, ctx: ReadContext) -> Reading:
        body = json_object(body)
        messages = body.get("messages")
        if not isinstance(messages, ARRAY):
            raise InvalidRequestError("messages", "a Chat Completions request needs a 'messages' list")
        tools = body.get("tools")
        functions = body.get("functions")
        host = [t for t in tools if _host_tool(t)] if isinstance(tools, ARRAY) else []
        if host:
            # A gateway's own server tool (``openrouter:web_search``) is run and billed by the
            # host: what it adds is not in the body, so the count is a bound.
            for t in host:
                ctx.unknown(f"server tool {t['type']}")
            tools = [t for t in tools if not _host_tool(t)]
        reading = self._read(messages, tools, ctx)
        if functions:  # the legacy function definitions, billed like tools
            if not isinstance(functions, ARRAY):
                raise InvalidRequestError("functions", "must be a list of function definitions")
            wrapped = [{"type": "function", "function": f} for f in functions]
            _add_tools(reading.model, wrapped, ctx.counter, legacy=True)
        add_output_schema(reading.model, body.get("response_format"), ctx.counter)
        add_forced_function(reading.model, body.get("tool_choice"), ctx.counter)
        # An open-weight model's host bills its chat template's rendering, not OpenAI's framing.
        apply_chat_template(reading.model, body, ctx.counter)
        reading.body = body
        return reading

    def read_items(self, messages: Sequence[Any], tools: Any, ctx: ReadContext) -> Reading:
        """A bare transcript (``fit(messages, tools=...)``) read into the model."""
        reading = self._read(messages, tools, ctx)
        # An open-weight model's host bills its chat template's rendering, not OpenAI's framing.
        apply_chat_template(reading.model, {"messages": messages, "tools": tools}, ctx.counter)
        return reading

    def _read(self, messages: Sequence[Any], tools: Any, ctx: ReadContext) -> Reading:
        state = _State()
        turns, starts = self.reader(ctx.counter).read(messages, ctx, state)
        tool_list = None if tools is None else _tool_dicts(tools)
        counter = ctx.counter
        if counter.model.removeprefix("openai/").startswith(FIRST_REASONING_MODELS):
            ctx.unknown(FIRST_REASONING_FRAMING)
        model = RequestModel(
            turns=turns,
            starts=starts,
            items=len(turns),
            # The reasoning models prime the reply with one token less (measured on their bills).
            priming=REPLY_PRIMING - 1 if is_reasoning_model(counter.model) else REPLY_PRIMING,
            system_in_turns=bool(turns) and turns[0].role == "system",
            capped=len(state.replaced),
            known=state.known,
            replies=state.replies,
            unknowns=tuple(ctx.unknowns),  # images and files the body only names
        )
        if tool_list:
            _add_tools(model, tool_list, counter)
        return Reading(model=model, body=None, items=messages, state=state)

    def from_model(self, reading: Reading, fitted: Fitted) -> tuple[Any, list[Any]]:
        state: _State = reading.state
        out = kept_items(reading, fitted, state.replaced)
        if fitted.summary is not None:
            out.insert(fitted.summary_at, fitted.summary)
        if reading.body is None:
            return None, out
        body = dict(reading.body)
        body["messages"] = [self.block_message(b) for b in fitted.blocks] + out
        return body, out

    @staticmethod
    def block_message(block: Block) -> Message:
        return {"role": "system", "content": block.text}

    def block(self, kind: str, text: str, counter: TokenCounter) -> Block:
        tokens = TOKENS_PER_MESSAGE + counter.text("system") + counter.text(text)
        return Block(kind, text, tokens)  # type: ignore[arg-type]

    def summary(self, produced: Any, counter: TokenCounter) -> tuple[Any, Turn]:
        if isinstance(produced, str):
            item: Message = {"role": "system", "content": SUMMARY_PREFIX + produced}
        else:
            m = as_mapping(produced)
            if m is None:
                raise InvalidRequestError(
                    "summarizer", f"must return a message dict or a string, got {type(produced).__name__}"
                )
            item = dict(m)
        role = item.get("role")
        if role not in ("system", "developer", "user", "assistant") or item.get("tool_calls"):
            raise InvalidRequestError(
                "summarizer", "must return a system, user or assistant message without tool calls"
            )
        reader = self.reader(counter)
        parts = reader.content(item.get("content"), str(role), "summary", -1)
        return item, Turn(ROLE_LINES[str(role)], parts, reader.role_cost[str(role)])


_ROLE = attrgetter("role")


def _add_tools(model: RequestModel, tools: Any, counter: TokenCounter, *, legacy: bool = False) -> None:
    """The tool section's tokens on ``model``, an estimate: the rendering reproduces most bills to
    the token, but not all of them (a token or two either way), so the count does not claim it."""
    # ``in`` over the roles runs in C: a long transcript with no system message costs no Python loop.
    has_system = model.tool_schema > 0 or "system" in map(_ROLE, model.turns)
    # Joined into the system message, the section writes a property's lone title as the Responses
    # API does (one comment line); a section of its own adds a blank comment (measured).
    section = count_functions(counter, tools, lone_titles=has_system)
    framing = section_framing(
        counter.model,
        counter.resolved.name,
        has_system,
        section,
        legacy=legacy,
        leading_system=model.system_in_turns,
    )
    n = max(0, section.tokens + framing) if section.functions else 0
    model.tool_schema += n + section.other
    model.schema_inexact += unconfirmed_tools(n, section.other)


def _host_tool(tool: Any) -> bool:
    """A tool a gateway runs itself: its type is namespaced by the host (``openrouter:...``)."""
    return isinstance(tool, Mapping) and ":" in str(tool.get("type", ""))


def _tool_dicts(tools: Any) -> Any:
    """Tools as plain dicts (the SDK's TypedDicts already are; pydantic tools are dumped)."""
    if not isinstance(tools, Sequence) or isinstance(tools, (str, bytes)):
        return tools  # the counter names the problem
    if set(map(type, tools)) <= {dict}:  # in C: a warm round's tools are checked every round
        return tools
    if any(is_langchain_tool(t) for t in tools):
        return tool_dicts(tools)
    return [as_mapping(t) or t for t in tools]


ADAPTER = OpenAIChatAdapter()
