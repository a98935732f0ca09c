"""The one call the Chat Completions adapter makes for a model whose host renders a chat template.

The adapter reads the messages as usual (parts, tool calls, media, the transcript rules); for a
model of a family with a chat template (see :data:`otel_ctx._families.FAMILIES`), the request is
then rendered through that family's template and its total replaces OpenAI's framing: each
message keeps its content's tokens, the template's markers are booked as the reply priming, its
tool section as the tool schema. Media keep the adapter's price (the template renders text).
A template that cannot read a body leaves the adapter's count as it was: a count never refuses.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from otel_ctx import _families as families
from otel_ctx.engine._model import NOTHING_KNOWN, Part, RequestModel, Turn
from otel_ctx.engine._tokens import TokenCounter
from otel_ctx.families._render import Rendering

Render = Callable[[Rendering, Mapping[str, Any]], None]
_MEDIA = ("image", "document")
_renderers: dict[str, Render | None] = {}


def renderer(template: str) -> Render | None:
    """The render function a family row names (``module:function``), imported once."""
    if template not in _renderers:
        module, _, name = template.partition(":")
        found = getattr(importlib.import_module(module), name, None)
        _renderers[template] = found if callable(found) else None
    return _renderers[template]


@functools.lru_cache(maxsize=512)
def _render_for(model: str) -> Render | None:
    """The template of ``model``'s family (kept by name: an OpenAI model's lookup costs one hit)."""
    family = families.family_for(model) if model else None
    return renderer(family.template) if family is not None and family.template is not None else None


def rendering(body: Mapping[str, Any], counter: TokenCounter) -> Rendering | None:
    """``body`` rendered through its model's family template, or None (no rules, or unreadable)."""
    render = _render_for(counter.model)
    if render is None:
        return None
    r = Rendering(counter)
    try:
        render(r, body)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError):
        return None  # a body the template cannot read: the adapter's own count stands
    return r


@functools.lru_cache(maxsize=512)
def _foreign(model: str) -> bool:
    """``model`` belongs to a family of the table (not OpenAI's): OpenAI's framing is a guess for it."""
    return bool(model) and families.family_for(model) is not None


def _estimated(model: RequestModel) -> None:
    """Every part of ``model`` marked an estimate (new turns: a read turn is shared between rounds)."""
    model.turns = [
        Turn(
            t.role,
            tuple(p if not p.exact else dataclasses.replace(p, exact=False) for p in t.parts),
            t.overhead,
            calls=t.calls,
            answers=t.answers,
            has_user_text=t.has_user_text,
        )
        for t in model.turns
    ]
    model.known = NOTHING_KNOWN  # the memo's running sums counted those parts exact
    model.schema_inexact = model.tool_schema


def apply(model: RequestModel, body: Mapping[str, Any], counter: TokenCounter) -> bool:
    """Count ``model`` (read from ``body``) as its family's template renders it; False: no template.

    A model of another family sent through the Chat Completions dialect without a template rule
    (Gemini through Google's OpenAI-compatible endpoint) is counted with OpenAI's framing in its
    own vocabulary: close, but no bill confirmed it, so every part of it is an estimate.
    """
    r = rendering(body, counter)
    if r is None:
        if _foreign(counter.model):
            _estimated(model)
        return False
    by_message = bool(r.per) and model.one_to_one
    unplaced = 0  # content of messages the template did not place (counted in the rest)
    turns: list[Turn] = []
    images = iter(r.images) if r.images is not None else None
    for k, t in enumerate(model.turns):
        parts = t.parts
        if images is not None and any(p.component == "image" for p in parts):
            parts = tuple(_priced(p, images) for p in parts)
        content = sum(p.tokens for p in parts if p.component not in _MEDIA)  # media keep their price
        if not r.exact:
            parts = tuple(p if not p.exact else dataclasses.replace(p, exact=False) for p in parts)
        if by_message:
            overhead = r.per.get(k, 0) - content
        else:
            overhead = 0
            unplaced += content
        turns.append(
            Turn(t.role, parts, overhead, calls=t.calls, answers=t.answers, has_user_text=t.has_user_text)
        )
    model.turns = turns
    model.known = NOTHING_KNOWN  # the memo's sums were OpenAI's framing
    model.tool_schema = r.tools
    model.schema_inexact = 0 if r.exact else r.tools
    # The template's own markers open the reply; a whole-request rendering's too.
    model.priming = (
        r.rest - unplaced
        if not by_message
        else r.rest + sum(r.per.get(k, 0) for k in r.per if k >= len(turns))
    )
    if model.priming < 0:  # a whole-request rendering shorter than the texts read
        model.tool_schema = max(0, model.tool_schema + model.priming)
        model.priming = 0
    return True


def _priced(part: Part, images: Iterator[int | None]) -> Part:
    """``part`` at the family's own image price, when it is an image the family priced."""
    if part.component != "image":
        return part
    tokens = next(images, None)
    return part if tokens is None else dataclasses.replace(part, tokens=tokens, exact=False)


def note_untemplated(counter: TokenCounter, unknown: Callable[[str], None]) -> None:
    """For a dialect that does not render templates (Responses): an open-weight model's template
    is billed but not counted, so the count is a bound (``unknown`` records why)."""
    if _render_for(counter.model) is not None:
        unknown("the host's chat template of an open-weight model")
