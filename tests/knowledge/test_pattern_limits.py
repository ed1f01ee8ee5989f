"""A `--rules` regex that could hang scan, or that RE2 refuses, is refused when the file is loaded.

RE2 (Loki's Go regexp, Vector's Rust regex) refuses a count above 1000 and nested counts whose product is
above 1000; Python's backtracking has no such limit and takes hours where a repetition that varies in count
repeats something that varies too (`X(?:a{1,100}){1,100}Y` on one 3 KB line). The loader applies both
limits itself, so it decides the same with or without google-re2; with google-re2 installed, RE2 also
compiles every pattern as `rules export` writes it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from borrowguard.knowledge import KnowledgeError, load
from borrowguard.knowledge.export.dialects import Unsupported, to_re2
from borrowguard.knowledge.signatures import PATTERN_FIELDS, re2_problem, repetition_problem

ISSUE = "OOPS(?:(?:ab{1000}){1000}){1000}"
SLOW = "OOPS(?:a{1,100}){1,100}Y"
REFUSED = [
    ISSUE, SLOW, "OOPS(?:a{1,30}){1,30}Y", "OOPS a{1001}", "OOPS(?:a{10}){101}", "OOPS(?:(?:a{10}){10}){11}",
    "OOPS(?:a|a)*Y", "OOPS(?:a|ab)+", "OOPS(a+)+", "OOPS(?:a?)*", "OOPS(?:x{0,5}y?){2,9}", "OOPS(?:\\d+|\\s)+",
    "OOPS(?:a{2,3}?){2,5}", "OOPS.*a.*a.*Y", "OOPS\\s*a*a*a*Y", "OOPSa{0,900}a{0,900}a{0,900}Y", "OOPS(?:a?){30}a{30}",
    "OOPS.*died", "OOPS \\S+ died", "OOPS (?:foo|bar)+", "OOPS x{2,}",
]
ACCEPTED = [
    "OOPS (?:foo|bar){1,9}", "OOPS .{0,1000}died", "OOPS \\S{1,128} died", "OOPS (?:[0-9]{1,3}\\.){3}[0-9]{1,3}",
    "OOPS a{1000}", "OOPS (?:a{10}){100}",
    "OOPS (?:mutably )?borrowed", "OOPS(?: \\((?P<detail>[0-9]{1,3}/[0-9]{1,3})\\))?",
    "OOPS (?:\\.|,){1,20}", "OOPS \\{1,2}", "OOPS [(+*)]{1,5}",
]


def rules(tmp_path: Path, pattern: str) -> Path:
    escaped = pattern.replace("\\", "\\\\").replace('"', '\\"')
    path = tmp_path / "site.toml"
    path.write_text('[[problem]]\nid = "site-oops"\ntitle = "Oops"\nseverity = "error"\nexplanation = "Why."\n'
                    f'[[problem.signature]]\nmessage = ["{escaped}"]\nanchors = ["OOPS"]\n', encoding="utf-8")
    return path


def borrowguard(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-m", "borrowguard", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


@pytest.mark.parametrize("pattern", REFUSED)
def test_the_loader_refuses_patterns_that_hang_or_that_re2_refuses(tmp_path: Path, pattern: str) -> None:
    with pytest.raises(KnowledgeError, match=r"rule 'site-oops': signature #1: field 'message' item 1"):
        load(rules(tmp_path, pattern))


@pytest.mark.parametrize("pattern", ACCEPTED)
def test_the_loader_keeps_bounded_unambiguous_patterns(tmp_path: Path, pattern: str) -> None:
    assert load(rules(tmp_path, pattern))["site-oops"].signatures[0]["message"] == (pattern,)


@pytest.mark.slow
def test_the_issue_pattern_is_refused_by_every_command_in_one_line(tmp_path: Path) -> None:
    path = rules(tmp_path, ISSUE)
    for args in (["rules", "export", "--format", "loki", "--selector", '{app="v"}'],
                 ["rules", "export", "--format", "vector"], ["explain", "site-oops"], ["scan", os.devnull]):
        proc = borrowguard(*args, "--rules", str(path))
        assert proc.returncode == 2 and proc.stdout == "", (args, proc.stdout)
        assert proc.stderr.count("\n") == 1 and "1000" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.slow
def test_scan_with_a_slow_pattern_on_a_3kb_line_is_refused_not_run(tmp_path: Path) -> None:
    log = tmp_path / "one.log"
    log.write_text("OOPS" + "a" * 3000 + "\n", encoding="utf-8")
    for pattern in (SLOW, "OOPS(?:a{1,30}){1,30}Y", "OOPS(?:a|a)*Y"):
        # before: more than 35 s on this line (measured); the bound here only keeps a regression from hanging CI
        proc = borrowguard("scan", "--rules", str(rules(tmp_path, pattern)), str(log), timeout=600)
        assert proc.returncode == 2 and ("backtracks" in proc.stderr or "1000" in proc.stderr), proc.stderr


def test_without_google_re2_the_loader_refuses_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "re2", None)  # import re2 now raises ImportError
    assert re2_problem(ISSUE) is None
    for pattern in REFUSED:
        with pytest.raises(KnowledgeError):
            load(rules(tmp_path, pattern))


def _nested(counts: list[str]) -> str:
    pattern = "ab"
    for count in counts:
        pattern = f"(?:{pattern}){count}"
    return "OOPS" + pattern


CORPUS = [_nested(c) for c in (["{1000}"], ["{1001}"], ["{10}", "{100}"], ["{10}", "{101}"], ["{2,40}", "{25}"],
                                ["{2,41}", "{25}"], ["{3}"] * 6, ["{3}"] * 7, ["{0,999}", "{1}"], ["{5,}", "{200}"],
                                ["{5,}", "{201}"], ["*", "{1000}"], ["+", "{999}", "?"])] + REFUSED + ACCEPTED


@pytest.mark.parametrize("pattern", CORPUS)
def test_the_limits_agree_with_re2(pattern: str) -> None:
    re2 = pytest.importorskip("re2", reason="google-re2 (the dev extra) is not installed")
    options = re2.Options()
    options.log_errors = False
    try:
        re2.compile(to_re2(pattern), options)
        refused_by_re2 = False
    except Unsupported:
        pytest.skip("not exported (outside the export's whitelist)")
    except re2.error:
        refused_by_re2 = True
    if refused_by_re2:
        assert repetition_problem(pattern) is not None  # so a loader without google-re2 refuses it too
    assert (re2_problem(pattern) is not None) is refused_by_re2


def test_bundled_patterns_are_within_the_limits() -> None:
    patterns = {p for problem in load() for raw in problem.signatures for name in PATTERN_FIELDS
                for p in ((raw[name],) if isinstance(raw.get(name), str) else raw.get(name, ()))}
    assert len(patterns) > 30
    assert {p: repetition_problem(p) or re2_problem(p) for p in patterns} == dict.fromkeys(patterns)


def test_the_budget_covers_the_longest_message_scan_matches() -> None:
    from borrowguard.knowledge.signatures import LINE
    from borrowguard.scan.normalize import MAX_LINE

    assert LINE >= MAX_LINE
