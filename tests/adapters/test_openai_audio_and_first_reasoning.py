"""Chat Completions: what an audio part adds besides its clip, and the first reasoning models'
framing, which no rule reproduces (their count is a bound)."""

from __future__ import annotations

import base64
import struct
from typing import Any

from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx.adapters._media import AUDIO_PART_FRAMING, audio_tokens
from otel_ctx.adapters._openai_chat import FIRST_REASONING_FRAMING


def _wav(seconds: float, rate: int = 8_000) -> str:
    """A mono 16-bit PCM WAV clip of silence, base64."""
    frames = int(seconds * rate)
    data = b"\0\0" * frames
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    chunks = b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    riff = b"WAVE" + chunks
    return base64.b64encode(b"RIFF" + struct.pack("<I", len(riff)) + riff).decode()


def _measure(body: dict[str, Any]) -> Any:
    fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model=body["model"])
    return fitter.measure_request(body, provider="openai")


def test_an_audio_part_costs_its_clip_and_four_tokens_of_framing() -> None:
    clip = _wav(1.5)
    text = {"type": "text", "text": "What is said?"}
    audio = {"type": "input_audio", "input_audio": {"data": clip, "format": "wav"}}
    model = "gpt-4o-audio-preview"
    alone = _measure({"model": model, "messages": [{"role": "user", "content": [text]}]})
    both = _measure({"model": model, "messages": [{"role": "user", "content": [text, audio]}]})
    assert audio_tokens(clip) == 15  # 1.5 s at one token per 100 ms
    assert both.breakdown.estimated - alone.breakdown.estimated == 15 + AUDIO_PART_FRAMING
    assert not both.exact  # the clip's duration is read from its header: an estimate


def test_the_first_reasoning_models_count_is_a_bound() -> None:
    messages = [{"role": "user", "content": "Answer tersely."}, {"role": "user", "content": "What is 2+2?"}]
    for model in ("o1-mini", "o1-preview"):
        result = _measure({"model": model, "messages": messages})
        assert not result.exact
        assert FIRST_REASONING_FRAMING in result.unknowns
    later = _measure({"model": "o3-mini", "messages": messages})
    assert later.exact and not later.unknowns
    # The same text on both: only the flag differs, not the rules' count.
    first = _measure({"model": "o1-mini", "messages": messages})
    assert later.breakdown.estimated == first.breakdown.estimated
