"""Images and documents in a request, counted as each provider bills them.

A provider bills an inline image by its pixel size, never by its bytes, and a PDF by its
pages and the text on them, never by its base64 length. This module reads what those
rules need from the body alone: an image's width and height from its header (PNG, JPEG,
GIF, WebP, without decoding a pixel, from a data URL, a base64 string or raw bytes), and
a PDF's pages and their text (with :mod:`pypdf`, read once per document and cached), and the
text the API extracts from other files (an Office document's, a spreadsheet's first rows, a
text file's own; read once and cached). It also holds the published token rules: OpenAI's
512px-tile and 32px-patch formulas per model family, and Anthropic's 28px-patch rule with its
resize limits.

Every reader here is total: input it cannot read gives ``None`` (or a stated bound),
never an exception, because a body the provider accepts must always be measured.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import html
import io
import logging
import math
import re
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from otel_ctx.engine._dialect import ReadContext
from otel_ctx.engine._model import Component, Part

log = logging.getLogger("otel_ctx")

Size = tuple[int, int]
#: Tokens of a text, as the fitter counts them.
Count = Callable[[str], int]

# -- image headers ---------------------------------------------------------------------

#: Base64 characters decoded first: enough for a PNG, GIF or WebP header and for most
#: JPEGs; a JPEG whose size marker sits behind a large EXIF or ICC block is read further.
_FIRST_CHARS = 4_096
#: The longest prefix ever decoded while looking for a JPEG's size marker (about 3 MB).
_MAX_CHARS = 4 << 20
_NOT_B64 = re.compile(r"[^A-Za-z0-9+/]")
_PNG = b"\x89PNG\r\n\x1a\n"
#: JPEG start-of-frame markers (baseline, progressive, lossless, arithmetic): they carry the size.
_SOF = frozenset((0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF))
#: JPEG markers that stand alone, without a length (restart markers, TEM, SOI).
_STANDALONE = frozenset((0x01, 0xD0, 0xD1, 0xD2, 0xD3, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8))


class _Short(Exception):
    """The bytes end before the header does: read a longer prefix."""


def data_url_payload(value: str) -> tuple[str | None, str] | None:
    """``(media type, base64 payload)`` of a ``data:`` URL, or ``None`` for anything else."""
    if not value.startswith("data:"):
        return None
    comma = value.find(",", 5, 5 + 256)
    if comma < 0:
        return None
    meta = value[5:comma]
    if not meta.endswith(";base64"):
        return None
    media = meta[: -len(";base64")].split(";", 1)[0].strip().lower() or None
    return media, value[comma + 1 :]


def _b64_prefix(text: str, chars: int) -> bytes:
    """The bytes of the first ``chars`` base64 characters of ``text`` (whitespace, URL-safe
    letters and a cut mid-quantum tolerated)."""
    head = text[:chars]
    if _NOT_B64.search(head.rstrip("=")) is not None:
        head = _NOT_B64.sub("", head.replace("-", "+").replace("_", "/"))
    else:
        head = head.rstrip("=")
    head = head[: len(head) - len(head) % 4]
    try:
        return base64.b64decode(head, validate=False)
    except (binascii.Error, ValueError):
        return b""


def image_size(data: Any) -> Size | None:
    """``(width, height)`` in pixels read from an image's header, or ``None`` when unreadable.

    ``data`` is a ``data:`` URL, a bare base64 string, or the raw bytes an SDK holds. Only
    the prefix holding the header is decoded; no pixel is.
    """
    try:
        if isinstance(data, (bytes, bytearray, memoryview)):
            return _size(bytes(data), complete=True)
        if not isinstance(data, str):
            return None
        text = data
        if text.startswith("data:"):
            found = data_url_payload(text)
            if found is None:
                return None
            text = found[1]
        chars = _FIRST_CHARS
        while True:
            complete = chars >= len(text)
            try:
                return _size(_b64_prefix(text, chars), complete=complete)
            except _Short:
                if complete or chars >= _MAX_CHARS:
                    return None
                chars *= 8
    except Exception:  # a reader must never refuse what the provider accepts
        log.debug("otel-ctx: unreadable image header", exc_info=True)
        return None


def _size(raw: bytes, *, complete: bool) -> Size | None:
    """The size in ``raw``; :class:`_Short` when more bytes could still hold it."""
    try:
        if raw.startswith(_PNG):
            return _png(raw)
        if raw[:2] == b"\xff\xd8":
            return _jpeg(raw)
        if raw[:6] in (b"GIF87a", b"GIF89a"):
            return _positive(int.from_bytes(raw[6:8], "little"), int.from_bytes(raw[8:10], "little"), raw, 10)
        if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
            return _webp(raw)
    except _Short:
        if complete:
            return None
        raise
    if len(raw) < 12 and not complete:
        raise _Short
    return None


def _positive(width: int, height: int, raw: bytes, needed: int) -> Size | None:
    if len(raw) < needed:
        raise _Short
    return (width, height) if width > 0 and height > 0 else None


def _png(raw: bytes) -> Size | None:
    if len(raw) < 24:
        raise _Short
    if raw[12:16] != b"IHDR":
        return None
    return _positive(int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big"), raw, 24)


def _webp(raw: bytes) -> Size | None:
    if len(raw) < 30:
        raise _Short
    chunk = raw[12:16]
    if chunk == b"VP8 ":  # lossy: the key frame's start code, then 14-bit width and height
        if raw[23:26] != b"\x9d\x01\x2a":
            return None
        return _positive(
            int.from_bytes(raw[26:28], "little") & 0x3FFF,
            int.from_bytes(raw[28:30], "little") & 0x3FFF,
            raw,
            30,
        )
    if chunk == b"VP8L":  # lossless: a signature byte, then width-1 and height-1 in 14 bits each
        if raw[20] != 0x2F:
            return None
        bits = int.from_bytes(raw[21:25], "little")
        return ((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8X":  # extended: the canvas size, 24 bits each, minus one
        return (int.from_bytes(raw[24:27], "little") + 1, int.from_bytes(raw[27:30], "little") + 1)
    return None


def _jpeg(raw: bytes) -> Size | None:
    i = 2
    n = len(raw)
    while True:
        # A marker is 0xFF (any number of fill bytes) and a code.
        if i >= n:
            raise _Short
        if raw[i] != 0xFF:
            return None
        while i < n and raw[i] == 0xFF:
            i += 1
        if i >= n:
            raise _Short
        code = raw[i]
        i += 1
        if code in _STANDALONE:
            continue
        if code == 0xD9 or code == 0xDA:  # end of image, or scan data before any frame header
            return None
        if i + 2 > n:
            raise _Short
        length = int.from_bytes(raw[i : i + 2], "big")
        if length < 2:
            return None
        if code in _SOF:
            if i + 7 > n:
                raise _Short
            height = int.from_bytes(raw[i + 3 : i + 5], "big")
            width = int.from_bytes(raw[i + 5 : i + 7], "big")
            return (width, height) if width > 0 and height > 0 else None
        i += length


# -- what a part costs -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cost:
    """Tokens of an image or a document, whether a confirmed rule gave them, and, when the
    body cannot show what is billed (a URL, a file id), the reason (for ``ReadContext.unknown``)."""

    tokens: int
    exact: bool = False
    unknown: str | None = None

    def part(self, component: Component, ctx: ReadContext | None) -> Part:
        """The image's or document's part; what the body cannot show is recorded as unknown."""
        if self.unknown is not None and ctx is not None:
            ctx.unknown(self.unknown)
        return Part(component, self.tokens, exact=self.exact)


# -- OpenAI images -------------------------------------------------------------------------

_PATCH = 32
_TILE = 512


#: Chat Completions puts an image of each PDF page beside its text, and bills it as a fixed
#: amount per page whatever the page's size (A4 and letter pages cost the same): measured on the
#: recorded bills, 201-202 tokens on gpt-4o (two projects) and on gpt-5-mini, a tile family and a
#: patch family alike. The models with the 2,500-patch budget (gpt-5.4 and later) see the page
#: larger: 981-984 tokens on gpt-5.4. The larger figure is also taken for gpt-5.2/5.3, which no
#: bill shows (their image budget is as large; erring high).
PAGE_IMAGE_TOKENS = 202
PAGE_IMAGE_TOKENS_LARGE = 984


@dataclass(frozen=True, slots=True)
class _Tiles:
    """The 512px-tile rule: ``base`` tokens, plus ``tile`` per tile at high detail."""

    base: int
    tile: int
    #: The recorded bills reproduce this family's constants exactly.
    confirmed: bool = False
    #: A PDF page's image in Chat Completions (see :data:`PAGE_IMAGE_TOKENS`).
    page: int = PAGE_IMAGE_TOKENS


#: A sizing limit: the longest side allowed, and the patch budget (``None``: no budget).
_Limit = tuple[int, int | None]


@dataclass(frozen=True, slots=True)
class _Patches:
    """The 32px-patch rule: patches (within a sizing limit per detail level) times a multiplier."""

    #: The multiplier in hundredths (integer arithmetic: 1.62 x 1000 patches must not be 1620.0000001).
    multiplier: int
    high: _Limit
    low: _Limit | None = None  # None: the same as high
    original: _Limit | None = None  # None: not supported (read as high)
    #: What ``auto`` (and an omitted detail) means: "high" or "original".
    auto: str = "high"
    #: A PDF page's image in Chat Completions (see :data:`PAGE_IMAGE_TOKENS`).
    page: int = PAGE_IMAGE_TOKENS


#: A patch family's image costs its patches times the multiplier, rounded up, as the vision guide
#: has it, and then 1-2 tokens more on every recorded bill (gpt-4.1-nano and gpt-5.4: 1, gpt-5-mini:
#: 2, in two projects' Chat Completions and Responses bodies): the image's framing, counted high.
#: A tile family's base already holds it (their bills match the guide to the token).
PATCH_IMAGE_FRAMING = 2

_T_4O = _Tiles(85, 170, confirmed=True)
_T_4O_MINI = _Tiles(2833, 5667, confirmed=True)
_T_5 = _Tiles(70, 140)
_T_O = _Tiles(75, 150)
_T_CUA = _Tiles(65, 129)
#: The patch models of 2025 (gpt-4.1-mini/nano, o4-mini, gpt-5-mini/nano): every detail level
#: sizes alike, to a 2048px side and 1,536 patches.
_P_1536 = (2048, 1536)
_LARGE = PAGE_IMAGE_TOKENS_LARGE
_P_52 = _Patches(120, high=(2048, 6144), page=_LARGE)
_P_54 = _Patches(120, high=(2048, 2500), low=(2048, 6144), original=(6000, 10_000), auto="high", page=_LARGE)
_P_55 = _Patches(
    120, high=(2048, 2500), low=(512, None), original=(6000, 10_000), auto="original", page=_LARGE
)
_P_56 = _Patches(
    120, high=(2048, 2500), low=(512, None), original=(65_535, None), auto="original", page=_LARGE
)

#: Model-name prefix -> rule, as OpenAI's vision guide publishes them ("Calculating costs"):
#: the longest matching prefix wins, so ``gpt-4o-mini`` is not read as ``gpt-4o``.
_OPENAI_RULES: dict[str, _Tiles | _Patches] = {
    "gpt-4o": _T_4O,
    "chatgpt-4o": _T_4O,
    "gpt-4.1": _T_4O,
    "gpt-4.5": _T_4O,
    "gpt-4-turbo": _T_4O,
    "gpt-4-vision": _T_4O,
    "gpt-4-1106-vision": _T_4O,
    "gpt-4o-mini": _T_4O_MINI,
    "gpt-5": _T_5,
    "gpt-5-chat": _T_5,
    "gpt-5.1": _T_5,
    "o1": _T_O,
    "o3": _T_O,
    "computer-use-preview": _T_CUA,
    "gpt-4.1-mini": _Patches(162, high=(2048, 6144)),
    "gpt-4.1-nano": _Patches(246, high=_P_1536),
    "o4-mini": _Patches(172, high=_P_1536),
    "codex-mini": _Patches(172, high=_P_1536),
    "gpt-5-mini": _Patches(120, high=_P_1536),
    "gpt-5-nano": _Patches(150, high=_P_1536),
    "gpt-5.2": _P_52,
    "gpt-5.3": _P_52,
    "gpt-5.4": _P_54,
    "gpt-5.5": _P_55,
    "gpt-5.6": _P_56,
}
_OPENAI_PREFIXES = sorted(_OPENAI_RULES, key=len, reverse=True)
_GPT5_MINOR = re.compile(r"gpt-5\.(\d+)")
#: A model no table names: gpt-4o's rule, as an estimate.
_OPENAI_DEFAULT = _Tiles(85, 170)


def _openai_rule(model: str) -> _Tiles | _Patches:
    name = model.rsplit("/", 1)[-1].lower()
    for prefix in _OPENAI_PREFIXES:
        if name.startswith(prefix):
            rest = name[len(prefix) :]
            if not rest or rest[0] == "-":  # gpt-4o-2024-08-06, never gpt-5.7 as gpt-5
                return _OPENAI_RULES[prefix]
    minor = _GPT5_MINOR.match(name)
    if minor is not None and int(minor.group(1)) > 6:  # later models size as the newest do
        return _P_56
    if name.startswith("gpt-6"):
        return _P_56
    return _OPENAI_DEFAULT


def _fit(width: int, height: int, side: int) -> Size:
    """Scaled down (never up) so the longer side is at most ``side``, rounding down."""
    longest = max(width, height)
    if longest <= side:
        return width, height
    scale = side / longest
    return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))


def _patches(width: int, height: int, limit: _Limit) -> int:
    """Patches of the image after the published resize: the side limit, then the patch budget."""
    width, height = _fit(width, height, limit[0])
    budget = limit[1]
    count = math.ceil(width / _PATCH) * math.ceil(height / _PATCH)
    if budget is None or count <= budget:
        return count
    shrink = math.sqrt(_PATCH * _PATCH * budget / (width * height))
    across, down = width * shrink / _PATCH, height * shrink / _PATCH
    # The budget must hold once the image is a whole number of patches wide (or high).
    shrink *= min(math.floor(across + 1e-9) / across, math.floor(down + 1e-9) / down)
    width, height = max(1, math.floor(width * shrink + 1e-9)), max(1, math.floor(height * shrink + 1e-9))
    return min(budget, math.ceil(width / _PATCH) * math.ceil(height / _PATCH))


def _tiles(width: int, height: int) -> int:
    """512px tiles after the published resize: into a 2048px square, then the short side to 768px."""
    width, height = _fit(width, height, 2048)
    short = min(width, height)
    if short > 768:
        scale = 768 / short
        width, height = (
            (768, math.floor(height * scale)) if width == short else (math.floor(width * scale), 768)
        )
    return math.ceil(width / _TILE) * math.ceil(height / _TILE)


def _patch_limit(rule: _Patches, detail: Any) -> _Limit:
    level = detail if detail in ("low", "high", "original") else rule.auto
    if level == "low":
        return rule.low or rule.high
    if level == "original":
        return rule.original or rule.high
    return rule.high


def openai_page_image_tokens(model: str) -> int:
    """What Chat Completions bills for the image of one PDF page on ``model`` (an estimate)."""
    return _openai_rule(model).page


def openai_image_tokens(model: str, size: Size | None, detail: Any) -> Cost:
    """What OpenAI bills for one image on ``model`` at ``detail`` (``low``, ``high``, ``auto``,
    ``original`` or absent), by the model family's published rule.

    ``exact`` only for a rule the recorded bills reproduce (the 512px-tile families whose
    constants they confirm). A patch family's image is billed a token or two beyond the guide's
    figure (:data:`PATCH_IMAGE_FRAMING`), so its counts are estimates. An image whose size is
    unknown costs the rule's bound, flagged unknown, except where the size does not matter (a
    tile family at low detail).
    """
    rule = _openai_rule(model)
    if isinstance(rule, _Tiles):
        if detail == "low":
            return Cost(rule.base, exact=rule.confirmed)
        if size is None:  # the most tiles an image can take: 768 x 2048 after the resize
            return Cost(rule.base + 8 * rule.tile, unknown="image by URL")
        return Cost(rule.base + rule.tile * _tiles(*size), exact=rule.confirmed)
    limit = _patch_limit(rule, detail)
    if size is None:
        most = limit[1] if limit[1] is not None else 10_000
        return Cost(PATCH_IMAGE_FRAMING - (-most * rule.multiplier // 100), unknown="image by URL")
    return Cost(PATCH_IMAGE_FRAMING - (-_patches(*size, limit) * rule.multiplier // 100))


# -- Anthropic images ----------------------------------------------------------------------

_CLAUDE_PATCH = 28
#: (longest side, visual tokens) a model sees an image at: the standard tier, and the
#: high-resolution tier of Claude 4.7 and later models.
_CLAUDE_STANDARD = (1568, 1568)
_CLAUDE_HIGH_RES = (2576, 4784)
_CLAUDE_VERSION = re.compile(r"claude-(?:([a-z]+)-)?(\d{1,2})(?:[-.](\d{1,2}))?(?![0-9])")
#: The framing an image block adds besides its visual tokens (measured: 2-5 tokens per image).
ANTHROPIC_IMAGE_FRAMING = 3


def _claude_tier(model: str) -> tuple[int, int]:
    found = _CLAUDE_VERSION.search(model.lower())
    if found is None:
        return _CLAUDE_STANDARD
    if found.group(1) is None and found.group(3) is not None and int(found.group(2)) < 4:
        # claude-3-5-sonnet: the version comes before the name
        return _CLAUDE_STANDARD
    version = (int(found.group(2)), int(found.group(3) or 0))
    return _CLAUDE_HIGH_RES if version >= (4, 7) else _CLAUDE_STANDARD


def _claude_visual_tokens(width: int, height: int) -> int:
    return math.ceil(width / _CLAUDE_PATCH) * math.ceil(height / _CLAUDE_PATCH)


def claude_resized(width: int, height: int, tier: tuple[int, int]) -> Size:
    """The size Claude sees an image at: the largest that keeps the aspect ratio, a long side
    within the tier's limit and a visual-token count within its budget (never enlarged)."""
    side, budget = tier
    if max(width, height) <= side and _claude_visual_tokens(width, height) <= budget:
        return width, height
    landscape = width >= height
    long_side, short_side = (width, height) if landscape else (height, width)

    def at(length: int) -> Size:
        other = max(1, math.floor(short_side * length / long_side + 0.5))
        return (length, other) if landscape else (other, length)

    low, high = 1, min(long_side, side)
    while low < high:  # the longest long side whose size fits the budget
        mid = (low + high + 1) // 2
        if _claude_visual_tokens(*at(mid)) <= budget:
            low = mid
        else:
            high = mid - 1
    return at(low)


def anthropic_image_tokens(model: str, size: Size | None) -> Cost:
    """What Anthropic bills for an image: one token per 28px patch of the image as resized to
    the model's tier, plus the block's framing. Always an estimate (the counts of this dialect
    are); an image the body does not hold costs the tier's bound, flagged unknown."""
    tier = _claude_tier(model)
    if size is None:
        return Cost(tier[1] + ANTHROPIC_IMAGE_FRAMING, unknown="image by URL")
    return Cost(_claude_visual_tokens(*claude_resized(*size, tier)) + ANTHROPIC_IMAGE_FRAMING)


# -- documents -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PdfDocument:
    """What a PDF's bill depends on: its pages' sizes (points) and the text extracted from each."""

    pages: tuple[Size, ...]
    texts: tuple[str, ...]
    #: False when the file could not be parsed: ``pages`` then comes from counting page
    #: objects, with a letter-size guess, and ``texts`` is empty.
    parsed: bool = True


#: A PDF larger than this (decoded) is not parsed; its pages are counted from the raw bytes.
_MAX_PDF_BYTES = 64 << 20
#: Pages whose text is extracted; the rest of a longer document is estimated from those.
_MAX_TEXT_PAGES = 2_000
_LETTER = (612, 792)
#: A PDF page object (``/Type /Page``, not the ``/Pages`` tree).
_PAGE = re.compile(rb"/Type\s*/Page[^s]")

_lock = threading.Lock()
#: Documents read, by a digest of their bytes (a document is sent again every round).
_by_digest: OrderedDict[bytes, PdfDocument] = OrderedDict()
#: The last strings read, by identity: a round that sends the same string object skips the digest.
_by_identity: OrderedDict[int, tuple[object, PdfDocument]] = OrderedDict()
_CACHED = 64


def _decode(data: str | bytes | bytearray | memoryview) -> bytes:
    if not isinstance(data, str):
        return bytes(data)
    text = data
    if text.startswith("data:"):
        found = data_url_payload(text)
        text = found[1] if found is not None else ""
    try:
        return base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError):
        clean = _NOT_B64.sub("", text)
        return base64.b64decode(clean[: len(clean) // 4 * 4])


def _remember(key: int, data: object, digest: bytes, doc: PdfDocument) -> None:
    with _lock:
        _by_digest[digest] = doc
        _by_digest.move_to_end(digest)
        _by_identity[key] = (data, doc)
        _by_identity.move_to_end(key)
        while len(_by_digest) > _CACHED:
            _by_digest.popitem(last=False)
        while len(_by_identity) > 16:
            _by_identity.popitem(last=False)


def pdf_document(data: str | bytes | bytearray | memoryview) -> PdfDocument:
    """The pages and text of a PDF (base64, a data URL or raw bytes), read once and cached.

    A document is parsed with :mod:`pypdf` the first time it is seen; later rounds of the
    conversation find it by identity or by a digest of its bytes. A file that does not
    parse still gives its page count (from its page objects), never an exception.
    """
    key = id(data)
    seen = _by_identity.get(key)
    if seen is not None and seen[0] is data:
        return seen[1]
    try:
        raw = _decode(data)
    except Exception:
        raw = b""
    digest = hashlib.blake2b(raw, digest_size=16).digest()
    doc = _by_digest.get(digest)
    if doc is None:
        doc = _parse_pdf(raw)
    _remember(key, data, digest, doc)
    return doc


def _parse_pdf(raw: bytes) -> PdfDocument:
    if len(raw) <= _MAX_PDF_BYTES:
        try:
            from pypdf import PdfReader  # imported on the first document: no cost for a text-only process

            reader = PdfReader(io.BytesIO(raw), strict=False)
            sizes: list[Size] = []
            texts: list[str] = []
            for k, page in enumerate(reader.pages):
                box = page.mediabox
                width, height = abs(float(box.width)), abs(float(box.height))
                if int(page.get("/Rotate", 0) or 0) % 180:
                    width, height = height, width
                sizes.append((max(1, round(width)), max(1, round(height))))
                if k < _MAX_TEXT_PAGES:
                    texts.append(page.extract_text() or "")
            if sizes:
                return PdfDocument(tuple(sizes), tuple(texts))
        except Exception:  # a damaged or encrypted file: counted from its page objects
            log.debug("otel-ctx: PDF not parsed; counting its page objects", exc_info=True)
    pages = max(1, len(_PAGE.findall(raw)))
    return PdfDocument((_LETTER,) * pages, (), parsed=False)


def pdf_pages(data: str | bytes | bytearray | memoryview) -> int:
    """Pages of a PDF (base64 text, a data URL, or the raw bytes an SDK holds); at least one."""
    return len(pdf_document(data).pages)


def _text_tokens(doc: PdfDocument, count: Count, unparsed_page: int) -> int:
    """Tokens of the document's text; pages beyond those extracted at the extracted pages' mean."""
    if not doc.parsed:
        return unparsed_page * len(doc.pages)
    n = sum(count(t) for t in doc.texts if t)
    if len(doc.texts) < len(doc.pages) and doc.texts:
        n = n * len(doc.pages) // len(doc.texts)
    return n


#: OpenAI: the framing of a file part (the markers around its text; its name is not billed),
#: measured: 15-16 tokens beside a PDF's page images in Chat Completions; 4-14 in Responses.
OPENAI_FILE_FRAMING = 15
#: Text tokens of a page that could not be read: the upper end of a dense page.
UNREAD_PAGE_TEXT_TOKENS = 3_000
#: Anthropic: the framing of a document block (measured: about 35 tokens for a short text document).
ANTHROPIC_DOCUMENT_FRAMING = 35
#: A file of a type whose text cannot be read (neither text nor an Office document): a token
#: per this many bytes, the rate of dense text, as an estimate flagged unknown.
UNREAD_BYTES_PER_TOKEN = 4
#: A spreadsheet (``.csv``, ``.tsv``, ``.xlsx`` ...) is read by its first 1,000 rows a sheet, as
#: the file-inputs guide says, with a summary and header notes the API writes itself: 18 tokens
#: beyond the file's text and framing on the one recorded bill (a 5-row, 4-column CSV on gpt-5.4);
#: a larger sheet's may be longer.
SPREADSHEET_ROWS = 1_000
SPREADSHEET_SUMMARY_TOKENS = 18
#: The most bytes read out of one member of an Office document (a zip): a bound on what a
#: hostile archive can make the reader inflate.
_MAX_MEMBER_BYTES = 32 << 20


def _is_pdf(media: str | None, filename: Any, raw_head: bytes) -> bool:
    named = media is None and isinstance(filename, str) and filename.lower().endswith(".pdf")
    return raw_head.startswith(b"%PDF") or media == "application/pdf" or named


def openai_file_tokens(data: Any, filename: Any, count: Count, *, page_images: bool, model: str = "") -> Cost:
    """An inline file (``file_data``) as OpenAI bills it: a PDF's extracted text (and, where the
    API adds them, an image of each page at ``model``'s rate), an Office document's extracted text
    (``.docx``, ``.pptx``, ``.xlsx``, OpenDocument), any other text file its text; never its
    base64. ``count`` tokenizes text. Always an estimate; a binary file of another type is
    estimated from its size and flagged unknown."""
    if not isinstance(data, str):
        return openai_file_bound(model)
    found = data_url_payload(data)
    media, payload = found if found is not None else (None, data)
    head = _b64_prefix(payload, 8)
    if _is_pdf(media, filename, head):
        doc = pdf_document(payload)
        n = _text_tokens(doc, count, UNREAD_PAGE_TEXT_TOKENS)
        if page_images:
            n += openai_page_image_tokens(model) * len(doc.pages)
        return Cost(OPENAI_FILE_FRAMING + n)
    text, size, sheet = _read_file(payload)
    if text is None:
        guess = size // UNREAD_BYTES_PER_TOKEN
        return Cost(OPENAI_FILE_FRAMING + guess, unknown="file of an unread type")
    if sheet or _is_spreadsheet(media, filename):
        # The API reads a sheet's first rows and adds a summary of its own.
        text = "\n".join(text.split("\n", SPREADSHEET_ROWS)[:SPREADSHEET_ROWS])
        return Cost(OPENAI_FILE_FRAMING + SPREADSHEET_SUMMARY_TOKENS + count(text))
    return Cost(OPENAI_FILE_FRAMING + count(text))


#: The text types OpenAI reads as spreadsheets (a delimited text file; an Excel workbook is known
#: by its parts).
_SHEET_TYPES = frozenset({"text/csv", "text/tab-separated-values", "application/csv"})
_SHEET_SUFFIXES = (".csv", ".tsv", ".iif")


def _is_spreadsheet(media: str | None, filename: Any) -> bool:
    named = isinstance(filename, str) and filename.lower().endswith(_SHEET_SUFFIXES)
    return media in _SHEET_TYPES or named


#: Files read (their text, or ``None``, their size in bytes, and whether they are an Office
#: spreadsheet), by a digest of their base64 text: a file is sent again every round, and an
#: Office document is only inflated once.
_files_read: OrderedDict[bytes, tuple[str | None, int, bool]] = OrderedDict()


def _read_file(payload: str) -> tuple[str | None, int, bool]:
    digest = hashlib.blake2b(payload.encode("utf-8", "replace"), digest_size=16).digest()
    with _lock:
        found = _files_read.get(digest)
    if found is not None:
        return found
    try:
        raw = _decode(payload)
    except Exception:
        raw = b""
    text, sheet = _extract(raw)
    found = (text, len(raw), sheet)
    with _lock:
        _files_read[digest] = found
        while len(_files_read) > _CACHED:
            _files_read.popitem(last=False)
    return found


def openai_file_bound(model: str = "") -> Cost:
    """A file the body only names (a file id or URL): one dense page, flagged unknown."""
    return Cost(
        OPENAI_FILE_FRAMING + UNREAD_PAGE_TEXT_TOKENS + openai_page_image_tokens(model), unknown="file by id"
    )


# -- the text the API extracts from a file ---------------------------------------------------

#: The XML parts of an Office document that hold its text, in reading order: Word's body,
#: PowerPoint's slides, Excel's shared strings and sheets, and OpenDocument's content.
_OFFICE_PARTS = (
    re.compile(r"word/document\.xml"),
    re.compile(r"ppt/slides/slide(\d+)\.xml"),
    re.compile(r"xl/worksheets/sheet(\d+)\.xml"),
    re.compile(r"content\.xml"),
)
_SHEET_RANK = 2
_SHARED_STRINGS = "xl/sharedStrings.xml"
#: A spreadsheet's row and cell (its attributes, then its body), a shared string, a cell's value.
_ROW = re.compile(r"<row\b[^>]*?(?:/>|>(.*?)</row>)", re.S)
_CELL = re.compile(r"<c\b([^>]*?)(?:/>|>(.*?)</c>)", re.S)
_SHARED = re.compile(r"<si>(.*?)</si>", re.S)
_VALUE = re.compile(r"<v>(.*?)</v>", re.S)
#: A paragraph (Word ``w:p``, DrawingML ``a:p``, OpenDocument ``text:p``/``text:h``), a spreadsheet
#: row (``row``), and a break or tab inside one.
_BLOCK_END = re.compile(r"</(?:w:p|a:p|text:p|text:h|row)>")
_BREAK = re.compile(r"<(?:w:br|a:br|text:line-break)\b[^>]*/?>")
_TAB = re.compile(r"<(?:w:tab|text:tab)\b[^>]*/>")
_TAG = re.compile(r"<[^>]*>")
_SPACES = re.compile(r"[ \t]*\n[ \t\n]*")


def _xml_text(xml: str) -> str:
    """The text of an Office XML part: one line a paragraph (or row), tags dropped, entities read."""
    xml = _BLOCK_END.sub("\n", xml)
    xml = _BREAK.sub("\n", xml)
    xml = _TAB.sub("\t", xml)
    return _SPACES.sub("\n", html.unescape(_TAG.sub("", xml))).strip()


def _sheet_text(xml: str, shared: list[str]) -> str:
    """A worksheet as the API reads it: its first :data:`SPREADSHEET_ROWS` rows, a line each, the
    cells comma-separated (a shared string by its text, an inline string, else the value)."""
    lines: list[str] = []
    for row in _ROW.finditer(xml):
        if len(lines) >= SPREADSHEET_ROWS:
            break
        cells = []
        for cell in _CELL.finditer(row.group(1) or ""):
            attrs, body = cell.group(1), cell.group(2) or ""
            value = _VALUE.search(body)
            if 't="s"' in attrs and value is not None and value.group(1).strip().isdigit():
                k = int(value.group(1))
                cells.append(shared[k] if k < len(shared) else "")
            elif value is not None:
                cells.append(html.unescape(value.group(1)))
            else:
                cells.append(_xml_text(body))
        lines.append(",".join(cells))
    return "\n".join(lines)


def _office_text(raw: bytes) -> tuple[str | None, bool]:
    """The text of an Office Open XML or OpenDocument file, its parts in reading order (``None``
    when the archive holds none of their text parts, or is no archive), and whether it is a
    spreadsheet."""
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            names = archive.namelist()
            found: list[tuple[int, int, str]] = []
            for name in names:
                for rank, pattern in enumerate(_OFFICE_PARTS):
                    match = pattern.fullmatch(name)
                    if match is not None:
                        number = int(match.group(1)) if match.groups() else 0
                        found.append((rank, number, name))
                        break
            if not found:
                return None, False

            def part(name: str) -> str:
                with archive.open(name) as member:
                    return member.read(_MAX_MEMBER_BYTES).decode("utf-8", "replace")

            shared = (
                [_xml_text(si) for si in _SHARED.findall(part(_SHARED_STRINGS))]
                if _SHARED_STRINGS in names
                else []
            )
            texts = [
                _sheet_text(part(name), shared) if rank == _SHEET_RANK else _xml_text(part(name))
                for rank, _, name in sorted(found)
            ]
            sheet = any(rank == _SHEET_RANK for rank, _, _ in found)
            return "\n\n".join(t for t in texts if t), sheet
    except Exception:  # a damaged archive: its type is unknown to the reader
        log.debug("otel-ctx: Office document not read", exc_info=True)
        return None, False


def _extract(raw: bytes) -> tuple[str | None, bool]:
    """:func:`file_text`, and whether the file is an Office spreadsheet."""
    if raw.startswith(b"PK\x03\x04"):
        return _office_text(raw)
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return raw.decode("utf-16", "replace"), False
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        return None, False


def file_text(raw: bytes) -> str | None:
    """The text the API extracts from a non-PDF file: an Office document's text (a spreadsheet's
    first rows), a text file's own (UTF-8, or UTF-16 with its byte-order mark); ``None`` for any
    other binary file."""
    return _extract(raw)[0]


def anthropic_pdf_tokens(model: str, data: Any, count: Count) -> Cost:
    """A base64 PDF as Anthropic bills it: each page's text plus an image of the page, which
    the API renders at the model's full resolution (so it costs the tier's most visual tokens
    for the page's shape), plus the document's framing. Always an estimate."""
    doc = pdf_document(data) if isinstance(data, (str, bytes, bytearray, memoryview)) else None
    if doc is None:
        return anthropic_document_bound(model)
    tier = _claude_tier(model)
    images = 0
    for width, height in doc.pages:
        scale = tier[0] / max(width, height)  # rendered large, then resized to the tier's limits
        page = (max(1, round(width * scale)), max(1, round(height * scale)))
        images += _claude_visual_tokens(*claude_resized(*page, tier))
    return Cost(ANTHROPIC_DOCUMENT_FRAMING + images + _text_tokens(doc, count, UNREAD_PAGE_TEXT_TOKENS))


def anthropic_document_bound(model: str) -> Cost:
    """A document the body only names (a URL, a file id): one dense page, flagged unknown."""
    tier = _claude_tier(model)
    return Cost(ANTHROPIC_DOCUMENT_FRAMING + tier[1] + UNREAD_PAGE_TEXT_TOKENS, unknown="file by id")


# -- audio ---------------------------------------------------------------------------------

#: Audio input is billed by duration: one token per 100 ms (measured on the recorded bills:
#: the ``audio_tokens`` they report are a clip's length in tenths of a second).
AUDIO_MS_PER_TOKEN = 100
#: A clip whose length cannot be read: one token per kilobyte errs high for every format
#: the APIs take (16-bit PCM is about 10 tokens per 32 kB second).
AUDIO_BYTES_PER_TOKEN = 1_000
#: A Chat Completions audio part is framed by 4 text tokens besides its clip (measured: the bills'
#: ``text_tokens`` are the text's, the messages' and the reply's, and 4 more for the clip).
AUDIO_PART_FRAMING = 4
#: MPEG-1 Layer III bitrates (kbit/s) by the header's index; MPEG-2/2.5 Layer III the second row.
_MP3_KBPS = (
    (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0),
    (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0),
)


def _audio_ms(raw: bytes, total: int) -> float | None:
    """A clip's length in milliseconds from its header: WAV's byte rate, MP3's first frame."""
    if raw[:4] == b"RIFF" and raw[8:12] == b"WAVE":
        i = 12
        rate = 0
        while i + 8 <= len(raw):
            chunk, size = raw[i : i + 4], int.from_bytes(raw[i + 4 : i + 8], "little")
            if chunk == b"fmt " and i + 20 <= len(raw):
                rate = int.from_bytes(raw[i + 16 : i + 20], "little")
            if chunk == b"data":
                data = min(size, total - i - 8)
                return data * 1000 / rate if rate > 0 else None
            i += 8 + size + (size & 1)
        return None
    i = 0
    if raw[:3] == b"ID3" and len(raw) >= 10:  # a tag before the first frame: its size is syncsafe
        i = 10 + ((raw[6] & 0x7F) << 21 | (raw[7] & 0x7F) << 14 | (raw[8] & 0x7F) << 7 | (raw[9] & 0x7F))
    if i + 4 <= len(raw) and raw[i] == 0xFF and raw[i + 1] & 0xE0 == 0xE0:
        version = (raw[i + 1] >> 3) & 3  # 3: MPEG-1
        layer = (raw[i + 1] >> 1) & 3  # 1: Layer III
        kbps = _MP3_KBPS[0 if version == 3 else 1][raw[i + 2] >> 4] if layer == 1 else 0
        return (total - i) * 8 / kbps if kbps else None
    return None


def audio_tokens(data: str, fmt: Any = None) -> int:
    """Tokens of a base64 audio clip: its duration at one token per 100 ms where the header
    tells it (WAV, constant-bitrate MP3), else one per kilobyte. An estimate either way."""
    try:
        raw = _b64_prefix(data, 64 << 10)
        total = len(data.rstrip("=")) * 3 // 4
        ms = _audio_ms(raw, total)
    except Exception:
        ms = None
    if ms is None:
        return max(1, len(data) * 3 // 4 // AUDIO_BYTES_PER_TOKEN)
    return max(1, int(ms // AUDIO_MS_PER_TOKEN))
