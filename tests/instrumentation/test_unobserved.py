"""No dark call: a call otel-ctx cannot measure still has its round span and is counted.

The real openai and anthropic SDKs against the fake provider; the fault is injected inside
otel-ctx (the fitter's measure, the round's opening, the task's policy), never in the SDK.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply, closed_port_url
from instrument_support import (
    ANTHROPIC_MESSAGES,
    CHAT,
    RESPONSES_INPUT,
    Instrumented,
    anthropic_client,
    async_openai_client,
    instrumented,
    openai_client,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import StatusCode
from support import prometheus_tool

import otel_ctx
import otel_ctx.instrumentation as oi
from otel_ctx import names as n
from otel_ctx._fitting import ContextFitter
from otel_ctx.engine._errors import InvalidMessageError, InvalidPolicyError
from otel_ctx.grafana import _overview as overview
from otel_ctx.instrumentation import _config, _core
from otel_ctx.telemetry import _emitter as emitter_module

__all__ = ["instrumented"]  # the fixture, imported for pytest

#: Text that must never leave the process: it rides in the request and in the injected error.
MARKER = "zq-private-7731"


@pytest.fixture
def fresh_log(monkeypatch: pytest.MonkeyPatch) -> emitter_module._ErrorLog:
    """This test's own unmeasured-call counts (the process-wide log has counted other tests)."""
    log = emitter_module._ErrorLog()
    monkeypatch.setattr(_core, "log_failure", log)
    return log


def _refuse(*args: Any, **kwargs: Any) -> Any:
    """The request reader refusing a body, its message quoting the request as such errors may."""
    raise InvalidMessageError("messages[1].content", f"cannot read {MARKER}")


def _break(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError(f"a defect, quoting {MARKER}")


def _unmeasured_points(cap: Instrumented) -> dict[tuple[str, str], int]:
    return {
        (p.attributes[n.TASK_TYPE], p.attributes[n.UNOBSERVED_REASON]): p.value
        for p in cap.points(n.UNOBSERVED_CALLS.name)
    }


def test_an_unmeasured_call_has_its_round_span_and_is_counted(
    instrumented: Instrumented,
    fake_provider: FakeProvider,
    monkeypatch: pytest.MonkeyPatch,
    fresh_log: emitter_module._ErrorLog,
) -> None:
    messages = [*CHAT, {"role": "user", "content": f"and {MARKER}?"}]
    plain = openai_client(fake_provider).chat.completions.create(model="gpt-4o", messages=messages)
    sent_plain = fake_provider.requests[-1].body
    monkeypatch.setattr(ContextFitter, "measure_request", _refuse)
    fake_provider.queue(Reply(input_tokens=321, output_tokens=9, cached_tokens=20))
    answer = openai_client(fake_provider).chat.completions.create(model="gpt-4o", messages=messages)
    # The call went through unchanged: the same bytes sent, the same answer back.
    assert fake_provider.requests[-1].body == sent_plain
    assert answer.choices[0].message.content == plain.choices[0].message.content
    measured, span = instrumented.rounds()
    assert n.UNOBSERVED_REASON not in (measured.attributes or {})
    attrs = dict(span.attributes or {})
    assert attrs[n.UNOBSERVED_REASON] == n.UNOBSERVED_INVALID_REQUEST
    assert attrs[n.UNOBSERVED_ERROR_TYPE] == "otel_ctx.engine._errors.InvalidMessageError"
    assert attrs[n.PROVIDER] == "openai"
    assert attrs[n.MODEL] == "gpt-4o"
    assert attrs[n.TASK_TYPE] == n.DEFAULT_TASK_TYPE
    assert attrs[n.MODE] == n.MODE_OBSERVE
    assert attrs[n.ROUND] == 2  # one answer already in the transcript
    # What was billed is still known; what was never measured is not made up.
    assert attrs[n.USAGE_INPUT_TOKENS] == 321 and attrs[n.USAGE_CACHED_INPUT_TOKENS] == 20
    for absent in (n.ESTIMATED_TOKENS, n.OUTCOME, n.EXACT, n.ESTIMATE_ACCURACY_RATIO):
        assert absent not in attrs, absent
    # Unset, not an error: the agent's call succeeded; the reason attribute is the marker.
    assert span.status.status_code is StatusCode.UNSET
    counted = _unmeasured_points(instrumented)
    assert counted[(n.DEFAULT_TASK_TYPE, n.UNOBSERVED_INVALID_REQUEST)] == 1
    # Every other reason of the task type is there at 0, so rate() sees the first of each.
    assert {r for (_, r), v in counted.items() if v == 0} == set(n.UNOBSERVED_REASONS) - {
        n.UNOBSERVED_INVALID_REQUEST
    }
    assert sum(p.value for p in instrumented.points(n.FITS.name)) == 1  # the measured call only
    assert MARKER not in "".join(instrumented.exported_text())
    assert fresh_log.unmeasured_counts() == {n.UNOBSERVED_INVALID_REQUEST: 1}


def test_every_reason_is_told_apart_and_the_round_span_is_never_doubled(
    instrumented: Instrumented,
    fake_provider: FakeProvider,
    monkeypatch: pytest.MonkeyPatch,
    fresh_log: emitter_module._ErrorLog,
) -> None:
    oc = openai_client(fake_provider)
    with monkeypatch.context() as m:
        m.setattr(ContextFitter, "measure_request", _break)
        oc.responses.create(model="gpt-4o", input=RESPONSES_INPUT)  # type: ignore[arg-type]

    def no_policy(*args: Any, **kwargs: Any) -> Any:
        raise InvalidPolicyError("reserved_output", "larger than the window")

    with monkeypatch.context() as m:
        m.setattr(_config.Config, "policy", no_policy)
        anthropic_client(fake_provider).messages.create(
            model="claude-sonnet-4-6", max_tokens=50, messages=ANTHROPIC_MESSAGES
        )

    def broken_begin(self: Any, *args: Any) -> None:
        self.span.set_attribute(n.ESTIMATED_TOKENS, 1)  # a round half opened when it failed
        raise RuntimeError("the round could not be opened")

    with monkeypatch.context() as m:
        m.setattr(_core.Round, "begin", broken_begin)
        list(oc.chat.completions.create(model="gpt-4o", messages=CHAT, stream=True))
    spans = instrumented.rounds()
    assert [(s.attributes or {}).get(n.UNOBSERVED_REASON) for s in spans] == [
        n.UNOBSERVED_MEASURE_ERROR,
        n.UNOBSERVED_INVALID_POLICY,
        n.UNOBSERVED_TELEMETRY_ERROR,
    ]
    assert [(s.attributes or {})[n.PROVIDER] for s in spans] == ["openai-responses", "anthropic", "openai"]
    assert len(fake_provider.requests) == 3  # one span per call: the half-opened one was taken over
    counted = _unmeasured_points(instrumented)
    for reason in (n.UNOBSERVED_MEASURE_ERROR, n.UNOBSERVED_INVALID_POLICY, n.UNOBSERVED_TELEMETRY_ERROR):
        assert counted[(n.DEFAULT_TASK_TYPE, reason)] == 1, reason
    # Once unbroken, the next call is measured as ever, with no reason on its span.
    oc.chat.completions.create(model="gpt-4o", messages=CHAT)
    last = instrumented.rounds()[-1]
    assert n.UNOBSERVED_REASON not in (last.attributes or {})
    assert (last.attributes or {})[n.ESTIMATED_TOKENS] > 0


def test_the_round_number_and_task_carry_on_through_an_unmeasured_call(
    instrumented: Instrumented, fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    oc = openai_client(fake_provider)
    with otel_ctx.task("returns", conversation_id="conv-1"):
        oc.chat.completions.create(model="gpt-4o", messages=CHAT)
        with monkeypatch.context() as m:
            m.setattr(ContextFitter, "measure_request", _break)
            oc.chat.completions.create(model="gpt-4o", messages=CHAT)
        oc.chat.completions.create(model="gpt-4o", messages=CHAT)
    rounds = [dict(s.attributes or {}) for s in instrumented.rounds()]
    assert [r[n.ROUND] for r in rounds] == [1, 2, 3]
    assert rounds[1][n.TASK_TYPE] == "returns"
    assert rounds[1][n.GEN_AI_CONVERSATION_ID] == "conv-1"
    assert n.UNOBSERVED_REASON in rounds[1] and n.UNOBSERVED_REASON not in rounds[2]


def test_a_failed_provider_call_that_was_not_measured_is_an_error_span(
    instrumented: Instrumented, fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    import openai

    monkeypatch.setattr(ContextFitter, "measure_request", _break)
    fake_provider.queue(Reply(status=500))
    with pytest.raises(openai.InternalServerError):
        openai_client(fake_provider).chat.completions.create(model="gpt-4o", messages=CHAT)
    (span,) = instrumented.rounds()
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})[n.UNOBSERVED_REASON] == n.UNOBSERVED_MEASURE_ERROR


def test_an_async_call_is_not_dark_either(
    instrumented: Instrumented, fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ContextFitter, "measure_request", _break)

    async def agent() -> Any:
        return await async_openai_client(fake_provider).chat.completions.create(model="gpt-4o", messages=CHAT)

    answer = asyncio.run(agent())
    assert answer.choices[0].message.content == "Done."
    (span,) = instrumented.rounds()
    assert (span.attributes or {})[n.UNOBSERVED_REASON] == n.UNOBSERVED_MEASURE_ERROR


def test_the_log_warns_once_then_at_powers_of_two_and_never_quotes_the_request(
    instrumented: Instrumented,
    fake_provider: FakeProvider,
    monkeypatch: pytest.MonkeyPatch,
    fresh_log: emitter_module._ErrorLog,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(ContextFitter, "measure_request", _refuse)
    oc = openai_client(fake_provider)
    calls = 130
    with caplog.at_level(logging.DEBUG, logger="otel_ctx.telemetry"):
        for _ in range(calls):
            oc.chat.completions.create(model="gpt-4o", messages=CHAT)
    mine = [r for r in caplog.records if r.name == "otel_ctx.telemetry"]
    warnings = [r.getMessage() for r in mine if r.levelno == logging.WARNING]
    assert len(warnings) == 3  # the 1st, the 64th and the 128th
    assert "1 call unmeasured for reason invalid_request" in warnings[0]
    assert "64 calls unmeasured for reason invalid_request so far" in warnings[1]
    assert "128 calls unmeasured" in warnings[2]
    assert "InvalidMessageError" in warnings[0]
    assert len(mine) == calls  # the rest at DEBUG, one line each
    assert all(MARKER not in r.getMessage() and r.exc_info is None for r in mine)
    assert len(instrumented.rounds()) == calls


def test_a_dead_collector_does_not_slow_an_unmeasured_call(
    fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    monkeypatch.setattr(ContextFitter, "measure_request", _break)
    tracer_provider = TracerProvider(shutdown_on_exit=False)
    exporter = OTLPSpanExporter(endpoint=closed_port_url() + "/v1/traces", timeout=5)
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=10))
    oi.instrument(tracer_provider=tracer_provider, langchain=False)
    try:
        oc = openai_client(fake_provider)
        oc.chat.completions.create(model="gpt-4o", messages=CHAT)  # connections warm
        began = time.perf_counter()
        for _ in range(20):
            oc.chat.completions.create(model="gpt-4o", messages=CHAT)
        took = time.perf_counter() - began
    finally:
        oi.uninstrument()
        tracer_provider.shutdown()
    # Twenty local calls; an export waiting on the dead collector would cost seconds each.
    assert took < 5.0, took


def test_the_dashboard_share_is_unmeasured_over_all_calls(tmp_path: Path) -> None:
    """The overview panel's query through Prometheus's engine: 1 unmeasured call in 10 is 10%."""
    promtool = prometheus_tool("promtool")
    task = n.prometheus_label(n.TASK_TYPE)
    reason = n.prometheus_label(n.UNOBSERVED_REASON)
    model = n.prometheus_label(n.GEN_AI_REQUEST_MODEL)
    outcome = n.prometheus_label(n.OUTCOME)

    def series(metric: str, per_minute: int, **labels: str) -> dict[str, str]:
        body = ", ".join(f'{k}="{v}"' for k, v in {"job": "agent", **labels}.items())
        return {"series": f"{metric}{{{body}}}", "values": f"0+{per_minute}x10"}

    inputs = [
        series(n.FITS.prometheus, 6, **{task: "returns", outcome: "fit", model: "gpt-4o"}),
        series(n.FITS.prometheus, 3, **{task: "status", outcome: "fit", model: "gpt-4o"}),
        series(n.UNOBSERVED_CALLS.prometheus, 1, **{task: "returns", reason: n.UNOBSERVED_INVALID_REQUEST}),
        series(n.UNOBSERVED_CALLS.prometheus, 0, **{task: "status", reason: n.UNOBSERVED_MEASURE_ERROR}),
    ]
    expr = overview.unmeasured_share("5m")
    for var in ("service", "task_type", "model"):
        expr = expr.replace("$" + var, ".*")
    spec = {
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": inputs,
                "promql_expr_test": [
                    {
                        "expr": f"round({expr}, 0.001)",
                        "eval_time": "10m",
                        "exp_samples": [
                            {"labels": f'{{{reason}="{n.UNOBSERVED_INVALID_REQUEST}"}}', "value": 0.1},
                            {"labels": f'{{{reason}="{n.UNOBSERVED_MEASURE_ERROR}"}}', "value": 0},
                        ],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "share.test.json"
    path.write_text(json.dumps(spec))
    proc = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
