"""Claude's own token counts, offline: the ``ctok`` reconstruction of its tokenizer, loaded on first use.

Anthropic publishes no tokenizer. ``ctok`` (MIT, ``pip install 'otel-ctx[claude-tokenizer]'``)
rebuilds its counts from measured vocabularies: one for Claude 3 up to Opus/Sonnet 4.6, one for
Opus 4.7 and later (4.8 onwards reads it under a shorter message frame). Its counts reproduce
``count_tokens`` on single messages; this module hands the Anthropic adapter the *content*
tokens of a text (the single-message frame taken off), so the adapter's own framing rules
(messages, tools, system) sit on top as they do for the fallback encoding.

Why an optional extra and not a dependency: the vocabularies are 4.7 MB of data and tiling
costs about 50 times tiktoken per character, which only an Anthropic fitter should pay; it is
imported the first time an Anthropic body is counted, never on another provider's path. Why the
extra is marked for Python 3.12+: ``ctok`` declares ``Requires-Python >=3.12`` (its metadata,
not its code: it runs on 3.11 and parses as 3.10, where it is installed with ``pip install --no-deps
--ignore-requires-python ctok``; Unicode data older than 3.12's may price a handful of
newly-assigned characters differently). Without it the adapter counts with cl100k_base and the
family's measured ratio, as before. Either way the count is an estimate: the reconstruction
is not Anthropic's tokenizer, and the framing around the text is measured from bills.

Why not tiktoken's encoder: the data is no BPE merge table but a vocabulary of pieces over a
marked stream (word, case and byte markers), tiled at the least cost; only ``ctok`` reads it.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

from otel_ctx.engine._cache import BoundedCache
from otel_ctx.engine._tokens import TokenCounter

#: The distribution the extra installs and the module imported from it.
MODULE = "ctok"
_lock = threading.Lock()
#: The imported module, ``None`` when it is not installed; unset until first asked.
_loaded: list[Any] = []
#: The single-message frame ``ctok`` adds to a count, per vocabulary generation.
_frames: dict[str, int] = {}
#: How ``ctok.tokenize`` writes a frame token (its documented notation).
_PAD = "\u27e8pad\u27e9"


def _module() -> Any | None:
    """``ctok`` imported once, or ``None`` when the extra is not installed (or cannot load)."""
    if not _loaded:
        with _lock:
            if not _loaded:
                try:
                    mod: Any = importlib.import_module(MODULE)
                except ImportError:
                    mod = None
                _loaded.append(mod)
    return _loaded[0]


def available() -> bool:
    """Whether Claude's reconstructed tokenizer is installed (the extra's ``ctok``)."""
    return _module() is not None


def tokenizer_name(generation: str) -> str:
    """How a result names the tokenizer that counted it (``ctok-3.0``: the reconstruction's
    vocabulary for Claude 3 to 4.6), in place of the fallback encoding's name."""
    return f"{MODULE}-{generation}"


def _frame(mod: Any, generation: str) -> int:
    """The frame tokens ``ctok`` puts before a single message's content (its ``⟨pad⟩`` tokens)."""
    n = _frames.get(generation)
    if n is None:
        n = sum(1 for t in mod.tokenize("a", generation) if t == _PAD)
        _frames[generation] = n
    return n


def claude_text(counter: TokenCounter, generation: str) -> Callable[[str], int] | None:
    """A counter of ``generation``'s content tokens in a text (``"3.0"``, ``"4.7"``, ``"4.8"``),
    or ``None`` without the extra.

    Counts are cached by text in a cache of the fitter's own group (evicted with its other
    caches) that the counter keeps (:attr:`TokenCounter.text_caches`), so it lives and dies
    with the fitter: the next round of a conversation tiles only its new text.
    """
    mod = _module()
    if mod is None:
        return None
    name = tokenizer_name(generation)
    cache = counter.text_caches.get(name)
    if cache is None:
        cache = counter.text_caches.setdefault(name, BoundedCache(group=counter.cache.group))
    frame = _frame(mod, generation)
    token_count = mod.token_count

    def text(value: str) -> int:
        n = cache.get(value)
        if n is None:
            n = token_count(value, generation) - frame if value else 0
            cache.misses += 1
            cache.put(value, n)
        return n

    return text
