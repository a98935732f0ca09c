"""Gemini's framing, as its bills show it: what a request costs beyond its text.

Measured on the Gemini API's and Vertex's ``promptTokenCount`` for bodies of several projects,
text counted with Gemma 3's vocabulary:

* Gemini 2.5 and 3.x on the Gemini API bill one token per content (the system instruction is
  one), whatever its parts; Gemini 2.0 and 1.5, and Vertex, bill the text alone.
* A function declaration is billed as Gemini renders it for the model, a compact
  ``declaration:NAME{description:…,parameters:{properties:{…},required:[…],type:…}}`` with
  string values between one-token quote markers, types in capitals, names of required fields
  bare, ``$ref`` expanded, and ``title``/``default``/``additionalProperties`` left out.
  Gemini 2.5 renders an empty description; 3.x leaves it out and spends five tokens more on
  one it has. Gemini 2.0 bills about the names and descriptions alone (a ``parameters``
  schema's property names and descriptions, a ``parametersJsonSchema`` not at all); Vertex the
  names.
* A function call and a function response are rendered the same way
  (``call:NAME{args}``, ``response:NAME{…}``) with three tokens of markers each.
* A ``responseSchema`` is billed on Gemini 2.0 only (as a declaration's parameters);
  ``responseJsonSchema`` on none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

#: A model's generation: ``legacy`` (1.x, 2.0) frames nothing, ``current`` (2.5, 3.x) frames contents.
_LEGACY = re.compile(r"^gemini-(?:1\.|2\.0)")
_THIRD = re.compile(r"^gemini-(?:[3-9]|\d\d)")

#: One token per content (and per system instruction) on Gemini 2.5+ through the Gemini API.
TOKENS_PER_CONTENT = 1
#: A function call's and a function response's markers around their rendering.
TOKENS_PER_CALL = 3
#: What Gemini 3.x spends on a declaration's description beyond its rendering.
GEMINI3_DESCRIPTION = 5
#: Gemini 2.0's framing of one declaration (it bills its names and descriptions, little else).
LEGACY_DECLARATION = 2
#: Gemini 2.0's framing of a function call or response.
LEGACY_CALL = 2
#: The one-token quote markers around string values in the rendering.
QUOTE = 1
#: A model string that names Vertex (LiteLLM's route, or the resource path Vertex's SDK calls).
_VERTEX_MODEL = re.compile(
    r"^(?:vertex_ai(?:_beta)?/|projects/|publishers/google/)|/publishers/google/models/"
)

#: Schema keywords Gemini leaves out of the rendering it bills.
_DROPPED = frozenset({"additionalProperties", "title", "default", "$defs", "definitions", "$schema", "$id"})


def is_legacy(model: str) -> bool:
    """Gemini 1.x and 2.0: no per-content framing, a lighter rendering of tools."""
    return bool(_LEGACY.match(_bare(model)))


def is_third(model: str) -> bool:
    """Gemini 3.x and later: descriptions rendered only when given."""
    return bool(_THIRD.match(_bare(model)))


def _bare(model: str) -> str:
    return model.strip().lower().rsplit("/", 1)[-1]


def is_vertex(model: str, body: Mapping[str, Any]) -> bool:
    """The request goes to Vertex: its model is a Vertex route or path, or the body holds a
    field only Vertex takes (``labels``). A plain body cannot say; it is read as the Gemini API's
    (one token per content higher than Vertex bills: an estimate that errs high)."""
    return bool(_VERTEX_MODEL.search(model.strip().lower())) or body.get("labels") is not None


#: Stands for the one-token quote marker while a rendering is built (never in JSON text).
_MARK = "\x00"


def _value(v: Any) -> str:
    if isinstance(v, Mapping):
        return "{" + ",".join(f"{k}:{_value(x)}" for k, x in sorted(v.items(), key=_key)) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_value(x) for x in v) + "]"
    if isinstance(v, str):
        return _MARK + v.replace(_MARK, "") + _MARK
    return json.dumps(v)


def _key(item: tuple[Any, Any]) -> str:
    return str(item[0])


def _schema(v: Any, defs: Mapping[str, Any], seen: tuple[str, ...]) -> str:
    if not isinstance(v, Mapping):
        return _value(v)
    ref = v.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        target = defs.get(name)
        if isinstance(target, Mapping) and name not in seen:  # a cycle is rendered as its $ref
            return _schema(target, defs, (*seen, name))
    out = []
    for key, x in sorted(v.items(), key=_key):
        if key in _DROPPED:
            continue
        if key == "properties" and isinstance(x, Mapping):
            inner = ",".join(f"{p}:{_schema(s, defs, seen)}" for p, s in sorted(x.items(), key=_key))
            out.append("properties:{" + inner + "}")
        elif key in ("items", "anyOf", "oneOf", "allOf", "not", "prefixItems") and isinstance(x, Mapping):
            out.append(f"{key}:" + _schema(x, defs, seen))
        elif key in ("items", "anyOf", "oneOf", "allOf", "prefixItems") and isinstance(x, (list, tuple)):
            out.append(f"{key}:[" + ",".join(_schema(s, defs, seen) for s in x) + "]")
        elif key == "type" and isinstance(x, str):
            out.append("type:" + _MARK + x.upper() + _MARK)
        elif key == "required" and isinstance(x, (list, tuple)):
            out.append("required:[" + ",".join(str(r) for r in x) + "]")
        else:
            out.append(f"{key}:{_value(x)}")
    return "{" + ",".join(out) + "}"


def render_schema(schema: Any) -> str:
    """A parameters (or response) schema as Gemini renders it (quote markers as ``_MARK``)."""
    defs: Mapping[str, Any] = {}
    if isinstance(schema, Mapping):
        found = schema.get("$defs", schema.get("definitions"))
        defs = found if isinstance(found, Mapping) else {}
    return _schema(schema, defs, ())


class Renderer:
    """Counts Gemini's renderings with a text counter (each run between markers cached by it)."""

    def __init__(self, text: Callable[[str], int]) -> None:
        self.text = text

    def count(self, rendered: str) -> int:
        """Tokens of a rendering: its text runs, and one per quote marker."""
        runs = rendered.split(_MARK)
        return (len(runs) - 1) * QUOTE + sum(self.text(r) for r in runs if r)

    def declaration(self, name: str, description: str, schema: Any, model: str) -> int:
        """One function declaration, by the model's generation."""
        if is_legacy(model):
            return LEGACY_DECLARATION + self.text(name) + self.text(description) + self._legacy(schema)
        third = is_third(model)
        body = ""
        if description or not third:
            body += "description:" + _MARK + description.replace(_MARK, "") + _MARK + ","
        body += "parameters:" + render_schema(schema if schema is not None else {}) + "}"
        n = self.count("declaration:" + name + "{" + body) - 1
        return n + (GEMINI3_DESCRIPTION if description and third else 0)

    def schema(self, schema: Any) -> int:
        """A response schema as Gemini 2.0 bills it with the request: like a declaration's
        parameters."""
        return LEGACY_DECLARATION + self._legacy(schema)

    def _legacy(self, schema: Any) -> int:
        """Gemini 2.0's rendering: each property's name, description and one token."""
        if not isinstance(schema, Mapping):
            return 0
        props = schema.get("properties")
        n = 0
        if isinstance(props, Mapping):
            for p, s in props.items():
                n += self.text(str(p)) + 1
                if isinstance(s, Mapping):
                    desc = s.get("description")
                    n += self.text(desc) if isinstance(desc, str) else 0
                    n += self._legacy(s)
        items = schema.get("items")
        n += self._legacy(items) if isinstance(items, Mapping) else 0
        for key in ("anyOf", "any_of", "oneOf", "one_of"):
            options = schema.get(key)
            if isinstance(options, (list, tuple)):
                n += sum(self._legacy(o) for o in options)
        enum = schema.get("enum")
        if isinstance(enum, (list, tuple)):
            n += sum(self.text(str(e)) for e in enum)
        return n

    def call(self, kind: str, name: str, value: Any, model: str, vertex: bool = False) -> int:
        """A function call (``kind`` ``call``) or response (``response``) with its markers;
        Gemini 2.0 and Vertex bill the name and the values' text alone."""
        if vertex or is_legacy(model):
            return LEGACY_CALL + self.text(name) + _leaves(value, self.text)
        return TOKENS_PER_CALL + self.count(f"{kind}:{name}" + _value(value if value is not None else {}))


def _leaves(value: Any, text: Callable[[str], int]) -> int:
    if isinstance(value, Mapping):
        return sum(_leaves(x, text) for x in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_leaves(x, text) for x in value)
    return text(value if isinstance(value, str) else json.dumps(value))
