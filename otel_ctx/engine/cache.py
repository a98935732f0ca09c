"""A bounded text -> value cache, safe to share between threads.

Token counts and capped texts are cached by their text: the next round of a
conversation then costs only its new messages.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")


class BoundedCache(Generic[V]):
    """A bounded text -> value cache (token counts, capped texts).

    Bounded both in entries and in characters held, because the keys keep the texts
    alive. Eviction is first-in first-out: O(1), and a conversation's messages are
    re-counted at most once after eviction. Texts longer than ``max_item_chars`` are
    not cached (a one-off 10 MB payload must not flush a whole conversation).

    Reads take no lock (one dict lookup is atomic); writes do, because an insert, its
    evictions and the character total must move together or the total drifts when
    threads interleave, and the cache then evicts early or grows past its bound.
    """

    __slots__ = (
        "_chars",
        "_counts",
        "_lock",
        "get",
        "max_chars",
        "max_entries",
        "max_item_chars",
        "misses",
    )

    def __init__(self, max_entries: int = 65_536, max_chars: int = 64_000_000) -> None:
        # OrderedDict: popitem(last=False) evicts in O(1); a plain dict's next(iter()) scans
        # the deleted slots piled up at its front, which made a full cache 2-4x slower.
        self._counts: OrderedDict[str, V] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()
        self.max_entries = max_entries
        self.max_chars = max_chars
        self.max_item_chars = max(1, max_chars // 16)
        self.misses = 0
        # Bound once: the lookup is on every message of every round.
        self.get: Callable[[str], V | None] = self._counts.get

    def __len__(self) -> int:
        return len(self._counts)

    @property
    def chars(self) -> int:
        return self._chars

    def put(self, text: str, count: V) -> None:
        size = len(text)
        if size > self.max_item_chars:
            return
        with self._lock:
            counts = self._counts
            if text in counts:
                return
            while counts and (len(counts) >= self.max_entries or self._chars + size > self.max_chars):
                oldest, _ = counts.popitem(last=False)
                self._chars -= len(oldest)
            counts[text] = count
            self._chars += size

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()
            self._chars = 0
