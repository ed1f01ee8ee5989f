"""Environment switches, read the same way by the vLLM plugin, `borrowguard run`'s children and doctor.

Standard library only: `borrowguard run`'s bootstrap imports it in every child process.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

DISABLE_ENV = "BORROWGUARD_DISABLE"
"""Set to 1/true/yes/on: the plugin and `borrowguard run` leave transformers untouched."""
QUIET_ENV = "BORROWGUARD_QUIET"
"""Set to 1/true/yes/on: guarded processes started by `borrowguard run` print no notice."""
POOL_ENV = "BORROWGUARD_VLLM_POOL"
"""Set to keep: on vLLM >= 0.21 the plugin leaves vLLM's renderer tokenizer pool (deep copies) in place."""
ON_VALUES = frozenset({"1", "true", "yes", "on"})
PLUGIN_NAME = "borrowguard"
"""The vLLM entry point's name: what VLLM_PLUGINS must list."""


def is_on(value: str | None) -> bool:
    """Whether a switch's value means "on" (1/true/yes/on, any case, surrounding blanks ignored)."""
    return value is not None and value.strip().lower() in ON_VALUES


def flag(name: str, environ: Mapping[str, str] | None = None) -> bool:
    return is_on((os.environ if environ is None else environ).get(name))


def allowed_by_vllm_plugins(raw: str | None) -> bool:
    """Whether vLLM runs our plugin under VLLM_PLUGINS=`raw` (None: unset, every plugin runs).

    vLLM's exact rule: the value is split on "," and NOT stripped, so "a, borrowguard" leaves us out.
    """
    return raw is None or PLUGIN_NAME in raw.split(",")
