"""Synthetic images for multimodal requests: unique per request, cheap to make.

Servers cache multimodal inputs by content hash (vLLM's mm cache), so a load test that repeats one
image measures the cache, not the tokenizer/processor path. Each image here is a shared gradient with a
random patch pasted at a random place: unique bytes, yet encoding stays a few milliseconds.
"""

from __future__ import annotations

import base64
import io
import random
from functools import lru_cache

FORMATS = ("png", "jpeg")
_PATCH = 16


@lru_cache(maxsize=16)
def _base(width: int, height: int):  # -> PIL.Image.Image; Pillow imported lazily
    from PIL import Image

    gradient = Image.linear_gradient("L").resize((width, height))
    return Image.merge("RGB", (gradient, gradient.transpose(Image.Transpose.FLIP_LEFT_RIGHT), gradient))


def make_image(width: int, height: int, fmt: str, rng: random.Random | None) -> bytes:
    """Encoded image bytes; `rng=None` gives the fixed image used by identical-request repeats."""
    from PIL import Image

    image = _base(width, height).copy()
    if rng is not None:
        patch = Image.frombytes("RGB", (_PATCH, _PATCH), rng.randbytes(_PATCH * _PATCH * 3))
        image.paste(patch, (rng.randrange(max(1, width - _PATCH)), rng.randrange(max(1, height - _PATCH))))
    out = io.BytesIO()
    if fmt == "png":
        image.save(out, "PNG", compress_level=1)  # level 1: fast; the bytes are unique either way
    else:
        image.save(out, "JPEG", quality=85)
    return out.getvalue()


def data_url(data: bytes, fmt: str) -> str:
    return f"data:image/{fmt};base64,{base64.b64encode(data).decode('ascii')}"
