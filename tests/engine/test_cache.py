"""One cache budget for the whole process, whatever the number of models (not timed).

Each fitter caches token counts, capped texts and read turns by text. A process serving
64 models holds 64 fitters; the caches of all of them together stay under one bound, and
the budget evicts the least recently used fitter's entries first.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_ctx import BudgetPolicy, ContextFitter, InvalidRequestError
from otel_ctx.engine import _cache as cache_module
from otel_ctx.engine._cache import BoundedCache, CacheBudget, CacheGroup, cache_budget, set_cache_budget

MIB = 1024 * 1024
BUDGET = 8 * MIB


@pytest.fixture
def small_budget() -> Iterator[CacheBudget]:
    budget = cache_budget()
    before = budget.max_bytes
    set_cache_budget(BUDGET)
    yield budget
    budget.max_bytes = before


def _messages(model: int, size: int = 200_000, parts: int = 10) -> list[dict[str, str]]:
    chunk = size // parts
    return [
        {
            "role": "user" if k % 2 == 0 else "assistant",
            "content": (f"model {model} message {k}: " + "the parcel left the depot at dawn. " * chunk)[
                :chunk
            ],
        }
        for k in range(parts)
    ]


def _held(fitters: list[ContextFitter]) -> int:
    return sum(c.bytes for f in fitters for c in f.counter.cache.group.caches)


def test_64_models_stay_under_one_process_budget(small_budget: CacheBudget) -> None:
    policy = BudgetPolicy(context_length=1_000_000, reserved_output=1_000)
    ContextFitter(policy, model="gpt-4o").count(_messages(-1, size=100))  # loads the encoding once
    gc.collect()
    fitters: list[ContextFitter] = []
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        for i in range(64):
            fitter = ContextFitter(policy, model=f"gpt-4o-tenant-{i}")
            fitter.count(_messages(i))
            fitters.append(fitter)
            assert small_budget.bytes <= small_budget.max_bytes
        grown, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # 64 x 200 kB of text went through the caches; what they hold is under the bound.
    assert small_budget.evictions > 0
    assert _held(fitters) <= BUDGET
    # The charge covers what the process really holds (a text two caches share is charged twice):
    # tracemalloc sees the caches plus 64 fitters' own small objects.
    assert grown - start < BUDGET + 2 * MIB
    # Least recently used first: the last model is warm, the first one was evicted.
    last, first = fitters[-1], fitters[0]
    misses = last.counter.cache.misses
    last.count(_messages(63))
    assert last.counter.cache.misses == misses
    misses = first.counter.cache.misses
    first.count(_messages(0))
    assert first.counter.cache.misses > misses


def test_a_dropped_fitter_gives_its_bytes_back(small_budget: CacheBudget) -> None:
    gc.collect()
    before = small_budget.bytes
    fitter = ContextFitter(BudgetPolicy(context_length=100_000, reserved_output=1_000))
    fitter.count(_messages(1, size=20_000))
    assert small_budget.bytes > before
    del fitter
    gc.collect()
    assert small_budget.bytes == before


def test_the_budget_is_validated() -> None:
    for bad in (0, -1, 1.5, True, "256", 1023):
        with pytest.raises(InvalidRequestError, match="max_bytes"):
            set_cache_budget(bad)  # type: ignore[arg-type]


def test_the_budget_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache_module.ENV_CACHE_BUDGET, "64")
    assert cache_module._budget_from_env() == 64 * MIB
    for bad in ("lots", "0", "-3", "1e9"):
        monkeypatch.setenv(cache_module.ENV_CACHE_BUDGET, bad)
        with pytest.raises(InvalidRequestError, match=cache_module.ENV_CACHE_BUDGET):
            cache_module._budget_from_env()


@settings(max_examples=100, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 40_000)), min_size=1, max_size=120),
    budget_mib=st.integers(1, 2),
)
def test_the_charged_total_is_what_the_caches_hold(sizes: list[tuple[int, int]], budget_mib: int) -> None:
    budget = CacheBudget(budget_mib * MIB)
    groups = [CacheGroup() for _ in range(4)]
    caches = [BoundedCache[int](max_entries=50, max_chars=200_000, group=g, budget=budget) for g in groups]
    for n, (which, size) in enumerate(sizes):
        caches[which].touch()
        caches[which].put(f"{n}:" + "x" * size, size)
        assert budget.bytes <= budget.max_bytes
        assert budget.bytes == sum(c.bytes for c in caches)
    for c in caches:
        c.clear()
    assert budget.bytes == 0


def test_a_value_taken_out_gives_its_bytes_back_until_it_is_put_again() -> None:
    budget = CacheBudget(MIB)
    cache = BoundedCache[str](max_entries=4, max_chars=10_000, budget=budget)
    cache.put("memo", "x" * 500)
    charged = budget.bytes
    assert charged == cache.bytes > 500
    assert cache.take("memo") == "x" * 500
    assert (budget.bytes, cache.bytes, cache.chars, len(cache)) == (0, 0, 0, 0)
    assert cache.take("memo") is None  # taken once: another taker finds nothing
    cache.put("memo", "x" * 500)
    assert budget.bytes == charged
