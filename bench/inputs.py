"""The benchmark input: 100 support-desk messages of about 340 tokens, fitted to 8,000.

Text-only user/assistant messages so that otel-ctx, the naive re-counting loop and
LangChain's ``trim_messages`` all work on exactly the same list. Each message is
distinct (no count can be reused across messages), built from a fixed vocabulary with
a seeded RNG and trimmed to its token target with the real encoder.
"""

from __future__ import annotations

import random
from typing import Any

import tiktoken

from otel_ctx import BudgetPolicy

MESSAGES = 100
TOKENS_PER_MESSAGE = 340
REQUEST_LIMIT = 8_000
RESERVE = 800
POLICY = BudgetPolicy(context_length=128_000, reserved_output=RESERVE, request_limit=REQUEST_LIMIT)
ENCODING = "cl100k_base"
MODEL = "gpt-4o"

_VOCABULARY = (
    "order parcel refund return carrier scan delivered damaged seller buyer shelf box label tracking "
    "invoice warehouse driver address neighbour signature photo claim dispute policy days week window "
    "shipping amount euro partial full cracked panel corner packaging courier hub route status update "
    "today tomorrow yesterday morning evening please thanks sorry understand check confirm escalate "
    "support ticket agent account email phone number item line quantity price total discount voucher "
    "missing late early exchange replacement colour size wrong broken unused opened sealed receipt "
)
_WORDS = _VOCABULARY.split()


def encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING + "_offline")


def _text(rng: random.Random, enc: tiktoken.Encoding, tokens: int, tag: str) -> str:
    words: list[str] = [tag]
    chars = 0
    while True:
        # About five characters a token here: overshoot, then cut at the exact token count.
        while chars < tokens * 6:
            sentence = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 16)))
            words.append(sentence.capitalize() + rng.choice(".?!") + f" {rng.randint(10, 99999)}")
            chars += len(words[-1]) + 1
        ids = enc.encode_ordinary(" ".join(words))
        if len(ids) >= tokens:
            return enc.decode(ids[:tokens])
        chars = 0


def conversation(seed: int = 1, n: int = MESSAGES, tokens: int = TOKENS_PER_MESSAGE) -> list[dict[str, Any]]:
    """The ticket (user) then alternating assistant/user messages."""
    rng = random.Random(seed)
    enc = encoding()
    out = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        out.append({"role": role, "content": _text(rng, enc, tokens, f"[{seed}.{i}]")})
    return out


#: A short new message of an agent's round ("Checking the carrier now."): 40–60 tokens.
SHORT_TOKENS = (40, 60)


def new_pairs(count: int, seed: int = 2, *, short: bool = False) -> list[list[dict[str, Any]]]:
    """``count`` distinct (assistant, user) pairs: the two messages a warm round adds.

    Long pairs are as long as the transcript's messages; short ones 40–60 tokens each,
    where the per-message bookkeeping of the already-seen messages shows most.
    """
    rng = random.Random(seed)
    enc = encoding()

    def size() -> int:
        return rng.randint(*SHORT_TOKENS) if short else TOKENS_PER_MESSAGE

    return [
        [
            {"role": "assistant", "content": _text(rng, enc, size(), f"[a{seed}.{k}]")},
            {"role": "user", "content": _text(rng, enc, size(), f"[u{seed}.{k}]")},
        ]
        for k in range(count)
    ]


def responses_body(conv: list[dict[str, Any]]) -> dict[str, Any]:
    """The same conversation as an OpenAI Responses request (``input`` items)."""
    items: list[dict[str, Any]] = []
    for m in conv:
        if m["role"] == "assistant":
            part = {"type": "output_text", "text": m["content"], "annotations": []}
            items.append({"type": "message", "role": "assistant", "content": [part]})
        else:
            items.append({"role": m["role"], "content": [{"type": "input_text", "text": m["content"]}]})
    return {"model": MODEL, "input": items}


def huge_tool_result(scans: int = 30_000) -> str:
    """A runaway tool result: a carrier's scan history of about 2 MB of JSON."""
    rng = random.Random(11)
    rows = [
        f'{{"scan": {i}, "hub": "{rng.choice(_WORDS)}", "event": "{rng.choice(_WORDS)}", '
        f'"at": "2026-10-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z"}}'
        for i in range(scans)
    ]
    return '{"parcel": "JJD0099887766", "scans": [' + ", ".join(rows) + "]}"


def tool_definitions() -> list[dict[str, Any]]:
    """Eight function tools of a support agent: descriptions, enums, optional fields, a nested
    object and an array of objects, the schema shapes agent frameworks send."""
    address = {
        "type": "object",
        "description": "Where the parcel goes.",
        "properties": {"street": {"type": "string"}, "city": {"type": "string"}, "zip": {"type": "string"}},
        "required": ["street", "city"],
    }
    line = {
        "type": "object",
        "properties": {
            "sku": {"type": "string", "description": "Stock keeping unit."},
            "qty": {"type": "integer"},
        },
        "required": ["sku"],
    }
    tools = []
    for k, name in enumerate(
        (
            "get_order",
            "track_parcel",
            "refund",
            "replace_item",
            "update_address",
            "open_case",
            "note",
            "escalate",
        )
    ):
        props: dict[str, Any] = {
            "order_id": {"type": "string", "description": "The order number, e.g. 88-1042."},
            "reason": {"type": "string", "enum": ["damaged", "late", "wrong_item", "other"]},
            "notify": {"type": "boolean", "default": True},
        }
        if k % 2:
            props["address"] = address
        else:
            props["items"] = {"type": "array", "items": line, "description": "The lines concerned."}
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": f"{name.replace('_', ' ').capitalize()} for the buyer's order.",
                    "parameters": {"type": "object", "properties": props, "required": ["order_id"]},
                },
            }
        )
    return tools


def tool_transcript(seed: int = 4, calls: int = 50) -> list[dict[str, Any]]:
    """The ticket, then ``calls`` rounds of a tool call and its ~300-token result (101 messages)."""
    rng = random.Random(seed)
    enc = encoding()
    out: list[dict[str, Any]] = [{"role": "user", "content": _text(rng, enc, 120, f"[t{seed}]")}]
    for k in range(calls):
        out += _tool_round(rng, enc, f"call_{seed}_{k}", k, f"[r{seed}.{k}]")
    return out


def tool_rounds(count: int, seed: int, start: int = 1_000) -> list[list[dict[str, Any]]]:
    """``count`` distinct next rounds of :func:`tool_transcript`: a new tool call and its ~300-token
    result each, with call ids no transcript uses (from ``start`` on)."""
    rng = random.Random(seed)
    enc = encoding()
    return [
        _tool_round(rng, enc, f"call_{seed}_{k}", k, f"[n{seed}.{k}]") for k in range(start, start + count)
    ]


def _tool_round(
    rng: random.Random, enc: tiktoken.Encoding, call_id: str, k: int, tag: str
) -> list[dict[str, Any]]:
    arguments = f'{{"order_id": "88-{k:04d}", "reason": "damaged"}}'
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "get_order", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": _text(rng, enc, 300, tag)},
    ]
