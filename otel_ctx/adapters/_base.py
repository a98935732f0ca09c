"""What every dialect shares: the engine's adapter contract, the field checks, the prefix memo.

An adapter reads a request body (or a bare transcript) into a
:class:`~otel_ctx.engine._model.RequestModel`, counting every billed field with the provider's
accounting, and writes the fit back in the caller's dialect: the kept items are the caller's
own objects and the caller's body is never mutated. The contract (:class:`Adapter`,
:class:`ReadContext`, :class:`Reading`, :class:`Fitted`) is the engine's, which must not import
an adapter; dialects import it from here.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from sys import getsizeof
from typing import Any, Generic, TypeVar

from otel_ctx.engine._cache import BoundedCache, Held
from otel_ctx.engine._dialect import Adapter, CapText, Fitted, ReadContext, Reading
from otel_ctx.engine._errors import InvalidMessageError, InvalidRequestError, TranscriptRuleError
from otel_ctx.engine._tokens import TokenCounter
from otel_ctx.engine._tokens import to_json as _engine_json

__all__ = [
    "ANTHROPIC_BLOCKS",
    "ARRAY",
    "OPENAI_PARTS",
    "SUMMARY_PREFIX",
    "Adapter",
    "CapText",
    "Fitted",
    "Prefix",
    "PrefixRound",
    "ReadContext",
    "Reading",
    "State",
    "as_mapping",
    "as_object",
    "as_plain",
    "cap_text",
    "count_replies",
    "cut_key",
    "json_object",
    "kept_items",
    "private_copy",
    "rule",
    "string_field",
    "text_parts",
    "to_json",
]

#: What a JSON array may arrive as: a caller builds messages, content parts and tools as lists or
#: tuples alike, and the SDKs send both as arrays, so both are read (and billed) the same.
ARRAY = (list, tuple)

#: Content part types only Chat Completions sends, and block types only the Messages API sends:
#: either one in a message tells the two dialects apart.
OPENAI_PARTS = ("image_url", "input_audio", "file", "refusal")
ANTHROPIC_BLOCKS = ("tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document")

#: The text a string summary is sent with, in every dialect (the model reads it as context).
SUMMARY_PREFIX = "Summary of earlier conversation (compacted by otel-ctx):\n"


@dataclass(slots=True)
class State:
    """What a read keeps for writing the fit back: the caller's items it rewrote (capped tool
    results, in their new form), by index. A dialect that keeps more extends it."""

    replaced: dict[int, Any] = field(default_factory=dict)


def as_mapping(raw: Any) -> Mapping[str, Any] | None:
    """A message or block as a mapping: dicts and TypedDicts as they are, SDK pydantic objects dumped."""
    if raw.__class__ is dict or isinstance(raw, Mapping):
        return raw
    dump = getattr(raw, "model_dump", None)
    if callable(dump):
        try:
            out = dump(exclude_none=True)
        except Exception:  # a foreign object with a model_dump of its own shape
            return None
        return out if isinstance(out, Mapping) else None
    return None


def as_object(raw: Any, where: str, index: int | None, what: str = "an object") -> Mapping[str, Any]:
    """``raw`` as a mapping (see :func:`as_mapping`); an :class:`InvalidMessageError` if it is none."""
    found = as_mapping(raw)
    if found is None:
        raise InvalidMessageError(where, f"must be {what}, got {type(raw).__name__}", index=index)
    return found


def string_field(
    m: Mapping[str, Any], key: str, where: str, index: int | None, what: str = "a string"
) -> str:
    """``m[key]``, which must be a string: an :class:`InvalidMessageError` at ``where.key`` if not."""
    value = m.get(key)
    if not isinstance(value, str):
        raise InvalidMessageError(f"{where}.{key}", f"must be {what}", index=index)
    return value


def json_object(body: Any) -> Mapping[str, Any]:
    """A request body, which must be a JSON object."""
    if not isinstance(body, Mapping):
        raise InvalidRequestError("request", f"must be a JSON object, got {type(body).__name__}")
    return body


def as_plain(value: Any) -> Any:
    """``json.dumps``'s ``default``: an SDK object inside a value as its dict; else a TypeError."""
    block = as_mapping(value)
    if block is None:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
    return dict(block)


def to_json(value: Any, where: str, index: int | None, error: type[InvalidRequestError]) -> str:
    """``value`` as the compact JSON that is counted, SDK objects inside it dumped; typed errors."""
    return _engine_json(value, where, index, error, default=as_plain)


def rule(ctx: ReadContext, where: str, problem: str, index: int | None = None) -> None:
    """Say that the transcript breaks a rule the API states: raised when strict, else recorded."""
    ctx.problem(TranscriptRuleError(where, problem, index=index))


def text_parts(content: Any, kind: str) -> bool:
    """``content`` is a list of ``kind`` parts, each with its ``text`` string."""
    return all(
        isinstance(p, Mapping) and p.get("type") == kind and isinstance(p.get("text"), str) for p in content
    )


def cap_text(content: Any, cap: CapText, kind: str) -> str | None:
    """A tool result's text cut to the cap (a string, or ``kind`` text parts joined), or ``None``
    when it is within the cap or is not all text (images and unknown parts are counted, not cut)."""
    if isinstance(content, str):
        new = cap(content)
        return None if new is content else new
    if isinstance(content, ARRAY) and content and text_parts(content, kind):
        joined = "".join(p["text"] for p in content)
        new = cap(joined)
        return None if new is joined else new
    return None


def kept_items(reading: Reading, fitted: Fitted, replaced: Mapping[int, Any]) -> list[Any]:
    """The caller's own items of the kept turns, in order; an item the fit rewrote (a capped tool
    result) in its new form. Every other object goes back as it came, untouched."""
    items = reading.items
    model = reading.model
    if not replaced and model.one_to_one and len(fitted.turns) == len(items):
        return list(items)  # every item kept, none rewritten
    kept = model.item_indexes(fitted.turns)
    return [replaced.get(i, items[i]) for i in kept] if replaced else [items[i] for i in kept]


class _NotPlain(Exception):
    """A value holds something other than JSON's own types: no private copy of it is made."""


class _Int(int):
    """An int of a private copy: equal to an int only, never to ``True`` or ``1.0`` (counted otherwise)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return other.__class__ is int and int.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = int.__hash__


class _Float(float):
    """A float of a private copy: equal to a float only."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return other.__class__ is float and float.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = float.__hash__


class _Bool:
    """A bool of a private copy: equal to that bool only, never to 1 or 0."""

    __slots__ = ("value",)

    def __init__(self, value: bool) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return other is self.value

    def __ne__(self, other: object) -> bool:
        return other is not self.value

    __hash__ = None  # type: ignore[assignment]


#: Bytes a container, a number or an ASCII string costs besides its characters (CPython, 64-bit).
_OBJECT_BYTES = 56


def _copy(value: Any, size: list[int]) -> Any:
    cls = value.__class__
    if cls is str:
        size[0] += len(value) + _OBJECT_BYTES
        return value
    if value is None:
        return value
    size[0] += _OBJECT_BYTES
    if cls is dict:
        out = {}
        for k, v in value.items():
            if k.__class__ is not str:
                raise _NotPlain
            if v.__class__ is str:  # most fields (role, type, text): no call for them
                size[0] += len(v) + _OBJECT_BYTES
                out[k] = v
            else:
                out[k] = _copy(v, size)
        return out
    if cls is list:
        return [_copy(v, size) for v in value]
    if cls is int:
        return _Int(value)
    if cls is float:
        return _Float(value)
    if cls is bool:
        return _Bool(value)
    raise _NotPlain


def private_copy(value: Any) -> Any | None:
    """A copy of a JSON value that shares no container with it, for comparing it later with ``==``.

    The copy is compared on the left: each field is compared with what the caller holds then,
    numbers only with numbers of their own type (``1``, ``1.0`` and ``True`` are counted
    differently). ``None`` when the value holds anything else (an SDK object, a tuple), or is
    nested too deeply: such a value is read again every round.
    """
    found = sized_private_copy(value)
    return found[0] if found is not None else None


def sized_private_copy(value: Any) -> tuple[Any, int] | None:
    """:func:`private_copy` and about how many bytes it holds, counted while it is made (the memo
    is charged to the process cache budget; measuring the copy afterwards would walk it again)."""
    size = [0]
    try:
        return _copy(value, size), size[0]
    except (_NotPlain, RecursionError):
        return None


#: The model's own items: an ``assistant`` message (Gemini: ``model``), a call, its reasoning.
_REPLY_ROLES = frozenset({"assistant", "model"})
_REPLY_ITEMS = frozenset({"function_call", "reasoning"})


def _is_reply(item: Any) -> bool:
    if item.__class__ is dict or isinstance(item, Mapping):
        return item.get("role") in _REPLY_ROLES or item.get("type") in _REPLY_ITEMS
    return getattr(item, "role", None) in _REPLY_ROLES or getattr(item, "type", None) in _REPLY_ITEMS


def running_replies(items: Sequence[Any], start: int = 0, found: int = 0) -> list[int]:
    """The model's answers in ``items[:k + 1]`` for each ``k`` from ``start``, given ``found`` in
    ``items[:start]``. An answer is a run of the model's items: a reply that calls three tools
    and says why is one answer, and the transcript is the model's turn ``replies + 1``."""
    out: list[int] = []
    previous = 0 < start <= len(items) and _is_reply(items[start - 1])
    for i in range(start, len(items)):
        answer = _is_reply(items[i])
        if answer and not previous:
            found += 1
        out.append(found)
        previous = answer
    return out


def count_replies(items: Any) -> int:
    """The model's replies in a transcript (see :func:`running_replies`); 0 for one that is not a
    list of items (a string prompt)."""
    if not isinstance(items, ARRAY):
        return 0
    counts = running_replies(items)
    return counts[-1] if counts else 0


class Prefix(Held):
    """The leading items of a request read in an earlier round: a private copy of each, what
    each read to, and the call ids the dialect's rules remember (id -> the item that made it).

    Kept from one round to the next and changed in place (cut back to what the next round shares
    with it, then grown by that round's new items), so a round does work for its new items only,
    however long the history. A dialect that remembers more per item (running sums) extends
    :meth:`cut` and :meth:`grow`.
    """

    __slots__ = ("ids", "key", "reads", "replies", "sizes", "snapshot")

    def __init__(self, ids: int) -> None:
        super().__init__(0)
        #: What the reads depend on besides the items (the cut, a tokenizer's ratio).
        self.key: Any = None
        self.snapshot: list[Any] = []
        self.reads: list[Any] = []
        #: ``sizes[k]``: bytes the copies of items ``[0, k]`` keep alive (charged to the cache budget).
        self.sizes: list[int] = []
        #: Call id -> the item that made (or answered) it first, in that order, one map per rule.
        self.ids: tuple[dict[str, int], ...] = tuple({} for _ in range(ids))
        #: ``replies[k]``: the model's replies in the first ``k`` items (see :func:`running_replies`).
        self.replies: list[int] = [0]

    def cut(self, n: int) -> None:
        """Keep the first ``n`` items only (those the next round shares)."""
        del self.snapshot[n:]
        del self.reads[n:]
        del self.sizes[n:]
        del self.replies[n + 1 :]
        for found in self.ids:
            _forget(found, n)

    def grow(self, reads: list[Any], start: int, end: int, copies: list[tuple[Any, int]]) -> None:
        """Add ``reads[start:end]``, read this round, and the ``(copy, bytes)`` of their items."""
        self.reads += reads[start:end]
        sizes = self.sizes
        total = sizes[-1] if sizes else 0
        for copy, size in copies:
            self.snapshot.append(copy)
            total += size + _READ_BYTES
            sizes.append(total)
        for found in self.ids:
            _forget(found, end)  # ids of items past the end are read again


#: Bytes an item's read and its place in the memo's lists keep alive besides its copy (about).
_READ_BYTES = 64
#: How far back from its end a memo is searched for the last item it shares with a round.
_BACKTRACK = 8
_memo_keys = itertools.count()


def _forget(found: dict[str, int], n: int) -> None:
    """Drop the ids made by item ``n`` or later (the last ones made: an id never moves)."""
    while found and next(reversed(found.values())) >= n:
        found.popitem()


def common(snapshot: list[Any], items: Sequence[Any]) -> int:
    """How many leading items of ``items`` equal the memo's copy (0 when not found cheaply).

    The copy is on the left and holds no container of the caller's, so every item is compared
    field by field: an item changed in place differs and is read again. The end is found first
    (a transcript that moved on, or a retried round with another last call, differs only
    there), then the whole prefix is compared in one C-level list comparison.
    """
    n = min(len(snapshot), len(items))
    k = n
    while k > 0 and n - k < _BACKTRACK and snapshot[k - 1] != items[k - 1]:
        k -= 1
    if k == 0 or n - k >= _BACKTRACK:
        return 0
    if k == len(snapshot):
        return k if snapshot == items[:k] else 0
    return k if snapshot[:k] == items[:k] else 0


P = TypeVar("P", bound=Prefix)


def cut_key(ctx: ReadContext) -> Any:
    """What a memo of reads under ``ctx``'s cut is kept under: no cut, or the policy's cap;
    ``None`` for a cap of unknown identity (its reads are never kept)."""
    if ctx.cap is None:
        return ("none", None)
    return ("cap", ctx.cap_key) if ctx.cap_key is not None else None


class PrefixRound(Generic[P]):
    """One round's use of a reader's :class:`Prefix`: the reads it serves, and what this round adds.

    The memo is taken out of its cache for the round, cut back to the items the round shares
    with it and grown by the new ones, then put back: the history costs one comparison and
    nothing per item. Another thread meanwhile finds no memo and reads in full (the same
    answer); a round that raises drops it (the next reads in full). The memo is kept only for a
    list read under a known cut (``key`` not ``None``): anything else is read in full every round.
    """

    __slots__ = ("boundary", "copies", "items", "memo", "reads", "replies", "slot", "start")

    def __init__(
        self, counter: TokenCounter, name: str, items: Sequence[Any], key: Any, new: Callable[[], P]
    ) -> None:
        self.start = 0
        self.items = items
        #: The model's replies in ``items``, known once the round is kept (see :meth:`keep`).
        self.replies = 0
        self.copies: list[tuple[Any, int]] = []
        #: The first item the memo cannot cover; -1 while every one can.
        self.boundary = -1
        self.slot: list[Any] | None = None
        memo: P | None = None
        if key is not None and items.__class__ is list:
            slot = counter.dialect_state.get(name)
            if slot is None:
                cache: BoundedCache[Prefix] = BoundedCache(
                    max_entries=1, max_chars=1 << 62, group=counter.cache.group
                )
                slot = counter.dialect_state.setdefault(name, [cache, ""])
            self.slot = slot
            memo = slot[0].take(slot[1])
            if memo is not None:
                k = common(memo.snapshot, items) if memo.key == key else 0
                if k:
                    memo.cut(k)
                    self.start = k
                else:  # another transcript (or another cut): the memo is left as it was
                    slot[0].put(slot[1], memo)
                    memo = None
        else:
            self.boundary = 0  # nothing is kept
        self.memo: P = memo if memo is not None else new()
        self.memo.key = key
        #: Every read of the round, in order: the memo's first, then the caller's.
        self.reads: list[Any] = self.memo.reads[:]

    def ids(self) -> tuple[dict[str, int], ...]:
        """The memo's id maps as of the round's start, for the reader to go on from: the reader
        adds to them as it reads (the memo is out of its cache, so no other round sees them)."""
        return self.memo.ids

    def add(self, i: int, raw: Any, clean: bool) -> None:
        """Item ``i`` was read; ``clean`` when it said no problem or unknown and was not cut (an item
        that did is read, and says it, every round). The memo stops before the first item that is
        not clean or holds what cannot be copied."""
        if self.boundary < 0:
            found = sized_private_copy(raw) if clean else None
            if found is None:
                self.boundary = i
            else:
                self.copies.append(found)

    def keep(
        self,
        counter: TokenCounter,
        ids: tuple[dict[str, int], ...],
        then: Callable[[P], None] | None = None,
    ) -> None:
        """Grow the memo by what this round read cleanly and put it back for the next round.

        The memo takes ``ids`` over and drops what it does not cover: a reader that still needs
        them after this passes copies. ``then`` reads the grown memo before it goes back: once
        it is in the cache, another thread's round may take it and cut it back. The round's
        :attr:`replies` are counted here, for the new items only."""
        memo = self.memo
        end = len(self.reads) if self.boundary < 0 else self.boundary
        memo.ids = ids
        memo.grow(self.reads, self.start, end, self.copies)
        # The replies among the items the memo shares were counted in an earlier round.
        found = memo.replies[self.start]
        counts = running_replies(self.items, self.start, found)
        memo.replies += counts[: end - self.start]
        self.replies = counts[-1] if counts else found
        if then is not None:
            then(memo)
        slot = self.slot
        if slot is not None and end and memo.sizes[-1] <= counter.cache.max_chars:
            memo.held_bytes = memo.sizes[-1] + getsizeof(memo.snapshot) + getsizeof(memo.reads)
            slot[1] = str(next(_memo_keys))
            slot[0].put(slot[1], memo)
