"""Every telemetry name otel-ctx emits, defined once.

The emitter, the dashboard generator, the alert rules and the README's table all read
this module, so a rename here moves every consumer at once; a test fails when any of
them drifts. It imports nothing from OpenTelemetry: the dashboard generator and the
docs build must not need an SDK to know what a metric is called.

GenAI semantic-convention names are spelled out here rather than imported from
``opentelemetry.semconv._incubating`` (a private path that moves between releases);
``tests/telemetry/test_names.py`` checks they still equal the semconv constants.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from otel_ctx import _ledger
from otel_ctx._ledger import STOP_CEILING as STOP_CEILING
from otel_ctx._ledger import STOP_NONE as STOP_NONE
from otel_ctx._ledger import STOP_OVERFLOW as STOP_OVERFLOW
from otel_ctx._ledger import STOPS as STOPS

# Values defined by the engine, which decides them; re-exported here beside their attributes.
# (``X as X`` marks a re-export.)
from otel_ctx.engine._breakdown import SERVER_HELD, SKILLS, SYSTEM_PROMPT, TOOL_SCHEMA, TRANSCRIPT
from otel_ctx.engine._result import MODE_FIT as MODE_FIT
from otel_ctx.engine._result import MODE_OBSERVE as MODE_OBSERVE
from otel_ctx.engine._result import MODES as MODES
from otel_ctx.engine._result import OUTCOME_COMPACTED as OUTCOME_COMPACTED
from otel_ctx.engine._result import OUTCOME_FIT as OUTCOME_FIT
from otel_ctx.engine._result import OUTCOME_OVERFLOW as OUTCOME_OVERFLOW
from otel_ctx.engine._result import OUTCOMES as OUTCOMES

# --- spans and events -------------------------------------------------------------------

SPAN_RUN = "context_budget.run"
SPAN_FIT = "context_budget.fit"
SPAN_OBSERVE = "context_budget.observe"
EVENT_FLOOR_OVERFLOW = "context_budget.floor_overflow"
#: Opt-in only (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``).
EVENT_CONTENT = "context_budget.content"

INSTRUMENTATION_SCOPE = "otel_ctx"

# --- GenAI semantic conventions ---------------------------------------------------------

GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"

# --- general OpenTelemetry conventions (exceptions and errors) -----------------------------

#: The span event an exception is recorded as, and its attributes.
EVENT_EXCEPTION = "exception"
EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"
EXCEPTION_STACKTRACE = "exception.stacktrace"
#: Span attribute: the class of the error that ended the operation.
ERROR_TYPE = "error.type"

#: Opt-in content capture, as in opentelemetry-python-contrib's GenAI instrumentations.
ENV_CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

# --- the project's own attributes -------------------------------------------------------

_P = "context_budget."

TASK_TYPE = _P + "task_type"
ROUND = _P + "round"
OUTCOME = _P + "outcome"
COMPONENT = _P + "component"
CONTEXT_LENGTH = _P + "context_length"
REQUEST_LIMIT = _P + "request_limit"
RESERVED_OUTPUT = _P + "reserved_output"
SAFETY_MARGIN = _P + "safety_margin"
BUDGET = _P + "budget"
TRANSCRIPT_TOKENS = _P + "transcript_tokens"
TOOL_SCHEMA_TOKENS = _P + "tool_schema_tokens"
SYSTEM_PROMPT_TOKENS = _P + "system_prompt_tokens"
SKILLS_TOKENS = _P + "skills_tokens"
ESTIMATED_TOKENS = _P + "estimated_tokens"
REMAINING_TOKENS = _P + "remaining_tokens"
SYSTEM_PROMPT_IN_TRANSCRIPT = _P + "system_prompt_in_transcript"
DROPPED_TURNS = _P + "dropped_turns"
KEPT_TURNS = _P + "kept_turns"
DROPPED_MESSAGES = _P + "dropped_messages"
CAPPED_TOOL_RESULTS = _P + "capped_tool_results"
CALIBRATION = _P + "calibration"
ENCODING = _P + "encoding"
STRATEGY = _P + "strategy"
SOURCES = _P + "sources"
SOURCE_CLASSES = _P + "source_classes"
DATA_CLASS = _P + "data_class"
MODE = _P + "mode"
ROUNDS = _P + "rounds"
#: The model on spans. ``gen_ai.request.model`` stays on metrics only: GenAI backends take a span
#: carrying it (or ``gen_ai.usage.*``) for an LLM call, and would count every round twice.
MODEL = _P + "model"
#: Ours, not the GenAI conventions': they define no attribute for a compacted history.
COMPACTED = _P + "compacted"
#: False when the count is an estimate (Anthropic: no offline tokenizer; a model whose own
#: encoding is not installed): the encoding attribute then names the stand-in.
EXACT = _P + "exact"
TRIM_TICKET_DROPPED = _P + "trim.ticket_dropped"
TRIM_ORPHANED_TOOL_RESULTS = _P + "trim.orphaned_tool_results"

#: Read off the provider's usage, never spread over the other lines (see ``ATTRIBUTE_DOCS``).
SERVER_HELD_TOKENS = _P + "server_held_tokens"
#: Where a round's breakdown comes from: the request alone, a reconstructed chain of stored
#: responses, or (for the server-held line) the provider's usage. A dashboard filter.
FIGURE_SOURCE = _P + "figure_source"
FIGURE_REQUEST = "request"
FIGURE_CHAIN = "chain"
FIGURE_USAGE = "usage"
FIGURE_SOURCES: tuple[str, ...] = (FIGURE_REQUEST, FIGURE_CHAIN, FIGURE_USAGE)

#: Who cut the context: otel-ctx's own compaction, the provider (server-side edits, compaction,
#: truncation), the agent framework (middleware, hooks, sessions) or the agent's own trimmer.
PERFORMER_OTEL_CTX = "otel_ctx"
PERFORMER_PROVIDER = "provider"
PERFORMER_FRAMEWORK = "framework"
PERFORMER_AGENT = "agent"
PERFORMERS: tuple[str, ...] = (PERFORMER_OTEL_CTX, PERFORMER_PROVIDER, PERFORMER_FRAMEWORK, PERFORMER_AGENT)
TRIM_PERFORMER = _P + "trim.performer"
#: What kind of cut (bounded: span events only): compaction, edit, truncation, summary, drop.
TRIM_KIND = _P + "trim.kind"
TRIM_KINDS: tuple[str, ...] = ("compaction", "edit", "truncation", "summary", "drop")
TRIM_TOKENS_BEFORE = _P + "trim.tokens_before"
TRIM_TOKENS_AFTER = _P + "trim.tokens_after"
TRIM_ITEMS_REMOVED = _P + "trim.items_removed"
#: Round-span event, once per trim, whoever performed it.
EVENT_TRIM = "context_budget.trim"
#: Round-span event: the provider stopped because the context window was exceeded.
EVENT_PROVIDER_OVERFLOW = "context_budget.provider_overflow"

#: The four transcript roles, each with its own span attribute and metric component.
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")


def _role(role: str) -> str:
    if role not in ROLES:
        raise ValueError(f"unknown transcript role {role!r}; expected one of {ROLES}")
    return role


def transcript_role_attribute(role: str) -> str:
    """``context_budget.transcript.<role>_tokens``."""
    return f"{_P}transcript.{_role(role)}_tokens"


TRANSCRIPT_ROLE_TOKENS: dict[str, str] = {r: transcript_role_attribute(r) for r in ROLES}

#: Attributes every ``context_budget.fit`` span carries, in the breakdown's order.
FIT_SPAN_ATTRIBUTES: tuple[str, ...] = (
    TASK_TYPE,
    ROUND,
    OUTCOME,
    CONTEXT_LENGTH,
    REQUEST_LIMIT,
    RESERVED_OUTPUT,
    SAFETY_MARGIN,
    BUDGET,
    TRANSCRIPT_TOKENS,
    *TRANSCRIPT_ROLE_TOKENS.values(),
    TOOL_SCHEMA_TOKENS,
    SYSTEM_PROMPT_TOKENS,
    SKILLS_TOKENS,
    SERVER_HELD_TOKENS,
    ESTIMATED_TOKENS,
    REMAINING_TOKENS,
    SYSTEM_PROMPT_IN_TRANSCRIPT,
    DROPPED_TURNS,
    KEPT_TURNS,
    DROPPED_MESSAGES,
    CAPPED_TOOL_RESULTS,
    CALIBRATION,
    ENCODING,
    SOURCES,
    SOURCE_CLASSES,
    DATA_CLASS,
    MODEL,
    COMPACTED,
    EXACT,
)

# --- a run: its usage, its ceiling, its cost and how it ended ----------------------------

#: Run-span event per ``run.record_usage(...)``: the provider's counts against the estimate.
EVENT_USAGE = "context_budget.usage"
#: Attribute of ``context_budget.floor_overflow`` and the run's usage event.
OVERFLOW_TOKENS = _P + "overflow_tokens"
ESTIMATE_ACCURACY_RATIO = _P + "estimate_accuracy"
#: GenAI semconv: the request's messages as JSON; only in the opt-in content event.
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"

#: Span and metric value of ``context_budget.task_type`` when the fit had no task type
#: (a fitter with a single policy).
DEFAULT_TASK_TYPE = "default"

#: Fit-span event: sending this request would take the run over its ceiling.
EVENT_RUN_CEILING = "context_budget.run_ceiling_reached"

RUN_CEILING = _P + "run_ceiling"
RUN_SPENT_TOKENS = _P + "run.spent_tokens"
RUN_NEXT_TOKENS = _P + "run.next_tokens"
RUN_CEILING_CROSSED = _P + "run.ceiling_crossed"
COST_USD = _P + "cost_usd"
COST_SOURCE = _P + "cost_source"
PRICES_AS_OF = _P + "prices_as_of"
RESOLUTION = _P + "resolution"
STOP = _P + "stop"

#: Values of ``context_budget.resolution`` every run may have; applications add a few of their own.
RESOLUTIONS: tuple[str, ...] = _ledger.BUILTIN_RESOLUTIONS


# --- the instrumented provider call ----------------------------------------------------

#: Provider-reported counts on otel-ctx's own spans (round span, usage event, run total).
#: Not ``gen_ai.usage.*``: those belong on the provider call's span alone.
USAGE_INPUT_TOKENS = _P + "usage.input_tokens"
USAGE_OUTPUT_TOKENS = _P + "usage.output_tokens"
USAGE_CACHED_INPUT_TOKENS = _P + "usage.cached_input_tokens"
USAGE_CACHE_CREATION_INPUT_TOKENS = _P + "usage.cache_creation_input_tokens"
PROVIDER = _P + "provider"
ROUTED_PROVIDER = _P + "routed_provider"
#: Sentry's GenAI conventions for a generation span: set on the provider call's span when
#: otel-ctx runs inside it (the window, and the share of it the call used).
GEN_AI_CONTEXT_WINDOW_SIZE = "gen_ai.context.window_size"
GEN_AI_CONTEXT_UTILIZATION = "gen_ai.context.utilization"
#: GenAI names defined by a published convention other than OpenTelemetry's (Sentry's).
OTHER_GEN_AI_CONVENTIONS = frozenset({GEN_AI_CONTEXT_WINDOW_SIZE, GEN_AI_CONTEXT_UTILIZATION})
UNOBSERVED_REASON = _P + "unobserved.reason"
#: The class as ``module.QualName``, never the message, which can quote the request.
UNOBSERVED_ERROR_TYPE = _P + "unobserved.error_type"
#: The body was refused by the request reader (a typed request error): a shape otel-ctx does not read.
UNOBSERVED_INVALID_REQUEST = "invalid_request"
#: The task type's budget could not be built for this call (policy or task-type configuration).
UNOBSERVED_INVALID_POLICY = "invalid_policy"
#: Measuring failed in an unforeseen way (any other error): a defect of otel-ctx.
UNOBSERVED_MEASURE_ERROR = "measure_error"
#: The request was measured but its round could not be opened or recorded (telemetry failed).
UNOBSERVED_TELEMETRY_ERROR = "telemetry_error"
UNOBSERVED_REASONS: tuple[str, ...] = (
    UNOBSERVED_INVALID_REQUEST,
    UNOBSERVED_INVALID_POLICY,
    UNOBSERVED_MEASURE_ERROR,
    UNOBSERVED_TELEMETRY_ERROR,
)
#: W3C baggage keys an upstream gateway may set to name the task type and the conversation.
BAGGAGE_TASK_TYPE = TASK_TYPE
BAGGAGE_CONVERSATION_ID = GEN_AI_CONVERSATION_ID

ATTRIBUTE_DOCS: dict[str, str] = {
    TASK_TYPE: "Task type the budget was chosen for (span: as given; metrics: bounded, else `other`).",
    ROUND: (
        "Round number within the run, from 1 (metrics: only on `context_budget.round_tokens`, exact up "
        "to a maximum, then `N+`, zero-padded to one width so they sort in round order: `01` … `12`, `13+`)."
    ),
    OUTCOME: "`fit`, `compacted` or `overflow` (the pinned floor alone exceeds the budget).",
    COMPONENT: "Metric only: which breakdown line a `context_budget.tokens` total counts.",
    CONTEXT_LENGTH: "The model's context window in tokens.",
    REQUEST_LIMIT: "The per-task request limit, when smaller than the window is wanted (0: none).",
    RESERVED_OUTPUT: "Tokens reserved for the answer.",
    SAFETY_MARGIN: "Tokens kept free for estimation error.",
    BUDGET: "min(context_length, request_limit) - reserved_output - safety_margin.",
    TRANSCRIPT_TOKENS: "Transcript line: the messages, per-message overhead and reply priming.",
    TRANSCRIPT_ROLE_TOKENS["system"]: "Transcript tokens in system/developer messages.",
    TRANSCRIPT_ROLE_TOKENS["user"]: "Transcript tokens in user messages.",
    TRANSCRIPT_ROLE_TOKENS["assistant"]: "Transcript tokens in assistant messages and tool calls.",
    TRANSCRIPT_ROLE_TOKENS["tool"]: "Transcript tokens in tool results.",
    TOOL_SCHEMA_TOKENS: "Tool-schema line: the marginal cost of the tool definitions (the remainder).",
    SYSTEM_PROMPT_TOKENS: "System prompt line, including composed snippets.",
    SKILLS_TOKENS: "Injected skills line.",
    SERVER_HELD_TOKENS: (
        "Server-held line: context the provider holds for the request that this process never saw "
        "(reported input minus the rest; 0 for a self-contained request)."
    ),
    FIGURE_SOURCE: (
        "Where the breakdown comes from: `request` (the request alone), `chain` (earlier stored "
        "requests and responses this process observed, plus the new items) or `usage` (a server-held "
        "part read off the provider's usage)."
    ),
    TRIM_PERFORMER: (
        "Trim event and counters: who cut the context: `otel_ctx`, `provider`, `framework` or `agent`."
    ),
    TRIM_KIND: "Trim event: `compaction`, `edit`, `truncation`, `summary` or `drop`.",
    TRIM_TOKENS_BEFORE: "Trim event: tokens of the context before the cut.",
    TRIM_TOKENS_AFTER: "Trim event: tokens of the context after the cut.",
    TRIM_ITEMS_REMOVED: "Trim event: messages or items removed (0 when only their content was cleared).",
    ESTIMATED_TOKENS: "Sum of the component lines (calibrated).",
    REMAINING_TOKENS: "budget - estimated; negative on overflow (spans only).",
    SYSTEM_PROMPT_IN_TRANSCRIPT: "True when the system prompt is counted in the transcript line.",
    DROPPED_TURNS: "Turns removed by compaction this round.",
    KEPT_TURNS: "Turns in the request as sent.",
    DROPPED_MESSAGES: "Messages removed by compaction this round.",
    CAPPED_TOOL_RESULTS: "Tool results cut to the policy's cap at the tool boundary.",
    CALIBRATION: "Factor (>= 1.0) learned from provider-reported input tokens.",
    ENCODING: "tiktoken encoding that counted the request.",
    SOURCES: "Names of the injected snippets and skills (never their text).",
    SOURCE_CLASSES: "Each source's declared data class, `none` when undeclared, aligned with the names.",
    DATA_CLASS: "Strictest data class among the sources (`none` when none declared).",
    GEN_AI_REQUEST_MODEL: "GenAI semconv: the model the request is for (metrics only).",
    MODEL: "The model the request is for (spans; metrics use `gen_ai.request.model`).",
    GEN_AI_AGENT_NAME: "GenAI semconv: the agent's name (run spans).",
    COMPACTED: "True when compaction dropped history this round.",
    MODE: "`fit` (otel-ctx chose what to send) or `observe` (someone else's trimmer did).",
    ROUNDS: "Run span: rounds fitted in the run.",
    EXACT: "False when the count is an estimate (no offline tokenizer for the provider).",
    TRIM_TICKET_DROPPED: (
        "Observe span of a wrapped trimmer: True when the request went out without the first user message."
    ),
    TRIM_ORPHANED_TOOL_RESULTS: (
        "Observe span of a wrapped trimmer: tool results sent whose tool call was dropped."
    ),
    OVERFLOW_TOKENS: "Floor-overflow event: tokens over the budget (estimated - budget).",
    ESTIMATE_ACCURACY_RATIO: "Usage event: provider-reported input tokens divided by the estimate.",
    GEN_AI_INPUT_MESSAGES: "GenAI semconv: the request as JSON; only with content capture enabled.",
    RUN_CEILING: "Tokens a whole run of this task type may spend (fit and run spans; absent: none).",
    RUN_SPENT_TOKENS: (
        "Tokens the run had spent before this round (fit span) or in all (run span): prompts and "
        "answers, from reported usage where recorded, else the estimate."
    ),
    RUN_NEXT_TOKENS: "Fit span: estimate plus reserved output: what this request adds to the run.",
    RUN_CEILING_CROSSED: (
        "Fit span: True when sending this request would take the run over its ceiling (the caller escalates)."
    ),
    COST_USD: (
        "USD: the round's estimated cost (fit span), a reported round's cost (usage event), the run's "
        "cost so far (run span)."
    ),
    COST_SOURCE: "Where the cost comes from: `usage` (reported counts), `estimate`, `mixed` or `none`.",
    PRICES_AS_OF: "Run span: the date of the price table the cost was computed with.",
    RESOLUTION: (
        "How the run ended: `resolved`, `escalated`, `abandoned`, `unresolved`, `error`, "
        "or a configured value."
    ),
    STOP: "Why the run stopped early: `none`, `overflow` (pinned floor) or `ceiling` (run ceiling).",
    USAGE_INPUT_TOKENS: "Provider-reported input tokens, cached ones included (round span, usage event; "
    "run total).",
    USAGE_OUTPUT_TOKENS: "Provider-reported output tokens (round span, usage event; run total).",
    USAGE_CACHED_INPUT_TOKENS: "Provider-reported input tokens read from its prompt cache (round span).",
    USAGE_CACHE_CREATION_INPUT_TOKENS: "Provider-reported input tokens written to its prompt cache "
    "(round span).",
    PROVIDER: "Instrumented call's dialect: `openai`, `openai-responses`, `anthropic`, `google` or "
    "`bedrock`.",
    ROUTED_PROVIDER: "The provider LiteLLM routed the call to (`anthropic`, `openai`, ...).",
    GEN_AI_CONVERSATION_ID: "GenAI semconv: the conversation (run and round spans; never on metrics).",
    GEN_AI_CONTEXT_WINDOW_SIZE: "Sentry GenAI: the model's window, on the provider call's span.",
    GEN_AI_CONTEXT_UTILIZATION: "Sentry GenAI: tokens used ÷ window, on the provider call's span.",
    UNOBSERVED_REASON: (
        "Why otel-ctx could not measure an instrumented call (observe span and "
        "`context_budget.calls.unobserved`): `invalid_request` (the request reader refused the body), "
        "`invalid_policy` (no budget could be built for the task type), `measure_error` (any other "
        "failure of the measure) or `telemetry_error` (measured, but the round could not be recorded). "
        "The call went on unchanged; absent on measured rounds."
    ),
    UNOBSERVED_ERROR_TYPE: (
        "Observe span of an unmeasured call: the error class that stopped the measure (never its message)."
    ),
}

# --- metrics ----------------------------------------------------------------------------

# Utilization: fine around the budget line, where alerting thresholds live (0.95 by default),
# with a bound at every budget `otel-ctx advise` weighs (0.5x ... 2x today's), so its what-ifs
# are exact. Every bucket is a series per label set: 15 bounds, 18 series per task type and outcome.
UTILIZATION_BUCKETS: tuple[float, ...] = (
    0.25, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.5, 2.0,
)  # fmt: skip

# Provider-reported / estimated: 1.0 is a perfect estimate, above 1.0 an under-estimate.
# Fine where the drift alert looks (1.05 by default); the mean comes from _sum/_count.
ACCURACY_BUCKETS: tuple[float, ...] = (0.8, 0.9, 0.95, 0.98, 1.0, 1.02, 1.05, 1.1, 1.25)

MetricKind = Literal["histogram", "counter"]


@dataclass(frozen=True)
class Metric:
    """One instrument: its OpenTelemetry name and unit, and the Prometheus series it becomes."""

    name: str
    kind: MetricKind
    unit: str
    description: str
    attributes: tuple[str, ...]
    buckets: tuple[float, ...] = field(default=())

    @property
    def prometheus(self) -> str:
        """The metric family name after OTLP→Prometheus translation.

        Both the Collector's Prometheus exporter and the SDK's own map dots to
        underscores, drop curly-brace annotation units and the unit ``1`` on histograms
        and counters, and add ``_total`` to counters; units here are chosen so the two
        exporters agree (checked against a real Prometheus in the end-to-end test).
        """
        base = re.sub(r"[^a-zA-Z0-9_:]", "_", self.name)
        return base + "_total" if self.kind == "counter" else base

    def series(self, suffix: str = "") -> str:
        """A Prometheus series name: ``_bucket``/``_sum``/``_count`` for histograms."""
        return self.prometheus + self._suffix(suffix)

    def _suffix(self, suffix: str) -> str:
        if suffix and self.kind != "histogram":
            raise ValueError(f"{self.name} is a {self.kind}; only histograms have {suffix!r}")
        return suffix

    @property
    def utf8(self) -> str:
        """The metric family name where Prometheus keeps OTLP names as they are.

        Prometheus 3's OTLP receiver with ``translation_strategy: NoUTF8EscapingWithSuffixes``
        keeps the dots and adds the same suffixes as the underscore translation: ``_total`` on
        counters, no unit suffix for the curly-brace units and ``1`` chosen here.
        """
        return self.name + "_total" if self.kind == "counter" else self.name

    def utf8_series(self, suffix: str = "") -> str:
        """:meth:`series` under UTF-8 names (``context_budget.utilization_bucket``)."""
        return self.utf8 + self._suffix(suffix)


# Series per process are the product of every label's values, so a label sits only where a
# panel or an alert reads it: the round label (13 values) on one counter, without the model;
# the breakdown lines are totals (a mean is a total divided by context_budget.fits); the one
# bucketed per-round histogram, the utilization, is per task type and outcome (the budget is
# the task type's). At full spread (3 task types x 3 models x every round, outcome,
# resolution and stop) a process serves about 1,290 series; docs/fleet.md has the sums.
TOKENS = Metric(
    name=_P + "tokens",
    kind="counter",
    unit="{token}",
    description=(
        "Tokens per breakdown line, summed over fitted requests (the line is in "
        "context_budget.component); divided by context_budget.fits it is the mean per request."
    ),
    attributes=(COMPONENT, TASK_TYPE, OUTCOME, GEN_AI_REQUEST_MODEL),
)
ROUND_TOKENS = Metric(
    name=_P + "round_tokens",
    kind="counter",
    unit="{token}",
    description=(
        "Tokens per summed breakdown line and the budget, summed by round of a run: a line "
        "divided by the budget is its mean share of the budget in that round."
    ),
    # No model: x13 rounds x8 lines it would be the largest family; the share of the budget by
    # round is the task type's question.
    attributes=(COMPONENT, ROUND, TASK_TYPE),
)
UTILIZATION = Metric(
    name=_P + "utilization",
    kind="histogram",
    unit="1",
    description="Estimated request tokens divided by the budget (above 1.0: overflow).",
    attributes=(TASK_TYPE, OUTCOME),
    buckets=UTILIZATION_BUCKETS,
)
FITS = Metric(
    name=_P + "fits",
    kind="counter",
    unit="{fit}",
    description="Fitted (or observed) requests, by outcome.",
    attributes=(TASK_TYPE, OUTCOME, GEN_AI_REQUEST_MODEL),
)
DROPPED_TURNS_METRIC = Metric(
    name=_P + "dropped_turns",
    kind="counter",
    unit="{turn}",
    description="Turns removed from history by compaction.",
    attributes=(TASK_TYPE, GEN_AI_REQUEST_MODEL),
)
CAPPED_TOOL_RESULTS_METRIC = Metric(
    name=_P + "capped_tool_results",
    kind="counter",
    unit="{result}",
    description="Tool results cut to the policy's cap at the tool boundary.",
    attributes=(TASK_TYPE, GEN_AI_REQUEST_MODEL),
)
ESTIMATE_ACCURACY = Metric(
    name=_P + "estimate_accuracy",
    kind="histogram",
    unit="1",
    description="Provider-reported input tokens divided by the estimate (above 1.0: under-estimate).",
    attributes=(TASK_TYPE, GEN_AI_REQUEST_MODEL),
    buckets=ACCURACY_BUCKETS,
)


#: Window of every recorded rate the dashboards read. One window for all of them, so a panel
#: dividing one recorded rate by another (tokens ÷ fits, a line ÷ the budget) divides totals
#: over the same minutes; two minutes so a deploy shows within two minutes and still spans
#: several metric exports (15 s by default) and scrapes.
DASHBOARD_WINDOW = "2m"


def recorded(metric: Metric, suffix: str = "", window: str = DASHBOARD_WINDOW) -> str:
    """The recording rule holding a series' per-second rate over ``window``, summed to the service.

    ``level:metric:operation``, as Prometheus names recording rules, with the window in the
    operation (``job:context_budget_fits_total:rate2m``): a reader sees which minutes a value
    averages, and two rates over different windows can never be mistaken for one. The rule
    keeps every label of the metric except the process (``instance``), so a dashboard over a
    fleet reads one series per service instead of one per agent process. The rules are
    generated with the alert rules (``otel_ctx.grafana._alerts``): the dashboards read
    :data:`DASHBOARD_WINDOW`, each alert its own window.
    """
    return f"job:{metric.series(suffix)}:rate{window}"


# A ticket's tokens, doubling: p50/p95 per task type within a factor of two; where a ticket
# stands against its ceiling is the ceiling-utilization histogram's job, not this one's.
RUN_TOKEN_BUCKETS: tuple[float, ...] = (4000, 8000, 16000, 32000, 64000, 128000, 256000)

# A ticket's cost in USD, from a tenth of a cent to dollars in 1-2.5-5 steps; 0.5 is the
# cost alert's default threshold, so the alert's quantile is exact there.
COST_BUCKETS: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

# Spent ÷ ceiling at the end of a run: the bands the cost dashboard colours (0.9 orange,
# 1.0 the ceiling) and the overshoot of a usage report above the estimate.
CEILING_UTILIZATION_BUCKETS: tuple[float, ...] = (0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.5)

CEILING_STOPS = Metric(
    name=_P + "ceiling_stops",
    kind="counter",
    unit="{run}",
    description="Runs the ceiling stopped, counted at the round that would have crossed it.",
    # Per task type, as the finished runs it is divided by.
    attributes=(TASK_TYPE,),
)
RUN_TOKENS = Metric(
    name=_P + "run.tokens",
    kind="histogram",
    unit="{token}",
    description="Tokens one finished run spent (prompts and answers), by how it ended.",
    # No stop label (the ceiling-stop counter counts stops) and no model: the panels and
    # alerts read tokens and runs per task type, and runs by resolution.
    attributes=(TASK_TYPE, RESOLUTION),
    buckets=RUN_TOKEN_BUCKETS,
)
RUN_COST = Metric(
    name=_P + "run.cost_usd",
    kind="histogram",
    # A curly-brace annotation, so no exporter appends a unit suffix to the series name.
    unit="{USD}",
    description="USD one finished run cost (models without a price are left out), per task type.",
    # Per task type only: the cost panels and the cost alert read quantiles and means per task
    # type; runs by resolution come from context_budget.run.tokens.
    attributes=(TASK_TYPE,),
    buckets=COST_BUCKETS,
)
RUN_CEILING_UTILIZATION = Metric(
    name=_P + "run.ceiling_utilization",
    kind="histogram",
    unit="1",
    description="Tokens one finished run spent divided by its ceiling (runs with a ceiling only).",
    attributes=(TASK_TYPE, STOP),
    buckets=CEILING_UTILIZATION_BUCKETS,
)

TRIMMED_TOKENS = Metric(
    name=_P + "trimmed_tokens",
    kind="counter",
    unit="{token}",
    description=(
        "Tokens removed from the context, by who removed them (context_budget.trim.performer): "
        "otel-ctx, the provider, the agent framework or the agent's own trimmer."
    ),
    attributes=(TASK_TYPE, TRIM_PERFORMER),
)
TRIMS = Metric(
    name=_P + "trims",
    kind="counter",
    unit="{trim}",
    description="Trims of the context, by who performed them.",
    attributes=(TASK_TYPE, TRIM_PERFORMER),
)
PROVIDER_OVERFLOWS = Metric(
    name=_P + "provider_overflows",
    kind="counter",
    unit="{request}",
    description=(
        "Requests the provider stopped because the context window was exceeded (Anthropic's "
        "model_context_window_exceeded): overflows the provider saw, whatever the estimate said."
    ),
    attributes=(TASK_TYPE,),
)

UNOBSERVED_CALLS = Metric(
    name=_P + "calls.unobserved",
    kind="counter",
    unit="{call}",
    description=(
        "Instrumented provider calls otel-ctx could not measure, by reason "
        "(context_budget.unobserved.reason): each went on unchanged, with an observe span and no "
        "breakdown. Divided by itself plus context_budget.fits it is the share of calls unmeasured."
    ),
    # No model: the share is a per-task-type question, and the reasons are few (4 series per task type).
    attributes=(TASK_TYPE, UNOBSERVED_REASON),
)

#: Every instrument otel-ctx creates; the emitter, dashboards and alerts read this list.
METRICS: tuple[Metric, ...] = (
    TOKENS,
    ROUND_TOKENS,
    UTILIZATION,
    FITS,
    DROPPED_TURNS_METRIC,
    CAPPED_TOOL_RESULTS_METRIC,
    ESTIMATE_ACCURACY,
    CEILING_STOPS,
    RUN_TOKENS,
    RUN_COST,
    RUN_CEILING_UTILIZATION,
    TRIMMED_TOKENS,
    TRIMS,
    PROVIDER_OVERFLOWS,
    UNOBSERVED_CALLS,
)

# --- values of context_budget.component -------------------------------------------------

# The four summed lines are the breakdown's own names.
COMPONENT_TRANSCRIPT = TRANSCRIPT
COMPONENT_TOOL_SCHEMA = TOOL_SCHEMA
COMPONENT_SYSTEM_PROMPT = SYSTEM_PROMPT
COMPONENT_SKILLS = SKILLS
COMPONENT_SERVER_HELD = SERVER_HELD
COMPONENT_ESTIMATED = "estimated"
COMPONENT_BUDGET = "budget"
COMPONENT_RESERVED_OUTPUT = "reserved_output"
COMPONENT_SAFETY_MARGIN = "safety_margin"
COMPONENT_HEADROOM = "headroom"
COMPONENT_OVERFLOW = OUTCOME_OVERFLOW


def transcript_role_component(role: str) -> str:
    """``transcript.<role>``: the per-role split of the transcript line."""
    return f"transcript.{_role(role)}"


#: The lines that add up to ``estimated`` (the transcript split by role in its place).
SUMMED_COMPONENTS: tuple[str, ...] = (
    *(transcript_role_component(r) for r in ROLES),
    COMPONENT_TOOL_SCHEMA,
    COMPONENT_SYSTEM_PROMPT,
    COMPONENT_SKILLS,
    COMPONENT_SERVER_HELD,
)

#: The lines ``context_budget.round_tokens`` carries: what can grow during a run, and the budget
#: it grows against (their ratio is the share of the budget, round by round).
#: The server-held line is left out: it is zero on every self-contained request, and per round
#: label it would add one series per round, task type and model to every process's budget.
ROUND_COMPONENTS: tuple[str, ...] = (
    *(c for c in SUMMED_COMPONENTS if c != COMPONENT_SERVER_HELD),
    COMPONENT_BUDGET,
)

COMPONENTS: tuple[str, ...] = (
    COMPONENT_TRANSCRIPT,
    *SUMMED_COMPONENTS,
    COMPONENT_ESTIMATED,
    COMPONENT_BUDGET,
    COMPONENT_RESERVED_OUTPUT,
    COMPONENT_SAFETY_MARGIN,
    COMPONENT_HEADROOM,
    COMPONENT_OVERFLOW,
)


#: Metric label value for task types outside the configured set.
OTHER_TASK_TYPE = "other"
#: Metric label value of ``gen_ai.request.model`` for models outside the bounded set.
OTHER_MODEL = "other"
#: Metric label value of the resolution for a run's own resolutions past the bound.
OTHER_RESOLUTION = "other"


def prometheus_label(attribute: str) -> str:
    """The Prometheus label an attribute becomes (dots to underscores).

    Where Prometheus keeps UTF-8 names (:data:`NAMES_UTF8`) the label is the attribute itself.
    """
    return re.sub(r"[^a-zA-Z0-9_]", "_", attribute)


#: How the series and labels are named in Prometheus: dots to underscores (the Collector's
#: Prometheus exporters, the SDK's scrape endpoint, Prometheus 3's OTLP receiver by default:
#: ``translation_strategy: UnderscoreEscapingWithSuffixes``) ...
NAMES_UNDERSCORE = "underscore"
#: ... or the OpenTelemetry names kept, dots and all (Prometheus 3's OTLP receiver with
#: ``translation_strategy: NoUTF8EscapingWithSuffixes``); PromQL then quotes them.
NAMES_UTF8 = "utf8"
NAMINGS: tuple[str, ...] = (NAMES_UNDERSCORE, NAMES_UTF8)


# --- distributions: each line per request, as native (exponential) histograms ----------

#: The lines ``context_budget.line_tokens`` carries: the summed lines, their sum and the budget
#: (the round counter's lines plus ``estimated``, so a quantile of the whole request is there too).
LINE_COMPONENTS: tuple[str, ...] = (*ROUND_COMPONENTS, COMPONENT_ESTIMATED)

# A mean hides the round where a tool result was ten times its usual size; a bucketed
# histogram per line and round would cost a series per bucket. These two are recorded only
# as exponential histograms, which Prometheus (and Mimir, Thanos, Grafana Cloud) store as one
# native-histogram series per label set: 9 lines x 13 rounds x 3 task types is 351 series.
# They carry no model label: at 3 models the line histogram alone would be 1,053 series.
# They replace context_budget.round_tokens (whose totals are their sums) where they are on.
LINE_TOKENS = Metric(
    name=_P + "line_tokens",
    kind="histogram",
    unit="{token}",
    description=(
        "Tokens of one breakdown line in one request, by round and task type (the line is in "
        "context_budget.component). Only with native histograms on (OTLP, exponential buckets)."
    ),
    attributes=(COMPONENT, ROUND, TASK_TYPE),
)
ROUND_UTILIZATION = Metric(
    name=_P + "round_utilization",
    kind="histogram",
    unit="1",
    description=(
        "Estimated request tokens divided by the budget, by round and task type. Only with "
        "native histograms on (OTLP, exponential buckets)."
    ),
    attributes=(ROUND, TASK_TYPE),
)

#: The metrics recorded only as native (exponential) histograms, when they are switched on.
DISTRIBUTIONS: tuple[Metric, ...] = (LINE_TOKENS, ROUND_UTILIZATION)
#: Every metric otel-ctx can emit: :data:`METRICS` always, :data:`DISTRIBUTIONS` when switched on.
ALL_METRICS: tuple[Metric, ...] = (*METRICS, *DISTRIBUTIONS)
