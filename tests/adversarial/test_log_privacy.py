"""No request text in otel-ctx's log records, and LangChain's own errors typed by observe().

LangChain's converter errors quote the whole content block ("Full content block: {...}");
otel-ctx used to log them with ``exc_info`` from the zero-code LangChain handler and from
``observed(trimmer)``, so with content capture off the prompt reached the logs. Every
record of every otel-ctx logger is checked here at DEBUG, formatted as a handler would
format it (traceback included).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fake_provider import FakeProvider
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from instrument_support import Instrumented, anthropic_client, instrumented, openai_client
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from telemetry_capture import Capture

import otel_ctx
import otel_ctx.instrumentation as oi
from otel_ctx import BudgetPolicy, ContextFitter, OtelCtxError, names

__all__ = ["instrumented"]  # the fixture, imported for pytest

CANARY = "CANARY-7f3a-prompt-text"
POLICY = BudgetPolicy(context_length=128_000, reserved_output=800)

#: LangChain messages its converter refuses, each quoting the canary in the error it raises.
HOSTILE: list[BaseMessage] = [
    HumanMessage(content=[{"type": "image_url", "note": CANARY}]),  # ValueError, block quoted
    HumanMessage(content=[{"type": "text", "txt": CANARY}]),  # KeyError
    HumanMessage(content=[{"note": CANARY}]),  # KeyError: 'type'
    AIMessage(content=[{"type": "tool_use", "input": CANARY}]),  # ValueError, block quoted
]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.format(record))


@pytest.fixture
def otel_ctx_logs() -> Iterator[_Records]:
    """Every record of the ``otel_ctx`` logger tree at DEBUG, formatted with its traceback."""
    handler = _Records()
    root = logging.getLogger("otel_ctx")
    before = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(before)


@pytest.fixture(autouse=True)
def _content_capture_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(names.ENV_CAPTURE_CONTENT, raising=False)


@pytest.fixture
def instrumented_with_langchain() -> Iterator[Instrumented]:
    cap = Instrumented()
    oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=True)
    try:
        yield cap
    finally:
        oi.uninstrument()


def _no_canary(logs: _Records, cap: Capture) -> None:
    for text in logs.texts:
        assert CANARY not in text, text
    for text in cap.exported_text():
        assert CANARY not in text


@pytest.mark.parametrize("bad", range(len(HOSTILE)))
def test_the_zero_code_langchain_handler_logs_the_failure_without_the_prompt(
    bad: int, instrumented_with_langchain: Instrumented, otel_ctx_logs: _Records
) -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage(content="Done.")]))
    answer = model.invoke([SystemMessage("be brief"), HOSTILE[bad]])
    assert answer.content == "Done."  # the agent is untouched
    # The failure is still reported (or the round recorded, where LangChain converts it).
    assert any("failed" in t for t in otel_ctx_logs.texts) or instrumented_with_langchain.rounds()
    _no_canary(otel_ctx_logs, instrumented_with_langchain)


@pytest.mark.parametrize("bad", range(len(HOSTILE)))
def test_observed_trimmer_logs_the_failure_without_the_prompt(bad: int, otel_ctx_logs: _Records) -> None:
    cap = Capture()

    def trim(messages: list[Any]) -> list[Any]:
        return [*messages, HOSTILE[bad]]

    watched = otel_ctx.observed(trim, policy=POLICY, task_type=None, model="gpt-4o", emitter=cap.emitter)
    given = [HumanMessage("hello")]
    assert watched(given) == [*given, HOSTILE[bad]]
    assert any("failed" in t for t in otel_ctx_logs.texts)
    _no_canary(otel_ctx_logs, cap)


@pytest.mark.parametrize("bad", range(len(HOSTILE)))
def test_observe_raises_the_engines_typed_error_for_what_langchain_cannot_convert(
    bad: int, otel_ctx_logs: _Records
) -> None:
    cap = Capture()
    messages = [HumanMessage("hello"), HOSTILE[bad]]
    with pytest.raises(OtelCtxError) as via_observe:
        otel_ctx.observe(messages, task_type=None, model="gpt-4o", policy=POLICY, emitter=cap.emitter)
    with pytest.raises(OtelCtxError) as via_measure:
        ContextFitter(POLICY).measure(messages)
    assert type(via_observe.value) is type(via_measure.value)
    assert via_observe.value.where == via_measure.value.where  # type: ignore[attr-defined]
    _no_canary(otel_ctx_logs, cap)


_BLOCK_KEYS = st.sampled_from(["type", "text", "image_url", "id", "name", "input", "source", "note"])
_BLOCK_TYPES = st.sampled_from(["text", "image_url", "tool_use", "image", "file", "thinking", "input_audio"])
_BLOCKS = st.dictionaries(
    _BLOCK_KEYS,
    st.one_of(_BLOCK_TYPES, st.just(CANARY), st.just({"url": CANARY}), st.integers(), st.none()),
    max_size=4,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    blocks=st.lists(st.one_of(_BLOCKS, st.just(CANARY)), min_size=1, max_size=3),
    kind=st.sampled_from([HumanMessage, AIMessage, SystemMessage]),
)
def test_observe_on_any_langchain_content_raises_only_typed_errors_and_logs_no_canary(
    blocks: list[Any], kind: type[BaseMessage], otel_ctx_logs: _Records
) -> None:
    cap = Capture()
    otel_ctx_logs.texts.clear()
    try:
        message = kind(content=blocks)
    except Exception:  # LangChain's own model validation refuses it: nothing reaches otel-ctx
        return
    with contextlib.suppress(OtelCtxError):  # only the typed errors may come out
        otel_ctx.observe(
            [HumanMessage("hi"), message], task_type=None, model="gpt-4o", policy=POLICY, emitter=cap.emitter
        )
    _no_canary(otel_ctx_logs, cap)


# -- every dialect, with and without provider=, hostile bodies: typed errors, no canary ----------


def _chat_body() -> dict[str, Any]:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup", "arguments": f'{{"q": "{CANARY}"}}'},
    }
    return {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": f"system {CANARY}"},
            {"role": "user", "content": [{"type": "text", "text": f"user {CANARY}"}]},
            {"role": "assistant", "content": None, "tool_calls": [call], "name": CANARY},
            {"role": "tool", "tool_call_id": "call_1", "content": f"result {CANARY}"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "description": CANARY,
                    "parameters": {
                        "type": "object",
                        "properties": {"q": {"type": "string", "description": CANARY}},
                    },
                },
            }
        ],
    }


def _responses_body() -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "instructions": f"be brief {CANARY}",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": f"user {CANARY}"}]},
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": f'{{"q": "{CANARY}"}}'},
            {"type": "function_call_output", "call_id": "c1", "output": f"out {CANARY}"},
        ],
        "tools": [
            {"type": "function", "name": "lookup", "description": CANARY, "parameters": {"type": "object"}}
        ],
    }


def _anthropic_body() -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "system": f"system {CANARY}",
        "messages": [
            {"role": "user", "content": f"user {CANARY}"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": CANARY}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": f"r {CANARY}"}],
            },
        ],
        "tools": [{"name": "lookup", "description": CANARY, "input_schema": {"type": "object"}}],
    }


BODIES = {"openai": _chat_body, "openai-responses": _responses_body, "anthropic": _anthropic_body}
_HOSTILE_VALUES = st.one_of(
    st.sampled_from([None, True, 5, 1.5, -1, 10**400, "", CANARY, [], {}, [CANARY], {"type": CANARY}]),
    st.recursive(
        st.just(CANARY) | st.integers() | st.none(),
        lambda inner: (
            st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(["type", "text", "role"]), inner)
        ),
        max_leaves=6,
    ),
)


def _paths(value: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a body (dict keys and list indexes), the root excluded."""
    out = [here] if here else []
    if isinstance(value, dict):
        for key, child in value.items():
            out.extend(_paths(child, (*here, key)))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            out.extend(_paths(child, (*here, i)))
    return out


def _replaced(body: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    if isinstance(body, dict):
        return {**body, path[0]: _replaced(body[path[0]], path[1:], new)}
    copy = list(body)
    copy[path[0]] = _replaced(copy[path[0]], path[1:], new)
    return copy


@st.composite
def _hostile_bodies(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    dialect = draw(st.sampled_from(sorted(BODIES)))
    body: Any = BODIES[dialect]()
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from(_paths(body)))
        value = draw(_HOSTILE_VALUES)
        if path == ("model",) and isinstance(value, str):
            value = 5  # a model name is a label by design; the canary goes everywhere else
        body = _replaced(body, path, value)
    return dialect, body


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_hostile_bodies(), with_provider=st.booleans())
def test_request_entry_points_raise_only_typed_errors_and_log_no_canary(
    case: tuple[str, dict[str, Any]], with_provider: bool, otel_ctx_logs: _Records
) -> None:
    dialect, body = case
    otel_ctx_logs.texts.clear()
    fitter = ContextFitter(POLICY, model="gpt-4o")
    provider = dialect if with_provider else None
    for entry in (fitter.count_request, fitter.measure_request, fitter.fit_request):
        with contextlib.suppress(OtelCtxError):
            entry(body, provider=provider)
    for text in otel_ctx_logs.texts:
        assert CANARY not in text, text


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_hostile_bodies())
def test_instrumented_sdk_calls_with_hostile_bodies_export_and_log_no_canary(
    case: tuple[str, dict[str, Any]],
    instrumented: Instrumented,
    fake_provider: FakeProvider,
    otel_ctx_logs: _Records,
) -> None:
    dialect, body = case
    otel_ctx_logs.texts.clear()
    instrumented.span_exporter.clear()
    oc, ac = openai_client(fake_provider), anthropic_client(fake_provider)
    send = {
        "openai": lambda: oc.chat.completions.create(**body),
        "openai-responses": lambda: oc.responses.create(**body),
        "anthropic": lambda: ac.messages.create(**body),
    }[dialect]
    try:
        send()
    except OtelCtxError:  # otel-ctx never raises into the agent
        raise
    except Exception:  # the SDK's or the provider's own refusal of a malformed body: the agent's
        pass
    _no_canary(otel_ctx_logs, instrumented)
