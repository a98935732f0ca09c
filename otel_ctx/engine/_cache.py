"""Bounded text -> value caches, safe to share between threads, under one process-wide budget.

Token counts and capped texts are cached by their text, so the next round of a conversation
costs only its new messages. All caches share one budget (:func:`set_cache_budget`, default
256 MiB): a process serving 64 models holds 64 fitters' caches, each of which would otherwise
fill its own bound.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from otel_ctx.engine._errors import InvalidRequestError

V = TypeVar("V")

#: The process-wide bound on every cache's bytes unless configured otherwise.
DEFAULT_CACHE_BUDGET_BYTES = 256 * 1024 * 1024
#: Sets the budget in MiB for a process, read on first use (``set_cache_budget`` wins).
ENV_CACHE_BUDGET = "OTEL_CTX_CACHE_MIB"
#: What one entry costs beyond its key's (and a text value's) own object: the dict slot, the
#: ordered-dict link and the value's share. Measured with tracemalloc: 100-130 bytes.
ENTRY_OVERHEAD_BYTES = 128
#: After a budget eviction the total is brought this far under the bound, so the next few
#: inserts do not each evict again.
_EVICT_TO = 0.9

_tick = itertools.count(1)


class CacheGroup:
    """The caches of one owner (a fitter), evicted together by least recent use.

    Reads stay a lock-free dict lookup; a group is touched once per request read, so the
    least recently used owner is the one whose requests came last, whatever its hits.
    """

    __slots__ = ("__weakref__", "caches", "last_used")

    def __init__(self) -> None:
        self.last_used = next(_tick)
        self.caches: weakref.WeakSet[BoundedCache[object]] = weakref.WeakSet()

    def touch(self) -> None:
        self.last_used = next(_tick)


class CacheBudget:
    """One bound on the bytes held by every cache in the process, evicting the least recently used group."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = _check_budget(max_bytes, "max_bytes")
        self._bytes = 0
        self._groups: weakref.WeakSet[CacheGroup] = weakref.WeakSet()
        # Re-entrant: a cache collected during an eviction gives its bytes back on this thread.
        self._lock = threading.RLock()
        #: Entries evicted to keep the process under its budget (figures for the bench).
        self.evictions = 0

    @property
    def bytes(self) -> int:
        """Bytes the process's caches hold now, as charged by their entries."""
        return self._bytes

    def join(self, group: CacheGroup) -> None:
        with self._lock:
            self._groups.add(group)

    def charge(self, delta: int, group: CacheGroup) -> None:
        """Count ``delta`` bytes (negative: released); over the budget, evict least recent groups first.

        Called with no cache lock held: eviction takes the budget's lock, then one cache's.
        """
        with self._lock:
            self._bytes += delta
            if self._bytes <= self.max_bytes:
                return
            target = int(self.max_bytes * _EVICT_TO)
            for victim in sorted(self._groups, key=lambda g: g.last_used):
                for cache in list(victim.caches):
                    if self._bytes <= target:
                        return
                    freed, entries = cache._shed(self._bytes - target)
                    self._bytes -= freed
                    self.evictions += entries

    def released(self, nbytes: int) -> None:
        """A cache let go of ``nbytes`` by itself (its own bound, a clear)."""
        with self._lock:
            self._bytes -= nbytes


def _check_budget(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1024 * 1024:
        raise InvalidRequestError(where, f"must be an integer number of bytes >= 1 MiB, got {value!r}")
    return value


def _budget_from_env() -> int:
    raw = os.environ.get(ENV_CACHE_BUDGET, "").strip()
    if not raw:
        return DEFAULT_CACHE_BUDGET_BYTES
    try:
        mib = int(raw)
    except ValueError:
        raise InvalidRequestError(
            ENV_CACHE_BUDGET, f"must be a whole number of MiB, got {raw[:40]!r}"
        ) from None
    if not 1 <= mib <= 1 << 20:
        raise InvalidRequestError(ENV_CACHE_BUDGET, f"must be 1 to 1048576 MiB, got {mib}")
    return mib * 1024 * 1024


_budget: CacheBudget | None = None
_budget_lock = threading.Lock()


def cache_budget() -> CacheBudget:
    """The process's cache budget (created on first use, from ``OTEL_CTX_CACHE_MIB`` if set)."""
    global _budget
    if _budget is None:
        with _budget_lock:
            if _budget is None:
                _budget = CacheBudget(_budget_from_env())
    return _budget


def set_cache_budget(max_bytes: int) -> None:
    """Bound every cache of the process together to ``max_bytes`` (at least 1 MiB).

    A lower bound than what is held evicts at the next insert, least recently used
    fitters first.
    """
    budget = cache_budget()
    budget.max_bytes = _check_budget(max_bytes, "set_cache_budget.max_bytes")


class Held:
    """A cached value that keeps more than itself alive: it says how many bytes, and is charged them."""

    __slots__ = ("held_bytes",)

    def __init__(self, held_bytes: int) -> None:
        self.held_bytes = held_bytes


def _entry_bytes(text: str, value: object) -> int:
    size = sys.getsizeof(text) + ENTRY_OVERHEAD_BYTES
    if value.__class__ is str:
        size += sys.getsizeof(value)
    elif isinstance(value, Held):
        size += value.held_bytes
    return size


class BoundedCache(Generic[V]):
    """A bounded text -> value cache (token counts, capped texts).

    Bounded in entries, in characters held (the keys keep the texts alive) and, with every
    other cache, by the process's :class:`CacheBudget`. Its own eviction is first-in first-out
    (O(1); a conversation is re-counted at most once after it). A text over ``max_item_chars``
    is not cached: a one-off 10 MB payload must not flush a whole conversation. Reads take no
    lock (one dict lookup is atomic); writes do, or the totals drift when threads interleave.
    """

    __slots__ = (
        "__weakref__",
        "_budget",
        "_bytes",
        "_chars",
        "_counts",
        "_lock",
        "get",
        "group",
        "max_chars",
        "max_entries",
        "max_item_chars",
        "misses",
    )

    def __init__(
        self,
        max_entries: int = 65_536,
        max_chars: int = 64_000_000,
        *,
        group: CacheGroup | None = None,
        budget: CacheBudget | None = None,
    ) -> None:
        # OrderedDict: popitem(last=False) evicts in O(1); a plain dict's next(iter()) scans
        # the deleted slots piled up at its front, which made a full cache 2-4x slower.
        self._counts: OrderedDict[str, V] = OrderedDict()
        self._chars = 0
        self._bytes = 0
        self._lock = threading.Lock()
        self.max_entries = max_entries
        self.max_chars = max_chars
        self.max_item_chars = max(1, max_chars // 16)
        self.misses = 0
        self.group = group if group is not None else CacheGroup()
        self.group.caches.add(self)  # type: ignore[arg-type]
        self._budget = budget if budget is not None else cache_budget()
        self._budget.join(self.group)
        # Bound once: the lookup is on every message of every round.
        self.get: Callable[[str], V | None] = self._counts.get

    def __len__(self) -> int:
        return len(self._counts)

    @property
    def chars(self) -> int:
        return self._chars

    @property
    def bytes(self) -> int:
        """Bytes this cache is charged for in the process budget."""
        return self._bytes

    def touch(self) -> None:
        """Mark this cache's owner as just used (one request read)."""
        self.group.last_used = next(_tick)

    def put(self, text: str, count: V) -> None:
        size = len(text)
        if size > self.max_item_chars:
            return
        entry = _entry_bytes(text, count)
        with self._lock:
            counts = self._counts
            if text in counts:
                return
            released = 0
            while counts and (len(counts) >= self.max_entries or self._chars + size > self.max_chars):
                released += self._evict_oldest()
            counts[text] = count
            self._chars += size
            self._bytes += entry - released
        self._budget.charge(entry - released, self.group)

    def take(self, text: str) -> V | None:
        """Remove ``text``'s value and return it (``None`` when absent), its bytes given back.

        For a value its holder changes in place and puts back: while it is out of the cache
        no other thread can find it, and the budget is charged its new size when it is put.
        """
        with self._lock:
            value = self._counts.pop(text, None)
            if value is None:
                return None
            self._chars -= len(text)
            freed = _entry_bytes(text, value)
            self._bytes -= freed
        self._budget.released(freed)
        return value

    def _shed(self, nbytes: int) -> tuple[int, int]:
        """Evict oldest entries until ``nbytes`` are freed or the cache is empty; (freed, entries)."""
        freed = entries = 0
        with self._lock:
            while self._counts and freed < nbytes:
                freed += self._evict_oldest()
                entries += 1
            self._bytes -= freed
        return freed, entries

    def _evict_oldest(self) -> int:
        """Drop the oldest entry (the lock held) and return the bytes it was charged."""
        oldest, value = self._counts.popitem(last=False)
        self._chars -= len(oldest)
        return _entry_bytes(oldest, value)

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()
            self._chars = 0
            released, self._bytes = self._bytes, 0
        self._budget.released(released)

    def __del__(self) -> None:
        # A dropped fitter's caches give their bytes back to the budget.
        # At interpreter shutdown there is nothing left to account for.
        with contextlib.suppress(Exception):
            if self._bytes:
                self._budget.released(self._bytes)
