"""Compiling and validating [[problem.signature]] tables (borrowguard.knowledge.signatures)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from borrowguard.errors import UserInputError
from borrowguard.knowledge import KnowledgeError, load
from borrowguard.knowledge.signatures import (
    compile_signature,
    compile_signatures,
    minimal_anchors,
    required_literals,
)
from borrowguard.scan import Scanner

SCAN_IDS = {
    "tokenizer-already-borrowed", "tokenizer-acquire-retry", "engine-dead", "shm-broadcast-stall",
    "nccl-failure", "mm-cache-desync", "cuda-oom", "http-error-status",
}


def test_bundled_signatures_compile_and_cover_the_scan_ids() -> None:
    kb = load()
    sigs = compile_signatures(kb)
    assert {s.problem_id for s in sigs} == SCAN_IDS
    for sig in sigs:
        assert sig.severity == kb[sig.problem_id].severity
        assert sig.anchors or sig.probes


def test_log_problems_link_to_environment_causes() -> None:
    kb = load()
    assert "tokenizers-borrow-race" in kb["tokenizer-already-borrowed"].related
    assert "nccl-aarch64-proxy-leak" in kb["shm-broadcast-stall"].related
    assert "vllm-mm-cache-desync" in kb["mm-cache-desync"].related


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("RuntimeError: Already borrowed", ("RuntimeError: Already borrowed",)),
        ("Engine core proc \\S{1,128} died unexpectedly", (" died unexpectedly",)),
        ("(?:enable|no)_(?:truncation|padding)\\(", ("padding", "truncation")),
        # the parser factors out "Engine"; the branch is the better anchor
        ("(?:EngineDeadError|EngineCore encountered)", ("Core encountered", "DeadError")),
        ("Already (?:mutably )?borrowed", ("borrowed",)),
        ("x{0,3}abc", None),
        (".*", None),
    ],
)
def test_required_literals(pattern: str, expected: tuple[str, ...] | None) -> None:
    assert required_literals(pattern) == expected


def test_required_literals_are_sound() -> None:
    # Whatever the regex matches contains one of its anchors: checked on the bundled patterns' own matches.
    samples = [
        "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.",
        "Failed to acquire tokenizer in current thread. Retrying (3/5)...",
        'x - "POST /v1/chat/completions HTTP/1.1" 503 Service Unavailable',
        "gpu:1:2 [0] NCCL WARN Cuda failure",
    ]
    for sig in compile_signatures(load()):
        for pattern in sig.message:
            for text in samples:
                m = pattern.search(text)
                if m:
                    assert any(a in text for a in sig.message_anchors)


def test_minimal_anchors_drop_those_containing_another() -> None:
    assert minimal_anchors(["NCCL WARN", "NCCL", "EngineDeadError", "DeadError"]) == ("NCCL", "DeadError")


def test_probe_for_short_anchor_ascii_pattern() -> None:
    http = 'HTTP/[0-9.]{1,3}" (?P<detail>[45][0-9][0-9])'
    sig = compile_signature("x", "warning", {"message": [http]})
    assert sig.probes == (http,)
    assert sig.anchors == ("HTTP/",) and sig.find_anchors == ()
    # \S is not bytes-safe (one character is several bytes), so a short anchor is searched as a literal
    sig = compile_signature("x", "warning", {"message": ["HTTP/\\S{1,3} 5"]})
    assert sig.probes == () and sig.anchors == sig.find_anchors == ("HTTP/",)


def test_declared_anchors_are_checked_against_the_regex() -> None:
    http = 'HTTP/[0-9.]{1,3}" (?P<detail>[45][0-9][0-9])'
    sig = compile_signature("x", "warning", {"message": [http], "anchors": ['" 4', '" 5']})
    assert sig.anchors == ('" 4', '" 5')
    assert sig.probes == (http,)  # still the stdlib path's way: two 3-byte searches would cost more
    with pytest.raises(KnowledgeError, match="need not contain any of the declared anchors"):
        compile_signature("x", "warning", {"message": [http], "anchors": ['" 4']})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"message": ["(unclosed"]}, "item 1 ('(unclosed') is not a valid regular expression"),
        ({"message": "a.*"}, "field 'message' item 1 ('a.*') has no literal of 4+ characters"),
        ({"message": [3]}, "field 'message' must be a list of non-empty strings"),
        ({"message": ["(?i)already borrowed"]}, "is case-insensitive"),
        ({"message": ["Engine(?:\\s+\\w+)+ died"]}, "nests unbounded repetitions"),
        ({"frames": ["in foo_bar_baz"], "colour": "red"}, "field 'colour' is not a known field"),
        ({"exclude": ["NCCL INFO"]}, "needs 'message' or 'frames'"),
        ({"message": ["Already borrowed"], "raises": ["KeyError"]}, "only applies together with 'frames'"),
        ({"message": ["Already borrowed"], "anchors": ["NCCL"]}, "need not contain any of the declared"),
        ({"message": ["Already borrowed"], "anchors": ["ab"]}, "literal strings of 3+ characters"),
        ({"message": ["x" * 401]}, "longer than 400 characters"),
    ],
)
def test_errors_name_rule_and_field(raw: dict[str, object], message: str) -> None:
    with pytest.raises(KnowledgeError) as info:
        compile_signature("my-rule", "error", raw, 1)
    text = str(info.value)
    assert text.startswith("rule 'my-rule': signature #2")
    assert message in text
    assert isinstance(info.value, UserInputError)  # the CLI prints it, no traceback


def test_user_rules_file_adds_a_signature(tmp_path: Path) -> None:
    rules = tmp_path / "mine.toml"
    rules.write_text(
        '[[problem]]\nid = "my-oops"\ntitle = "Oops"\nseverity = "warning"\nexplanation = "x"\n'
        'remedies = ["restart it"]\n\n[[problem.signature]]\nmessage = ["OOPS-[0-9]{1,4} happened"]\n'
        'exclude = ["OOPS-0 "]\n'
    )
    sc = Scanner(load(rules))
    assert [h.id for h in sc.feed("ERROR 01-01 00:00:00 [a.py:1] OOPS-12 happened")] == ["my-oops"]
    assert sc.feed("ERROR 01-01 00:00:00 [a.py:1] OOPS-0 happened") == []
    assert sc.result().findings[0].remedies == ("restart it",)


def test_user_rules_file_with_a_bad_signature_is_refused(tmp_path: Path) -> None:
    rules = tmp_path / "bad.toml"
    rules.write_text(
        '[[problem]]\nid = "bad-one"\ntitle = "t"\nseverity = "error"\nexplanation = "x"\n\n'
        '[[problem.signature]]\nframes = ["(a+)+b"]\n'
    )
    with pytest.raises(KnowledgeError, match=r"rule 'bad-one': signature #1: field 'frames' item 1"):
        Scanner(load(rules))


def test_bundled_patterns_have_no_nested_unbounded_repeats() -> None:
    # compile_signatures refuses them; this guards the check itself against a silent no-op
    with pytest.raises(KnowledgeError):
        compile_signature("r", "error", {"message": ["abcd(x*)*"]})
    for sig in compile_signatures(load()):
        for p in (*sig.message, *sig.frames, *sig.raises, *sig.exclude):
            assert isinstance(p, re.Pattern)
