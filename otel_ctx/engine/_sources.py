"""Named injected context (snippets, skills) and the data-class ladder.

A source may declare how sensitive its text is. The readout lists every source by
name with its class and folds them to the strictest; the text itself never leaves
the process through otel-ctx, which is why the classification exists at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from otel_ctx.engine._errors import InvalidRequestError, shown

#: The ladder, least to most strict.
DATA_CLASSES: tuple[str, ...] = ("public", "internal", "confidential", "restricted")

SourceKind = Literal["snippet", "skill"]


@dataclass(frozen=True, slots=True)
class Source:
    """A named block of injected text: a system-prompt snippet or a skill."""

    name: str
    text: str
    data_class: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidRequestError("source.name", f"must be a non-empty string, got {shown(self.name)}")
        if not isinstance(self.text, str):
            raise InvalidRequestError(
                f"source {shown(self.name)}.text", f"must be a string, got {type(self.text).__name__}"
            )
        if self.data_class is not None and self.data_class not in DATA_CLASSES:
            raise InvalidRequestError(
                f"source {shown(self.name)}.data_class",
                f"unknown data class {shown(self.data_class)}; expected one of {', '.join(DATA_CLASSES)}",
            )


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """What the readout may say of a source: its name, kind and class. Never its text."""

    name: str
    kind: SourceKind
    data_class: str | None


SourcesLike = Sequence[Source] | Mapping[str, str] | None


def as_sources(value: SourcesLike, where: str) -> tuple[Source, ...]:
    """Accept a sequence of :class:`Source` or a ``{name: text}`` mapping."""
    if value is None:
        return ()
    if isinstance(value, Mapping):
        return tuple(Source(name=str(k), text=v) for k, v in value.items())
    if isinstance(value, (str, bytes)):
        raise InvalidRequestError(
            where, "must be a sequence of Source or a {name: text} mapping, got a string"
        )
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, Source):
            raise InvalidRequestError(f"{where}[{i}]", f"must be a Source, got {type(item).__name__}")
        out.append(item)
    return tuple(out)


def strictest(classes: Iterable[str | None]) -> str | None:
    """Fold declared classes to the strictest on the ladder; ``None`` when none declared."""
    rank = max((DATA_CLASSES.index(c) for c in classes if c is not None), default=-1)
    return DATA_CLASSES[rank] if rank >= 0 else None
