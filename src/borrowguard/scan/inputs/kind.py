"""What an input is, told from its first bytes: gzip, text in another encoding, or not a log at all.

Only the start of an input is looked at (SNIFF bytes, already decompressed where it was gzip); reading
it is the business of borrowguard.scan.inputs.stream.
"""

from __future__ import annotations

import codecs
import re

GZIP_MAGIC = b"\x1f\x8b"
SNIFF = 64 * 1024
"""How much of an input's start decides what it is."""

_BOMS = (  # longest first: UTF-32 LE starts like UTF-16 LE
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_OTHER_COMPRESSION = (
    (b"\xfd7zXZ\x00", "xz-compressed", "xz -dc"),
    (b"BZh", "bzip2-compressed", "bzip2 -dc"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed", "zstd -dc"),
    (b"PK\x03\x04", "a zip archive", "unzip -p"),
)
_HOLE = re.compile(b"\x00{16,}")
"""A run of NUL bytes is a hole (a log cut by copytruncate while its writer kept its offset, a crash), not
evidence of a binary file; NULs scattered among other bytes are."""
_NON_TEXT = bytes(c for c in range(1, 32) if c not in b"\t\n\v\f\r\x1b\b") + b"\x7f"


def text_encoding(head: bytes) -> tuple[str | None, int]:
    """(codec, length of its byte-order mark) for a text that is not plain UTF-8 / ASCII, else (None, 0).
    UTF-8 with a BOM gives ("utf-8", 3): the mark is dropped, the bytes stay as they are."""
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return codec, len(bom)
    sample = head[:4096]
    if len(sample) >= 16:
        even, odd = sample[0::2], sample[1::2]
        # ASCII as UTF-16 without a mark: every other byte is NUL (`Out-File -NoBOM`, some tools).
        if odd.count(0) >= 0.9 * len(odd) and even.count(0) <= 0.1 * len(even):
            return "utf-16-le", 0
        if even.count(0) >= 0.9 * len(even) and odd.count(0) <= 0.1 * len(odd):
            return "utf-16-be", 0
    return None, 0


def not_text(head: bytes) -> str | None:
    """Why `head` (the start of an input, already decompressed) is not a log, or None when it is text."""
    for magic, what, command in _OTHER_COMPRESSION:
        if head.startswith(magic):
            return f"it is {what}; decompress it first, e.g. `{command} FILE | borrowguard scan -`"
    body = _HOLE.sub(b"", head)
    if not body:
        return None  # empty, or nothing but a hole so far: read it as text
    if b"\x00" in body:
        return "it looks binary (NUL bytes in its first block), not like a log"
    controls = len(body) - len(body.translate(None, _NON_TEXT))
    text = body.decode("utf-8", "replace")
    invalid = text.count("\ufffd") - body.count("\ufffd".encode())
    if controls + invalid > 0.3 * len(body):
        return "it looks binary (mostly non-text bytes in its first block), not like a log"
    return None
