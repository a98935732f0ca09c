"""Capping a tool result at the tool boundary, the cheapest cut: trimmed there, it is trimmed on
every later round, and a marker says how much was cut so nobody mistakes the head for the whole.
"""

from __future__ import annotations

from otel_ctx.engine._cache import BoundedCache
from otel_ctx.engine._tokens import TokenCounter


class Capper:
    """Cuts texts to a token cap, remembering each cut (the same payload recurs every round)."""

    def __init__(self, counter: TokenCounter, *, max_chars: int) -> None:
        self.counter = counter
        self.cache: BoundedCache[str] = BoundedCache(
            max_entries=1_024, max_chars=max_chars, group=counter.cache.group
        )

    def __call__(self, text: str, cap: int) -> str:
        """``text`` if it has at most ``cap`` tokens, else its first tokens plus a marker.

        Bounded time on any size: only a prefix of a few characters per token of the
        cap is encoded (widened if it holds too few tokens), never the whole payload.
        """
        counter = self.counter
        known = counter.cache.get(text)
        if (known is not None and known <= cap) or len(text) * 4 <= cap:
            return text  # a token is at least one UTF-8 byte; a character at most four
        key = f"{cap}\x00{text}"
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        probe_len = cap * 8
        while True:
            probe = text[:probe_len]
            tokens = counter.encode(probe)
            if len(probe) == len(text):
                counter.cache.put(text, len(tokens))
                if len(tokens) <= cap:
                    return text
                break
            if len(tokens) > cap:
                break
            probe_len *= 4
        marker = (
            f"\n[otel-ctx: tool result cut to {cap:,} tokens at the tool boundary; "
            f"{len(text):,} characters in the original]"
        )
        if counter.text(marker) * 2 > cap:
            marker = " [cut]"
        keep = max(0, cap - counter.text(marker))
        while True:
            head = counter.encoding.decode_bytes(tokens[:keep]).decode("utf-8", errors="ignore")
            out = head + marker
            over = counter.text(out) - cap
            if over <= 0 or keep == 0:
                break
            keep = max(0, keep - over)
        self.cache.put(key, out)
        return out

    def clear(self) -> None:
        self.cache.clear()
