"""`borrowguard rules export` with hostile text: nothing a user gives may start a line of its own in an export.

Refused: a character that ends a line or a comment for some reader of the file (CR, LF, NEL, U+2028, U+2029),
escape codes and other controls, bidi controls, in an option or in any text of a `--rules` file. Accepted
but awkward text (quotes, backslashes, `#`, `: `, `{{ }}`, backticks, non-ASCII) goes out and every export is
parsed back by the target's own parser: PyYAML (loki ruler rules, vector), json (elasticsearch,
opensearch), VRL itself (pyvrl), and promtool and Grafana's LogQL grammar where they are installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from borrowguard.cli import main
from borrowguard.knowledge import load
from borrowguard.knowledge.export import FORMATS, Options, export
from borrowguard.knowledge.export.loki import loki_plan
from borrowguard.knowledge.export.safety import check_output, unsafe, vrl_string
from support import engines

BAD = {
    "CR": "\r", "LF": "\n", "NEL": "\x85", "LS": "\u2028", "PS": "\u2029", "ESC": "\x1b[31m", "NUL": "\x00",
    "DEL": "\x7f", "VT": "\x0b", "FF": "\x0c", "C1 CSI": "\x9b", "RLO": "\u202e", "LRI": "\u2066",
}
SELECTOR_FORMATS = ("loki", "prometheus")


def options(fmt: str, **extra: str) -> Options:
    return Options(**({"selector": '{app="vllm"}'} if fmt in SELECTOR_FORMATS else {}), **extra)  # type: ignore[arg-type]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def toml_string(text: str) -> str:
    # a TOML basic string that carries any character (a raw control character is not valid TOML)
    return '"' + "".join(ch if ch.isprintable() and ch not in '"\\' else f"\\U{ord(ch):08x}" for ch in text) + '"'


def rules_file(path: Path, pid: str = "site-oops", title: str = "Oops", explanation: str = "Why.",
               message: str = "OOPS [0-9]{2}", remedy: str = "restart it") -> Path:
    path.write_text(
        f"[[problem]]\nid = {toml_string(pid)}\ntitle = {toml_string(title)}\nseverity = \"error\"\n"
        f"explanation = {toml_string(explanation)}\nremedies = [{toml_string(remedy)}]\n"
        f"[[problem.signature]]\nmessage = [{toml_string(message)}]\nanchors = [\"OOPS\"]\n"
        # an environment-only problem: its id goes into the header comment of every line-rule export
        f"[[problem]]\nid = {toml_string(pid + '-env')}\ntitle = \"Env\"\nseverity = \"info\"\n"
        "explanation = \"Why.\"\n",
        encoding="utf-8",
    )
    return path


# ---- refused --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", BAD)
@pytest.mark.parametrize("fmt", SELECTOR_FORMATS)
def test_a_selector_with_a_line_break_or_control_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str, name: str
) -> None:
    out = tmp_path / "rules.yaml"
    selector = f'{{app="x{BAD[name]}foo: bar"}}'
    code, stdout, err = cli(capsys, "rules", "export", "--format", fmt, "--selector", selector, "-o", str(out))
    assert code == 2 and stdout == "" and not out.exists()
    assert err.count("\n") == 1 and err.startswith("borrowguard: error: --selector ")
    assert f"U+{ord(BAD[name][0]):04X}" in err
    assert unsafe(err.rstrip("\n")) is None  # the message itself does not carry the character


@pytest.mark.parametrize("name", BAD)
@pytest.mark.parametrize("field", ["id", "title", "explanation", "message", "remedy"])
def test_a_rules_file_text_with_a_line_break_or_control_is_refused_in_every_format(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, field: str, name: str
) -> None:
    bad = f"x{BAD[name]}injected: 1"
    given = {"id": "site-oops", "title": "Oops", "explanation": "Why.", "message": "OOPS [0-9]{2}", "remedy": "r"}
    # in a regex, only the character itself: "\x1b[31m" would be refused as a regex (an open class) first
    given[field] = f"OOPS x{BAD[name][0]}injected: 1" if field == "message" else bad
    rules = rules_file(tmp_path / "site.toml", given["id"], given["title"], given["explanation"], given["message"],
                       given["remedy"])
    for fmt in FORMATS:
        args = ["rules", "export", "--format", fmt, "--rules", str(rules)]
        code, stdout, err = cli(capsys, *args, *(("--selector", '{app="v"}') if fmt in SELECTOR_FORMATS else ()))
        if field == "explanation" and name == "LF":  # paragraphs: every format writes LF safely
            assert code == 0 and err == "", err
            if fmt == "prometheus":
                (rule,) = [r for r in yaml.safe_load(stdout)["groups"][0]["rules"] if r["labels"]["finding_id"] == "site-oops"]
                assert list(yaml.safe_load(stdout)) == ["groups"] and "\n" not in rule["annotations"]["description"]
            continue
        assert code == 2 and stdout == "", (fmt, stdout)
        assert err.count("\n") == 1 and f"U+{ord(BAD[name][0]):04X}" in err, (fmt, err)
        assert unsafe(err.rstrip("\n")) is None


@pytest.mark.slow
def test_refusals_from_a_real_process_are_one_line_without_a_traceback(tmp_path: Path) -> None:
    rules = rules_file(tmp_path / "site.toml", pid="site-x\rinjected: 1")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for args in (["--format", "prometheus", "--selector", '{app="x\u2028y: 1"}'],
                 ["--format", "loki", "--selector", '{app=`x\ny`}'],
                 ["--format", "vector", "--rules", str(rules)]):
        proc = subprocess.run([sys.executable, "-m", "borrowguard", "rules", "export", *args],
                              capture_output=True, text=True, timeout=120, env=env, check=False)
        assert proc.returncode == 2 and proc.stdout == "", proc.stdout
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr


def test_a_huge_refused_value_is_cut_in_the_message(capsys: pytest.CaptureFixture[str]) -> None:
    selector = '{app="' + "a" * 120_000 + '\r"}'
    code, _, err = cli(capsys, "rules", "export", "--format", "loki", "--selector", selector)
    assert code == 2 and len(err) < 400 and "120,009 characters" in err


@pytest.mark.parametrize("name", [n for n in BAD if n != "LF"])
def test_the_last_check_refuses_any_such_character_in_an_export(name: str) -> None:
    from borrowguard.errors import UserInputError

    with pytest.raises(UserInputError, match=f"U\\+{ord(BAD[name][0]):04X}"):
        check_output(f"# header\nok: 1\n# {BAD[name]}x\n", "loki")
    assert check_output("# tab\tand\nnewline\n", "loki")


def test_an_explanation_with_paragraphs_still_exports() -> None:
    for fmt in FORMATS:
        assert "\n" in export(load(), fmt, options(fmt))  # the bundled ones have several


# ---- accepted, and parsed back ---------------------------------------------------------------------------

AWKWARD_ID = 'site-"q"\\b{{ .x }}#c: d`e\'f'
AWKWARD_TITLE = '# not a comment {{ $value }} key: value - "quoted" \\ `tick` — ü'
AWKWARD_SELECTOR = '{app="v#1: \\"x\\" {{ y }}", pod=~`a"b#c`}'


@pytest.fixture(scope="module")
def awkward(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rules_file(tmp_path_factory.mktemp("awkward") / "site.toml", pid=AWKWARD_ID, title=AWKWARD_TITLE,
                      explanation="First: one.\n\n# Second {{ x }}\n- third", remedy="a # b")


def _export(rules: Path, fmt: str, **extra: str) -> str:
    opts = Options(selector=AWKWARD_SELECTOR, **extra) if fmt in SELECTOR_FORMATS else Options(**extra)  # type: ignore[arg-type]
    return export(load(rules), fmt, opts)


def test_the_rule_group_parses_back_with_only_groups_and_the_awkward_text_intact(awkward: Path) -> None:
    doc = yaml.safe_load(_export(awkward, "prometheus"))
    assert list(doc) == ["groups"]
    (group,) = doc["groups"]
    assert set(group) == {"name", "rules"}
    rules = {r["labels"]["finding_id"]: r for r in group["rules"]}
    assert AWKWARD_ID in rules
    for rule in rules.values():
        assert set(rule) == {"alert", "expr", "labels", "annotations"}
        for selector, _, _, _ in engines.logql_parts(rule["expr"]):
            assert selector == AWKWARD_SELECTOR
    assert rules[AWKWARD_ID]["annotations"]["runbook"] == f"borrowguard explain {AWKWARD_ID}"


def test_the_loki_export_is_comments_and_one_query_per_line(awkward: Path) -> None:
    out = _export(awkward, "loki")
    queries = [line for line in out.split("\n") if line and not line.startswith("#")]
    ids = [line for line in out.split("\n") if line.startswith("# site-")]
    assert any(AWKWARD_ID in line for line in ids)
    for query in queries:  # each non-comment line is a whole query this export writes
        assert [p[0] for p in engines.logql_parts(query)] and all(
            p[0] == AWKWARD_SELECTOR for p in engines.logql_parts(query))
    assert len(queries) == len(loki_plan(load(awkward)).rules)


@pytest.mark.slow
def test_the_loki_export_parses_with_the_logql_grammar(awkward: Path) -> None:
    if engines.missing_logql_parser():
        pytest.skip(engines.missing_logql_parser())
    header, *blocks = _export(awkward, "loki").split("\n\n")
    blocks[0] = f"{header}\n{blocks[0]}"
    assert engines.logql_errors(blocks) == [[] for _ in blocks]


@pytest.mark.slow
def test_promtool_accepts_the_awkward_rule_group(awkward: Path, tmp_path: Path) -> None:
    if engines.missing_promtool():
        pytest.skip(engines.missing_promtool())
    text = _export(awkward, "prometheus")
    doc = yaml.safe_load(text)
    for rule in doc["groups"][0]["rules"]:
        rule["expr"] = "vector(1) > 0"  # promtool reads PromQL; the LogQL is checked above
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    proc = engines.promtool_check(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_vector_config_parses_as_yaml_and_vrl_tags_the_awkward_id(awkward: Path) -> None:
    config = yaml.safe_load(_export(awkward, "vector"))
    assert list(config) == ["transforms"] and list(config["transforms"]) == ["borrowguard_findings"]
    pyvrl = pytest.importorskip("pyvrl", reason="pyvrl (Vector's VRL) is not installed")
    program = pyvrl.Transform(config["transforms"]["borrowguard_findings"]["source"] + "\n.")
    assert program.remap({"message": "OOPS 42"})["borrowguard_ids"] == [AWKWARD_ID]
    assert "borrowguard_ids" not in program.remap({"message": "fine"})


@pytest.mark.parametrize("text", ['a"b', "a\\b", "{{ .x }}", "a{b}c", "}}", "\\{", "ü 😀"])
def test_vrl_strings_read_back_as_written(text: str) -> None:
    pyvrl = pytest.importorskip("pyvrl", reason="pyvrl (Vector's VRL) is not installed")
    assert pyvrl.Transform(f".a = {vrl_string(text)}\n.").remap({})["a"] == text


@pytest.mark.parametrize("fmt", ["elasticsearch", "opensearch"])
def test_the_json_export_parses_back_with_the_awkward_text_intact(awkward: Path, fmt: str) -> None:
    text = _export(awkward, fmt)
    doc = json.loads(text)
    assert set(doc) == {"about", "engine", "field", "rules", "needs_borrowguard_scan", "search"}
    (rule,) = [r for r in doc["rules"] if r["id"] == AWKWARD_ID]
    assert rule["title"] == AWKWARD_TITLE and rule["query"]["bool"]["_name"] == AWKWARD_ID
    assert unsafe(text, newline=True) is None  # Lucene's spelled-out \s (NEL, U+2028) goes out escaped
    assert any("\x85" in p for p in engines.regexps(doc["rules"], doc["field"]))


@pytest.mark.slow
def test_lucene_compiles_every_regexp_of_the_awkward_export(awkward: Path) -> None:
    if engines.missing_lucene():
        pytest.skip(engines.missing_lucene())
    doc = json.loads(_export(awkward, "opensearch"))
    patterns = sorted(set(engines.regexps(doc["rules"], doc["field"])))
    results = engines.lucene(patterns, ["OOPS 42", "fine"])
    assert {p: r for p, r in results.items() if isinstance(r, str)} == {}
    (site,) = [p for p in patterns if "OOPS" in p]
    assert results[site] == [True, False]


def test_the_markdown_page_keeps_one_heading_per_problem(awkward: Path) -> None:
    out = _export(awkward, "markdown")
    kb = load(awkward)
    assert sum(line.startswith("## ") for line in out.split("\n")) == len(kb)
