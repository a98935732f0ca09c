"""Function definitions as OpenAI's models read them, and what they add to a request.

The API does not send ``tools`` to the model as JSON: it writes them into the prompt as a
TypeScript-like namespace, one ``type name = (_: {...}) => any;`` per function, with the
descriptions as ``//`` comments and optional properties marked ``?``::

    # Tools

    ## functions

    namespace functions {

    // Get the weather
    type get_weather = (_: {
    // The city
    city: string,
    unit?: "c" | "f",
    }) => any;

    } // namespace functions

That text is counted with the model's own encoding, plus the framing the section gets.
The framing constants below were measured on bills the API really sent back (the
rendering itself is the one OpenAI's open-weight models document): the section is its
own system message when the request has none, and joins the first system (or developer)
message when it has one; the reasoning models (o-series, gpt-5) add a fixed preamble of
their own around it.

A schema keyword the rendering does not cover (``anyOf``, ``$ref``, ``allOf``, ...) is
rendered as well as it can be and its tool block is reported as an estimate: the count
is then flagged inexact rather than passed off as the provider's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from otel_ctx.engine.errors import InvalidToolSchemaError, TooDeeplyNestedError, shown
from otel_ctx.engine.model import RequestModel
from otel_ctx.engine.tokens import TokenCounter, to_json

__all__ = [
    "Section",
    "add_output_schema",
    "call_overhead",
    "commented",
    "count_functions",
    "is_reasoning_model",
    "output_schema",
    "render_functions",
    "section_framing",
]

#: Schema keywords whose rendering the recorded bills confirm; anything else makes the block
#: an estimate. ``additionalProperties``, ``strict`` and ``title`` of the whole schema are not
#: shown to the model at all.
_RENDERED = frozenset(
    {
        "type",
        "properties",
        "required",
        "description",
        "enum",
        "items",
        "additionalProperties",
        "title",
        "default",
    }
)

#: The section as a system message of its own (no system message in the request), and joined
#: into the request's first system or developer message (measured).
NEW_SYSTEM = 2
IN_SYSTEM = -1
#: The older encodings' models (gpt-4, gpt-3.5-turbo) frame a new section one token more.
NEW_SYSTEM_CL100K = 3
#: The reasoning models' tool preamble, whatever the request's system message (measured).
REASONING_PREAMBLE = 84
#: The Responses API frames the section alike with or without instructions: two tokens for the
#: reasoning models, two fewer than its text for the others (measured).
RESPONSES_REASONING = 2
RESPONSES_CHAT = -3
#: Each function after the first costs a token less than its text: the blank lines between
#: functions merge with the line ends (measured).
PER_FURTHER_FUNCTION = -1
#: A tool call in the history is the call's name and arguments plus its framing: 7 for one call
#: alone; a call of a parallel group is wrapped in the multi-tool envelope (its recipient name
#: and parameters keys), 8 more; a reasoning model frames every call 6 more (measured).
TOKENS_PER_TOOL_CALL = 7
PARALLEL_CALL_EXTRA = 8
REASONING_CALL_EXTRA = 6


def is_reasoning_model(model: str) -> bool:
    """The o-series and gpt-5 family: their framing differs from the chat models'."""
    name = model.removeprefix("openai/")
    return name.startswith(("o1", "o3", "o4", "gpt-5")) and not name.startswith("gpt-5-chat")


def call_overhead(model: str, calls_in_message: int) -> int:
    """Framing tokens of one tool call in an assistant message of ``calls_in_message`` calls."""
    if is_reasoning_model(model):
        return TOKENS_PER_TOOL_CALL + REASONING_CALL_EXTRA
    return TOKENS_PER_TOOL_CALL + (PARALLEL_CALL_EXTRA if calls_in_message > 1 else 0)


def section_framing(
    model: str, encoding: str, has_system: bool, section: Section, *, responses: bool = False
) -> int:
    """Tokens the tool section adds besides its rendered text (``responses``: the Responses API,
    whose framing is its own and whose reasoning models add no preamble; measured)."""
    further = PER_FURTHER_FUNCTION * max(0, section.functions - 1)
    if responses:
        return (RESPONSES_REASONING if is_reasoning_model(model) else RESPONSES_CHAT) + further
    if is_reasoning_model(model):
        return REASONING_PREAMBLE
    if has_system:
        return IN_SYSTEM + further
    if encoding == "cl100k_base":
        return NEW_SYSTEM_CL100K + further
    return NEW_SYSTEM + further + section.commented


def _type(schema: Any, known: list[bool], refs: list[Mapping[str, Any]]) -> str:
    if not isinstance(schema, Mapping):
        known[0] = False
        return "any"
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")) and len(refs) < 32:
        target = refs[0].get(ref.rsplit("/", 1)[-1])
        if isinstance(target, Mapping):  # written in place, as the model reads it
            return _type(target, known, [*refs, target])
    if not set(schema) <= _RENDERED:
        known[0] = False
    for key in ("anyOf", "oneOf"):
        alternatives = schema.get(key)
        if isinstance(alternatives, Sequence) and not isinstance(alternatives, str):
            return " | ".join(_type(a, known, refs) for a in alternatives)
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join("number" if k == "integer" else str(k) for k in kind)
    if kind == "object" or (kind is None and "properties" in schema):
        return _object(schema, known, refs)
    enum = schema.get("enum")
    if isinstance(enum, Sequence) and not isinstance(enum, str) and enum:
        return " | ".join(json.dumps(e, ensure_ascii=False) for e in enum)
    if kind in ("number", "integer"):
        return "number"
    if kind in ("string", "boolean", "null"):
        return str(kind)
    if kind == "array":
        items = schema.get("items")
        return f"{_type(items, known, refs)}[]" if items is not None else "any[]"
    if kind is not None:
        known[0] = False
    return "any"


def _object(schema: Mapping[str, Any], known: list[bool], refs: list[Mapping[str, Any]]) -> str:
    props = schema.get("properties") or {}
    if not isinstance(props, Mapping):
        known[0] = False
        return "object"
    required = schema.get("required") or ()
    lines = ["{"]
    for key, prop in props.items():
        if isinstance(prop, Mapping):
            title = prop.get("title")
            if isinstance(title, str) and title:
                lines.append(f"// {title}\n//")
            desc = prop.get("description")
            if isinstance(desc, str) and desc:
                lines.append(f"// {desc}")
        line = f"{key}{'' if key in required else '?'}: {_type(prop, known, refs)},"
        if isinstance(prop, Mapping) and "default" in prop:
            default = prop["default"]
            line += f" // default: {default if isinstance(default, str) else json.dumps(default)}"
        lines.append(line)
    lines.append("}")
    return "\n".join(lines)


def commented(functions: Sequence[Mapping[str, Any]]) -> int:
    """Functions with no parameters or with a described property: in a section of its own, the
    o200k chat models bill each of them one token more than its text (measured)."""
    n = 0
    for fn in functions:
        params = fn.get("parameters")
        props = params.get("properties") if isinstance(params, Mapping) else None
        if not props or (
            isinstance(props, Mapping)
            and any(isinstance(p, Mapping) and p.get("description") for p in props.values())
        ):
            n += 1
    return n


def render_functions(functions: Sequence[Mapping[str, Any]]) -> tuple[str, bool]:
    """The tool section's text for ``functions`` (``{"name", "description", "parameters"}`` each),
    and whether every schema keyword in them has a rendering the bills confirm."""
    known = [True]
    out = []
    for fn in functions:
        desc = fn.get("description") or ""
        text = f"// {desc}\n" if desc else ""
        params = fn.get("parameters")
        if isinstance(params, Mapping) and params.get("properties"):
            defs = params.get("$defs", params.get("definitions"))
            refs = [defs if isinstance(defs, Mapping) else {}]
            # The schema's own description opens the type; its title is billed as its text.
            about = params.get("description")
            head = f"// {about}\n" if isinstance(about, str) and about else ""
            text += f"type {fn['name']} = (_: {head}{_object(params, known, refs)}) => any;"
            title = params.get("title")
            if isinstance(title, str) and title:
                text += title
            for key in params:
                if key not in _RENDERED and key not in ("$defs", "definitions"):
                    known[0] = False
        else:
            text += f"type {fn['name']} = () => any;"
        out.append(text)
    body = "\n\n".join(out)
    return f"# Tools\n\n## functions\n\nnamespace functions {{\n\n{body}\n\n}} // namespace functions", known[
        0
    ]


def _function(tool: Any, where: str) -> Mapping[str, Any]:
    fn = tool.get("function") if isinstance(tool, Mapping) else None
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
        raise InvalidToolSchemaError(
            where, "must be {'type': 'function', 'function': {'name': ..., 'parameters': {...}}}"
        )
    desc = fn.get("description")
    if desc is not None and not isinstance(desc, str):
        raise InvalidToolSchemaError(f"{where}.function.description", "must be a string")
    params = fn.get("parameters")
    if params is not None and not isinstance(params, Mapping):
        raise InvalidToolSchemaError(f"{where}.function.parameters", "must be a JSON Schema object")
    props = params.get("properties") if params is not None else None
    if props is not None and not isinstance(props, Mapping):
        raise InvalidToolSchemaError(f"{where}.function.parameters.properties", "must be an object")
    for key, prop in (props or {}).items():
        if not isinstance(prop, Mapping):
            raise InvalidToolSchemaError(
                f"{where}.function.parameters.properties.{key}", "must be a JSON Schema object"
            )
        enum = prop.get("enum")
        if enum is not None and not isinstance(enum, (list, tuple)):
            raise InvalidToolSchemaError(
                f"{where}.function.parameters.properties.{key}.enum",
                f"must be a list of values, got {shown(enum)}",
            )
    return fn


class Section(NamedTuple):
    """A rendered tool section: its text's tokens, how many functions, whether every schema
    keyword has a confirmed rendering, and how many functions :func:`commented` counts."""

    tokens: int
    functions: int
    known: bool
    commented: int


def count_functions(counter: TokenCounter, tools: Sequence[Any]) -> Section:
    """The rendered section of Chat-shaped ``tools`` (see :class:`Section`).

    Tool lists are static in practice: the count is kept for the list (and its tool objects)
    last seen and for its JSON, so an unchanged list is not rendered again every round.
    """
    if not isinstance(tools, Sequence) or isinstance(tools, (str, bytes)):
        raise InvalidToolSchemaError("tools", f"must be a list of tool objects, got {type(tools).__name__}")
    items = tuple(tools)
    state = counter.dialect_state
    last = state.get("openai-tools")
    if (
        last is not None
        and last[0] is tools
        and len(last[1]) == len(items)
        and all(a is b for a, b in zip(last[1], items))
    ):
        return last[3]  # type: ignore[no-any-return]
    fns = [_function(tool, f"tools[{i}]") for i, tool in enumerate(items)]
    key = to_json(fns, "tools", None, InvalidToolSchemaError)  # a typed error for what JSON cannot say
    if last is not None and key == last[2]:
        state["openai-tools"] = (tools, items, key, last[3])
        return last[3]  # type: ignore[no-any-return]
    try:
        text, known = render_functions(fns)
    except RecursionError:
        raise TooDeeplyNestedError("tools", "is nested too deeply to be a request") from None
    found = Section(counter.text(text), len(fns), known, commented(fns))
    state["openai-tools"] = (tools, items, key, found)
    return found


def add_output_schema(model: RequestModel, schema: Any, counter: TokenCounter) -> None:
    """A structured-output schema (``response_format`` / ``text.format`` of type ``json_schema``):
    the API shows it to the model, and the bills grow with it about as its compact JSON does.
    Booked with the tool definitions (the marginal cost of what shapes the answer), an estimate."""
    if not isinstance(schema, Mapping):
        return
    try:
        text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError, RecursionError):
        return
    n = counter.text(text)
    model.tool_schema += n
    model.schema_inexact += n


def output_schema(format_: Any) -> Any:
    """The JSON schema of a ``json_schema`` response format (Chat's nests it, Responses' does not)."""
    if not isinstance(format_, Mapping) or format_.get("type") != "json_schema":
        return None
    nested = format_.get("json_schema")
    return nested.get("schema") if isinstance(nested, Mapping) else format_.get("schema")
