"""The engine under attack: threads sharing a fitter, absurd nesting, hostile numbers.

Each case used to return a wrong number or escape as an internal exception
(RecursionError, TypeError, OverflowError); now counts stay right and every bad input
is a typed error naming where it is.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_ctx import (
    BudgetPolicy,
    ContextFitter,
    InvalidRequestError,
    InvalidToolSchemaError,
    OtelCtxError,
    TooDeeplyNestedError,
)
from otel_ctx.engine._cache import BoundedCache


@pytest.mark.usefixtures("fast_switching")
def test_threads_sharing_a_fitter_each_get_their_own_tool_count() -> None:
    fitter = ContextFitter(BudgetPolicy(context_length=128_000, reserved_output=800), model="gpt-4")
    short = [{"type": "function", "function": {"name": "a", "description": "short"}}]
    long = [{"type": "function", "function": {"name": "b", "description": "long " * 300}}]
    user = [{"role": "user", "content": "hi"}]
    want = {id(short): fitter.count(user, tools=short), id(long): fitter.count(user, tools=long)}
    assert want[id(long)] - want[id(short)] > 250
    wrong: list[int] = []
    stop = time.monotonic() + 2.0

    def work(tools: list[dict[str, Any]]) -> None:
        while time.monotonic() < stop:
            if fitter.count(user, tools=tools) != want[id(tools)]:
                wrong.append(1)

    threads = [threading.Thread(target=work, args=((short, long)[i % 2],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


@pytest.mark.usefixtures("fast_switching")
def test_the_cache_character_total_does_not_drift_under_threads() -> None:
    cache: BoundedCache[int] = BoundedCache(max_entries=64, max_chars=4_000)
    stop = time.monotonic() + 1.5

    def work(seed: int) -> None:
        rng = random.Random(seed)
        while time.monotonic() < stop:
            text = "x" * rng.randint(1, 200) + str(rng.random())
            cache.put(text, len(text))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    held = list(cache._counts)
    assert cache.chars == sum(len(k) for k in held)
    assert cache.chars <= cache.max_chars and len(held) <= cache.max_entries


def _nested_parts(depth: int) -> Any:
    value: Any = {"type": "text", "text": "core"}
    for _ in range(depth):
        value = {"type": "custom_blob", "inner": value}
    return value


def test_content_parts_nested_a_thousand_deep_are_a_typed_error() -> None:
    fitter = ContextFitter(BudgetPolicy(8_000, 500), model="gpt-4")
    msgs = [{"role": "user", "content": [_nested_parts(1_000)]}]
    with pytest.raises(TooDeeplyNestedError) as exc:
        fitter.fit(msgs)
    assert exc.value.where == "messages[0].content[0]"
    body = {"model": "gpt-4o", "input": [{"role": "user", "content": [_nested_parts(1_000)]}]}
    with pytest.raises(TooDeeplyNestedError) as exc:
        fitter.fit_request(body)
    assert exc.value.where == "input[0].content[0]"


@pytest.mark.parametrize(
    ("provider", "key"), [("openai", "messages"), ("openai-responses", "input"), ("anthropic", "messages")]
)
def test_a_role_nested_a_thousand_deep_is_quoted_boundedly_in_a_typed_error(provider: str, key: str) -> None:
    role: Any = "user"
    for _ in range(5_000):
        role = [role]
    fitter = ContextFitter(BudgetPolicy(8_000, 500), model="gpt-4")
    body: dict[str, Any] = {"model": "gpt-4o", key: [{"role": role, "content": "hi"}]}
    if provider == "anthropic":
        body["max_tokens"] = 100
    with pytest.raises(InvalidRequestError) as exc:
        fitter.fit_request(body, provider=provider)
    assert exc.value.where.endswith(".role") and len(str(exc.value)) < 300


def test_tool_parameters_nested_a_thousand_deep_are_a_typed_error() -> None:
    schema: Any = {"type": "string"}
    for _ in range(1_000):
        schema = {"type": "object", "properties": {"x": schema}}
    tools = [{"type": "function", "function": {"name": "deep", "parameters": schema}}]
    fitter = ContextFitter(BudgetPolicy(8_000, 500), model="gpt-4")
    with pytest.raises(TooDeeplyNestedError) as exc:
        fitter.fit([{"role": "user", "content": "hi"}], tools=tools)
    assert exc.value.where.startswith("tools")


@pytest.mark.parametrize("enum", [5, True, "abc", {"a": 1}])
def test_a_tool_property_whose_enum_is_not_a_list_is_a_typed_error(enum: Any) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "pick",
                "parameters": {"type": "object", "properties": {"colour": {"type": "string", "enum": enum}}},
            },
        }
    ]
    fitter = ContextFitter(BudgetPolicy(8_000, 500), model="gpt-4")
    with pytest.raises(InvalidToolSchemaError) as exc:
        fitter.count([{"role": "user", "content": "hi"}], tools=tools)
    assert exc.value.where == "tools[0].function.parameters.properties.colour.enum"


@pytest.mark.parametrize("reported", [10**400, 10**13, 0, -5, True, 3.5, "12"])
def test_implausible_usage_reports_are_a_typed_error(reported: Any) -> None:
    fitter = ContextFitter(BudgetPolicy(8_000, 500), model="gpt-4")
    result = fitter.fit([{"role": "user", "content": "hi"}])
    with pytest.raises(InvalidRequestError) as exc:
        fitter.observe_usage(result, reported)
    assert exc.value.where == "input_tokens"
    assert fitter.calibration == 1.0


def test_calibration_rejects_what_is_not_a_factor() -> None:
    fitter = ContextFitter(BudgetPolicy(8_000, 500), model="gpt-4")
    for bad in (float("nan"), float("inf"), 0.5, 10**400):
        with pytest.raises(ValueError):
            fitter.calibration = bad
        assert isinstance(fitter.calibration, float)


_atoms = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.sampled_from(["user", "assistant", "tool", "system", "function_call", "function_call_output", "text"]),
)
_KEYS = [
    "role",
    "content",
    "type",
    "text",
    "tool_calls",
    "tool_call_id",
    "id",
    "function",
    "name",
    "arguments",
    "input",
    "call_id",
    "output",
    "instructions",
    "messages",
    "tools",
    "parameters",
    "properties",
    "enum",
]
_json_like = st.recursive(
    _atoms,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=5),
    max_leaves=30,
)


# OTEL_CTX_FUZZ_EXAMPLES=3000 for a deeper run than the suite's.
@settings(max_examples=int(os.environ.get("OTEL_CTX_FUZZ_EXAMPLES", "200")), deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["messages", "input", "instructions", "tools", "model", "functions"]), _json_like
    ),
    st.sampled_from([None, "openai", "openai-responses"]),
)
def test_only_typed_errors_come_out_of_malformed_requests(body: dict[str, Any], provider: str | None) -> None:
    fitter = ContextFitter(BudgetPolicy(2_000, 100, tool_result_cap=20), model="gpt-4")
    for call in (fitter.fit_request, fitter.measure_request, fitter.count_request):
        with contextlib.suppress(OtelCtxError):
            call(body, provider=provider)
    messages = body.get("messages")
    with contextlib.suppress(OtelCtxError):
        fitter.fit(messages, tools=body.get("tools"))  # type: ignore[arg-type]
