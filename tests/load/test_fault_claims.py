"""A fault class is a claim checked against the server's own numbers (load.faults.blame)."""

from __future__ import annotations

from borrowguard.load.faults import Fault, MismatchKind, blame

TOO_LONG = ("This model's maximum context length is 2048 tokens. However, you requested 16 output tokens and "
            "your prompt contains 2100 input tokens")
LIAR = ("This model's maximum context length is 4096 tokens. However, you requested 16 output tokens and "
        "your prompt contains 30 input tokens")


def test_a_context_length_refusal_is_ours_only_when_its_numbers_say_so() -> None:
    assert blame(400, TOO_LONG, "text", scale=0.5) == blame(400, TOO_LONG)
    assert blame(400, TOO_LONG, "text", scale=0.5).mismatch is MismatchKind.TOO_LONG
    assert blame(400, LIAR, "text").fault is Fault.SERVER  # 30 tokens do not overflow 4096


def test_a_context_length_refusal_at_our_smallest_prompts_is_the_servers() -> None:
    assert blame(400, "maximum context length is 2048 tokens", "text", scale=1.0).fault is Fault.WORKLOAD
    assert blame(400, "maximum context length is 2048 tokens", "text", scale=0.02).fault is Fault.SERVER


def test_a_404_on_an_endpoint_the_preflight_saw_working_is_the_servers() -> None:
    assert blame(404, "The model `m` does not exist.").mismatch is MismatchKind.NO_ENDPOINT
    assert blame(404, "The model `m` does not exist.", served=True).fault is Fault.SERVER


def test_a_4xx_naming_a_server_side_exception_is_the_servers() -> None:
    msg = "TypeError: generate() got an unexpected keyword argument 'truncate_prompt_tokens'"
    assert blame(400, msg).fault is Fault.SERVER
    assert blame(400, "extra inputs are not permitted").mismatch is MismatchKind.UNKNOWN_FIELD
