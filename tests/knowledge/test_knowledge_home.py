"""A problem's facts live once, in the knowledge base: no problem id is written as a string literal in the
code outside borrowguard/knowledge/ (tests may name ids; they check behaviour). The code asks the knowledge
base by kind (`kb.log_ids(Kind.TOKENIZER_RACE)`, `kb.the(Kind.ENGINE_DEATH)`) instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

from borrowguard.knowledge import load

SRC = Path(__file__).resolve().parents[2] / "src" / "borrowguard"
HOME = SRC / "knowledge"
OTHER_WORDS = {
    # (file, literal): the same spelling for another concept, said here once
    ("verify/result.py", "engine-dead"): "ReasonCode.ENGINE_DEAD, a verdict reason code of verify --json",
}


def literals(path: Path) -> list[tuple[int, str]]:
    """String constants of a module, docstrings left out (prose may name an id)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_no_problem_id_is_written_outside_the_knowledge_base() -> None:
    ids = {p.id for p in load()}
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if HOME in path.parents:
            continue
        rel = path.relative_to(SRC).as_posix()
        for line, value in literals(path):
            if value in ids and (rel, value) not in OTHER_WORDS:
                found.append(f"{rel}:{line}: {value!r}")
    assert not found, "problem ids written outside knowledge/ (ask the KnowledgeBase by kind):\n" + "\n".join(found)


def test_the_check_sees_an_id_written_in_code(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""Mentions tokenizer-already-borrowed in prose."""\nIDS = {"tokenizer-already-borrowed"}\n')
    assert literals(module) == [(2, "tokenizer-already-borrowed")]
