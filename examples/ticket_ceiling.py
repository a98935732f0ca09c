"""A whole ticket under a run ceiling: fit each round, escalate before the round that would cross it."""

import json

import otel_ctx
from otel_ctx import BudgetPolicy, ContextFitter, Usage

policies = {
    "status": BudgetPolicy(
        context_length=128_000, reserved_output=800, request_limit=4_000, run_ceiling=60_000
    ),
    "dispute": BudgetPolicy(
        context_length=128_000, reserved_output=800, request_limit=16_000, run_ceiling=60_000
    ),
}
fitter = ContextFitter(policies, model="gpt-4o")
prompt = "You are Sundry's support agent. Be precise and kind."
messages = [{"role": "user", "content": "My oak shelf (order 88-1042) arrived cracked. I want a refund."}]
scans = json.dumps(
    {"parcel": "JJD0099887766", "scans": [{"at": f"hub {i}", "note": "in transit " * 40} for i in range(30)]}
)


def ask_the_model(result: otel_ctx.FitResult, n: int) -> tuple[dict[str, object], Usage]:
    """Stands in for the provider call (send ``result.request_messages()``): it asks for the
    parcel's scans, and reports as many input tokens as were estimated."""
    call = {"id": f"c{n}", "type": "function", "function": {"name": "get_scans", "arguments": "{}"}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}, Usage(
        input_tokens=result.breakdown.estimated, output_tokens=30
    )


with otel_ctx.run(fitter, task_type="dispute", conversation_id="T-1042") as run:
    for n in range(1, 13):
        result = run.fit(messages, system_prompt=prompt)
        if result.outcome == "overflow" or run.ceiling_reached:
            spent = run.spent_tokens
            print(f"round {n}: escalated, not sent ({spent:,} spent; this request would cross 60,000)")
            run.resolve("escalated")  # hand the ticket to a person with the work so far
            break
        reply, usage = ask_the_model(result, n)
        run.record_usage(usage=usage)
        messages += [reply, {"role": "tool", "tool_call_id": f"c{n}", "content": scans}]
        print(f"round {n}: {result.outcome}, sent {result.breakdown.estimated:,} tokens")
    else:
        run.resolve("resolved")
