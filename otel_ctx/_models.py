"""How big a model's window is: a dated table that ships with the package.

The zero-code instrumentor needs a budget for requests nobody configured, and a budget starts
from the model's window. The table (``otel_ctx/data/models.json``) is read from the package,
never fetched; ``OTEL_CTX_MODELS`` names a file of the same shape whose models replace or add
to it, or pass ``models=`` to ``otel_ctx.instrument()``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from otel_ctx._tables import dated_models, family_row, in_file, read_file, read_shipped
from otel_ctx.engine import InvalidPolicyError
from otel_ctx.engine._errors import shown

#: Environment variable naming a model file whose entries override the shipped table.
ENV_MODELS = "OTEL_CTX_MODELS"
#: No model's window or output limit comes near this; a larger figure is a typo (or an
#: attack) that would overflow every float the telemetry computes from it.
MAX_TOKENS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """A model's context window and the most output tokens one answer may have."""

    context_window: int
    max_output: int | None = None

    def __post_init__(self) -> None:
        for name in ("context_window", "max_output"):
            value = getattr(self, name)
            if value is None and name == "max_output":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_TOKENS:
                raise InvalidPolicyError(
                    f"model.{name}", f"must be a positive integer up to {MAX_TOKENS:,}, got {shown(value)}"
                )


def _limits(model: str, raw: object) -> ModelLimits:
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = {"context_window": raw}
    if not isinstance(raw, Mapping):
        raise InvalidPolicyError(f"models[{model!r}]", "must be an object with context_window")
    unknown = set(raw) - {"context_window", "max_output"}
    if unknown:
        raise InvalidPolicyError(f"models[{model!r}]", f"unknown fields {sorted(unknown)}")
    if "context_window" not in raw:
        raise InvalidPolicyError(f"models[{model!r}]", "missing context_window")
    try:
        return ModelLimits(raw["context_window"], raw.get("max_output"))
    except InvalidPolicyError as exc:
        raise InvalidPolicyError(f"models[{model!r}].{exc.field.split('.')[-1]}", exc.problem) from None


@dataclass(frozen=True)
class ModelTable:
    """Model name -> :class:`ModelLimits`, with the date the figures were read (``as_of``).

    A model is found by its exact name, else by the longest table name it starts with
    followed by ``-``, ``@`` or ``:`` (``gpt-4o-2024-08-06`` is ``gpt-4o``,
    ``claude-sonnet-4-5-20250929`` is ``claude-sonnet-4-5``).
    """

    models: Mapping[str, ModelLimits]
    as_of: str
    source: str = "otel-ctx"

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", MappingProxyType(dict(self.models)))

    def limits_for(self, model: str) -> ModelLimits | None:
        """The model's limits, or None when the table does not know it."""
        return family_row(self.models, model)

    def merged(self, overrides: ModelTable) -> ModelTable:
        """This table with ``overrides``' models replacing or adding to it (its date wins)."""
        return ModelTable({**self.models, **overrides.models}, as_of=overrides.as_of, source=overrides.source)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str) -> ModelTable:
        """From the file's shape: ``{"as_of": "YYYY-MM-DD", "models": {name: {context_window, ...}}}``.

        A bare ``{name: window}`` mapping (no ``models`` key) is accepted too, dated by ``source``.
        """
        if not isinstance(data, Mapping):
            raise InvalidPolicyError(source, "a model file must hold a JSON object")
        if "models" not in data:
            return cls(in_file(source, _limits, data), as_of="", source=source)
        as_of, models = dated_models(data, source, figures="figures", entries="limits")
        return cls(in_file(source, _limits, models), as_of=as_of, source=source)

    @classmethod
    def load(cls, path: str | Path) -> ModelTable:
        """A model file of the shipped shape (see ``otel_ctx/data/models.json``)."""
        data, source = read_file(path, "model file")
        return cls.from_dict(data, source=source)


def shipped_models() -> ModelTable:
    """The table that ships with this version of otel-ctx."""
    return ModelTable.from_dict(read_shipped("models.json"), source="otel-ctx")


def default_models() -> ModelTable:
    """The shipped table, overridden by the file ``OTEL_CTX_MODELS`` names (if set)."""
    table = shipped_models()
    override = os.environ.get(ENV_MODELS, "").strip()
    return table.merged(ModelTable.load(override)) if override else table
