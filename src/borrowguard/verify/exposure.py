"""Can this server race at all, as configured? A PASS means more when the answer is yes.

From vLLM's own source, version by version (see the README's "Which vLLM versions can race"):
- 0.17.x: the multimodal processor shares the tokenizer (the "Failed to acquire tokenizer" retry loop),
  and `bad_words` and some tool parsers encode on the event loop: races at the default configuration.
- 0.18–0.20: `bad_words` (and, up to 0.19, some tool parsers) still encode on the event loop beside the
  renderer's thread: races at the default configuration, but only through those request shapes; with
  `--renderer-num-workers` ≥ 2 (0.19–0.20) two microbatch queues also race each other.
- 0.21 and later: every tokenizer path is served from a pool of deep copies: nothing races.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version


def race_exposure(server: str | None, version: str | None, *, bad_words_sent: bool,
                  renderer_workers: int | None) -> str | None:
    """A note for the verdict when the target cannot race as configured (None: it can, or unknown)."""
    if server != "vllm" or not version:
        return None
    try:
        v = Version(version.split("+")[0])
    except InvalidVersion:
        return None
    if v >= Version("0.21"):
        return (
            f"vLLM {version} serves every tokenizer path from a pool of deep copies: this server cannot race "
            "as configured, so a PASS here is expected with or without the guard (the guard saves only the "
            "pool's memory, and only if it is allowed to replace it)"
        )
    one_worker = renderer_workers is not None and renderer_workers < 2
    if Version("0.18") <= v < Version("0.21") and not bad_words_sent and one_worker:
        return (
            f"vLLM {version} with one renderer worker races only through bad_words (and, up to 0.19, some "
            "tool parsers), and this run sent no bad_words (--no-vllm-extensions): it could not race as "
            "configured"
        )
    return None
