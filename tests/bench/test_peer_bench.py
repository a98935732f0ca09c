"""The bench's peer section on a tiny run: its two figures come back under their names, and both
instrumentors are off afterwards, so the sections that run after it time the bare SDK (not timed)."""

from __future__ import annotations

import openai
import wrapt
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

import otel_ctx.instrumentation as oi
from bench import peer_bench


def test_peer_section_reports_both_figures_and_leaves_the_sdk_bare() -> None:
    result = peer_bench.run(trials=2)

    assert [f.name for f in result.figures] == [
        "later round: otel-ctx's added CPU ÷ openai-v2's",
        "first call: otel-ctx's added CPU ÷ one tiktoken pass of its messages",
    ]
    assert {f.section for f in result.figures} == {peer_bench.SECTION}
    assert [f.target for f in result.figures] == ["≤ 0.5×", "≤ 1.1×"]
    assert all(f.passed is not None and f.value.endswith("×") for f in result.figures)
    assert "openai-v2 +" in result.figures[0].detail and "one pass" in result.figures[1].detail
    assert oi.active_observer() is None
    assert not OpenAIInstrumentor().is_instrumented_by_opentelemetry  # type: ignore[no-untyped-call]
    # What each wraps: otel-ctx the client's request, openai-v2 chat.completions.create.
    for owner, method in (
        (openai._base_client.SyncAPIClient, "request"),
        (openai.resources.chat.completions.Completions, "create"),
    ):
        assert method in owner.__dict__
        assert not isinstance(owner.__dict__[method], wrapt.FunctionWrapper)
