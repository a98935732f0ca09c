"""The fit: cap tool results, count, compact the middle, keep the floor, explain.

Before each request the agent asks: does what I am about to send, plus the room the
answer needs, fit this task type's budget? If not, whole turns are dropped from the
middle of the history (where the model attends least) until it does. The pinned
floor (leading system messages, the original ticket, caller-pinned constraints and
state, the newest turn and the latest tool results) is never dropped; if the floor
alone does not fit, the outcome is ``overflow`` and the caller escalates with the
work so far instead of letting the provider truncate.

The fitter is handed a request together with the dialect adapter that reads it into
the request model, decides on the model alone, and has the adapter write the result
back in the caller's dialect. It knows no provider and imports no adapter: which
adapter reads a request is decided a layer above (:mod:`otel_ctx.dialects`, used by
:class:`otel_ctx.fitting.ContextFitter`). Nothing here imports OpenTelemetry either:
the telemetry layer turns a :class:`FitResult` into spans and metrics.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import tiktoken

import otel_ctx.engine.dialect as dialect
from otel_ctx.engine.breakdown import Breakdown
from otel_ctx.engine.budget import BudgetPolicy
from otel_ctx.engine.cache import BoundedCache
from otel_ctx.engine.calibration import UNCALIBRATED, Calibration, Learner, check_reported_tokens
from otel_ctx.engine.capping import Capper
from otel_ctx.engine.compaction import Plan, Strategy, compact, drop_next
from otel_ctx.engine.errors import (
    InvalidRequestError,
    OtelCtxError,
    TooDeeplyNestedError,
    UnknownTaskTypeError,
    shown,
)
from otel_ctx.engine.model import COMPONENT_LINE, LINES, Block, Line, RequestModel, Turn, units
from otel_ctx.engine.result import OUTCOME_COMPACTED, OUTCOME_FIT, OUTCOME_OVERFLOW, FitResult, Message
from otel_ctx.engine.sources import SourceInfo, SourcesLike, as_sources, strictest
from otel_ctx.engine.tokens import TokenCounter, resolve_encoding

if TYPE_CHECKING:
    from otel_ctx.engine.dialect import Adapter, ReadContext, Reading

Pinned = Iterable[int] | Callable[[int, Any], bool] | None
#: Receives the dropped messages in order; returns the message (or text) that replaces them.
Summarizer = Callable[[list[Any]], Any]
#: Counts a whole request exactly (for example with a provider's token-counting
#: endpoint): called with the provider name and the request body as it will be sent.
ExactCounter = Callable[[str, Any], int]


class Fitter:
    """The fit engine: fits a request, read by the adapter it is handed, to its budget.

    Every entry point takes the dialect adapter explicitly, so the engine never has to
    know a provider. Agents use :class:`otel_ctx.ContextFitter`, which adds the entry
    points that pick the adapter (``fit``, ``fit_request``, ...); its docstring says
    what the constructor's arguments mean.
    """

    def __init__(
        self,
        policies: BudgetPolicy | Mapping[str, BudgetPolicy],
        *,
        default: BudgetPolicy | str | None = None,
        model: str = "gpt-4o",
        encoding: str | tiktoken.Encoding | None = None,
        strategy: Strategy = "middle",
        summarizer: Summarizer | None = None,
        cache_entries: int = 16_384,
        cache_chars: int = 16_000_000,
        exact_counter: ExactCounter | None = None,
    ) -> None:
        if isinstance(policies, BudgetPolicy):
            self._policies: dict[str, BudgetPolicy] = {}
            self._default: BudgetPolicy | None = policies
        elif isinstance(policies, Mapping):
            self._policies = {}
            for key, policy in policies.items():
                if not isinstance(key, str) or not isinstance(policy, BudgetPolicy):
                    raise InvalidRequestError(
                        f"policies[{shown(key)}]", "must map a task-type string to a BudgetPolicy"
                    )
                self._policies[key] = policy
            self._default = None
        else:
            raise InvalidRequestError(
                "policies", f"must be a BudgetPolicy or a mapping of them, got {type(policies).__name__}"
            )
        if isinstance(default, str):
            if default not in self._policies:
                raise UnknownTaskTypeError(default, list(self._policies))
            self._default = self._policies[default]
        elif default is not None:
            if not isinstance(default, BudgetPolicy):
                raise InvalidRequestError("default", "must be a BudgetPolicy or a task-type key")
            self._default = default
        if strategy not in ("middle", "oldest"):
            raise InvalidRequestError("strategy", f"must be 'middle' or 'oldest', got {shown(strategy)}")
        if exact_counter is not None and not callable(exact_counter):
            raise InvalidRequestError("exact_counter", "must be a callable (provider, body) -> int")
        self.strategy: Strategy = strategy
        self.summarizer = summarizer
        self.exact_counter = exact_counter
        self.model = model
        self._resolved = resolve_encoding(model, encoding)
        self.counter = TokenCounter(
            self._resolved,
            model=model,
            cache=BoundedCache(max_entries=cache_entries, max_chars=cache_chars),
        )
        self._capper = Capper(self.counter, max_chars=cache_chars)
        self._cal: Calibration = UNCALIBRATED
        self._learner = Learner()
        self._lock = threading.Lock()

    # -- configuration ---------------------------------------------------------------------

    @property
    def encoding_name(self) -> str:
        """The tiktoken encoding counts are made with (``cl100k_base``, ...)."""
        return self._resolved.name

    @property
    def encoding_fallback(self) -> bool:
        """True when the model's own encoding is not installed and a fallback counts."""
        return self._resolved.fallback

    @property
    def task_types(self) -> tuple[str, ...]:
        """The task types with a policy of their own (telemetry bounds its labels to these)."""
        return tuple(self._policies)

    @property
    def calibration(self) -> float:
        """Factor (>= 1.0) every estimate is scaled by, learned from reported usage."""
        return self._cal.factor

    @calibration.setter
    def calibration(self, factor: float) -> None:
        self._cal = Calibration.of(factor)

    def clear_cache(self) -> None:
        """Forget every counted text and capped tool result (the next fit counts cold)."""
        self.counter.cache.clear()
        self.counter.dialect_state.clear()
        self._capper.clear()

    def policy_for(self, task_type: str | None) -> BudgetPolicy:
        """The policy of ``task_type``, else the default; :class:`UnknownTaskTypeError` if none."""
        if task_type is not None:
            policy = self._policies.get(task_type)
            if policy is not None:
                return policy
        if self._default is not None:
            return self._default
        raise UnknownTaskTypeError(task_type, list(self._policies))

    # -- with the adapter given ----------------------------------------------------------------

    def cap_tool_result(self, text: str, *, task_type: str | None = None) -> str:
        """Cut a tool result to the policy's cap, with a visible marker; unchanged if within it."""
        if not isinstance(text, str):
            raise InvalidRequestError("text", f"must be a string, got {type(text).__name__}")
        cap = self.policy_for(task_type).tool_result_cap
        return text if cap is None else self._capper(text, cap)

    def count_items(
        self,
        adapter: Adapter,
        messages: Sequence[Any],
        *,
        tools: Sequence[Any] | None = None,
        system_prompt: str | None = None,
    ) -> int:
        """Prompt tokens of a bare transcript in ``adapter``'s dialect (uncalibrated)."""
        # Counting only: a rule the provider does not enforce is no reason to refuse a count.
        ctx = dialect.ReadContext(self.counter, strict=False)
        reading = adapter.read_items(messages, tools, ctx)
        self._add_blocks(adapter, reading.model, system_prompt, None, None)
        return reading.model.total

    def measure_items(
        self,
        adapter: Adapter,
        messages: Sequence[Any],
        *,
        tools: Sequence[Any] | None = None,
        system_prompt: str | None = None,
        snippets: SourcesLike = None,
        skills: SourcesLike = None,
        task_type: str | None = None,
        policy: BudgetPolicy | None = None,
    ) -> FitResult:
        """The breakdown of a bare transcript as given (observe-only: problems recorded)."""
        policy = policy if policy is not None else self.policy_for(task_type)
        ctx = dialect.ReadContext(self.counter, strict=False)
        reading = adapter.read_items(messages, tools, ctx)
        return self._decide(
            adapter, reading, ctx, policy, task_type, system_prompt, snippets, skills, None, squeeze=False
        )

    def fit_items(
        self,
        adapter: Adapter,
        messages: Sequence[Any],
        *,
        tools: Sequence[Any] | None = None,
        system_prompt: str | None = None,
        snippets: SourcesLike = None,
        skills: SourcesLike = None,
        task_type: str | None = None,
        pinned: Pinned = None,
    ) -> FitResult:
        """Fit a bare transcript in ``adapter``'s dialect to ``task_type``'s budget."""
        policy = self.policy_for(task_type)
        ctx = dialect.ReadContext(self.counter, cap=self._cap_for(policy), cap_key=policy.tool_result_cap)
        reading = adapter.read_items(messages, tools, ctx)
        return self._decide(
            adapter, reading, ctx, policy, task_type, system_prompt, snippets, skills, pinned, squeeze=True
        )

    def count_body(self, adapter: Adapter, body: Any) -> int:
        """Prompt tokens of a whole request body (uncalibrated); exact counter first, if given."""
        if self.exact_counter is not None:
            return self._exact(adapter.provider, body)
        # Counting only: a rule the provider does not enforce is no reason to refuse a count.
        reading = adapter.to_model(body, dialect.ReadContext(self.counter, strict=False))
        return reading.model.total

    def fit_body(
        self,
        adapter: Adapter,
        body: Any,
        *,
        task_type: str | None = None,
        pinned: Pinned = None,
        skills: SourcesLike = None,
        snippets: SourcesLike = None,
    ) -> FitResult:
        """Fit a whole request body read by ``adapter``; ``result.request`` is the fitted body."""
        policy = self.policy_for(task_type)
        ctx = dialect.ReadContext(self.counter, cap=self._cap_for(policy), cap_key=policy.tool_result_cap)
        reading = adapter.to_model(body, ctx)
        return self._decide(
            adapter, reading, ctx, policy, task_type, None, snippets, skills, pinned, squeeze=True
        )

    def measure_body(
        self,
        adapter: Adapter,
        body: Any,
        *,
        task_type: str | None = None,
        policy: BudgetPolicy | None = None,
    ) -> FitResult:
        """The breakdown of a whole request body read by ``adapter``, as given (observe-only).

        ``policy`` measures against a budget of the caller's (an observed call's own window
        and output reserve) instead of the task type's: the result is built once, with the
        right lines, rather than rebuilt afterwards.
        """
        if policy is None:
            policy = self.policy_for(task_type)
        ctx = dialect.ReadContext(self.counter, strict=False)
        reading = adapter.to_model(body, ctx)
        return self._decide(adapter, reading, ctx, policy, task_type, None, None, None, None, squeeze=False)

    # -- calibration -----------------------------------------------------------------------

    def observe_usage(self, result: FitResult, input_tokens: int) -> float:
        """Learn from the provider's reported input tokens; returns reported ÷ estimated.

        The factor scales only the parts counted by an estimate, so it learns only what those
        parts cost: the bill less the parts counted exactly, over the estimated text. A bill it
        cannot explain that way teaches nothing: a request counted exactly throughout (nothing
        to learn), one holding a bound (``result.unknowns``: server tools, media by URL), or
        one whose estimate includes images or documents (their error is not the text's). The
        factor never goes below 1.0: an estimate may err high (wasted room), not low
        (truncation). ``input_tokens`` is everything the provider billed as input (with
        Anthropic's prompt caching: ``input_tokens`` plus the cache creation and read counts).
        """
        reported = check_reported_tokens(input_tokens)
        ratio = _learnable_ratio(result, reported)
        if ratio is not None:
            with self._lock:
                self._cal = self._learner.learn(self._cal, ratio)
        return reported / max(1, result.breakdown.estimated)

    # -- internals -------------------------------------------------------------------------

    def _cap_for(self, policy: BudgetPolicy) -> Callable[[str], str] | None:
        cap = policy.tool_result_cap
        if cap is None:
            return None
        capper = self._capper
        return lambda text: capper(text, cap)

    def _exact(self, provider: str, body: Any) -> int:
        assert self.exact_counter is not None
        n = self.exact_counter(provider, body)
        return check_reported_tokens(n, "exact_counter")

    def _add_blocks(
        self,
        adapter: Adapter,
        model: RequestModel,
        system_prompt: str | None,
        snippets: SourcesLike,
        skills: SourcesLike,
    ) -> tuple[tuple[Block, ...], tuple[SourceInfo, ...], bool]:
        """Add the caller's system prompt, snippets and skills to the model as blocks."""
        if system_prompt is None and snippets is None and skills is None:
            return (), (), False  # the common round: nothing to add
        snippet_sources = as_sources(snippets, "snippets")
        skill_sources = as_sources(skills, "skills")
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise InvalidRequestError(
                "system_prompt", f"must be a string, got {type(system_prompt).__name__}"
            )
        added: list[Block] = []
        prompt_parts = ([system_prompt] if system_prompt else []) + [s.text for s in snippet_sources]
        has_prompt = system_prompt is not None or bool(snippet_sources)
        if has_prompt:
            added.append(adapter.block("system_prompt", "\n\n".join(prompt_parts), self.counter))
        if skill_sources:
            added.append(adapter.block("skills", "\n\n".join(s.text for s in skill_sources), self.counter))
        sources = tuple(SourceInfo(s.name, "snippet", s.data_class) for s in snippet_sources) + tuple(
            SourceInfo(s.name, "skill", s.data_class) for s in skill_sources
        )
        model.blocks = (*model.blocks, *added)
        return tuple(added), sources, has_prompt

    def _decide(
        self,
        adapter: Adapter,
        reading: Reading,
        ctx: ReadContext,
        policy: BudgetPolicy,
        task_type: str | None,
        system_prompt: str | None,
        snippets: SourcesLike,
        skills: SourcesLike,
        pinned: Pinned,
        *,
        squeeze: bool,
    ) -> FitResult:
        model = reading.model
        cal, exact = self._calibration_for(adapter, reading)
        if (
            cal.scaled != UNCALIBRATED.scaled
            and exact
            and self.exact_counter is None
            and not model.schema_inexact
            and not any(t.inexact for t in model.turns)
        ):
            cal = UNCALIBRATED  # every part counted by the provider's rule: there is nothing to scale
        added, sources, _ = self._add_blocks(adapter, model, system_prompt, snippets, skills)
        ceiling = cal.ceiling(policy.budget)
        if squeeze:
            pins = _pinned_turns(pinned, reading.items, model)
            plan = compact(model, ceiling, pins, self.strategy)
        else:
            total = model.total
            plan = Plan(
                units(model.turns, model.known_units),
                [],
                [],
                total,
                OUTCOME_FIT if total <= ceiling else OUTCOME_OVERFLOW,
            )

        summary: Any = None
        summary_turn: Turn | None = None
        if self.summarizer is not None and plan.outcome == OUTCOME_COMPACTED:
            while True:
                summary, summary_turn = self._summarize(adapter, reading, plan)
                if plan.total + summary_turn.cost <= ceiling:
                    break
                more = drop_next(model, plan)
                if more is None:  # the summary itself does not fit: send without it
                    summary, summary_turn = None, None
                    break
                plan = more

        kept: Sequence[int] = plan.kept_turns() if plan.dropped else range(len(model.turns))
        dropped_items: Sequence[int] = model.item_indexes(plan.dropped_turns()) if plan.dropped else ()
        summary_at = 0
        if summary is not None:
            first = dropped_items[0] if dropped_items else model.items
            summary_at = sum(len(model.span(k)) for k in kept if model.starts[k] < first)
        body, items = adapter.from_model(reading, dialect.Fitted(kept, summary, summary_at, added))
        if not squeeze and reading.body is not None:
            body = reading.body  # observe-only: the request goes out exactly as the caller built it
        return self._result(
            adapter,
            reading,
            policy,
            task_type,
            cal,
            kept,
            plan,
            items,
            body,
            added,
            sources,
            summary,
            summary_turn,
            dropped_items,
            tuple(ctx.problems),
            exact,
        )

    def _calibration_for(self, adapter: Adapter, reading: Reading) -> tuple[Calibration, bool]:
        """The calibration this request is decided with, and whether its count is exact.

        With an exact counter, the request as the caller built it is counted exactly and
        this request's factor is at least exact ÷ estimated: the breakdown's lines keep their
        proportions and sum to the exact figure (rounded up). Without one, the learned factor.
        """
        learned = self._cal
        native = adapter.exact and not self._resolved.fallback
        if self.exact_counter is None or reading.body is None:
            return learned, native
        raw = reading.model.total
        exact = self._exact(adapter.provider, reading.body)
        if raw <= 0:
            return learned, True
        return max(learned, Calibration.covering(exact, raw)), True

    def _summarize(self, adapter: Adapter, reading: Reading, plan: Plan) -> tuple[Any, Turn]:
        assert self.summarizer is not None
        model = reading.model
        run = [reading.items[i] for k in sorted(plan.dropped_turns()) for i in model.span(k)]
        produced = self.summarizer(run)
        try:
            return adapter.summary(produced, self.counter)
        except OtelCtxError:
            raise
        except RecursionError:
            raise TooDeeplyNestedError("summarizer", "returned a value nested too deeply to count") from None
        except Exception as exc:  # whatever a dialect trips on in a value it never expected
            raise InvalidRequestError(
                "summarizer",
                f"returned a value the {adapter.provider} dialect cannot use as a message "
                f"({type(exc).__name__}); return a string or a message of the transcript's kind",
            ) from None

    def _result(
        self,
        adapter: Adapter,
        reading: Reading,
        policy: BudgetPolicy,
        task_type: str | None,
        cal: Calibration,
        kept: Sequence[int],
        plan: Plan,
        items: list[Any],
        body: Any,
        added: tuple[Block, ...],
        sources: tuple[SourceInfo, ...],
        summary: Any,
        summary_turn: Turn | None,
        dropped_items: Sequence[int],
        problems: tuple[str, ...],
        exact: bool,
    ) -> FitResult:
        model = reading.model
        turns = model.turns
        known, (_, sums) = model.known_sums
        if known and len(kept) == len(turns):  # nothing dropped: the history's lines were added up
            raw_lines: dict[Line, int] = dict(zip(LINES, sums, strict=True))
        else:
            known = 0
            raw_lines = dict.fromkeys(LINES, 0)
        # Tokens counted by an estimate, by line: only these are scaled by the calibration. A
        # dialect whose text is estimated (no offline tokenizer) or a fallback encoding makes
        # every line an estimate; otherwise only parts marked inexact (documents, images of
        # unknown size) are. The memo's leading run holds text read by exact rules only.
        native = adapter.exact and not self._resolved.fallback
        # Counted exactly by the caller's exact counter: the factor brings the whole to its figure.
        counted = self.exact_counter is not None and reading.body is not None
        inexact_lines: dict[Line, int] = {}
        media = 0
        for k in kept[known:] if known else kept:
            t = turns[k]
            if t.mixed:
                for line, tokens in t.lines():
                    raw_lines[line] += tokens
            else:
                raw_lines[t.role] += t.cost
            if t.inexact:
                for p in t.parts:
                    if not p.exact:
                        if native:
                            line = COMPONENT_LINE[p.component] or t.role
                            inexact_lines[line] = inexact_lines.get(line, 0) + p.tokens
                        if p.component in ("image", "document"):
                            media += p.tokens
        raw_lines["assistant"] += model.priming  # the reply priming is the assistant's turn opening
        if summary_turn is not None:
            for line, tokens in summary_turn.lines():
                raw_lines[line] += tokens
        raw_transcript = sum(raw_lines.values())
        blocks = model.blocks
        raw_total = raw_transcript + model.fixed
        raw_prompt = model.block_tokens("system_prompt") if blocks else 0
        raw_skills = model.block_tokens("skills") if blocks else 0
        if native and not counted:
            schema_inexact = min(model.schema_inexact, model.tool_schema)
            block_inexact = (0, 0)
        else:
            inexact_lines = {line: v for line, v in raw_lines.items() if v}
            schema_inexact = model.tool_schema if adapter.exact or counted else model.schema_inexact
            block_inexact = (raw_prompt, raw_skills)
        inexact = sum(inexact_lines.values()) + schema_inexact + block_inexact[0] + block_inexact[1]
        if cal.scaled == UNCALIBRATED.scaled or not inexact:  # every line as counted: no scaling to do
            estimated = raw_total
            by_role: dict[str, int] = dict(raw_lines.items())
            transcript = raw_transcript
            system_prompt, skills = raw_prompt, raw_skills
        else:
            # Exact parts as counted, estimated parts scaled (each line floored; the whole rounded up).
            estimated = raw_total - inexact + cal.up(inexact)
            by_role = {
                r: v - inexact_lines.get(r, 0) + cal.down(inexact_lines.get(r, 0))
                for r, v in raw_lines.items()
            }
            transcript = sum(by_role.values())
            system_prompt = raw_prompt - block_inexact[0] + cal.down(block_inexact[0])
            skills = raw_skills - block_inexact[1] + cal.down(block_inexact[1])
        has_prompt_block = any(b.kind == "system_prompt" for b in blocks) if blocks else False
        # The calibrated lines are floored, so a few tokens are left over. They belong to the
        # tool schema when there is one (its marginal cost is a remainder anyway); a request
        # without tools gets them on its largest line, so an empty line reads 0 every round.
        remainder = estimated - transcript - system_prompt - skills
        if not model.tool_schema and remainder:
            if transcript:
                largest = max(raw_lines, key=raw_lines.__getitem__)
                by_role[largest] += remainder
                transcript += remainder
            elif system_prompt >= skills:
                system_prompt += remainder
            else:
                skills += remainder
        estimated_lines: tuple[str, ...] = ()
        if inexact:
            estimated_lines = tuple(line for line in LINES if inexact_lines.get(line))
            if schema_inexact:
                estimated_lines += ("tool_schema",)
            if block_inexact[0]:
                estimated_lines += ("system_prompt",)
            if block_inexact[1]:
                estimated_lines += ("skills",)
        budget = policy.budget
        breakdown = Breakdown(
            context_length=policy.context_length,
            request_limit=policy.request_limit,
            reserved_output=policy.reserved_output,
            safety_margin=policy.safety_margin,
            budget=budget,
            transcript=transcript,
            # The remainder: the marginal cost of the schema block, so the lines close.
            tool_schema=estimated - transcript - system_prompt - skills,
            system_prompt=system_prompt,
            skills=skills,
            estimated=estimated,
            remaining=budget - estimated,
            transcript_by_role=by_role,
            system_prompt_in_transcript=not has_prompt_block and model.system_in_turns,
            sources=sources,
            data_class=strictest(s.data_class for s in sources) if sources else None,
        )
        n_units = len(plan.units)
        leading_system = 0
        for t in turns:
            if t.role != "system":
                break
            leading_system += 1
        kept_units = n_units - len(plan.dropped) - min(leading_system, n_units)
        block_item = getattr(adapter, "block_message", None)
        prefix: tuple[Message, ...] = tuple(block_item(b) for b in added) if block_item and added else ()
        return FitResult(
            messages=items,
            # With nothing dropped, the verdict is the breakdown's (a calibration that scales only
            # the estimated parts can fit what the conservative ceiling of the plan did not).
            outcome=plan.outcome
            if plan.dropped or plan.outcome == OUTCOME_COMPACTED
            else (OUTCOME_FIT if estimated <= budget else OUTCOME_OVERFLOW),
            breakdown=breakdown,
            task_type=task_type,
            calibration=cal.factor,
            dropped_turns=len(plan.dropped),
            kept_turns=max(0, kept_units) + (1 if summary is not None else 0),
            dropped_messages=len(dropped_items),
            dropped_indices=tuple(dropped_items),
            capped_tool_results=model.capped,
            raw_tokens=raw_total,
            model=self.model,
            encoding=self.encoding_name,
            summary=summary,
            prefix_messages=prefix,
            request=body,
            provider=adapter.provider,
            exact=exact and (counted or (not inexact and not model.unknowns)),
            problems=problems,
            # What the request would have cost whole: a compaction's "before", for telemetry.
            tokens_before=model.total + (estimated - raw_total) if plan.dropped else 0,
            known_answers=model.known_answers if not plan.dropped and not added else (0, 0),
            inexact_tokens=inexact,
            inexact_media_tokens=media,
            estimated_lines=estimated_lines,
            unknowns=model.unknowns,
        )


def _learnable_ratio(result: FitResult, reported: int) -> float | None:
    """Reported ÷ estimated for the estimated text of ``result``, or None when the bill cannot
    be explained part by part (see :meth:`Fitter.observe_usage`)."""
    text = result.inexact_tokens - result.inexact_media_tokens
    if result.unknowns or result.inexact_media_tokens or text <= 0:
        return None
    rest = reported - (result.raw_tokens - result.inexact_tokens)
    return rest / text if rest > 0 else None


def _pinned_turns(pinned: Pinned, items: Sequence[Any], model: RequestModel) -> list[int]:
    """The caller's pins (indexes into its transcript items) as turn indexes."""
    n = len(items)
    if pinned is None:
        return []
    if callable(pinned):
        chosen = [i for i, m in enumerate(items) if pinned(i, m)]
    else:
        chosen = []
        for k, i in enumerate(pinned):
            if isinstance(i, bool) or not isinstance(i, int) or not -n <= i < n:
                raise InvalidRequestError(f"pinned[{k}]", f"{shown(i)} is not an index into {n} messages")
            chosen.append(i % n)
    starts = model.starts
    return [bisect_right(starts, i) - 1 for i in chosen]
