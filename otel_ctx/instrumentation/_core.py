"""One observed provider call: measure the request, open the round's span, learn from the usage.

The wrappers around the SDKs call :meth:`Observer.start` before the call and hand the
response (or the end of its stream) to the :class:`Round` it returns. Nothing here may
reach the agent: every step is guarded, a failure is logged once per kind on
``otel_ctx.telemetry``, and the call goes on exactly as it would have without otel-ctx.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

import otel_ctx.instrumentation._chain as _chain
import otel_ctx.instrumentation._ticket as _ticket
from otel_ctx import names
from otel_ctx._pricing import Usage
from otel_ctx.adapters._base import count_replies
from otel_ctx.engine import BudgetPolicy
from otel_ctx.engine._errors import (
    InvalidPolicyError,
    InvalidRequestError,
    UnknownTaskTypeError,
)
from otel_ctx.instrumentation._config import Config
from otel_ctx.instrumentation._context import current_task
from otel_ctx.telemetry._content import exception_type
from otel_ctx.telemetry._emitter import Emitter, log_failure
from otel_ctx.telemetry._recorder import RoundRecord
from otel_ctx.telemetry._trim import Trim

if TYPE_CHECKING:
    from otel_ctx._fitting import ContextFitter
    from otel_ctx.engine._result import FitResult
    from otel_ctx.telemetry._run import Books

#: Fields a request body never carries: the SDKs' per-call transport options.
_NOT_BODY = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})
#: The request's own output limit, per dialect, in the order the provider honours them.
_OUTPUT_LIMITS = ("max_completion_tokens", "max_output_tokens", "max_tokens")
_FITTERS = 64


def request_body(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments that become the request body (sentinels and transport options left out)."""
    return {
        k: v for k, v in kwargs.items() if k not in _NOT_BODY and type(v).__name__ not in ("NotGiven", "Omit")
    }


@dataclass(slots=True)
class FrameworkCall:
    """A chat-model call a framework (LangChain) announced; the SDK call made inside it claims it."""

    claimed: bool = False
    #: Trims the framework made before this call (recorded on the round that claims it).
    trims: list[Trim] = dataclasses.field(default_factory=list)


#: Set by the LangChain handler while a chat model runs: the SDK wrapper's exact measure of the
#: same request wins, and the handler then records nothing of its own (no double counting).
FRAMEWORK_CALL: ContextVar[FrameworkCall | None] = ContextVar("otel_ctx_framework_call", default=None)


#: True while a call is observed by a layer above the provider SDKs (LiteLLM, which sends
#: ``openai/…`` models through the openai SDK): the SDK wrappers inside it stand down, so one
#: request is one round whichever layers it passes through.
OBSERVED_ABOVE: ContextVar[bool] = ContextVar("otel_ctx_observed_above", default=False)


class Conversations:
    """Round numbers per conversation: the Nth call of a conversation is round N.

    Bounded: the least recently seen conversation is forgotten first, so an agent
    serving many users holds a fixed amount of memory (a forgotten one restarts at 1).
    """

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._rounds: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def next_round(self, conversation_id: str) -> int:
        with self._lock:
            n = self._rounds.pop(conversation_id, 0) + 1
            self._rounds[conversation_id] = n
            if len(self._rounds) > self.max_entries:
                self._rounds.popitem(last=False)
            return n

    def __len__(self) -> int:
        return len(self._rounds)


def _assistant_turns(body: Mapping[str, Any], transcript: str) -> int:
    """The model's replies in the body's ``transcript`` field, for a call that could not be
    measured (a measured call's reader counts them as it reads: ``FitResult.replies``)."""
    return count_replies(body.get(transcript))


def field_of(obj: Any, name: str) -> Any:
    """A field of an SDK object or of the same thing as decoded JSON (a raw response's body)."""
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def int_or_0(value: Any) -> int:
    """A count as an SDK reported it: an int (never a bool), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _requested_output(body: Mapping[str, Any]) -> int | None:
    config = body.get("config")  # Google Gen AI keeps it in the call's config (a dict or the SDK's type)
    if config is not None:
        found = config.get("max_output_tokens") if isinstance(config, Mapping) else None
        found = getattr(config, "max_output_tokens", None) if found is None else found
        body = {"max_output_tokens": found, **body}
    inference = body.get("inferenceConfig")  # Bedrock Converse keeps it in inferenceConfig
    if isinstance(inference, Mapping):
        body = {"max_tokens": inference.get("maxTokens"), **body}
    for key in _OUTPUT_LIMITS:
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _call_span(span: Span) -> Span | None:
    """The provider call's span if it is the current one: a GenAI instrumentation's ``chat …``
    around the SDK's method, or the SDK's own (``anthropic.messages.create``)."""
    attributes = getattr(span, "attributes", None)
    if not span.is_recording() or not isinstance(attributes, Mapping):
        return None
    return span if names.GEN_AI_OPERATION_NAME in attributes else None


class Reader(Protocol):
    """What one call's answer says beyond its usage, read for its dialect (a Responses chain's
    server-held context, Anthropic's server-side edits): made per call by the dialect's opener,
    shown every response object and stream event, settled once when the answer is complete."""

    @property
    def continues(self) -> bool:
        """The call continues a conversation the provider stores (its round and id are the chain's)."""

    @property
    def round_number(self) -> int: ...

    @property
    def conversation_id(self) -> str | None: ...

    @property
    def pending(self) -> bool:
        """The breakdown waits for the usage: part of the context was never seen here."""

    @property
    def figure_source(self) -> str: ...

    def see(self, obj: Any) -> None: ...

    def settle(self, round_: Round, reported: int | None) -> None:
        """The answer is complete (``reported``: its input tokens, if any): record what it said."""


#: A dialect's reader of one call, from the request as the provider reads it and its measure:
#: the reader and the measure over the context the call really has (a stored chain's lines added).
Opener = Callable[["Observer", Mapping[str, Any], "FitResult"], tuple[Reader, "FitResult"]]


@dataclass(frozen=True, slots=True)
class Dialect:
    """What one provider's calls need beyond the generic measure; kept with its SDK's targets."""

    #: The request body's field that holds the transcript (its replies number the rounds).
    transcript: str = "messages"
    reader: Opener | None = None


_PLAIN = Dialect()


class Observer:
    """Shared by every wrapped SDK method of one instrumentation."""

    def __init__(
        self, config: Config, emitter: Emitter, dialects: Mapping[str, Dialect] | None = None
    ) -> None:
        self.config = config
        self.emitter = emitter
        #: Each provider's dialect, by the name its wrappers pass to :meth:`start`.
        self.dialects: Mapping[str, Dialect] = dialects or {}
        self.conversations = Conversations(config.max_conversations)
        #: Responses conversations the server keeps: the lines of each observed chain.
        self.chains = _chain.ChainStore(config.max_conversations)
        self._fitters: OrderedDict[str, ContextFitter] = OrderedDict()
        self._lock = threading.Lock()
        #: Flipped off by uninstrument() when another wrapper sits outside ours.
        self.active = True

    def fitter(self, model: str) -> ContextFitter:
        """One fitter per model: its token cache keeps later rounds to their new messages, and
        its calibration is that model's."""
        with self._lock:
            found = self._fitters.get(model)
            if found is not None:
                self._fitters.move_to_end(model)
                return found
        from otel_ctx._fitting import ContextFitter

        # The budget is each call's own (see _start); the fitter's policy only lets it measure.
        fitter = ContextFitter(BudgetPolicy(context_length=1 << 40, reserved_output=0), model=model)
        with self._lock:
            fitter = self._fitters.setdefault(model, fitter)
            while len(self._fitters) > _FITTERS:
                self._fitters.popitem(last=False)
        return fitter

    def start(
        self,
        kwargs: Mapping[str, Any],
        provider: str,
        *,
        start_time: int | None = None,
        parent: Context | None = None,
        framework: bool = False,
    ) -> Round | None:
        """Measure a call about to be made and open its round. None (and a log line) on any failure.

        ``framework`` marks a round a framework's callback reports after the fact (with the
        ``start_time`` and ``parent`` context it saw when the call began).
        """
        if not self.active or OBSERVED_ABOVE.get():
            return None
        began = start_time or time.time_ns()
        trims: list[Trim] = []
        progress = _Progress()
        round_: Round | None
        try:
            if not framework:
                announced = FRAMEWORK_CALL.get()
                if announced is not None:
                    announced.claimed = True
                    trims, announced.trims = announced.trims, []
            round_ = self._start(kwargs, provider, began, parent, progress)
        except Exception as exc:
            # Never a dark call: what could not be measured still gets its round span (why, and
            # what could be read) and is counted, and the call goes on unchanged.
            round_ = self._unmeasured(kwargs, provider, began, parent, progress, exc)
            if round_ is None:
                return None
        try:
            round_.record_trims(trims)
        except Exception as exc:
            log_failure(f"recording the trims before a {provider} call", exc)
        return round_

    def _start(
        self,
        kwargs: Mapping[str, Any],
        provider: str,
        start_time: int,
        parent: Context | None,
        progress: _Progress,
    ) -> Round:
        body = request_body(kwargs)
        # What the provider reads: options passed through extra_body are part of the request it
        # counts (a structured-output format, context management), so they are measured too.
        extra = kwargs.get("extra_body")
        view = {**body, **extra} if isinstance(extra, Mapping) else body
        progress.body = view
        # Only a string is a model name: anything else would turn request data into a label.
        requested = view.get("model")
        model = requested if isinstance(requested, str) and requested else "unknown"
        progress.model = model
        info = current_task(parent)  # the task in force when the call began
        task_type = info.task_type or self.config.default_task_type
        progress.task_type, progress.conversation_id = task_type, info.conversation_id
        policy = self.config.policy(task_type, model, _requested_output(view))
        fitter = self.fitter(model)
        # Measured against the call's own budget (window, reserved output, margin): the
        # fitter's own policy is only there so it can measure.
        result = fitter.measure_request(view, provider=provider, task_type=task_type, policy=policy)
        reader: Reader | None = None
        opener = self.dialects.get(provider, _PLAIN).reader
        if opener is not None:
            reader, result = opener(self, view, result)
        conversation_id = info.conversation_id
        round_number = self.round_number(view, provider, conversation_id, reader, result.replies)
        progress.round_number = round_number
        if conversation_id is None and reader is not None and reader.continues:
            conversation_id = reader.conversation_id
        progress.measured = True
        current = trace.get_current_span(parent)
        span = self.emitter.tracer.start_span(
            names.SPAN_OBSERVE, context=parent, kind=SpanKind.INTERNAL, start_time=start_time
        )
        # From here on a failure is the telemetry's: the unmeasured round takes this span over.
        progress.span = span
        round_ = Round(self, span, result, fitter, round_number, model, _call_span(current))
        round_.booked = _ticket.book_round(round_.record, result, model)
        round_.reader = reader
        # Usage teaches the calibration only where the provider counts what the body shows: no
        # stored context continued, no server-side cut allowed.
        round_.like_with_like = not _chain.lets_server_cut(view) and not (
            reader is not None and reader.continues
        )
        round_.begin(provider, conversation_id)
        return round_

    def round_number(
        self,
        body: Mapping[str, Any],
        provider: str,
        conversation_id: str | None,
        reader: Reader | None = None,
        replies: int | None = None,
    ) -> int:
        """The call's round: the Nth call of a task's conversation is round N, as is round N of a
        stored Responses chain with no task around it; otherwise the model's replies in the
        transcript plus one (``replies`` as the measure counted them; counted here for a call it
        could not measure)."""
        if conversation_id is not None:
            return self.conversations.next_round(conversation_id)
        if reader is not None and reader.continues:
            return reader.round_number
        if replies is None:
            replies = _assistant_turns(body, self.dialects.get(provider, _PLAIN).transcript)
        return replies + 1

    def _unmeasured(
        self,
        kwargs: Mapping[str, Any],
        provider: str,
        start_time: int,
        parent: Context | None,
        progress: _Progress,
        exc: Exception,
    ) -> Unmeasured | None:
        """The round of a call that could not be measured: a span and a count. Never raises."""
        reason = progress.reason(exc)
        with contextlib.suppress(Exception):  # a broken log handler must not lose the round
            log_failure.unmeasured(reason, f"an instrumented {provider} call", exc)
        try:
            round_number = progress.round_number
            if round_number is None:
                body = progress.body if progress.body is not None else request_body(kwargs)
                with contextlib.suppress(Exception):  # a transcript that cannot be read has no round
                    round_number = self.round_number(body, provider, progress.conversation_id)
            span = progress.span
            if span is None:
                span = self.emitter.tracer.start_span(
                    names.SPAN_OBSERVE, context=parent, kind=SpanKind.INTERNAL, start_time=start_time
                )
            task_type = progress.task_type
            if task_type is None:
                task_type = self.config.default_task_type
            round_ = Unmeasured(
                self, span, model=progress.model, task_type=task_type, round_number=round_number
            )
            round_.open(provider, progress.conversation_id, reason, exc)
            return round_
        except Exception as inner:
            log_failure(f"opening the round of an unmeasured {provider} call", inner)
            return None


@dataclass(slots=True)
class _Progress:
    """How far opening a round got: what the round of a call that could not be measured can say."""

    body: Mapping[str, Any] | None = None
    model: str = "unknown"
    task_type: str | None = None
    conversation_id: str | None = None
    round_number: int | None = None
    #: The request was measured: a failure after this is the telemetry's.
    measured: bool = False
    #: The round span, once opened: a failure after it takes the span over instead of a second one.
    span: Span | None = None

    def reason(self, exc: BaseException) -> str:
        """One of ``names.UNOBSERVED_REASONS``: a fixed value, never the error's text."""
        if self.measured:
            return names.UNOBSERVED_TELEMETRY_ERROR
        if isinstance(exc, InvalidRequestError):
            return names.UNOBSERVED_INVALID_REQUEST
        if isinstance(exc, (InvalidPolicyError, UnknownTaskTypeError)):
            return names.UNOBSERVED_INVALID_POLICY
        return names.UNOBSERVED_MEASURE_ERROR


class Round:
    """One observed call, recorded through its :class:`~otel_ctx.telemetry._recorder.RoundRecord`;
    this class knows the provider's side: its dialect's :class:`Reader` and whether the usage may
    teach the calibration. Its span is current while the SDK sends the request."""

    def __init__(
        self,
        observer: Observer,
        span: Span,
        result: FitResult,
        fitter: ContextFitter,
        round_number: int,
        model: str,
        call_span: Span | None,
    ) -> None:
        self.observer = observer
        self.span = span
        self.record = RoundRecord(
            observer.emitter,
            span,
            names.MODE_OBSERVE,
            model,
            observer.config.task_types,
            round_number,
            call_span=call_span,
        )
        self.result = result
        self.fitter = fitter
        self.round_number = round_number
        self.model = model
        self.usage: Usage | None = None
        #: The task block's books and this call's round number in them (the zero-code ticket view).
        self.booked: tuple[Books, int] | None = None
        #: What the answer says beyond its usage, for its dialect (None: the usage says it all).
        self.reader: Reader | None = None
        #: The provider counts what the body shows: only then may its usage teach the calibration.
        self.like_with_like = True
        self._deferred = False
        self._done = False
        self._lock = threading.Lock()

    def _task_type(self) -> str | None:
        return self.result.task_type

    def begin(self, provider: str, conversation_id: str | None) -> None:
        extra: dict[str, AttributeValue] = {names.PROVIDER: provider}
        if conversation_id is not None:
            extra[names.GEN_AI_CONVERSATION_ID] = conversation_id
        self.record.extra = extra
        if self.reader is not None and self.reader.pending:
            # Part of the context is held by the server and was never seen here: the round's
            # breakdown (and its metrics) waits for the usage that says how large it is.
            self._deferred = True
        else:
            self._record()
        # Current while the SDK sends: what is traced below the request layer (an HTTP client's
        # spans) nests under the round; the provider call's own span is its parent.
        self.record.attach()

    def _record(self) -> None:
        """The round's breakdown on its span, the provider call's span and the metrics."""
        source = self.reader.figure_source if self.reader is not None else names.FIGURE_REQUEST
        self.record.result(self.result, figure_source=source, strict=True)

    def breakdown_settled(self) -> None:
        """The usage said how large the server-held part is: the waiting breakdown is recorded, or
        the span's lines set again."""
        if self._deferred:
            self._deferred = False
            self._record()
        elif self.reader is not None and self.reader.figure_source == names.FIGURE_USAGE:
            self.record.refresh(self.result, figure_source=names.FIGURE_USAGE)

    def record_trims(self, trims: list[Trim]) -> None:
        """Trims made before this call by someone else (a framework): events and counters."""
        for trim in trims:
            self.record.trim(trim, self._task_type())

    @property
    def reads_answers(self) -> bool:
        """Whether the answer has more to say than its usage (a Responses chain, Anthropic edits)."""
        return self.reader is not None

    def see(self, obj: Any) -> None:
        """A response object or stream event, read for what the usage does not say. Never raises."""
        reader = self.reader
        if reader is None:
            return
        try:
            reader.see(obj)
        except Exception as exc:
            log_failure("reading a provider response", exc)

    def call(self, wrapped: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Make the provider call; a failure ends the round and goes on to the agent unchanged."""
        try:
            response = wrapped(*args, **kwargs)
        except BaseException as exc:
            self.detach()
            self.finish(None, exc)
            raise
        self.detach()
        return response

    async def acall(
        self, wrapped: Callable[..., Awaitable[Any]], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """:meth:`call` for an async provider call."""
        try:
            response = await wrapped(*args, **kwargs)
        except BaseException as exc:
            self.detach()
            self.finish(None, exc)
            raise
        self.detach()
        return response

    def detach(self) -> None:
        """The SDK call returned: our span is no longer the current one (its stream may go on)."""
        self.record.detach()

    def finish(self, usage: Usage | None, error: BaseException | None = None) -> None:
        """The answer is complete (or failed): learn from its usage and end the span. Once only."""
        with self._lock:
            if self._done:
                return
            self._done = True
        try:
            if error is not None and self.span.is_recording():
                # The type only, as the GenAI instrumentations do: the agent's call failed, not ours.
                self.span.set_status(Status(StatusCode.ERROR, type(error).__name__))
            self._finish(usage)
        except Exception as exc:
            log_failure("recording a provider call's usage", exc)
        finally:
            self.record.end()

    def _finish(self, usage: Usage | None) -> None:
        reported = usage.input_tokens if usage is not None and usage.input_tokens > 0 else None
        if self.reader is not None:
            self.reader.settle(self, reported)
        if usage is None or reported is None:
            return
        self.usage = usage
        _ticket.book_usage(self.booked, usage)
        result = self.result
        if self.like_with_like:
            accuracy = self.fitter.observe_usage(result, usage.input_tokens)
        else:
            # A partial view (server-held state, server-side edits) never moves the calibration.
            accuracy = usage.input_tokens / max(1, result.breakdown.estimated)
        self.record.usage(
            usage,
            accuracy=accuracy,
            task_type=result.task_type,
            context_length=result.breakdown.context_length,
        )


class Unmeasured(Round):
    """A call otel-ctx could not measure: a round span in the usual place with what could be read
    (provider, model, task type, round, mode, ``context_budget.unobserved.reason``, the error's
    class, then the usage), but no breakdown and no fit, so no panel averages a measure never made.

    Its status stays unset unless the provider call itself fails: the agent's call went through,
    and an error status would count it in every trace backend's error rate.
    """

    def __init__(
        self,
        observer: Observer,
        span: Span,
        *,
        model: str,
        task_type: str | None,
        round_number: int | None,
    ) -> None:
        # No result or fitter: the methods that would read them are overridden here.
        super().__init__(observer, span, None, None, round_number or 0, model, None)  # type: ignore[arg-type]
        self.task_type = task_type
        self.known_round = round_number is not None
        self.like_with_like = False

    def _task_type(self) -> str | None:
        return self.task_type

    def open(self, provider: str, conversation_id: str | None, reason: str, error: BaseException) -> None:
        """Put what could be read on the span, count the call, and make the span current."""
        span = self.span
        if span.is_recording():
            attrs: dict[str, AttributeValue] = {
                names.PROVIDER: provider,
                names.MODEL: self.model,
                names.TASK_TYPE: self.task_type if self.task_type is not None else names.DEFAULT_TASK_TYPE,
                names.MODE: names.MODE_OBSERVE,
                names.UNOBSERVED_REASON: reason,
                names.UNOBSERVED_ERROR_TYPE: exception_type(error),
            }
            if self.known_round:
                attrs[names.ROUND] = self.round_number
            if conversation_id is not None:
                attrs[names.GEN_AI_CONVERSATION_ID] = conversation_id
            span.set_attributes(attrs)
        self.record.unmeasured(reason, self.task_type)
        self.record.attach()

    def _finish(self, usage: Usage | None) -> None:
        if usage is None or usage.input_tokens <= 0:
            return
        self.usage = usage
        # The bill is known even where the estimate is not: the round says what was paid.
        self.record.usage(usage)
