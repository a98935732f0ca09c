"""Footnotes the CLI prints under its tables."""

from __future__ import annotations

import logging

import tiktoken.model

from otel_ctx._fitting import ContextFitter
from otel_ctx.engine._tokens import FALLBACK_MESSAGE


def encoding_note(fitter: ContextFitter) -> str:
    """Which tokenizer counted, and why, when it is not the model's own."""
    if not fitter.encoding_fallback:
        return f"Counted with {fitter.encoding_name} ({fitter.model})."
    try:
        native: str | None = tiktoken.model.encoding_name_for_model(fitter.model)
    except KeyError:
        native = None
    own = f"{fitter.model}'s own {native}" if native else f"an encoding for {fitter.model}"
    return (
        f"Counted with {fitter.encoding_name}: {own} is not installed offline, so counts may differ "
        "from the provider's by a few percent (calibration from reported usage absorbs that)."
    )


class EncodingFallbackFilter(logging.Filter):
    """The CLI states the fallback in its output (:func:`encoding_note`); no duplicate warning."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != FALLBACK_MESSAGE
