"""OpenAI Chat Completions: ``messages`` (dicts, TypedDict params or the SDK's pydantic
objects) read into the engine's model, and the fitted request written back.

Counting follows OpenAI's documented accounting: every message costs its text plus
three tokens of framing and its role, a name one more, the reply is primed with
three. Every field the provider bills is counted: content and its parts, names,
tool calls, the legacy ``function_call``, ``refusal``. A part type the accounting
does not cover is charged its JSON text, which errs high, the safe direction for a
budget.

The transcript rules the API enforces are checked here: a tool result must answer a
call of the assistant message right before it, every call must be answered, call ids
are unique. ``fit`` raises a :class:`TranscriptRuleError` naming the message (the
provider would reject the request anyway); observe-only paths record the problem.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from operator import attrgetter
from sys import getsizeof
from typing import Any

from otel_ctx.adapters.base import (
    ARRAY,
    SUMMARY_PREFIX,
    Adapter,
    Fitted,
    ReadContext,
    Reading,
    as_mapping,
    kept_items,
    to_json,
)
from otel_ctx.adapters.langchain_tools import is_langchain_tool, tool_dicts
from otel_ctx.adapters.media import (
    AUDIO_PART_FRAMING,
    Cost,
    audio_tokens,
    image_size,
    openai_file_bound,
    openai_file_tokens,
    openai_image_tokens,
)
from otel_ctx.adapters.openai_tools import (
    add_forced_function,
    add_output_schema,
    chat_call_tokens,
    count_functions,
    is_reasoning_model,
    parallel_results,
    section_framing,
)
from otel_ctx.engine.cache import BoundedCache, Held
from otel_ctx.engine.errors import (
    InvalidMessageError,
    InvalidRequestError,
    TranscriptRuleError,
    shown,
)
from otel_ctx.engine.model import (
    NO_SUMS,
    Block,
    Component,
    Line,
    Part,
    RequestModel,
    Sums,
    Turn,
    add_sums,
    split_units,
)
from otel_ctx.engine.tokens import (
    REPLY_PRIMING,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_NAME,
    TokenCounter,
)

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
_LEGACY = "\x00function:"  # call ids of the legacy function_call (no real id can start so)
#: The first reasoning models, which take no system or developer message, bill framing of their
#: own that no rule reproduces (measured: 8 tokens over the rules on a two-message request), so
#: their count is a bound.
FIRST_REASONING_MODELS = ("o1-mini", "o1-preview")
FIRST_REASONING_FRAMING = "the framing o1-mini and o1-preview add (not measured)"
#: A ``messages`` list deeper than this is not a chat transcript (JSON nesting guard).
_MAX_DEPTH = 64


class _State:
    """Where the transcript sits in the body, and the items the fit rewrote."""

    __slots__ = ("known_answers", "known_sums", "known_units", "replaced")

    def __init__(self) -> None:
        self.replaced: dict[int, Any] = {}
        #: The units of the turns' leading run the reader split already (see RequestModel).
        self.known_units: list[tuple[int, int]] = []
        #: The raw tokens of the turns' leading run, added up already (see RequestModel).
        self.known_sums: tuple[int, Sums] = (0, NO_SUMS)
        #: The model's answers among the leading run's messages (see RequestModel).
        self.known_answers: tuple[int, int] = (0, 0)


class ChatReader:
    """Reads Chat Completions messages; shared by a fitter's rounds (its turn cache)."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.role_cost = {role: TOKENS_PER_MESSAGE + counter.text(role) for role in ROLE_LINES}
        # A plain {"role", "content": str} message costs the same every round: its turn is
        # kept by content, one cache per role, so an already-seen message costs one lookup.
        self.simple: dict[str, BoundedCache[Turn]] = {
            role: BoundedCache(
                max_entries=8_192, max_chars=counter.cache.max_chars, group=counter.cache.group
            )
            for role in ROLE_LINES
        }
        # The shapes of a tool-calling transcript, kept by content like the plain messages: an
        # assistant message that only makes tool calls (keyed by its content and every call's id,
        # name and arguments) and a tool result (keyed by its text; the turn names its call id).
        # A message that changed has another key, so it is read again, never served stale.
        group = counter.cache.group
        self.call_turns: BoundedCache[Turn] = BoundedCache(
            max_entries=8_192, max_chars=counter.cache.max_chars, group=group
        )
        self.tool_turns: BoundedCache[Turn] = BoundedCache(
            max_entries=8_192, max_chars=counter.cache.max_chars, group=group
        )
        # The transcript read last round, up to the first message the fast paths did not take:
        # the next round compares its prefix with that copy in one C-level list comparison and
        # reads on from there, so the history already seen costs no Python work per message.
        # Charged to the process cache budget with the turn caches, and evicted with them.
        self._memo: BoundedCache[_Prefix] = BoundedCache(max_entries=1, max_chars=1 << 62, group=group)
        self._memo_key = ""

    # -- content -------------------------------------------------------------------------

    def content(
        self, content: Any, role: str, where: str, index: int, ctx: ReadContext | None = None
    ) -> list[Part]:
        """The parts of a message's ``content``: a string, ``None`` or a list of parts."""
        text_component = _TEXT_COMPONENT.get(role, "tool_result")
        if content.__class__ is str or isinstance(content, str):
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
        part = as_mapping(raw)
        if part is None:
            raise InvalidMessageError(where, f"must be an object, got {type(raw).__name__}", index=index)
        kind = part.get("type")
        text = self.counter.text
        if kind == "text" or kind == "refusal":
            value = part.get(kind)
            if not isinstance(value, str):
                raise InvalidMessageError(f"{where}.{kind}", "must be a string", index=index)
            return Part(text_component if kind == "text" else "assistant", text(value))
        if kind == "image_url":
            # Billed by pixel size and detail, by the model family's rule; a URL's size is unknown.
            image = as_mapping(part.get("image_url"))
            url = image.get("url") if image is not None else part.get("image_url")
            detail = image.get("detail") if image is not None else None
            size = image_size(url) if isinstance(url, str) and url.startswith("data:") else None
            cost = openai_image_tokens(self.counter.model, size, detail)
            return _media_part("image", cost, ctx)
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
            if isinstance(data, str):
                return _media_part("document", openai_file_tokens(data, name, text, page_images=True), ctx)
            return _media_part("document", openai_file_bound(), ctx)
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
        """One turn per message, with the API's transcript rules checked."""
        if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
            raise InvalidRequestError(
                where, f"must be a list of message objects, got {type(messages).__name__}"
            )
        turns: list[Turn] = []
        role_cost = self.role_cost
        simple = self.simple
        cap = ctx.cap
        # Calls of the assistant message being answered: id -> answered yet.
        pending: dict[str, bool] = {}
        pending_at = -1
        declared: dict[str, int] = {}
        # The memo is kept only for a list read under a known cut (none, or the policy's cap).
        cap_key = ("none", None) if cap is None else ("cap", ctx.cap_key) if ctx.cap_key is not None else None
        memoize = cap_key is not None and messages.__class__ is list
        start = 0
        memo: _Prefix | None = None
        if memoize:
            # The memo is taken out of the cache for this round: it is cut back to the messages
            # this round shares with it and grown by the new ones in place, so the history costs
            # one comparison and nothing per message. Another thread meanwhile finds no memo and
            # reads in full (the same answer); a round that raises drops it (the next reads in full).
            key = self._memo_key
            memo = self._memo.take(key)
            if memo is not None:
                if memo.cap_key == cap_key:
                    start = _common(memo.snapshot, messages)
                if start:
                    memo.cut(start)
                    turns = memo.turns[:]
                    declared = memo.declared
                    pending, pending_at = _pending_after(turns)
                else:  # another transcript (or another cut): the memo is left as it was
                    self._memo.put(key, memo)
                    memo = None
        problems = len(ctx.problems)
        copies: list[Message] = []
        boundary = -1  # the first message the memo cannot cover; -1 while every one can
        for i in range(start, len(messages)):
            raw = messages[i]
            fast = False
            # The hot path of every round: a plain message seen before is one cache lookup.
            if raw.__class__ is dict and len(raw) == 2:
                role = raw.get("role")
                content = raw.get("content")
                # Not "function" either: a legacy function result answers a call like a tool
                # message does, so it must take the full path that keeps the pending calls.
                if content.__class__ is str and role.__class__ is str and role not in ("tool", "function"):
                    cache = simple.get(role)
                    if cache is not None:
                        hit = cache.get(content)
                        if hit is None:
                            line = ROLE_LINES[role]
                            text_component = _TEXT_COMPONENT[line]
                            hit = Turn(
                                line,
                                [Part(text_component, self.counter.text(content))],
                                role_cost[role],
                                has_user_text=line == "user",
                            )
                            cache.put(content, hit)
                        if pending:
                            if False in pending.values():
                                self._unanswered(pending, pending_at, i, ctx)
                            pending = {}
                        turns.append(hit)
                        if memoize and boundary < 0:
                            boundary = _extend(copies, raw, i, ctx, problems)
                        continue
            known = self._known_call_turn(raw, i, cap, pending, declared) if raw.__class__ is dict else None
            if known is not None:
                turn = known
                fast = True
            else:
                m = as_mapping(raw)
                here = f"{where}[{i}]"
                if m is None:
                    raise InvalidMessageError(here, f"must be an object, got {type(raw).__name__}", index=i)
                turn, replaced = self._message(m, here, i, cap, ctx, pending, pending_at, declared)
                if replaced is not None:
                    state.replaced[i] = replaced
            if turn.role == "tool" and len(pending) > 1 and turn.answers and False not in pending.values():
                turn = self._group_answered(messages, pending_at, turns, turn, cap)
            if turn.role != "tool":
                if pending and False in pending.values():
                    self._unanswered(pending, pending_at, i, ctx)
                pending = {}
                if turn.calls:
                    # The legacy function_call pairs with a function message by name, which the
                    # API does not enforce: only tool calls must be answered.
                    pending = {c: False for c in turn.calls if not c.startswith(_LEGACY)}
                    pending_at = i
            turns.append(turn)
            if memoize and boundary < 0:
                boundary = _extend(copies, raw, i, ctx, problems) if fast else i
        if memoize:
            end = len(turns) if boundary < 0 else boundary
            if memo is None:
                memo = _Prefix(declared, cap_key)
            memo.grow(turns, start, end, copies)
            # Units and sums the fit goes on from (copies: the memo changes them next round).
            state.known_units = memo.units[:] if end == len(turns) else memo.units[:-1]
            state.known_sums = (end, memo.sums[end])
            state.known_answers = (end, memo.answers[end])
            if end and memo.held[-1] <= self.counter.cache.max_chars:
                memo.held_bytes = memo.held[-1] + getsizeof(memo.snapshot) + getsizeof(memo.turns)
                self._memo_key = str(next(_memo_keys))
                self._memo.put(self._memo_key, memo)
        if pending:
            self._unanswered(pending, pending_at, len(messages), ctx)
        return turns, range(len(turns))

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
                new = _cap_content(content, cap)
                content = new if new is not None else content
            if isinstance(content, ARRAY) and _all_text(content):
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

    def _known_call_turn(
        self, m: dict[str, Any], i: int, cap: Any, pending: dict[str, bool], declared: dict[str, int]
    ) -> Turn | None:
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
            if pending.get(call_id) is not False:
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
            pending[call_id] = True
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
            if call_id in declared or call_id in ids:
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
            turn = Turn(ROLE_LINES["assistant"], parts, self.role_cost["assistant"], calls=tuple(ids))
            self.call_turns.put(key, turn)
        for call_id in ids:
            declared[call_id] = i
        return turn

    def _unanswered(self, pending: dict[str, bool], at: int, before: int, ctx: ReadContext) -> None:
        missing = [call for call, done in pending.items() if not done]
        if missing:
            ids = ", ".join(repr(c) for c in missing)
            ctx.problem(
                TranscriptRuleError(
                    f"messages[{at}].tool_calls",
                    f"tool call(s) {ids} never answered: every call needs a tool message "
                    f"right after the assistant message (before messages[{before}])",
                    index=at,
                )
            )

    def _message(
        self,
        m: Mapping[str, Any],
        here: str,
        i: int,
        cap: Any,
        ctx: ReadContext,
        pending: dict[str, bool],
        pending_at: int,
        declared: dict[str, int],
    ) -> tuple[Turn, Any]:
        role = m.get("role")
        line = ROLE_LINES.get(role) if isinstance(role, str) else None
        if line is None:
            raise InvalidMessageError(
                f"{here}.role",
                f"unknown role {shown(role)}; expected one of {', '.join(ROLE_LINES)}",
                index=i,
            )
        text = self.counter.text
        content = m.get("content")
        replaced: Any = None
        calls: tuple[str, ...] = ()
        answers: tuple[str, ...] = ()
        parts: list[Part] = []
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str):
                raise InvalidMessageError(
                    f"{here}.tool_call_id", "a tool result needs a 'tool_call_id' string", index=i
                )
            if m.get("tool_calls") is not None:
                ctx.problem(
                    TranscriptRuleError(
                        f"{here}.tool_calls", "a tool message cannot make tool calls", index=i
                    )
                )
            if call_id in pending and not pending[call_id]:
                pending[call_id] = True
                answers = (call_id,)
            else:
                duplicate = call_id in pending  # answered already, by a result of this same group
                ctx.problem(_orphan(here, i, call_id, declared, duplicate))
            if cap is not None:
                new = _cap_content(content, cap)
                if new is not None:
                    replaced = dict(m)
                    replaced["content"] = new
                    content = new
            if isinstance(content, ARRAY) and _all_text(content):
                joined = "".join(p["text"] for p in content)
                parts.append(Part("tool_result", text(joined), call_id))
            elif isinstance(content, str):
                parts.append(Part("tool_result", text(content), call_id, capped=replaced is not None))
            else:
                parts.extend(self.content(content, "tool", here, i, ctx))
        else:
            if role == "function":  # legacy function result: paired with its call by name
                fname = m.get("name")
                answers = (f"{_LEGACY}{fname}",) if isinstance(fname, str) else ()
            parts.extend(self.content(content, role if role != "function" else "tool", here, i, ctx))  # type: ignore[arg-type]
            tool_calls = m.get("tool_calls")
            if tool_calls is not None:
                if line != "assistant":
                    ctx.problem(
                        TranscriptRuleError(
                            f"{here}.tool_calls", "only assistant messages may make tool calls", index=i
                        )
                    )
                call_parts = self.tool_calls(tool_calls, here, i)
                if not call_parts:
                    ctx.problem(
                        TranscriptRuleError(
                            f"{here}.tool_calls", "is an empty list (leave the field out instead)", index=i
                        )
                    )
                ids = []
                for k, p in enumerate(call_parts):
                    assert p.call_id is not None
                    if p.call_id in declared or p.call_id in ids:
                        first = declared.get(p.call_id, i)
                        ctx.problem(
                            TranscriptRuleError(
                                f"{here}.tool_calls[{k}].id",
                                f"call id {shown(p.call_id)} is already used by messages[{first}]",
                                index=i,
                            )
                        )
                    else:
                        declared[p.call_id] = i
                    ids.append(p.call_id)
                parts.extend(call_parts)
                if line == "assistant":
                    calls = tuple(dict.fromkeys(ids))
            function_call = m.get("function_call")
            if function_call is not None:
                fc = as_mapping(function_call)
                name = fc.get("name") if fc is not None else None
                args = fc.get("arguments", "") if fc is not None else None
                if not isinstance(name, str) or not isinstance(args, str):
                    raise InvalidMessageError(
                        f"{here}.function_call",
                        "needs a 'name' string and an 'arguments' JSON string",
                        index=i,
                    )
                parts.append(Part("tool_call", TOKENS_PER_FUNCTION_CALL + text(name) + text(args)))
                calls = (*calls, f"{_LEGACY}{name}")
            refusal = m.get("refusal")
            if refusal is not None:
                if not isinstance(refusal, str):
                    raise InvalidMessageError(f"{here}.refusal", "must be a string", index=i)
                parts.append(Part("assistant", text(refusal)))
            audio = m.get("audio")
            if audio is not None:  # a reference to an earlier audio reply, billed as audio
                parts.append(Part("other", text(to_json(audio, f"{here}.audio", i, InvalidMessageError))))
        name = m.get("name")
        if name is not None and not isinstance(name, str):
            raise InvalidMessageError(f"{here}.name", "must be a string", index=i)
        # A tool result's ``name`` is not billed: the API names a result after its call (measured).
        if name is not None and role != "tool":
            # o200k models write the name after the role with a colon (``user:alice``), which the
            # encoding merges; the older ones add a token to the name (measured on the bills).
            cost = (
                text(":" + name)
                if self.counter.resolved.name == "o200k_base"
                else text(name) + TOKENS_PER_NAME
            )
            parts.append(Part(_TEXT_COMPONENT.get(line, "tool_result"), cost))
        turn = Turn(
            line, parts, self.role_cost[str(role)], calls=calls, answers=answers, has_user_text=line == "user"
        )
        return turn, replaced


#: A key that is not there (``content`` may be absent, ``None`` or a string: three readings).
_ABSENT: Any = object()


class _Prefix(Held):
    """A transcript prefix read with the fast paths only: a private copy of its messages and their turns.

    Kept from one round to the next and changed in place (cut back to what the next round
    shares with it, then grown by that round's new messages), so a round does work for its
    new messages only, however long the history.
    """

    __slots__ = ("answers", "cap_key", "declared", "held", "snapshot", "sums", "turns", "units")

    def __init__(self, declared: dict[str, int], cap_key: Any) -> None:
        super().__init__(0)
        self.snapshot: list[Message] = []
        self.turns: list[Turn] = []
        #: Call id -> the message of the prefix that made it, in the order made (so by message).
        self.declared = declared
        self.cap_key = cap_key
        #: Bytes the copy of messages ``[0, k]`` keeps alive, for every k (charged to the cache budget).
        self.held: list[int] = []
        #: The units of ``turns`` (the last one may go on past them).
        self.units: list[tuple[int, int]] = []
        #: ``sums[k]``: the raw tokens of ``turns[:k]`` added up.
        self.sums: list[Sums] = [NO_SUMS]
        #: ``answers[k]``: the model's answers (runs of assistant messages) in ``turns[:k]``. Every
        #: message here was read by a fast path (no ``type`` key, a known role), so an answer is
        #: exactly an assistant turn.
        self.answers: list[int] = [0]

    def cut(self, n: int) -> None:
        """Keep the first ``n`` messages only (those the next round shares)."""
        del self.snapshot[n:]
        del self.turns[n:]
        del self.held[n:]
        del self.sums[n + 1 :]
        del self.answers[n + 1 :]
        # A unit ending at the cut may go on in the next round: it is split again.
        units = self.units
        while units and units[-1][1] >= n:
            units.pop()
        _forget_calls(self.declared, n)

    def grow(self, turns: list[Turn], start: int, end: int, copies: list[Message]) -> None:
        """Add ``turns[start:end]``, read this round, and ``copies`` of their messages."""
        _forget_calls(self.declared, end)  # calls of messages past the end are read again
        new = turns[start:end]
        self.turns += new
        self.snapshot += copies
        held = self.held
        total = held[-1] if held else 0
        for copy in copies:
            total += _held_bytes(copy)
            held.append(total)
        sums, answers = self.sums, self.answers
        acc, count = sums[-1], answers[-1]
        before = self.turns[start - 1].role if start else None
        for t in new:
            acc = add_sums(acc, t)
            sums.append(acc)
            if t.role == "assistant" and before != "assistant":
                count += 1  # a run of assistant messages is one answer
            answers.append(count)
            before = t.role
        split_units(self.turns, self.units)


def _forget_calls(declared: dict[str, int], n: int) -> None:
    """Drop the calls made by message ``n`` or later (the last ones made)."""
    while declared and next(reversed(declared.values())) >= n:
        declared.popitem()


_memo_keys = itertools.count()


def _held_bytes(copy: Message) -> int:
    """Bytes a message's copy keeps alive: its dicts and lists and the texts in them."""
    size = getsizeof(copy) + 64  # and the turn's share of the list and the prefix
    for v in copy.values():
        if v.__class__ is str:
            size += getsizeof(v)
    calls = copy.get("tool_calls")
    if calls is not None:
        size += getsizeof(calls)
        for c in calls:
            fn = c["function"]
            size += getsizeof(c) + getsizeof(c["id"]) + getsizeof(fn)
            size += getsizeof(fn["name"]) + getsizeof(fn["arguments"])
    return size


#: How far back from its end a memo is searched for the last message it shares with a round.
_MEMO_BACKTRACK = 8


def _common(snapshot: list[Message], messages: Sequence[Any]) -> int:
    """How many leading messages of ``messages`` equal the memo's copy (0 when not found cheaply).

    The copy is on the left and holds no container of the caller's, so every message is
    compared field by field: a message changed in place differs and is read again. The end is
    found first (a transcript that moved on, or a retried round with another last call, differs
    only there), then the whole prefix is compared in one C-level list comparison.
    """
    n = min(len(snapshot), len(messages))
    k = n
    while k > 0 and n - k < _MEMO_BACKTRACK and snapshot[k - 1] != messages[k - 1]:
        k -= 1
    if k == 0 or n - k >= _MEMO_BACKTRACK:
        return 0
    if k == len(snapshot):
        return k if snapshot == messages[:k] else 0
    return k if snapshot[:k] == messages[:k] else 0


def _pending_after(turns: list[Turn]) -> tuple[dict[str, bool], int]:
    """The calls still open after ``turns`` (all read by the fast paths): id -> answered, and where."""
    j = len(turns) - 1
    while j >= 0 and turns[j].role == "tool":
        j -= 1
    if j < 0:
        return {}, -1
    pending = {c: False for c in turns[j].calls if not c.startswith(_LEGACY)}
    for t in turns[j + 1 :]:
        pending[t.answers[0]] = True
    return pending, j


def _extend(copies: list[Message], raw: dict[str, Any], i: int, ctx: ReadContext, problems: int) -> int:
    """Add a fast-read message to the memo's copy: -1, or ``i`` when the memo must stop before it."""
    if len(ctx.problems) != problems:
        return i  # a problem was said reading it: the next round reads it again and says it again
    calls = raw.get("tool_calls")
    if calls is None:
        copies.append(dict(raw))  # every value a string
    else:
        copies.append({**raw, "tool_calls": [{**c, "function": dict(c["function"])} for c in calls]})
    return -1


def _all_text(content: Sequence[Any]) -> bool:
    return all(
        isinstance(p, Mapping) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content
    )


def _cap_content(content: Any, cap: Any) -> str | None:
    """The capped text of a tool result, or ``None`` when it is within the cap (or not text)."""
    if isinstance(content, str):
        new = cap(content)
        return None if new is content else new
    if isinstance(content, ARRAY) and content and _all_text(content):
        joined = "".join(p["text"] for p in content)
        new = cap(joined)
        return None if new is joined else new
    return None  # images or unknown parts: counted, not cut


def _media_part(component: Component, cost: Cost, ctx: ReadContext | None) -> Part:
    """An image's or a document's part; what the body cannot show is recorded as unknown."""
    if cost.unknown is not None and ctx is not None:
        ctx.unknown(cost.unknown)
    return Part(component, cost.tokens, exact=cost.exact)


def _orphan(
    here: str, index: int, call_id: str, declared: Mapping[str, int], duplicate: bool
) -> TranscriptRuleError:
    """The error for a tool result that answers no open call of the assistant message before it."""
    where = f"{here}.tool_call_id"
    if duplicate:
        problem = f"tool call {shown(call_id)} is already answered by an earlier tool message"
    elif call_id in declared:
        problem = (
            f"answers tool call {shown(call_id)} of messages[{declared[call_id]}], but tool results "
            "must directly follow the assistant message that made the calls"
        )
    else:
        problem = f"no earlier assistant message declared tool call {shown(call_id)}"
    return TranscriptRuleError(where, problem, index=index)


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
                    if kind in ("image_url", "input_audio", "file", "refusal"):
                        return True
                    if kind in (
                        "tool_use",
                        "tool_result",
                        "thinking",
                        "redacted_thinking",
                        "image",
                        "document",
                    ):
                        return False
        model = body.get("model")
        if isinstance(model, str) and model.startswith(("gpt-", "o1", "o3", "o4", "chatgpt")):
            return True
        return None

    def claims_items(self, items: Sequence[Any]) -> bool:
        return True

    def to_model(self, body: Any, ctx: ReadContext) -> Reading:
        if not isinstance(body, Mapping):
            raise InvalidRequestError("request", f"must be a JSON object, got {type(body).__name__}")
        messages = body.get("messages")
        if not isinstance(messages, ARRAY):
            raise InvalidRequestError("messages", "a Chat Completions request needs a 'messages' list")
        tools = body.get("tools")
        functions = body.get("functions")
        reading = self.read_items(messages, tools, ctx)
        if functions:  # the legacy function definitions, billed like tools
            if not isinstance(functions, ARRAY):
                raise InvalidRequestError("functions", "must be a list of function definitions")
            wrapped = [{"type": "function", "function": f} for f in functions]
            _add_tools(reading.model, wrapped, ctx.counter, legacy=True)
        add_output_schema(reading.model, body.get("response_format"), ctx.counter)
        add_forced_function(reading.model, body.get("tool_choice"), ctx.counter)
        reading.body = body
        return reading

    def read_items(self, messages: Sequence[Any], tools: Any, ctx: ReadContext) -> Reading:
        """A bare transcript (``fit(messages, tools=...)``) read into the model."""
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
            known_units=state.known_units,
            known_sums=state.known_sums,
            known_answers=state.known_answers,
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
    section = count_functions(counter, tools)
    # ``in`` over the roles runs in C: a long transcript with no system message costs no Python loop.
    has_system = model.tool_schema > 0 or "system" in map(_ROLE, model.turns)
    framing = section_framing(counter.model, counter.resolved.name, has_system, section, legacy=legacy)
    n = max(0, section.tokens + framing)
    model.tool_schema += n
    model.schema_inexact += n


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
