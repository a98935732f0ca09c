"""Where ``otel_ctx.task`` follows the agent: interleaved generators, executor workers, re-entry."""

from concurrent.futures import ThreadPoolExecutor

import otel_ctx
from otel_ctx.instrumentation import current_task  # what a provider call made here is booked under


def conversation(ticket: str):  # an agent loop that yields after each model call
    @otel_ctx.task("returns", conversation_id=ticket)  # each generator in a context of its own
    def steps():
        for _ in range(2):
            yield current_task().conversation_id

    return steps()


a, b = conversation("T-1"), conversation("T-2")
print("interleaved:", next(a), next(b), next(a), next(b), "| caller:", current_task().conversation_id)

with otel_ctx.task("status", conversation_id="T-3"), ThreadPoolExecutor() as pool:
    carried = pool.submit(otel_ctx.carry(current_task)).result()
    bare = pool.submit(current_task).result()  # Python gives a worker thread no context
print("worker with carry:", carried.conversation_id, "| without:", bare.conversation_id)

status = otel_ctx.task("status", conversation_id="T-4")
with status:
    with otel_ctx.task(conversation_id="T-5"), status:  # the same object again, while in force
        inner = current_task().conversation_id
    after = current_task().conversation_id
print("re-entered:", inner, "| after it:", after, "| after both:", current_task().conversation_id)
