"""Small shims for the oldest Python we support (3.10)."""

from __future__ import annotations

import sys
from enum import Enum

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:

    class StrEnum(str, Enum):
        """`enum.StrEnum` (3.11+): members are their values, and print as them."""

        def __str__(self) -> str:
            return str(self.value)


__all__ = ["StrEnum"]
