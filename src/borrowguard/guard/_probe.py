"""A one-time check that the side-by-side pair path is exact for a given backend's post-processor.

Pairs are encoded as two single sequences, truncated, then post-processed together. That equals the
backend's own pair encoding only when the post-processor assigns type ids and sequence ids itself
(TemplateProcessing, BertProcessing ...). The check compares both ways on probe pairs; when they differ,
pairs with truncation take the serial exact path instead.
"""

from __future__ import annotations

from typing import Any

_PROBES = (
    (
        "Hello world, this is the first sequence.",
        "And here comes a second one, a little longer than the first.",
    ),
    ("short", "x"),
)
_TRUNCATIONS = (
    {"max_length": 9, "stride": 2, "strategy": "longest_first", "direction": "right"},
    {"max_length": 12, "stride": 0, "strategy": "only_second", "direction": "left"},
    {"max_length": 64, "stride": 0, "strategy": "longest_first", "direction": "right"},
)


def encoding_fields(encoding: Any) -> tuple:
    """Every observable field of a tokenizers.Encoding, overflowing windows included."""
    return (
        encoding.ids,
        encoding.type_ids,
        encoding.tokens,
        encoding.offsets,
        encoding.attention_mask,
        encoding.special_tokens_mask,
        encoding.word_ids,
        encoding.sequence_ids,
        [encoding_fields(o) for o in encoding.overflowing],
    )


def pairs_match(state: Any) -> bool:
    from borrowguard.guard._view import apply_settings, encode_truncated

    encoder = state.encoder(False)
    flat = [side for pair in _PROBES for side in pair]
    layout = [2 * i + 1 for i in range(len(_PROBES))]
    with state.serial_lock:
        reference = state.serial_backend()
        for trunc in _TRUNCATIONS:
            for add_special_tokens in (True, False):
                try:
                    ours = [
                        encoding_fields(e)
                        for e in encode_truncated(encoder, flat, layout, trunc, False, add_special_tokens)
                    ]
                except Exception as exc:
                    ours = (type(exc), str(exc))
                apply_settings(reference, trunc, None, False)
                try:
                    theirs = [
                        encoding_fields(e)
                        for e in reference.encode_batch(list(_PROBES), add_special_tokens=add_special_tokens)
                    ]
                except Exception as exc:
                    theirs = (type(exc), str(exc))
                if ours != theirs:
                    return False
    return True
