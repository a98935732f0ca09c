"""The support desk's fixed context: its system prompt, tool schemas, snippets and skills.

Sized like a real support agent's: a system prompt of about 420 tokens and tool schemas of
about 680 tokens, the 1,100 "fixed" tokens every request pays before any history.
``tests/demo/test_workload.py`` checks the sizes with the real counter, so editing the text
here cannot silently move the demo away from those sizes, which the budgets are set for.
"""

from __future__ import annotations

from typing import Any

from otel_ctx.engine._sources import Source

SYSTEM_PROMPT = """\
You are Sundry's customer support agent. Sundry is an online marketplace: buyers order from \
independent sellers, Sundry takes the payment and arranges delivery. \
You answer buyers by chat. Every ticket has been triaged before it reaches you as an order status \
question, a return or refund request, or a dispute between a buyer and a seller.

How to work:
1. Read the buyer's original message carefully and restate the problem to yourself before acting. \
The original ticket is the source of truth; do not drift to a different question later in the chat.
2. Look things up before you answer. Use get_order for items, prices and fulfilment, track_parcel for \
carrier scans, get_customer for the buyer's history, and the policy tools before promising anything.
3. Never invent an order number, a tracking number, a date, a price or a policy. If a tool does not \
return it, you do not know it; say so and say what you will do to find out.
4. Keep answers short: two to five sentences, then the next step. No marketing language.

Money and refunds:
- You may issue a refund up to the order total only when the return policy or the dispute outcome \
allows it, and only with issue_refund. Partial refunds need a reason code.
- Never refund shipping on a change-of-mind return unless the item arrived damaged or late.
- If a refund would exceed 500 EUR, or the buyer has had three refunds in 90 days, escalate instead.

Disputes:
- Stay neutral between buyer and seller. Summarise each side's evidence in the structured state.
- Photos and carrier scans outrank statements. A parcel scanned as delivered with a signature is \
delivered unless the buyer reports theft and the carrier opens an investigation.
- Escalate to a human with escalate_to_human when the buyer threatens legal action, when the seller \
does not answer within 48 hours, or when you cannot resolve the case within policy.

Privacy: never repeat a full address, phone number or payment card back to the buyer. Confirm \
identity with the order number and the email on the account only."""


def _function(
    name: str, description: str, properties: dict[str, Any], optional: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A tool schema; every property but the ``optional`` ones is required."""
    required = [p for p in properties if p not in optional]
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


_ORDER_ID = {"type": "string", "description": "Sundry order number, e.g. SO-4829-1177."}

TOOLS: list[dict[str, Any]] = [
    _function(
        "get_order",
        "Look up an order: items, quantities, prices, seller, payment and fulfilment status.",
        {"order_id": _ORDER_ID},
    ),
    _function(
        "track_parcel",
        "Carrier tracking for a parcel: current status, estimated delivery and the full scan history.",
        {
            "tracking_number": {"type": "string", "description": "Carrier tracking number."},
            "carrier": {
                "type": "string",
                "enum": ["dhl", "dpd", "gls", "ups", "hermes", "postnl"],
                "description": "Carrier code from the order's shipment.",
            },
        },
    ),
    _function(
        "get_customer",
        "The buyer's account: contact preferences, order count, refunds in the last 90 days, open tickets.",
        {"customer_id": {"type": "string", "description": "Customer id from the order."}},
    ),
    _function(
        "check_return_eligibility",
        "Whether an order line can be returned, until when, and what the buyer pays for it.",
        {
            "order_id": _ORDER_ID,
            "line_id": {"type": "string", "description": "Order line id from get_order."},
            "reason": {
                "type": "string",
                "enum": ["changed_mind", "damaged", "wrong_item", "not_as_described", "late"],
            },
        },
    ),
    _function(
        "create_return_label",
        "Create a prepaid return label for order lines and email it to the buyer.",
        {
            "order_id": _ORDER_ID,
            "line_ids": {"type": "array", "items": {"type": "string"}, "description": "Lines to return."},
        },
    ),
    _function(
        "issue_refund",
        "Refund an order, fully or in part, to the original payment method.",
        {
            "order_id": _ORDER_ID,
            "amount": {"type": "number", "description": "Amount in the order's currency."},
            "reason_code": {
                "type": "string",
                "enum": [
                    "return_received",
                    "damaged",
                    "not_delivered",
                    "late",
                    "goodwill",
                    "dispute_outcome",
                ],
            },
            "note": {"type": "string", "description": "Internal note for the finance team."},
        },
        optional=("note",),
    ),
    _function(
        "get_seller_messages",
        "Messages between the buyer, the seller and Sundry about one order, oldest first.",
        {"order_id": _ORDER_ID},
    ),
    _function(
        "send_message_to_seller",
        "Write to the seller on the order's thread; the buyer does not see it. Use for evidence requests.",
        {
            "order_id": _ORDER_ID,
            "message": {"type": "string", "description": "Plain text, no buyer personal data."},
            "reply_within_hours": {"type": "integer", "description": "Deadline the seller is given, 24-72."},
        },
        optional=("reply_within_hours",),
    ),
    _function(
        "escalate_to_human",
        "Hand the ticket to a human agent with a summary of the work so far.",
        {
            "summary": {"type": "string", "description": "What happened and what is still open."},
            "priority": {"type": "string", "enum": ["normal", "high", "urgent"]},
        },
    ),
]

#: Injected on return and dispute tickets: the policy the agent must quote from.
REFUND_POLICY_SKILL = Source(
    name="refund-policy",
    data_class="internal",
    text="""\
Skill: refund policy (internal, do not paste to buyers verbatim).
- Change of mind: 30 days from delivery, unused, original packaging. Buyer pays return shipping \
(4.95 EUR deducted from the refund) unless the seller offers free returns.
- Damaged, wrong item, not as described: 60 days. Sundry pays return shipping. Full refund \
including original shipping once the carrier scans the return, or immediately when the item is \
worth less than 25 EUR and the buyer sends a photo.
- Late delivery: more than 5 working days after the promised date refunds shipping as goodwill; \
more than 15 working days the buyer may cancel for a full refund if the parcel is not yet delivered.
- Not delivered: wait for the carrier investigation (up to 8 working days) unless the parcel has had \
no scan for 10 days, then refund in full and claim from the carrier.
- Reason codes: return_received, damaged, not_delivered, late, goodwill, dispute_outcome.""",
)

#: Injected on disputes: how the agent weighs a carrier's evidence.
CARRIER_CLAIMS_SKILL = Source(
    name="carrier-claims",
    data_class="internal",
    text="""\
Skill: carrier claims.
- A claim needs the tracking number, the last scan, photos of the outer packaging and of the damage.
- Damage claims must be opened within 7 days of delivery for DHL and DPD, 14 days for GLS and UPS.
- A signature scan proves delivery to the address, not to the buyer; ask whether a neighbour signed.
- Repeated 'address not found' scans followed by return-to-sender mean the carrier failed, not the buyer.""",
)

#: Composed into the system prompt on disputes: buyers' personal data is in play.
PII_HANDLING_SNIPPET = Source(
    name="pii-handling",
    data_class="confidential",
    text="""\
Personal data: this ticket may contain addresses, phone numbers and photos of people's homes. \
Refer to addresses by city only, never quote phone numbers, and do not forward the buyer's details \
to the seller; the seller sees only the order number and the claim.""",
)

#: Composed into the system prompt on every return: the tone the returns team agreed on.
RETURNS_TONE_SNIPPET = Source(
    name="returns-tone",
    data_class="public",
    text="""\
Returns tone: confirm what the buyer will get back and when, in one sentence, before any condition.""",
)

SOURCES_BY_TASK: dict[str, tuple[tuple[Source, ...], tuple[Source, ...]]] = {
    # task type -> (snippets, skills)
    "status": ((), ()),
    "returns": ((RETURNS_TONE_SNIPPET,), (REFUND_POLICY_SKILL,)),
    "dispute": ((PII_HANDLING_SNIPPET,), (REFUND_POLICY_SKILL, CARRIER_CLAIMS_SKILL)),
}


# --- the tickets' wording: what buyers, sellers and the agent say -------------------------

STATUS_OPENINGS: tuple[str, ...] = (
    "Hi, I ordered {item} on {day} (order {oid}) and it still hasn't arrived. The confirmation said "
    "three to five days. Can you tell me where it is? I need it before the weekend.",
    "Hello! Where is my order {oid}? Tracking hasn't changed for two days and I'm a bit worried it got "
    "lost. It's the {item}.",
    "Order {oid}: the app says 'shipped' since {day} but nothing else. Is it stuck somewhere? Thanks.",
    "Can you check order {oid} for me? It was supposed to come yesterday. I was home all day and no "
    "one rang. Did the driver even try? It's {item}, quite big, so I don't want it left outside.",
)
RETURN_OPENINGS: tuple[str, ...] = (
    "Hi, I'd like to return the {item} from order {oid}. It looks nothing like the photos: the colour "
    "is much darker and the finish feels cheap. How do I send it back and will I get a full refund?",
    "Hello, order {oid} arrived today but the {item} is the wrong size. I ordered the standard one. "
    "Can I exchange it, or return it and reorder? I'd rather not pay for shipping twice.",
    "I changed my mind about the {item} (order {oid}), it's unused and still in the box. What's the "
    "return process? I bought it on {day}.",
    "The {item} in order {oid} arrived late, a week after the promised date, and I already bought "
    "another one locally. I want to return it and get my money back, including shipping.",
)
DISPUTE_OPENINGS: tuple[str, ...] = (
    "I need help with order {oid}. The {item} arrived on {day} with the box crushed and the side panel "
    "cracked right through. I sent the seller photos the same day. The seller first said it was "
    "packed perfectly, then offered 20% off if I keep it. I don't want a broken shelf at 80% of the "
    "price; it cannot even be assembled safely. I want a full refund and for someone to collect it. "
    "I have photos of the outer box, the inner packaging and the crack. The delivery driver left it "
    "at the door without ringing, and the tracking says it was signed for, which it wasn't.",
    "The tracking for order {oid} says delivered and signed, but I never received the {item}. "
    "Nobody in my building signed for anything that day, I asked all my neighbours. The seller says "
    "it's not their problem because the carrier confirmed delivery. I paid {amount} EUR and I'm "
    "being told to just accept it. I want my money back or the item, and I want the carrier to "
    "show me who signed.",
)
THREAD_LINES: tuple[str, ...] = (
    "Thank you for your message. We have checked with our warehouse and the item left in perfect condition.",
    "As you can see in the photos I attached, the corner of the box is completely crushed.",
    "Our packaging is tested for parcel transport and we have not had complaints about this product before.",
    "I am not asking about your other customers, I am asking about my order, which arrived broken.",
    "We can offer a partial refund of 20% as a gesture of goodwill if you keep the item.",
    "A partial refund does not help, the side panel is split and the shelf is not safe to assemble.",
    "Please contact the carrier directly, the damage must have happened in transit.",
    "I did contact the carrier, they told me the sender has to open the claim, not the recipient.",
    "We will open a claim, but we cannot refund before the carrier has assessed the damage.",
    "It has now been nine days. Nobody from the carrier has come to look at the parcel.",
    "The marketplace guarantee says I am covered if the item arrives damaged. Why is this taking so long?",
    "We understand your frustration. The claim reference is pending and we are waiting for an answer.",
    "I have kept all the packaging as you asked, it is taking up half of my hallway.",
    "Please do not dispose of anything until the claim is closed, otherwise we cannot claim the damage.",
    "I am considering a chargeback with my card issuer if this is not resolved this week.",
)
CONSTRAINT_LINES: tuple[str, ...] = (
    "Do not promise a refund before the carrier claim is decided or the 10-day no-scan rule applies.",
    "The buyer mentioned a chargeback: every statement may be read by the card issuer; stick to facts.",
    "Do not share the seller's contact details or the buyer's address with either party.",
    "Any refund above 500 EUR needs a tier-2 approval reference in the note.",
    "The seller is on a performance plan: log every missed response deadline in the state.",
    "Photos from the buyer are evidence; reference them by attachment name, never describe faces or homes.",
    "The buyer asked for German replies in writing; keep amounts in EUR with two decimals.",
)
REPLIES: tuple[str, ...] = (
    "Thanks for waiting. I've checked the order and the carrier's scans; here is what I found and what "
    "happens next. The parcel left the sorting centre yesterday evening and is on a delivery route today.",
    "I've looked into this. Your return is eligible and I can create a prepaid label for you now. The "
    "refund is issued once the carrier scans the parcel, usually within two days of drop-off.",
    "Thank you for the photos. I've added them to the case and asked the seller to respond within 48 "
    "hours. I'll keep the case open and update you as soon as there is news.",
    "I understand. I can't promise the outcome yet, but the carrier has confirmed the damage report and "
    "the claim is in progress. I'll check again tomorrow morning.",
)
FOLLOW_UPS: tuple[str, ...] = (
    "Thanks. Can you make sure they leave it with a neighbour if I'm not home?",
    "OK, and when will I actually see the money on my card?",
    "I've uploaded two more photos of the damage, one of the inside of the box. Is that enough?",
    "That's not good enough. I've waited over a week already. What exactly happens if the seller "
    "doesn't answer?",
    "Can you send the label to my other email address instead? The one on file is my work email.",
    "The seller just messaged me again saying it's the carrier's fault. Who is responsible here?",
)
