"""Builders for chat-completions conversations used across the engine tests."""

from __future__ import annotations

import json
from typing import Any

Message = dict[str, Any]

ORIGINAL_TICKET = (
    "Hi, I ordered the five-tier oak shelving unit (order 88-1042) and it arrived cracked "
    "down the left upright. The box was crushed on one corner. I want a replacement or a refund."
)


def user(text: str) -> Message:
    return {"role": "user", "content": text}


def assistant(text: str) -> Message:
    return {"role": "assistant", "content": text}


def tool_round(call_id: str, name: str, args: dict[str, Any], result: str) -> list[Message]:
    """An assistant message making one tool call, and its result."""
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


def order_payload(items: int = 11) -> str:
    """A get_order response: an order with many line items (≈380 tokens per item)."""
    lines = []
    for i in range(items):
        lines.append(
            {
                "sku": f"SKU-{1000 + i}",
                "title": f"Five-tier oak shelving unit, variant {i}, natural finish, flat-packed",
                "quantity": 1 + i % 3,
                "unit_price": {"amount": 129.99 + i, "currency": "EUR"},
                "warehouse": {"id": f"WH-{i % 4}", "city": "Leipzig", "bin": f"A{i:02d}-{i * 7 % 13:02d}"},
                "fulfilment": [
                    {"status": s, "at": f"2026-10-{10 + k:02d}T0{k}:15:00Z", "by": f"agent-{i}{k}"}
                    for k, s in enumerate(["received", "picked", "packed", "handed_over", "in_transit"])
                ],
                "attributes": {
                    "weight_kg": 31.5 + i,
                    "dimensions_cm": [180, 90, 35],
                    "fragile": True,
                    "assembly_required": True,
                    "notes": "Handle with care; ship upright; do not stack more than two.",
                },
            }
        )
    return json.dumps({"order_id": "88-1042", "customer": "C-5512", "items": lines}, indent=1)


def scan_payload(scans: int = 78) -> str:
    """A track_parcel response carrying the carrier's entire scan history."""
    history = [
        {
            "event": ["arrived at hub", "departed hub", "sorted", "out for delivery", "exception"][k % 5],
            "location": ["Leipzig", "Halle", "Kassel", "Dortmund", "Essen"][k % 5],
            "timestamp": f"2026-10-{1 + k % 28:02d}T{k % 24:02d}:{k % 60:02d}:00Z",
            "scanner": f"SC-{k * 37 % 1000:03d}",
        }
        for k in range(scans)
    ]
    return json.dumps({"parcel": "JJD0099887766", "carrier": "DHL", "scans": history}, indent=1)


def long_dispute(turns: int = 20, filler_words: int = 60) -> list[Message]:
    """A damage-claim dispute: the original ticket, then many rounds about the parcel."""
    msgs: list[Message] = [
        {"role": "system", "content": "You are Sundry's support agent."},
        user(ORIGINAL_TICKET),
    ]
    for t in range(turns):
        msgs += tool_round(
            f"call_{t}",
            "track_parcel",
            {"parcel": "JJD0099887766", "page": t},
            f"scan page {t}: " + " ".join(f"hub{t}-{k}" for k in range(filler_words)),
        )
        msgs.append(assistant(f"Round {t}: the parcel was scanned at hub {t}; checking delivery timing."))
        msgs.append(user(f"Follow-up {t}: when exactly was it delivered? " + "please " * 10))
    return msgs
