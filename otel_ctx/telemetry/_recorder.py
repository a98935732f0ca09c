"""One round's lifecycle: :func:`start` opens it, its handle records what it learned and ends it.

Every path that records a round goes through here (``run()``, ``observe()``, ``observed()``,
the instrumentor), so a round's span, metrics, trims, accuracy and place in a run's books are
written in one place. A handle never raises into the caller unless asked to (``strict``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind
from opentelemetry.util.types import AttributeValue

from otel_ctx import names
from otel_ctx._pricing import Usage
from otel_ctx.engine._result import FitResult
from otel_ctx.telemetry._content import capture_content, messages_json, record_exception
from otel_ctx.telemetry._emitter import Emitter, log_failure, span_attributes
from otel_ctx.telemetry._trim import Trim

if TYPE_CHECKING:
    from otel_ctx.telemetry._run import Books


def start(
    emitter: Emitter,
    *,
    mode: str = names.MODE_FIT,
    model: str | None = None,
    known_task_types: Iterable[str] = (),
    books: Books | None = None,
    start_time: int | None = None,
    extra: Mapping[str, AttributeValue] | None = None,
) -> RoundRecord:
    """Open a round's span. Never raises (a round without a span still records its metrics).

    Inside a run (``books``) the round takes the run's next number, goes under the run's span
    and carries the run's conversation and agent; elsewhere it is round 1.
    """
    extras: dict[str, AttributeValue] = dict(books.span_extra) if books is not None else {}
    if extra:
        extras.update(extra)
    number = books.next_round() if books is not None else 1
    span: Span | None = None
    try:
        name = names.SPAN_OBSERVE if mode == names.MODE_OBSERVE else names.SPAN_FIT
        parent = books.parent_context() if books is not None else None
        span = emitter.tracer.start_span(name, context=parent, kind=SpanKind.INTERNAL, start_time=start_time)
    except Exception as exc:
        log_failure("starting the round span", exc)
    return RoundRecord(emitter, span, mode, model, tuple(known_task_types), number, books, extras)


@dataclass(eq=False, slots=True)
class RoundRecord:
    """One round, from its span's start to its end."""

    emitter: Emitter
    span: Span | None
    mode: str
    model: str | None = None
    known_task_types: tuple[str, ...] = ()
    number: int = 1
    #: The run this round is the next round of, if any.
    books: Books | None = None
    #: Attributes of the run and the call that go on the span with the breakdown.
    extra: dict[str, AttributeValue] = field(default_factory=dict)
    #: The provider call's own span (a GenAI instrumentation's or the SDK's): window and utilization.
    call_span: Span | None = None
    _token: object | None = field(default=None, init=False)
    _ended: bool = field(default=False, init=False)

    # --- the span as the current one -----------------------------------------------------

    def attach(self) -> None:
        """Make the round's span current: what runs inside the round (a summariser's LLM call, an
        SDK's HTTP request) nests under it."""
        if self.span is not None:
            self._token = otel_context.attach(trace.set_span_in_context(self.span))

    def detach(self) -> None:
        """The round's span is no longer current (the round itself may go on: a stream)."""
        token, self._token = self._token, None
        if token is not None:
            try:
                otel_context.detach(token)  # type: ignore[arg-type]
            except Exception as exc:  # pragma: no cover - the API logs rather than raises
                log_failure("restoring the context", exc)

    def call(self, call: Callable[[], FitResult], *, book: Books | None = None) -> FitResult:
        """The whole round of ``call`` (a fit or a measure): made with the span current (so a
        summariser's own LLM span nests under it), counted in ``book`` when given, recorded, ended.
        The call's own exceptions end the round (recorded on its span) and go on unchanged."""
        self.attach()
        try:
            result = call()
            if book is not None:
                # The run's figures join the breakdown: one set of span attributes per round.
                self.book(book, result)
        except BaseException as exc:
            self.end(exc)
            raise
        self.detach()
        self.result(result)
        self.end()
        return result

    # --- what the round learned --------------------------------------------------------

    def book(self, books: Books, result: FitResult, *, with_breakdown: bool = True) -> int:
        """Count the round in a run's books (the ceiling check on its span); returns its number there.

        ``with_breakdown`` puts the run's figures on the span with the breakdown (one pass of the
        SDK's checks); without it they are set now (a round whose breakdown may wait for usage).
        """
        number = self.number if books is self.books else books.next_round()
        books.check_round(number, result, self.span, attributes_out=self.extra if with_breakdown else None)
        books.last_result = result
        return number

    def result(self, result: FitResult, *, figure_source: str | None = None, strict: bool = False) -> None:
        """The round's breakdown on its span and the provider call's, its metrics, and the trim
        it made (otel-ctx's own compaction or the agent's trimmer). ``strict`` lets a failure through."""
        try:
            self._result(result, figure_source)
        except Exception as exc:
            if strict:
                raise
            log_failure("emitting a round", exc)

    def _result(self, result: FitResult, figure_source: str | None) -> None:
        span, model = self.span, self.model or result.model
        if self.books is not None:
            self.books.last_result = result
        context: Context | None = None
        if span is not None:
            if span.is_recording():
                extra = (
                    self.extra
                    if figure_source is None
                    else {**self.extra, names.FIGURE_SOURCE: figure_source}
                )
                _annotate(span, result, self.number, self.mode, model, extra)
            # Histogram points recorded in this context carry the span as an exemplar.
            context = trace.set_span_in_context(span)
        call = self.call_span
        if call is not None:
            b = result.breakdown
            call.set_attributes(
                {
                    names.GEN_AI_CONTEXT_WINDOW_SIZE: b.context_length,
                    names.GEN_AI_CONTEXT_UTILIZATION: b.estimated / b.context_length,
                }
            )
        self.emitter.record_metrics(result, self.number, model, self.known_task_types, context)
        if span is not None and result.dropped_messages and result.tokens_before:
            performer = names.PERFORMER_OTEL_CTX if self.mode == names.MODE_FIT else names.PERFORMER_AGENT
            kind = "summary" if result.summary is not None else "drop"
            trim = Trim(
                performer, kind, result.tokens_before, result.breakdown.estimated, result.dropped_messages
            )
            self._record_trim(trim, result.task_type)

    def refresh(self, result: FitResult, *, figure_source: str) -> None:
        """The breakdown's lines again, after the usage said how large a server-held part is
        (attributes only: the round's events were added once, when it began)."""
        span = self.span
        if span is not None and span.is_recording():
            lines = span_attributes(result, round_number=self.number, model=self.model, mode=self.mode)
            span.set_attributes({**lines, **self.extra, names.FIGURE_SOURCE: figure_source})

    def trim(self, trim: Trim, task_type: str | None) -> None:
        """A cut someone else made of this round's context (a framework, the provider): the round
        says it was compacted (``gen_ai.conversation.compacted`` is not in the installed GenAI
        conventions, so the project's own flag carries it), and the trim is an event and a count."""
        span = self.span
        if span is not None and span.is_recording():
            span.set_attribute(names.COMPACTED, True)
        self._record_trim(trim, task_type)

    def _record_trim(self, trim: Trim, task_type: str | None) -> None:
        if self.span is not None:
            self.emitter.record_trim(
                self.span, trim, task_type=task_type, known_task_types=self.known_task_types
            )

    def provider_overflow(self, task_type: str | None) -> None:
        """The provider refused the request for the window."""
        if self.span is not None:
            self.emitter.record_provider_overflow(
                self.span, task_type=task_type, known_task_types=self.known_task_types
            )

    def unmeasured(self, reason: str, task_type: str | None) -> None:
        """The call could not be measured: the counter, by reason."""
        self.emitter.record_unobserved(
            self.span, reason, task_type=task_type, known_task_types=self.known_task_types
        )

    def usage(
        self,
        usage: Usage,
        *,
        accuracy: float | None = None,
        task_type: str | None = None,
        context_length: int = 0,
    ) -> None:
        """The provider's reported counts on the span; with ``accuracy``, the estimate's accuracy
        (recorded with the span as exemplar) and the provider call's utilization of its window."""
        span = self.span
        attrs: dict[str, AttributeValue] = {
            names.USAGE_INPUT_TOKENS: usage.input_tokens,
            names.USAGE_OUTPUT_TOKENS: usage.output_tokens,
            names.USAGE_CACHED_INPUT_TOKENS: usage.cached_input_tokens,
            names.USAGE_CACHE_CREATION_INPUT_TOKENS: usage.cache_creation_input_tokens,
        }
        if accuracy is not None:
            context = trace.set_span_in_context(span) if span is not None else None
            self.emitter.record_accuracy(
                accuracy,
                task_type=task_type,
                model=self.model or "unknown",
                known_task_types=self.known_task_types,
                context=context,
            )
            attrs[names.ESTIMATE_ACCURACY_RATIO] = float(accuracy)
        if span is not None and span.is_recording():
            span.set_attributes(attrs)
        call = self.call_span
        if accuracy is not None and call is not None and call.is_recording() and context_length:
            used = usage.input_tokens + usage.output_tokens
            call.set_attribute(names.GEN_AI_CONTEXT_UTILIZATION, used / context_length)

    # --- the end ---------------------------------------------------------------------------

    def end(self, error: BaseException | None = None) -> None:
        """End the round's span, marked failed by ``error`` (the call's own exception). Once only."""
        if self._ended:
            return
        self._ended = True
        self.detach()
        span = self.span
        if span is None:
            return
        try:
            if error is not None:
                record_exception(span, error)
        except Exception as exc:
            log_failure("recording the fit's exception", exc)
        try:
            span.end()
        except Exception as exc:
            log_failure("ending the round span", exc)


def _annotate(
    span: Span, result: FitResult, number: int, mode: str, model: str, extra: Mapping[str, AttributeValue]
) -> None:
    """The breakdown's attributes, the floor-overflow event and (opted in) the messages."""
    attrs = span_attributes(result, round_number=number, model=model, mode=mode)
    if extra:
        attrs.update(extra)
    span.set_attributes(attrs)
    b = result.breakdown
    if result.outcome == names.OUTCOME_OVERFLOW:
        span.add_event(
            names.EVENT_FLOOR_OVERFLOW,
            {names.ESTIMATED_TOKENS: b.estimated, names.BUDGET: b.budget, names.OVERFLOW_TOKENS: b.overflow},
        )
    if capture_content():
        span.add_event(
            names.EVENT_CONTENT, {names.GEN_AI_INPUT_MESSAGES: messages_json(result.request_messages())}
        )


__all__ = ["RoundRecord", "start"]
