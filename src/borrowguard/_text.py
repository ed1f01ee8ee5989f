"""Text that came from elsewhere (a server's error body, a log line, a model name), made safe to print.

A terminal obeys escape sequences: a hostile or broken server must not retitle the window, clear the
screen or hide lines. Everything printed from outside goes through `printable`. A secret (the API key, a
URL's password) in outside text is masked where the text comes in, before it is cut (`mask`, then
`clip`): never over a whole document, where a key like `PASS` or `token` would mangle our own words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote, unquote, urlsplit, urlunsplit

# ESC-introduced sequences (CSI, OSC up to BEL or ST, two-character escapes), then the remaining C0 and C1
# controls except tab and newline.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])|\x9b[0-?]*[ -/]*[@-~]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` without terminal escape sequences and control characters (tab and newline kept)."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


MASK = "***"


def mask(text: str, secrets: Iterable[str]) -> str:
    """`text` (from outside: a body, a header, a log line, a URL) with each secret replaced by `***`: mask
    first, cut after (`clip`), or the start of a key survives the cut where no later mask can find it."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return text


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters (mask it first)."""
    return text[:limit]


def without_password(url: str) -> tuple[str, tuple[str, str] | None]:
    """`http://user:pass@host/p` -> (`http://host/p`, ("user", "pass")): the credentials leave the URL, so
    no message, record or report built from the URL can carry them."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=host)), (unquote(user), unquote(password))


def display_url(url: str | None) -> str | None:
    """The URL as reports show it: a password replaced by `***` (the user name kept)."""
    if url is None:
        return None
    bare, credentials = without_password(url)
    if credentials is None:
        return url
    parts = urlsplit(bare)
    user = quote(credentials[0], safe="")
    shown = f"{user}:{MASK}@{parts.netloc}" if credentials[1] else f"{user}@{parts.netloc}"
    return urlunsplit(parts._replace(netloc=shown))
