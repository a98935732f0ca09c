"""A whole OpenAI Chat Completions request fitted, with the SDK's own message object inside."""

import json

from openai.types.chat import ChatCompletionMessage

from otel_ctx import BudgetPolicy, ContextFitter

policy = BudgetPolicy(context_length=128_000, reserved_output=800, request_limit=3_000, tool_result_cap=300)
fitter = ContextFitter(policy, model="gpt-4")
# What an agent loop appends when the model asks for a tool: resp.choices[0].message
call = {"id": "call_1", "type": "function", "function": {"name": "track", "arguments": '{"id": "JJD0099"}'}}
reply = ChatCompletionMessage.model_validate({"role": "assistant", "content": None, "tool_calls": [call]})
scans = json.dumps([{"scan": i, "hub": "Leipzig", "event": "in transit"} for i in range(200)])
tool = {"name": "track", "description": "Carrier scans of a parcel.", "parameters": {"type": "object"}}
body = {
    "model": "gpt-4",
    "messages": [
        {"role": "developer", "content": "You are Sundry's support agent."},
        {"role": "user", "content": "Where is my parcel JJD0099?"},
        reply,
        {"role": "tool", "tool_call_id": "call_1", "content": scans},
    ],
    "tools": [{"type": "function", "function": tool}],
}
result = fitter.fit_request(body)  # the dialect is read from the body
sent = result.request  # ready for client.chat.completions.create(**sent)
print(result.provider, result.outcome, f"{result.breakdown.estimated:,} of {result.breakdown.budget:,}")
print(
    "tool results capped:",
    result.capped_tool_results,
    "| SDK object sent as is:",
    sent["messages"][2] is reply,
)
print("by line:", result.breakdown.transcript_by_role)
