"""Observe-only: the breakdown of a request someone else trimmed, emitted like a fit.

For agents that keep their own trimming (LangChain ``trim_messages``, hand-written
code): :func:`observe` measures a request exactly as it will be sent and changes
nothing; :func:`observed` wraps any callable that returns messages (or a FitResult)
so every call is measured and emitted.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypedDict, TypeVar, overload

from opentelemetry.util.types import AttributeValue

import otel_ctx.telemetry._recorder as recorder
from otel_ctx import names
from otel_ctx.adapters._langchain import as_chat_dicts
from otel_ctx.engine._budget import BudgetPolicy
from otel_ctx.engine._result import FitResult, Message
from otel_ctx.telemetry._emitter import Emitter, default_emitter, log_failure
from otel_ctx.telemetry._run import Books, Run, current_run
from otel_ctx.telemetry._trim import compare

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from otel_ctx._fitting import ContextFitter
    from otel_ctx.engine._request import RequestParts

P = ParamSpec("P")
R = TypeVar("R")

_FITTERS: OrderedDict[Hashable, ContextFitter] = OrderedDict()
_FITTERS_LOCK = threading.Lock()
_FITTER_CACHE_SIZE = 32


def fitter_for(
    policy: BudgetPolicy | Mapping[str, BudgetPolicy] | ContextFitter, model: str
) -> ContextFitter:
    """A fitter for ``policy`` and ``model``, reused across calls so its token cache stays warm
    (the next round of a conversation then costs only its new messages)."""
    from otel_ctx._fitting import ContextFitter

    if isinstance(policy, ContextFitter):
        return policy
    key: Hashable
    if isinstance(policy, BudgetPolicy):
        key = (policy, model)
    elif isinstance(policy, Mapping):
        key = (tuple(sorted(policy.items())), model)
    else:
        from otel_ctx.engine._errors import InvalidPolicyError

        raise InvalidPolicyError(
            "policy",
            f"must be a BudgetPolicy, a mapping of them or a ContextFitter, got {type(policy).__name__}",
        )
    with _FITTERS_LOCK:
        fitter = _FITTERS.get(key)
        if fitter is not None:
            _FITTERS.move_to_end(key)
            return fitter
    fitter = ContextFitter(policy, model=model)
    with _FITTERS_LOCK:
        _FITTERS[key] = fitter
        while len(_FITTERS) > _FITTER_CACHE_SIZE:
            _FITTERS.popitem(last=False)
    return fitter


def observe(
    messages: Sequence[Any],
    *,
    task_type: str | None,
    model: str,
    policy: BudgetPolicy | Mapping[str, BudgetPolicy] | ContextFitter,
    emitter: Emitter | None = None,
    **parts: Unpack[RequestParts],
) -> FitResult:
    """Measure and emit the breakdown of a request exactly as it will be sent; change nothing.

    Inside a :func:`run`, this is the run's next round; elsewhere the span attaches to
    the current span. Invalid input raises the fit engine's typed errors.
    LangChain message objects are accepted and converted to chat-completions dicts.
    """
    fitter = fitter_for(policy, model)
    msgs = as_chat_messages(messages)

    active = current_run()
    rec = recorder.start(
        emitter or (active.emitter if active is not None else default_emitter()),
        mode=names.MODE_OBSERVE,
        model=model,
        known_task_types=fitter.task_types,
        books=active,
    )
    return rec.call(lambda: fitter.measure(msgs, task_type=task_type, **parts))


def as_chat_messages(messages: Sequence[Any]) -> list[Message]:
    """Chat-completions dicts as they are; LangChain ``BaseMessage`` objects converted."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        from otel_ctx.engine._errors import InvalidRequestError

        raise InvalidRequestError("messages", f"must be a list of messages, got {type(messages).__name__}")
    if all(isinstance(m, dict) for m in messages):
        return list(messages)
    # The LangChain adapter's conversion, not LangChain's helper called bare: it turns the
    # helper's own KeyError/TypeError/ValueError into the engine's typed errors, naming the
    # message, as measure() on the same messages does.
    return [d for group in as_chat_dicts(messages) for d in group]


class _ObservedOptions(TypedDict, total=False):
    """The settings of :func:`observed`, which says what each means."""

    task_type: str | None
    model: str | None
    policy: BudgetPolicy | Mapping[str, BudgetPolicy] | ContextFitter | None
    tools: Sequence[Mapping[str, Any]] | None
    system_prompt: str | None
    emitter: Emitter | None


@overload
def observed(fn: Callable[P, R], **options: Unpack[_ObservedOptions]) -> Callable[P, R]: ...


@overload
def observed(
    fn: None = ..., **options: Unpack[_ObservedOptions]
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def observed(
    fn: Callable[P, R] | None = None, **options: Unpack[_ObservedOptions]
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Wrap a fit callable so each call is emitted as a round; its return value is unchanged.

    * ``observed(fitter.fit)``: an instrumented fit (the FitResult is emitted as is);
    * ``observed(my_trim, policy=..., task_type=..., model=...)`` or as a decorator: the
      messages it returns (dicts or LangChain messages) are measured with ``policy`` plus
      the given ``tools`` and ``system_prompt``, and emitted in observe mode.

    Inside a :func:`run` each call is the run's next round (and the run's fitter, task
    type and model are the defaults). A failure to measure what the callable returned is
    logged on ``otel_ctx.telemetry``; the caller always gets the callable's own result.
    Coroutine functions get an async wrapper.
    """
    from otel_ctx._fitting import ContextFitter

    for name in options.keys() - _ObservedOptions.__annotations__.keys():
        raise TypeError(f"observed() got an unexpected keyword argument {name!r}")
    owner = getattr(fn, "__self__", None)  # observed(fitter.fit): the bound fitter
    watcher = _Watcher(owner if isinstance(owner, ContextFitter) else None, **options)
    if fn is None:
        return lambda f: observed(f, **options)
    if inspect.iscoroutinefunction(fn):
        afn: Callable[P, Awaitable[Any]] = fn

        @functools.wraps(fn)
        async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
            start = time.time_ns()
            out = await afn(*args, **kwargs)
            watcher.emit(out, start, args, kwargs)
            return out

        return async_wrapper  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        start = time.time_ns()
        out = fn(*args, **kwargs)
        watcher.emit(out, start, args, kwargs)
        return out

    return wrapper


@dataclasses.dataclass(frozen=True)
class _Watcher:
    """What :func:`observed` knows about the callable it wraps."""

    bound_fitter: ContextFitter | None
    task_type: str | None = None
    model: str | None = None
    policy: BudgetPolicy | Mapping[str, BudgetPolicy] | ContextFitter | None = None
    tools: Sequence[Mapping[str, Any]] | None = None
    system_prompt: str | None = None
    emitter: Emitter | None = None

    def emit(
        self,
        out: object,
        start_time: int,
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        try:
            self._emit(out, start_time, _given_messages(args, kwargs or {}))
        except Exception as exc:
            log_failure("observing a wrapped fit callable", exc)

    def _emit(self, out: object, start_time: int, given: Sequence[Any] | None = None) -> None:
        active = current_run()
        trim_extra: dict[str, AttributeValue] = {}
        if isinstance(out, FitResult):
            result, mode = out, names.MODE_FIT
            fitter = self.bound_fitter
        else:
            fitter = self._fitter(active)
            if fitter is None:
                raise LookupError(
                    "observed(): the callable returned messages but no policy was given and no run is active"
                )
            task = self.task_type if self.task_type is not None else (active.task_type if active else None)

            fit_measure = fitter.measure

            def measure(messages: Any) -> FitResult:
                msgs = as_chat_messages(messages)
                return fit_measure(msgs, tools=self.tools, system_prompt=self.system_prompt, task_type=task)

            result, mode = measure(out), names.MODE_OBSERVE
            if given is not None and isinstance(out, Sequence):
                try:
                    result, trim_extra = _with_trim_report(result, given, out)
                    if result.dropped_messages:
                        whole = measure(given).breakdown.estimated
                        result = dataclasses.replace(result, tokens_before=whole)
                except Exception as exc:  # the round is still worth emitting without the comparison
                    log_failure("comparing a trimmer's input and output", exc)
        rec = recorder.start(
            self.emitter or (active.emitter if active is not None else default_emitter()),
            mode=mode,
            model=self.model or (active.model if active is not None else None) or result.model,
            known_task_types=fitter.task_types if fitter is not None else (),
            books=active,
            start_time=start_time,
            extra=trim_extra,
        )
        rec.result(result)
        rec.end()

    def _fitter(self, active: Books | None) -> ContextFitter | None:
        if self.policy is not None:
            model = self.model or (active.model if active is not None else None) or "gpt-4o"
            return fitter_for(self.policy, model)
        if self.bound_fitter is not None:
            return self.bound_fitter
        # A run with a fitter of its own; a task block's books measure nothing themselves.
        return active.fitter if isinstance(active, Run) else None


def _given_messages(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Sequence[Any] | None:
    """The message list a trimmer was called with (``messages=`` or its first argument)."""
    given = kwargs.get("messages", args[0] if args else None)
    if isinstance(given, Sequence) and not isinstance(given, (str, bytes)):
        return given
    return None


def _with_trim_report(
    result: FitResult, given: Sequence[Any], returned: Sequence[Any]
) -> tuple[FitResult, dict[str, AttributeValue]]:
    """The measured result with what the trimmer dropped, and the span attributes that flag
    a request sent without its ticket or with a tool result whose call was dropped."""
    report = compare(given, returned)
    outcome = result.outcome
    if report.dropped_messages and outcome == "fit":
        outcome = "compacted"
    result = dataclasses.replace(
        result,
        outcome=outcome,
        dropped_turns=report.dropped_turns,
        dropped_messages=report.dropped_messages,
    )
    return result, {
        names.TRIM_TICKET_DROPPED: report.ticket_dropped,
        names.TRIM_ORPHANED_TOOL_RESULTS: report.orphaned_tool_results,
    }
