"""A run with two rounds, emitted as spans and metrics (to the console here)."""

import otel_ctx
from otel_ctx import ContextFitter
from otel_ctx.demo import SUPPORT_DESK

handle = otel_ctx.configure(exporter="console", service_name="support-agent")
fitter = ContextFitter(SUPPORT_DESK, model="gpt-4")
messages = [{"role": "user", "content": "Where is my parcel JJD0099887766?"}]

with otel_ctx.run(fitter, task_type="status", conversation_id="ticket-4711", agent_name="desk") as run:
    result = run.fit(messages, system_prompt="You are Sundry's support agent.")  # round 1
    run.record_usage(input_tokens=result.raw_tokens + 2, output_tokens=40)  # the provider's usage
    messages += [
        {"role": "assistant", "content": "It is out for delivery."},
        {"role": "user", "content": "Thanks!"},
    ]
    run.fit(messages, system_prompt="You are Sundry's support agent.")  # round 2

# Someone else trimmed the history? Measure and emit what is actually sent, changing nothing:
otel_ctx.observe(messages, task_type="status", model="gpt-4", policy=SUPPORT_DESK)
handle.shutdown()
