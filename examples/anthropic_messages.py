"""An Anthropic Messages agent loop fitted round by round (the README's Anthropic example)."""

from otel_ctx import BudgetPolicy, ContextFitter

policy = BudgetPolicy(context_length=200_000, request_limit=6_000, reserved_output=1_024, tool_result_cap=800)
fitter = ContextFitter(policy, model="claude-sonnet-4-6")
body = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 1_024,
    "system": [
        {"type": "text", "text": "You are Sundry's support agent.", "cache_control": {"type": "ephemeral"}}
    ],
    "tools": [
        {
            "name": "get_scans",
            "description": "The carrier's scan history of a parcel.",
            "input_schema": {
                "type": "object",
                "properties": {"parcel": {"type": "string"}},
                "required": ["parcel"],
            },
        }
    ],
    "messages": [{"role": "user", "content": "Where is my parcel JJD0099887766?"}],
}
for day in range(1, 9):  # the agent asked for the scans eight times; each answer is long
    use = {
        "type": "tool_use",
        "id": f"toolu_{day}",
        "name": "get_scans",
        "input": {"parcel": "JJD0099887766"},
    }
    scans = " ".join(f"2026-10-{day:02d} hub-{hub} scanned" for hub in range(300))
    body["messages"] += [
        {"role": "assistant", "content": [{"type": "text", "text": f"Checking day {day}."}, use]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"toolu_{day}", "content": scans}],
        },
    ]

result = fitter.fit_request(body)  # provider detected: top-level system, input_schema tools
sent = result.request  # ready for anthropic.Anthropic().messages.create(**sent)
print(result.provider, result.outcome, "exact" if result.exact else f"estimate ({result.encoding})")
print("tool results capped:", result.capped_tool_results, "| exchanges dropped:", result.dropped_turns)
print(
    "tool line:",
    result.breakdown.transcript_by_role["tool"],
    "| user line:",
    result.breakdown.transcript_by_role["user"],
)
print("roles sent:", "".join(m["role"][0] for m in sent["messages"]))
print("system kept its cache_control:", sent["system"] is body["system"])
# After the call, everything the provider billed as input teaches the calibration:
# u = response.usage; u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
fitter.observe_usage(result, 5_200)
print(f"calibration: {fitter.calibration:.2f}")
