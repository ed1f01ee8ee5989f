"""Image handling like a Qwen-VL processor: decode, resize to bounds, count 28x28 patches.

Every image becomes one `<|image_pad|>` placeholder per 28x28 patch of the resized image (1280 at
most by default), which is what makes multimodal prompts long and tokenizer-heavy in production.
Input is untrusted: data URLs only unless remote images are allowed, a pixel budget checked from the
header before anything is decoded, and Pillow's own decompression-bomb guard.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import math
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

FORMATS = frozenset({"PNG", "JPEG", "WEBP", "GIF"})


class ImageError(ValueError):
    """The image cannot be used; the message is safe to show the client."""


@dataclass(frozen=True)
class ImageBounds:
    """Qwen2-VL's defaults: 28-pixel patches (14-pixel patches merged 2x2), 4 to 1280 patches."""

    factor: int = 28
    min_pixels: int = 4 * 28 * 28
    max_pixels: int = 1280 * 28 * 28
    max_source_pixels: int = 40_000_000  # refuse before decoding anything larger
    max_aspect_ratio: float = 200.0
    max_remote_bytes: int = 20 * 1024 * 1024
    remote_timeout_s: float = 10.0  # for the whole fetch: a server that drips bytes cannot hold us longer


def smart_resize(height: int, width: int, bounds: ImageBounds) -> tuple[int, int]:
    """Qwen-VL's target size: both sides multiples of `factor`, area within [min_pixels, max_pixels]."""
    if max(height, width) / max(1, min(height, width)) > bounds.max_aspect_ratio:
        raise ImageError(f"image aspect ratio exceeds {bounds.max_aspect_ratio:g}: {width}x{height}")
    f = bounds.factor
    h = max(f, round(height / f) * f)
    w = max(f, round(width / f) * f)
    if h * w > bounds.max_pixels:
        beta = math.sqrt(height * width / bounds.max_pixels)
        h = max(f, math.floor(height / beta / f) * f)
        w = max(f, math.floor(width / beta / f) * f)
    elif h * w < bounds.min_pixels:
        beta = math.sqrt(bounds.min_pixels / (height * width))
        h = math.ceil(height * beta / f) * f
        w = math.ceil(width * beta / f) * f
    return h, w


def is_remote(url: str) -> bool:
    return url.split(":", 1)[0].lower() in ("http", "https")


def load_bytes(url: str, bounds: ImageBounds, allow_remote: bool, allow_remote_name: str = "allow_remote_images") -> bytes:
    """The bytes of a data: URL. A remote URL is refused unless allowed, and then fetched by
    `fetch_remote` on the event loop (never here, on the image thread)."""
    scheme = url.split(":", 1)[0].lower()
    if scheme == "data":
        header, sep, payload = url.partition(",")
        if not sep or not header.lower().endswith(";base64"):
            raise ImageError("data URL must look like data:image/png;base64,<data>")
        media = header[5:].split(";", 1)[0].lower()
        if media and not media.startswith("image/"):
            raise ImageError(f"data URL media type {media!r} is not an image")
        try:
            return base64.b64decode("".join(payload.split()), validate=True)
        except (binascii.Error, ValueError):
            raise ImageError("data URL payload is not valid base64") from None
    if scheme in ("http", "https"):
        if not allow_remote:
            raise ImageError(f"remote image URLs are refused; start the server with {allow_remote_name} "
                             "or send the image as a data: URL")
        raise ImageError("a remote image must be fetched with fetch_remote first")
    raise ImageError(f"unsupported image URL scheme {scheme!r}; use a data: URL")


async def fetch_remote(url: str, bounds: ImageBounds) -> bytes:
    """GET an image (only with allow_remote_images): a timeout for the whole exchange, a size limit
    checked as the body arrives, redirects only to http(s)."""
    import aiohttp  # only a server that allows remote images needs it

    timeout = aiohttp.ClientTimeout(total=bounds.remote_timeout_s)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as response:
            if response.status != 200:
                raise ImageError(f"cannot fetch image: HTTP {response.status}")
            if (response.content_length or 0) > bounds.max_remote_bytes:
                raise ImageError(f"remote image larger than {bounds.max_remote_bytes} bytes")
            data = bytearray()
            async for chunk in response.content.iter_chunked(64 << 10):
                data += chunk
                if len(data) > bounds.max_remote_bytes:
                    raise ImageError(f"remote image larger than {bounds.max_remote_bytes} bytes")
            return bytes(data)
    except ImageError:
        raise
    except asyncio.TimeoutError:
        raise ImageError(f"cannot fetch image: no complete answer within {bounds.remote_timeout_s:g} s") from None
    except (aiohttp.ClientError, OSError, ValueError) as exc:  # ValueError: a URL aiohttp cannot parse
        raise ImageError(f"cannot fetch image: {type(exc).__name__}: {exc}"[:300]) from None


def patch_count(data: bytes, bounds: ImageBounds) -> int:
    """Decode and resize the image as a processor would; return its number of placeholder tokens."""
    try:
        image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError:
        raise ImageError("image exceeds the decompression-bomb pixel limit") from None
    except (UnidentifiedImageError, OSError, ValueError):
        raise ImageError("cannot decode image (PNG, JPEG, WEBP or GIF expected)") from None
    with image:
        if image.format not in FORMATS:
            raise ImageError(f"image format {image.format} is not supported (PNG, JPEG, WEBP, GIF)")
        width, height = image.size
        if width < 1 or height < 1 or width * height > bounds.max_source_pixels:
            raise ImageError(f"image of {width}x{height} pixels exceeds {bounds.max_source_pixels} pixels")
        target_h, target_w = smart_resize(height, width, bounds)
        if image.format == "JPEG":
            image.draft("RGB", (target_w, target_h))  # decode at reduced scale: same result, less CPU
        try:
            image.convert("RGB").resize((target_w, target_h), Image.Resampling.BICUBIC)
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
            raise ImageError(f"cannot decode image: {exc}") from None
    return (target_h // bounds.factor) * (target_w // bounds.factor)
