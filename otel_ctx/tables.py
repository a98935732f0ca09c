"""Reading the dated per-model tables that ship in ``otel_ctx/data`` (windows, prices).

Both files have one shape, ``{"as_of": "YYYY-MM-DD", "models": {name: {...}}}``, and both
can be replaced by a file the user names; a bad file is a typed error naming the file and
the field, never a crash in the JSON parser. Nothing here imports OpenTelemetry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from otel_ctx.engine.errors import InvalidPolicyError


def read_file(path: str | Path, what: str) -> tuple[Any, str]:
    """The JSON in ``path`` and the name to report it by; ``what`` says which file it is."""
    target = Path(path)
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidPolicyError(str(target), f"cannot read the {what}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise InvalidPolicyError(str(target), f"not JSON: {exc.msg} at line {exc.lineno}") from None
    return data, str(target)


def read_shipped(name: str) -> Any:
    """The JSON of ``otel_ctx/data/<name>``, as this version of otel-ctx ships it."""
    return json.loads(resources.files("otel_ctx").joinpath(f"data/{name}").read_text(encoding="utf-8"))


def dated_models(
    data: Mapping[str, Any], source: str, *, figures: str, entries: str
) -> tuple[str, Mapping[str, Any]]:
    """The ``as_of`` date and the ``models`` mapping of a table, checked.

    ``figures`` names what was read on that date (``prices``), ``entries`` what each model
    maps to (``limits``), for the error a user reads.
    """
    as_of = data.get("as_of")
    if not isinstance(as_of, str) or not as_of:
        raise InvalidPolicyError(f"{source}: as_of", f"must be the date the {figures} were read (YYYY-MM-DD)")
    models = data.get("models")
    if not isinstance(models, Mapping):
        raise InvalidPolicyError(f"{source}: models", f"must map model names to {entries}")
    return as_of, models


_Row = TypeVar("_Row")
#: What may follow a family name in a dated or tagged model id (``gpt-4o-2024-08-06``,
#: ``claude-sonnet-4-5@20250929``, ``ft:gpt-4o:acme``).
_MODEL_KEY_SEPARATORS = ("-", "@", ":")


def family_row(table: Mapping[str, _Row], model: str) -> _Row | None:
    """``model``'s row: its exact name, else the longest table name it starts with plus a separator.

    A dated model is priced and sized as its family, so a table need not list every snapshot.
    """
    found = table.get(model)
    if found is not None:
        return found
    best: str | None = None
    for name in table:
        if (
            len(model) > len(name)
            and model.startswith(name)
            and model[len(name)] in _MODEL_KEY_SEPARATORS
            and (best is None or len(name) > len(best))
        ):
            best = name
    return table[best] if best is not None else None
