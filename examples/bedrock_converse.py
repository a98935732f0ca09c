"""A Bedrock Converse request (boto3 bedrock-runtime) fitted before it is sent."""

from otel_ctx import BudgetPolicy, ContextFitter

policy = BudgetPolicy(context_length=200_000, request_limit=6_000, reserved_output=1_024, tool_result_cap=800)
fitter = ContextFitter(policy, model="us.anthropic.claude-sonnet-4-5-20250929-v1:0")
messages: list = [{"role": "user", "content": [{"text": "Where is my parcel JJD0099887766?"}]}]
for day in range(1, 9):  # the agent asked for the scans eight times; each answer is long
    call = {"toolUseId": f"tooluse_{day}", "name": "get_scans", "input": {"parcel": "JJD0099887766"}}
    scans = " ".join(f"2026-10-{day:02d} hub-{hub} scanned" for hub in range(300))
    messages += [
        {"role": "assistant", "content": [{"toolUse": call}]},  # response["output"]["message"]
        {
            "role": "user",
            "content": [{"toolResult": {"toolUseId": f"tooluse_{day}", "content": [{"text": scans}]}}],
        },
    ]
body = {
    "messages": messages,
    "system": [{"text": "You are Sundry's support agent."}, {"cachePoint": {"type": "default"}}],
    "toolConfig": {
        "tools": [
            {
                "toolSpec": {
                    "name": "get_scans",
                    "description": "The carrier's scan history of a parcel.",
                    "inputSchema": {"json": {"type": "object", "properties": {"parcel": {"type": "string"}}}},
                }
            }
        ]
    },
    "inferenceConfig": {"maxTokens": 1_024},
}

result = fitter.fit_request(body, provider="bedrock")
sent = result.request  # ready for client.converse(modelId=..., **sent)
print(result.provider, result.outcome, "exact" if result.exact else f"estimate ({result.encoding})")
print("tool results capped:", result.capped_tool_results, "| exchanges dropped:", result.dropped_turns)
print("tool line:", result.breakdown.transcript_by_role["tool"], "| schema:", result.breakdown.tool_schema)
print("roles sent:", "".join(m["role"][0] for m in sent["messages"]))
print("the system blocks are the caller's own:", sent["system"] == body["system"])
# After the call, usage.inputTokens + cacheReadInputTokens + cacheWriteInputTokens teaches the calibration:
fitter.observe_usage(result, 5_400)
print(f"calibration: {fitter.calibration:.2f}")
