"""``otel_ctx.task`` follows the agent: threads and executors, generators, asyncio, re-entry.

End to end with the real openai SDK against the fake provider (each round's span says
which task type and conversation its call was booked under), and the bookkeeping
itself as a hypothesis property over arbitrary interleavings of generators.
"""

from __future__ import annotations

import asyncio
import inspect
import operator
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from typing import Annotated, Any, TypedDict

import pytest
from fake_provider import FakeProvider
from hypothesis import given
from hypothesis import strategies as st
from instrument_support import CHAT, Instrumented, async_openai_client, instrumented, openai_client
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan
from support import missing

import otel_ctx
from otel_ctx import names as n
from otel_ctx.instrumentation._context import TaskInfo, current_task

__all__ = ["instrumented"]  # the fixture, imported for pytest

DEFAULT = "default"  # the instrumentor's task type when none is named
# Without a conversation, a call's round is the answers in its transcript plus one: CHAT holds one.


def _booked(cap: Instrumented) -> list[tuple[str, str | None, int]]:
    """(task type, conversation, round) of every observed call, in the order they ended."""
    out = []
    for span in cap.rounds():
        a = span.attributes or {}
        conv = a.get(n.GEN_AI_CONVERSATION_ID)
        out.append((str(a[n.TASK_TYPE]), None if conv is None else str(conv), int(a[n.ROUND])))  # type: ignore[arg-type]
    return out


# -- threads and executors ---------------------------------------------------------------------


def test_a_thread_pool_worker_gets_the_task_through_carry(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    oc = openai_client(fake_provider)

    def answer(_: int) -> str:
        return oc.chat.completions.create(model="gpt-4o", messages=CHAT).id

    with otel_ctx.task("returns", conversation_id="pool-1"), ThreadPoolExecutor(max_workers=3) as pool:
        ids = list(pool.map(otel_ctx.carry(answer), range(6)))
    assert len(ids) == 6
    booked = _booked(instrumented)
    assert {(t, c) for t, c, _ in booked} == {("returns", "pool-1")}
    assert sorted(r for _, _, r in booked) == [1, 2, 3, 4, 5, 6]  # one conversation, counted once each


def test_without_carry_a_pool_worker_starts_with_no_task(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    # What the docs say: Python hands no context to an executor's worker.
    oc = openai_client(fake_provider)
    with otel_ctx.task("returns", conversation_id="pool-2"), ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(oc.chat.completions.create, model="gpt-4o", messages=CHAT).result()
    ((task_type, conversation, _),) = _booked(instrumented)
    assert (task_type, conversation) == (DEFAULT, None)


def test_a_plain_thread_gets_the_task_through_carry_and_submit_after_the_block_keeps_it(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    oc = openai_client(fake_provider)

    def call() -> None:
        oc.chat.completions.create(model="gpt-4o", messages=CHAT)

    with otel_ctx.task("status", conversation_id="thread-1"):
        worker = otel_ctx.carry(call)  # wrapped inside the block ...
        thread = threading.Thread(target=otel_ctx.carry(call))
        thread.start()
        thread.join()
    later = threading.Thread(target=worker)  # ... run after it has closed
    later.start()
    later.join()
    call()  # the caller itself is outside the block again
    assert _booked(instrumented) == [("status", "thread-1", 1), ("status", "thread-1", 2), (DEFAULT, None, 2)]


def test_langgraph_parallel_nodes_in_its_executor_keep_the_task(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    # LangGraph runs a sync graph's nodes on LangChain's ContextThreadPoolExecutor, which
    # copies the context: the task reaches them with no carry.
    try:
        from langgraph.graph import END, START, StateGraph
    except ImportError:
        missing("langgraph (the test extra) is not installed")
        return
    oc = openai_client(fake_provider)
    threads: set[str] = set()

    class State(TypedDict):
        answers: Annotated[list[str], operator.add]

    def node(state: State) -> dict[str, list[str]]:
        threads.add(threading.current_thread().name)
        return {"answers": [oc.chat.completions.create(model="gpt-4o", messages=CHAT).id]}

    graph = StateGraph(State)
    graph.add_node("lookup", node)
    graph.add_node("policy", node)
    for name in ("lookup", "policy"):
        graph.add_edge(START, name)
        graph.add_edge(name, END)
    with otel_ctx.task("returns", conversation_id="graph-1"):
        out = graph.compile().invoke({"answers": []})
    assert len(out["answers"]) == 2
    assert threading.current_thread().name not in threads  # the nodes ran on worker threads
    booked = _booked(instrumented)
    assert {(t, c) for t, c, _ in booked} == {("returns", "graph-1")}
    assert sorted(r for _, _, r in booked) == [1, 2]


def test_carry_refuses_what_it_cannot_carry() -> None:
    async def answer() -> None:
        return None

    with pytest.raises(TypeError, match=r"plain function, got the async .*answer"):
        otel_ctx.carry(answer)
    with pytest.raises(TypeError, match="takes a function, got str"):
        otel_ctx.carry("answer")  # type: ignore[arg-type]


def test_a_worker_handed_opentelemetrys_context_gets_the_task(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    # How OpenTelemetry's own propagation (opentelemetry-instrumentation-threading among
    # it) hands context to a thread: capture the current context, attach it in the worker.
    oc = openai_client(fake_provider)

    def worker(captured: otel_context.Context) -> None:
        token = otel_context.attach(captured)
        try:
            oc.chat.completions.create(model="gpt-4o", messages=CHAT)
        finally:
            otel_context.detach(token)

    with otel_ctx.task("dispute", conversation_id="otel-1"):
        thread = threading.Thread(target=worker, args=(otel_context.get_current(),))
        thread.start()
        thread.join()
    assert _booked(instrumented) == [("dispute", "otel-1", 1)]


# -- generators --------------------------------------------------------------------------------


def _runs(cap: Instrumented) -> dict[str, ReadableSpan]:
    """The ended run spans, by conversation."""
    return {str((s.attributes or {})[n.GEN_AI_CONVERSATION_ID]): s for s in cap.spans(n.SPAN_RUN)}


def _under(span: ReadableSpan, parent: ReadableSpan) -> bool:
    """Whether ``span`` is a direct child of ``parent``."""
    return (
        span.parent is not None
        and parent.context is not None
        and span.parent.span_id == parent.context.span_id
        and span.context is not None
        and span.context.trace_id == parent.context.trace_id
    )


def test_two_conversations_as_decorated_generators_each_have_their_own_run(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    oc = openai_client(fake_provider)
    tracer = instrumented.tracer_provider.get_tracer("agent")

    def conversation(task_type: str, conv: str) -> Iterator[str]:
        @otel_ctx.task(task_type, conversation_id=conv)
        def steps() -> Iterator[str]:
            for _ in range(3):
                yield oc.chat.completions.create(model="gpt-4o", messages=CHAT).id

        return steps()

    a, b = conversation("returns", "A"), conversation("status", "B")
    for i in range(3):
        next(a)
        next(b)
        with tracer.start_as_current_span(f"caller-{i}"):  # the caller's own work, between steps
            oc.chat.completions.create(model="gpt-4o", messages=CHAT)
        assert current_task() == TaskInfo()
    assert list(a) == [] and list(b) == []
    booked = _booked(instrumented)
    assert [(t, c) for t, c, _ in booked] == [("returns", "A"), ("status", "B"), (DEFAULT, None)] * 3
    assert [r for _, c, r in booked if c == "A"] == [1, 2, 3]
    assert [r for _, c, r in booked if c == "B"] == [1, 2, 3]

    runs = _runs(instrumented)
    assert set(runs) == {"A", "B"}
    run_a, run_b = runs["A"], runs["B"]
    assert run_a.parent is None and run_b.parent is None  # each ticket is a trace of its own
    assert run_a.context is not None and run_b.context is not None
    assert run_a.context.trace_id != run_b.context.trace_id
    for span in instrumented.rounds():
        conv = (span.attributes or {}).get(n.GEN_AI_CONVERSATION_ID)
        if conv is None:  # the caller's call: under the caller's span, in no ticket's trace
            assert not _under(span, run_a) and not _under(span, run_b)
            assert span.parent is not None and span.context is not None
            assert span.context.trace_id not in {run_a.context.trace_id, run_b.context.trace_id}
        else:
            assert _under(span, runs[str(conv)])
    for caller in (s for s in instrumented.spans() if s.name.startswith("caller-")):
        assert caller.parent is None, f"{caller.name} was made a child of a ticket's run"
    assert {(s.attributes or {})[n.ROUNDS] for s in runs.values()} == {3}


def test_the_decorator_on_a_generator_function(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    oc = openai_client(fake_provider)
    tracer = instrumented.tracer_provider.get_tracer("agent")

    @otel_ctx.task("returns", conversation_id="gen-1")
    def steps(n_calls: int) -> Iterator[int]:
        """An agent loop that yields each answer's length."""
        got = 0
        for _ in range(n_calls):
            sent = yield len(oc.chat.completions.create(model="gpt-4o", messages=CHAT).id)
            got += sent or 0
        return got

    assert steps.__name__ == "steps" and steps.__doc__ == "An agent loop that yields each answer's length."
    assert inspect.isgeneratorfunction(steps)  # frameworks that check still see a generator function
    gen = steps(2)
    next(gen)
    with tracer.start_as_current_span("between"):
        oc.chat.completions.create(model="gpt-4o", messages=CHAT)  # between steps: not the generator's
    gen.send(5)
    assert instrumented.spans(n.SPAN_RUN) == []  # the run is open while the generator is
    with pytest.raises(StopIteration) as done:
        gen.send(7)
    assert done.value.value == 12  # values sent in and the return value go through the decorator
    assert _booked(instrumented) == [("returns", "gen-1", 1), (DEFAULT, None, 2), ("returns", "gen-1", 2)]
    (run,) = instrumented.spans(n.SPAN_RUN)  # ended when the generator returned
    (between,) = instrumented.spans("between")
    assert between.parent is None
    assert (run.attributes or {})[n.ROUNDS] == 2
    assert (run.attributes or {})[n.RESOLUTION] != "error"


def test_a_decorated_generator_thrown_into_and_closed_ends_its_run(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    oc = openai_client(fake_provider)

    def conversation(conv: str) -> Iterator[str]:
        @otel_ctx.task("returns", conversation_id=conv)
        def steps() -> Iterator[str]:
            while True:
                try:
                    yield oc.chat.completions.create(model="gpt-4o", messages=CHAT).id
                except LookupError as exc:
                    yield f"handled {type(exc).__name__}"

        return steps()

    closed = conversation("closed")
    next(closed)
    assert closed.throw(KeyError("x")) == "handled KeyError"  # handled inside, in its own context
    assert current_task() == TaskInfo()
    next(closed)
    closed.close()
    (run,) = instrumented.spans(n.SPAN_RUN)  # closing ended the run ...
    assert (run.attributes or {})[n.ROUNDS] == 2
    assert (run.attributes or {})[n.RESOLUTION] == "unresolved"  # ... and closing is no error
    assert not run.events  # no exception recorded

    failed = conversation("failed")
    next(failed)
    next(failed)  # suspended at the call's yield: a ValueError goes through the handler
    with pytest.raises(ValueError, match="bad"):
        failed.throw(ValueError("bad"))
    runs = _runs(instrumented)
    assert (runs["failed"].attributes or {})[n.RESOLUTION] == "error"
    assert runs["failed"].context is not None and runs["closed"].context is not None
    assert runs["failed"].context.trace_id != runs["closed"].context.trace_id
    assert current_task() == TaskInfo()
    oc.chat.completions.create(model="gpt-4o", messages=CHAT)
    assert _booked(instrumented)[-1][:2] == (DEFAULT, None)


def test_the_decorator_on_an_async_generator_function_and_interleaved_async_generators(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    aoc = async_openai_client(fake_provider)
    tracer = instrumented.tracer_provider.get_tracer("agent")

    @otel_ctx.task("status", conversation_id="agen-1")
    async def steps() -> AsyncIterator[Any]:
        sent = yield (await aoc.chat.completions.create(model="gpt-4o", messages=CHAT)).id
        try:
            yield sent
        except LookupError as exc:
            yield f"handled {type(exc).__name__}"
            await aoc.chat.completions.create(model="gpt-4o", messages=CHAT)
            yield "after"

    def conversation(conv: str) -> AsyncIterator[str]:
        @otel_ctx.task("returns", conversation_id=conv)
        async def rounds() -> AsyncIterator[str]:
            for _ in range(2):
                await asyncio.sleep(0)  # a real suspension to the event loop, inside the step
                yield (await aoc.chat.completions.create(model="gpt-4o", messages=CHAT)).id

        return rounds()

    async def agent() -> list[Any]:
        out: list[Any] = []
        gen = steps()
        out.append(await gen.__anext__())
        out.append(await gen.asend("hello"))
        with tracer.start_as_current_span("between"):
            await aoc.chat.completions.create(model="gpt-4o", messages=CHAT)  # the caller's, between
        out.append(await gen.athrow(KeyError("x")))
        out.append(await gen.__anext__())
        assert instrumented.spans(n.SPAN_RUN) == []
        await gen.aclose()
        assert len(instrumented.spans(n.SPAN_RUN)) == 1  # closing ended its run
        x, y = conversation("X"), conversation("Y")
        for _ in range(2):
            await x.__anext__()
            await y.__anext__()
            assert current_task() == TaskInfo()
        assert [s async for s in x] == [] and [s async for s in y] == []
        return out

    assert inspect.isasyncgenfunction(steps)
    out = asyncio.run(agent())
    assert out[1:] == ["hello", "handled KeyError", "after"]
    assert _booked(instrumented) == [
        ("status", "agen-1", 1),
        (DEFAULT, None, 2),
        ("status", "agen-1", 2),
        ("returns", "X", 1),
        ("returns", "Y", 1),
        ("returns", "X", 2),
        ("returns", "Y", 2),
    ]
    runs = _runs(instrumented)
    assert set(runs) == {"agen-1", "X", "Y"}
    assert len({s.context.trace_id for s in runs.values() if s.context is not None}) == 3
    assert (runs["agen-1"].attributes or {})[n.RESOLUTION] == "unresolved"  # closed, not failed
    (between,) = instrumented.spans("between")
    assert between.parent is None
    for span in instrumented.rounds():
        conv = (span.attributes or {}).get(n.GEN_AI_CONVERSATION_ID)
        if conv is None:
            assert span.parent is not None and between.context is not None
            assert span.parent.span_id == between.context.span_id
        else:
            assert _under(span, runs[str(conv)])


def test_asyncio_tasks_started_inside_a_generators_block_keep_it(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    aoc = async_openai_client(fake_provider)

    async def conversation() -> AsyncIterator[int]:
        async with otel_ctx.task("returns", conversation_id="fan-out"):
            replies = await asyncio.gather(
                *(aoc.chat.completions.create(model="gpt-4o", messages=CHAT) for _ in range(3))
            )
            yield len(replies)

    @otel_ctx.task("status", conversation_id="fan-out-decorated")
    async def decorated() -> AsyncIterator[int]:
        replies = await asyncio.gather(
            *(aoc.chat.completions.create(model="gpt-4o", messages=CHAT) for _ in range(2))
        )
        yield len(replies)

    async def agent() -> None:
        async for _ in conversation():
            pass
        async for _ in decorated():
            pass

    asyncio.run(agent())
    booked = _booked(instrumented)
    assert sorted({(t, c) for t, c, _ in booked}) == [("returns", "fan-out"), ("status", "fan-out-decorated")]
    assert len(booked) == 5
    run = _runs(instrumented)["fan-out-decorated"]
    assert sum(_under(s, run) for s in instrumented.rounds()) == 2


def test_a_block_inside_an_undecorated_generator_shares_the_callers_context(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    # Python runs a generator's steps in its caller's context: the block stays in force in
    # the caller between steps, and blocks of generators stepped in turn nest. What the
    # docs say, and why they point to the decorator.
    oc = openai_client(fake_provider)

    def conversation(task_type: str, conv: str) -> Iterator[str]:
        with otel_ctx.task(task_type, conversation_id=conv):
            for _ in range(2):
                yield oc.chat.completions.create(model="gpt-4o", messages=CHAT).id

    a, b = conversation("returns", "A"), conversation("status", "B")
    next(a)
    assert current_task() == TaskInfo("returns", "A")  # in force in the caller, between steps
    next(b)
    assert current_task() == TaskInfo("status", "B")  # nested in A's
    next(a)  # A's second call runs with B's block innermost
    assert len(list(b)) == 1  # B's second call, then B's block exits ...
    assert current_task() == TaskInfo("returns", "A")  # ... and A's is in force again
    assert list(a) == []
    assert current_task() == TaskInfo()  # both exited: the caller's context is as before
    assert [(t, c) for t, c, _ in _booked(instrumented)] == [
        ("returns", "A"),
        ("status", "B"),
        ("status", "B"),
        ("status", "B"),
    ]
    (run,) = instrumented.spans(n.SPAN_RUN)  # B's block opened no run: A's was open
    assert (run.attributes or {})[n.GEN_AI_CONVERSATION_ID] == "A"
    assert all(_under(s, run) for s in instrumented.rounds())


def test_a_task_block_inside_a_context_manager_generator_belongs_to_the_with_that_uses_it() -> None:
    @contextmanager
    def ticket(conv: str) -> Iterator[None]:
        with otel_ctx.task("returns", conversation_id=conv):
            yield

    @asynccontextmanager
    async def async_ticket(conv: str) -> AsyncIterator[None]:
        async with otel_ctx.task("status", conversation_id=conv):
            yield

    with ticket("cm-1"):
        assert current_task() == TaskInfo("returns", "cm-1")
    assert current_task() == TaskInfo()

    @otel_ctx.task()  # a context of its own for the generator: its ``with`` stays its own
    def conversation(conv: str) -> Iterator[str | None]:
        with ticket(conv):
            for _ in range(2):
                yield current_task().conversation_id

    a, b = conversation("A"), conversation("B")
    assert [next(a), next(b), current_task().conversation_id, next(a), next(b)] == ["A", "B", None, "A", "B"]

    async def agent() -> list[TaskInfo]:
        async with async_ticket("acm-1"):
            inside = current_task()
        return [inside, current_task()]

    assert asyncio.run(agent()) == [TaskInfo("status", "acm-1"), TaskInfo()]


# -- re-entry ----------------------------------------------------------------------------------


def test_entering_the_same_task_object_twice_restores_the_outer_state(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    oc = openai_client(fake_provider)

    def call() -> None:
        oc.chat.completions.create(model="gpt-4o", messages=CHAT)

    returns = otel_ctx.task("returns", conversation_id="outer")
    with returns:
        with otel_ctx.task(conversation_id="inner"):
            with returns:  # the same object again, while it is in force
                call()
            call()
        call()
    call()
    assert [(t, c) for t, c, _ in _booked(instrumented)] == [
        ("returns", "outer"),
        ("returns", "inner"),
        ("returns", "outer"),
        (DEFAULT, None),
    ]


def test_one_task_object_in_many_threads_at_once() -> None:
    shared = otel_ctx.task("status", conversation_id="shared")
    barrier = threading.Barrier(4)
    seen: list[tuple[TaskInfo, TaskInfo, TaskInfo]] = []

    def worker(i: int) -> None:
        with otel_ctx.task(conversation_id=f"own-{i}"):
            with shared:
                barrier.wait()  # all four inside the shared object's block together
                inside = current_task()
            barrier.wait()
            seen.append((inside, current_task(), TaskInfo()))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 4
    for inside, after, _ in seen:
        assert inside == TaskInfo("status", "shared")
        assert after.task_type is None and str(after.conversation_id).startswith("own-")
    assert current_task() == TaskInfo()


# -- the bookkeeping, as a property ------------------------------------------------------------


@given(
    schedule=st.lists(st.integers(min_value=0, max_value=2), max_size=40),
    close_order=st.permutations([0, 1, 2]),
    nested_at=st.lists(st.integers(min_value=0, max_value=4), min_size=3, max_size=3),
)
def test_interleaved_generators_each_see_their_own_task(
    schedule: list[int], close_order: list[int], nested_at: list[int]
) -> None:
    """However decorated generators are interleaved and closed, each sees its own task, the caller its own."""
    shared = otel_ctx.task("shared")  # one object, entered by every generator (re-entry)
    caller = TaskInfo("caller", "caller-conv")
    seen: list[tuple[int, TaskInfo, TaskInfo]] = []

    @otel_ctx.task()  # each generator's steps run in a context of its own
    def conversation(i: int) -> Iterator[None]:
        own = TaskInfo(f"type-{i}", f"conv-{i}")
        with otel_ctx.task(own.task_type, conversation_id=own.conversation_id):
            step = 0
            while step < nested_at[i]:
                seen.append((i, current_task(), own))
                yield
                step += 1
            with shared:
                while True:
                    seen.append((i, current_task(), TaskInfo("shared", own.conversation_id)))
                    yield

    with otel_ctx.task(caller.task_type, conversation_id=caller.conversation_id):
        gens = [conversation(i) for i in range(3)]
        for i in schedule:
            next(gens[i])
            assert current_task() == caller
        for i in close_order:
            gens[i].close()
            assert current_task() == caller
    assert current_task() == TaskInfo()
    for i, got, expected in seen:
        assert got == expected, f"generator {i} saw {got}, expected {expected}"
