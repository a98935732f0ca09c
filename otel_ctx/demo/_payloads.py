"""Tool results as a real support backend returns them: verbose JSON, mostly noise.

Tool results are the part of the context nobody watches: an order lookup
on an eleven-item order is about 4,200 tokens and a parcel's full scan history about
3,800, while the agent needs a handful of fields from either. The generators here
produce that shape (pretty-printed JSON with every field a backend carries) from a
seeded ``random.Random``, so the same seed gives byte-identical payloads.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from typing import Any

BASE_TIME = datetime(2026, 3, 2, 8, 0, 0)

_PRODUCTS = [
    ("Oak bookshelf, 5 shelves", "furniture", 89.0),
    ("Steel wall shelving unit 180 cm", "furniture", 129.0),
    ("Linen duvet cover 200x200", "home-textiles", 59.9),
    ("Ceramic dinner plate set (6)", "kitchen", 34.5),
    ("Cast iron skillet 28 cm", "kitchen", 42.0),
    ("Bamboo cutting board", "kitchen", 18.9),
    ("LED desk lamp with dimmer", "lighting", 39.99),
    ("Wool throw blanket, grey", "home-textiles", 64.0),
    ("Glass storage jars (set of 4)", "kitchen", 22.0),
    ("Cotton bath towels (2)", "bathroom", 27.5),
    ("Rattan laundry basket", "storage", 31.0),
    ("Stainless steel kettle 1.7 l", "kitchen", 49.0),
    ("Velvet cushion cover 45x45", "home-textiles", 14.9),
    ("Folding step stool", "furniture", 24.0),
    ("Wall clock, walnut", "decor", 45.0),
    ("Shower caddy, matte black", "bathroom", 19.5),
]
_SELLERS = ["Nordhaus Living", "Atelier Brandt", "Casa Mirante", "Woodgrain & Co", "Kessler Home"]
_CITIES = [
    ("Berlin", "BE", "DE", "10115"),
    ("Hamburg", "HH", "DE", "20095"),
    ("Leipzig", "SN", "DE", "04109"),
    ("Cologne", "NW", "DE", "50667"),
    ("Munich", "BY", "DE", "80331"),
    ("Utrecht", "UT", "NL", "3511"),
    ("Vienna", "W", "AT", "1010"),
]
_WAREHOUSES = ["FC-LEJ-2", "FC-HAM-1", "FC-MUC-3", "SELLER-DIRECT"]
_CARRIERS = ["dhl", "dpd", "gls", "ups", "hermes"]
_SCAN_STEPS = [
    ("PU", "Shipment picked up from sender"),
    ("AR", "Arrived at parcel center"),
    ("PR", "Processed at parcel center"),
    ("DP", "Departed parcel center"),
    ("IT", "In transit to destination region"),
    ("HB", "Arrived at hub"),
    ("SO", "Sorted for delivery route"),
    ("OD", "Out for delivery"),
]
_EXCEPTIONS = [
    ("AN", "Delivery attempt failed: address not found"),
    ("NA", "Recipient not at home; notification card left"),
    ("DL", "Delay in transit due to high volumes"),
    ("DM", "Packaging damaged in transit; parcel re-taped at hub"),
]


def order_id(rng: random.Random) -> str:
    return f"SO-{rng.randint(1000, 9999)}-{rng.randint(1000, 9999)}"


def tracking_number(rng: random.Random) -> str:
    return f"{rng.randint(10**11, 10**12 - 1)}"


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S+01:00")


def _dump(payload: dict[str, Any]) -> str:
    # Pretty-printed with every field: what a thin tool wrapper passes through.
    return json.dumps(payload, indent=2, ensure_ascii=False)


def get_order(rng: random.Random, oid: str, *, items: int, customer_id: str, tracking: str) -> str:
    """An order lookup; about 4,200 tokens at eleven items."""
    placed = BASE_TIME - timedelta(days=rng.randint(3, 20), minutes=rng.randint(0, 600))
    city, region, country, postcode = rng.choice(_CITIES)
    lines = []
    subtotal = 0.0
    for n in range(items):
        title, category, price = rng.choice(_PRODUCTS)
        qty = rng.choice((1, 1, 1, 2, 3))
        subtotal += price * qty
        sku = f"SKU-{rng.randint(100000, 999999)}"
        promised = placed + timedelta(days=rng.randint(2, 6))
        lines.append(
            {
                "line_id": f"{oid}-L{n + 1:02d}",
                "sku": sku,
                "image_url": f"https://cdn.sundry.example/p/{sku.lower()}/main.jpg",
                "title": title,
                "category": category,
                "variant": {"color": rng.choice(["natural", "white", "black", "grey"])},
                "quantity": qty,
                "unit_price": {"amount": price, "currency": "EUR"},
                "tax": {"rate": 0.19, "amount": round(price * qty * 0.19 / 1.19, 2), "included": True},
                "discounts": [],
                "seller": {"id": f"SEL-{rng.randint(1000, 9999)}", "name": rng.choice(_SELLERS)},
                "fulfilment": {
                    "status": rng.choice(["shipped", "shipped", "delivered"]),
                    "warehouse": rng.choice(_WAREHOUSES),
                    "shipment_id": f"SH-{rng.randint(100000, 999999)}",
                    "packed_at": _ts(placed + timedelta(hours=rng.randint(4, 30))),
                },
                "delivery_promise": {
                    "earliest": _ts(promised),
                    "latest": _ts(promised + timedelta(days=2)),
                },
                "return_policy": {"returnable": True, "window_days": 30, "free_return": rng.random() < 0.3},
                "dimensions_cm": [rng.randint(10, 180), rng.randint(10, 60), rng.randint(2, 40)],
                "weight_kg": round(rng.uniform(0.2, 24.0), 2),
            }
        )
    shipping = 4.95 if subtotal < 50 else 0.0
    payload = {
        "order_id": oid,
        "status": "partially_delivered" if items > 3 else "shipped",
        "placed_at": _ts(placed),
        "channel": rng.choice(["web", "ios", "android"]),
        "customer": {"customer_id": customer_id, "email_masked": "j***@example.org", "segment": "returning"},
        "shipping_address": {"city": city, "region": region, "postcode": postcode, "country": country},
        "shipment": {"carrier": rng.choice(_CARRIERS), "tracking_number": tracking, "service": "standard"},
        "lines": lines,
        "payment": {
            "method": rng.choice(["card", "paypal", "klarna"]),
            "captured": True,
            "transaction_id": f"TX-{rng.randint(10**9, 10**10 - 1)}",
        },
        "totals": {
            "subtotal": round(subtotal, 2),
            "shipping": shipping,
            "total": round(subtotal + shipping, 2),
            "currency": "EUR",
        },
        "flags": {"fraud_review": False, "gift": False, "marketplace_guarantee": True},
    }
    return _dump(payload)


def track_parcel(rng: random.Random, tracking: str, *, scans: int, delivered: bool) -> str:
    """A carrier's full scan history; about 3,800 tokens at forty-odd scans."""
    t = BASE_TIME - timedelta(days=rng.randint(2, 9))
    history: list[dict[str, Any]] = []
    last_city = ""
    for n in range(scans):
        t += timedelta(minutes=rng.randint(20, 600))
        city, _, country, postcode = rng.choice(_CITIES)
        last_city = city
        if n and rng.random() < 0.12:
            code, text = rng.choice(_EXCEPTIONS)
        else:
            code, text = _SCAN_STEPS[min(n * len(_SCAN_STEPS) // max(scans, 1), len(_SCAN_STEPS) - 1)]
        history.append(
            {
                "timestamp": _ts(t),
                "status_code": code,
                "description": text,
                "location": {
                    "facility": f"{city.upper()[:3]}-{rng.randint(1, 9)}",
                    "city": city,
                    "postcode": postcode,
                    "country": country,
                },
            }
        )
    if delivered:
        history.append(
            {
                "timestamp": _ts(t + timedelta(hours=3)),
                "status_code": "DD",
                "description": "Delivered; signed by recipient",
                "location": {"facility": "ROUTE", "city": last_city},
            }
        )
    payload = {
        "tracking_number": tracking,
        "status": "delivered" if delivered else "in_transit",
        "estimated_delivery": _ts(t + timedelta(days=1)),
        "service": "parcel-standard",
        "weight_kg": round(rng.uniform(0.5, 30.0), 1),
        "scan_history": history,
    }
    return _dump(payload)


def get_customer(rng: random.Random, customer_id: str) -> str:
    city, _, country, _ = rng.choice(_CITIES)
    payload = {
        "customer_id": customer_id,
        "since": f"20{rng.randint(18, 25)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
        "email_masked": "j***@example.org",
        "city": city,
        "country": country,
        "orders_total": rng.randint(1, 80),
        "refunds_last_90_days": rng.choice((0, 0, 0, 1, 2, 3)),
        "open_tickets": rng.randint(0, 2),
        "contact_preference": rng.choice(["chat", "email"]),
        "language": rng.choice(["de", "en", "nl"]),
        "flags": {"vip": rng.random() < 0.1, "chargeback_history": rng.random() < 0.05},
    }
    return _dump(payload)


def check_return_eligibility(rng: random.Random, oid: str, line: int, reason: str) -> str:
    eligible = reason != "changed_mind" or rng.random() < 0.85
    payload = {
        "order_id": oid,
        "line_id": f"{oid}-L{line:02d}",
        "reason": reason,
        "eligible": eligible,
        "return_by": _ts(BASE_TIME + timedelta(days=rng.randint(3, 28))),
        "buyer_pays_shipping": reason == "changed_mind",
        "refund_estimate": {"amount": round(rng.uniform(15, 140), 2), "currency": "EUR"},
        "policy_reference": "RP-2025-03 section 2" if reason == "changed_mind" else "RP-2025-03 section 3",
    }
    return _dump(payload)


def create_return_label(rng: random.Random, oid: str) -> str:
    payload = {
        "order_id": oid,
        "label_id": f"RL-{rng.randint(100000, 999999)}",
        "carrier": rng.choice(_CARRIERS),
        "tracking_number": tracking_number(rng),
        "emailed_to_buyer": True,
        "drop_off_by": _ts(BASE_TIME + timedelta(days=14)),
    }
    return _dump(payload)


def issue_refund(rng: random.Random, oid: str, amount: float) -> str:
    payload = {
        "order_id": oid,
        "refund_id": f"RF-{rng.randint(100000, 999999)}",
        "amount": {"amount": round(amount, 2), "currency": "EUR"},
        "status": "accepted",
        "expected_on_statement": "3-5 business days",
    }
    return _dump(payload)


def get_seller_messages(rng: random.Random, oid: str, *, messages: int) -> str:
    """The buyer–seller thread on one order, as the marketplace stores it."""
    lines = [
        "The item was packed carefully and left our warehouse undamaged.",
        "Could you send photos of the outer box and of the damage, please?",
        "I attached four photos: the box is crushed at one corner and the side panel is cracked.",
        "We offer a 20% partial refund if you keep the item.",
        "I do not want a partial refund; the shelf cannot be assembled like this.",
        "The carrier's scan shows the parcel was damaged in transit, so we will file a claim.",
        "Please wait for the carrier's assessment before we decide.",
        "It has been a week and nobody has contacted me about the claim.",
        "We have not heard back from the carrier yet and cannot refund before they answer.",
    ]
    thread = []
    t = BASE_TIME - timedelta(days=6)
    for n in range(messages):
        t += timedelta(hours=rng.randint(2, 30))
        thread.append(
            {
                "message_id": f"MSG-{rng.randint(10**6, 10**7 - 1)}",
                "sent_at": _ts(t),
                "from": "buyer" if n % 2 == 0 else "seller",
                "text": " ".join(rng.sample(lines, k=rng.randint(1, 3))),
                "attachments": [f"photo_{m}.jpg" for m in range(rng.randint(0, 2))] if n % 2 == 0 else [],
            }
        )
    return _dump({"order_id": oid, "thread": thread})


def escalate_to_human(rng: random.Random) -> str:
    return _dump(
        {"queue": "disputes-tier2", "ticket_ref": f"ESC-{rng.randint(10000, 99999)}", "eta_hours": 24}
    )
