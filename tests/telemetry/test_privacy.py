"""Private by default: a canary planted in every kind of text must not come out anywhere."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import pytest
from conversations import ORIGINAL_TICKET, assistant, user
from telemetry_capture import Capture

from otel_ctx import BudgetPolicy, ContextFitter, Source
from otel_ctx import names as n
from otel_ctx.demo import SUPPORT_DESK
from otel_ctx.telemetry import observe, observed, run

CANARY = "CANARY-7f3a9c-do-not-export"


class _Broken:
    def record(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("instrument failure")


def canary_request() -> dict[str, Any]:
    """The canary in the prompt, messages, tool schema, tool arguments and results, snippets and skills."""
    msgs: list[dict[str, Any]] = [user(f"{ORIGINAL_TICKET} {CANARY}")]
    for t in range(12):
        msgs += [
            {
                "role": "assistant",
                "content": f"looking {CANARY}",
                "tool_calls": [
                    {
                        "id": f"call_{t}",
                        "type": "function",
                        "function": {"name": "get_order", "arguments": json.dumps({"q": CANARY, "t": t})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"call_{t}", "content": f"{CANARY} " * 900},
            assistant(f"Round {t} {CANARY}"),
            user(f"more {CANARY}"),
        ]
    return {
        "messages": msgs,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_order",
                    "description": f"Fetch an order {CANARY}",
                    "parameters": {
                        "type": "object",
                        "properties": {"q": {"type": "string", "description": CANARY}},
                    },
                },
            }
        ],
        "system_prompt": f"You are the agent. {CANARY}",
        "snippets": [Source("policy", f"Refund rules {CANARY}", "internal")],
        "skills": [Source("claims", f"Claims skill {CANARY}", "restricted")],
    }


class LeakyError(ValueError):
    """An application's exception that quotes the conversation in its message."""


def leaky_summarizer(dropped: list[dict[str, Any]]) -> str:
    raise LeakyError(f"cannot summarise {dropped[0]['content'][:60]!r} {CANARY}")


def exercise_failures(cap: Capture) -> int:
    """An exception inside a fit (the summariser's) and one inside the run block; both propagate."""
    fitter = ContextFitter(SUPPORT_DESK, summarizer=leaky_summarizer)
    raised = 0
    try:
        with run(fitter, task_type="status", emitter=cap.emitter) as r:
            r.fit(**canary_request())
    except LeakyError:
        raised += 1
    try:
        with run(fitter, task_type="status", emitter=cap.emitter) as r:
            r.fit([user("hi")])
            raise RuntimeError(f"agent step failed on {CANARY}")
    except RuntimeError:
        raised += 1
    return raised


def exception_events(cap: Capture) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for s in cap.spans() for e in s.events if e.name == n.EVENT_EXCEPTION]


def exercise(cap: Capture) -> list[Any]:
    """Every emitting path: fit (capped, compacted), overflow, observe, observed, usage, a failure."""
    fitter = ContextFitter(SUPPORT_DESK)
    req = canary_request()
    results = []
    with run(fitter, task_type="status", conversation_id="conv-1", emitter=cap.emitter) as r:
        results.append(r.fit(**req))
        results.append(r.fit([user(f"{CANARY} " * 4000)]))  # the pinned floor overflows
        r.record_usage(input_tokens=results[0].raw_tokens + 5, output_tokens=3)
        results.append(r.observe(req["messages"][-2:], system_prompt=req["system_prompt"]))
    policy = BudgetPolicy(context_length=8_000, reserved_output=500)
    results.append(
        observe(req["messages"][:1], task_type="status", model="gpt-4o", policy=policy, emitter=cap.emitter)
    )
    observed(lambda m: m[-2:], policy=policy, task_type="status", model="gpt-4o", emitter=cap.emitter)(
        req["messages"]
    )
    cap.emitter._utilization = _Broken()  # type: ignore[assignment]
    results.append(fitter.fit(**req, task_type="returns"))
    observed(fitter.fit, emitter=cap.emitter)(**req, task_type="returns")
    return results


def test_no_content_in_any_span_event_metric_or_log(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(n.ENV_CAPTURE_CONTENT, raising=False)
    cap = Capture()
    with caplog.at_level(logging.DEBUG):
        results = exercise(cap)
        assert exercise_failures(cap) == 2
    outcomes = {r.outcome for r in results}
    assert {"compacted", "overflow"} <= outcomes and results[0].capped_tool_results > 0
    exported = list(cap.exported_text())
    assert len(cap.spans()) >= 7 and any(n.TOKENS.name in text for text in exported)
    for text in exported:
        assert CANARY not in text
    assert caplog.records, "the broken instrument should have been logged"
    assert CANARY not in caplog.text
    for record in caplog.records:
        assert CANARY not in logging.Formatter().format(record)
    out, err = capsys.readouterr()
    assert CANARY not in out and CANARY not in err
    assert not any(e.name == n.EVENT_CONTENT for s in cap.spans() for e in s.events)
    # The failures are on the spans by type alone: no message, no stack trace.
    events = exception_events(cap)
    assert sorted(str(e[n.EXCEPTION_TYPE]) for e in events) == sorted(
        [f"{__name__}.LeakyError", f"{__name__}.LeakyError", "RuntimeError"]
    )  # the fit span and the run span around it, and the second run span
    assert all(set(e) == {n.EXCEPTION_TYPE} for e in events)
    failed = [s for s in cap.spans() if not s.status.is_ok]
    assert len(failed) == 3
    assert {s.status.description for s in failed} == {f"{__name__}.LeakyError", "RuntimeError"}
    assert {s.attributes[n.ERROR_TYPE] for s in failed if s.attributes} == {
        f"{__name__}.LeakyError",
        "RuntimeError",
    }
    cap.close()


def test_content_appears_only_when_opted_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(n.ENV_CAPTURE_CONTENT, "true")
    cap = Capture()
    exercise(cap)
    failures = Capture()
    assert exercise_failures(failures) == 2
    # Opted in, a failure is recorded as OpenTelemetry records it: message and stack trace.
    events = exception_events(failures)
    assert len(events) == 3
    assert all(CANARY in str(e[n.EXCEPTION_MESSAGE]) for e in events)
    assert all("Traceback" in str(e[n.EXCEPTION_STACKTRACE]) for e in events)
    assert any(CANARY in (s.status.description or "") for s in failures.spans())
    failures.close()
    fit_spans = cap.spans(n.SPAN_FIT)
    events = [e for s in fit_spans for e in s.events if e.name == n.EVENT_CONTENT]
    assert len(events) == len(fit_spans)
    sent = json.loads(str(events[0].attributes[n.GEN_AI_INPUT_MESSAGES]))  # type: ignore[index]
    assert sent[0]["role"] == "system" and CANARY in sent[0]["content"]
    # Attributes and metrics stay content-free even then: only the opt-in event carries text.
    for s in cap.spans():
        assert CANARY not in json.dumps(dict(s.attributes or {}), default=str)
    data = cap.reader.get_metrics_data()
    assert data is not None and CANARY not in data.to_json()
    cap.close()


def test_the_capture_switch_follows_the_environment_of_a_running_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Read on every round, however it is changed: set, unset, patched for a block."""
    from unittest import mock

    from otel_ctx.telemetry._content import capture_content

    monkeypatch.delenv(n.ENV_CAPTURE_CONTENT, raising=False)
    assert capture_content() is False
    monkeypatch.setenv(n.ENV_CAPTURE_CONTENT, " True ")
    assert capture_content() is True
    monkeypatch.setenv(n.ENV_CAPTURE_CONTENT, "no")
    assert capture_content() is False
    monkeypatch.delenv(n.ENV_CAPTURE_CONTENT)
    with mock.patch.dict(os.environ, {n.ENV_CAPTURE_CONTENT: "1"}):
        assert capture_content() is True
    assert capture_content() is False
