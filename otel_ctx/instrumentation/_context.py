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
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import baggage

from otel_ctx import names
from otel_ctx.instrumentation import _ticket

if TYPE_CHECKING:
    from otel_ctx.telemetry.run import Run

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

    While the instrumentor is active, the outermost block is also one run of the ticket
    view (see :mod:`otel_ctx.instrumentation._ticket`): ``run_ceiling`` caps its tokens,
    ``resolve()`` says how it ended, and its exit records it once.
    """

    def __init__(
        self,
        task_type: str | None = None,
        *,
        conversation_id: str | None = None,
        run_ceiling: int | None = None,
    ) -> None:
        if task_type is not None and not isinstance(task_type, str):
            raise TypeError(f"task_type must be a string, got {type(task_type).__name__}")
        if conversation_id is not None and not isinstance(conversation_id, str):
            raise TypeError(f"conversation_id must be a string, got {type(conversation_id).__name__}")
        if run_ceiling is not None and (
            isinstance(run_ceiling, bool) or not isinstance(run_ceiling, int) or run_ceiling < 1
        ):
            raise ValueError(f"run_ceiling must be an integer >= 1, got {run_ceiling!r}")
        self.task_type = task_type
        self.conversation_id = conversation_id
        self.run_ceiling = run_ceiling
        self._token: Token[TaskInfo | None] | None = None
        self._run: tuple[Run, Token[Run | None]] | None = None

    def __enter__(self) -> task:
        outer = _TASK.get()
        info = TaskInfo(
            self.task_type if self.task_type is not None else (outer.task_type if outer else None),
            self.conversation_id
            if self.conversation_id is not None
            else (outer.conversation_id if outer else None),
        )
        self._token = _TASK.set(info)
        self._run = _ticket.open_run(info.task_type, info.conversation_id, self.run_ceiling)
        return self

    def resolve(self, resolution: str) -> None:
        """Say how the block's run ended (``resolved``, ``escalated``, ``abandoned``, ...).

        Raises for a value that is not a resolution; does nothing when the block opened no
        run (not instrumented, or nested in another run).
        """
        if self._run is not None:
            self._run[0].resolve(resolution)

    @property
    def run(self) -> Run | None:
        """The run this block opened, if any: its ``spent_tokens``, ``cost``, ``ceiling_reached``."""
        return self._run[0] if self._run is not None else None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        opened, self._run = self._run, None
        if opened is not None:
            _ticket.close_run(opened, exc)
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
        task_type, conversation_id, ceiling = self.task_type, self.conversation_id, self.run_ceiling
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with task(task_type, conversation_id=conversation_id, run_ceiling=ceiling):
                    return await fn(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with task(task_type, conversation_id=conversation_id, run_ceiling=ceiling):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]
