"""The shared race workload: its calls, its reference, and that unguarded it shows each stack's failure."""

from __future__ import annotations

import random
import threading

import pytest
import tokenizers
from packaging.version import Version
from transformers import AutoTokenizer

from borrowguard.data import CHATML, WORDPIECE, tokenizer_path
from borrowguard.race import (
    Call,
    HammerResult,
    Raised,
    hammer,
    make_calls,
    make_processor,
    normalise,
    reference,
)

OLD_STACK = Version(tokenizers.__version__) < Version("0.23.1")  # before the internal RwLock


@pytest.fixture(scope="module", params=[CHATML, WORDPIECE])
def tok(request):
    return AutoTokenizer.from_pretrained(str(tokenizer_path(request.param)))


@pytest.fixture(scope="module")
def chatml():
    return AutoTokenizer.from_pretrained(str(tokenizer_path(CHATML)))


def test_same_seed_same_calls_and_reference_is_deterministic(tok):
    calls = make_calls(tok, random.Random(7), 80)
    assert calls == make_calls(tok, random.Random(7), 80)
    assert calls != make_calls(tok, random.Random(8), 80)
    first = reference(tok, calls)
    assert first == reference(tok, calls)
    assert len(first) == len(calls)
    # Most calls succeed; only legitimately failing combinations raise, and they are recorded.
    raised = [r for r in first if isinstance(r, Raised)]
    assert len(raised) < len(calls) // 4


def test_calls_mix_every_setting_that_touches_the_backend(chatml):
    calls = make_calls(chatml, random.Random(1), 400)
    keys = {k for c in calls for k in c.kwargs}
    for key in (
        "truncation", "max_length", "stride", "return_overflowing_tokens", "padding", "pad_to_multiple_of",
        "padding_side", "split_special_tokens", "return_offsets_mapping", "return_special_tokens_mask",
        "return_length", "is_split_into_words", "add_special_tokens", "tools", "tokenize",
    ):
        assert key in keys, key
    truncations = {c.kwargs.get("truncation") for c in calls}
    assert {True, False, "longest_first", "only_first", "only_second"} <= truncations
    assert {c.kwargs["padding"] for c in calls if "padding" in c.kwargs} == {True, "longest", "max_length"}
    assert len({c.kwargs.get("max_length") for c in calls}) > 20  # differs per call
    methods = {c.method for c in calls}
    assert {"__call__", "encode", "decode", "batch_decode", "apply_chat_template"} <= methods
    assert methods & {"convert_ids_to_tokens", "convert_tokens_to_ids"}
    assert any(len(c.args) == 2 for c in calls if c.shape == "pair")
    # Truncation matters: some texts are longer than the largest max_length in use.
    longest = max(len(chatml(c.args[0])["input_ids"]) for c in calls if c.shape == "single")
    assert longest > max(c.kwargs.get("max_length", 0) for c in calls)


def test_kinds_follow_what_the_tokenizer_supports():
    wordpiece = AutoTokenizer.from_pretrained(str(tokenizer_path(WORDPIECE)))
    shapes = {c.shape for c in make_calls(wordpiece, random.Random(0), 200)}
    assert "chat" not in shapes and "processor" not in shapes  # no chat template, not a processor
    with pytest.raises(ValueError, match="none of the kinds"):
        make_calls(wordpiece, random.Random(0), 5, kinds=["chat"])
    with pytest.raises(ValueError, match="unknown call kinds"):
        make_calls(wordpiece, random.Random(0), 5, kinds=["nope"])


def test_normalise_covers_every_field(chatml):
    text = "Hello world, 你好 <|im_start|> again"
    plain = normalise(chatml(text))
    assert plain == normalise(chatml(text))
    assert plain != normalise(chatml(text, truncation=True, max_length=3))
    assert plain != normalise(chatml(text, return_offsets_mapping=True))
    assert plain != normalise(chatml(text.split(), is_split_into_words=True))
    assert "word_ids" in repr(plain)
    assert normalise(RuntimeError("Already borrowed")) == Raised("RuntimeError", "Already borrowed")
    assert Raised("Exception", "Truncation error: Second sequence not provided").kind == "Truncation error"


def test_hammer_counts_wrong_outputs_and_exceptions_against_the_reference(chatml):
    ok = Call("single", "__call__", ("some text",))
    missing = Call("decode", "no_such_method", ())
    # A deliberately wrong reference: every call must be flagged, never silently accepted.
    wrong_reference = [normalise("not this"), normalise([1, 2])]
    result = hammer(chatml, [ok, missing], wrong_reference, threads=2, iterations=20)
    assert result.calls == 40
    assert result.wrong_outputs == {"single": result.calls_by_shape["single"]}
    assert result.exceptions == {"AttributeError": result.calls_by_shape["decode"]}
    assert result.examples and not result.clean
    # A different exception than the reference's is a wrong output, not an exception.
    result = hammer(chatml, [missing], [Raised("AttributeError", "other")], threads=1, iterations=3)
    assert result.wrong_outputs == {"decode": 3} and result.exceptions == {}


def test_one_thread_matches_the_reference_exactly(tok):
    calls = make_calls(tok, random.Random(3), 120)
    result = hammer(tok, calls, reference(tok, calls), threads=1, iterations=240)
    assert result.calls == 240
    assert result.clean, result.examples


def _hammer_until_failure(tok, seconds: float = 8.0) -> HammerResult:
    calls = make_calls(tok, random.Random(0), 200)
    expected = reference(tok, calls)
    stop = threading.Event()

    def on_progress(snapshot: HammerResult) -> None:
        if snapshot.calls > 400 and (snapshot.exceptions or snapshot.wrong_outputs):
            stop.set()  # seen enough: keep the suite fast

    return hammer(tok, calls, expected, threads=8, seconds=seconds, stop=stop, on_progress=on_progress)


@pytest.mark.slow
def test_unguarded_hammer_shows_this_stacks_failure(tok):
    result = _hammer_until_failure(tok)
    if OLD_STACK:  # tokenizers <= 0.22.2: a &mut setter during another thread's encode_batch raises
        assert result.exceptions.get("Already borrowed", 0) > 0, result.to_dict()
    else:  # the RwLock removed the exception; another thread's settings now apply silently
        assert "Already borrowed" not in result.exceptions
        leaked = result.total_wrong + result.exceptions.get("Truncation error", 0)
        assert leaked > 0, result.to_dict()


@pytest.mark.slow
def test_processor_workload_mixes_processor_and_tokenizer_calls(chatml):
    processor = make_processor(chatml)
    assert processor.tokenizer is chatml
    calls = make_calls(processor, random.Random(5), 60)
    targets = {(c.shape == "processor", c.target) for c in calls}
    assert targets == {(True, ""), (False, "tokenizer")}
    expected = reference(processor, calls)
    assert expected == reference(processor, calls)
    ok = [r for c, r in zip(calls, expected) if c.shape == "processor" and not isinstance(r, Raised)]
    assert ok and all("pixel_values" in repr(r) for r in ok)  # images really went through
    with pytest.raises(ValueError, match="image_pad"):
        make_processor(AutoTokenizer.from_pretrained(str(tokenizer_path(WORDPIECE))))
