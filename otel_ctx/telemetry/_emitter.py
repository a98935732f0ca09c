"""Turn one FitResult into a span's attributes and the metric records of its round.

Everything here goes through the OpenTelemetry *API* (a tracer and a meter handed in, or the
global ones), so it works the same under :func:`otel_ctx.configure`, an application's own SDK
setup and ``opentelemetry-instrument``. A telemetry failure is logged on ``otel_ctx.telemetry``
and never reaches the caller.

A round stays cheap: two measurements (the utilization histogram and the fits counter, each
with the round's span as exemplar); the breakdown lines, turn counts and trims are running
totals the SDK reads when it collects; attribute dicts are built once per label combination.
With native histograms on (``distributions``), each line and the utilization by round are
one more measurement each.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import traceback
import weakref
from collections.abc import Iterable
from dataclasses import dataclass

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

import otel_ctx.telemetry._instruments as instruments
from otel_ctx import names
from otel_ctx.engine._breakdown import Breakdown
from otel_ctx.engine._result import FitResult
from otel_ctx.telemetry._content import capture_content, exception_type
from otel_ctx.telemetry._exporters import distributions_from_env
from otel_ctx.telemetry._labels import LabelPolicy
from otel_ctx.telemetry._trim import Trim

logger = logging.getLogger("otel_ctx.telemetry")

try:  # the package may be used from a source tree that was never pip-installed
    from importlib.metadata import version as _dist_version

    _VERSION = _dist_version("otel-ctx")
except Exception:  # pragma: no cover - depends on how otel-ctx was installed
    _VERSION = "0.0.0"


def component_values(b: Breakdown) -> tuple[int, ...]:
    """The value of each ``context_budget.component`` line, aligned with ``names.COMPONENTS``.

    ``remaining`` is split into headroom and overflow so no histogram point is negative.
    """
    by_role = b.transcript_by_role
    return (
        b.transcript,
        *(by_role.get(role, 0) for role in names.ROLES),
        b.tool_schema,
        b.system_prompt,
        b.skills,
        b.server_held,
        b.estimated,
        b.budget,
        b.reserved_output,
        b.safety_margin,
        max(0, b.remaining),
        max(0, -b.remaining),
    )


def span_attributes(
    result: FitResult, *, round_number: int, model: str | None, mode: str = names.MODE_FIT
) -> dict[str, AttributeValue]:
    """Every ``names.FIT_SPAN_ATTRIBUTES`` value of one round (plus the mode). Names, never text."""
    b = result.breakdown
    by_role = b.transcript_by_role
    attrs: dict[str, AttributeValue] = {
        names.TASK_TYPE: result.task_type if result.task_type is not None else names.DEFAULT_TASK_TYPE,
        names.ROUND: round_number,
        names.OUTCOME: result.outcome,
        names.CONTEXT_LENGTH: b.context_length,
        # An attribute cannot be None; 0 reads as "no per-task limit" and keeps the closure
        # rule computable: min(context_length, request_limit or context_length).
        names.REQUEST_LIMIT: b.request_limit if b.request_limit is not None else 0,
        names.RESERVED_OUTPUT: b.reserved_output,
        names.SAFETY_MARGIN: b.safety_margin,
        names.BUDGET: b.budget,
        names.TRANSCRIPT_TOKENS: b.transcript,
    }
    for role, attribute in names.TRANSCRIPT_ROLE_TOKENS.items():
        attrs[attribute] = by_role.get(role, 0)
    attrs[names.TOOL_SCHEMA_TOKENS] = b.tool_schema
    attrs[names.SYSTEM_PROMPT_TOKENS] = b.system_prompt
    attrs[names.SKILLS_TOKENS] = b.skills
    attrs[names.SERVER_HELD_TOKENS] = b.server_held
    attrs[names.ESTIMATED_TOKENS] = b.estimated
    attrs[names.REMAINING_TOKENS] = b.remaining
    attrs[names.SYSTEM_PROMPT_IN_TRANSCRIPT] = b.system_prompt_in_transcript
    attrs[names.DROPPED_TURNS] = result.dropped_turns
    attrs[names.KEPT_TURNS] = result.kept_turns
    attrs[names.DROPPED_MESSAGES] = result.dropped_messages
    attrs[names.CAPPED_TOOL_RESULTS] = result.capped_tool_results
    attrs[names.CALIBRATION] = float(result.calibration)
    attrs[names.ENCODING] = result.encoding
    attrs[names.EXACT] = result.exact
    attrs[names.SOURCES] = [s.name for s in b.sources]
    attrs[names.SOURCE_CLASSES] = [s.data_class or "none" for s in b.sources]
    attrs[names.DATA_CLASS] = b.data_class or "none"
    attrs[names.MODEL] = model or result.model
    attrs[names.COMPACTED] = result.compacted
    attrs[names.MODE] = mode
    return attrs


@dataclass(frozen=True, slots=True)
class _MetricAttributes:
    """The attribute dicts and total keys of one (task, round, outcome, model) combination, built once."""

    utilization: dict[str, str]
    fits: dict[str, str]
    tokens: tuple[str, str, str]  # (task, outcome, model): a row of _Totals.tokens
    round_tokens: tuple[str, str]  # (round, task): a row of _Totals.round_tokens
    task_model: tuple[str, str]
    #: One attribute dict per ``names.LINE_COMPONENTS`` line (component, round, task), and the
    #: per-round utilization's: the distributions carry no model and no outcome.
    lines: tuple[dict[str, str], ...]
    round_utilization: dict[str, str]


#: A context whose span is invalid: a measurement made in it carries no exemplar (an empty
#: context would not do: the SDK reads an empty one as "the current context").
_NO_SPAN = trace.set_span_in_context(trace.INVALID_SPAN)

#: Where each ``names.ROUND_COMPONENTS`` line sits in ``component_values``.
_ROUND_INDEXES: tuple[int, ...] = tuple(names.COMPONENTS.index(c) for c in names.ROUND_COMPONENTS)
#: Where each ``names.LINE_COMPONENTS`` line sits in ``component_values``.
_LINE_INDEXES: tuple[int, ...] = tuple(names.COMPONENTS.index(c) for c in names.LINE_COMPONENTS)


class _Totals:
    """Running totals behind the token and turn counters, read by the SDK at collection time.

    A round adds its breakdown to a list of numbers under a lock (microseconds); the SDK
    turns the totals into counter points only when a reader collects, instead of one
    measurement per breakdown line per round. Shared by every Emitter on the same meter:
    the SDK keeps the callbacks of the first registration of an observable instrument only.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tokens: dict[tuple[str, ...], list[int]] = {}
        self.round_tokens: dict[tuple[str, ...], list[int]] = {}
        #: (task, model) -> [dropped turns, capped tool results].
        self.task_model: dict[tuple[str, ...], list[int]] = {}
        #: (task, performer) -> [trims, tokens removed]: behind context_budget.trims and
        #: context_budget.trimmed_tokens.
        self.trims: dict[tuple[str, ...], list[int]] = {}
        self._attrs: dict[tuple[str, ...], dict[str, str]] = {}

    def add(
        self,
        attrs: _MetricAttributes,
        values: tuple[int, ...],
        dropped: int,
        capped: int,
        *,
        per_round: bool = True,
    ) -> None:
        """Add one round; ``per_round=False`` leaves the per-round counter out (the line
        distributions carry it, and both would cost its series twice)."""
        with self.lock:
            row = self.tokens.get(attrs.tokens)
            if row is None:
                row = self.tokens[attrs.tokens] = [0] * len(values)
            for i, v in enumerate(values):
                row[i] += v
            if per_round:
                by_round = self.round_tokens.get(attrs.round_tokens)
                if by_round is None:
                    by_round = self.round_tokens[attrs.round_tokens] = [0] * len(_ROUND_INDEXES)
                for i, j in enumerate(_ROUND_INDEXES):
                    by_round[i] += values[j]
            # Zero totals still become points, so rate()/ratio queries see 0 rather than nothing.
            turns = self.task_model.setdefault(attrs.task_model, [0, 0])
            turns[0] += dropped
            turns[1] += capped

    def add_trim(self, task: str, performer: str, removed: int) -> None:
        """One trim of ``removed`` tokens by ``performer``."""
        with self.lock:
            row = self.trims.setdefault((task, performer), [0, 0])
            row[0] += 1
            row[1] += removed

    def start_trims(self, task: str) -> None:
        """Every performer's trims of a new task type start at 0, so the first trim counts in rate()."""
        with self.lock:
            for performer in names.PERFORMERS:
                self.trims.setdefault((task, performer), [0, 0])

    def clear(self) -> None:
        """Forget every total (a counter reset, which rate() handles): the bound on label sets."""
        with self.lock:
            for table in (self.tokens, self.round_tokens, self.task_model, self.trims, self._attrs):
                table.clear()

    def _attributes(self, key: tuple[str, ...], labels: tuple[str, ...]) -> dict[str, str]:
        attrs = self._attrs.get(key)
        if attrs is None:
            attrs = self._attrs[key] = dict(zip(labels, key[1:], strict=True))
        return attrs

    def observe_lines(
        self,
        metric: names.Metric,
        table: dict[tuple[str, ...], list[int]],
        lines: tuple[str, ...],
        _options: metrics.CallbackOptions,
    ) -> list[metrics.Observation]:
        """One point per line of each row of ``table`` (``metric``'s first label is the line)."""
        with self.lock:
            rows = [(k, list(v)) for k, v in table.items()]
        return [
            metrics.Observation(total, self._attributes((metric.name, line, *key), metric.attributes))
            for key, row in rows
            for line, total in zip(lines, row, strict=True)
        ]

    def observe_column(
        self,
        metric: names.Metric,
        table: dict[tuple[str, ...], list[int]],
        column: int,
        _options: metrics.CallbackOptions,
    ) -> list[metrics.Observation]:
        """One point per row of ``table``: its ``column``, labelled by the row's key."""
        with self.lock:
            rows = [(k, v[column]) for k, v in table.items()]
        return [
            metrics.Observation(total, self._attributes((metric.name, *key), metric.attributes))
            for key, total in rows
        ]


# One _Totals per meter (weakly held: a provider shut down and dropped takes its totals along).
_totals_by_meter: weakref.WeakKeyDictionary[object, _Totals] = weakref.WeakKeyDictionary()
_totals_lock = threading.Lock()


_CACHE_LIMIT = 4096


#: From this count on, each power of two of a reason's unmeasured calls is logged at WARNING.
_RECOUNT_FROM = 64


class _ErrorLog:
    """Log each kind of telemetry failure once at WARNING, repeats at DEBUG: a broken exporter
    in a loop of a million fits must not flood the application's log.

    A call otel-ctx could not measure (:meth:`unmeasured`) is logged at WARNING the first time
    for each reason and again whenever that reason's count reaches a power of two from
    :data:`_RECOUNT_FROM` on (64, 128, …): an operator learns both that calls go unmeasured and
    how many, in fifteen lines for a million calls; the others are at DEBUG.
    """

    def __init__(self) -> None:
        self._seen: set[tuple[str, type[BaseException]]] = set()
        self._unmeasured: dict[str, int] = {}
        self._lock = threading.Lock()

    def unmeasured(self, reason: str, where: str, exc: BaseException) -> int:
        """One call left unmeasured for ``reason`` (``where``: what was being done); returns the
        reason's count so far. The error's type and place only, never its message."""
        with self._lock:
            count = self._unmeasured.get(reason, 0) + 1
            self._unmeasured[reason] = count
        recount = count >= _RECOUNT_FROM and count & (count - 1) == 0
        level = logging.WARNING if count == 1 or recount else logging.DEBUG
        if not logger.isEnabledFor(level):
            return count
        calls = "1 call" if count == 1 else f"{count} calls"
        capture = capture_content()
        logger.log(
            level,
            "otel-ctx could not measure %s (reason %s%s); the call went on unmeasured, with an "
            "observe span carrying the reason. %s unmeasured for reason %s so far",
            where,
            reason,
            "" if capture else f": {_raised(exc)}",
            calls,
            reason,
            exc_info=exc if capture else None,
        )
        return count

    def unmeasured_counts(self) -> dict[str, int]:
        """Calls left unmeasured so far in this process, per reason."""
        with self._lock:
            return dict(self._unmeasured)

    def __call__(self, where: str, exc: BaseException) -> None:
        key = (where, type(exc))
        with self._lock:
            first = key not in self._seen
            self._seen.add(key)
        level = logging.WARNING if first else logging.DEBUG
        capture = capture_content()
        where_text = where if capture else f"{where} ({_raised(exc)})"
        logger.log(
            level,
            "otel-ctx telemetry failed in %s; the fit is unaffected",
            where_text,
            exc_info=exc if capture else None,
        )


def _raised(exc: BaseException) -> str:
    """``Type raised at file.py:line in function``: the exception's type and where it was
    raised, never its message or a traceback (which ends with the message): a framework's error
    can quote the request whole (LangChain's "Full content block: {...}")."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []
    last = frames[-1] if frames else None
    place = f"{os.path.basename(last.filename)}:{last.lineno} in {last.name}" if last else "an unknown place"
    return f"{exception_type(exc)} raised at {place}"


log_failure = _ErrorLog()


class Emitter:
    """Records fits as spans and metrics on a tracer and meter provider (default: the global ones)."""

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        labels: LabelPolicy | None = None,
        distributions: bool | None = None,
    ) -> None:
        self.labels = labels or LabelPolicy()
        #: Record each line per round as a distribution (``names.DISTRIBUTIONS``) instead of the
        #: per-round counter: only where histograms are exported as native (exponential) ones.
        #: ``None`` reads OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION;
        #: :func:`otel_ctx.configure` sets it from its own settings.
        self.distributions = distributions_from_env() if distributions is None else distributions
        self.tracer: trace.Tracer = trace.get_tracer(
            names.INSTRUMENTATION_SCOPE, _VERSION, tracer_provider=tracer_provider
        )
        meter = metrics.get_meter(names.INSTRUMENTATION_SCOPE, _VERSION, meter_provider=meter_provider)
        self._utilization = instruments.create(meter, names.UTILIZATION)
        self._accuracy = instruments.create(meter, names.ESTIMATE_ACCURACY)
        self._fits = instruments.create(meter, names.FITS)
        # Created always (an instrument never recorded to exports nothing), recorded only when
        # distributions are on: the switch may be flipped after the emitter exists.
        self._line_tokens = instruments.create(meter, names.LINE_TOKENS)
        self._round_utilization = instruments.create(meter, names.ROUND_UTILIZATION)
        self._provider_overflows = instruments.create(meter, names.PROVIDER_OVERFLOWS)
        self._unobserved = instruments.create(meter, names.UNOBSERVED_CALLS)
        #: Task labels whose unmeasured-call counters already started at 0.
        self._unobserved_tasks: set[str] = set()
        #: The per-run instruments, recorded once per run by :mod:`otel_ctx.telemetry._run`.
        self.ceiling_stops = instruments.create(meter, names.CEILING_STOPS)
        self.run_tokens = instruments.create(meter, names.RUN_TOKENS)
        self.run_cost = instruments.create(meter, names.RUN_COST)
        self.run_ceiling_utilization = instruments.create(meter, names.RUN_CEILING_UTILIZATION)
        #: The label sets whose ceiling-stop counter already started at 0.
        self._ceiling_started: set[tuple[str, ...]] = set()
        self._lock = threading.Lock()
        self._totals = self._register_totals(meter)
        self._attr_cache: dict[tuple[str, str, str, str], _MetricAttributes] = {}
        self._seen_task_models: set[tuple[str, str]] = set()

    @staticmethod
    def _register_totals(meter: metrics.Meter) -> _Totals:
        """The meter's running totals, with their observable counters registered once."""
        with _totals_lock:
            try:
                totals = _totals_by_meter.get(meter)
            except TypeError:  # a meter that cannot be weakly referenced: no sharing
                totals = None
            if totals is not None:
                return totals
            totals = _Totals()
            for metric, table, lines in (
                (names.TOKENS, totals.tokens, names.COMPONENTS),
                (names.ROUND_TOKENS, totals.round_tokens, names.ROUND_COMPONENTS),
            ):
                callback = functools.partial(totals.observe_lines, metric, table, lines)
                instruments.create(meter, metric, callbacks=[callback])
            for metric, table, column in (
                (names.DROPPED_TURNS_METRIC, totals.task_model, 0),
                (names.CAPPED_TOOL_RESULTS_METRIC, totals.task_model, 1),
                (names.TRIMS, totals.trims, 0),
                (names.TRIMMED_TOKENS, totals.trims, 1),
            ):
                callback = functools.partial(totals.observe_column, metric, table, column)
                instruments.create(meter, metric, callbacks=[callback])
            with contextlib.suppress(TypeError):
                _totals_by_meter[meter] = totals
            return totals

    def start_ceiling_stops(self, attributes: dict[str, str]) -> None:
        """Start a task type's ceiling-stop counter at 0, so rate() sees its first stop."""
        key = tuple(attributes.values())
        if key in self._ceiling_started:
            return
        with self._lock:
            if len(self._ceiling_started) >= _CACHE_LIMIT:  # labels are bounded; this only guards memory
                self._ceiling_started.clear()
            self._ceiling_started.add(key)
        self.ceiling_stops.add(0, attributes)

    def record_metrics(
        self,
        result: FitResult,
        round_number: int,
        model: str,
        known_task_types: Iterable[str] = (),
        context: Context | None = None,
    ) -> None:
        """Two measurements (utilization, fits) and the running totals of one round, plus each
        line and the utilization by round when distributions are on."""
        b = result.breakdown
        task = self.labels.task_label(result.task_type, known_task_types)
        key = (task, self.labels.round_label(round_number), result.outcome, self.labels.model_label(model))
        attrs = self._attr_cache.get(key)
        if attrs is None:
            attrs = self._build_attributes(key)
        utilization = b.estimated / b.budget
        values = component_values(b)
        self._utilization.record(utilization, attrs.utilization, context)
        self._fits.add(1, attrs.fits, context)
        distributions = self.distributions
        if distributions:
            for index, line in zip(_LINE_INDEXES, attrs.lines, strict=True):
                self._line_tokens.record(values[index], line, context)
            self._round_utilization.record(utilization, attrs.round_utilization, context)
        self._totals.add(
            attrs, values, result.dropped_turns, result.capped_tool_results, per_round=not distributions
        )

    def record_accuracy(
        self,
        accuracy: float,
        *,
        task_type: str | None,
        model: str,
        known_task_types: Iterable[str] = (),
        context: Context | None = None,
    ) -> None:
        """One point of the estimate-accuracy histogram. Never raises."""
        try:
            task = self.labels.task_label(task_type, known_task_types)
            self._accuracy.record(
                accuracy,
                {names.TASK_TYPE: task, names.GEN_AI_REQUEST_MODEL: self.labels.model_label(model)},
                context,
            )
        except Exception as exc:
            log_failure("recording the estimate accuracy", exc)

    def record_trim(
        self,
        span: Span,
        trim: Trim,
        *,
        task_type: str | None,
        known_task_types: Iterable[str] = (),
    ) -> None:
        """One trim, whoever performed it: an event on the round's span and the two counters.

        Never raises: a trim is observed after the fact and must not disturb the call.
        """
        try:
            if span.is_recording():
                span.add_event(names.EVENT_TRIM, trim.attributes())
            task = self.labels.task_label(task_type, known_task_types)
            # Per task type and performer: who cuts the window is the question, and the model
            # label would multiply these series by every model (the run span carries the model).
            # Running totals, read when the SDK collects: the event on the span is the trim's
            # trace; two measurements per trimming round would cost it a third of its telemetry.
            self._totals.add_trim(task, trim.performer, trim.removed)
        except Exception as exc:
            log_failure("recording a trim", exc)

    def record_provider_overflow(
        self, span: Span, *, task_type: str | None, known_task_types: Iterable[str] = ()
    ) -> None:
        """The provider refused the request for the window: an event and the counter. Never raises."""
        try:
            if span.is_recording():
                span.add_event(names.EVENT_PROVIDER_OVERFLOW)
            task = self.labels.task_label(task_type, known_task_types)
            self._provider_overflows.add(1, {names.TASK_TYPE: task}, trace.set_span_in_context(span))
        except Exception as exc:
            log_failure("recording a provider overflow", exc)

    def record_unobserved(
        self,
        span: Span | None,
        reason: str,
        *,
        task_type: str | None,
        known_task_types: Iterable[str] = (),
    ) -> None:
        """One instrumented call otel-ctx could not measure: the counter, by reason. Never raises.

        ``reason`` is one of ``names.UNOBSERVED_REASONS`` (anything else counts as
        ``measure_error``: the label stays bounded whatever a caller passes).
        """
        try:
            if reason not in names.UNOBSERVED_REASONS:
                reason = names.UNOBSERVED_MEASURE_ERROR
            task = self.labels.task_label(task_type, known_task_types)
            self._start_unobserved(task)
            context = trace.set_span_in_context(span) if span is not None else _NO_SPAN
            self._unobserved.add(1, {names.TASK_TYPE: task, names.UNOBSERVED_REASON: reason}, context)
        except Exception as exc:
            log_failure("recording an unmeasured call", exc)

    def _start_unobserved(self, task: str) -> None:
        """Every reason of a task type starts at 0, so the first unmeasured call counts in rate()."""
        if task in self._unobserved_tasks:
            return
        self._unobserved_tasks.add(task)
        for reason in names.UNOBSERVED_REASONS:
            self._unobserved.add(0, {names.TASK_TYPE: task, names.UNOBSERVED_REASON: reason}, _NO_SPAN)

    def start_fit_counters(self, task: str, model: str) -> None:
        """Start a task type and model's fit counters at 0 (once): every outcome, the provider's
        refusals, the unmeasured calls and the trims.

        A counter series that first appears at 1 hides that increment from rate(): started at 0
        (and scraped so before the first fit, where a service calls this at start-up), the first
        overflow counts, and so do the first fits an error budget divides by.
        """
        if (task, model) in self._seen_task_models:
            return
        self._seen_task_models.add((task, model))
        for other in names.OUTCOMES:
            self._fits.add(
                0,
                {names.TASK_TYPE: task, names.OUTCOME: other, names.GEN_AI_REQUEST_MODEL: model},
                _NO_SPAN,  # a start at 0 belongs to no trace: no exemplar
            )
        self._provider_overflows.add(0, {names.TASK_TYPE: task}, _NO_SPAN)
        self._start_unobserved(task)  # the share of calls unmeasured reads 0, not nothing
        self._totals.start_trims(task)  # the same for the first trim of each performer

    def _build_attributes(self, key: tuple[str, str, str, str]) -> _MetricAttributes:
        task, round_label, outcome, model = key
        fits = {names.TASK_TYPE: task, names.OUTCOME: outcome, names.GEN_AI_REQUEST_MODEL: model}
        attrs = _MetricAttributes(
            # The outcome splits the utilization: what-ifs for other budgets need the fitted
            # requests' distribution apart from the compacted ones'. No model: the budget is the
            # task type's, and each model would multiply the largest bucketed family.
            utilization={names.TASK_TYPE: task, names.OUTCOME: outcome},
            fits=fits,
            tokens=(task, outcome, model),
            round_tokens=(round_label, task),
            task_model=(task, model),
            lines=tuple(
                {names.COMPONENT: line, names.ROUND: round_label, names.TASK_TYPE: task}
                for line in names.LINE_COMPONENTS
            ),
            round_utilization={names.ROUND: round_label, names.TASK_TYPE: task},
        )
        self.start_fit_counters(task, model)
        if len(self._attr_cache) >= _CACHE_LIMIT:  # model names are the one open-ended key
            self._attr_cache.clear()
            self._seen_task_models.clear()
            self._totals.clear()
        self._attr_cache[key] = attrs
        return attrs


_default: Emitter | None = None
_default_lock = threading.Lock()


def default_emitter() -> Emitter:
    """The emitter on the global providers (created on first use; configure() sets its labels)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Emitter()
    return _default


__all__ = [
    "Emitter",
    "component_values",
    "default_emitter",
    "log_failure",
    "span_attributes",
]
