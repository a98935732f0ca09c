"""Reading the dated per-model tables that ship in ``otel_ctx/data`` (windows, prices).

Both have the shape ``{"as_of": "YYYY-MM-DD", "models": {name: {...}}}`` and may be replaced
by a file the user names; a bad file is a typed error naming the file and the field.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from otel_ctx._families import model_key
from otel_ctx._files import read_regular_file
from otel_ctx.engine._errors import InvalidPolicyError

#: Cap on a configuration file (prices, model windows, policies): real ones are a few
#: kilobytes, so this is generous, and ``/dev/zero`` or an endless pipe stops here.
MAX_CONFIG_BYTES = 4 * 1024 * 1024


def read_config_bytes(path: str | Path, what: str) -> bytes:
    """The bytes of a configuration file the user names: a regular file of at most
    :data:`MAX_CONFIG_BYTES`, else :class:`InvalidPolicyError` naming the file (a FIFO is
    refused, never opened, so start-up cannot block on one)."""

    def refuse(label: str, problem: str) -> InvalidPolicyError:
        return InvalidPolicyError(label, f"cannot read the {what}: {problem}")

    return read_regular_file(os.fspath(path), MAX_CONFIG_BYTES, refuse, what=f"a {what}")


def read_file(path: str | Path, what: str) -> tuple[Any, str]:
    """The JSON in ``path`` and the name to report it by; ``what`` says which file it is."""
    source = str(path)
    raw = read_config_bytes(path, what)
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidPolicyError(source, f"not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise InvalidPolicyError(source, f"not JSON: {exc.msg} at line {exc.lineno}") from None
    except ValueError:  # an integer past Python's digit limit
        raise InvalidPolicyError(source, "not JSON this reader accepts: a number is too long") from None
    except RecursionError:
        raise InvalidPolicyError(source, "not JSON this reader accepts: nested too deeply") from None
    return data, source


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


def in_file(source: str, row: Callable[[str, Any], _Row], models: Mapping[Any, Any]) -> dict[str, _Row]:
    """Every ``models`` entry read by ``row``; a bad one is an error naming the file too."""
    out: dict[str, _Row] = {}
    for name, raw in models.items():
        try:
            out[str(name)] = row(str(name), raw)
        except InvalidPolicyError as exc:
            if source == "otel-ctx" or exc.field.startswith(source):
                raise
            raise InvalidPolicyError(f"{source}: {exc.field}", exc.problem) from None
    return out


#: What may follow a family name in a dated or tagged model id (``gpt-4o-2024-08-06``,
#: ``claude-sonnet-4-5@20250929``, ``ft:gpt-4o:acme``).
_MODEL_KEY_SEPARATORS = ("-", "@", ":")


def family_row(table: Mapping[str, _Row], model: str) -> _Row | None:
    """``model``'s row: its exact name, else the longest table name it starts with plus a separator.

    A dated model is priced and sized as its family, so a table need not list every snapshot.
    """
    found = _row(table, model)
    if found is None:
        # A provider's spelling of the model (a Bedrock id with its region and version, a
        # router's path): the bare name the rows are keyed on.
        bare = model_key(model)
        if bare and bare != model:
            found = _row(table, bare)
    return found


def _row(table: Mapping[str, _Row], model: str) -> _Row | None:
    found = table.get(model)
    if found is not None:
        return found
    families = [
        name
        for name in table
        if len(model) > len(name) and model.startswith(name) and model[len(name)] in _MODEL_KEY_SEPARATORS
    ]
    return table[max(families, key=len)] if families else None
