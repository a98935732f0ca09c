"""A whole OpenAI Responses request fitted: instructions, input items, flat function tools."""

import json

from openai.types.responses import ResponseFunctionToolCall

from otel_ctx import BudgetPolicy, ContextFitter

policy = BudgetPolicy(context_length=128_000, reserved_output=800, request_limit=3_000, tool_result_cap=300)
fitter = ContextFitter(policy, model="gpt-4")
# What an agent loop appends from resp.output when the model calls a tool:
call = ResponseFunctionToolCall(
    type="function_call", call_id="call_1", name="track", arguments='{"id": "JJD0099"}'
)
scans = json.dumps([{"scan": i, "hub": "Leipzig", "event": "in transit"} for i in range(200)])
body = {
    "model": "gpt-4o",
    "instructions": "You are Sundry's support agent.",
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Where is my parcel JJD0099?"}]},
        call,
        {"type": "function_call_output", "call_id": "call_1", "output": scans},
    ],
    "tools": [{"type": "function", "name": "track", "description": "Carrier scans of a parcel."}],
}
result = fitter.fit_request(body, provider="openai-responses")
sent = result.request  # ready for client.responses.create(**sent)
b = result.breakdown
print(result.provider, result.outcome, f"{b.estimated:,} of {b.budget:,}")
print("instructions (system prompt line):", b.system_prompt, "| tool schema:", b.tool_schema)
print(
    "tool results capped:", result.capped_tool_results, "| SDK object sent as is:", sent["input"][1] is call
)
print("by line:", b.transcript_by_role)
