"""The knowledge base loader: the bundled rules, user rules, and validation errors naming rule and field."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from borrowguard.errors import UserInputError
from borrowguard.knowledge import CHECKS, SEVERITIES, KnowledgeError, load
from borrowguard.knowledge.loader import MAX_RULES_BYTES

DOCTOR_IDS = {
    "tokenizers-borrow-race",
    "tokenizers-silent-race",
    "transformers-blocks-tokenizers-fix",
    "vllm-retry-loop",
    "vllm-requirement-mismatch",
    "vllm-mm-cache-desync",
    "nccl-aarch64-proxy-leak",
    "python-too-old",
    "guard-active",
}

GOOD = """
[[problem]]
id = "{id}"
title = "A site rule"
severity = "{severity}"
explanation = "Why."
remedies = ["do this"]
references = ["org/repo#1"]
[problem.detect]
packages = {{ tokenizers = ">=0" }}
"""


def write(tmp_path: Path, text: str, name: str = "rules.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_bundled_rules_hold_every_doctor_problem_with_remedies() -> None:
    kb = load()
    assert set(kb.problems) >= DOCTOR_IDS
    for problem_id in DOCTOR_IDS:
        problem = kb.get(problem_id)
        assert problem is not None and problem.detect, problem_id
        assert problem.severity in SEVERITIES
        assert problem.title and problem.explanation
        assert problem.remedies, f"{problem_id} has no remedy"
    assert kb.get("no-such-problem") is None


def test_bundled_load_is_cached_and_read_only() -> None:
    kb = load()
    assert load() is kb
    problem = kb["tokenizers-borrow-race"]
    with pytest.raises(FrozenInstanceError):
        problem.severity = "info"  # type: ignore[misc]
    with pytest.raises(TypeError):
        problem.detect["packages"] = {}  # type: ignore[index]
    with pytest.raises(TypeError):
        kb.problems["x"] = problem  # type: ignore[index]


def test_vllm_race_rules_name_their_versions_and_settings() -> None:
    kb = load()
    assert kb["vllm-retry-loop"].detect["packages"]["vllm"] == ">=0.17.0.dev0,<0.18.0.dev0"
    assert kb["vllm-bad-words-race"].detect["packages"]["vllm"] == ">=0.17.0.dev0,<0.21.0.dev0"
    workers = kb["vllm-renderer-workers-race"].detect
    assert workers["packages"]["vllm"] == ">=0.19.0.dev0,<0.21.0.dev0"
    assert workers["server"]["renderer_num_workers"] == ">=2"
    pool = kb["vllm-tokenizer-pool"]
    assert pool.severity == "info" and pool.detect["packages"]["vllm"] == ">=0.21.0.dev0"
    for rule in ("vllm-bad-words-race", "vllm-renderer-workers-race"):
        assert any("--renderer-num-workers 1" in r or "borrowguard" in r for r in kb[rule].remedies)
    # the knowledge base says what was measured: the tokenizer race did not kill the engine
    for rule in ("tokenizers-borrow-race", "tokenizer-already-borrowed"):
        text = " ".join(kb[rule].explanation.split())
        assert "dead engine" not in text and "never killed EngineCore" in text, rule


def test_nccl_remedy_names_the_fixed_release() -> None:
    problem = load()["nccl-aarch64-proxy-leak"]
    assert any("nvidia-nccl-cu13==2.29.7" in r for r in problem.remedies)
    assert problem.detect["machine"] == ("aarch64",)


def test_user_rules_add_and_override(tmp_path: Path) -> None:
    text = GOOD.format(id="site-rule", severity="info") + GOOD.format(id="vllm-retry-loop", severity="error")
    kb = load(write(tmp_path, text))
    assert kb["site-rule"].remedies == ("do this",)
    assert kb["vllm-retry-loop"].severity == "error"
    assert kb["vllm-retry-loop"].title == "A site rule"
    assert set(kb.problems) >= DOCTOR_IDS
    # the cached bundle is untouched by a user file
    assert load()["vllm-retry-loop"].severity == "warning"
    assert list(kb.problems)[-1] == "site-rule"


def test_a_users_change_cues_add_to_the_bundled_ones(tmp_path: Path) -> None:
    bundled = load().change
    assert bundled.cues and bundled.reach > 0
    kb = load(write(tmp_path, '[change]\ncues = ["## Rationale"]\nreach = 5\n'))
    assert kb.change.cues == (*bundled.cues, "## Rationale")
    assert kb.change.reach == bundled.reach  # the longer reach of the two
    assert bundled.openers and kb.change.openers == bundled.openers
    assert {p.id for p in load() if p.mentioned_in_changes} == {p.id for p in kb if p.mentioned_in_changes} != set()


@pytest.mark.parametrize(
    ("line", "is_title"),
    [
        ("Fix engine death on empty prompts", True),
        ("[Serve] Fix incorrect replica death detection", True),   # a component's tag before the verb
        ("[Core][Frontend] Fix the 500 on empty prompts", True),    # tags stacked
        ("[2] Fix the 500 on empty prompts", False),                # a number is no component
        ("The Fix landed yesterday, the 500s are back", False),
    ],
)
def test_a_changes_title_may_begin_with_its_components_tag(line: str, is_title: bool) -> None:
    assert load().change.is_title(line) is is_title


def test_signatures_and_related_are_kept_raw(tmp_path: Path) -> None:
    text = GOOD.format(id="a", severity="info") + (
        '[[problem]]\nid = "b"\ntitle = "t"\nseverity = "warning"\nexplanation = "e"\nrelated = ["a"]\n'
        '[[problem.signature]]\npattern = "Already borrowed"\nlevel = "ERROR"\n'
    )
    problem = load(write(tmp_path, text))["b"]
    assert problem.related == ("a",)
    assert problem.detect is None
    assert len(problem.signatures) == 1
    assert problem.signatures[0]["pattern"] == "Already borrowed"


def test_a_problems_exclude_is_every_one_of_its_tables(tmp_path: Path) -> None:
    text = (
        '[[problem]]\nid = "site-death"\ntitle = "t"\nseverity = "error"\nexplanation = "e"\n'
        'exclude = ["raise [A-Za-z]{1,40}Error"]\n'
        '[[problem.signature]]\nmessage = ["Backend crashed"]\nanchors = ["Backend crashed"]\n'
        '[[problem.signature]]\nmessage = ["Backend lost"]\nexclude = "lost track"\nanchors = ["Backend lost"]\n'
    )
    kb = load(write(tmp_path, text))
    first, second = kb["site-death"].signatures
    assert first["exclude"] == ("raise [A-Za-z]{1,40}Error",)
    assert second["exclude"] == ("raise [A-Za-z]{1,40}Error", "lost track")  # its own after the problem's
    found = scan_with(kb, "Backend lost at 12:00\n    raise RuntimeError('Backend lost')\n    raise ValueError('Backend crashed')\n")
    assert found["site-death"] == 1  # the log line; neither line of source
    # the bundled base says it once for engine-dead: source quoting a log call is no death in any of its tables
    assert all("(?:logger|logging|log)" in x[0] for x in [s["exclude"] for s in load()["engine-dead"].signatures])


def scan_with(kb: object, text: str) -> dict[str, int]:
    from borrowguard.scan import Scanner

    sc = Scanner(kb=kb)
    for line in text.splitlines():
        sc.feed(line, "x")
    sc.finish()
    return {f.id: f.count for f in sc.result().findings}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            GOOD.format(id="x", severity="fatal"),
            "rule 'x': field 'severity' must be one of info, warning, error",
        ),
        (
            '[[problem]]\nid = "x"\nseverity = "info"\nexplanation = "e"\n',
            "rule 'x': field 'title' is required",
        ),
        ('[[problem]]\ntitle = "t"\n', "rule #1: field 'id' must be a non-empty string"),
        (
            GOOD.format(id="x", severity="info").replace(
                "[problem.detect]", 'remedy = ["typo"]\n[problem.detect]'
            ),
            "rule 'x': field 'remedy' is not a known field",
        ),
        (
            GOOD.format(id="x", severity="info").replace("packages", "pakages"),
            "rule 'x': field 'detect.pakages' is not a known condition",
        ),
        (
            GOOD.format(id="x", severity="info").replace('">=0"', '"=>0.22"'),
            "rule 'x': field 'detect.packages.tokenizers' '=>0.22' is not a valid version specifier",
        ),
        (
            GOOD.format(id="x", severity="info") + 'check = "astrology"\n',
            "rule 'x': field 'detect.check' must be one of " + ", ".join(CHECKS),
        ),
        (
            GOOD.format(id="x", severity="info") + "machine = []\n",
            "rule 'x': field 'detect.machine' must be a non-empty list of strings",
        ),
        (
            GOOD.format(id="x", severity="info") + 'guard = "yes"\n',
            "rule 'x': field 'detect.guard' must be true or false",
        ),
        (
            GOOD.format(id="x", severity="info") + 'guarded_severity = "low"\n',
            "rule 'x': field 'detect.guarded_severity' must be one of",
        ),
        (
            GOOD.format(id="x", severity="info")
            + '[[problem.detect.fallback]]\nvllm = ">=1"\nrequires = []\n',
            "rule 'x': field 'detect.fallback' is only meaningful with check",
        ),
        (
            '[[problem]]\nid = "x"\ntitle = "t"\nseverity = "info"\nexplanation = "e"\n'
            '[problem.detect]\ncheck = "vllm-requirements"\n'
            '[[problem.detect.fallback]]\nvllm = ">=1"\nrequires = ["transformers>>4"]\n',
            "rule 'x': field 'detect.fallback[0].requires' 'transformers>>4' is not a valid requirement",
        ),
        (
            '[[problem]]\nid = "x"\ntitle = "t"\nseverity = "info"\nexplanation = "e"\nremedies = "one"\n',
            "rule 'x': field 'remedies' must be a list of non-empty strings",
        ),
        (
            '[[problem]]\nid = "x"\ntitle = "t"\nseverity = "info"\nexplanation = "e"\nsignature = "s"\n',
            "rule 'x': field 'signature' must be an array of tables",
        ),
        (
            '[[problem]]\nid = "x"\ntitle = "t"\nseverity = "info"\nexplanation = "e"\nrelated = ["nope"]\n',
            "rule 'x': field 'related' names unknown rule 'nope'",
        ),
        (
            GOOD.format(id="x", severity="info") + 'server = { renderer_workers = ">=2" }\n',
            "rule 'x': field 'detect.server.renderer_workers' is not a known server fact",
        ),
        (
            GOOD.format(id="x", severity="info") + 'server = { renderer_num_workers = "two" }\n',
            "rule 'x': field 'detect.server.renderer_num_workers' 'two' is not a valid version specifier",
        ),
        (
            GOOD.format(id="x", severity="info") + 'server = { structured_outputs_backend = "xgrammar" }\n',
            "rule 'x': field 'detect.server.structured_outputs_backend' must be a non-empty list of names",
        ),
        (GOOD.format(id="x", severity="info") * 2, "rule 'x' is defined twice"),
        ("[[problem]\nid = 1", "not valid TOML"),
        ('[rule]\nid = "x"\n', "unknown top-level key(s) rule"),
        ('[change]\ncues = ["PR"]\n', "[change]: field 'cues' must be a list of texts of at least 4 characters"),
        ('[change]\ncues = ["This PR"]\nreach = -1\n', "[change]: field 'reach' must be a number of lines"),
        ('[change]\nreach = true\n', "[change]: field 'reach' must be a number of lines"),
        ('[change]\ncue = ["This PR"]\n', "[change]: unknown field(s) cue"),
        ('[change]\nopeners = ["Fi"]\n', "[change]: field 'openers' must be a list of texts of at least 3 characters"),
        ('change = 3\n', "'change' must be a table"),
        (
            GOOD.format(id="x", severity="info").replace("[problem.detect]", 'mentioned_in_changes = "yes"\n[problem.detect]'),
            "rule 'x': field 'mentioned_in_changes' must be true or false",
        ),
        (
            GOOD.format(id="x", severity="info").replace("[problem.detect]", 'exclude = ["a", 3]\n[problem.detect]'),
            "rule 'x': field 'exclude' must be a list of non-empty strings",
        ),
        (
            GOOD.format(id="x", severity="info").replace("[problem.detect]", 'exclude = ["a"]\n[problem.detect]'),
            "rule 'x': field 'exclude' only applies together with [[problem.signature]] tables",
        ),
        ("x = " + "[" * 200_000, "nested too deeply"),
    ],
)
def test_validation_errors_name_rule_and_field(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(KnowledgeError) as info:
        load(write(tmp_path, body))
    assert message in str(info.value)
    assert isinstance(info.value, UserInputError)


def test_unreadable_user_files_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(KnowledgeError, match="rules file not found"):
        load(tmp_path / "missing.toml")
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (MAX_RULES_BYTES + 1))
    with pytest.raises(KnowledgeError, match="larger than"):
        load(big)
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(KnowledgeError, match="not UTF-8"):
        load(binary)
