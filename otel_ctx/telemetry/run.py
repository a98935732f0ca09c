"""An agent run: one ``context_budget.run`` span, one child span per fitted round.

``with otel_ctx.run(fitter, task_type="returns") as run:`` (or ``async with``) opens the
run span and makes it current; ``run.fit(...)`` numbers the rounds; ``run.record_usage``
feeds the provider's reported counts back into the fitter's calibration.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar, Token
from types import TracebackType
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind
from opentelemetry.util.types import AttributeValue

from otel_ctx import names
from otel_ctx.engine.errors import InvalidRequestError
from otel_ctx.engine.result import FitResult, Message
from otel_ctx.engine.sources import SourcesLike
from otel_ctx.telemetry.content import record_exception
from otel_ctx.telemetry.emitter import MODE_FIT, MODE_OBSERVE, Emitter, default_emitter, log_failure

if TYPE_CHECKING:
    from otel_ctx.engine.fitter import ContextFitter

Pinned = Sequence[int] | Callable[[int, Message], bool] | None

_CURRENT_RUN: ContextVar[Run | None] = ContextVar("otel_ctx_current_run", default=None)


def current_run() -> Run | None:
    """The run whose ``with`` block is executing in this context, if any."""
    return _CURRENT_RUN.get()


class Run:
    """One agent run. Use as ``with`` or ``async with``; see :func:`run`."""

    def __init__(
        self,
        fitter: ContextFitter,
        *,
        task_type: str | None,
        conversation_id: str | None = None,
        agent_name: str | None = None,
        model: str | None = None,
        emitter: Emitter | None = None,
    ) -> None:
        # Fail at the start of the run, not at round 3, when the task type has no budget.
        fitter.policy_for(task_type)
        self.fitter = fitter
        self.task_type = task_type
        self.conversation_id = conversation_id
        self.agent_name = agent_name
        self.model: str = model or fitter.model
        self.emitter = emitter or default_emitter()
        self.rounds = 0
        self.last_result: FitResult | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self._lock = threading.Lock()
        self._span: Span | None = None
        self._span_context: Context | None = None
        self._otel_token: Token[Context] | None = None
        self._run_token: Token[Run | None] | None = None
        extra: dict[str, AttributeValue] = {}
        if conversation_id is not None:
            extra[names.GEN_AI_CONVERSATION_ID] = conversation_id
        if agent_name is not None:
            extra[names.GEN_AI_AGENT_NAME] = agent_name
        # Conversation id and agent name go on every round span (so Jaeger finds a round by
        # conversation), never on metrics.
        self.span_extra: Mapping[str, AttributeValue] = extra

    # --- the run span ------------------------------------------------------------------

    def __enter__(self) -> Run:
        self._start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._end(exc)

    async def __aenter__(self) -> Run:
        self._start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._end(exc)

    def _start(self) -> None:
        try:
            attrs: dict[str, AttributeValue] = {
                names.TASK_TYPE: self.task_type if self.task_type is not None else names.DEFAULT_TASK_TYPE,
                names.GEN_AI_REQUEST_MODEL: self.model,
                **self.span_extra,
            }
            self._span = self.emitter.tracer.start_span(
                names.SPAN_RUN, kind=SpanKind.INTERNAL, attributes=attrs
            )
            self._span_context = trace.set_span_in_context(self._span)
            self._otel_token = otel_context.attach(self._span_context)
        except Exception as exc:
            log_failure("starting the run span", exc)
        self._run_token = _CURRENT_RUN.set(self)

    def _end(self, exc: BaseException | None) -> None:
        if self._run_token is not None:
            try:
                _CURRENT_RUN.reset(self._run_token)
            except ValueError:  # exited in another context than it was entered in
                _CURRENT_RUN.set(None)
            self._run_token = None
        try:
            if self._otel_token is not None:
                otel_context.detach(self._otel_token)
                self._otel_token = None
            span = self._span
            if span is not None and span.is_recording():
                span.set_attribute(names.ROUNDS, self.rounds)
                if self.input_tokens:
                    span.set_attribute(names.GEN_AI_USAGE_INPUT_TOKENS, self.input_tokens)
                if self.output_tokens:
                    span.set_attribute(names.GEN_AI_USAGE_OUTPUT_TOKENS, self.output_tokens)
                if exc is not None:
                    record_exception(span, exc)
            if span is not None:
                span.end()
        except Exception as inner:
            log_failure("ending the run span", inner)

    def next_round(self) -> int:
        """Claim the next round number (1, 2, …); safe from several threads."""
        with self._lock:
            self.rounds += 1
            return self.rounds

    def parent_context(self) -> Context | None:
        """Where a round span goes: the current span when it is in this run's trace (an agent
        step the application opened inside the run), else the run span itself (a worker thread
        the context did not follow into)."""
        if self._span is None:
            return None
        run_trace = self._span.get_span_context().trace_id
        if trace.get_current_span().get_span_context().trace_id == run_trace:
            return None
        return self._span_context

    # --- rounds ------------------------------------------------------------------------

    def fit(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        system_prompt: str | None = None,
        snippets: SourcesLike = None,
        skills: SourcesLike = None,
        task_type: str | None = None,
        pinned: Pinned = None,
    ) -> FitResult:
        """``fitter.fit(...)`` as the next round of this run (task type: the run's unless given)."""
        task = task_type if task_type is not None else self.task_type
        fitter = self.fitter

        def call() -> FitResult:
            return fitter.fit(
                messages,
                tools=tools,
                system_prompt=system_prompt,
                snippets=snippets,
                skills=skills,
                task_type=task,
                pinned=pinned,
            )

        return self._round(call, MODE_FIT)

    def observe(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        system_prompt: str | None = None,
        snippets: SourcesLike = None,
        skills: SourcesLike = None,
        task_type: str | None = None,
    ) -> FitResult:
        """``fitter.measure(...)`` as the next round: the request as given, changing nothing."""
        task = task_type if task_type is not None else self.task_type
        fitter = self.fitter

        def call() -> FitResult:
            return fitter.measure(
                messages,
                tools=tools,
                system_prompt=system_prompt,
                snippets=snippets,
                skills=skills,
                task_type=task,
            )

        return self._round(call, MODE_OBSERVE)

    def _round(self, call: Callable[[], FitResult], mode: str) -> FitResult:
        result = self.emitter.instrument(
            call,
            round_number=self.next_round(),
            mode=mode,
            model=self.model,
            known_task_types=self.fitter.task_types,
            parent=self.parent_context(),
            extra=self.span_extra,
        )
        self.last_result = result
        return result

    def emit(self, result: FitResult, *, mode: str = MODE_OBSERVE, start_time: int | None = None) -> None:
        """Record a result computed elsewhere (an observed callable) as the next round."""
        span = None
        try:
            name = names.SPAN_OBSERVE if mode == MODE_OBSERVE else names.SPAN_FIT
            span = self.emitter.tracer.start_span(name, context=self.parent_context(), start_time=start_time)
        except Exception as exc:
            log_failure("starting the round span", exc)
        self.emitter.emit(
            result,
            span=span,
            round_number=self.next_round(),
            mode=mode,
            model=self.model,
            known_task_types=self.fitter.task_types,
            extra=self.span_extra,
        )
        self.last_result = result

    # --- usage -------------------------------------------------------------------------

    def record_usage(
        self, *, input_tokens: int, output_tokens: int | None = None, result: FitResult | None = None
    ) -> float:
        """Feed the provider's reported prompt tokens for ``result`` (default: the last round)
        into the fitter's calibration; record the estimate's accuracy. Returns the accuracy."""
        res = result if result is not None else self.last_result
        if res is None:
            raise InvalidRequestError("record_usage", "no round has been fitted in this run yet")
        if output_tokens is not None and (
            isinstance(output_tokens, bool) or not isinstance(output_tokens, int) or output_tokens < 0
        ):
            raise InvalidRequestError(
                "record_usage.output_tokens", f"must be an int >= 0, got {output_tokens!r}"
            )
        accuracy = self.fitter.observe_usage(res, input_tokens)
        try:
            with self._lock:
                self.input_tokens += input_tokens
                self.output_tokens += output_tokens or 0
            self.emitter.record_accuracy(
                accuracy,
                task_type=res.task_type,
                model=self.model,
                known_task_types=self.fitter.task_types,
                context=self._span_context,
            )
            span = self._span
            if span is not None and span.is_recording():
                event: dict[str, AttributeValue] = {
                    names.ROUND: self.rounds,
                    names.GEN_AI_USAGE_INPUT_TOKENS: input_tokens,
                    names.ESTIMATED_TOKENS: res.breakdown.estimated,
                    names.ESTIMATE_ACCURACY_RATIO: float(accuracy),
                    names.CALIBRATION: float(self.fitter.calibration),
                }
                if output_tokens is not None:
                    event[names.GEN_AI_USAGE_OUTPUT_TOKENS] = output_tokens
                span.add_event(names.EVENT_USAGE, event)
        except Exception as exc:
            log_failure("recording usage", exc)
        return accuracy


def run(
    fitter: ContextFitter,
    *,
    task_type: str | None,
    conversation_id: str | None = None,
    agent_name: str | None = None,
    model: str | None = None,
    emitter: Emitter | None = None,
) -> Run:
    """Open an agent run: ``with otel_ctx.run(fitter, task_type="returns") as run: run.fit(...)``.

    ``emitter`` is for tests and for applications that keep otel-ctx off the global
    providers; by default the global tracer and meter are used.
    """
    return Run(
        fitter,
        task_type=task_type,
        conversation_id=conversation_id,
        agent_name=agent_name,
        model=model,
        emitter=emitter,
    )
