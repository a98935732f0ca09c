"""What a dialect adapter is: a provider's request read into the engine's model, and back.

An adapter reads a request body (or a bare transcript) into a
:class:`~otel_ctx.engine.model.RequestModel`, counting every billed field with the
provider's accounting, and writes the fitted request back in the caller's dialect:
the kept items are the caller's own objects, every field the fit did not touch is
left as it was, and the caller's body is never mutated.

The contract itself (:class:`Adapter`, :class:`ReadContext`, :class:`Reading`,
:class:`Fitted`) is the engine's, in :mod:`otel_ctx.engine.dialect`; this module
re-exports it with the helpers every dialect shares. A module that provides a dialect
defines a module-level ``ADAPTER`` instance and imports no other dialect; the
registry in :mod:`otel_ctx.dialects` finds it by provider name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The contract lives with the engine (which must not import an adapter); adapters import it from here.
from otel_ctx.adapters.media import AUDIO_BYTES_PER_TOKEN, pdf_pages
from otel_ctx.engine.dialect import Adapter, CapText, Fitted, ReadContext, Reading
from otel_ctx.engine.errors import InvalidRequestError
from otel_ctx.engine.tokens import to_json as _engine_json

__all__ = [
    "ARRAY",
    "AUDIO_BYTES_PER_TOKEN",
    "SUMMARY_PREFIX",
    "Adapter",
    "CapText",
    "Fitted",
    "ReadContext",
    "Reading",
    "as_mapping",
    "kept_items",
    "pdf_pages",
    "private_copy",
    "sized_private_copy",
    "to_json",
]

#: What a JSON array may arrive as: a caller builds messages, content parts and tools as lists or
#: tuples alike, and the SDKs send both as arrays, so both are read (and billed) the same.
ARRAY = (list, tuple)

#: The text a string summary is sent with, in every dialect (the model reads it as context).
SUMMARY_PREFIX = "Summary of earlier conversation (compacted by otel-ctx):\n"


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


def _plain(value: Any) -> Any:
    block = as_mapping(value)
    if block is None:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
    return dict(block)


def to_json(value: Any, where: str, index: int | None, error: type[InvalidRequestError]) -> str:
    """``value`` as the compact JSON that is counted, SDK objects inside it dumped; typed errors."""
    return _engine_json(value, where, index, error, default=_plain)


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
