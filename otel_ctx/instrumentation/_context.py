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
- **Generators**: a ``with otel_ctx.task(...)`` block inside a generator or an async
  generator is in force while that generator runs, not while it is suspended at a
  ``yield``: two conversations run as interleaved generators keep their own task and
  conversation. The decorator on a generator function works the same way. A block
  inside a ``@contextmanager`` generator belongs to the ``with`` that uses it.

A ``task`` object may be entered again while it is in force (nested, or in several
threads at once); each exit undoes its own entry, so the state before is back after
both.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import sys
import threading
from collections.abc import AsyncGenerator, Callable, Generator
from dataclasses import dataclass
from types import CodeType, FrameType, TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from opentelemetry import baggage
from opentelemetry import context as otel_context

from otel_ctx import names
from otel_ctx.instrumentation import _ticket

if TYPE_CHECKING:
    from contextvars import Token

    from otel_ctx.telemetry.run import Run

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")

#: Where the innermost entry lives in the OpenTelemetry context.
_KEY = otel_context.create_key("otel_ctx.task")
#: Frames that can be suspended with a ``with`` block open in them.
_SUSPENDABLE = inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR
#: A generator driven by one of these is a context manager (``contextlib.contextmanager``):
#: a block it opens is meant for its caller's ``with`` body, which runs while it is suspended.
_CONTEXT_MANAGER_METHODS = frozenset({"__enter__", "__aenter__", "__exit__", "__aexit__"})


@dataclass(frozen=True, slots=True)
class TaskInfo:
    task_type: str | None = None
    conversation_id: str | None = None


class _Entry:
    """One ``task`` in force: a link of an immutable chain, innermost first.

    An entry made in a generator's frame remembers that frame (its id and code: a
    reference would keep the generator's locals alive), the thread and the asyncio
    task: it applies in that thread and task only while the frame is running.
    """

    __slots__ = (
        "code",
        "conversation_id",
        "frame",
        "loop_task",
        "owner",
        "parent",
        "run",
        "task_type",
        "thread",
    )

    def __init__(
        self,
        owner: task,
        parent: _Entry | None,
        frame: FrameType | None,
        thread: int,
        loop_task: object | None,
    ) -> None:
        self.owner = owner
        self.task_type = owner.task_type
        self.conversation_id = owner.conversation_id
        self.parent = parent
        self.frame = id(frame) if frame is not None else None
        self.code: CodeType | None = frame.f_code if frame is not None else None
        self.thread = thread
        self.loop_task = loop_task
        #: The ticket-view run this entry opened (the outermost block under the instrumentor).
        self.run: tuple[Run, Token[Run | None]] | None = None

    def relinked(self, parent: _Entry | None) -> _Entry:
        copy = _Entry.__new__(_Entry)
        for slot in _Entry.__slots__:
            setattr(copy, slot, getattr(self, slot))
        copy.parent = parent
        return copy


def _owner(frame: FrameType | None) -> FrameType | None:
    """The generator frame a block opened in ``frame`` belongs to; None for an ordinary frame.

    A generator-based context manager's block belongs to the frame whose ``with`` drives
    it (and so, if that frame is a generator, to that generator).
    """
    f = frame
    while f is not None and f.f_code.co_flags & _SUSPENDABLE:
        driver = f.f_back
        if driver is None or driver.f_code.co_name not in _CONTEXT_MANAGER_METHODS:
            return f
        f = driver.f_back
    return None


def _loop_task() -> object | None:
    """The running asyncio task, if any (asyncio is not imported for this)."""
    aio = sys.modules.get("asyncio")
    if aio is None:
        return None
    try:
        running: object | None = aio.current_task()
    except RuntimeError:  # no running loop in this thread
        return None
    return running


def _running(frame_id: int, code: CodeType | None, thread: int, loop_task: object | None) -> bool:
    """Whether an entry bound to a generator's frame applies here and now."""
    if thread != threading.get_ident():
        return True  # the context was handed to another thread: what was in force comes along
    if loop_task is not None and loop_task is not _loop_task():
        return True  # ... or to another asyncio task
    f: FrameType | None = sys._getframe(1)
    while f is not None:
        if id(f) == frame_id and f.f_code is code:
            return True
        f = f.f_back
    return False  # that generator is suspended: its block is not in force here


def _in_force(context: otel_context.Context | None = None) -> list[_Entry]:
    """The entries that apply here, innermost first."""
    out = []
    entry = otel_context.get_value(_KEY, context)
    while isinstance(entry, _Entry):
        if entry.frame is None or _running(entry.frame, entry.code, entry.thread, entry.loop_task):
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

    def resolve(self, resolution: str) -> None:
        """Say how the block's run ended (``resolved``, ``escalated``, ``abandoned``, ...).

        Raises for a value that is not a resolution; does nothing when the block opened no
        run (not instrumented, or nested in another run).
        """
        opened = self.run
        if opened is not None:
            opened.resolve(resolution)

    @property
    def run(self) -> Run | None:
        """The run this block opened, if any: its ``spent_tokens``, ``cost``, ``ceiling_reached``."""
        for entry in _in_force():
            if entry.owner is self and entry.run is not None:
                return entry.run[0]
        return None

    # The frame that holds the ``with`` is the caller's: these are plain functions, not
    # coroutines, so that ``sys._getframe(1)`` is it for ``async with`` too.

    def __enter__(self) -> task:
        self._push(sys._getframe(1))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._pop(sys._getframe(1), exc)

    def __aenter__(self) -> Any:
        self._push(sys._getframe(1))
        return _ready(self)

    def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        self._pop(sys._getframe(1), exc)
        return _ready(self)

    def _push(self, frame: FrameType) -> None:
        head = otel_context.get_value(_KEY)
        bound = _owner(frame)
        entry = _Entry(
            self,
            head if isinstance(head, _Entry) else None,
            bound,
            threading.get_ident(),
            _loop_task() if bound is not None else None,
        )
        _set_chain(entry)
        info = current_task()
        entry.run = _ticket.open_run(info.task_type, info.conversation_id, self.run_ceiling)

    def _pop(self, frame: FrameType, exc: BaseException | None = None) -> None:
        """Remove this object's innermost entry made in ``frame``, whatever was entered since."""
        head = otel_context.get_value(_KEY)
        above: list[_Entry] = []
        entry = head if isinstance(head, _Entry) else None
        owner = _owner(frame)
        frame_id = id(owner) if owner is not None else None
        while entry is not None and not (entry.owner is self and entry.frame == frame_id):
            above.append(entry)
            entry = entry.parent
        if entry is None:
            return  # left in another context than it was entered in: nothing of it is here
        if entry.run is not None:
            _ticket.close_run(entry.run, exc)
        new = entry.parent
        for kept in reversed(above):  # entered since, by a generator now suspended, say
            new = kept.relinked(new)
        _set_chain(new)

    def __call__(self, fn: F) -> F:
        task_type, conversation_id, ceiling = self.task_type, self.conversation_id, self.run_ceiling
        if inspect.isasyncgenfunction(fn):

            @functools.wraps(fn)
            async def async_gen_wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
                inner = fn(*args, **kwargs)
                with task(task_type, conversation_id=conversation_id, run_ceiling=ceiling):
                    # ``yield from`` for an async generator: what is sent or thrown goes through.
                    try:
                        value = await inner.__anext__()
                        while True:
                            try:
                                sent = yield value
                            except GeneratorExit:
                                await inner.aclose()
                                raise
                            except BaseException as exc:
                                value = await inner.athrow(exc)
                            else:
                                value = await inner.asend(sent)
                    except StopAsyncIteration:
                        return

            return async_gen_wrapper  # type: ignore[return-value]

        if inspect.isgeneratorfunction(fn):

            @functools.wraps(fn)
            def gen_wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
                with task(task_type, conversation_id=conversation_id, run_ceiling=ceiling):
                    return (yield from fn(*args, **kwargs))

            return gen_wrapper  # type: ignore[return-value]

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


def carry(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run, wherever it is called, with the context in force now.

    For threads and executors, which start with an empty context:
    ``pool.submit(otel_ctx.carry(answer), ticket)`` or
    ``Thread(target=otel_ctx.carry(answer))`` book the worker's provider calls under the
    task, conversation and current span of the code that wrapped it. Each call runs in
    its own copy, so one wrapped function may run in many threads at once.

    A plain function: an async one would only be created in the copy and run wherever
    it is awaited (asyncio tasks copy the context by themselves).
    """
    if not callable(fn):
        raise TypeError(f"otel_ctx.carry takes a function, got {type(fn).__name__}")
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(
            f"otel_ctx.carry takes a plain function, got the async {getattr(fn, '__qualname__', fn)!r}; "
            "asyncio tasks carry the context by themselves (wrap the function that awaits it)"
        )
    snapshot = contextvars.copy_context()
    # What is in force here and now, without the blocks of suspended generators.
    settled: _Entry | None = None
    for entry in reversed(_in_force()):
        settled = _Entry(entry.owner, settled, None, entry.thread, None)
        settled.task_type, settled.conversation_id = entry.task_type, entry.conversation_id
    snapshot.run(_set_chain, settled)

    @functools.wraps(fn)
    def carried(*args: P.args, **kwargs: P.kwargs) -> R:
        return snapshot.copy().run(fn, *args, **kwargs)

    return carried
