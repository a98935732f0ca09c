"""Gemini beside OpenAI: the same 100-message ticket as a ``generateContent`` body, counted with
Gemini's own tokenizer (Gemma's vocabulary, the ``gemini`` extra).

* a cold fit (fresh fitter, empty cache) of the Gemini body ÷ the cold fit of the OpenAI one;
* a warm round (+2 messages) of each, the Gemini one ÷ the OpenAI one;
* the tokenizer's load, once per process (a fresh interpreter loads it on its first Gemini count).
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from bench import inputs
from bench.report import Figure, ratio
from bench.timing import Thunk, fmt_seconds, interleaved
from otel_ctx import ContextFitter
from otel_ctx._families import tokenizer

SECTION = "Fit engine: 100 messages × ~340 tokens → 8,000"
MODEL = "gemini-2.5-flash"
#: A vocabulary of 262,144 pieces, merged as byte-pair ranks like tiktoken's: a cold fit costs
#: about OpenAI's. A warm round reads every content again (their texts' counts cached), where the
#: Chat Completions reader keeps its turns from the round before: a small multiple of OpenAI's.
COLD_TARGET = 1.5
WARM_TARGET = 3.0
#: Loading the vocabulary happens once per process, on its first Gemini count.
LOAD_TARGET_S = 1.5

_LOAD = (
    "import time; t = time.perf_counter(); from otel_ctx._families import tokenizer; "
    "assert tokenizer('gemma4') is not None; print(time.perf_counter() - t)"
)


def gemini_body(conv: list[dict[str, Any]]) -> dict[str, Any]:
    """The transcript as Gemini takes it (the assistant's turns are the ``model``'s)."""
    return {
        "contents": [
            {"role": "model" if m["role"] == "assistant" else "user", "parts": [{"text": m["content"]}]}
            for m in conv
        ]
    }


def figures(conv: list[dict[str, Any]], *, trials: int, warm_trials: int) -> tuple[list[Figure], list[str]]:
    """The Gemini figures, or a note saying why there are none (the extra is not installed)."""
    if tokenizer("gemma4") is None:
        return [], ["splintr-rs is not installed (pip install -e '.[gemini]'): Gemini's fit not measured."]
    google = gemini_body(conv)
    openai = {"model": inputs.MODEL, "messages": conv}

    def fitter(model: str) -> ContextFitter:
        encoding = inputs.ENCODING if model == inputs.MODEL else None
        return ContextFitter(inputs.POLICY, model=model, encoding=encoding)

    def cold_google() -> Thunk:
        f = fitter(MODEL)
        return lambda: f.fit_request(google, provider="google")

    def cold_openai() -> Thunk:
        f = fitter(inputs.MODEL)
        return lambda: f.fit_request(openai, provider="openai")

    cold = interleaved({"google": cold_google, "openai": cold_openai}, trials=trials)

    warm_g, warm_o = fitter(MODEL), fitter(inputs.MODEL)
    warm_g.fit_request(google, provider="google")
    warm_o.fit_request(openai, provider="openai")
    pairs = inputs.new_pairs(warm_trials * 4 + 8)
    feed_g, feed_o = iter(pairs[0::2]), iter(pairs[1::2])

    def warm_google() -> Thunk:
        body = gemini_body([*conv, *next(feed_g)])
        return lambda: warm_g.fit_request(body, provider="google")

    def warm_openai() -> Thunk:
        body = {"model": inputs.MODEL, "messages": [*conv, *next(feed_o)]}
        return lambda: warm_o.fit_request(body, provider="openai")

    warm = interleaved({"google": warm_google, "openai": warm_openai}, trials=warm_trials)
    load = float(
        subprocess.run([sys.executable, "-c", _LOAD], capture_output=True, text=True, check=True).stdout
    )
    return [
        ratio(
            SECTION,
            "Gemini cold fit ÷ OpenAI cold fit",
            cold["google"],
            cold["openai"],
            COLD_TARGET,
            "≤",
            f"Gemini {fmt_seconds(cold['google'].median)} (Gemma's vocabulary), "
            f"OpenAI {fmt_seconds(cold['openai'].median)} (tiktoken)",
        ),
        ratio(
            SECTION,
            "Gemini warm round (+2 messages) ÷ OpenAI warm round",
            warm["google"],
            warm["openai"],
            WARM_TARGET,
            "≤",
            f"Gemini {fmt_seconds(warm['google'].median)}, OpenAI {fmt_seconds(warm['openai'].median)}",
        ),
        Figure(
            SECTION,
            "Gemini tokenizer load, once per process",
            fmt_seconds(load),
            f"≤ {LOAD_TARGET_S} s",
            load <= LOAD_TARGET_S,
            "splintr-rs's bundled Gemma 4 vocabulary, on the first Gemini count of a fresh interpreter",
        ),
    ], []
