"""A Gemini generate_content request (google-genai) fitted round by round."""

from google.genai import types

from otel_ctx import BudgetPolicy, ContextFitter

policy = BudgetPolicy(
    context_length=1_048_576, request_limit=6_000, reserved_output=1_024, tool_result_cap=800
)
fitter = ContextFitter(policy, model="gemini-2.5-flash")
config = types.GenerateContentConfig(
    system_instruction="You are Sundry's support agent.",
    max_output_tokens=1_024,
    tools=[
        types.Tool(
            function_declarations=[
                types.FunctionDeclaration(
                    name="get_scans",
                    description="The carrier's scan history of a parcel.",
                    parameters_json_schema={"type": "object", "properties": {"parcel": {"type": "string"}}},
                )
            ]
        )
    ],
)
contents: list = [types.Content(role="user", parts=[types.Part(text="Where is my parcel JJD0099887766?")])]
for day in range(1, 9):  # the agent asked for the scans eight times; each answer is long
    call = types.FunctionCall(name="get_scans", args={"parcel": "JJD0099887766"})
    scans = " ".join(f"2026-10-{day:02d} hub-{hub} scanned" for hub in range(300))
    contents += [
        types.Content(role="model", parts=[types.Part(function_call=call)]),  # response.candidates[0].content
        {
            "role": "user",
            "parts": [{"function_response": {"name": "get_scans", "response": {"output": scans}}}],
        },
    ]
body = {"model": "gemini-2.5-flash", "contents": contents, "config": config}

result = fitter.fit_request(body)  # provider detected: only Gemini calls its transcript "contents"
sent = result.request  # ready for client.models.generate_content(**sent)
print(result.provider, result.outcome, "exact" if result.exact else f"estimate ({result.encoding})")
print("tool results capped:", result.capped_tool_results, "| exchanges dropped:", result.dropped_turns)
print("tool line:", result.breakdown.transcript_by_role["tool"], "| schema:", result.breakdown.tool_schema)
print("roles sent:", "".join(c.role[0] if hasattr(c, "role") else c["role"][0] for c in sent["contents"]))
print("the config is the caller's own:", sent["config"] is config)
# After the call, usage_metadata.prompt_token_count (cached tokens included) teaches the calibration:
fitter.observe_usage(result, 5_200)
print(f"calibration: {fitter.calibration:.2f}")
