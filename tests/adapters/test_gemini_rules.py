"""Gemini's billing rules on bodies made here: framing per content, declarations, Vertex, media,
Gemini 2.0, the fallback without the extra, and what is claimed exact."""

from __future__ import annotations

import base64
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx import _families as families
from otel_ctx.adapters import _gemini_media as media
from otel_ctx.adapters import _gemini_rules as rules
from otel_ctx.adapters._gemini_from_chat import gemini_body

if families.tokenizer("gemma4") is None:  # pragma: no cover - the test extra installs it
    pytest.skip("Gemini's tokenizer (the gemini extra) is not installed", allow_module_level=True)


def _fitter(model: str = "gemini-2.5-flash") -> ContextFitter:
    return ContextFitter(BudgetPolicy(context_length=10**7, reserved_output=0), model=model)


def _text(body: dict[str, object], model: str = "gemini-2.5-flash") -> tuple[int, bool]:
    result = _fitter(model).measure_request(body, provider="google")
    return result.breakdown.estimated, result.exact


def _contents(*texts: str) -> list[dict[str, object]]:
    return [{"role": "user" if k % 2 == 0 else "model", "parts": [{"text": t}]} for k, t in enumerate(texts)]


words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=80)


@settings(max_examples=40, deadline=None)
@given(st.lists(words, min_size=1, max_size=6))
def test_each_content_costs_its_text_and_one_token_on_current_models(texts: list[str]) -> None:
    counter = _fitter().counter
    count, _ = _text({"contents": _contents(*texts)})
    assert count == sum(counter.text(t) for t in texts) + len(texts) * rules.TOKENS_PER_CONTENT


@settings(max_examples=25, deadline=None)
@given(st.lists(words, min_size=1, max_size=4), words)
def test_gemini_2_0_and_vertex_bill_the_text_alone(texts: list[str], system: str) -> None:
    counter = _fitter().counter
    body = {"contents": _contents(*texts), "systemInstruction": {"parts": [{"text": system}]}}
    text = sum(counter.text(t) for t in texts) + counter.text(system)
    assert _text(body, "gemini-2.0-flash")[0] == text
    assert _text(body, "vertex_ai/gemini-2.5-flash")[0] == text
    assert _text({**body, "labels": {"team": "a"}})[0] == text  # a field only Vertex takes


def test_text_is_claimed_exact_only_where_either_endpoint_agrees_within_the_tolerance() -> None:
    one = {"contents": _contents("Where is my parcel?")}
    many = {"contents": _contents("a", "b", "c", "d", "e")}
    assert _text(one)[1] is True
    # Five contents: the Gemini API bills five tokens Vertex does not; a plain body cannot say which.
    assert _text(many)[1] is False
    assert _text(many, "vertex_ai/gemini-2.5-flash")[1] is True
    assert _text(one, "gemini-2.0-flash")[1] is False  # Gemma's pieces, not to the token on 2.0


def _declaration(description: str = "") -> dict[str, object]:
    return {
        "name": "lookup_order",
        "description": description,
        "parameters": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"order": {"type": "string", "title": "Order"}},
            "required": ["order"],
        },
    }


def test_a_declaration_costs_its_rendering_by_generation() -> None:
    counter = _fitter().counter
    render = rules.Renderer(counter.text)
    plain = {"contents": _contents("Hi")}
    for model in ("gemini-2.5-flash", "gemini-3-flash-preview", "gemini-2.0-flash"):
        for description in ("", "Find an order by its number."):
            decl = _declaration(description)
            with_tools = {**plain, "tools": [{"functionDeclarations": [decl]}]}
            added = _text(with_tools, model)[0] - _text(plain, model)[0]
            assert added == render.declaration("lookup_order", description, decl["parameters"], model)
    # Title and additionalProperties are not rendered; a description adds at least its text.
    bare = render.declaration("f", "", {"type": "object", "properties": {}}, "gemini-2.5-flash")
    assert bare == render.declaration(
        "f",
        "",
        {"type": "object", "properties": {}, "title": "F", "additionalProperties": False},
        "gemini-2.5-flash",
    )
    described = render.declaration("f", "Say it.", {"type": "object"}, "gemini-3-flash-preview")
    assert described >= render.declaration(
        "f", "", {"type": "object"}, "gemini-3-flash-preview"
    ) + counter.text("Say it.")


def test_a_schema_reference_is_expanded_and_a_cycle_stays_a_reference() -> None:
    render = rules.Renderer(_fitter().counter.text)
    inline = {
        "type": "object",
        "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}},
    }
    by_ref = {
        "$defs": {"A": {"type": "object", "properties": {"b": {"type": "string"}}}},
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
    }
    model = "gemini-2.5-flash"
    assert render.declaration("f", "", inline, model) == render.declaration("f", "", by_ref, model)
    cyclic = {
        "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}},
        "$ref": "#/$defs/N",
    }
    assert render.declaration("walk", "", cyclic, "gemini-2.5-flash") > 0


def test_vertex_bills_a_declarations_name_alone() -> None:
    counter = _fitter().counter
    plain = {"contents": _contents("Hi"), "labels": {"env": "test"}}
    tools = {**plain, "tools": [{"functionDeclarations": [_declaration("Find an order.")]}]}
    assert _text(tools)[0] - _text(plain)[0] == counter.text("lookup_order")


def test_one_tool_object_where_a_list_is_expected_is_read_not_refused() -> None:
    listed = {"contents": _contents("Hi"), "tools": [{"function_declarations": [_declaration()]}]}
    single = {"contents": _contents("Hi"), "tools": {"function_declarations": [_declaration()]}}
    assert _text(single)[0] == _text(listed)[0]


def test_what_the_server_adds_unseen_makes_the_count_a_bound() -> None:
    signed = {
        "contents": [
            {"role": "user", "parts": [{"text": "Hi"}]},
            {"role": "model", "parts": [{"text": "Hello", "thoughtSignature": "c2ln"}]},
            {"role": "user", "parts": [{"text": "More"}]},
        ]
    }
    searched = {"contents": _contents("News?"), "tools": [{"googleSearch": {}}]}
    cached = {"contents": _contents("Go on"), "cachedContent": "cachedContents/abc"}
    by_uri = {
        "contents": [
            {
                "role": "user",
                "parts": [{"fileData": {"fileUri": "gs://b/f.pdf", "mimeType": "application/pdf"}}],
            }
        ]
    }
    for body in (signed, searched, cached, by_uri):
        result = _fitter().measure_request(body, provider="google")
        assert result.unknowns and not result.exact


def _png(width: int, height: int) -> str:
    raw = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + struct.pack(">II", width, height) + bytes(5)
    return base64.b64encode(raw).decode()


@pytest.mark.parametrize(
    ("size", "tiles"),
    [((100, 100), 1), ((384, 384), 1), ((1536, 1536), 4 + 1), ((3000, 500), 10 * 2 + 1)],
)
def test_an_image_is_billed_by_tiles_on_gemini_2(size: tuple[int, int], tiles: int) -> None:
    """Within 384 pixels a side one tile; larger, tiles of two thirds of the shorter side (256 to
    768 pixels) and the whole image once more."""
    assert media.image_tokens(_png(*size), third=False).tokens == tiles * media.IMAGE_TILE
    assert media.image_tokens(_png(*size), third=True).tokens == media.GEMINI3_IMAGE


def _wav(seconds: float, rate: int = 16_000) -> bytes:
    data = bytes(int(seconds * rate) * 2)
    header = (
        b"RIFF"
        + struct.pack("<I", 36 + len(data))
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
    )
    return header + b"data" + struct.pack("<I", len(data)) + data


def _mp4(seconds: int) -> bytes:
    mvhd = b"mvhd" + bytes([0, 0, 0, 0]) + bytes(8) + struct.pack(">II", 1000, seconds * 1000) + bytes(80)
    return b"\x00\x00\x00\x1cftypmp42" + bytes(16) + struct.pack(">I", len(mvhd) + 4) + mvhd


@pytest.mark.parametrize("seconds", [1, 3, 10])
def test_audio_and_video_are_billed_by_their_length(seconds: int) -> None:
    assert media.audio_tokens(_wav(seconds)).tokens == seconds * media.AUDIO_PER_SECOND
    assert media.video_tokens(_mp4(seconds), third=False).tokens == seconds * media.VIDEO_PER_SECOND


def test_a_text_file_is_billed_as_its_text() -> None:
    note = "Return window: 30 days from delivery."
    body = {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "Read this"},
                    {
                        "inlineData": {
                            "mimeType": "text/plain",
                            "data": base64.b64encode(note.encode()).decode(),
                        }
                    },
                ],
            }
        ]
    }
    counter = _fitter().counter
    assert _text(body)[0] == counter.text("Read this") + counter.text(note) + rules.TOKENS_PER_CONTENT


def test_without_the_extra_gemini_is_a_flagged_estimate_scaled_by_its_ratio(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing() -> families.Tokenizer:
        raise ImportError("splintr-rs is not installed")

    monkeypatch.setattr(families, "TOKENIZERS", {**families.TOKENIZERS, "gemma4": missing})
    monkeypatch.setattr(families, "_loaded", {})
    result = _fitter().measure_request({"contents": _contents("Where is my parcel?")}, provider="google")
    assert not result.exact
    assert families.family_for("gemini-2.5-flash") is not None
    assert families.family_for("gemini-2.5-flash").fallback_ratio > 1.0  # type: ignore[union-attr]


def test_a_chat_request_maps_to_the_contents_a_router_sends_gemini() -> None:
    chat = {
        "model": "gemini-2.5-flash",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Where is 88-1042?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": '{"o": "88-1042"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "shipped"},
            {"role": "user", "content": [{"type": "text", "text": "When?"}]},
        ],
    }
    body = gemini_body(chat)
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user", "user"]
    assert body["contents"][1]["parts"] == [{"functionCall": {"name": "lookup", "args": {"o": "88-1042"}}}]
    assert body["contents"][2]["parts"] == [
        {"functionResponse": {"name": "lookup", "response": {"content": "shipped"}}}
    ]
    fitter = _fitter()
    on_vertex = gemini_body(chat, vertex=True)
    # Vertex: no per-content token (four contents and the system instruction) and calls by name
    # and values: counted lower than the same request on the Gemini API.
    assert (
        fitter.count_request(on_vertex, provider="google") < fitter.count_request(body, provider="google") - 5
    )


@settings(max_examples=25, deadline=None)
@given(st.lists(words, min_size=1, max_size=4))
def test_a_system_instructions_parts_are_counted_each_on_its_own_and_framed_once(parts: list[str]) -> None:
    counter = _fitter().counter
    body = {"contents": _contents("Hi"), "systemInstruction": {"parts": [{"text": t} for t in parts]}}
    expected = counter.text("Hi") + sum(counter.text(t) for t in parts) + 2 * rules.TOKENS_PER_CONTENT
    assert _text(body)[0] == expected


@pytest.mark.parametrize(
    ("setting", "gemini3", "gemini2"),
    [
        (None, 1_120, 258),
        ("MEDIA_RESOLUTION_LOW", 280, 64),
        ("MEDIA_RESOLUTION_MEDIUM", 560, 258),
        ("MEDIA_RESOLUTION_HIGH", 1_120, 258),
    ],
)
def test_an_image_is_billed_by_the_requests_media_resolution(
    setting: str | None, gemini3: int, gemini2: int
) -> None:
    image = {"inlineData": {"mimeType": "image/png", "data": _png(200, 200)}}
    body: dict[str, object] = {"contents": [{"role": "user", "parts": [image]}]}
    if setting is not None:
        body["generationConfig"] = {"mediaResolution": setting}
    framing = rules.TOKENS_PER_CONTENT
    assert _text(body, "gemini-3-flash-preview")[0] == gemini3 + framing
    assert _text(body, "gemini-2.5-flash")[0] == gemini2 + framing
    # On Gemini 3 a part's own resolution wins over the request's.
    low_part = {**image, "mediaResolution": {"level": "MEDIA_RESOLUTION_LOW"}}
    assert (
        _text({**body, "contents": [{"role": "user", "parts": [low_part]}]}, "gemini-3-flash-preview")[0]
        == 280 + framing
    )


def test_an_encoding_the_caller_chose_is_never_claimed_as_geminis_own() -> None:
    body = {"contents": _contents("Where is my parcel?")}
    chosen = ContextFitter(
        BudgetPolicy(context_length=10**6, reserved_output=0),
        model="gemini-2.5-flash",
        encoding="cl100k_base",
    )
    assert _text(body)[1] is True
    assert chosen.measure_request(body, provider="google").exact is False
