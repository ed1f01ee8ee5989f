"""`borrowguard rules export`: every format validated by its engine, every exported regex tested on our fixtures.

The exported rule for id X must fire, in each engine's own dialect, on every raw fixture line where scan
fires X by a line signature, and on no line of a near-miss that rejects X. The engines run the exported
text itself (tests/support/engines.py): RE2 for Loki's LogQL, VRL for Vector, Lucene for Elasticsearch.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
import yaml

from borrowguard.knowledge import ChangeProse, Kind, KnowledgeBase, load
from borrowguard.knowledge.export import Options, export
from borrowguard.knowledge.export.dialects import python_class, to_lucene, to_re2
from borrowguard.knowledge.export.lines import plan, scan_only_reason
from borrowguard.knowledge.signatures import compile_signatures
from borrowguard.scan import Scanner
from support import engines
from support.realworld import COLLECTED, read_case

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
SELECTOR = '{app="vllm"}'
KB = load()
ALL_IDS = frozenset(p.id for p in KB)
EXPORTED = {"tokenizer-already-borrowed", "tokenizer-acquire-retry", "engine-dead", "nccl-failure",
            "mm-cache-desync", "cuda-oom", "http-error-status"}


@dataclass
class Fixture:
    name: str
    lines: list[str]
    rejects: frozenset[str]
    start: int = 0  # where its lines sit in ALL_LINES


def _fixtures() -> list[Fixture]:
    out = []
    # a near-miss that scan itself still finds what it rejects in (a set's strict xfail, CollectedSet.still_false)
    # is not the export's to clear: the export must fire where scan fires (checked below), no more
    still_false = {s.directory: s.still_false for s in COLLECTED}
    for path in sorted(p for d in ("real-world", *(s.directory for s in COLLECTED)) for p in (LOGS / d).glob("*/*.log")):
        case = read_case(path)  # the real-world reader: headers off, expect/reject read
        known = path.name.startswith(still_false.get(path.parent.parent.name, ()))
        out.append(Fixture(
            path.relative_to(LOGS).as_posix(), case.body.splitlines(), frozenset() if known else frozenset(case.reject)
        ))
    for path in [*sorted(p for p in LOGS.iterdir() if p.is_file()), *sorted((LOGS / "real").glob("*.log"))]:
        text = path.read_bytes().decode("utf-8", "replace")
        lines = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
        # near_misses.log is clean of every problem (tests/scan/test_scan_fixtures.py expects no finding)
        out.append(Fixture(path.relative_to(LOGS).as_posix(), lines, ALL_IDS if path.name == "near_misses.log" else frozenset()))
    offset = 0
    for f in out:
        f.start, offset = offset, offset + len(f.lines)
    return out


FIXTURES = _fixtures()
ALL_LINES = [line for f in FIXTURES for line in f.lines]


def line_signatures_only(kb: KnowledgeBase) -> KnowledgeBase:
    """`kb` with only the signatures a line rule can carry: what scan finds with these is what the
    exported rules must find."""
    problems = {
        p.id: dataclasses.replace(p, signatures=tuple(s for s in p.signatures if scan_only_reason(s) is None))
        for p in kb
    }
    return KnowledgeBase(MappingProxyType(problems), kb.sources)


LINE_KB = line_signatures_only(KB)  # one base: scan compiles a knowledge base once


def scan_hits(kb: KnowledgeBase, fixture: Fixture) -> dict[str, set[int]]:
    sc = Scanner(kb)
    hits = []
    for line in fixture.lines:
        hits += sc.feed(line, fixture.name)
    hits += sc.finish()
    out: dict[str, set[int]] = {}
    for hit in hits:
        out.setdefault(hit.id, set()).add(fixture.start + hit.line_no - 1)
    return out


def text(fmt: str, **options: Any) -> str:
    if fmt in ("loki", "prometheus"):
        options.setdefault("selector", SELECTOR)
    return export(KB, fmt, Options(**options))


def loki_exprs() -> dict[str, str]:
    doc = yaml.safe_load(text("prometheus"))
    return {r["labels"]["finding_id"]: r["expr"] for r in doc["groups"][0]["rules"]}


def fired_loki(lines: list[str]) -> engines.Fired:
    pytest.importorskip("re2", reason="google-re2 (RE2, the syntax of Go's regexp) is not installed")
    return engines.loki_fired(loki_exprs(), lines)


def fired_vector(lines: list[str]) -> engines.Fired:
    pytest.importorskip("pyvrl", reason="pyvrl (Vector's VRL) is not installed")
    return engines.vector_fired(yaml.safe_load(text("vector")), lines)


def fired_es(lines: list[str]) -> engines.Fired:
    if engines.missing_lucene():
        pytest.skip(engines.missing_lucene())
    return engines.es_fired(json.loads(text("elasticsearch")), lines)


ENGINES: dict[str, Callable[[list[str]], engines.Fired]] = {"loki": fired_loki, "vector": fired_vector, "elasticsearch": fired_es}
# Each engine runs over every fixture line (Lucene in a java subprocess): slow (tests/conftest.py).
ENGINE_PARAMS = [pytest.param(e, marks=pytest.mark.slow) for e in sorted(ENGINES)]
_FIRED: dict[str, engines.Fired] = {}


@pytest.fixture(params=ENGINE_PARAMS)
def fired(request: pytest.FixtureRequest) -> engines.Fired:
    if request.param not in _FIRED:  # one engine run over all fixture lines, shared by the tests below
        _FIRED[request.param] = ENGINES[request.param](ALL_LINES)
    return _FIRED[request.param]


# ---- what goes out -----------------------------------------------------------------------------------


# Counted from the knowledge base itself (not hard-coded, so a new signature is one TOML edit): the tables a
# line rule can carry, by problem and index, and the rest.
LINE_TABLES = {(p.id, i) for p in KB for i, s in enumerate(p.signatures) if scan_only_reason(s) is None}
SCAN_TABLES = {(p.id, i) for p in KB for i, s in enumerate(p.signatures) if scan_only_reason(s) is not None}


def test_the_line_signatures_go_out_and_the_rest_are_listed_for_scan() -> None:
    assert len(LINE_TABLES) >= 14 and len(SCAN_TABLES) >= 21  # what the export carried when this test was written
    for convert in (to_re2, to_lucene):
        p = plan(KB, convert)
        assert {r.problem.id for r in p.rules} == EXPORTED
        # every bundled line table goes out in every dialect (none is refused as unwritable), each once
        assert sorted((r.problem.id, s.index) for r in p.rules for s in r.signatures) == sorted(LINE_TABLES)
        assert sorted((s.problem_id, s.index) for s in p.scan_only) == sorted(SCAN_TABLES)
        assert {s.problem_id for s in p.scan_only} >= {"shm-broadcast-stall"}  # startup-aware: not a line rule
    for fmt in ("loki", "prometheus", "vector"):
        out = text(fmt)
        assert "Needs borrowguard scan" in out
        assert "shm-broadcast-stall #1, #2, #3: not counted while the server starts up" in out
        assert "tokenizer-already-borrowed #2, #3, #4, #5, #6, #7, #8, #9: traceback frames" in out
    doc = json.loads(text("opensearch"))
    assert len(doc["needs_borrowguard_scan"]) == len(SCAN_TABLES) and doc["engine"] == "opensearch"


def test_the_fixtures_exercise_every_exported_id() -> None:
    hits: set[str] = set()
    for f in FIXTURES:
        hits |= set(scan_hits(LINE_KB, f))
    # plus the finding that scan's attribution gives instead of the tokenizer's (never a line rule of its own)
    assert hits - EXPORTED == {p.id for p in KB.of_kind(Kind.NOT_THE_TOKENIZER)} and hits >= EXPORTED
    assert sum(len(f.rejects) > 0 for f in FIXTURES) >= 12


# ---- every engine, on every fixture ------------------------------------------------------------------


NAMES_ANOTHER_LIBRARY = {
    s.problem_id: s.context.library for s in compile_signatures(KB) if s.context is not None and s.context.others
}
"""The problems whose line rule leaves out a line naming another library (the export's note says so), even where
scan reads the same line's tokenizer words first ("PyO3 panics ... in set_truncation_and_padding")."""


def test_exported_rules_fire_on_every_line_scan_fires_on(fired: engines.Fired) -> None:
    kb = LINE_KB
    missed = []
    for f in FIXTURES:
        for problem_id, lines in scan_hits(kb, f).items():
            if problem_id not in EXPORTED:
                continue  # the attribution's other finding: a line rule leaves those lines out (see below)
            names = NAMES_ANOTHER_LIBRARY.get(problem_id)
            for i in sorted(lines - fired.get(problem_id, set())):
                if names is not None and names(ALL_LINES[i]) is not None:
                    continue
                missed.append(f"{f.name}:{i - f.start + 1} {problem_id}: {ALL_LINES[i]!r}")
    assert not missed, "\n".join(missed)


ELSEWHERE = frozenset(p.id for p in KB.of_kind(Kind.NOT_THE_TOKENIZER))


NO_CHANGE = dataclasses.replace(KB, change=ChangeProse())
"""The bundled base reading no change's description: every prose line counts."""


def by_context(f: Fixture) -> set[int]:
    """Lines that scan decides only from the lines around them, the things a line rule cannot carry (the
    export's header says so): another library's borrow error (its traceback, the same process's lines), and
    a problem only named in a change's description (the paragraph's cue above it) or its title (where the line
    begins)."""
    hits = scan_hits(KB, f)
    decided = {i for problem_id in ELSEWHERE for i in hits.get(problem_id, set())}
    if any(KB.change.cue_in(line) or KB.change.is_title(line) for line in f.lines):
        for problem_id, lines in scan_hits(NO_CHANGE, f).items():
            decided |= lines - hits.get(problem_id, set())
    return decided


def test_exported_rules_fire_on_no_near_miss(fired: engines.Fired) -> None:
    wrong = []
    for f in FIXTURES:
        context_only = by_context(f)
        for problem_id in f.rejects:
            for i in sorted(fired.get(problem_id, set()) - context_only):
                if f.start <= i < f.start + len(f.lines):
                    wrong.append(f"{f.name}:{i - f.start + 1} {problem_id}: {ALL_LINES[i]!r}")
    assert not wrong, "\n".join(wrong)


def test_exported_rules_fire_only_in_files_where_scan_finds_the_id(fired: engines.Fired) -> None:
    # Lines a rule fires on beyond scan's (a message quoted in a traceback) stay in files that have the problem.
    for f in FIXTURES:
        found = {x.id for x in _full_scan(f)}
        span = range(f.start, f.start + len(f.lines))
        context_only = by_context(f)
        assert {i for i, lines in fired.items() if any(n in span for n in lines - context_only)} <= found, f.name


def _full_scan(f: Fixture) -> list[Any]:
    sc = Scanner(KB)
    for line in f.lines:
        sc.feed(line, f.name)
    sc.finish()
    return sc.result().findings


RAW = [  # raw lines as shippers send them: prefixes, colour codes, quoted text
    ("vllm-1  | (APIServer pid=1) ERROR 07-07 20:12:45 [serving_chat.py:240] RuntimeError: Already borrowed",
     {"tokenizer-already-borrowed"}),
    ("[pod/vllm-7d9f6c-abcde/vllm] 2025-07-07T20:14:10.123Z (APIServer pid=1) ERROR 07-07 20:14:10 "
     "[async_llm.py:480] AsyncLLM output_handler failed.", {"engine-dead"}),
    ("\x1b[1;31mERROR\x1b[0m 07-07 20:12:45 [core_client.py:564] Engine core proc EngineCore_DP0 died unexpectedly, "
     "shutting down client.", {"engine-dead"}),
    ("Engine core proc\xa0EngineCore_DP0 died unexpectedly", {"engine-dead"}),  # no space: not the first table's
    # phrase, but still a process that serves said to die (the table for the class, before real-world-9)
    ("Engine core proc\xa0EngineCore_DP0 stopped", set()),  # no space and no death said: nothing
    ("(APIServer pid=12) INFO 08-02 09:15:02 [logger.py:43] Received request chatcmpl-9: prompt: 'What does "
     "\"RuntimeError: Already borrowed\" mean?', params: SamplingParams(max_tokens=64)", set()),
    ("gpu-node-3:412:412 [0] NCCL WARN Failed to open libibverbs.so[.1]", set()),
    ("gpu-node-3:412:412 [0] NCCL WARN NET/IB : Got async event : port error", {"nccl-failure"}),
    ('(APIServer pid=1) INFO:     127.0.0.1:5 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request',
     {"http-error-status"}),
    ('(APIServer pid=1) INFO:     127.0.0.1:5 - "POST /v1/chat/completions HTTP/1.1" 200 OK', set()),
    ("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", {"cuda-oom"}),
    ("WARNING 07-07 20:12:44 [context.py:276] Failed to acquire tokenizer in current thread. Retrying (1/5)...",
     {"tokenizer-acquire-retry"}),
    ("the book is already borrowed", set()),
]


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_raw_lines_fire_what_scan_finds_on_them(engine: str) -> None:
    lines = [line for line, _ in RAW]
    for line, expected in RAW:  # scan agrees with the expectation, line by line
        sc = Scanner(KB)
        sc.feed(line)
        sc.finish()
        assert {f.id for f in sc.result().findings} == expected, line
    fired = ENGINES[engine](lines)
    assert [{i for i, n in fired.items() if k in n} for k in range(len(lines))] == [e for _, e in RAW]


# The attribution a line can carry: scan calls these lines another library's borrow error or source code
# quoting the words (never the tokenizer race); the exported rule, run by each engine, must not fire on them.
NOT_THE_TOKENIZER = [
    '  File "/usr/local/lib/python3.11/site-packages/watchfiles/main.py", line 120, in watch RuntimeError: Already borrowed',
    "RuntimeError: Already borrowed (pyo3 pyclass RustNotify held by another thread)",
    "polars.exceptions.ComputeError: Runtime error: Already borrowed",
    '            if exc.args[0] == "Already borrowed" and retries > 0:',
]


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_exported_tokenizer_rule_carries_scan_attribution_on_the_line(engine: str) -> None:
    tokenizer = "tokenizer-already-borrowed"
    for line in NOT_THE_TOKENIZER:  # scan: never the tokenizer id on these lines alone
        sc = Scanner(KB)
        sc.feed(line)
        sc.finish()
        assert tokenizer not in {f.id for f in sc.result().findings}, line
    bare = "(APIServer pid=1) ERROR 07-07 20:12:45 [serving_chat.py:240] RuntimeError: Already borrowed"
    fired = ENGINES[engine]([*NOT_THE_TOKENIZER, bare])
    assert fired.get(tokenizer, set()) == {len(NOT_THE_TOKENIZER)}


def test_the_export_says_what_of_the_attribution_it_carries() -> None:
    doc = yaml.safe_load(text("prometheus"))
    rules = {r["labels"]["finding_id"]: r for r in doc["groups"][0]["rules"]}
    note = rules["tokenizer-already-borrowed"]["annotations"]["attribution"]
    assert "watchfiles" in note and "low confidence" in note and "pyo3-borrow-elsewhere" in note
    assert "attribution" not in rules["engine-dead"]["annotations"]  # no context table, nothing to say
    es = {r["id"]: r for r in json.loads(text("elasticsearch"))["rules"]}
    assert es["tokenizer-already-borrowed"]["attribution"] == note
    for fmt in ("loki", "vector"):
        assert "Attribution of tokenizer-already-borrowed #1: one line only" in text(fmt)


# ---- each dialect against Python on hostile text -----------------------------------------------------

TRICKY = ["a", "A", " ", "\t", "\x0b", "\x1c", "\x85", "\xa0", "\u2028", "\u3000", "\u0663", "٣", "0", "9", ".",
          '"', "'", "`", "\\", "-", "&", "~", "[", "]", "|", "/", "\x1b", "é", "😀", "_"]
PATTERNS = [r"x\S{1,3}y", r"x\s+y", r"[^\s]z", r"\d{2}", r"[\d.]+!", r"a(?:b|c\.)?d", r'q"[45]0', r"[&~-]{2}",
            r"(?P<detail>[0-9]{1,3}/[0-9]{1,3})", r"\x41\u00e9", r"p{,2}q", r"r{}", r"[\]\\]", r"é.😀"]


def _strings(seed: int, n: int) -> list[str]:
    rnd = random.Random(seed)
    letters = [*TRICKY, "x", "y", "z", "q", "p", "r", "b", "c", "d", "!", "4", "5", "{", "}", ","]
    return ["".join(rnd.choice(letters) for _ in range(rnd.randint(0, 9))) for _ in range(n)]


def _bundled_patterns() -> list[str]:
    return sorted({p for prob in KB for s in prob.signatures if scan_only_reason(s) is None
                   for name in ("message", "exclude") for p in ((s.get(name),) if isinstance(s.get(name), str) else s.get(name, ()))})


def test_python_classes_are_what_re_matches() -> None:
    every = "".join(map(chr, range(0x110000))).replace("\ud800", "")
    for letter in "sd":
        expected = {ord(c) for c in re.findall(rf"\{letter}", every)}
        assert {cp for lo, hi in python_class(letter) for cp in range(lo, hi + 1)} == expected


@pytest.mark.slow
def test_re2_and_rust_read_the_rewritten_patterns_as_python_does() -> None:
    re2 = pytest.importorskip("re2", reason="google-re2 is not installed")
    pyvrl = pytest.importorskip("pyvrl", reason="pyvrl (Vector's VRL) is not installed")
    patterns = [*PATTERNS, *_bundled_patterns()]
    strings = _strings(1, 1500) + [f"x{t}y" for t in TRICKY] + ALL_LINES[:300]
    # each pattern rewritten and compiled once: over ~600 patterns and ~2,000 strings, rewriting per string alone took
    # past pytest-timeout's 600 s on a busy machine
    rewritten = [to_re2(p) for p in patterns]
    in_python = [re.compile(p) for p in patterns]
    in_re2 = [re2.compile(p) for p in rewritten]
    vrl = pyvrl.Transform("[" + ", ".join(f"match(string!(.s), r'{p}')" for p in rewritten) + "]")
    for s in strings:
        python = [p.search(s) is not None for p in in_python]
        assert [p.search(s) is not None for p in in_re2] == python, s
        assert vrl.remap({"s": s}) == python, s


@pytest.mark.slow
def test_lucene_reads_the_rewritten_patterns_as_python_does() -> None:
    if engines.missing_lucene():
        pytest.skip(engines.missing_lucene())
    patterns = [*PATTERNS, *_bundled_patterns()]
    strings = _strings(2, 1500) + [f"x{t}y" for t in TRICKY] + ALL_LINES[:300] + ["a\nAlready borrowed"]
    lucene = {p: ".*(" + to_lucene(p) + ").*" for p in patterns}
    results = engines.lucene(list(lucene.values()), strings)
    for p, wrapped in lucene.items():
        got = results[wrapped]
        assert not isinstance(got, str), got
        # a keyword value may hold a newline (merged lines): a match may not cross it, as scan's never does
        python = [any(re.search(p, part) for part in s.split("\n")) for s in strings]
        assert got == python, p


@pytest.mark.parametrize("pattern", [
    "^Already", "borrowed$", r"\w+", r"\bNCCL", r"(?=x)y", r"(?i)nccl", r"(a)\1", "a*+", "[a&&b]", "[[:alpha:]]",
    r"\Aa", r"[\S]", "a{2000}", "(?#c)a",
])
def test_constructs_without_a_faithful_spelling_are_refused(pattern: str) -> None:
    from borrowguard.knowledge.export.dialects import Unsupported

    with pytest.raises(Unsupported):
        to_re2(pattern)
    with pytest.raises(Unsupported):
        to_lucene(pattern)


def test_a_user_signature_without_a_faithful_line_regex_goes_to_the_scan_list(tmp_path: Path) -> None:
    rules = tmp_path / "site.toml"
    rules.write_text(
        '[[problem]]\nid = "site-oops"\ntitle = "Oops"\nseverity = "error"\nexplanation = "Why."\n'
        '[[problem.signature]]\nmessage = ["^OOPS \\\\w{1,20}"]\nanchors = ["OOPS"]\n'
        '[[problem]]\nid = "site-fine"\ntitle = "Fine"\nseverity = "info"\nexplanation = "Why."\n'
        '[[problem.signature]]\nmessage = ["FINE [0-9]{2}"]\nanchors = ["FINE"]\n',
        encoding="utf-8",
    )
    kb = load(rules)
    for fmt in ("loki", "prometheus", "vector"):
        out = export(kb, fmt, Options(selector=SELECTOR) if fmt in ("loki", "prometheus") else Options())
        assert "site-oops #1: its regex cannot be written for this engine: the anchor '^'" in out
        assert "site-fine" in out.split("Needs borrowguard scan")[1]
    doc = json.loads(export(kb, "elasticsearch"))
    assert "site-oops" not in {r["id"] for r in doc["rules"]} and "site-fine" in {r["id"] for r in doc["rules"]}


# ---- file formats, parsed back and checked by their tools --------------------------------------------


def test_prometheus_rule_group_parses_back_with_the_loki_queries() -> None:
    doc = yaml.safe_load(text("prometheus", window="10m"))
    (group,) = doc["groups"]
    assert group["name"] == "borrowguard"
    queries = [line for line in text("loki", window="10m").splitlines() if line and not line.startswith("#")]
    assert [r["expr"] for r in group["rules"]] == queries
    for rule in group["rules"]:
        problem_id = rule["labels"]["finding_id"]
        assert re.fullmatch(r"Borrowguard[A-Za-z0-9]+", rule["alert"])
        assert rule["labels"]["severity"] == {"error": "critical"}.get(KB[problem_id].severity, KB[problem_id].severity)
        assert rule["annotations"]["runbook"] == f"borrowguard explain {problem_id}"
        assert rule["annotations"]["summary"] == KB[problem_id].title
        for selector, _, _, window in engines.logql_parts(rule["expr"]):
            assert (selector, window) == (SELECTOR, "10m")


@pytest.mark.slow
def test_promtool_accepts_the_rule_group(tmp_path: Path) -> None:
    if engines.missing_promtool():
        pytest.skip(engines.missing_promtool())
    # promtool parses expressions as PromQL; Loki's are LogQL (checked by the next test). Everything else
    # (group and alert names, labels, annotation templates) is promtool's to check, with a PromQL stand-in.
    doc = yaml.safe_load(text("prometheus"))
    for rule in doc["groups"][0]["rules"]:
        rule["expr"] = "vector(1) > 0"
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    proc = engines.promtool_check(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(EXPORTED)} rules found" in proc.stdout
    doc["groups"][0]["rules"][0]["annotations"]["summary"] = "{{ $value"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    assert engines.promtool_check(path).returncode != 0  # it does check templates


@pytest.mark.slow
def test_grafana_logql_grammar_parses_every_query() -> None:
    if engines.missing_logql_parser():
        pytest.skip(engines.missing_logql_parser())
    header, *blocks = text("loki", selector='{namespace="llm", container=~"vllm.*"}').split("\n\n")
    blocks[0] = f"{header}\n{blocks[0]}"  # a block is a query after its comments, which are LogQL comments
    queries = [*loki_exprs().values(), *blocks]
    assert len(blocks) == len(EXPORTED)
    assert engines.logql_errors(queries) == [[] for _ in queries]
    assert engines.logql_errors(['count_over_time({app="vllm"} |~ `a` [5m]) >'])[0]  # it does find errors


def test_vector_config_compiles_as_vrl_and_tags_events() -> None:
    pyvrl = pytest.importorskip("pyvrl", reason="pyvrl (Vector's VRL) is not installed")
    config = yaml.safe_load(text("vector", field="log.msg", source="k8s"))
    transform = config["transforms"]["borrowguard_findings"]
    assert transform["type"] == "remap" and transform["inputs"] == ["k8s"]
    program = pyvrl.Transform(transform["source"] + "\n.")
    assert program.remap({"log": {"msg": "RuntimeError: Already borrowed"}})["borrowguard_ids"] == [
        "tokenizer-already-borrowed"
    ]
    assert "borrowguard_ids" not in program.remap({"log": {"msg": "all good"}})
    assert "borrowguard_ids" not in program.remap({"other": 1})  # no field: passes through


@pytest.mark.slow
def test_elasticsearch_search_names_each_finding_and_every_regexp_compiles_in_lucene() -> None:
    doc = json.loads(text("elasticsearch", field="log.original", window="15m"))
    search = doc["search"]["query"]["bool"]
    assert search["filter"] == [{"range": {"@timestamp": {"gte": "now-15m"}}}]
    assert [q["bool"]["_name"] for q in search["should"]] == [r["id"] for r in doc["rules"]]
    patterns = sorted(set(engines.regexps(doc["rules"], "log.original")))
    assert all(p.startswith(".*(") and p.endswith(").*") for p in patterns)
    if engines.missing_lucene():
        pytest.skip(engines.missing_lucene())
    errors = {p: r for p, r in engines.lucene(patterns, ["x"]).items() if isinstance(r, str)}
    assert not errors  # parses, and determinizes within the default max_determinized_states (10000)


@pytest.mark.parametrize("value", ["plain", 'a "quoted" \\ back', "tab\tand\x1b esc", "nel\x85 ls\u2028 ps\u2029",
                                   "bom\ufeff", "emoji 😀", "multi\nline\nprogram", " lead\nspace", "# not a comment",
                                   "key: value", "- dash", "{{ $value }}", ""])
def test_yaml_writer_round_trips(value: str) -> None:
    from borrowguard.knowledge.export import _yaml

    doc = {"a": {"b-c": [value, {"d": value, "e": [value]}], "n": 3}, "empty": [], "weird key!": value}
    assert yaml.safe_load(_yaml.dump(doc, ["comment"])) == doc


def test_lucene_gets_a_long_gap_of_any_character_unbounded() -> None:
    # Lucene cannot determinize `.*` before a long bounded gap of any character (GGML_ASSERT's condition): the
    # gap goes out unbounded, a short one and a gap of a narrower class stay as written
    assert to_lucene(r"A.{1,200}B") == "A[^\n]+B"
    assert to_lucene(r"A.{0,900}B") == "A[^\n]*B"
    assert to_lucene(r"A.{0,5}B") == "A[^\n]{0,5}B"
    assert to_lucene(r"A\S{1,128}B").endswith("{1,128}B")
    assert to_re2(r"A.{1,200}B") == r"A[^\x{a}]{1,200}B"
