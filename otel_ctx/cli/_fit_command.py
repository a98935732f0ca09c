"""``otel-ctx fit``: fit (or only measure) one request pulled out of a log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

import otel_ctx.cli._notes as notes
from otel_ctx._dialects import PROVIDERS, adapter_for, detect
from otel_ctx._fitting import ContextFitter
from otel_ctx.cli._console import make_console
from otel_ctx.cli._errors import EXIT_OVERFLOW, CliError
from otel_ctx.cli._input import DEFAULT_MAX_INPUT_BYTES, describe_size, parse_size
from otel_ctx.cli._output import first_unencodable, write_atomically
from otel_ctx.cli._render import breakdown_table, outcome_line, sources_table
from otel_ctx.cli._request_file import ChatRequest, load_request
from otel_ctx.demo._presets import SUPPORT_DESK, SUPPORT_DESK_RESERVE
from otel_ctx.engine._budget import BudgetPolicy
from otel_ctx.engine._errors import (
    InvalidPolicyError,
    InvalidRequestError,
    UnknownProviderError,
    UnknownTaskTypeError,
)
from otel_ctx.engine._result import OUTCOME_OVERFLOW, FitResult

DEFAULT_MODEL = "gpt-4o"
#: The window assumed when neither --context-length nor a preset says (gpt-4o's).
DEFAULT_CONTEXT_LENGTH = 128_000

HELP = """\
Fit or measure one request body: OpenAI Chat Completions (messages), OpenAI Responses (input, \
instructions), Anthropic Messages (messages, system) or Gemini generate_content (contents, \
system_instruction), with its tools.

Prints the breakdown (where the window went, line by line) and what the fit does: cap tool results, \
drop turns from the middle, or overflow at the pinned floor. With --measure nothing is changed: the \
request is accounted exactly as given.

The budget comes from --task-type (status, returns and dispute are the support-desk presets) and the \
options; the reserve defaults to the body's max_completion_tokens or max_tokens, else 800. Exit \
codes: 0 ok, 1 overflow with --fail-on-overflow, 2 bad usage or input. The dialect is read from \
the body; --provider names it when the body could be more than one.

[bold]Examples[/bold]

  otel-ctx fit request.json --task-type returns

  otel-ctx fit request.json --request-limit 8000 --reserve 800 --measure

  otel-ctx fit - --budget 6000 --json < request.json

  otel-ctx fit request.json --task-type dispute --fail-on-overflow -o fitted.json

  otel-ctx fit messages-api.json --provider anthropic --measure
"""
DIALECT_NAMES = {
    "openai": "OpenAI Chat Completions",
    "openai-responses": "OpenAI Responses",
    "anthropic": "Anthropic Messages",
    "google": "Google Gen AI (Gemini generate_content)",
    "bedrock": "Amazon Bedrock (Converse, InvokeModel)",
}


_DEFAULT_MAX_INPUT_SIZE = describe_size(DEFAULT_MAX_INPUT_BYTES)
_RequestArgument = Annotated[
    str, typer.Argument(metavar="REQUEST.json|-", help="The request body; - reads stdin.")
]
_TaskTypeOption = Annotated[
    str | None,
    typer.Option(help="Task type; status, returns and dispute use the support-desk presets."),
]
_ModelOption = Annotated[
    str | None, typer.Option(help=f"Model (default: the body's model, else {DEFAULT_MODEL}).")
]
_ContextLengthOption = Annotated[int | None, typer.Option(min=1, help="Model context window, tokens.")]
_RequestLimitOption = Annotated[
    int | None, typer.Option(min=1, help="Per-request ceiling below the window, tokens.")
]
_BudgetOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Tokens the prompt may spend (the Budget line): sets the request limit to "
        "budget + reserve + safety margin.",
    ),
]
_ReserveOption = Annotated[int | None, typer.Option(min=0, help="Tokens reserved for the answer.")]
_SafetyMarginOption = Annotated[int, typer.Option(min=0, help="Tokens kept free for estimation error.")]
_ToolResultCapOption = Annotated[int | None, typer.Option(min=1, help="Cap per tool result, tokens.")]
_PinOption = Annotated[list[int] | None, typer.Option(help="Index of a message never to drop (repeatable).")]
_ProviderOption = Annotated[
    str | None,
    typer.Option(
        help="The body's dialect: openai (Chat Completions), openai-responses, anthropic, "
        "google (Gemini generate_content) or bedrock (Converse, InvokeModel; pass --model) "
        "(default: read from the body)."
    ),
]
_StrategyOption = Annotated[str, typer.Option(help="Compaction order: middle or oldest.")]
_MeasureOption = Annotated[
    bool, typer.Option("--measure", help="Only account the request as given; change nothing.")
]
_AsJsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
_OutputOption = Annotated[
    Path | None,
    typer.Option("--output", "-o", help="Write the fitted request body (messages as they would be sent)."),
]
_FailOnOverflowOption = Annotated[
    bool, typer.Option("--fail-on-overflow", help="Exit 1 when the request overflows its budget.")
]
_MaxInputSizeOption = Annotated[
    str,
    typer.Option(
        "--max-input-size",
        metavar="SIZE",
        help="Refuse a request body larger than this (bytes, or with k/M/G); guards against "
        "reading an endless stream.",
    ),
]


def fit(
    request: _RequestArgument,
    task_type: _TaskTypeOption = None,
    model: _ModelOption = None,
    context_length: _ContextLengthOption = None,
    request_limit: _RequestLimitOption = None,
    budget: _BudgetOption = None,
    reserve: _ReserveOption = None,
    safety_margin: _SafetyMarginOption = 0,
    tool_result_cap: _ToolResultCapOption = None,
    pin: _PinOption = None,
    provider: _ProviderOption = None,
    strategy: _StrategyOption = "middle",
    measure: _MeasureOption = False,
    as_json: _AsJsonOption = False,
    output: _OutputOption = None,
    fail_on_overflow: _FailOnOverflowOption = False,
    max_input_size: _MaxInputSizeOption = _DEFAULT_MAX_INPUT_SIZE,
) -> None:
    if not request:  # some typer releases let a missing argument through as None
        raise CliError("missing argument 'REQUEST.json|-' (a file, or - for stdin)")
    if budget is not None and request_limit is not None:
        raise CliError("give --budget or --request-limit, not both (--budget sets the request limit)")
    if provider is not None and provider not in PROVIDERS:
        raise CliError(f"--provider: {provider!r} is not one of {', '.join(PROVIDERS)}")
    if strategy not in ("middle", "oldest"):
        raise CliError(f"--strategy: {strategy!r} is not one of middle, oldest")
    req = load_request(request, parse_size(max_input_size))
    policy = build_policy(
        req,
        task_type=task_type,
        context_length=context_length,
        request_limit=request_limit,
        budget=budget,
        reserve=reserve,
        safety_margin=safety_margin,
        tool_result_cap=tool_result_cap,
    )
    strategy_name: Literal["middle", "oldest"] = "oldest" if strategy == "oldest" else "middle"
    fitter, result = _fit_or_measure(
        policy,
        req,
        model or req.model or DEFAULT_MODEL,
        strategy_name,
        provider,
        task_type=task_type,
        pinned=pin or None,
        measure=measure,
    )
    if output is not None:
        _write_request(output, req, result)
    if as_json:
        make_console().print_json(json.dumps(fit_json(result, policy, measure=measure, source=req.source)))
    else:
        _print(result, fitter, measure=measure, source=req.source)
    if fail_on_overflow and result.outcome == OUTCOME_OVERFLOW:
        raise typer.Exit(EXIT_OVERFLOW)


def _fit_or_measure(
    policy: BudgetPolicy,
    req: ChatRequest,
    model: str,
    strategy: Literal["middle", "oldest"],
    provider: str | None,
    *,
    task_type: str | None,
    pinned: list[int] | None,
    measure: bool,
) -> tuple[ContextFitter, FitResult]:
    """The body read in its dialect (given, else detected), then fitted or only measured; an
    invalid body or task type is the command's error, naming the file."""
    try:
        fitter = ContextFitter(policy, model=model, strategy=strategy)
        try:
            adapter = detect(req.body) if provider is None else adapter_for(provider)
        except UnknownProviderError:
            if provider is not None or "messages" not in req.body:
                raise
            # A bare messages list that more than one API could take: read it the way this
            # command always has, as Chat Completions (the JSON output says which).
            adapter = adapter_for("openai")
        if measure:
            return fitter, fitter.measure_request(req.body, provider=adapter.provider, task_type=task_type)
        return fitter, fitter.fit_request(
            req.body, provider=adapter.provider, task_type=task_type, pinned=pinned
        )
    except (InvalidRequestError, UnknownTaskTypeError) as exc:
        raise CliError(f"{req.source}: {exc}") from None


def build_policy(
    req: ChatRequest,
    *,
    task_type: str | None,
    context_length: int | None,
    request_limit: int | None,
    budget: int | None,
    reserve: int | None,
    safety_margin: int,
    tool_result_cap: int | None,
) -> BudgetPolicy:
    """Preset (if the task type has one) < the body's output limit < explicit options."""
    preset = SUPPORT_DESK.get(task_type) if task_type is not None else None
    window = context_length or (preset.context_length if preset else DEFAULT_CONTEXT_LENGTH)
    reserved = reserve
    if reserved is None:
        reserved = req.max_output_tokens
    if reserved is None:
        reserved = preset.reserved_output if preset else SUPPORT_DESK_RESERVE
    limit = request_limit
    if budget is not None:
        limit = budget + reserved + safety_margin
    elif limit is None and preset is not None:
        limit = preset.request_limit
    cap = tool_result_cap if tool_result_cap is not None else (preset.tool_result_cap if preset else None)
    try:
        return BudgetPolicy(
            context_length=window,
            reserved_output=reserved,
            safety_margin=safety_margin,
            request_limit=limit,
            tool_result_cap=cap,
        )
    except InvalidPolicyError as exc:
        raise CliError(f"budget policy: {exc}") from None


def fit_json(result: FitResult, policy: BudgetPolicy, *, measure: bool, source: str) -> dict[str, Any]:
    return {
        "request": source,
        "mode": "measure" if measure else "fit",
        "outcome": result.outcome,
        "task_type": result.task_type,
        "model": result.model,
        "provider": result.provider,
        "encoding": result.encoding,
        "exact": result.exact,
        "calibration": result.calibration,
        "policy": {
            "context_length": policy.context_length,
            "request_limit": policy.request_limit,
            "reserved_output": policy.reserved_output,
            "safety_margin": policy.safety_margin,
            "tool_result_cap": policy.tool_result_cap,
            "budget": policy.budget,
        },
        "dropped_turns": result.dropped_turns,
        "kept_turns": result.kept_turns,
        "dropped_messages": result.dropped_messages,
        "dropped_indices": list(result.dropped_indices),
        "capped_tool_results": result.capped_tool_results,
        "messages_sent": len(result.messages),
        "raw_tokens": result.raw_tokens,
        "problems": list(result.problems),
        "breakdown": result.breakdown.to_dict(),
    }


def _print(result: FitResult, fitter: ContextFitter, *, measure: bool, source: str) -> None:
    out = make_console()
    what = "Measured as given (nothing capped or dropped)" if measure else "Fitted"
    task = f"task type {result.task_type}" if result.task_type else "no task type"
    dialect = DIALECT_NAMES.get(result.provider, result.provider)
    out.print(f"[bold]{source}[/bold] · {dialect} · {result.model} · {task} · {what}")
    out.print(outcome_line(result, measured=measure))
    out.print(breakdown_table(result.breakdown, out))
    sources = sources_table(result.breakdown, out)
    if sources is not None:
        out.print(sources)
    if result.dropped_indices:
        out.print(f"Dropped message indexes: {', '.join(map(str, result.dropped_indices))}", style="dim")
    for problem in result.problems:
        out.print(f"The provider would reject this request: {problem}", style="yellow")
    out.print(notes.encoding_note(fitter), style="dim")


def _write_request(path: Path, req: ChatRequest, result: FitResult) -> None:
    body = result.request if result.request is not None else req.body
    bad = first_unencodable(result.messages)
    what = "the fitted request" + (f" (message {bad} of the fitted messages)" if bad is not None else "")
    write_atomically(path, json.dumps(body, indent=2, ensure_ascii=False) + "\n", what=what)
