"""Gemini's media, priced as Google documents it: images by size, audio and video by length,
PDFs by page, text files as their text.

Gemini 2.x bills an image whose sides are both at most 384 pixels 258 tokens, a larger one 258
per tile (tiles of a side two thirds of its shorter side, at least 256 and at most 768 pixels)
and one more for the whole image;
a PDF 258 a page; audio 32 tokens a second; video 263 a second (a frame a second and its
sound). Gemini 3 bills by media resolution (the request's ``mediaResolution`` or a part's own):
an image 280, 560, 1,120 (the default) or 2,240 tokens from low to ultra high, a PDF page 280,
560 (the default) or 1,120, a video frame 70 (the default) or 280 at high. On Gemini 2.x a low
resolution bills 64 tokens an image, page or frame. The length of audio and video is read from
the container's header (MP3 frames, WAV's byte rate, MP4's ``mvhd``); when it cannot be read the
count is an estimate from the size at a common bit rate.
"""

from __future__ import annotations

import base64
import binascii
import math
from dataclasses import dataclass
from typing import Any

from otel_ctx.adapters._media import image_size, pdf_pages

#: Gemini 2.x's figures.
IMAGE_TILE = 258
SMALL_IMAGE_SIDE = 384
PDF_PAGE = 258
AUDIO_PER_SECOND = 32
VIDEO_PER_SECOND = 263
#: Gemini 3's defaults (``media_resolution`` unset): an image, a PDF page, a video frame.
GEMINI3_IMAGE = 1_120
GEMINI3_PDF_PAGE = 560
GEMINI3_VIDEO_PER_SECOND = 70 + AUDIO_PER_SECOND
#: Gemini 3 by media resolution: an image, a PDF page, a video frame.
_GEMINI3_IMAGE = {"low": 280, "medium": 560, "high": GEMINI3_IMAGE, "ultra_high": 2_240}
_GEMINI3_PAGE = {"low": 280, "medium": GEMINI3_PDF_PAGE, "high": 1_120, "ultra_high": 1_120}
_GEMINI3_FRAME = {"low": 70, "medium": 70, "high": 280, "ultra_high": 280}
#: Gemini 2.x at low media resolution: an image, a page or a frame.
LOW_RESOLUTION = 64
#: When a length cannot be read: the size at 128 kbit/s (audio) or 1 Mbit/s (video), erring long.
_AUDIO_BYTES_PER_SECOND = 16_000
_VIDEO_BYTES_PER_SECOND = 125_000
_MP3_BITRATES = (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0)
_MP3_V2_BITRATES = (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0)
_MP3_RATES = (44_100, 48_000, 32_000, 0)


@dataclass(frozen=True, slots=True)
class MediaCost:
    """Tokens of one inline blob; ``exact`` when they follow from what the bytes say."""

    tokens: int
    exact: bool


def _bytes(data: Any) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if not isinstance(data, str):
        return b""
    text = data.strip()
    text = text.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=False)
    except (binascii.Error, ValueError):
        return b""


def resolution(raw: Any) -> str | None:
    """``MEDIA_RESOLUTION_LOW`` (or ``{"level": ...}``, or ``low``) as ``low``; None when unset."""
    if isinstance(raw, dict):
        raw = raw.get("level")
    name = getattr(raw, "value", raw)  # the SDK's enum
    if not isinstance(name, str):
        return None
    name = name.lower().removeprefix("media_resolution_")
    return name if name in _GEMINI3_IMAGE else None


def image_tokens(data: Any, third: bool, level: str | None = None) -> MediaCost:
    """An inline image: by its size read from the header (Gemini 2.x), or Gemini 3's figure."""
    if third:
        return MediaCost(_GEMINI3_IMAGE.get(level or "high", GEMINI3_IMAGE), False)
    if level == "low":
        return MediaCost(LOW_RESOLUTION, False)
    size = image_size(data)
    if size is None:
        return MediaCost(IMAGE_TILE * 4, False)  # unreadable: four tiles, a common photo's
    width, height = size
    if width <= SMALL_IMAGE_SIDE and height <= SMALL_IMAGE_SIDE:
        return MediaCost(IMAGE_TILE, True)
    unit = min(768, max(256, min(width, height) * 2 // 3))
    tiles = math.ceil(width / unit) * math.ceil(height / unit)
    # Tiled, the image is also seen whole, downscaled: one tile more (measured on a 540x360 JPEG).
    return MediaCost(IMAGE_TILE * (tiles + (tiles > 1)), False)


def pdf_tokens(data: Any, third: bool, level: str | None = None) -> MediaCost:
    """A PDF: its pages at the per-page figure."""
    raw = data if isinstance(data, (str, bytes, bytearray)) else b""
    pages = pdf_pages(raw) if raw else 1
    if third:
        page = _GEMINI3_PAGE.get(level or "medium", GEMINI3_PDF_PAGE)
    else:
        page = LOW_RESOLUTION if level == "low" else PDF_PAGE
    return MediaCost(page * pages, False)


def audio_tokens(data: Any) -> MediaCost:
    """Audio at 32 tokens a second of its length."""
    raw = _bytes(data)
    seconds = _audio_seconds(raw)
    if seconds is None:
        return MediaCost(math.ceil(len(raw) / _AUDIO_BYTES_PER_SECOND * AUDIO_PER_SECOND), False)
    return MediaCost(math.ceil(seconds * AUDIO_PER_SECOND), False)


def video_tokens(data: Any, third: bool, level: str | None = None) -> MediaCost:
    """Video at its per-second figure (a frame a second and its sound); a length that cannot be
    read is estimated from its size."""
    raw = _bytes(data)
    if third:
        rate = _GEMINI3_FRAME.get(level or "medium", 70) + AUDIO_PER_SECOND
    else:
        rate = LOW_RESOLUTION + AUDIO_PER_SECOND if level == "low" else VIDEO_PER_SECOND
    seconds = _mp4_seconds(raw)
    if seconds is None:
        seconds = len(raw) / _VIDEO_BYTES_PER_SECOND
    return MediaCost(math.ceil(seconds * rate), False)


def _audio_seconds(raw: bytes) -> float | None:
    if raw[:4] == b"RIFF" and raw[8:12] == b"WAVE":
        return _wav_seconds(raw)
    return _mp3_seconds(raw)


def _wav_seconds(raw: bytes) -> float | None:
    byte_rate = int.from_bytes(raw[28:32], "little")
    if byte_rate <= 0:
        return None
    return max(0, len(raw) - 44) / byte_rate


def _mp3_seconds(raw: bytes) -> float | None:
    """An MP3's length: its Xing/Info frame count where the encoder wrote one (VBR and most
    CBR files), else its size over the first frame's bit rate (ID3 tag skipped)."""
    start = 0
    if raw[:3] == b"ID3" and len(raw) >= 10:
        size = 0
        for b in raw[6:10]:
            size = (size << 7) | (b & 0x7F)
        start = 10 + size
    limit = min(len(raw) - 4, start + 65_536)
    for i in range(start, max(start, limit)):
        if raw[i] != 0xFF or raw[i + 1] & 0xE0 != 0xE0:
            continue
        version = (raw[i + 1] >> 3) & 3  # 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5
        layer = (raw[i + 1] >> 1) & 3  # 1: layer III
        rate = _MP3_RATES[(raw[i + 2] >> 2) & 3] >> (0 if version == 3 else 1 if version == 2 else 2)
        index = raw[i + 2] >> 4
        bitrate = (_MP3_BITRATES if version == 3 else _MP3_V2_BITRATES)[index]
        if layer != 1 or version == 1 or not bitrate or not rate:
            continue
        samples = 1152 if version == 3 else 576
        head = raw[i : i + 200]
        for tag in (b"Xing", b"Info"):
            at = head.find(tag)
            if at > 0 and len(head) >= at + 12 and head[at + 7] & 1:
                frames = int.from_bytes(head[at + 8 : at + 12], "big")
                if frames > 0:
                    return frames * samples / rate
        return (len(raw) - i) * 8 / (bitrate * 1000)
    return None


def _mp4_seconds(raw: bytes) -> float | None:
    """The length an MP4's ``mvhd`` box gives (its time scale and duration)."""
    at = raw.find(b"mvhd")
    if at < 4 or len(raw) < at + 32:
        return None
    version = raw[at + 4]
    if version == 1:
        scale = int.from_bytes(raw[at + 24 : at + 28], "big")
        duration = int.from_bytes(raw[at + 28 : at + 36], "big")
    else:
        scale = int.from_bytes(raw[at + 16 : at + 20], "big")
        duration = int.from_bytes(raw[at + 20 : at + 24], "big")
    return duration / scale if scale > 0 else None
