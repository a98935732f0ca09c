"""What each model family Bedrock serves adds to the billed input, beyond its text: data only.

Bedrock turns a Converse body into the model's own prompt: Claude gets an Anthropic Messages
body (counted by the Anthropic accounting, see :mod:`otel_ctx.adapters._bedrock_converse`);
every other model gets its chat template (Llama 3's headers and date block, ChatML for Qwen,
the harmony header for gpt-oss, Nova's and Mistral's own markers) with the tool definitions
rendered into it. Those templates are framing the bill shows and the body does not: a fixed
part per request, a part per message, a tool-use prompt when tools are given, a wrapper per
tool call and per result. The figures here are the templates' own where they are published
(Llama 3, ChatML, harmony) and otherwise measured from the bills of Converse requests (Nova,
Mistral, Llama 4); every count they make is an estimate (``exact=False``), since Bedrock
publishes no tokenizer for Nova and the open-weight vocabularies are optional extras.

A family is one row of :data:`RULES`: the model-name prefixes it answers to (as
:func:`otel_ctx._families.model_key` reduces a Bedrock id) and its :class:`Framing`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from otel_ctx._families import model_key


@dataclass(frozen=True, slots=True)
class Framing:
    """The tokens a family's prompt template adds, for a Converse (or InvokeModel) body.

    ``request`` is paid once (begin-of-text, the reply's opening header, a fixed system
    header); ``message`` per message, except the first when ``first_message`` says otherwise;
    ``system`` what a system prompt adds beside its text (its own header, a fixed preamble);
    ``tool_prompt`` once when tools are given, ``tool`` per definition beside its JSON; ``call``
    and ``result`` wrap each tool call and result beside their text. Images cost
    ``image_base`` plus one token per ``image_patch``-pixel square (``image_rows`` adds one per
    row of patches: the row breaks of a patch grid), or a flat ``image_flat`` when set.
    A PDF page seen as an image costs ``pdf_page`` (0: the model is given its text only), and
    its text is billed too unless ``pdf_text`` is False.
    ``drops_reasoning``: the template strips the reasoning of earlier assistant turns
    (``reasoningContent`` blocks and ``<think>`` sections), so they are not billed.
    ``prompt`` is what an InvokeModel prompt body adds (the caller templated it already).
    A document is billed as ``document`` plus its name (when ``document_name``) and text.
    """

    name: str
    request: int = 3
    message: int = 4
    first_message: int | None = None
    system: int = 4
    tool_prompt: int = 10
    tool: int = 4
    call: int = 6
    result: int = 6
    image_patch: int = 16
    image_rows: bool = True
    image_base: int = 4
    image_flat: int = 0
    pdf_page: int = 0
    pdf_text: bool = True
    #: A document's framing beside its text, and whether its ``name`` is billed with it.
    document: int = 4
    document_name: bool = True
    drops_reasoning: bool = False
    #: What the template adds when the request does not turn reasoning on (Qwen 3's empty
    #: ``<think></think>`` block, which its hosts send unless asked to reason).
    reasoning_off: int = 0
    prompt: int = 1


#: A family no row names: a generic chat template (errs a little high on short prompts).
DEFAULT = Framing("bedrock-other")

#: Nova 1: no begin-of-text or header is billed for a lone message or a system prompt; each
#: later message adds its role markers. Tool use adds a fixed instruction block beside the
#: definitions' JSON; an image is billed at a fixed tile grid (its size does not change the bill), a PDF's
#: pages as images (their text is not billed again: a PDF of 3 and one of 900 text tokens
#: cost the same for a page).
_NOVA = Framing(
    "nova",
    request=0,
    document=0,
    document_name=False,
    message=3,
    first_message=0,
    system=0,
    tool_prompt=360,
    tool=0,
    call=14,
    result=14,
    image_flat=1_800,
    pdf_page=2_600,
    pdf_text=False,
)

#: Model-key prefix -> framing; the longest matching prefix wins.
RULES: dict[str, Framing] = {
    "nova-": _NOVA,
    # Nova 2: Nova 1's message framing, a longer tool-use prompt (reasoning models), and images
    # billed by their area.
    "nova-2": replace(
        _NOVA,
        name="nova-2",
        tool_prompt=820,
        call=4,
        result=4,
        image_patch=28,
        image_rows=False,
        image_base=70,
        image_flat=0,
    ),
    # Titan Text: the prompt as sent, with a short "User:/Bot:" framing per message.
    "titan-": Framing("titan", request=1, message=2, first_message=0, tool_prompt=0, prompt=1),
    # Llama 3.x: <|begin_of_text|>, each message's header and <|eot_id|>, the reply's header,
    # and the system block's "Cutting Knowledge Date / Today Date" lines (3.1 and later).
    "llama3": Framing("llama3", request=5, message=5, system=25, tool_prompt=120, prompt=0),
    "llama-3": Framing("llama3", request=5, message=5, system=25, tool_prompt=120, prompt=0),
    # Llama 4: its own header tokens; tools are listed in a system preamble.
    "llama4": Framing("llama4", request=10, message=5, tool_prompt=72, call=24, result=24, prompt=0),
    "llama-4": Framing("llama4", request=10, message=5, tool_prompt=72, call=24, result=24, prompt=0),
    # Llama 2 [INST] prompts come templated by the caller.
    "llama2": Framing("llama2", request=1, message=4, prompt=1),
    # Mistral / Pixtral: [INST] markers, [AVAILABLE_TOOLS] JSON, 16-pixel image patches with a
    # break per row.
    "mistral": Framing("mistral", request=1, message=2, tool_prompt=12, call=8, result=8),
    "pixtral": Framing("mistral", request=1, message=2, tool_prompt=12, call=8, result=8),
    # ChatML (Qwen): <|im_start|>role\n ... <|im_end|>\n per message, the reply's opening, and the
    # empty thinking block unless the request turns reasoning on (``reasoning_config``).
    "qwen": Framing("qwen", request=3, message=5, tool_prompt=120, drops_reasoning=True, reasoning_off=4),
    # DeepSeek R1: begin-of-sentence, the user and assistant markers, the opening <think>.
    "r1": Framing("deepseek", request=5, message=1, drops_reasoning=True),
    "deepseek": Framing("deepseek", request=5, message=1, drops_reasoning=True),
    # gpt-oss: the host's harmony system header (identity, knowledge cutoff, date, reasoning
    # effort, channels) before the messages.
    "gpt-oss": Framing("gpt-oss", request=66, message=4, tool_prompt=60, drops_reasoning=True),
    # Gemma: <start_of_turn>/<end_of_turn> per message, begin-of-text, the model's opening.
    "gemma": Framing("gemma", request=6, message=4),
}
_ORDER = sorted(RULES, key=len, reverse=True)


def framing(model: str) -> Framing:
    """The framing of ``model`` (a Bedrock id, an ARN, a bare name): the longest prefix's row."""
    key = model_key(model)
    vendor, dot, rest = key.partition(".")
    if dot and vendor.isalpha():
        key = rest  # a vendor the family table does not strip (``google.``, ``moonshot.``)
    for prefix in _ORDER:
        if key.startswith(prefix):
            return RULES[prefix]
    return DEFAULT


def image_tokens(rule: Framing, size: tuple[int, int] | None) -> int:
    """An image as the family bills it (``size`` unknown: a 1024-pixel square, erring high)."""
    if rule.image_flat:
        return rule.image_flat
    width, height = size if size is not None else (1024, 1024)
    patch = rule.image_patch
    cols, rows = -(-width // patch), -(-height // patch)
    return rule.image_base + cols * rows + (rows if rule.image_rows else 0)
