"""Memory after 100,000 fits with the bounded cache: it must stay flat.

Every fit is a new support-desk round (the system prompt and eight new messages), so
the token cache (16,384 entries by default) is full after about 2,000 fits and evicts
from then on. Reported between fit 10,000 and fit 100,000:

* RSS, from the kernel;
* live Python objects (``sys.getallocatedblocks``);
* the Python heap by tracemalloc, over a further 12,000-fit window (tracemalloc makes a
  fit about four times slower, so it does not run for all 100,000): traced memory after
  6,000 fits of the window (twelve messages each) against after 12,000. By the first
  reading every cache entry has been replaced since tracing started, so the two
  readings compare like with like.
"""

from __future__ import annotations

import gc
import inspect
import random
import resource
import sys
import time
import tracemalloc
from dataclasses import dataclass

from bench.report import Figure
from otel_ctx import ContextFitter
from otel_ctx.demo import SUPPORT_DESK
from otel_ctx.demo._content import SYSTEM_PROMPT

SECTION = "Memory: 100,000 fits, bounded cache"
#: 2 MiB over 90,000 fits is 23 bytes a fit: any per-fit leak of an object shows up.
FLAT_TOLERANCE_BYTES = 2 * 1024 * 1024
#: tracemalloc is exact: the same 23-ish bytes a fit, over its shorter window.
HEAP_TOLERANCE_PER_FIT = 32
BLOCKS_TOLERANCE = 20_000
#: The fitter's own default bound, read from its signature so the bench measures what users get.
CACHE_ENTRIES: int = inspect.signature(ContextFitter).parameters["cache_entries"].default


@dataclass
class MemoryBenchResult:
    figures: list[Figure]
    notes: list[str]


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
        return pages * resource.getpagesize()
    except OSError:  # not Linux: the peak is the best the OS offers
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _round(rng: random.Random, i: int, repeats: int = 2) -> list[dict[str, str]]:
    """A short status conversation, ``4 * repeats`` messages, all of them new text."""
    oid = f"SO-{rng.randint(1000, 9999)}-{i}"
    out = []
    for k in range(repeats):
        out += [
            {"role": "user", "content": f"Where is my order {oid}? It was due on day {(i + k) % 28 + 1}."},
            {
                "role": "assistant",
                "content": f"Let me check {oid} with the carrier ({i}.{k}, {rng.random():.6f}).",
            },
            {"role": "user", "content": f"Thanks, ticket {i}.{k}: I am home after {rng.randint(1, 12)} pm."},
            {
                "role": "assistant",
                "content": f"{oid} is out for delivery; route {rng.getrandbits(32):x} ({k}).",
            },
        ]
    return out


def _fits(fitter: ContextFitter, rng: random.Random, start: int, stop: int, repeats: int = 2) -> float:
    t0 = time.perf_counter()
    for i in range(start, stop):
        fitter.fit(_round(rng, i, repeats), system_prompt=SYSTEM_PROMPT, task_type="status")
    return (time.perf_counter() - t0) / max(1, stop - start)


def _mark(fitter: ContextFitter) -> tuple[int, int, int]:
    gc.collect()
    return _rss_bytes(), sys.getallocatedblocks(), len(fitter.counter.cache)


def run(*, quick: bool = False) -> MemoryBenchResult:
    total = 20_000 if quick else 100_000
    checkpoint = total // 10
    window = 4_000 if quick else 12_000
    fitter = ContextFitter(SUPPORT_DESK, model="gpt-4o", encoding="cl100k_base")
    rng = random.Random(5)
    filling = _fits(fitter, rng, 1, checkpoint + 1)
    rss_a, blocks_a, cache_a = _mark(fitter)
    trajectory = [rss_a]
    for start in range(checkpoint + 1, total - checkpoint + 1, checkpoint):
        _fits(fitter, rng, start, start + checkpoint)
        trajectory.append(_mark(fitter)[0])
    evicting = _fits(fitter, rng, total - checkpoint + 1, total + 1)
    rss_b, blocks_b, cache_b = _mark(fitter)
    trajectory.append(rss_b)
    half = trajectory[(total // 2) // checkpoint - 1]  # the reading at fit total / 2

    # Twelve messages a fit here: the whole cache is replaced before the first reading.
    tracemalloc.start()
    _fits(fitter, rng, total + 1, total + window // 2 + 1, repeats=3)
    gc.collect()
    heap_a = tracemalloc.get_traced_memory()[0]
    _fits(fitter, rng, total + window // 2 + 1, total + window + 1, repeats=3)
    gc.collect()
    heap_b = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()

    mib = 1024 * 1024
    rss_growth, blocks_growth, heap_growth = rss_b - rss_a, blocks_b - blocks_a, heap_b - heap_a
    per_fit = rss_growth / (total - checkpoint)
    figures = [
        Figure(
            SECTION,
            f"RSS growth, fit {checkpoint:,} → {total:,}",
            f"{rss_growth / mib:+.2f} MiB",
            f"flat (≤ {FLAT_TOLERANCE_BYTES // mib} MiB)",
            rss_growth <= FLAT_TOLERANCE_BYTES,
            f"{rss_a / mib:.1f} → {rss_b / mib:.1f} MiB ({per_fit:+.1f} B/fit); cache {cache_a:,} → "
            f"{cache_b:,} entries (bound {CACHE_ENTRIES:,})",
        ),
        Figure(
            SECTION,
            f"RSS growth, fit {total // 2:,} → {total:,}",
            f"{(rss_b - half) / mib:+.2f} MiB",
            "(context)",
            None,
            "RSS every {:,} fits: {} MiB".format(
                checkpoint, " → ".join(f"{r / mib:.1f}" for r in trajectory)
            ),
        ),
        Figure(
            SECTION,
            f"live Python objects, fit {checkpoint:,} → {total:,}",
            f"{blocks_growth:+,}",
            f"flat (≤ {BLOCKS_TOLERANCE:,})",
            blocks_growth <= BLOCKS_TOLERANCE,
            f"{blocks_a:,} → {blocks_b:,} allocated blocks",
        ),
        Figure(
            SECTION,
            f"Python heap growth over {window // 2:,} more fits (tracemalloc)",
            f"{heap_growth / 1024:+.1f} KiB",
            f"flat (≤ {HEAP_TOLERANCE_PER_FIT * (window // 2) // 1024} KiB)",
            heap_growth <= HEAP_TOLERANCE_PER_FIT * (window // 2),
            f"traced {heap_a / mib:.1f} → {heap_b / mib:.1f} MiB, "
            f"fits {total + window // 2:,} → {total + window:,}",
        ),
        Figure(
            SECTION,
            "fit time, cache full and evicting ÷ cache filling",
            f"{evicting / filling:.2f}×",
            "(context)",
            None,
            f"last {checkpoint:,} fits {evicting * 1e6:.0f} µs, first {checkpoint:,} {filling * 1e6:.0f} µs",
        ),
    ]
    notes = []
    if rss_growth > FLAT_TOLERANCE_BYTES and blocks_growth <= BLOCKS_TOLERANCE:
        notes.append(
            "RSS moved in steps while the live Python objects and the traced heap stayed flat: the "
            "allocator keeping arenas and the cache's hash table resizing under eviction churn, bounded "
            "(see the RSS trajectory), not memory held per fit."
        )
    return MemoryBenchResult(figures, notes)
