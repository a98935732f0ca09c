"""LangChain messages and @tool tools fitted, and LangChain's own trimmer watched (README example)."""

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages
from langchain_core.tools import tool

from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx.telemetry import compare, observed


@tool
def get_order(order_id: str) -> str:
    """Look an order up."""
    return "{}"


policy = BudgetPolicy(context_length=128_000, request_limit=2_000, reserved_output=500, tool_result_cap=300)
fitter = ContextFitter(policy)
history = [SystemMessage("You are Sundry's support agent."), HumanMessage("Order 88-1042 arrived cracked.")]
for k in range(6):
    history += [
        AIMessage("", tool_calls=[{"name": "get_order", "args": {"order_id": "88-1042"}, "id": f"call_{k}"}]),
        ToolMessage("oak shelf, natural finish " * 120, tool_call_id=f"call_{k}"),
    ]

result = fitter.fit(history, tools=[get_order])
print(result.outcome, "| kept:", " ".join(type(m).__name__.removesuffix("Message") for m in result.messages))
print("capped:", result.capped_tool_results, "| tool line:", result.breakdown.transcript_by_role["tool"])

# Someone else's trimmer: otel-ctx says what it dropped (here: the ticket, and a call of a kept result).
trim = observed(trim_messages, policy=policy, task_type="returns", model="gpt-4o")
kept = trim(history, max_tokens=5, strategy="last", token_counter=len)
print("trim_messages kept:", " ".join(type(m).__name__.removesuffix("Message") for m in kept))
print(compare(history, kept))  # what its span says: context_budget.trim.ticket_dropped, ...
