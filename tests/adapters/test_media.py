"""Images and documents counted as the providers bill them: header reading, the published
token rules checked against the providers' own worked examples, and the observe-only path
that must measure any media a body holds without raising or touching the caller's body."""

from __future__ import annotations

import base64
import copy
import html
import io
import math
import struct
import zipfile
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from real_traffic import PROVIDER, billed, part_types, rows

from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx.adapters import _media as media
from otel_ctx.adapters._media import (
    anthropic_image_tokens,
    audio_tokens,
    claude_resized,
    image_size,
    openai_image_tokens,
    pdf_document,
)

# -- image headers, built by hand for any size ---------------------------------------------


def png(w: int, h: int) -> bytes:
    ihdr = struct.pack(">II", w, h) + bytes([8, 6, 0, 0, 0])
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\0\0\0\0" + b"IDAT" * 8


def gif(w: int, h: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", w, h) + b"\xf7\0\0" + b"\0" * 32


def webp_lossy(w: int, h: int) -> bytes:
    frame = b"\x30\x01\x00" + b"\x9d\x01\x2a" + struct.pack("<HH", w, h) + b"\0" * 16
    return (
        b"RIFF"
        + struct.pack("<I", 4 + 8 + len(frame))
        + b"WEBP"
        + b"VP8 "
        + struct.pack("<I", len(frame))
        + frame
    )


def webp_lossless(w: int, h: int) -> bytes:
    bits = (w - 1) | ((h - 1) << 14)
    body = b"\x2f" + struct.pack("<I", bits) + b"\0" * 16
    return (
        b"RIFF"
        + struct.pack("<I", 4 + 8 + len(body))
        + b"WEBP"
        + b"VP8L"
        + struct.pack("<I", len(body))
        + body
    )


def webp_extended(w: int, h: int) -> bytes:
    body = b"\0\0\0\0" + (w - 1).to_bytes(3, "little") + (h - 1).to_bytes(3, "little")
    return (
        b"RIFF"
        + struct.pack("<I", 4 + 8 + len(body))
        + b"WEBP"
        + b"VP8X"
        + struct.pack("<I", len(body))
        + body
    )


def jpeg(w: int, h: int, *, exif: int = 0, progressive: bool = False) -> bytes:
    """A JPEG's marker stream up to its frame header: JFIF, an optional EXIF block of ``exif``
    bytes (a camera's, which pushes the size far into the file), a quantisation table, SOF."""
    out = b"\xff\xd8" + b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0"
    exif = max(exif, 6) if exif else 0
    while exif > 0:  # a segment holds at most 65,533 bytes: a large block spans several
        chunk = max(6, min(exif, 60_000))
        out += b"\xff\xe1" + struct.pack(">H", chunk + 2) + b"Exif\0\0" + b"\x00" * (chunk - 6)
        exif -= chunk
    out += b"\xff\xdb" + struct.pack(">H", 67) + b"\0" + bytes(range(64))
    sof = b"\xc2" if progressive else b"\xc0"
    out += b"\xff" + sof + struct.pack(">HBHHB", 17, 8, h, w, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return out + b"\xff\xc4" + struct.pack(">H", 4) + b"\0\0" + b"\xff\xda" + b"\0" * 64


FORMATS = {
    "png": (png, 1 << 31, "image/png"),
    "gif": (gif, 1 << 16, "image/gif"),
    "webp-vp8": (webp_lossy, 1 << 14, "image/webp"),
    "webp-vp8l": (webp_lossless, (1 << 14) + 1, "image/webp"),
    "webp-vp8x": (webp_extended, 1 << 24, "image/webp"),
    "jpeg": (jpeg, 1 << 16, "image/jpeg"),
}


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@st.composite
def headers(draw: Any) -> tuple[bytes, tuple[int, int], str]:
    name = draw(st.sampled_from(sorted(FORMATS)))
    make, top, mime = FORMATS[name]
    w = draw(st.integers(1, top - 1))
    h = draw(st.integers(1, top - 1))
    return make(w, h), (w, h), mime


@given(headers(), st.sampled_from(["raw", "b64", "url", "wrapped"]))
def test_the_size_is_read_from_any_header_in_every_form(found: Any, form: str) -> None:
    raw, size, mime = found
    text = b64(raw)
    data: Any = {
        "raw": raw,
        "b64": text,
        "url": f"data:{mime};base64,{text}",
        # Some encoders wrap base64 at 76 columns: the reader skips the line breaks.
        "wrapped": "\n".join(text[i : i + 76] for i in range(0, len(text), 76)),
    }[form]
    assert image_size(data) == size


@given(st.integers(1, 65_535), st.integers(1, 65_535), st.integers(0, 200_000), st.booleans())
@settings(max_examples=25)
def test_a_jpeg_size_behind_a_large_exif_block_is_still_found(w: int, h: int, exif: int, prog: bool) -> None:
    raw = jpeg(w, h, exif=exif, progressive=prog)
    assert image_size("data:image/jpeg;base64," + b64(raw) + "A" * 1000) == (w, h)


@given(headers(), st.data())
def test_a_truncated_header_gives_no_size_or_the_right_one(found: Any, data: Any) -> None:
    raw, size, _ = found
    cut = data.draw(st.integers(0, len(raw)))
    for form in (raw[:cut], b64(raw[:cut])):
        assert image_size(form) in (None, size)


@given(
    st.one_of(
        st.binary(max_size=400), st.text(max_size=400), st.integers(), st.none(), st.lists(st.integers())
    )
)
def test_anything_else_never_raises(junk: Any) -> None:
    assert image_size(junk) is None or isinstance(image_size(junk), tuple)
    if isinstance(junk, bytes):
        assert image_size("data:image/png;base64," + b64(junk)) is None or True
        assert audio_tokens(b64(junk)) >= 1
        assert len(pdf_document(junk).pages) >= 1


def test_zero_sizes_and_foreign_formats_are_unreadable() -> None:
    assert image_size(png(0, 5)) is None
    assert image_size(gif(5, 0)) is None
    assert image_size(b"BM" + b"\0" * 64) is None  # BMP: not a format the providers take
    assert image_size("data:image/png,notbase64") is None
    assert image_size("https://example.com/cat.png") is None


# -- OpenAI's published rules ---------------------------------------------------------------


def test_openai_tile_rule_reproduces_the_vision_guides_examples() -> None:
    # "A 1024 x 1024 square image in detail: high mode costs 765 tokens" (gpt-4o).
    assert openai_image_tokens("gpt-4o", (1024, 1024), "high").tokens == 765
    # "A 2048 x 4096 image in detail: high mode costs 1105 tokens" (gpt-4o).
    assert openai_image_tokens("gpt-4o", (2048, 4096), "high").tokens == 1105
    # "A 4096 x 8192 image in detail: low most costs 85 tokens": low detail is the base alone.
    assert openai_image_tokens("gpt-4o", (4096, 8192), "low").tokens == 85
    # The guide's table: 4o-mini's base is 2833 and a tile 5667, so a one-tile image is 8500.
    assert openai_image_tokens("gpt-4o-mini-2024-07-18", (1, 1), None).tokens == 2833 + 5667
    assert openai_image_tokens("gpt-4o-mini", (300, 300), "low").tokens == 2833
    # o1/o3's (75, 150) and gpt-5's (70, 140) from the same table.
    assert openai_image_tokens("o3", (1024, 1024), "high").tokens == 75 + 4 * 150
    assert openai_image_tokens("gpt-5-2025-08-07", (1024, 1024), "auto").tokens == 70 + 4 * 140


def test_openai_patch_rule_reproduces_the_vision_guides_examples() -> None:
    # The guide's figures, and the image's framing the bills add besides them.
    f = media.PATCH_IMAGE_FRAMING
    # "A 1024 x 1024 image is 1024 tokens" before the model's multiplier (gpt-4.1-nano: 2.46).
    assert openai_image_tokens("gpt-4.1-nano", (1024, 1024), None).tokens == math.ceil(1024 * 2.46) + f
    # "A 1800 x 2400 image is 1452 tokens": resized under the 1,536-patch budget to 1056 x 1408.
    assert openai_image_tokens("o4-mini", (1800, 2400), "high").tokens == math.ceil(1452 * 1.72) + f
    # gpt-5.4 at high detail: "A 1024 x 1024 image ... ceil(1024 x 1.2) = 1229 tokens", and
    # "A 2048 x 2048 image ... reduces it to 1600 x 1600 pixels ... ceil(2500 x 1.2) = 3000 tokens".
    assert openai_image_tokens("gpt-5.4", (1024, 1024), "high").tokens == 1229 + f
    assert openai_image_tokens("gpt-5.4", (2048, 2048), "high").tokens == 3000 + f
    # gpt-5-mini is billed 1.2 per patch, gpt-5-nano 1.5 (the guide's multiplier table).
    assert openai_image_tokens("gpt-5-mini", (1024, 1024), None).tokens == math.ceil(1024 * 1.2) + f
    assert openai_image_tokens("gpt-5-nano", (1024, 1024), None).tokens == math.ceil(1024 * 1.5) + f


@given(
    st.integers(1, 20_000),
    st.integers(1, 20_000),
    st.sampled_from(["gpt-4.1-mini", "o4-mini", "gpt-5.4", "gpt-5-mini"]),
)
def test_a_patch_budget_caps_every_size(w: int, h: int, model: str) -> None:
    rule = media._openai_rule(model)
    assert isinstance(rule, media._Patches)
    budget = rule.high[1]
    assert budget is not None
    most = math.ceil(budget * rule.multiplier / 100) + media.PATCH_IMAGE_FRAMING
    assert openai_image_tokens(model, (w, h), "high").tokens <= most


def test_openai_exactness_and_bounds() -> None:
    # The tile constants the recorded bills reproduce are exact; the patch rule rounds by a token.
    assert openai_image_tokens("gpt-4o", (500, 500), None).exact
    assert not openai_image_tokens("gpt-5-mini", (500, 500), None).exact
    assert not openai_image_tokens("some-azure-deployment", (500, 500), None).exact
    # A URL: a bound at least as large as any size, flagged unknown; low detail needs no size.
    bound = openai_image_tokens("gpt-4o", None, None)
    assert bound.unknown == "image by URL" and not bound.exact
    assert bound.tokens >= max(
        openai_image_tokens("gpt-4o", (w, h), None).tokens for w in (10, 900, 5000) for h in (10, 900, 5000)
    )
    low = openai_image_tokens("gpt-4o", None, "low")
    assert low.unknown is None and low.tokens == 85


# -- Anthropic's published rule ----------------------------------------------------------------

STANDARD = (1568, 1568)
HIGH_RES = (2576, 4784)


@pytest.mark.parametrize(
    ("size", "standard", "high_res"),
    [
        # The vision guide's table of image sizes, downsized resolutions and visual tokens.
        ((200, 200), (200, 200), (200, 200)),  # 64 tokens on both tiers
        ((1000, 1000), (1000, 1000), (1000, 1000)),  # 1296
        ((1092, 1092), (1092, 1092), (1092, 1092)),  # 1521
        ((1920, 1080), (1456, 819), (1920, 1080)),  # 1560 / 2691
        ((2000, 1500), (1269, 952), (2000, 1500)),  # 1564 / 3888
        ((3840, 2160), (1456, 819), (2576, 1449)),  # 1560 / 4784
        # The coordinates guide's A4 scan at 130 DPI, downsized on the standard tier.
        ((1075, 1520), (924, 1307), (1075, 1520)),
    ],
)
def test_claude_resizes_as_the_vision_guide_shows(
    size: tuple[int, int], standard: tuple[int, int], high_res: tuple[int, int]
) -> None:
    assert claude_resized(*size, STANDARD) == standard
    assert claude_resized(*size, HIGH_RES) == high_res


def test_claude_visual_tokens_match_the_guides_table() -> None:
    framing = media.ANTHROPIC_IMAGE_FRAMING
    for size, standard, high_res in [
        ((200, 200), 64, 64),
        ((1000, 1000), 1296, 1296),
        ((1920, 1080), 1560, 2691),
        ((2000, 1500), 1564, 3888),
        ((3840, 2160), 1560, 4784),
    ]:
        assert anthropic_image_tokens("claude-sonnet-4-5", size).tokens == standard + framing
        assert anthropic_image_tokens("claude-3-5-sonnet-20240620", size).tokens == standard + framing
        assert anthropic_image_tokens("claude-opus-4-7", size).tokens == high_res + framing
    assert not anthropic_image_tokens("claude-sonnet-4-5", (10, 10)).exact


@given(st.integers(1, 8000), st.integers(1, 8000), st.sampled_from([STANDARD, HIGH_RES]))
def test_claude_resize_fits_the_tier_and_never_enlarges(w: int, h: int, tier: Any) -> None:
    rw, rh = claude_resized(w, h, tier)
    assert rw <= w and rh <= h
    assert max(rw, rh) <= tier[0]
    assert math.ceil(rw / 28) * math.ceil(rh / 28) <= tier[1]
    if (rw, rh) != (w, h):  # the aspect ratio is kept to within the rounding of one side
        assert abs(rw * h - rh * w) <= max(w, h)


# -- documents ---------------------------------------------------------------------------------


def make_pdf(pages: list[str], size: tuple[int, int] = (612, 792), pad: int = 0) -> bytes:
    """A small valid PDF with one line of text on each page (and ``pad`` bytes in an object
    no page shows)."""
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids = []
    for text in pages:
        stream = b"BT /F1 12 Tf 72 700 Td (" + text.encode() + b") Tj ET"
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        content = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents %d 0 R"
            % (size[0], size[1], content)
            + b" /Resources << /Font << /F1 3 0 R >> >> >>"
        )
        kids.append(b"%d 0 R" % len(objects))
    if pad:
        objects.append(b"<< /Length %d >>\nstream\n" % pad + b"x" * pad + b"\nendstream")
    objects[1] = b"<< /Type /Pages /Kids [" + b" ".join(kids) + b"] /Count %d >>" % len(pages)
    out = b"%PDF-1.4\n"
    offsets = []
    for k, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % k + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return out


def test_a_pdf_is_read_for_its_pages_and_text_once() -> None:
    raw = make_pdf(["alpha bravo", "charlie delta", "echo"], size=(595, 842))
    data = b64(raw)
    doc = pdf_document(data)
    assert doc.parsed and doc.pages == ((595, 842),) * 3
    assert "charlie delta" in doc.texts[1]
    assert pdf_document(data) is doc  # the same string again: no second parse
    assert pdf_document("data:application/pdf;base64," + data) == doc  # the same bytes, however sent
    assert media.pdf_pages(raw) == 3


def test_a_damaged_pdf_still_gives_its_page_objects() -> None:
    raw = b"%PDF-1.4\n" + b"1 0 obj << /Type /Page >> endobj\n" * 4 + b"garbage"
    doc = pdf_document(raw)
    assert len(doc.pages) == 4 and not doc.parsed


def _fitter(model: str) -> ContextFitter:
    return ContextFitter(BudgetPolicy(context_length=10**7, reserved_output=0), model=model)


def _chat_file(data: str) -> dict[str, Any]:
    part = {"type": "file", "file": {"filename": "report.pdf", "file_data": data}}
    return {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Sum up"}, part]}],
    }


def test_a_pdf_is_billed_by_its_pages_never_by_its_base64() -> None:
    text = "the quarterly numbers went up by four percent"
    small = make_pdf([text])
    # The same page with a large unseen stream inside: many more bytes, the same page and text.
    padded = make_pdf([text], pad=200_000)
    fitter = _fitter("gpt-4o")
    one = fitter.measure_request(_chat_file("data:application/pdf;base64," + b64(small)), provider="openai")
    fat = fitter.measure_request(_chat_file("data:application/pdf;base64," + b64(padded)), provider="openai")
    three = fitter.measure_request(
        _chat_file("data:application/pdf;base64," + b64(make_pdf([text] * 3))), provider="openai"
    )
    assert fat.breakdown.estimated == one.breakdown.estimated
    # Each page adds its text and an image of the page, far less than the file's base64 text.
    per_page = (three.breakdown.estimated - one.breakdown.estimated) / 2
    assert per_page == media.openai_page_image_tokens("gpt-4o") + fitter.counter.text(text)
    assert not one.exact


def test_a_file_by_id_is_a_bound_and_unknown() -> None:
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-abc"}}]}],
    }
    result = _fitter("gpt-4o").measure_request(body, provider="openai")
    assert "file by id" in result.unknowns and not result.exact


def test_anthropic_pdf_pages_cost_a_page_image_and_their_text() -> None:
    fitter = _fitter("claude-sonnet-4-5")

    def body(pages: int) -> dict[str, Any]:
        doc = {
            "type": "document",
            "source": {
                "type": "base64",
                "media_type": "application/pdf",
                "data": b64(make_pdf(["hello there"] * pages)),
            },
        }
        return {
            "model": "claude-sonnet-4-5",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": [doc]}],
        }

    one = fitter.measure_request(body(1), provider="anthropic").breakdown.estimated
    two = fitter.measure_request(body(2), provider="anthropic").breakdown.estimated
    page = two - one
    # A letter page rendered to the standard tier: close to its 1,568 visual tokens.
    assert 1400 <= page - fitter.counter.text("hello there") <= 1568


def test_chat_completions_bills_a_page_image_by_the_models_family_and_responses_none() -> None:
    text = "the quarterly numbers went up by four percent"
    pages = {k: "data:application/pdf;base64," + b64(make_pdf([text] * k)) for k in (1, 3)}

    def chat(model: str, k: int) -> int:
        fitter = _fitter(model)
        body = _chat_file(pages[k]) | {"model": model}
        return fitter.measure_request(body, provider="openai").breakdown.estimated

    def responses(model: str, k: int) -> int:
        part = {"type": "input_file", "filename": "report.pdf", "file_data": pages[k]}
        body = {"model": model, "input": [{"role": "user", "content": [part]}]}
        return _fitter(model).measure_request(body, provider="openai-responses").breakdown.estimated

    for model in ("gpt-4o", "gpt-5-mini", "gpt-5.4", "gpt-5.5"):
        words = _fitter(model).counter.text(text)
        per_page = (chat(model, 3) - chat(model, 1)) / 2
        assert per_page == media.openai_page_image_tokens(model) + words
        # Responses bills a PDF by its text alone (no page image on any recorded bill there).
        assert (responses(model, 3) - responses(model, 1)) / 2 == words
    # The models with the 2,500-patch image budget see a page larger than the earlier families.
    assert media.openai_page_image_tokens("gpt-5.4") > media.openai_page_image_tokens("gpt-4o")
    assert media.openai_page_image_tokens("gpt-4o") == media.openai_page_image_tokens("gpt-5-mini")
    assert media.openai_page_image_tokens("gpt-6") == media.openai_page_image_tokens("gpt-5.4")


# -- Office documents and other files: the text the API extracts -------------------------------


def _zip(parts: dict[str, str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in parts.items():
            archive.writestr(name, text)
    return out.getvalue()


def docx(paragraphs: list[str], *, styled: bool = False) -> bytes:
    """A minimal Word document; ``styled`` wraps every word in a run of its own with formatting,
    as an editor does: more XML, the same text."""

    def runs(text: str) -> str:
        if not styled:
            return f'<w:r><w:t xml:space="preserve">{html.escape(text)}</w:t></w:r>'
        return "".join(
            f'<w:r><w:rPr><w:b/><w:sz w:val="24"/></w:rPr><w:t xml:space="preserve">'
            f"{html.escape(word)}{' ' if k < len(text.split(' ')) - 1 else ''}</w:t></w:r>"
            for k, word in enumerate(text.split(" "))
        )

    body = "".join(f'<w:p><w:pPr><w:jc w:val="left"/></w:pPr>{runs(t)}</w:p>' for t in paragraphs)
    document = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        f"<w:body>{body}<w:sectPr/></w:body></w:document>"
    )
    return _zip(
        {"[Content_Types].xml": "<Types/>", "_rels/.rels": "<Relationships/>", "word/document.xml": document}
    )


def pptx(slides: list[str]) -> bytes:
    parts = {"[Content_Types].xml": "<Types/>"}
    for k, text in enumerate(slides, 1):
        parts[f"ppt/slides/slide{k}.xml"] = (
            f"<p:sld><p:cSld><p:spTree><p:sp><p:txBody><a:p><a:r><a:t>{html.escape(text)}</a:t></a:r></a:p>"
            "</p:txBody></p:sp></p:spTree></p:cSld></p:sld>"
        )
    return _zip(parts)


def test_an_office_documents_text_is_read_in_order_without_its_markup() -> None:
    paragraphs = ["Offsite plan & budget", "Held in <Lisbon>, capped at 90 people.", "Owner: the data team."]
    text = media.file_text(docx(paragraphs))
    assert text == "\n".join(paragraphs)
    assert media.file_text(docx(paragraphs, styled=True)) == text
    # Slides in their order (slide 10 after slide 2), each its own paragraph.
    assert media.file_text(pptx([f"slide number {k}" for k in range(1, 12)])) == "\n\n".join(
        f"slide number {k}" for k in range(1, 12)
    )
    sheet = _zip(
        {
            "xl/sharedStrings.xml": "<sst><si><t>region</t></si><si><t>north</t></si></sst>",
            "xl/worksheets/sheet1.xml": '<sheetData><row><c t="s"><v>0</v></c></row>'
            '<row><c t="s"><v>1</v></c><c><v>120</v></c></row></sheetData>',
        }
    )
    # A cell holding a shared string reads as that string, a row as a line of cells.
    assert media.file_text(sheet) == "region\nnorth,120"


def test_a_spreadsheet_is_read_by_its_first_rows_and_a_summary() -> None:
    rows_ = [f"city{k},{k},{k * 7}" for k in range(media.SPREADSHEET_ROWS + 500)]
    fitter = _fitter("gpt-5.4")
    small = _responses_file("sales.csv", "text/csv", "\n".join(rows_[:10]).encode())
    assert small.breakdown.estimated == _responses_file("n.txt", "text/plain", b"").breakdown.estimated + (
        media.SPREADSHEET_SUMMARY_TOKENS + fitter.counter.text("\n".join(rows_[:10]))
    )
    # Rows past the first thousand are not read: a longer sheet costs what its first rows do.
    head = _responses_file("sales.csv", "text/csv", "\n".join(rows_[: media.SPREADSHEET_ROWS]).encode())
    whole = _responses_file("sales.csv", "text/csv", "\n".join(rows_).encode())
    assert whole.breakdown.estimated == head.breakdown.estimated
    # The same text as a plain text file is read whole, without a summary.
    plain = _responses_file("sales.txt", "text/plain", "\n".join(rows_).encode())
    assert plain.breakdown.estimated > whole.breakdown.estimated


def _responses_file(name: str, mime: str, raw: bytes, model: str = "gpt-5.4") -> Any:
    part = {"type": "input_file", "filename": name, "file_data": f"data:{mime};base64,{b64(raw)}"}
    body = {"model": model, "input": [{"role": "user", "content": [part]}]}
    return _fitter(model).measure_request(body, provider="openai-responses")


DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def test_a_docx_is_billed_by_its_text_never_by_its_zip_or_markup() -> None:
    paragraphs = ["The offsite is in Lisbon.", "Attendance is capped at ninety.", "The data team owns it."]
    plain = _responses_file("memo.docx", DOCX, docx(paragraphs))
    styled = _responses_file("memo.docx", DOCX, docx(paragraphs, styled=True))
    as_text = _responses_file("memo.txt", "text/plain", "\n".join(paragraphs).encode())
    assert plain.breakdown.estimated == styled.breakdown.estimated == as_text.breakdown.estimated
    assert not plain.exact and not plain.unknowns


@given(st.lists(st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=40), max_size=6))
@settings(max_examples=40, deadline=None)
def test_any_paragraphs_round_trip_through_a_docx(paragraphs: list[str]) -> None:
    found = media.file_text(docx(paragraphs))
    assert found is not None
    expected = [" ".join(p.split()) for p in paragraphs]
    assert " ".join(found.split()) == " ".join(" ".join(expected).split())


def test_text_files_are_their_text_and_other_binaries_an_unknown_estimate() -> None:
    csv = "region,q1,q2\nnorth,120,135\nsouth,98,102\n"
    fitter = _fitter("gpt-5.4")
    counted = _responses_file("sales.csv", "text/csv", csv.encode())
    utf16 = _responses_file("sales.csv", "text/csv", csv.encode("utf-16"))
    assert counted.breakdown.estimated == utf16.breakdown.estimated
    assert media.file_text(csv.encode()) == csv
    blob = bytes(range(128, 256)) * 40  # no text, no archive
    unread = _responses_file("model.bin", "application/octet-stream", blob)
    assert "file of an unread type" in unread.unknowns and not unread.exact
    assert unread.breakdown.estimated >= len(blob) // media.UNREAD_BYTES_PER_TOKEN
    assert fitter.counter.text(csv) < counted.breakdown.estimated
    # An archive holding no document part is read as no document.
    assert media.file_text(_zip({"notes/readme.bin": "x"})) is None


@given(st.binary(max_size=600))
@settings(max_examples=60, deadline=None)
def test_any_bytes_or_broken_archive_never_raise(junk: bytes) -> None:
    for raw in (junk, b"PK\x03\x04" + junk, docx(["a b c"])[: len(junk)]):
        found = media.file_text(raw)
        assert found is None or isinstance(found, str)
        assert _responses_file("f.docx", DOCX, raw).breakdown.estimated > 0


# -- the observe-only path never refuses media, never touches the body --------------------------

payloads = st.one_of(
    st.binary(max_size=300).map(b64),
    st.text(max_size=80),
    headers().map(lambda found: b64(found[0][: len(found[0]) // 2])),
    st.binary(max_size=200).map(lambda junk: b64(b"%PDF-1.7\n" + junk)),
    st.binary(max_size=200).map(lambda junk: b64(b"RIFF\0\0\0\0WAVEfmt " + junk)),
)


def _bodies(payload: str, mime: str) -> list[tuple[str, str, dict[str, Any]]]:
    url = f"data:{mime};base64,{payload}"
    chat = [
        {"type": "image_url", "image_url": {"url": url, "detail": "auto"}},
        {"type": "file", "file": {"filename": "f.pdf", "file_data": url}},
        {"type": "input_audio", "input_audio": {"data": payload, "format": "wav"}},
    ]
    responses = [
        {"type": "input_image", "image_url": url},
        {"type": "input_file", "filename": "f.pdf", "file_data": url},
    ]
    anthropic = [
        {"type": "image", "source": {"type": "base64", "media_type": mime, "data": payload}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": payload}},
    ]
    return [
        (
            "openai",
            "gpt-4.1-mini",
            {"model": "gpt-4.1-mini", "messages": [{"role": "user", "content": chat}]},
        ),
        (
            "openai-responses",
            "gpt-5.4",
            {"model": "gpt-5.4", "input": [{"role": "user", "content": responses}]},
        ),
        (
            "anthropic",
            "claude-opus-4-7",
            {
                "model": "claude-opus-4-7",
                "max_tokens": 9,
                "messages": [{"role": "user", "content": anthropic}],
            },
        ),
    ]


@given(payloads, st.sampled_from(["image/png", "image/jpeg", "application/pdf", "text/plain", ""]))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_malformed_media_is_measured_without_raising_or_mutating(payload: str, mime: str) -> None:
    for provider, model, body in _bodies(payload, mime):
        before = copy.deepcopy(body)
        result = _fitter(model).measure_request(body, provider=provider)
        assert result.breakdown.estimated > 0
        assert not result.exact  # media of unreadable size or estimated documents are never exact
        assert body == before


# -- the recorded bills -------------------------------------------------------------------------

MEDIA = {"image_url", "input_image", "image", "file", "input_file", "document"}


def test_media_cases_of_the_recorded_traffic() -> None:
    images: dict[str, list[float]] = {"openai": [], "anthropic": []}
    files: list[float] = []
    for row in rows():
        kinds = set(part_types(row["request"])) & MEDIA
        if not kinds:
            continue
        body = row["request"]
        count = _fitter(row["model"]).measure_request(body, provider=PROVIDER[row["api"]]).breakdown.estimated
        ratio = count / billed(row)
        if kinds & {"image_url", "input_image", "image"}:
            if not body.get("tools"):  # a request with tools also depends on how its tools are counted
                images["anthropic" if row["api"] == "anthropic.messages" else "openai"].append(ratio)
        else:
            files.append(ratio)
    assert images["openai"] and images["anthropic"] and files
    assert sum(abs(r - 1) <= 0.10 for r in images["openai"]) >= 0.9 * len(images["openai"])
    assert sum(abs(r - 1) <= 0.15 for r in images["anthropic"]) >= 0.85 * len(images["anthropic"])
    assert sum(0.5 <= r <= 2 for r in files) >= 0.9 * len(files)
