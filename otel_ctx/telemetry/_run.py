"""An agent run: one ``context_budget.run`` span, one child span per fitted round.

``with otel_ctx.run(fitter, task_type="returns") as run:`` (or ``async with``) opens the
run span and makes it current; ``run.fit(...)`` numbers the rounds; ``run.record_usage``
feeds the provider's reported counts back into the fitter's calibration.

A run also keeps the ticket's books (:class:`~otel_ctx._ledger.RunLedger`): tokens spent
against the policy's ``run_ceiling`` (``run.ceiling_reached`` after a round that must not
be sent), cost from the price table, and how it ended (``run.resolve("resolved")``).
When the block exits, the run's tokens and cost are recorded once, by task type,
resolution and stop, whether the block returned or raised.

The books need no fitter (:class:`Books`: the zero-code ticket view keeps them for SDK
calls the instrumentor measured); :class:`Run` adds the rounds it fits and measures itself.
Each round is recorded through :mod:`otel_ctx.telemetry._recorder`, as every round is.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar, Token
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind
from opentelemetry.util.types import AttributeValue

import otel_ctx.telemetry._recorder as recorder
from otel_ctx import names
from otel_ctx._ledger import CeilingCheck, RunCeilingReached, RunLedger
from otel_ctx._pricing import PriceTable, Usage, default_prices
from otel_ctx.engine._errors import InvalidRequestError
from otel_ctx.engine._result import FitResult, Message
from otel_ctx.telemetry._content import record_exception
from otel_ctx.telemetry._emitter import Emitter, default_emitter, log_failure

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from otel_ctx._fitting import ContextFitter
    from otel_ctx.engine._request import FitOptions, MeasureOptions

_B = TypeVar("_B", bound="Books")

_CURRENT_RUN: ContextVar[Books | None] = ContextVar("otel_ctx_current_run", default=None)


def _labels(metric: names.Metric, values: Mapping[str, str]) -> dict[str, str]:
    """The labels ``metric`` carries, from the run's values: the registry decides which, not the call."""
    return {name: values[name] for name in metric.attributes}


def _start_ceiling_stops(emitter: Emitter, task: str, model: str) -> None:
    values = {names.TASK_TYPE: task, names.GEN_AI_REQUEST_MODEL: model}
    emitter.start_ceiling_stops(_labels(names.CEILING_STOPS, values))


def start_counters(
    fitter: ContextFitter, *, model: str | None = None, emitter: Emitter | None = None
) -> None:
    """Start the ceiling-stop and fit counters at 0 for every task type of ``fitter``. Never raises.

    A run starts its own task type's counters; call this at start-up, before the first
    ticket, so that Prometheus scrapes the 0 of every task type before its first stop or fit
    and ``rate()`` sees them: an error budget over a young service divides every fit it had.
    """
    try:
        em = emitter or default_emitter()
        for task in fitter.task_types:
            task_label = em.labels.task_label(task, fitter.task_types)
            model_label = em.labels.model_label(model or fitter.model)
            _start_ceiling_stops(em, task_label, model_label)
            em.start_fit_counters(task_label, model_label)
    except Exception as exc:
        log_failure("starting the ceiling-stop counters", exc)


def current_run() -> Books | None:
    """The run whose ``with`` block is executing in this context, if any."""
    return _CURRENT_RUN.get()


class Books:
    """A run's books: its span, its ledger and its per-run counters, with no fitter.

    The zero-code ticket view keeps these for SDK calls the instrumentor measured;
    :class:`Run` adds the rounds it fits and measures itself.
    """

    def __init__(
        self,
        *,
        task_type: str | None,
        model: str,
        known_task_types: tuple[str, ...] = (),
        run_ceiling: int | None = None,
        conversation_id: str | None = None,
        agent_name: str | None = None,
        emitter: Emitter | None = None,
        prices: PriceTable | None = None,
        resolutions: Iterable[str] = (),
    ) -> None:
        self.task_type = task_type
        #: The task types with a policy of their own: the metric labels are bounded to these.
        self.known_task_types = known_task_types
        self.conversation_id = conversation_id
        self.agent_name = agent_name
        self.model: str = model
        self.emitter = emitter or default_emitter()
        self.prices = prices if prices is not None else default_prices()
        self.ledger = RunLedger(
            ceiling=run_ceiling,
            model=self.model,
            prices=self.prices,
            resolutions=(*self.emitter.labels.resolutions, *resolutions),
        )
        #: The last round's check against the run ceiling (None before the first round).
        self.last_check: CeilingCheck | None = None
        # id(result) -> (weak reference, round): ``record_usage(result=...)`` books a result's usage
        # to the round it was, however many rounds ago, without keeping the results alive; an
        # entry leaves when its result is collected (so a reused id never finds a stale round).
        self._round_by_result: dict[int, tuple[weakref.ref[FitResult], int]] = {}
        self._finished = False
        self.rounds = 0
        self.last_result: FitResult | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self._lock = threading.Lock()
        self._span: Span | None = None
        self._span_context: Context | None = None
        self._otel_token: Token[Context] | None = None
        self._run_token: Token[Books | None] | None = None
        extra: dict[str, AttributeValue] = {}
        if conversation_id is not None:
            extra[names.GEN_AI_CONVERSATION_ID] = conversation_id
        if agent_name is not None:
            extra[names.GEN_AI_AGENT_NAME] = agent_name
        # Conversation id and agent name go on every round span (so Jaeger finds a round by
        # conversation), never on metrics.
        self.span_extra: Mapping[str, AttributeValue] = extra

    # --- the run span ------------------------------------------------------------------

    def __enter__(self: _B) -> _B:
        self._start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._end(exc)

    async def __aenter__(self: _B) -> _B:
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
                names.MODEL: self.model,
                names.PRICES_AS_OF: self.prices.as_of,
                **self.span_extra,
            }
            if self.ledger.ceiling is not None:
                attrs[names.RUN_CEILING] = self.ledger.ceiling
            self._span = self.emitter.tracer.start_span(
                names.SPAN_RUN, kind=SpanKind.INTERNAL, attributes=attrs
            )
            self._span_context = trace.set_span_in_context(self._span)
            self._otel_token = otel_context.attach(self._span_context)
        except Exception as exc:
            log_failure("starting the run span", exc)
        try:
            _start_ceiling_stops(self.emitter, self._task_label(), self._model_label())
        except Exception as exc:
            log_failure("starting the run's counters", exc)
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
                    span.set_attribute(names.USAGE_INPUT_TOKENS, self.input_tokens)
                if self.output_tokens:
                    span.set_attribute(names.USAGE_OUTPUT_TOKENS, self.output_tokens)
                if exc is not None:
                    record_exception(span, exc)
            self._finish(exc is not None, span)
            if span is not None:
                span.end()
        except Exception as inner:
            log_failure("ending the run span", inner)

    def _task_label(self) -> str:
        return self.emitter.labels.task_label(self.task_type, self.known_task_types)

    def _model_label(self) -> str:
        return self.emitter.labels.model_label(self.model)

    def _finish(self, raised: bool, span: Span | None) -> None:
        """The run's resolution on its span and its one record in the per-run metrics."""
        with self._lock:
            if self._finished:
                return
            self._finished = True
        ledger = self.ledger
        resolution = ledger.final_resolution(raised=raised)
        spent, cost = ledger.spent_tokens, ledger.cost
        if span is not None and span.is_recording():
            span.set_attributes({names.RESOLUTION: resolution, names.STOP: ledger.stop})
            self._update_run_span()
        em = self.emitter
        task = self._task_label()
        model = self._model_label()
        values = {
            names.TASK_TYPE: task,
            names.RESOLUTION: self.emitter.labels.resolution_label(resolution),
            names.STOP: ledger.stop,
            names.GEN_AI_REQUEST_MODEL: model,
        }
        em.run_tokens.record(spent, _labels(names.RUN_TOKENS, values), self._span_context)
        if cost is not None:
            em.run_cost.record(cost, _labels(names.RUN_COST, values), self._span_context)
        if ledger.ceiling is not None:
            em.run_ceiling_utilization.record(
                spent / ledger.ceiling, _labels(names.RUN_CEILING_UTILIZATION, values), self._span_context
            )

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

    def check_round(
        self,
        number: int,
        result: FitResult,
        span: Span | None,
        *,
        attributes_out: dict[str, AttributeValue] | None = None,
    ) -> CeilingCheck:
        """Count the round in the ledger, check the ceiling, and put both on the round span.

        With ``attributes_out`` the round's run attributes (when its span records) are added
        there instead, for the caller to set with the round's other attributes (one pass of the
        SDK's checks).
        """
        b = result.breakdown
        overflow = result.outcome == names.OUTCOME_OVERFLOW
        had_stop = self.ledger.stop
        check = self.ledger.add_round(
            number, prompt_tokens=b.estimated, reserved_output=b.reserved_output, overflow=overflow
        )
        self.last_check = check
        self._remember_round(result, number)
        crossed = check.crossed and not overflow
        try:
            if span is not None and span.is_recording():
                attrs: dict[str, AttributeValue] = {
                    names.RUN_SPENT_TOKENS: check.spent,
                    names.RUN_NEXT_TOKENS: check.next_tokens,
                    names.RUN_CEILING_CROSSED: crossed,
                    names.COST_SOURCE: "estimate",
                }
                if check.ceiling is not None:
                    attrs[names.RUN_CEILING] = check.ceiling
                spend = self.ledger.round_spend(number)
                if spend is not None and spend.cost is not None and spend.source == "estimate":
                    attrs[names.COST_USD] = spend.cost
                if attributes_out is not None:
                    attributes_out.update(attrs)
                else:
                    span.set_attributes(attrs)
                if crossed:
                    span.add_event(
                        names.EVENT_RUN_CEILING,
                        {
                            names.RUN_SPENT_TOKENS: check.spent,
                            names.RUN_NEXT_TOKENS: check.next_tokens,
                            names.RUN_CEILING: check.ceiling or 0,
                        },
                    )
            if crossed and had_stop == names.STOP_NONE and self.ledger.stop == names.STOP_CEILING:
                values = {
                    names.TASK_TYPE: self._task_label(),
                    names.GEN_AI_REQUEST_MODEL: self._model_label(),
                }
                self.emitter.ceiling_stops.add(1, _labels(names.CEILING_STOPS, values))
            self._update_run_span()
        except Exception as exc:
            log_failure("recording the run ceiling", exc)
        return check

    def _update_run_span(self) -> None:
        """Tokens and cost so far on the run span, so a trace shows them while the run goes on."""
        span = self._span
        if span is None or not span.is_recording():
            return
        attrs: dict[str, AttributeValue] = {
            names.RUN_SPENT_TOKENS: self.ledger.spent_tokens,
            names.COST_SOURCE: self.ledger.cost_source,
        }
        cost = self.ledger.cost
        if cost is not None:
            attrs[names.COST_USD] = cost
        span.set_attributes(attrs)  # one lock and one validation pass, every round

    # --- the ticket's books ------------------------------------------------------------

    @property
    def ceiling_reached(self) -> bool:
        """True when the last round must not be sent: it would take the run over its ceiling."""
        check = self.last_check
        last = self.last_result
        return (
            check is not None and check.crossed and (last is None or last.outcome != names.OUTCOME_OVERFLOW)
        )

    def raise_for_ceiling(self) -> None:
        """Raise :class:`~otel_ctx._ledger.RunCeilingReached` when :attr:`ceiling_reached`."""
        if self.ceiling_reached and self.last_check is not None:
            raise RunCeilingReached(self.last_check, self.task_type)

    @property
    def spent_tokens(self) -> int:
        """Tokens the run has spent: prompts and answers, reported where recorded, else estimated."""
        return self.ledger.spent_tokens

    @property
    def cost(self) -> float | None:
        """USD the run has cost so far (None: the model is not in the price table)."""
        return self.ledger.cost

    def resolve(self, resolution: str) -> None:
        """Say how the run ended: ``resolved``, ``escalated``, ``abandoned``, or a configured value.

        Unsaid, a run that stopped at an overflow or its ceiling counts as ``escalated``, a
        block that raised as ``error``, anything else as ``unresolved``.
        """
        self.ledger.resolve(resolution)

    def emit(
        self, result: FitResult, *, mode: str = names.MODE_OBSERVE, start_time: int | None = None
    ) -> None:
        """Record a result computed elsewhere (an observed callable) as the next round."""
        rec = recorder.start(
            self.emitter,
            mode=mode,
            model=self.model,
            known_task_types=self.known_task_types,
            books=self,
            start_time=start_time,
        )
        rec.book(self, result)
        rec.result(result)
        rec.end()

    # --- rounds observed elsewhere (the zero-code path) ---------------------------------

    def use_model(self, model: str) -> None:
        """Price the run by ``model`` and name it on the run span when it was not known at the start.

        A task block of the zero-code path opens its run before its first SDK call names a
        model; the first call's model then prices the books (the per-run metrics carry no model).
        """
        if self.rounds == 0 and model != self.model:
            self.model = model
            self.ledger.model = model
            self.ledger.price = self.prices.price_for(model)
            span = self._span
            if span is not None and span.is_recording():
                span.set_attribute(names.MODEL, model)

    def book_usage(self, number: int, usage: Usage) -> None:
        """The provider's reported counts for booked round ``number`` replace its estimate.

        Only the books: the component that measured the round records the estimate's
        accuracy and calibrates its own fitter.
        """
        self.ledger.record_usage(number, usage)
        with self._lock:
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
        self._update_run_span()

    def _remember_round(self, result: FitResult, number: int) -> None:
        key = id(result)
        table = self._round_by_result

        def forget(ref: weakref.ref[FitResult]) -> None:
            found = table.get(key)
            if found is not None and found[0] is ref:
                table.pop(key, None)

        # A result type without weak references is not findable by identity.
        with contextlib.suppress(TypeError):
            table[key] = (weakref.ref(result, forget), number)

    def _round_of(self, result: FitResult) -> int:
        """The round ``result`` was fitted as in this run; refused when it was not one of them."""
        found = self._round_by_result.get(id(result))
        if found is not None and found[0]() is result:
            return found[1]
        raise InvalidRequestError(
            "record_usage.result",
            "is not a round of this run (fitted by another run or outside one); its usage cannot be "
            "booked to any round of this run",
        )


class Run(Books):
    """Open an agent run: ``with otel_ctx.run(fitter, task_type="returns") as run: run.fit(...)``
    (or ``async with``); its rounds are fitted or measured here.

    ``emitter`` is for tests and for applications that keep otel-ctx off the global
    providers; by default the global tracer and meter are used. ``prices`` replaces the
    shipped price table (see :mod:`otel_ctx._pricing`); ``run_ceiling`` the policy's;
    ``resolutions`` adds a few resolutions of the application's own.
    """

    def __init__(
        self,
        fitter: ContextFitter,
        *,
        task_type: str | None,
        conversation_id: str | None = None,
        agent_name: str | None = None,
        model: str | None = None,
        emitter: Emitter | None = None,
        prices: PriceTable | None = None,
        run_ceiling: int | None = None,
        resolutions: Iterable[str] = (),
    ) -> None:
        # Fail at the start of the run, not at round 3, when the task type has no budget.
        policy = fitter.policy_for(task_type)
        self.fitter = fitter
        super().__init__(
            task_type=task_type,
            model=model or fitter.model,
            known_task_types=fitter.task_types,
            run_ceiling=run_ceiling if run_ceiling is not None else policy.run_ceiling,
            conversation_id=conversation_id,
            agent_name=agent_name,
            emitter=emitter,
            prices=prices,
            resolutions=resolutions,
        )

    # --- rounds ------------------------------------------------------------------------

    def fit(self, messages: Sequence[Message], **options: Unpack[FitOptions]) -> FitResult:
        """``fitter.fit(...)`` as the next round of this run (task type: the run's unless given)."""
        if options.get("task_type") is None:
            options["task_type"] = self.task_type
        fitter = self.fitter
        return self._round(lambda: fitter.fit(messages, **options), names.MODE_FIT)

    def observe(self, messages: Sequence[Message], **options: Unpack[MeasureOptions]) -> FitResult:
        """``fitter.measure(...)`` as the next round: the request as given, changing nothing."""
        if options.get("task_type") is None:
            options["task_type"] = self.task_type
        fitter = self.fitter
        return self._round(lambda: fitter.measure(messages, **options), names.MODE_OBSERVE)

    def _round(self, call: Callable[[], FitResult], mode: str) -> FitResult:
        rec = recorder.start(
            self.emitter, mode=mode, model=self.model, known_task_types=self.known_task_types, books=self
        )
        return rec.call(call, book=self)

    # --- usage -------------------------------------------------------------------------

    def record_usage(
        self,
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        result: FitResult | None = None,
        cached_input_tokens: int = 0,
        cache_creation_input_tokens: int = 0,
        usage: Usage | None = None,
    ) -> float:
        """Feed the provider's reported counts for ``result`` (default: the last round) into
        the fitter's calibration and the run's books; record the estimate's accuracy.

        Give the counts (``input_tokens`` is every prompt token, cached ones included), or a
        :class:`~otel_ctx._pricing.Usage` (``Usage.from_openai(response.usage)``,
        ``Usage.from_anthropic(response.usage)``). Returns reported ÷ estimated.
        """
        res = result if result is not None else self.last_result
        if res is None:
            raise InvalidRequestError("record_usage", "no round has been fitted in this run yet")
        if usage is None:
            if input_tokens is None:
                raise InvalidRequestError("record_usage", "give input_tokens or usage")
            if output_tokens is not None and (
                isinstance(output_tokens, bool) or not isinstance(output_tokens, int) or output_tokens < 0
            ):
                raise InvalidRequestError(
                    "record_usage.output_tokens", f"must be an int >= 0, got {output_tokens!r}"
                )
            if isinstance(input_tokens, bool) or not isinstance(input_tokens, int) or input_tokens <= 0:
                raise InvalidRequestError(
                    "record_usage.input_tokens", f"must be a positive integer, got {input_tokens!r}"
                )
            usage = Usage(
                input_tokens=input_tokens,
                output_tokens=output_tokens or 0,
                cached_input_tokens=cached_input_tokens,
                cache_creation_input_tokens=cache_creation_input_tokens,
            )
        elif input_tokens is not None or output_tokens is not None:
            raise InvalidRequestError("record_usage", "give either the counts or usage, not both")
        # Which round before anything is booked: a result this run never fitted is refused
        # whole, not half-recorded in the calibration.
        number = self._round_of(res)
        accuracy = self.fitter.observe_usage(res, usage.input_tokens)
        spend = self.ledger.record_usage(number, usage)
        try:
            with self._lock:
                self.input_tokens += usage.input_tokens
                self.output_tokens += usage.output_tokens
            self.emitter.record_accuracy(
                accuracy,
                task_type=res.task_type,
                model=self.model,
                known_task_types=self.known_task_types,
                context=self._span_context,
            )
            span = self._span
            if span is not None and span.is_recording():
                event: dict[str, AttributeValue] = {
                    names.ROUND: number,
                    names.USAGE_INPUT_TOKENS: usage.input_tokens,
                    names.USAGE_OUTPUT_TOKENS: usage.output_tokens,
                    names.ESTIMATED_TOKENS: res.breakdown.estimated,
                    names.ESTIMATE_ACCURACY_RATIO: float(accuracy),
                    names.CALIBRATION: float(self.fitter.calibration),
                    names.COST_SOURCE: spend.source,
                }
                if usage.cached_input_tokens:
                    event[names.USAGE_CACHED_INPUT_TOKENS] = usage.cached_input_tokens
                if usage.cache_creation_input_tokens:
                    event[names.USAGE_CACHE_CREATION_INPUT_TOKENS] = usage.cache_creation_input_tokens
                if spend.cost is not None:
                    event[names.COST_USD] = spend.cost
                span.add_event(names.EVENT_USAGE, event)
            self._update_run_span()
        except Exception as exc:
            log_failure("recording usage", exc)
        return accuracy


#: ``with otel_ctx.run(fitter, task_type="returns") as run: run.fit(...)`` opens a :class:`Run`.
run = Run
