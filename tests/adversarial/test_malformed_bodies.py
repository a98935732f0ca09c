"""Malformed Anthropic bodies and LangChain transcripts: only the documented typed errors.

Valid requests are generated, then broken at random places (a value replaced by one
of the wrong type, a key removed, nesting far deeper than any request). Whatever the
damage, counting, fitting and measuring either succeed or raise an ``OtelCtxError``
naming the place; never a ``TypeError``, ``KeyError``, ``AttributeError`` or
``RecursionError`` from deep inside, and observe-only measuring raises only for what
cannot be counted at all.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

from dialect_rules_anthropic import messages_requests
from dialect_rules_langchain import transcripts
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx.engine._errors import OtelCtxError


def _deep(depth: int) -> Any:
    out: Any = "x"
    for _ in range(depth):
        out = [out]
    return out


GARBAGE = st.sampled_from(
    [None, 5, -1, True, 1.5, float("nan"), "x", "", [], {}, [None], [5], {"type": 5}, {"type": "text"},
     {"type": "tool_result"}, {"type": "tool_use", "id": 5},
     {"type": "document", "source": {"type": "base64"}},
     {"type": "image", "source": 5}, {"role": "system", "content": "s"}, b"bytes", "deep"]
)  # fmt: skip


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if len(prefix) > 12:  # inside a planted deep nest: no need to walk all of it
        return out
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*prefix, i)))
    return out


def _set(root: Any, path: tuple[Any, ...], value: Any, delete: bool) -> Any:
    if not path:
        return value
    parent = root
    for key in path[:-1]:
        parent = parent[key]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return root


@st.composite
def broken_bodies(draw: st.DrawFn) -> tuple[Any, bool]:
    """A broken body, and whether a nest too deep to ``repr`` was planted in it."""
    body: Any = copy.deepcopy(draw(messages_requests(max_exchanges=4)))
    deep = False
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(body)
        path = draw(st.sampled_from(paths))
        value = draw(GARBAGE)
        if value == "deep":
            value, deep = _deep(5_000), True
        body = _set(body, path, value, delete=draw(st.integers(0, 4)) == 0)
    return body, deep


def _expect_typed(call: Any) -> None:
    """Success, or a documented typed error: anything else fails the test."""
    with contextlib.suppress(OtelCtxError):
        call()


@given(case=broken_bodies(), cap=st.one_of(st.none(), st.integers(5, 500)), context=st.integers(200, 5_000))
def test_broken_anthropic_bodies_raise_only_typed_errors(
    case: tuple[Any, bool], cap: int | None, context: int
) -> None:
    body, deep = case
    fitter = ContextFitter(
        BudgetPolicy(context_length=context, reserved_output=100, tool_result_cap=cap),
        model="claude-sonnet-4-6",
    )
    snapshot = None if deep else repr(body)
    _expect_typed(lambda: fitter.fit_request(body, provider="anthropic"))
    _expect_typed(lambda: fitter.measure_request(body, provider="anthropic"))
    _expect_typed(lambda: fitter.count_request(body, provider="anthropic"))
    if snapshot is not None:
        assert repr(body) == snapshot  # never mutated, even when refused


# Factories, not objects: hypothesis prints what it drew, and a 3,000-deep nest has no repr.
BAD_ITEMS = st.sampled_from(
    [
        lambda: None,
        lambda: 5,
        lambda: "hello",
        lambda: {"role": "robot", "content": "x"},
        lambda: {"content": "no role"},
        lambda: AIMessage.model_construct(content=5, tool_calls=[{"bad": 1}], type="ai"),
        lambda: AIMessage.model_construct(content="x", tool_calls=5, type="ai"),
        lambda: ToolMessage.model_construct(content="r", tool_call_id=None, type="tool"),
        lambda: ToolMessage("orphan", tool_call_id="nobody"),
        lambda: HumanMessage.model_construct(content=[{"type": "image_url"}], type="human"),
        lambda: HumanMessage.model_construct(content=[5, None], type="human"),
        lambda: HumanMessage.model_construct(content=_deep(3_000), type="human"),
        lambda: AIMessage("", tool_calls=[{"name": "f", "args": {"a": _deep(3_000)}, "id": "deep"}]),
    ]
)
BAD_TOOLS = st.sampled_from([5, "x", object(), None, {"type": "function"}, lambda x: x, int, [1]])


@given(
    history=transcripts(max_exchanges=4),
    items=st.lists(st.tuples(st.integers(0, 50), BAD_ITEMS), min_size=1, max_size=3),
    tools=st.one_of(st.none(), st.lists(BAD_TOOLS, min_size=1, max_size=2)),
)
def test_broken_langchain_transcripts_raise_only_typed_errors(
    history: list[Any], items: list[tuple[int, Callable[[], Any]]], tools: list[Any] | None
) -> None:
    broken: list[Any] = list(history)
    for at, make in items:
        broken.insert(at % (len(broken) + 1), make())
    fitter = ContextFitter(BudgetPolicy(context_length=2_000, reserved_output=100, tool_result_cap=50))
    _expect_typed(lambda: fitter.fit(broken, tools=tools))
    _expect_typed(lambda: fitter.measure(broken, tools=tools))
    _expect_typed(lambda: fitter.count(broken, tools=tools))
