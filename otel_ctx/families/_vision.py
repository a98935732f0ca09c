"""What an image costs the open-weight vision models, by their published image processors.

Each family cuts an image into patches its own way and bills one token a patch plus its
markers; the size comes from the image's header (a ``data:`` URL). An image given by URL has
no size in the body: None, and the adapter's bound stands.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from otel_ctx.adapters._media import image_size

#: Pixels -> tokens of one image (None: the size is unknown).
ImageRule = Callable[[int, int], int]


def image_sizes(messages: Sequence[Any]) -> list[tuple[int, int] | None]:
    """The sizes of the messages' ``image_url`` parts, in order."""
    out: list[tuple[int, int] | None] = []
    for m in messages:
        content = m.get("content") if isinstance(m, Mapping) else None
        if not isinstance(content, Sequence) or isinstance(content, str):
            continue
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "image_url":
                continue
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            size = image_size(url) if isinstance(url, str) and url.startswith("data:") else None
            out.append((int(size[0]), int(size[1])) if size else None)
    return out


def mistral(patch: int, longest: int) -> ImageRule:
    """Pixtral's encoder: the image scaled to fit ``longest``, one ``[IMG]`` a ``patch`` square,
    an ``[IMG_BREAK]`` a row (the last an ``[IMG_END]``)."""

    def tokens(width: int, height: int) -> int:
        scale = min(1.0, longest / max(width, height, 1))
        cols = math.ceil(width * scale / patch)
        rows = math.ceil(height * scale / patch)
        return rows * (cols + 1)

    return tokens


def llama4(width: int, height: int, tile: int = 336, per_tile: int = 144, max_tiles: int = 16) -> int:
    """Llama 4: the image fitted to the canvas of ``tile`` squares that needs the least upscaling
    (else the least downscaling), 144 patches a tile with separators, and a global tile."""
    best: tuple[float, int, int, int] | None = None
    for cols in range(1, max_tiles + 1):
        for rows in range(1, max_tiles // cols + 1):
            scale = min(cols * tile / width, rows * tile / height)
            # Upscaling canvases first (smallest scale), then downscaling ones (largest scale).
            key = (scale if scale >= 1 else 1e9 - scale, cols * rows, cols, rows)
            if best is None or key < best:
                best = key
    assert best is not None
    _, _, cols, rows = best
    if cols * rows == 1:
        return 3 + per_tile  # <|image_start|><|image|> patches <|image_end|>
    return 1 + rows * (cols * per_tile + cols - 1 + 1) + 1 + per_tile + 1


def qwen_vl(width: int, height: int, factor: int = 28) -> int:
    """Qwen2.5-VL: each side rounded to a multiple of 28, one token a 28-pixel square, and the
    ``<|vision_start|>``/``<|vision_end|>`` markers."""
    w = max(factor, round(width / factor) * factor)
    h = max(factor, round(height / factor) * factor)
    return (w // factor) * (h // factor) + 2
