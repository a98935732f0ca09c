"""Open-weight families beside OpenAI: the same 100-message ticket fitted for a Llama model on a
host (its own vocabulary and chat template) and for gpt-4o, cold and warm; and each family
tokenizer's load time, once per process (a child process each, so nothing is loaded before).
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from bench import inputs
from bench.report import Figure, ratio
from bench.timing import Thunk, fmt_seconds, interleaved
from otel_ctx import ContextFitter
from otel_ctx import _families as families

SECTION = "Open-weight families: the ticket for a Llama model beside gpt-4o"
LLAMA = "meta-llama/Llama-3.3-70B-Instruct"
#: A template's rendering costs more than OpenAI's fixed framing: within this of gpt-4o's fit.
COLD_TARGET = 3.0
WARM_TARGET = 5.0
#: A vocabulary loads once per process; its cost is paid by the first count of such a model.
LOAD_TARGET_S = 2.0
_LOAD = (
    "import time, sys\n"
    "from otel_ctx import _families as f\n"
    "t = time.perf_counter(); tok = f.tokenizer(sys.argv[1]); dt = time.perf_counter() - t\n"
    "print(dt if tok is not None else -1)\n"
)


def _fitter(model: str) -> ContextFitter:
    return ContextFitter(inputs.POLICY, model=model)


def _load_seconds(name: str) -> float:
    out = subprocess.run([sys.executable, "-c", _LOAD, name], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def run(*, quick: bool = False) -> tuple[list[Figure], list[str]]:
    conv = inputs.conversation()
    trials = 7 if quick else 41
    warm_trials = 25 if quick else 201
    for model in (LLAMA, inputs.MODEL):
        _fitter(model).fit(conv)  # vocabularies loaded before timing: the load is measured apart

    def cold(model: str) -> Any:
        def prepare() -> Thunk:
            fitter = _fitter(model)
            return lambda: fitter.fit(conv)

        return prepare

    c = interleaved({"llama": cold(LLAMA), "openai": cold(inputs.MODEL)}, trials=trials)

    def warm(model: str, seed: int) -> Any:
        fitter = _fitter(model)
        fitter.fit(conv)
        pairs = iter(inputs.new_pairs(warm_trials * 2 + 4, seed=seed))

        def prepare() -> Thunk:
            msgs = [*conv, *next(pairs)]
            return lambda: fitter.fit(msgs)

        return prepare

    w = interleaved({"llama": warm(LLAMA, 5), "openai": warm(inputs.MODEL, 6)}, trials=warm_trials)
    figures = [
        ratio(
            SECTION,
            "Llama cold fit ÷ gpt-4o cold fit",
            c["llama"],
            c["openai"],
            COLD_TARGET,
            "≤",
            f"Llama {fmt_seconds(c['llama'].median)}, gpt-4o {fmt_seconds(c['openai'].median)}",
        ),
        ratio(
            SECTION,
            "Llama warm round ÷ gpt-4o warm round",
            w["llama"],
            w["openai"],
            WARM_TARGET,
            "≤",
            f"Llama {fmt_seconds(w['llama'].median)}, gpt-4o {fmt_seconds(w['openai'].median)}",
        ),
    ]
    notes = []
    for name in sorted(families.TOKENIZERS):
        seconds = _load_seconds(name)
        if seconds < 0:
            notes.append(f"tokenizer {name}: its extra is not installed (a flagged fallback counts)")
            continue
        figures.append(
            Figure(
                SECTION,
                f"load the {name} tokenizer (once per process)",
                fmt_seconds(seconds),
                f"≤ {LOAD_TARGET_S:.0f} s",
                seconds <= LOAD_TARGET_S,
            )
        )
    return figures, notes
