"""Compiling and validating [[problem.signature]] tables (borrowguard.knowledge.signatures)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from borrowguard.errors import UserInputError
from borrowguard.knowledge import Confidence, KnowledgeError, load
from borrowguard.knowledge.signatures import (
    bytes_safe,
    compile_signature,
    compile_signatures,
    minimal_anchors,
    nested_unbounded,
    unmatched_lines,
)
from borrowguard.scan import Scanner
from borrowguard.scan.normalize import normalize

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
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
        assert sig.anchors and all(len(a.encode()) >= 3 for a in sig.anchors)


def test_log_problems_link_to_environment_causes() -> None:
    kb = load()
    assert "tokenizers-borrow-race" in kb["tokenizer-already-borrowed"].related
    assert "nccl-aarch64-proxy-leak" in kb["shm-broadcast-stall"].related
    assert "vllm-mm-cache-desync" in kb["mm-cache-desync"].related


def fixture_messages() -> list[str]:
    messages = []
    for path in sorted(LOGS.rglob("*")):
        if path.is_file():
            for raw in path.read_bytes().splitlines():
                messages.append(normalize(raw).message)
    return messages


def test_declared_anchors_are_sound_on_every_fixture_line() -> None:
    # The bulk scan parses only lines holding an anchor: a line that a signature's starting regex matches
    # without one would be skipped there, and the two read paths would disagree.
    messages = fixture_messages()
    assert len(messages) > 500
    for sig in compile_signatures(load()):
        assert list(unmatched_lines(sig, messages)) == [], sig.problem_id
    matched = {s.problem_id for s in compile_signatures(load()) for m in messages if any(p.search(m) for p in s.starters())}
    assert matched == SCAN_IDS  # the check above is not vacuous


def test_unmatched_lines_catches_a_wrong_anchor() -> None:
    sig = compile_signature("x", "error", {"message": ["Engine died"], "anchors": ["Engine core"]})
    assert list(unmatched_lines(sig, ["ERROR Engine died", "Engine core died"])) == ["ERROR Engine died"]


@pytest.mark.parametrize(
    ("pattern", "nested"),
    [
        ("Engine(?:\\s+\\w+)+ died", True),
        ("(a+)+b", True),
        ("abcd(x*)*", True),
        ("(?:a{2,})*", True),
        ("(ab)+c+", False),
        ("a(?:b{1,64})+", False),
        ("Failed to acquire tokenizer in current thread\\. Retrying(?: \\((?P<detail>[0-9]{1,3}/[0-9]{1,3})\\))?", False),
        ("[(+*)]+x", False),
        ("\\(a+\\)+", False),
    ],
)
def test_nested_unbounded(pattern: str, nested: bool) -> None:
    assert nested_unbounded(pattern) is nested


@pytest.mark.parametrize(
    ("pattern", "safe"),
    [
        ('HTTP/[0-9.]{1,3}" (?P<detail>[45][0-9][0-9])', True),
        ("HTTP/\\S{1,3} 5", False),
        ("HTTP/.{1,3} 5", False),
        ("[ab]cd", False),  # does not start with a literal
        ("ab[^c]", False),
        ("abc\\b", False),
        ("é42", False),
        ("ab(?=c)", False),
    ],
)
def test_bytes_safe(pattern: str, safe: bool) -> None:
    assert bytes_safe(pattern) is safe


def test_minimal_anchors_drop_those_containing_another() -> None:
    assert minimal_anchors(["NCCL WARN", "NCCL", "EngineDeadError", "DeadError"]) == ("NCCL", "DeadError")


def test_short_anchors_of_an_ascii_pattern_make_a_probe() -> None:
    http = 'HTTP/[0-9.]{1,3}" (?P<detail>[45][0-9][0-9])'
    sig = compile_signature("x", "warning", {"message": [http], "anchors": ['" 4', '" 5']})
    assert sig.anchors == ('" 4', '" 5')
    assert sig.probes == (http,) and sig.find_anchors == ()
    # \S is not bytes-safe (one character is several bytes): the short anchors are searched as literals
    sig = compile_signature("x", "warning", {"message": ["HTTP/\\S{1,3} 5"], "anchors": ["HTTP/"]})
    assert sig.probes == () and sig.find_anchors == ("HTTP/",)


def test_confidence_fields() -> None:
    sig = compile_signature("x", "error", {"frames": ["in f_g_h"], "anchors": ["in f_g_h"]})
    assert (sig.confidence, sig.when_cut) == (Confidence.HIGH, Confidence.MEDIUM)
    sig = compile_signature("x", "error", {"frames": ["in f_g_h"], "anchors": ["in f"], "confidence": "medium"})
    assert (sig.confidence, sig.when_cut) == (Confidence.MEDIUM, Confidence.LOW)
    sig = compile_signature("x", "error", {"frames": ["in f_g_h"], "anchors": ["in f"], "when_cut": "none"})
    assert sig.when_cut is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"message": ["(unclosed"], "anchors": ["uncl"]}, "item 1 ('(unclosed') is not a valid regular expression"),
        ({"message": "abc.{0,9}"}, "field 'anchors' is required"),
        ({"message": "abc.{0,9}", "anchors": []}, "field 'anchors' is required"),
        ({"message": [3], "anchors": ["abc"]}, "field 'message' must be a list of non-empty strings"),
        ({"message": ["(?i)already borrowed"], "anchors": ["already"]}, "is case-insensitive"),
        ({"message": ["Engine(?:\\s+\\w+)+ died"], "anchors": ["Engine"]}, "nests unbounded repetitions"),
        ({"frames": ["in foo_bar_baz"], "colour": "red"}, "field 'colour' is not a known field"),
        ({"exclude": ["NCCL INFO"], "anchors": ["NCCL"]}, "needs 'message', 'frames' or 'stall'"),
        ({"message": ["Already borrowed"], "raises": ["KeyError"], "anchors": ["Already"]}, "only applies together with 'frames'"),
        ({"message": ["x"], "resume": ["y"], "anchors": ["xyz"]}, "only applies together with 'stall'"),
        ({"message": ["Already borrowed"], "anchors": ["ab"]}, "literal strings of 3+ bytes"),
        ({"message": ["x" * 401], "anchors": ["xxx"]}, "longer than 400 characters"),
        ({"message": ["Already"], "anchors": ["Already"], "confidence": "sure"}, "field 'confidence' must be one of"),
        ({"stall": ["NCCL CALL"], "anchors": ["NCCL"], "stall_lines": 0}, "field 'stall_lines' must be"),
        ({"message": ["Already"], "anchors": ["Already"], "startup": "skip"}, "field 'startup' must be"),
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
        'exclude = ["OOPS-0 "]\nanchors = ["OOPS-"]\n'
    )
    sc = Scanner(load(rules))
    assert [h.id for h in sc.feed("ERROR 01-01 00:00:00 [a.py:1] OOPS-12 happened")] == ["my-oops"]
    assert sc.feed("ERROR 01-01 00:00:00 [a.py:1] OOPS-0 happened") == []
    assert sc.result().findings[0].remedies == ("restart it",)


def test_user_rules_file_with_a_bad_signature_is_refused(tmp_path: Path) -> None:
    rules = tmp_path / "bad.toml"
    rules.write_text(
        '[[problem]]\nid = "bad-one"\ntitle = "t"\nseverity = "error"\nexplanation = "x"\n\n'
        '[[problem.signature]]\nframes = ["(a+)+b"]\nanchors = ["aab"]\n'
    )
    with pytest.raises(KnowledgeError, match=r"rule 'bad-one': signature #1: field 'frames' item 1"):
        Scanner(load(rules))


def test_bundled_patterns_have_no_nested_unbounded_repeats() -> None:
    # compile_signatures refuses them; this guards the check itself against a silent no-op
    with pytest.raises(KnowledgeError):
        compile_signature("r", "error", {"message": ["abcd(x*)*"], "anchors": ["abcd"]})
    for sig in compile_signatures(load()):
        for p in (*sig.message, *sig.frames, *sig.raises, *sig.exclude, *sig.stall, *sig.resume):
            assert isinstance(p, re.Pattern)
            assert not nested_unbounded(p.pattern)


def test_no_anchor_makes_a_candidate_of_a_healthy_servers_common_lines(tmp_path: Path) -> None:
    # An anchor is what the fast path searches every line for: one that healthy lines hold (" in ", "from ") makes
    # each of them a candidate read by the regexes, and scan drops from ~100 MB/s to ~1 (it happened: an anchor list
    # of " in ", "from "). The healthy lines of bench/scan.py's generated log (vLLM, uvicorn, NCCL INFO chatter) are
    # the measure: no anchor may be in more than 1 line in 200.
    import importlib.util
    import sys

    folder = Path(__file__).parents[2] / "bench"
    spec = importlib.util.spec_from_file_location("bench_scan", folder / "scan.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(folder))  # it imports its neighbour goals.py
    try:
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(str(folder))
    log = tmp_path / "healthy.log"
    bench.generate(log, 1, every=10**9)  # one piece of 40,000 lines, no failure in it
    lines = log.read_text(encoding="utf-8").splitlines()
    assert len(lines) > 10_000
    common = {}
    for sig in compile_signatures(load()):
        for anchor in sig.anchors:
            share = sum(anchor in line for line in lines) / len(lines)
            if share > 1 / 200:
                common[f"{sig.problem_id} #{sig.index + 1}: {anchor!r}"] = round(share, 3)
    assert common == {}
