"""Which task and conversation a provider call belongs to: ``otel_ctx.task`` or W3C baggage.

The instrumentor sees a bare SDK call; the agent (or a gateway in front of it) says
what the call is for. ``with otel_ctx.task(task_type="returns", conversation_id=t.id):``
puts both in the OpenTelemetry context; a gateway can send the same as baggage
(``context_budget.task_type``, ``gen_ai.conversation.id``) instead.

Where a task follows the agent, exactly:

- **asyncio tasks** and anything run in a copy of the context
  (``contextvars.copy_context().run``, ``asyncio.to_thread``, LangChain's
  ``ContextThreadPoolExecutor``): the OpenTelemetry context is a context variable.
- **Threads and executors**: Python hands no context to a new ``threading.Thread`` or
  to a ``ThreadPoolExecutor`` worker (nor does ``loop.run_in_executor``). Wrap the
  function: ``pool.submit(otel_ctx.carry(work), ...)``,
  ``Thread(target=otel_ctx.carry(work))``. Code that hands OpenTelemetry's context to a
  thread (``context.attach(captured)``, as ``opentelemetry-instrumentation-threading``
  does for ``Thread.start`` and ``ThreadPoolExecutor.submit``) hands the task with it.
- **Generators**: decorated, each generator runs every step in a context of its own (see
  :class:`task`); a ``with`` block inside an undecorated generator shares its caller's
  context, as every context variable does in Python.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from opentelemetry import baggage
from opentelemetry import context as otel_context

from otel_ctx import names
from otel_ctx.instrumentation._state import run_opener

if TYPE_CHECKING:
    from otel_ctx.instrumentation._state import TaskRun
    from otel_ctx.telemetry._run import Books

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

#: Where the innermost entry lives in the OpenTelemetry context.
_KEY = otel_context.create_key("otel_ctx.task")


@dataclass(frozen=True, slots=True)
class TaskInfo:
    task_type: str | None = None
    conversation_id: str | None = None


class _Entry:
    """One ``task`` in force: a link of an immutable chain, innermost first."""

    __slots__ = ("conversation_id", "owner", "parent", "run", "task_type")

    def __init__(self, owner: task, parent: _Entry | None) -> None:
        self.owner = owner
        self.task_type = owner.task_type
        self.conversation_id = owner.conversation_id
        self.parent = parent
        #: The ticket-view run this entry opened (the outermost block under the instrumentor).
        self.run: TaskRun | None = None

    def relinked(self, parent: _Entry | None) -> _Entry:
        copy = _Entry.__new__(_Entry)
        for slot in _Entry.__slots__:
            setattr(copy, slot, getattr(self, slot))
        copy.parent = parent
        return copy


def _in_force(context: otel_context.Context | None = None) -> list[_Entry]:
    """The entries in force, innermost first."""
    out = []
    entry = otel_context.get_value(_KEY, context)
    while isinstance(entry, _Entry):
        out.append(entry)
        entry = entry.parent
    return out


def current_task(context: otel_context.Context | None = None) -> TaskInfo:
    """The innermost ``otel_ctx.task`` in force; what it leaves open comes from baggage.

    ``context`` is an OpenTelemetry context captured earlier (when a framework's call
    began, say); the current one by default.
    """
    task_type: str | None = None
    conversation: str | None = None
    if otel_context.get_value(_KEY, context) is not None:
        for entry in _in_force(context):
            if task_type is None:
                task_type = entry.task_type
            if conversation is None:
                conversation = entry.conversation_id
            if task_type is not None and conversation is not None:
                break
    if task_type is None or conversation is None:
        entries = baggage.get_all(context)
        if entries:
            if task_type is None:
                value = entries.get(names.BAGGAGE_TASK_TYPE)
                task_type = str(value) if value else None
            if conversation is None:
                value = entries.get(names.BAGGAGE_CONVERSATION_ID)
                conversation = str(value) if value else None
    return TaskInfo(task_type, conversation)


def _set_chain(head: _Entry | None) -> None:
    # Never detached: the context variable's previous value comes back when whoever
    # attached before this entry detaches, and entries may leave out of order.
    otel_context.attach(otel_context.set_value(_KEY, head))


async def _ready(value: task) -> task:
    return value


class task:  # lower case: used like a function, ``with otel_ctx.task(...)``, ``@otel_ctx.task(...)``
    """Name the task type and conversation of the provider calls made inside.

    A context manager (``with``/``async with``) and a decorator (functions, async
    functions, generator and async generator functions). Nested blocks inherit what
    they do not set. The same object may be entered again while in force; each exit
    undoes its own entry. The decorator opens a fresh block per call.

    On a generator or async generator function, the decorator gives each generator a
    context of its own: a copy of the caller's at its first step, with the block entered
    in it, and every step (``next``, ``send``, ``throw``, ``close`` and their async forms)
    runs in it. So conversations written as decorated generators and stepped in turn each
    have their own run, and the caller's own calls between steps stay the caller's. The run
    ends when the generator returns, raises or is closed (closing is no error).

    A ``with`` block inside an *undecorated* generator cannot do that: Python runs a
    generator's steps in its caller's context, so the block stays in force in the caller
    while the generator waits at a ``yield``. Decorate the generator function instead, or
    hand the task to a function that runs elsewhere with :func:`carry`.

    While the instrumentor is active, the outermost block is also one run of the ticket
    view (see :mod:`otel_ctx.instrumentation._ticket`): ``run_ceiling`` caps its tokens,
    ``resolve()`` says how it ended, and its exit records it once. It opens that run through
    the hook the instrumentor registered (:func:`~otel_ctx.instrumentation._state.run_opener`).
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

    def resolve(self, resolution: str) -> None:
        """Say how the block's run ended (``resolved``, ``escalated``, ``abandoned``, ...).

        Raises for a value that is not a resolution; does nothing when the block opened no
        run (not instrumented, or nested in another run).
        """
        opened = self.run
        if opened is not None:
            opened.resolve(resolution)

    @property
    def run(self) -> Books | None:
        """The run this block opened, if any: its ``spent_tokens``, ``cost``, ``ceiling_reached``."""
        for entry in _in_force():
            if entry.owner is self and entry.run is not None:
                return entry.run.run
        return None

    def __enter__(self) -> task:
        self._push()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._pop(exc)

    def __aenter__(self) -> Any:
        self._push()
        return _ready(self)

    def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        self._pop(exc)
        return _ready(self)

    def _push(self) -> None:
        head = otel_context.get_value(_KEY)
        entry = _Entry(self, head if isinstance(head, _Entry) else None)
        _set_chain(entry)
        open_run = run_opener()
        if open_run is not None:
            info = current_task()
            entry.run = open_run(info.task_type, info.conversation_id, self.run_ceiling)

    def _pop(self, exc: BaseException | None = None) -> None:
        """Remove this object's innermost entry, whatever was entered since."""
        head = otel_context.get_value(_KEY)
        above: list[_Entry] = []
        entry = head if isinstance(head, _Entry) else None
        while entry is not None and entry.owner is not self:
            above.append(entry)
            entry = entry.parent
        if entry is None:
            return  # left in another context than it was entered in: nothing of it is here
        if entry.run is not None:  # closed even when uninstrumented since: the run was opened
            entry.run.close(exc)
        new = entry.parent
        for kept in reversed(above):  # entered since and still open (an undecorated generator's, say)
            new = kept.relinked(new)
        _set_chain(new)

    def _fresh(self) -> task:
        return task(self.task_type, conversation_id=self.conversation_id, run_ceiling=self.run_ceiling)

    def __call__(self, fn: F) -> F:
        if inspect.isasyncgenfunction(fn):
            return _decorate_async_generator(self, fn)  # type: ignore[return-value]
        if inspect.isgeneratorfunction(fn):
            return _decorate_generator(self, fn)  # type: ignore[return-value]

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with self._fresh():
                    return await fn(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._fresh():
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


# -- generators with a context of their own -----------------------------------------------------
#
# The wrappers stay generator functions (``inspect.isgeneratorfunction`` and
# ``isasyncgenfunction`` still say so, as FastAPI, pytest and LangChain check), so the context
# is copied when the body starts, at the first step: when a block written first would be entered.


def _exit_raised(context: contextvars.Context, entered: task, exc: BaseException) -> None:
    """Exit a decorated generator's block after ``exc``: closing the generator (a consumer that
    stops early, the garbage collector) ends iteration normally, not as a failure."""
    ended = None if isinstance(exc, GeneratorExit) else exc
    context.run(entered.__exit__, type(ended) if ended else None, ended, None)


def _decorate_generator(block: task, fn: Callable[..., Generator[Any, Any, Any]]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def gen_wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        context = contextvars.copy_context()
        entered = block._fresh()
        inner = context.run(fn, *args, **kwargs)
        context.run(entered.__enter__)
        try:
            value = yield from _stepped(context, inner)
        except BaseException as exc:
            _exit_raised(context, entered, exc)
            raise
        context.run(entered.__exit__, None, None, None)
        return value

    return gen_wrapper


def _stepped(context: contextvars.Context, steps: Generator[Any, Any, T]) -> Generator[Any, Any, T]:
    """``yield from steps``, with every step of ``steps`` (send, throw, close) run in ``context``."""
    run = context.run
    try:
        signal = run(steps.send, None)
        while True:
            try:
                message = yield signal
            except GeneratorExit:
                run(steps.close)
                raise
            except BaseException as exc:
                signal = run(steps.throw, exc)
            else:
                signal = run(steps.send, message)
    except StopIteration as done:
        result: T = done.value
        return result


class _InContext(Awaitable[T]):
    """An awaitable whose every step runs in ``context``, whoever awaits it, as an asyncio task
    runs its coroutine's steps; what it yields to the loop goes through untouched, so it works
    under any event loop and keeps cancellation as it is."""

    __slots__ = ("_awaitable", "_context")

    def __init__(self, context: contextvars.Context, awaitable: Awaitable[T]) -> None:
        self._context = context
        self._awaitable = awaitable

    def __await__(self) -> Generator[Any, Any, T]:
        return (yield from _stepped(self._context, self._awaitable.__await__()))


def _decorate_async_generator(block: task, fn: Callable[..., AsyncGenerator[Any, Any]]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def async_gen_wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        context = contextvars.copy_context()
        entered = block._fresh()
        inner = context.run(fn, *args, **kwargs)
        context.run(entered.__enter__)
        try:
            # ``yield from`` for an async generator, every step of ``inner`` in ``context``.
            value = await _InContext(context, inner.__anext__())
            while True:
                try:
                    sent = yield value
                except GeneratorExit:
                    await _InContext(context, inner.aclose())
                    raise
                except BaseException as exc:
                    value = await _InContext(context, inner.athrow(exc))
                else:
                    value = await _InContext(context, inner.asend(sent))
        except StopAsyncIteration:
            context.run(entered.__exit__, None, None, None)
        except BaseException as exc:
            _exit_raised(context, entered, exc)
            raise

    return async_gen_wrapper


def carry(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run, wherever it is called, with the context in force now.

    For threads and executors, which start with an empty context:
    ``pool.submit(otel_ctx.carry(answer), ticket)`` books the worker's provider calls under
    the task, conversation and current span of the code that wrapped it. Each call runs in
    its own copy, so one wrapped function may run in many threads at once. Plain functions
    only: an async one would merely be created in the copy (asyncio tasks copy the context).
    """
    if not callable(fn):
        raise TypeError(f"otel_ctx.carry takes a function, got {type(fn).__name__}")
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(
            f"otel_ctx.carry takes a plain function, got the async {getattr(fn, '__qualname__', fn)!r}; "
            "asyncio tasks carry the context by themselves (wrap the function that awaits it)"
        )
    snapshot = contextvars.copy_context()

    @functools.wraps(fn)
    def carried(*args: P.args, **kwargs: P.kwargs) -> R:
        return snapshot.copy().run(fn, *args, **kwargs)

    return carried
