"""A damage claim fitted to the support desk's dispute budget (the README's example)."""

import json

from otel_ctx import ContextFitter, Source
from otel_ctx.demo import SUPPORT_DESK

fitter = ContextFitter(SUPPORT_DESK, model="gpt-4")  # status 4k / returns 8k / dispute 16k, reserve 800
items = [{"sku": f"SKU-{i}", "title": "Oak shelf, natural finish " * 60} for i in range(11)]
order = json.dumps({"order_id": "88-1042", "items": items})  # an order lookup of ~4,000 tokens
call = {"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": '{"id": 1042}'}}
messages = [
    {"role": "user", "content": "My five-tier oak shelving unit (order 88-1042) arrived cracked."},
    {"role": "assistant", "content": None, "tool_calls": [call]},
    {"role": "tool", "tool_call_id": "c1", "content": order},
]
result = fitter.fit(
    messages,
    task_type="dispute",
    system_prompt="You are Sundry's support agent. Be precise and kind.",
    snippets=[Source("pii-handling", "Never repeat card numbers or addresses.", "confidential")],
    skills=[Source("refund-policy", "Refunds within 30 days of delivery.", "internal")],
)
print(result.outcome, "| capped:", result.capped_tool_results, "| dropped turns:", result.dropped_turns)
print(result.breakdown)  # the inspector table; .to_dict() for JSON
send = result.request_messages()  # system prompt + skills + the fitted transcript
result.raise_for_overflow()  # ContextOverflow when the pinned floor alone does not fit
