"""The ticket view for zero-code agents: a ``with otel_ctx.task(...)`` block is one run.

Bare SDK calls do not say where one ticket ends and the next begins; the task block does.
While the instrumentor is active, the outermost block opens a run's
:class:`~otel_ctx.telemetry._run.Books` (the span and per-run metrics of ``otel_ctx.run()``,
so the cost dashboard reads both paths alike), every instrumented call inside it is one of
its rounds, and the block's exit records the run once.

The task context reaches this module only through the hook the instrumentor registers
(:mod:`otel_ctx.instrumentation._state`), so neither imports the other. A failure here is
logged, never raised into the agent.
"""

from __future__ import annotations

import functools
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING

from otel_ctx._pricing import Usage
from otel_ctx.engine._budget import BudgetPolicy
from otel_ctx.engine._result import FitResult
from otel_ctx.telemetry._emitter import log_failure
from otel_ctx.telemetry._run import Books, current_run

if TYPE_CHECKING:
    from otel_ctx.instrumentation._core import Observer
    from otel_ctx.instrumentation._state import RunOpener
    from otel_ctx.telemetry._recorder import RoundRecord

#: The run the innermost task block opened (a run() block inside it is not one of these).
_TASK_RUN: ContextVar[Books | None] = ContextVar("otel_ctx_task_run", default=None)
#: The run's model until its first call names one.
_UNKNOWN_MODEL = "unknown"


def _ceiling(observer: Observer, task_type: str, given: int | None) -> int | None:
    if given is not None:
        return given
    policy = observer.config.policies.get(task_type)
    return policy.run_ceiling if isinstance(policy, BudgetPolicy) else None


@dataclass(frozen=True, slots=True)
class TaskRun:
    """The run a task block opened, and the token that puts the innermost task run back."""

    run: Books
    token: Token[Books | None]

    def close(self, exc: BaseException | None) -> None:
        """Record the run once, whether the block returned or raised."""
        try:
            _TASK_RUN.reset(self.token)
        except ValueError:  # left in another context than it was entered in
            _TASK_RUN.set(None)
        try:
            self.run.__exit__(type(exc) if exc is not None else None, exc, None)
        except Exception as inner:
            log_failure("closing the task's run", inner)


def run_opener(observer: Observer) -> RunOpener:
    """What task blocks call to open their runs while ``observer`` is the instrumentation's."""
    return functools.partial(open_run, observer)


def open_run(
    observer: Observer, task_type: str | None, conversation_id: str | None, run_ceiling: int | None
) -> TaskRun | None:
    """Open the block's run; None inside another run (an outer task block's, ``otel_ctx.run()``'s)
    or when the observer was uninstrumented since."""
    if not observer.active or current_run() is not None:
        return None
    try:
        task = task_type or observer.config.default_task_type
        # The books only: the instrumentor measures each call against its own budget. The model
        # is the first call's (Books.use_model).
        books = Books(
            task_type=task,
            model=_UNKNOWN_MODEL,
            known_task_types=observer.config.task_types,
            run_ceiling=_ceiling(observer, task, run_ceiling),
            conversation_id=conversation_id,
            emitter=observer.emitter,
        )
        books.__enter__()
        return TaskRun(books, _TASK_RUN.set(books))
    except Exception as exc:
        log_failure("opening the task's run", exc)
        return None


def book_round(record: RoundRecord, result: FitResult, model: str) -> tuple[Books, int] | None:
    """An instrumented call inside a task block: one round of the block's books."""
    books = _TASK_RUN.get()
    if books is None or current_run() is not books:
        return None
    try:
        books.use_model(model)
        return books, record.book(books, result, with_breakdown=False)
    except Exception as exc:
        log_failure("booking a call in the task's run", exc)
        return None


def book_usage(booked: tuple[Books, int] | None, usage: Usage) -> None:
    """The call's reported usage replaces its estimate in the run's books (tokens and cost)."""
    if booked is None:
        return
    run, number = booked
    try:
        run.book_usage(number, usage)
    except Exception as exc:
        log_failure("booking a call's usage in the task's run", exc)
