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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from instrument_support import Instrumented
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from telemetry_capture import Capture

import otel_ctx
import otel_ctx.instrumentation as oi
from otel_ctx import BudgetPolicy, ContextFitter, OtelCtxError, names

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
