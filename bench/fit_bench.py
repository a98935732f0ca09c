"""Fit speed on a long support ticket: 100 messages of ~340 tokens fitted to 8,000 tokens.

* cold fit (fresh fitter, empty cache) vs one tiktoken pass over the same text;
* a warm round that adds two messages (long, and short) vs tokenizing them plus 100 µs;
* per dialect, reading a body into the request model and writing it back vs a cold fit;
* the naive loop most agents write, which re-counts everything after every drop;
* LangChain's ``trim_messages`` with the same tiktoken counter;
* the same transcript as a Bedrock Converse body for Claude, cold and warm, beside the OpenAI one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from unittest import mock

import otel_ctx.adapters._claude_tokens as claude_tokens
from bench import gemini_bench, inputs
from bench.report import Figure, ratio
from bench.timing import Thunk, Timing, fmt_seconds, interleaved
from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx.adapters._openai_tools import count_functions

SECTION = "Fit engine: 100 messages × ~340 tokens → 8,000"
WARM_ALLOWANCE_S = 100e-6
COLD_TARGET = 1.3
WARM_TARGET = 1.5
NAIVE_TARGET = 30.0
#: Reading a body into the request model and writing it back: a small share of a cold fit.
CONVERSION_TARGET = 0.10
#: Bounded time: the cut must not grow with the payload the way a full encode does.
CAP_TARGET = 0.05
TOOL_RESULT_CAP = 1_200


@dataclass
class FitBenchResult:
    figures: list[Figure]
    cold_fit_s: float
    notes: list[str]


def new_fitter() -> ContextFitter:
    return ContextFitter(inputs.POLICY, model=inputs.MODEL, encoding=inputs.ENCODING)


def naive_fit(messages: list[dict[str, Any]], encode: Callable[[str], list[int]]) -> list[dict[str, Any]]:
    """The naive loop: ``while count(messages) + RESERVE > BUDGET: messages = compact(messages)``.

    ``count`` re-tokenizes every message on every iteration (the per-message overhead and
    reply priming as the provider counts them); ``compact`` drops the message nearest the
    middle, keeping the first (the ticket) and the last.
    """

    def count(msgs: list[dict[str, Any]]) -> int:
        return sum(3 + len(encode(m["role"])) + len(encode(m["content"])) for m in msgs) + 3

    def compact(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if len(msgs) <= 2:
            raise RuntimeError("nothing left to compact")
        mid = len(msgs) // 2
        return msgs[:mid] + msgs[mid + 1 :]

    while count(messages) + inputs.RESERVE > inputs.REQUEST_LIMIT:
        messages = compact(messages)
    return messages


def _langchain() -> tuple[Callable[[], Thunk], int, int] | None:
    """``trim_messages`` on the same input with the same tiktoken counter; None if not installed."""
    try:
        from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, trim_messages
    except ImportError:
        return None
    enc = inputs.encoding()
    conv = inputs.conversation()
    lc: list[BaseMessage] = [
        HumanMessage(m["content"]) if m["role"] == "user" else AIMessage(m["content"]) for m in conv
    ]
    roles = {"human": "user", "ai": "assistant"}

    def counter(msgs: list[BaseMessage]) -> int:
        # The provider's accounting, as otel-ctx and the naive loop count: 3 per message, the
        # role, the content, 3 for reply priming.
        return (
            sum(
                3 + len(enc.encode_ordinary(roles[m.type])) + len(enc.encode_ordinary(str(m.content)))
                for m in msgs
            )
            + 3
        )

    budget = inputs.REQUEST_LIMIT - inputs.RESERVE

    def prepare() -> Thunk:
        return lambda: trim_messages(
            lc, max_tokens=budget, token_counter=counter, strategy="last", start_on="human"
        )

    kept = prepare()()
    assert isinstance(kept, list)
    return prepare, len(kept), counter(kept)


def run(*, quick: bool = False) -> FitBenchResult:
    conv = inputs.conversation()
    enc = inputs.encoding()
    encode = enc.encode_ordinary
    texts = [m["content"] for m in conv]
    trials = 7 if quick else 41
    warm_trials = 25 if quick else 301

    # Sanity: every side decides the same thing on this input.
    reference = new_fitter().fit(conv)
    naive_kept = naive_fit(conv, encode)
    notes = [
        f"Input: {len(conv)} messages, {sum(len(encode(t)) for t in texts):,} content tokens; policy "
        f"request_limit {inputs.REQUEST_LIMIT:,}, reserve {inputs.RESERVE} "
        f"(budget {inputs.POLICY.budget:,}). "
        f"otel-ctx keeps {len(reference.messages)} messages ({reference.breakdown.estimated:,} tokens, "
        f"{reference.outcome}); the naive loop keeps {len(naive_kept)}.",
    ]

    def cold_fit() -> Thunk:
        fitter = new_fitter()  # fresh: empty token cache
        return lambda: fitter.fit(conv)

    def tiktoken_pass() -> Thunk:
        def go() -> None:
            for t in texts:
                encode(t)

        return go

    def naive() -> Thunk:
        return lambda: naive_fit(conv, encode)

    t = interleaved({"cold": cold_fit, "tiktoken": tiktoken_pass}, trials=trials)
    # The naive loop takes about a second a call: fewer trials, with its own cold fits interleaved.
    slow: dict[str, Callable[[], Thunk]] = {"cold": cold_fit, "naive": naive}
    lc = _langchain()
    if lc is not None:
        slow["langchain"] = lc[0]
    s = interleaved(slow, trials=3 if quick else 9)
    t["naive"] = s["naive"]
    if lc is not None:
        t["langchain"] = s["langchain"]
    slow_cold = s["cold"]

    # Warm rounds: a fitter that has seen the 100 messages; each trial adds two new ones,
    # as long as the transcript's (~340 tokens) or as short as an agent's quick turn (40–60).
    warm: dict[str, tuple[Timing, Timing]] = {}
    for kind in ("long", "short"):
        warm_fitter = new_fitter()
        warm_fitter.fit(conv)
        short = kind == "short"
        pairs = iter(inputs.new_pairs(warm_trials * 2 + 4, short=short))
        baseline_pairs = iter(inputs.new_pairs(warm_trials * 2 + 4, seed=3, short=short))

        def warm_round(f: ContextFitter = warm_fitter, p: Any = pairs) -> Thunk:
            msgs = [*conv, *next(p)]
            return lambda: f.fit(msgs)

        def two_messages(p: Any = baseline_pairs) -> Thunk:
            a, b = (m["content"] for m in next(p))

            def go() -> None:
                encode(a)
                encode(b)

            return go

        w = interleaved({"warm": warm_round, "two": two_messages}, trials=warm_trials)
        warm[kind] = (w["warm"], w["two"])
    conversion = _conversion(conv, trials)

    # The cut at the tool boundary reads a bounded prefix: a huge result costs no full encode.
    huge = inputs.huge_tool_result()
    cap_policy = BudgetPolicy(
        context_length=128_000, reserved_output=inputs.RESERVE, tool_result_cap=TOOL_RESULT_CAP
    )
    cap_fitter = ContextFitter(cap_policy, model=inputs.MODEL, encoding=inputs.ENCODING)

    def cap_huge() -> Thunk:
        cap_fitter.clear_cache()  # measure the cut itself, not its cache
        return lambda: cap_fitter.cap_tool_result(huge)

    def encode_huge() -> Thunk:
        return lambda: encode(huge)

    c = interleaved({"cap": cap_huge, "encode": encode_huge}, trials=3 if quick else 5)

    cold, tk, nv = t["cold"], t["tiktoken"], t["naive"]
    figures = [
        ratio(
            SECTION,
            "cold fit ÷ one tiktoken pass",
            cold,
            tk,
            COLD_TARGET,
            "≤",
            f"fit {fmt_seconds(cold.median)}, tiktoken {fmt_seconds(tk.median)}",
        ),
        _warm_figure(*warm["long"], "long"),
        _warm_figure(*warm["short"], "short"),
        *conversion,
        ratio(
            SECTION,
            f"cap a {len(huge) / 1e6:.0f} MB tool result ÷ encoding it whole",
            c["cap"],
            c["encode"],
            CAP_TARGET,
            "≤",
            f"cut {fmt_seconds(c['cap'].median)}, full encode {fmt_seconds(c['encode'].median)} "
            f"(cap {TOOL_RESULT_CAP:,} tokens)",
        ),
        Figure(
            SECTION,
            "naive re-count loop ÷ cold fit",
            f"{nv.median / slow_cold.median:.1f}×",
            f"≥ {NAIVE_TARGET:.0f}×",
            nv.median / slow_cold.median >= NAIVE_TARGET,
            f"naive {fmt_seconds(nv.median)} ({len(conv) - len(naive_kept)} drops, a full re-count each), "
            f"fit {fmt_seconds(slow_cold.median)}",
        ),
        Figure(
            SECTION,
            "naive re-count loop ÷ warm round",
            f"{nv.median / warm['long'][0].median:.0f}×",
            "(context)",
            None,
            "the agent's steady state: the cache holds the transcript",
        ),
    ]
    if lc is not None:
        lct = t["langchain"]
        figures.append(
            Figure(
                SECTION,
                "LangChain trim_messages ÷ cold fit",
                f"{lct.median / slow_cold.median:.2f}×",
                "side by side",
                None,
                f"trim_messages {fmt_seconds(lct.median)}, keeps {lc[1]} messages ({lc[2]:,} tokens), "
                "newest first: the ticket is dropped",
            )
        )
        figures.append(
            Figure(
                SECTION,
                "LangChain trim_messages ÷ warm round",
                f"{lct.median / warm['long'][0].median:.0f}×",
                "side by side",
                None,
                "trim_messages has no cache: every round costs the same",
            )
        )
    else:
        notes.append(
            "langchain-core is not installed (pip install -e '.[bench]'): trim_messages not measured."
        )
    figures += anthropic_langchain_figures(conv, trials=trials)
    figures += tool_rule_figures(trials=trials, warm_trials=warm_trials)
    figures += claude_tokenizer_figures(conv, trials=trials, warm_trials=warm_trials)
    gemini, gemini_notes = gemini_bench.figures(conv, trials=trials, warm_trials=warm_trials)
    figures += gemini
    notes += gemini_notes
    figures += bedrock_figures(conv, trials=trials, warm_trials=warm_trials)
    noisy = [x for x in (*t.values(), *(x for pair in warm.values() for x in pair)) if x.spread > 0.5]
    if noisy:
        notes.append(
            "Noisy cases (interquartile range > 50% of the median): " + ", ".join(x.name for x in noisy) + "."
        )
    return FitBenchResult(figures, cold.median, notes)


#: Rendering the tool definitions as the model reads them: a small share of a cold fit, and an
#: unchanged tool list (kept from the round before) costs a warm round nothing it would notice.
TOOL_RULES_TARGET = 0.10
TOOL_WARM_TARGET = 1.05


def tool_rule_figures(*, trials: int, warm_trials: int) -> list[Figure]:
    """A tool-calling transcript (101 messages, 50 calls and results) with eight tool definitions:
    the cold rendering of the tool section against the cold fit of the request, and a warm round
    with the same tool list against the same round without tools."""
    transcript = inputs.tool_transcript()
    tools = inputs.tool_definitions()
    # A window the whole request fits: both rounds do the same work but for the tool section.
    roomy = BudgetPolicy(context_length=128_000, reserved_output=inputs.RESERVE)

    def new_fitter() -> ContextFitter:
        return ContextFitter(roomy, model=inputs.MODEL, encoding=inputs.ENCODING)

    def cold_fit() -> Thunk:
        fitter = new_fitter()
        return lambda: fitter.fit(transcript, tools=tools)

    def cold_rules() -> Thunk:
        fitter = new_fitter()  # a fresh counter: nothing of the section is cached
        return lambda: count_functions(fitter.counter, tools)

    t = interleaved({"fit": cold_fit, "rules": cold_rules}, trials=trials)
    with_tools, without = new_fitter(), new_fitter()
    with_tools.fit(transcript, tools=tools)
    without.fit(transcript)
    news = iter(inputs.tool_transcript(seed=5, calls=warm_trials * 2 + 4)[1:])

    def step() -> list[dict[str, Any]]:
        return [next(news), next(news)]

    rounds = [step() for _ in range(warm_trials * 2 + 2)]
    feed_a, feed_b = iter(rounds[0::2]), iter(rounds[1::2])

    def warm_with(f: ContextFitter = with_tools) -> Thunk:
        msgs = [*transcript, *next(feed_a)]
        return lambda: f.fit(msgs, tools=tools)

    def warm_without(f: ContextFitter = without) -> Thunk:
        msgs = [*transcript, *next(feed_b)]
        return lambda: f.fit(msgs)

    w = interleaved({"with": warm_with, "without": warm_without}, trials=warm_trials)
    share = t["rules"].median / t["fit"].median
    warm = w["with"].median / w["without"].median
    return [
        Figure(
            SECTION,
            "tool section rules ÷ cold fit of a tool-calling transcript",
            f"{share:.1%}",
            f"≤ {TOOL_RULES_TARGET:.0%}",
            share <= TOOL_RULES_TARGET,
            f"rendering and counting 8 definitions {fmt_seconds(t['rules'].median)}, cold fit of 101 "
            f"messages (50 calls and results) with them {fmt_seconds(t['fit'].median)}",
        ),
        Figure(
            SECTION,
            "warm round with the same tool list ÷ without tools",
            f"{warm:.2f}×",
            f"≤ {TOOL_WARM_TARGET}×",
            warm <= TOOL_WARM_TARGET,
            f"with {fmt_seconds(w['with'].median)}, without {fmt_seconds(w['without'].median)}: an unchanged "
            "list is found by one comparison with a private copy of the last one (so an equal list built "
            "anew, or one changed in place, is told apart) and not rendered again",
        ),
    ]


def _conversion(conv: list[dict[str, Any]], trials: int) -> list[Figure]:
    """What reading a body through its dialect adapter and writing it back adds to a cold fit.

    The conversion is timed with every text already counted (so it is the adapter's own
    work: walking the items, building turns, writing the body back) and set against a
    cold fit of the same body, per dialect.
    """
    from otel_ctx._dialects import adapter_for
    from otel_ctx.adapters import Fitted, ReadContext

    bodies = {
        "openai": {"model": inputs.MODEL, "messages": conv},
        "openai-responses": inputs.responses_body(conv),
    }
    figures = []
    for provider, body in bodies.items():
        adapter = adapter_for(provider)
        warm_fitter = new_fitter()
        warm_fitter.fit_request(body, provider=provider)

        def convert(f: ContextFitter = warm_fitter, b: Any = body, a: Any = adapter) -> Thunk:
            def go() -> None:
                f.counter.dialect_state.clear()  # turns built afresh; only the texts' counts are known
                reading = a.to_model(b, ReadContext(f.counter))
                a.from_model(reading, Fitted(list(range(len(reading.model.turns)))))

            return go

        def cold(b: Any = body, p: str = provider) -> Thunk:
            f = new_fitter()
            return lambda: f.fit_request(b, provider=p)

        r = interleaved({"convert": convert, "cold": cold}, trials=trials)
        ratio = r["convert"].median / r["cold"].median
        figures.append(
            Figure(
                SECTION,
                f"{provider}: conversion ÷ cold 100-message fit",
                f"{ratio:.1%}",
                f"≤ {CONVERSION_TARGET:.0%}",
                ratio <= CONVERSION_TARGET,
                f"read + write back {fmt_seconds(r['convert'].median)}, "
                f"cold fit_request {fmt_seconds(r['cold'].median)}",
            )
        )
    return figures


def _warm_figure(warm: Timing, two: Timing, kind: str) -> Figure:
    reference = two.median + WARM_ALLOWANCE_S
    r = warm.median / reference
    words = "340-token" if kind == "long" else "40–60-token"
    return Figure(
        SECTION,
        f"warm round (+2 {words} messages) ÷ (tokenizing them + 100 µs)",
        f"{r:.2f}×",
        f"≤ {WARM_TARGET}×",
        r <= WARM_TARGET,
        f"round {fmt_seconds(warm.median)}, 2 messages {fmt_seconds(two.median)}",
    )


def anthropic_langchain_figures(conv: list[dict[str, Any]], *, trials: int) -> list[Figure]:
    """The same measure as :func:`_conversion` for an Anthropic Messages body and for LangChain
    messages: the adapter's own work (texts already counted) against a cold 100-message fit."""
    from otel_ctx._dialects import adapter_for
    from otel_ctx.adapters import Fitted, ReadContext

    anthropic_body = {"model": "claude-sonnet-4-6", "max_tokens": 1024, "messages": conv}
    cases: list[tuple[str, Callable[[ContextFitter], Any], Callable[[ContextFitter], Any]]] = []
    anthropic = adapter_for("anthropic")

    def anthropic_convert(f: ContextFitter) -> None:
        reading = anthropic.to_model(anthropic_body, ReadContext(f.counter))
        anthropic.from_model(reading, Fitted(list(range(len(reading.model.turns)))))

    cases.append(
        ("anthropic", anthropic_convert, lambda f: f.fit_request(anthropic_body, provider="anthropic"))
    )
    try:
        from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
    except ImportError:
        pass
    else:
        from otel_ctx._dialects import adapter_for_items

        lc: list[BaseMessage] = [
            HumanMessage(m["content"]) if m["role"] == "user" else AIMessage(m["content"]) for m in conv
        ]
        LANGCHAIN = adapter_for_items(lc)

        def langchain_convert(f: ContextFitter) -> None:
            reading = LANGCHAIN.read_items(lc, None, ReadContext(f.counter))
            LANGCHAIN.from_model(reading, Fitted(list(range(len(reading.model.turns)))))

        cases.append(("langchain", langchain_convert, lambda f: f.fit(lc)))
    figures = []
    for name, convert_once, cold_fit in cases:
        warm_fitter = new_fitter()
        cold_fit(warm_fitter)

        def convert(f: ContextFitter = warm_fitter, c: Any = convert_once) -> Thunk:
            def go() -> None:
                f.counter.dialect_state.clear()  # turns built afresh; only the texts' counts are known
                c(f)

            return go

        def cold(c: Any = cold_fit) -> Thunk:
            f = new_fitter()
            return lambda: c(f)

        r = interleaved({"convert": convert, "cold": cold}, trials=trials)
        ratio = r["convert"].median / r["cold"].median
        figures.append(
            Figure(
                SECTION,
                f"{name}: conversion ÷ cold 100-message fit",
                f"{ratio:.1%}",
                f"≤ {CONVERSION_TARGET:.0%}",
                ratio <= CONVERSION_TARGET,
                f"read + write back {fmt_seconds(r['convert'].median)}, "
                f"cold fit {fmt_seconds(r['cold'].median)}",
            )
        )
    return figures


#: A warm Anthropic round counted with Claude's reconstructed tokenizer against tiling its two
#: new messages alone (plus the warm allowance): the history's counts come from the caches.
CLAUDE_WARM_TARGET = 1.5


def claude_tokenizer_figures(conv: list[dict[str, Any]], *, trials: int, warm_trials: int) -> list[Figure]:
    """The 100-message ticket as a Claude Sonnet 4.6 request, counted with the reconstructed
    Claude tokenizer (the claude-tokenizer extra) beside the cl100k_base fallback: a cold fit,
    and a warm round adding two messages of the transcript's length. Empty without the extra."""
    if not claude_tokens.available():
        return []
    model = "claude-sonnet-4-6"
    body = {"model": model, "max_tokens": 1024, "messages": conv}
    pairs = {
        kind: iter(inputs.new_pairs(warm_trials * 2 + 4, seed=seed))
        for kind, seed in (("own", 7), ("cl100k", 8))
    }
    tiling_pairs = iter(inputs.new_pairs(warm_trials * 2 + 4, seed=9))
    tile = claude_tokens.claude_text(ContextFitter(inputs.POLICY, model=model).counter, "3.0")
    assert tile is not None

    def fitter() -> ContextFitter:
        return ContextFitter(inputs.POLICY, model=model, encoding=inputs.ENCODING)

    def run(own: bool, f: ContextFitter, b: dict[str, Any]) -> Any:
        if own:
            return f.fit_request(b, provider="anthropic")
        with mock.patch.object(claude_tokens, "_module", return_value=None):
            return f.fit_request(b, provider="anthropic")

    def cold(own: bool) -> Callable[[], Thunk]:
        def prepare() -> Thunk:
            f = fitter()
            return lambda: run(own, f, body)

        return prepare

    c = interleaved({"own": cold(True), "cl100k": cold(False)}, trials=max(3, trials // 4))
    warm_fitters = {"own": fitter(), "cl100k": fitter()}
    for kind, f in warm_fitters.items():
        run(kind == "own", f, body)

    def warm(kind: str) -> Callable[[], Thunk]:
        def prepare() -> Thunk:
            b = {**body, "messages": [*conv, *next(pairs[kind])]}
            return lambda: run(kind == "own", warm_fitters[kind], b)

        return prepare

    def two_messages() -> Thunk:
        a, b = (m["content"] for m in next(tiling_pairs))
        return lambda: (tile(a), tile(b))

    w = interleaved({"own": warm("own"), "cl100k": warm("cl100k"), "two": two_messages}, trials=warm_trials)
    cold_ratio = c["own"].median / c["cl100k"].median
    warm_ratio = w["own"].median / w["cl100k"].median
    memo_ratio = w["own"].median / (w["two"].median + WARM_ALLOWANCE_S)
    return [
        Figure(
            SECTION,
            "Anthropic cold fit: Claude tokenizer ÷ cl100k_base",
            f"{cold_ratio:.0f}×",
            "side by side",
            None,
            f"100 messages counted with ctok {fmt_seconds(c['own'].median)}, with cl100k_base "
            f"{fmt_seconds(c['cl100k'].median)} (the fallback without the claude-tokenizer extra)",
        ),
        Figure(
            SECTION,
            "Anthropic warm round: Claude tokenizer ÷ cl100k_base",
            f"{warm_ratio:.0f}×",
            "side by side",
            None,
            f"two new ~340-token messages: ctok {fmt_seconds(w['own'].median)}, cl100k_base "
            f"{fmt_seconds(w['cl100k'].median)}",
        ),
        Figure(
            SECTION,
            "Anthropic warm round (Claude tokenizer) ÷ tiling its two new messages + 100 µs",
            f"{memo_ratio:.2f}×",
            f"≤ {CLAUDE_WARM_TARGET}×",
            memo_ratio <= CLAUDE_WARM_TARGET,
            f"round {fmt_seconds(w['own'].median)}, tiling the two messages {fmt_seconds(w['two'].median)}: "
            "the history's counts come from the per-message memo and the text cache",
        ),
    ]


#: A Converse body for Claude is mapped to the Messages body Bedrock sends and read by the
#: Anthropic accounting: the mapping may cost a cold fit and a warm round this much beside the
#: Anthropic Messages body of the same transcript and model.
BEDROCK_COLD_TARGET = 1.5
BEDROCK_WARM_TARGET = 3.0
BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
#: The same model under its Anthropic API name.
BEDROCK_CLAUDE = "claude-sonnet-4-5-20250929"


def _converse(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"role": m["role"], "content": [{"text": m["content"]}]} for m in messages]


def bedrock_figures(conv: list[dict[str, Any]], *, trials: int, warm_trials: int) -> list[Figure]:
    """A cold fit and a warm round of the transcript as a Bedrock Converse body (Claude): against
    the same transcript as an Anthropic Messages body for the same model (what the Converse
    mapping costs: both are counted by the Anthropic accounting and Claude's tokenizer), and
    beside the Chat Completions body (which counts with tiktoken: context, not a target)."""

    def chat(msgs: list[dict[str, Any]]) -> dict[str, Any]:
        return {"model": inputs.MODEL, "messages": msgs}

    def messages(msgs: list[dict[str, Any]]) -> dict[str, Any]:
        return {"model": BEDROCK_CLAUDE, "max_tokens": 1024, "messages": msgs}

    def converse(msgs: list[dict[str, Any]]) -> dict[str, Any]:
        return {"messages": _converse(msgs)}

    bodies: dict[str, tuple[str, Callable[[list[dict[str, Any]]], dict[str, Any]]]] = {
        "openai": (inputs.MODEL, chat),
        "anthropic": (BEDROCK_CLAUDE, messages),
        "bedrock": (BEDROCK_MODEL, converse),
    }

    def fitter(model: str) -> ContextFitter:
        return ContextFitter(inputs.POLICY, model=model, encoding=inputs.ENCODING)

    def cold(provider: str) -> Callable[[], Thunk]:
        model, make = bodies[provider]
        body = make(conv)

        def prepare() -> Thunk:
            f = fitter(model)
            return lambda: f.fit_request(body, provider=provider)

        return prepare

    def warm(provider: str) -> Callable[[], Thunk]:
        model, make = bodies[provider]
        f = fitter(model)
        f.fit_request(make(conv), provider=provider)
        pairs = iter(inputs.new_pairs(warm_trials * 2 + 4, seed=5))

        def prepare() -> Thunk:
            body = make([*conv, *next(pairs)])
            return lambda: f.fit_request(body, provider=provider)

        return prepare

    c = interleaved({p: cold(p) for p in bodies}, trials=max(3, trials // 4))
    w = interleaved({p: warm(p) for p in bodies}, trials=warm_trials)
    times = (
        f"bedrock {fmt_seconds(c['bedrock'].median)}, anthropic {fmt_seconds(c['anthropic'].median)}, "
        f"openai {fmt_seconds(c['openai'].median)}"
    )
    warm_times = (
        f"bedrock {fmt_seconds(w['bedrock'].median)}, anthropic {fmt_seconds(w['anthropic'].median)}, "
        f"openai {fmt_seconds(w['openai'].median)} (+2 messages each)"
    )
    return [
        ratio(
            SECTION,
            "bedrock converse (Claude): cold fit ÷ the Anthropic Messages body's",
            c["bedrock"],
            c["anthropic"],
            BEDROCK_COLD_TARGET,
            "≤",
            times,
        ),
        ratio(
            SECTION,
            "bedrock converse (Claude): warm round ÷ the Anthropic Messages body's",
            w["bedrock"],
            w["anthropic"],
            BEDROCK_WARM_TARGET,
            "≤",
            warm_times,
        ),
        Figure(
            SECTION,
            "bedrock converse (Claude): cold fit ÷ openai cold fit",
            f"{c['bedrock'].median / c['openai'].median:.2f}×",
            "side by side",
            None,
            "Claude's tokenizer (the claude-tokenizer extra) against tiktoken: " + times,
        ),
        Figure(
            SECTION,
            "bedrock converse (Claude): warm round ÷ openai warm round",
            f"{w['bedrock'].median / w['openai'].median:.2f}×",
            "side by side",
            None,
            warm_times,
        ),
    ]
