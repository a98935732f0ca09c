"""A support agent on the OpenAI SDK, with no telemetry code in it at all.

Run it as it is under the zero-code path; otel-ctx's instrumentor measures every call:

    pip install 'otel-ctx[openai]'
    OTEL_SERVICE_NAME=support-desk OTEL_CTX_TASK_TYPE=returns \\
        opentelemetry-instrument python examples/agent_openai.py

The OpenAI client reads OPENAI_API_KEY and OPENAI_BASE_URL from the environment;
AGENT_MODEL picks the model (default gpt-4o-mini).
"""

import json
import os

from openai import OpenAI

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_order",
            "description": "Look up an order by its id.",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        },
    }
]


def get_order(order_id: str) -> str:
    items = [{"sku": f"SKU-{i}", "title": "Oak shelf, natural finish"} for i in range(5)]
    return json.dumps({"order_id": order_id, "status": "delivered", "items": items})


def main() -> None:
    client = OpenAI()
    messages: list = [
        {"role": "system", "content": "You are Sundry's support agent. Be precise and kind."},
        {"role": "user", "content": "My five-tier oak shelving unit (order 88-1042) arrived cracked."},
    ]
    for _ in range(6):
        response = client.chat.completions.create(
            model=os.environ.get("AGENT_MODEL", "gpt-4o-mini"), messages=messages, tools=TOOLS
        )
        message = response.choices[0].message
        messages.append(message)  # as OpenAI's guide does: the SDK's own message object
        if not message.tool_calls:
            print(message.content)
            return
        for call in message.tool_calls:
            order_id = json.loads(call.function.arguments).get("id", "")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": get_order(order_id)})


if __name__ == "__main__":
    main()
