"""`borrowguard explain`, the troubleshooting page, and `borrowguard rules export` as users run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from borrowguard.cli import cli
from borrowguard.knowledge import load
from borrowguard.knowledge.export import Options, export
from borrowguard.knowledge.export.markdown import prose

KB = load()
PAGE = Path(__file__).parents[2] / "docs" / "troubleshooting.md"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "160"}
    return subprocess.run([sys.executable, "-m", "borrowguard", *args], capture_output=True, text=True,
                          timeout=60, env=env, check=False)


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


# ---- explain -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("problem_id", [p.id for p in KB])
def test_explain_every_id(problem_id: str) -> None:
    problem = KB[problem_id]
    out = invoke("explain", problem_id)
    assert out.startswith(f"{problem_id} — {problem.title}\n")
    for section in ("What it is", *(("How it shows in logs",) if problem.signatures else ())):
        assert f"\n{section}\n" in out
    for i, remedy in enumerate(problem.remedies, 1):
        assert f"  {i}. {remedy}\n" in out  # in order
    for ref in problem.references:
        assert ref in out
    doc = json.loads(invoke("explain", problem_id, "--json"))
    assert doc["id"] == problem_id and doc["remedies"] == list(problem.remedies)
    assert len(doc["logs"]) == len(problem.signatures)


def test_explain_says_how_it_shows_in_logs_and_which_versions() -> None:
    out = invoke("explain", "tokenizers-borrow-race")
    assert "tokenizers <=0.22.2, transformers (any version)" in out
    assert "\nHow it shows in logs" not in out  # an environment problem: doctor finds it
    doc = json.loads(invoke("explain", "tokenizer-already-borrowed", "--json"))
    assert doc["found_by"] == ["scan"] and doc["line_rules"] == [1]
    assert doc["logs"][0].startswith("A log line matching `Already borrowed` or `Already mutably borrowed`")
    assert any(v.startswith("through tokenizers-borrow-race: tokenizers <=0.22.2") for v in doc["versions"])
    assert {"text": "vllm-project/vllm#40949", "url": "https://github.com/vllm-project/vllm/issues/40949"} in doc[
        "references"
    ]


def test_explain_list() -> None:
    lines = invoke("explain", "--list").splitlines()
    assert [line.split()[0] for line in lines] == [p.id for p in KB]
    assert [d["id"] for d in json.loads(invoke("explain", "--list", "--json"))] == [p.id for p in KB]


@pytest.mark.slow
@pytest.mark.parametrize(("args", "message"), [
    (("tokenizer-borrow-race",), "unknown id 'tokenizer-borrow-race'; did you mean tokenizers-borrow-race"),
    (("nccl",), "did you mean nccl-"),
    (("zzz-nothing",), "unknown id 'zzz-nothing' (borrowguard explain --list shows every id)"),
    ((), "give an id to explain"),
    (("cuda-oom", "--list"), "give an ID or --list, not both"),
])
def test_explain_mistakes_are_one_line_and_exit_2(args: tuple[str, ...], message: str) -> None:
    proc = run("explain", *args)
    assert proc.returncode == 2
    assert proc.stdout == "" and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_explain_reads_a_users_rules_file(tmp_path: Path) -> None:
    rules = tmp_path / "site.toml"
    rules.write_text('[[problem]]\nid = "site-x"\ntitle = "Site \\u001b[2J problem"\nseverity = "info"\n'
                     'explanation = "Why."\nremedies = ["fix it   # because"]\n', encoding="utf-8")
    out = invoke("explain", "site-x", "--rules", str(rules))
    assert out.startswith("site-x — Site  problem\n") and "\x1b" not in out  # no control code reaches the terminal
    assert "found by: neither doctor nor scan" in out
    assert "  1. fix it   # because" in out


# ---- the troubleshooting page --------------------------------------------------------------------------


def test_troubleshooting_page_is_up_to_date() -> None:
    assert PAGE.read_text(encoding="utf-8") == export(KB, "markdown"), (
        "docs/troubleshooting.md is out of date: borrowguard rules export --format markdown -o docs/troubleshooting.md"
    )


def test_troubleshooting_page_has_every_id_with_its_remedies() -> None:
    page = export(KB, "markdown")
    for problem in KB:
        section = page.split(f"\n## `{problem.id}`\n", 1)[1].split("\n## ", 1)[0]
        assert prose(problem.title) in section
        for remedy in problem.remedies:
            assert remedy.partition("   # ")[0].strip() in section or prose(remedy) in section
        for ref in problem.references:
            assert f"[{ref}](https://github.com/" in section


def test_markdown_text_cannot_become_markup() -> None:
    assert prose("a *b* <c> [d](e) `f`") == "a \\*b\\* \\<c> \\[d\\](e) \\`f\\`"
    assert prose("x\n# h\n12. n\n- l\n3 apples\n0.21 up\n-0.5\n---\n> q") == (
        "x\n\\# h\n12\\. n\n\\- l\n3 apples\n0.21 up\n-0.5\n\\---\n\\> q"
    )


# ---- rules export --------------------------------------------------------------------------------------


def test_rules_export_writes_every_format(tmp_path: Path) -> None:
    for fmt, extra in (("loki", ["--selector", '{app="vllm"}']), ("prometheus", ["--selector", '{app="vllm"}']),
                       ("elasticsearch", []), ("opensearch", ["--field", "log.original"]),
                       ("vector", ["--input", "k8s"]), ("markdown", [])):
        out = tmp_path / f"out.{fmt}"
        assert invoke("rules", "export", "--format", fmt, *extra, "--output", str(out)) == ""
        assert out.read_text(encoding="utf-8") == invoke("rules", "export", "--format", fmt, *extra)
    header = (tmp_path / "out.prometheus").read_text(encoding="utf-8").splitlines()[0]
    assert header.startswith("# Generated by `borrowguard rules export --format prometheus --selector '{app=\"vllm\"}'`")
    assert yaml.safe_load((tmp_path / "out.vector").read_text(encoding="utf-8"))["transforms"]
    assert json.loads((tmp_path / "out.opensearch").read_text(encoding="utf-8"))["field"] == "log.original"


@pytest.mark.slow
@pytest.mark.parametrize(("args", "message"), [
    (["--format", "loki"], "the loki format needs --selector"),
    (["--format", "prometheus", "--selector", "app=vllm"], "is not a LogQL stream selector"),
    (["--format", "vector", "--selector", '{a="b"}'], "--selector applies to the loki or prometheus format, not vector"),
    (["--format", "loki", "--selector", '{a="b"}', "--window", "5 minutes"], "--window '5 minutes'"),
    (["--format", "elasticsearch", "--field", "a b"], "--field 'a b' is not a field name"),
    (["--format", "markdown", "--input", "x"], "--input applies to the vector format, not markdown"),
    (["--format", "markdown", "--output", "/"], "--output /: a directory"),
    (["--format", "markdown", "--output", "/no/such/dir/x.md"], "does not exist"),
])
def test_rules_export_mistakes_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    proc = run("rules", "export", *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


def test_help_teaches() -> None:
    out = invoke("rules", "export", "--help")
    assert "needs borrowguard scan" in out and "borrowguard rules export --format prometheus" in out
    assert "borrowguard explain --list" in invoke("explain", "--help")
    assert "explain" in invoke("--help") and "rules" in invoke("--help")


def test_export_options_default_sensibly() -> None:
    assert '"field": "message.keyword"' in export(KB, "elasticsearch")
    assert "line = to_string(.message)" in export(KB, "vector", Options())


@pytest.mark.slow
@pytest.mark.parametrize("typed", ["\x1b[31mtokenizers-borrow-race\x1b[0m", "\x1b]0;title\x07tokenizers-borrow-race",
                                   "tokenizers-borrow-race\u200b", "\u202etokenizers-borrow-race", " tokenizers-borrow-race\r"])
def test_explain_strips_escape_codes_around_a_valid_id_and_explains_it(typed: str) -> None:
    proc = run("explain", typed)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("tokenizers-borrow-race — ") and "\x1b" not in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("typed", ["\x1b[31mzzz-nothing\x1b[0m", "\x1b[1mtokenizer-borrow-race", "nccl\x1b[0m\x07",
                                   "Tokenizers-Borrow-Race", "tokenizers-borrow-race-", "tokenizers\u00a0borrow-race"])
def test_explain_never_suggests_the_id_it_says_is_unknown(typed: str) -> None:
    proc = run("explain", typed)
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr
    shown = proc.stderr.split("unknown id ", 1)[1].split(";")[0].split(" (")[0]
    suggested = proc.stderr.split("did you mean ", 1)[1].split("?")[0].split(", ") if "did you mean" in proc.stderr else []
    assert all(repr(s) != shown for s in suggested), proc.stderr


@pytest.mark.slow
def test_explain_cuts_a_huge_unknown_id_and_says_its_length() -> None:
    proc = run("explain", "a" * 120_000)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert len(proc.stderr) < 300 and "120,000 characters" in proc.stderr, proc.stderr[:300]


def test_explain_json_escapes_what_a_terminal_would_obey(tmp_path: Path) -> None:
    title = "Site \x9b2J \x1b[2J\u2028 \u202e problem"  # C1 CSI clears the screen on some terminals
    rules = tmp_path / "site.toml"
    escaped = "".join(ch if ch.isprintable() else f"\\U{ord(ch):08x}" for ch in title)
    rules.write_text(f'[[problem]]\nid = "site-x"\ntitle = "{escaped}"\nseverity = "info"\nexplanation = "Why."\n',
                     encoding="utf-8")
    for args in (("site-x", "--json"), ("--list", "--json")):
        out = invoke("explain", *args, "--rules", str(rules))
        assert not any(ch in out for ch in "\x9b\x1b\u2028\u202e"), out
        doc = json.loads(out)
        assert (doc if isinstance(doc, dict) else doc[-1])["title"] == title


@pytest.mark.parametrize(("fmt", "options", "setting"), [
    ("loki", {}, "selector"),
    ("prometheus", {"selector": "app=vllm"}, "selector"),
    ("vector", {"selector": '{a="b"}'}, "selector"),
    ("loki", {"selector": '{a="b"}', "window": "5 minutes"}, "window"),
    ("elasticsearch", {"field": "a b"}, "field"),
    ("vector", {"source": "a b"}, "source"),
    ("markdown", {"source": "x"}, "source"),
    ("loki", {"selector": '{a="b\nc"}'}, "selector"),
])
def test_the_librarys_export_errors_name_the_setting_not_a_flag(fmt: str, options: dict, setting: str) -> None:
    from borrowguard.errors import ConfigError
    from borrowguard.knowledge import load
    from borrowguard.knowledge.export import Options, export

    with pytest.raises(ConfigError) as refused:
        export(load(), fmt, Options(**options))
    assert refused.value.setting == setting
    assert "--" not in str(refused.value), str(refused.value)
