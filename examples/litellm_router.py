"""LiteLLM under the instrumentor: the call measured as LiteLLM received it, against the routed model."""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM's bundled prices: no download

import litellm
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_ctx

spans = InMemorySpanExporter()
tracer_provider = TracerProvider()
tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
otel_ctx.instrument(tracer_provider=tracer_provider)  # opentelemetry-instrument does this with no code

messages = [
    {"role": "system", "content": "You are Sundry's support agent."},
    {"role": "user", "content": "My oak shelf (order 88-1042) arrived cracked."},
]
with otel_ctx.task("returns", conversation_id="ticket-88-1042"):
    # mock_response: LiteLLM answers itself, so this runs offline; a real call is observed the same way.
    litellm.completion(
        model="anthropic/claude-sonnet-4-5", messages=messages, max_tokens=500, mock_response="On its way."
    )
otel_ctx.uninstrument()

# The call's round (the task block is also one run of the ticket view, a span of its own).
(span,) = [s for s in spans.get_finished_spans() if s.name == "context_budget.observe"]
a = span.attributes
print(span.name, "| dialect:", a["context_budget.provider"], "| to:", a["context_budget.routed_provider"])
print("model:", a["context_budget.model"], "| window:", a["context_budget.context_length"])
print("reserved output:", a["context_budget.reserved_output"], "| round:", a["context_budget.round"])
print("system prompt in transcript:", a["context_budget.system_prompt_in_transcript"])
print("estimated tokens:", a["context_budget.estimated_tokens"])
