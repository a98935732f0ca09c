"""Which task and conversation a provider call belongs to: ``otel_ctx.task`` or W3C baggage.

The instrumentor sees a bare SDK call; the agent (or a gateway in front of it) says
what the call is for. ``with otel_ctx.task(task_type="returns", conversation_id=t.id):``
sets both on a context variable, so they follow threads started with a copied context
and every asyncio task; a gateway can send the same as baggage
(``context_budget.task_type``, ``gen_ai.conversation.id``) instead.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from opentelemetry import baggage

from otel_ctx import names

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class TaskInfo:
    task_type: str | None = None
    conversation_id: str | None = None


_TASK: ContextVar[TaskInfo | None] = ContextVar("otel_ctx_task", default=None)


def current_task() -> TaskInfo:
    """The innermost ``otel_ctx.task``; what it leaves open comes from baggage."""
    info = _TASK.get()
    task_type = info.task_type if info is not None else None
    conversation = info.conversation_id if info is not None else None
    if task_type is None or conversation is None:
        entries = baggage.get_all()
        if entries:
            if task_type is None:
                value = entries.get(names.BAGGAGE_TASK_TYPE)
                task_type = str(value) if value else None
            if conversation is None:
                value = entries.get(names.BAGGAGE_CONVERSATION_ID)
                conversation = str(value) if value else None
    return TaskInfo(task_type, conversation)


class task:  # lower case: used like a function, ``with otel_ctx.task(...)``, ``@otel_ctx.task(...)``
    """Name the task type and conversation of the provider calls made inside.

    A context manager (``with``/``async with``) and a decorator (sync or async
    functions). Nested blocks inherit what they do not set. Each ``with`` block is one
    use; the decorator opens a fresh one per call.
    """

    def __init__(self, task_type: str | None = None, *, conversation_id: str | None = None) -> None:
        if task_type is not None and not isinstance(task_type, str):
            raise TypeError(f"task_type must be a string, got {type(task_type).__name__}")
        if conversation_id is not None and not isinstance(conversation_id, str):
            raise TypeError(f"conversation_id must be a string, got {type(conversation_id).__name__}")
        self.task_type = task_type
        self.conversation_id = conversation_id
        self._token: Token[TaskInfo | None] | None = None

    def __enter__(self) -> task:
        outer = _TASK.get()
        info = TaskInfo(
            self.task_type if self.task_type is not None else (outer.task_type if outer else None),
            self.conversation_id
            if self.conversation_id is not None
            else (outer.conversation_id if outer else None),
        )
        self._token = _TASK.set(info)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._token is not None:
            try:
                _TASK.reset(self._token)
            except ValueError:  # left in another context than it was entered in
                _TASK.set(None)
            self._token = None

    async def __aenter__(self) -> task:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def __call__(self, fn: F) -> F:
        task_type, conversation_id = self.task_type, self.conversation_id
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with task(task_type, conversation_id=conversation_id):
                    return await fn(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with task(task_type, conversation_id=conversation_id):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]
