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
from operator import is_
from typing import Any, NamedTuple, TypeGuard

from otel_ctx.adapters._base import private_copy
from otel_ctx.engine._errors import InvalidToolSchemaError, TooDeeplyNestedError, shown
from otel_ctx.engine._model import RequestModel
from otel_ctx.engine._tokens import TokenCounter, to_json

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
#: The older encodings' models (gpt-4, gpt-3.5-turbo) frame a section of its own one token more
#: (measured).
NEW_SYSTEM_CL100K = 3
#: The legacy ``functions`` parameter joined into a system message costs a token more than the
#: same definitions sent as ``tools`` (measured).
LEGACY_FUNCTIONS_IN_SYSTEM = 1
#: The reasoning models' tool preamble, whatever the request's system message; their functions
#: after the first and those :func:`commented` counts shift it as they do the chat models' (measured).
REASONING_PREAMBLE = 84
#: In Chat Completions a reasoning model's section joined into a leading system or developer
#: message costs a token less (measured on gpt-5.4 bills; a system message after the first
#: message leaves the preamble as it is, measured on gpt-5).
REASONING_IN_SYSTEM = -1
#: The Responses API frames the section alike with or without instructions: two tokens for the
#: reasoning models (their functions shift it as in Chat Completions), three fewer than its text
#: for the others (measured).
RESPONSES_REASONING = 2
RESPONSES_CHAT = -3
#: In a section of its own (Chat Completions) each function after the first costs a token less
#: than its text (measured; the o200k models add :func:`commented` back).
PER_FURTHER_FUNCTION = -1
#: Joined into a system or developer message (Chat Completions) or in the Responses API, a section
#: whose first function has parameters but no description costs a token less (measured; see
#: :func:`bare_first`).
BARE_FIRST = -1
#: Joined into a system or developer message (Chat Completions) and in the Responses API (every
#: model), a function after the first costs a token less only when its parameters open on a
#: property with no comment (no title, no description); the others cost their text (measured).
PLAIN_AFTER_FIRST = -1
#: A tool call in a Responses input, or in a reasoning model's Chat transcript, is the call's name
#: and arguments plus its framing: 7, and 6 more for a reasoning model (measured; the chat
#: models' Chat calls follow :func:`chat_call_tokens` instead).
TOKENS_PER_TOOL_CALL = 7
PARALLEL_CALL_EXTRA = 8
REASONING_CALL_EXTRA = 6
#: A reasoning model's Chat call reads its name twice as well, in the call and in the header of
#: the tool message that answers it, and is framed with 2 tokens fewer than that (measured).
REASONING_CHAT_CALL = -2


#: The shapes whose rule reproduced the bills of every project that sent them, each with what
#: confirmed it. A part of a request whose shape is not here is counted as well as the rules allow
#: and flagged an estimate (its line in ``estimated_lines``): a rule that held on one project's
#: bills and missed on another's is not the provider's count, and saying ``exact`` for it would
#: teach the reader to ignore the flag. A shape joins this table when the bills of several projects
#: agree with its rule to the token, never for one project's cases.
CONFIRMED: Mapping[str, str] = {
    # Plain messages (text, names, refusals) in both APIs: every project's text-only bills, both
    # encodings, chat and reasoning models, to the token.
    "messages": "text-only Chat Completions and Responses bills of every project",
    # The earlier answers of a harmony-format model (gpt-5 family) carry their channel: the
    # open-weight renderer writes ``<|channel|>final`` into every assistant message of the history,
    # and the Responses API's bills of several projects, and Chat Completions', show those tokens.
    "answer-channel": "gpt-5 family transcripts with earlier answers, both APIs",
}
# Not in the table, so counted as estimates: "tools" (the function section: a token or two either
# way on some projects' schemas), "response-format" (the json_schema section: one to three tokens
# off on some projects' pydantic schemas, in both APIs), "forced-function" (``tool_choice`` naming
# one: a token apart between projects), "custom-tools" (tools of other types: their definition's
# JSON, no bill confirms how the model reads them).


def confirmed(shape: str) -> bool:
    """Whether ``shape``'s rule reproduced the bills of every project that sent it (see
    :data:`CONFIRMED`): only then may its part of a count say it is exact."""
    return shape in CONFIRMED


def answer_channel(model: str) -> int:
    """What an earlier answer of ``model`` costs beyond its text and role: the harmony-format
    models (the gpt-5 family) read it with its channel marked, two tokens (the renderer's
    ``<|channel|>final``; measured on their bills); the other models nothing."""
    name = model.removeprefix("openai/")
    return 2 if name.startswith("gpt-5") and not name.startswith("gpt-5-chat") else 0


#: Per model family, what a function call in a Responses input costs beside
#: :func:`call_overhead`, alone and as one of a parallel group (consecutive calls): the gpt-5.4
#: models frame a replayed call three tokens longer than the other gpt-5 models, and a call of a
#: parallel group five more (measured on every gpt-5.4 bill with calls; an estimate like the
#: calls' tool section). The model reads a parallel group alike in Chat Completions: there each
#: call of a group costs the row's group framing too, while a lone call keeps the Chat framing of
#: the other gpt-5 models (gpt-5.4's Chat bills: lone calls to the token, a group of two billed
#: 13 tokens over the count without the row, 3 over with it). A family is one row here: (name
#: prefix, per call, per call in a group).
RESPONSES_CALL_FRAMING: tuple[tuple[str, int, int], ...] = (("gpt-5.4", 3, 5),)


def responses_call_framing(model: str) -> tuple[int, int]:
    """The :data:`RESPONSES_CALL_FRAMING` row of ``model``: what a call costs more alone and in a
    parallel group ((0, 0) for a family with no row)."""
    name = model.removeprefix("openai/")
    for prefix, delta, grouped in RESPONSES_CALL_FRAMING:
        if name.startswith(prefix):
            return delta, grouped
    return 0, 0


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """A JSON object: a dict at once (the schemas agents send are), any Mapping otherwise."""
    return value.__class__ is dict or isinstance(value, Mapping)


def is_reasoning_model(model: str) -> bool:
    """The o-series and gpt-5 family: their framing differs from the chat models'."""
    name = model.removeprefix("openai/")
    return name.startswith(("o1", "o3", "o4", "gpt-5")) and not name.startswith("gpt-5-chat")


def call_overhead(model: str, calls_in_message: int) -> int:
    """Framing tokens of one tool call in an assistant message of ``calls_in_message`` calls."""
    if is_reasoning_model(model):
        return TOKENS_PER_TOOL_CALL + REASONING_CALL_EXTRA
    return TOKENS_PER_TOOL_CALL + (PARALLEL_CALL_EXTRA if calls_in_message > 1 else 0)


#: The chat models read a call back as the API re-serialises it, not as the request spells it:
#: its arguments as compact JSON, its name both bare and as the ``functions.`` recipient. One
#: call alone costs 4 tokens more than those; a parallel group is written as a single call of
#: ``multi_tool_use.parallel``, ``{"tool_uses":[{"recipient_name":"functions.NAME",
#: "parameters":{...}}, ...]}``, and costs 12 more than that JSON (measured).
SINGLE_CALL = 4
PARALLEL_GROUP = 12


def parallel_results(results: Sequence[str]) -> str:
    """The answers to a chat model's parallel group as it reads them back: one tool message, the
    JSON list of the results (a result that is JSON as its value, any other as a string) written
    with the default separators and non-ASCII escaped, whatever the spacing the results had
    (measured: one framing for the whole group, the results re-serialised)."""
    values: list[Any] = []
    for result in results:
        try:
            values.append(json.loads(result))
        except (ValueError, RecursionError):
            values.append(result)
    try:
        return json.dumps(values)
    except RecursionError:  # too deep to write back: the results as strings
        return json.dumps(list(results))


def _compact(arguments: str) -> str:
    """``arguments`` as compact JSON, as the API stores a call (unchanged when not JSON)."""
    if not arguments.lstrip().startswith(("{", "[")):
        return arguments
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False, separators=(",", ":"))
    except (ValueError, RecursionError):
        return arguments


def chat_call_tokens(counter: TokenCounter, calls: Sequence[tuple[str, str]]) -> list[int]:
    """The tokens of each tool call (``(name, arguments)``) of one assistant message of a Chat
    Completions transcript; a parallel group's shared framing is booked on its first call."""
    text = counter.text
    if not calls:
        return []
    if is_reasoning_model(counter.model):
        framing = call_overhead(counter.model, len(calls)) + REASONING_CHAT_CALL
        if len(calls) > 1:  # a parallel group: what the family's row adds a call, as in Responses
            framing += responses_call_framing(counter.model)[1]
        return [framing + 2 * text(name) + text(args) for name, args in calls]
    if len(calls) == 1:
        name, args = calls[0]
        return [SINGLE_CALL + text(name) + text("functions." + name) + text(_compact(args))]
    uses = []
    for name, args in calls:
        recipient = json.dumps("functions." + name, ensure_ascii=False)
        uses.append(f'{{"recipient_name":{recipient},"parameters":{_compact(args) or "{}"}}}')
    each = [text(use) for use in uses]
    each[0] += PARALLEL_GROUP + text('{"tool_uses":[' + ",".join(uses) + "]}") - sum(each)
    return each


def section_framing(
    model: str,
    encoding: str,
    has_system: bool,
    section: Section,
    *,
    responses: bool = False,
    legacy: bool = False,
    leading_system: bool = False,
) -> int:
    """Tokens the tool section adds besides its rendered text, by the measured rules above
    (``responses``: in the Responses API; ``legacy``: sent as Chat Completions' ``functions``;
    ``leading_system``: the request's first message is a system or developer message)."""
    further = PER_FURTHER_FUNCTION * max(0, section.functions - 1)
    if is_reasoning_model(model):
        if responses:
            return RESPONSES_REASONING + further + section.commented
        joined = REASONING_IN_SYSTEM if leading_system else 0
        return REASONING_PREAMBLE + joined + further + section.commented
    joined = BARE_FIRST * section.bare_first + PLAIN_AFTER_FIRST * section.plain_after_first
    if responses:
        return RESPONSES_CHAT + joined
    if has_system:
        return IN_SYSTEM + (LEGACY_FUNCTIONS_IN_SYSTEM if legacy else 0) + joined
    if encoding == "cl100k_base":
        return NEW_SYSTEM_CL100K + further
    return NEW_SYSTEM + further + section.commented


def _type(schema: Any, known: list[bool], refs: list[Mapping[str, Any]], lone: bool = False) -> str:
    if not _is_mapping(schema):
        known[0] = False
        return "any"
    ref = schema.get("$ref")
    if ref is not None:
        # The open-weight renderer writes a reference as ``any``; otel-ctx writes what it names.
        known[0] = False
    if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")) and len(refs) < 32:
        target = refs[0].get(ref.rsplit("/", 1)[-1])
        if _is_mapping(target):  # written in place, as the model reads it
            shown = _type(target, known, [*refs, target], lone)
            about = target.get("description")
            if _is_object(target) and _text(about):
                # A referenced object's description is not the property's (written above it): it
                # opens the object, after its title (measured, a token over on one schema).
                title = _titled(target)
                shown = f"{title}// {about}\n{shown[len(title) :]}"
            return shown
    if not set(schema) <= _RENDERED:
        known[0] = False
    for key in ("anyOf", "oneOf"):
        alternatives = schema.get(key)
        if isinstance(alternatives, Sequence) and not isinstance(alternatives, str):
            return " | ".join(_type(a, known, refs, lone) for a in alternatives)
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join("number" if k == "integer" else str(k) for k in kind)
    if _is_object(schema):
        # A nested object: the open-weight renderer indents its members, which no bill confirms.
        known[0] = False
        return _titled(schema) + _object(schema, known, refs, lone)
    enum = schema.get("enum")
    if isinstance(enum, Sequence) and not isinstance(enum, str) and enum:
        return " | ".join(json.dumps(e, ensure_ascii=False) for e in enum)
    if kind in ("number", "integer"):
        return "number"
    if kind == "null":
        known[0] = False  # ``any`` in the open-weight renderer
    if kind in ("string", "boolean", "null"):
        return str(kind)
    if kind == "array":
        items = schema.get("items")
        if items is None:
            known[0] = False  # ``Array<any>`` in the open-weight renderer
        return f"{_type(items, known, refs, lone)}[]" if items is not None else "any[]"
    if kind is not None:
        known[0] = False
    return "any"


def _is_object(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "object" or (kind is None and "properties" in schema)


def _titled(schema: Mapping[str, Any]) -> str:
    """An object's title as the comment line that opens it (``// Recipe`` before its ``{``)."""
    title = schema.get("title")
    return f"// {title}\n" if isinstance(title, str) and title else ""


def _default(prop: Mapping[str, Any]) -> str:
    """A default as the trailing comment shows it: a string quoted as JSON, but an enum's value
    bare (as the open-weight models' renderer writes it)."""
    default = prop["default"]
    if isinstance(default, str) and prop.get("enum"):
        return default
    return json.dumps(default, ensure_ascii=False)


def _object(
    schema: Mapping[str, Any], known: list[bool], refs: list[Mapping[str, Any]], lone: bool = False
) -> str:
    """An object's members, one a line. ``lone``: a property's title with no description is one
    comment line (the Responses API, and Chat Completions when the section joins the request's
    system or developer message); else a blank comment follows it, as when a description does (a
    Chat Completions section of its own). Measured on both APIs' bills, of five projects: pydantic
    models give every property a title, so this is most tool sections agents send."""
    props = schema.get("properties") or {}
    if not _is_mapping(props):
        known[0] = False
        return "object"
    required = schema.get("required") or ()
    lines = ["{"]
    for key, prop in props.items():
        if _is_mapping(prop):
            desc = prop.get("description")
            described = isinstance(desc, str) and bool(desc)
            title = prop.get("title")
            if isinstance(title, str) and title and not _is_object(prop):
                lines.append(f"// {title}" if lone and not described else f"// {title}\n//")
            if described:
                # A property's description is commented line by line like a function's (measured;
                # the open-weight renderer comments its first line only, so a multi-line one is an
                # estimate).
                if "\n" in str(desc).strip():
                    known[0] = False
                lines.append(_comment(desc)[:-1])
        opt = "" if key in required else "?"
        alternatives = _union(prop) if _is_mapping(prop) else None
        commented_union = _text(prop.get("title")) or _text(prop.get("description"))
        if alternatives is not None and lone and commented_union:
            lines.extend(_union_lines(prop, f"{key}{opt}", alternatives, known, refs, lone))
            continue
        line = f"{key}{opt}: {_type(prop, known, refs, lone)},"
        if _is_mapping(prop) and "default" in prop:
            line += f" // default: {_default(prop)}"
        lines.append(line)
    lines.append("}")
    return "\n".join(lines)


def _union(schema: Mapping[str, Any]) -> Sequence[Any] | None:
    """A union's alternatives (``anyOf`` or ``oneOf``), or None when ``schema`` is no union."""
    for key in ("anyOf", "oneOf"):
        alternatives = schema.get(key)
        if isinstance(alternatives, Sequence) and not isinstance(alternatives, (str, bytes)):
            return alternatives
    return None


def _union_lines(
    prop: Mapping[str, Any],
    head: str,
    alternatives: Sequence[Any],
    known: list[bool],
    refs: list[Mapping[str, Any]],
    lone: bool,
) -> list[str]:
    """A union property that carries a comment (a title or a description), as the open-weight
    models' renderer writes a property's ``oneOf``: its default a comment line above, the name
    alone on its line, then one `` | type`` line per alternative with the alternative's own
    comments after it (its description, its ``format`` as ``// format: date``, its default), and
    a lone comma. That is the rendering of a section joined into a system or developer message
    and of the Responses API (``lone``: openinference's bills); a Chat Completions section of its
    own, whose renderer follows a lone title with a blank comment, keeps every union on one line
    (``a | b``, 3 tokens less a property: the bills of three projects, both encodings), as does a
    union with no comment anywhere; all measured."""
    if not set(prop) <= _RENDERED:  # a union stays an estimate: measured on one schema
        known[0] = False
    lines = []
    if "default" in prop:
        lines.append(f"// default: {_default(prop)}")
    lines.append(f"{head}:")
    for alternative in alternatives:
        notes: list[str] = []
        if _is_mapping(alternative):
            about = alternative.get("description")
            if isinstance(about, str) and about and about != prop.get("description"):
                notes.append(about)
            if _text(alternative.get("format")):
                notes.append(f"format: {alternative['format']}")
            if "default" in alternative:
                notes.append(f"default: {_default(alternative)}")
        shown = _type(alternative, known, refs, lone)
        lines.append(f" | {shown}" + (f" // {' '.join(notes)}" if notes else ""))
    lines.append(",")
    return lines


def commented(functions: Sequence[Mapping[str, Any]], reasoning: bool = False) -> int:
    """Functions with no parameters or with a property that carries a comment (a description, or
    a default, written as ``// default: ...``): in a section of its own, the o200k chat models
    bill each of them one token more than its text (measured). The reasoning models
    (``reasoning``) bill them so in any section, and a function without a description one token
    less than its text (measured: a parameterless one without a description costs its text)."""
    n = 0
    for fn in functions:
        if reasoning and not fn.get("description"):
            n -= 1
        params = fn.get("parameters")
        props = params.get("properties") if _is_mapping(params) else None
        if not props or (
            _is_mapping(props)
            and any(_is_mapping(p) and (p.get("description") or "default" in p) for p in props.values())
        ):
            n += 1
    return n


def bare_first(functions: Sequence[Mapping[str, Any]]) -> bool:
    """Whether :data:`BARE_FIRST` applies: the first function has parameters but no description."""
    if not functions:
        return False
    first = functions[0]
    params = first.get("parameters")
    described = isinstance(first.get("description"), str) and first["description"].strip()
    return bool(_is_mapping(params) and params.get("properties")) and not described


def _comment(description: Any) -> str:
    """A function's description as the model reads it: every line its own ``//`` comment, the
    line's indentation and trailing space dropped, a blank line a bare ``//``, blank lines around
    the whole dropped (measured: a docstring's indentation and a trailing space are not billed)."""
    if not isinstance(description, str) or not description.strip():
        return ""
    lines = [line.strip() for line in description.strip().split("\n")]
    return "".join(f"// {line}\n" if line else "//\n" for line in lines)


def render_functions(
    functions: Sequence[Mapping[str, Any]], *, lone_titles: bool = False
) -> tuple[str, bool]:
    """The tool section's text for ``functions`` (``{"name", "description", "parameters"}`` each),
    and whether every schema keyword in them has a rendering the bills confirm (``lone_titles``: a
    property's title with no description as one comment line, see :func:`_object`)."""
    known = [True]
    out = []
    for fn in functions:
        text = _comment(fn.get("description"))
        params = fn.get("parameters")
        if _is_mapping(params) and params.get("properties"):
            defs = params.get("$defs", params.get("definitions"))
            refs = [defs if _is_mapping(defs) else {}]
            # The schema's own title and description open the type as comments (``(_: // Args``).
            about = params.get("description")
            head = _titled(params) + (f"// {about}\n" if isinstance(about, str) and about else "")
            text += f"type {fn['name']} = (_: {head}{_object(params, known, refs, lone_titles)}) => any;"
            for key in params:
                if key not in _RENDERED and key not in ("$defs", "definitions"):
                    known[0] = False
        else:
            text += f"type {fn['name']} = () => any;"
        out.append(text)
    body = "\n\n".join(out)
    section = f"# Tools\n\n## functions\n\nnamespace functions {{\n\n{body}\n\n}} // namespace functions"
    return section, known[0]


def _function(tool: Any, where: str) -> Mapping[str, Any]:
    fn = tool.get("function") if _is_mapping(tool) else None
    if not _is_mapping(fn) or not isinstance(fn.get("name"), str):
        raise InvalidToolSchemaError(
            where, "must be {'type': 'function', 'function': {'name': ..., 'parameters': {...}}}"
        )
    desc = fn.get("description")
    if desc is not None and not isinstance(desc, str):
        raise InvalidToolSchemaError(f"{where}.function.description", "must be a string")
    params = fn.get("parameters")
    if params is not None and not _is_mapping(params):
        raise InvalidToolSchemaError(f"{where}.function.parameters", "must be a JSON Schema object")
    props = params.get("properties") if params is not None else None
    if props is not None and not _is_mapping(props):
        raise InvalidToolSchemaError(f"{where}.function.parameters.properties", "must be an object")
    for key, prop in (props or {}).items():
        if not _is_mapping(prop):
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
    keyword has a confirmed rendering, what :func:`commented` counts for the counter's model,
    whether the first function has parameters but no description, and how many functions after
    the first open their parameters on a property with no comment (see :func:`plain_after_first`)."""

    tokens: int
    functions: int
    known: bool
    commented: int
    bare_first: bool = False
    plain_after_first: int = 0
    #: Tools of another type than ``function`` (custom grammar tools, ...): their definitions'
    #: JSON and :data:`CUSTOM_TOOL_FRAMING` each, an estimate.
    other: int = 0


#: What a tool of another type than ``function`` (a custom tool with a grammar or free-form
#: input, ...) adds beside its definition's JSON text: no bill here confirms how the model reads
#: one, and counts of their definition alone were 11 to 18 tokens short of the bill, so each is
#: allowed this much on top, an estimate that errs high.
CUSTOM_TOOL_FRAMING = 20


def is_function_tool(tool: Any) -> bool:
    """A function tool, or a malformed one (which :func:`count_functions` names); a tool of another
    type the API accepts (``custom``, ...) is not, and is counted by its definition instead."""
    if not _is_mapping(tool):
        return True
    kind = tool.get("type", "function")
    return kind == "function" or "function" in tool


def unconfirmed_tools(section_tokens: int, other_tokens: int) -> int:
    """The part of a tool section's tokens that is an estimate: the function section unless its
    rules are in :data:`CONFIRMED`, and always the tools of other types."""
    return (0 if confirmed("tools") else section_tokens) + other_tokens


def other_tool_tokens(counter: TokenCounter, tool: Mapping[str, Any], where: str) -> int:
    """A tool of another type than ``function``: its definition's JSON text and its allowance."""
    return counter.text(to_json(tool, where, None, InvalidToolSchemaError)) + CUSTOM_TOOL_FRAMING


def _properties(fn: Mapping[str, Any]) -> Mapping[str, Any]:
    params = fn.get("parameters")
    props = params.get("properties") if _is_mapping(params) else None
    return props if _is_mapping(props) else {}


def plain_after_first(functions: Sequence[Mapping[str, Any]]) -> int:
    """How many functions :data:`PLAIN_AFTER_FIRST` applies to."""
    n = 0
    for fn in functions[1:]:
        props = _properties(fn)
        if props:
            first = next(iter(props.values()))
            if not (_is_mapping(first) and (_text(first.get("title")) or _text(first.get("description")))):
                n += 1
    return n


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def count_functions(counter: TokenCounter, tools: Sequence[Any], *, lone_titles: bool = False) -> Section:
    """The rendered section of Chat-shaped ``tools`` (see :class:`Section`; ``lone_titles``: as the
    Responses API, and Chat Completions when the section joins a system message, write a
    property's title, see :func:`_object`).

    Tool lists are static in practice, but an SDK builds its request anew every call: the count
    is kept with a private copy of the list last seen (and its JSON), so an unchanged list is
    found by one C-level comparison, whatever object holds it, and a tool changed in place
    differs. A list holding what cannot be copied (SDK objects) is found by identity instead.
    """
    if not isinstance(tools, Sequence) or isinstance(tools, (str, bytes)):
        raise InvalidToolSchemaError("tools", f"must be a list of tool objects, got {type(tools).__name__}")
    items = tuple(tools)
    state = counter.dialect_state
    slot = "openai-tools-joined" if lone_titles else "openai-tools"
    last = state.get(slot)
    if last is not None:
        copy, held = last[0], last[1]
        if copy is not None and copy == list(items):  # the copy on the left: its fields are compared
            return last[3]  # type: ignore[no-any-return]
        if copy is None and len(held) == len(items) and all(map(is_, held, items)):
            return last[3]  # type: ignore[no-any-return]
    fns = [_function(tool, f"tools[{i}]") for i, tool in enumerate(items) if is_function_tool(tool)]
    other = sum(
        other_tool_tokens(counter, tool, f"tools[{i}]")
        for i, tool in enumerate(items)
        if not is_function_tool(tool)
    )
    key = to_json(fns, "tools", None, InvalidToolSchemaError)  # a typed error for what JSON cannot say
    if last is not None and key == last[2] and other == last[3].other:
        state[slot] = (private_copy(list(items)), items, key, last[3])
        return last[3]  # type: ignore[no-any-return]
    if not fns:  # no function namespace at all
        found = Section(0, 0, True, 0, other=other)
        state[slot] = (private_copy(list(items)), items, key, found)
        return found
    try:
        text, known = render_functions(fns, lone_titles=lone_titles)
    except RecursionError:
        raise TooDeeplyNestedError("tools", "is nested too deeply to be a request") from None
    found = Section(
        counter.text(text),
        len(fns),
        known,
        commented(fns, is_reasoning_model(counter.model)),
        bare_first(fns),
        plain_after_first(fns),
        other,
    )
    state[slot] = (private_copy(list(items)), items, key, found)
    return found


#: Schema keywords the response-format section leaves out: what the API enforces while sampling
#: (the required keys, closed objects) rather than shows (measured).
_UNSHOWN_KEYWORDS = frozenset({"required", "additionalProperties", "$schema"})
#: Schema keywords whose value is a schema, or a map or a list of schemas (the rest is data, kept
#: as written).
_SUBSCHEMA = frozenset({"items", "additionalItems", "contains", "not", "if", "then", "else", "propertyNames"})
_SUBSCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_SUBSCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
#: The response-format section's framing in Chat Completions: a system message of its own (no
#: system message and no tools in the request), joined to the request's first system or developer
#: message, or joined to the tool section (measured).
FORMAT_NEW_SYSTEM = 8
FORMAT_IN_SYSTEM = 4
FORMAT_AFTER_TOOLS = 1
#: The Responses API adds the section to the prompt it builds anyway: one token of framing for the
#: chat models, none for the reasoning models (measured; the latter on one bill, so an estimate).
FORMAT_RESPONSES = 1
FORMAT_RESPONSES_REASONING = 0
#: In Chat Completions, with a ``json_schema`` format in force, each earlier answer in the
#: transcript (an assistant message that makes no call) costs more than an answer without one:
#: the model reads it as written to that format. Three tokens on the chat models (measured on
#: gpt-4o; booked with the format section, as an estimate like it). The reasoning models read an
#: answer so four tokens longer, and frame a section of its own with four tokens where the chat
#: models take eight (gpt-5.4's bills: the same format with and without an earlier answer billed
#: four apart beyond the text; no answer, one, two answers under two formats all to the token).
FORMAT_ANSWER = 3
FORMAT_ANSWER_REASONING = 4
FORMAT_NEW_SYSTEM_REASONING = 4


def _shown_schema(schema: Any, depth: int = 0) -> Any:
    """``schema`` without the keywords the model is not shown, at every level."""
    if depth > 64:
        raise RecursionError
    if not _is_mapping(schema):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _UNSHOWN_KEYWORDS:
            continue
        if key in _SUBSCHEMA:
            value = _shown_schema(value, depth + 1)
        elif key in _SUBSCHEMA_MAPS and _is_mapping(value):
            value = {k: _shown_schema(v, depth + 1) for k, v in value.items()}
        elif key in _SUBSCHEMA_LISTS and isinstance(value, Sequence) and not isinstance(value, str):
            value = [_shown_schema(v, depth + 1) for v in value]
        out[str(key)] = value
    return out


def render_output_format(name: Any, description: Any, schema: Any, *, responses: bool = False) -> str:
    """The response-format section a ``json_schema`` format writes into the prompt: its name as a
    heading, its description as a comment, and the schema as compact JSON without the keywords
    that are enforced rather than shown (``required``, ``additionalProperties``, ``$schema``).

    In Chat Completions a format without a description of its own is described by its schema's:
    the schema's top-level ``description`` becomes the comment and leaves the JSON. The Responses
    API leaves it in the JSON (``responses``; both measured, each on two projects' bills)."""
    if not responses and not (isinstance(description, str) and description) and _is_mapping(schema):
        about = schema.get("description")
        if isinstance(about, str) and about:
            description = about
            schema = {k: v for k, v in schema.items() if k != "description"}
    shown = json.dumps(_shown_schema(schema), ensure_ascii=False, separators=(",", ":"), default=str)
    about = f"// {description}\n" if isinstance(description, str) and description else ""
    return f"# Response Formats\n\n## {name if isinstance(name, str) else ''}\n\n{about}{shown}"


#: A ``tool_choice`` naming one function: the chat models are told its name, with this framing in
#: Chat Completions (the cl100k models; the o200k models two tokens more) and in the Responses API
#: (measured; the reasoning models' bills show no such cost). The o200k models' bills of three
#: projects are this or a token less (by schema): the count errs high, and is an estimate.
FORCED_FUNCTION = 5
FORCED_FUNCTION_O200K = 7
FORCED_FUNCTION_RESPONSES = 7
#: ``tool_choice: "none"`` on the chat models in Chat Completions: a token beside the tool section
#: (measured on one project's bills, three gpt-4o snapshots, one to four tools, every one a token
#: over the count without it; a reasoning model's bill shows none). An estimate that errs high.
TOOL_CHOICE_NONE = 1


def add_forced_function(
    model: RequestModel,
    tool_choice: Any,
    counter: TokenCounter,
    *,
    responses: bool = False,
    tools: Any = None,
) -> None:
    """What naming the function to call costs (``{"type": "function", ...}`` in either API), booked
    with the tool definitions, as an estimate unless :data:`CONFIRMED` says otherwise. In the
    Responses API ``"required"`` with a single tool, a function, names that function (measured:
    billed as naming it; Chat Completions bills ``"required"`` nothing whatever the tools);
    ``"none"`` in Chat Completions costs :data:`TOOL_CHOICE_NONE`."""
    if responses and tool_choice == "required" and isinstance(tools, Sequence) and len(tools) == 1:
        only = tools[0]
        if _is_mapping(only) and only.get("type") == "function":
            tool_choice = {"type": "function", "name": only.get("name")}
    if is_reasoning_model(counter.model) or not model.tool_schema:
        return
    if tool_choice == "none" and not responses:
        model.tool_schema += TOOL_CHOICE_NONE
        model.schema_inexact += TOOL_CHOICE_NONE
        return
    if not _is_mapping(tool_choice) or tool_choice.get("type") != "function":
        return
    nested = tool_choice.get("function")
    name = nested.get("name") if _is_mapping(nested) else tool_choice.get("name")
    if isinstance(name, str) and name:
        if responses:
            framing = FORCED_FUNCTION_RESPONSES
        elif counter.resolved.name == "cl100k_base":
            framing = FORCED_FUNCTION
        else:
            framing = FORCED_FUNCTION_O200K
        n = counter.text(name) + framing
        model.tool_schema += n
        if not confirmed("forced-function"):
            model.schema_inexact += n


def add_output_schema(
    model: RequestModel, format_: Any, counter: TokenCounter, *, responses: bool = False
) -> None:
    """A ``json_schema`` structured-output format (``response_format`` / ``text.format``), as the
    response-format section the API writes into the prompt (:func:`render_output_format`), booked
    with the tool definitions; ``json_object`` and ``text`` add nothing (measured). Chat
    Completions frames it by where it joins the prompt (so call this after the tools are booked).
    The reasoning models' framing is barely measured: their section is an estimate."""
    found = output_format(format_)
    if found is None:
        return
    name, description, schema = found
    try:
        text = render_output_format(name, description, schema, responses=responses)
    except (TypeError, ValueError, RecursionError):
        return
    n = counter.text(text)
    reasoning = is_reasoning_model(counter.model)
    estimate = reasoning
    if responses:
        n += FORMAT_RESPONSES_REASONING if reasoning else FORMAT_RESPONSES
    else:
        answer = FORMAT_ANSWER_REASONING if reasoning else FORMAT_ANSWER
        n += answer * sum(1 for t in model.turns if t.role == "assistant" and not t.calls)
        if model.tool_schema > 0:
            n += FORMAT_AFTER_TOOLS
        elif any(t.role == "system" for t in model.turns) or model.blocks:
            n += FORMAT_IN_SYSTEM
        else:
            n += FORMAT_NEW_SYSTEM_REASONING if reasoning else FORMAT_NEW_SYSTEM
    model.tool_schema += n
    if estimate or not confirmed("response-format"):
        model.schema_inexact += n


def output_format(format_: Any) -> tuple[Any, Any, Mapping[str, Any]] | None:
    """``(name, description, schema)`` of a ``json_schema`` response format (Chat's nests them
    under ``json_schema``, Responses' does not); None for any other format."""
    if not _is_mapping(format_) or format_.get("type") != "json_schema":
        return None
    nested = format_.get("json_schema")
    spec = nested if _is_mapping(nested) else format_
    schema = spec.get("schema")
    if not _is_mapping(schema):
        return None
    return spec.get("name"), spec.get("description"), schema
