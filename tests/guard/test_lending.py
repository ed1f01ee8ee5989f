"""The guard steps aside for copies lent to one thread at a time (BORROWGUARD_VLLM_POOL=keep, issue 21).

vLLM >= 0.21's renderer pool routes a tokenizer's public methods to deep copies taken from a queue, each
copy held by one thread at a time. The plugin wraps those methods in a lending scope (`lending_scope`):
inside it the copy is not guarded (nothing can race on it; a scope would only add cost), while the
tokenizer itself stays guarded. `Lender` below has that shape, built here on the bundled tokenizers (a
stand-in for vLLM's class; tests/vllm checks vLLM's own). References are serial and unguarded.
"""

from __future__ import annotations

import copy
import queue
import random

import pytest
from transformers import AutoTokenizer

import borrowguard
from borrowguard.data import BUNDLED, tokenizer_path
from borrowguard.guard._patch import lending_scope
from borrowguard.guard._state import existing_state
from borrowguard.race import hammer, make_calls, reference

ROUTED = ("__call__", "encode", "decode", "batch_decode", "apply_chat_template", "convert_ids_to_tokens",
          "convert_tokens_to_ids", "convert_tokens_to_string")
THREADS = 8


@pytest.fixture(autouse=True)
def _no_global_guard():
    yield
    borrowguard.uninstall()


def _load(name: str):
    return AutoTokenizer.from_pretrained(str(tokenizer_path(name)))


def _lend(tok, copies: int, *, lending: bool) -> list:
    """Turn `tok` into a lender in vLLM's pool shape: ROUTED methods run on a copy borrowed from a queue."""
    lent: queue.Queue = queue.Queue()
    made = [copy.deepcopy(tok) for _ in range(copies)]
    for one in made:
        lent.put(one)

    def routed(name: str):
        def method(self, *args, **kwargs):
            one = lent.get()  # blocks while every copy is out: one thread per copy, always
            try:
                return getattr(one, name)(*args, **kwargs)
            finally:
                lent.put(one)

        method.__name__ = name
        return lending_scope(method) if lending else method

    tok.__class__ = type("Lender", (type(tok),), {name: routed(name) for name in ROUTED})
    return made


def _guarded(tok) -> bool:
    return existing_state(tok.__dict__["_tokenizer"]) is not None


@pytest.mark.slow
@pytest.mark.parametrize("name", BUNDLED)
@pytest.mark.parametrize("lending", [True, False], ids=["lending-scope", "no-scope"])
def test_lent_copies_run_unguarded_and_every_call_stays_exact(name: str, lending: bool) -> None:
    tok = _load(name)
    calls = make_calls(tok, random.Random(3), 160)
    expected = reference(_load(name), calls)  # serial, unguarded, another instance
    borrowguard.install()
    copies = _lend(tok, 3, lending=lending)
    result = hammer(tok, calls, expected, threads=THREADS, seconds=1.0, min_calls=len(calls))
    assert result.calls >= len(calls) and result.clean, result.to_dict()
    # With the scope the guard never served a lent copy; without it (the control) it served every one.
    assert [_guarded(one) for one in copies] == [not lending] * len(copies)
    # The lender itself stays guarded: a call outside the routed methods opens a guard scope on it.
    tok.tokenize("still guarded")
    assert _guarded(tok)


def test_a_lender_calling_itself_stays_guarded() -> None:
    tok = _load(BUNDLED[0])
    borrowguard.install()

    @lending_scope
    def lend_to_self(self, text):
        return self(text, truncation=True, max_length=4)

    assert lend_to_self(tok, "a lender is never its own exclusive copy")["input_ids"]
    assert _guarded(tok)
