"""Real tracebacks from the installed transformers, logged the way the reference server logs them."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import transformers

from borrowguard.data import WORDPIECE, tokenizer_path
from borrowguard.scan import scan_paths
from borrowguard.server.logs import DATE_FORMAT, FORMAT


@pytest.fixture
def server_log(tmp_path: Path):
    """A logger writing to a file in the reference server's (vLLM's) format."""
    path = tmp_path / "server.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(FORMAT, DATE_FORMAT))
    logger = logging.getLogger(f"borrowguard.test.scan.{tmp_path.name}")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger, path
    logger.removeHandler(handler)
    handler.close()


def real_truncation_error() -> BaseException:
    # A stride longer than the window is refused by the backend's enable_truncation, called from
    # transformers' set_truncation_and_padding: the frames of a borrow error, another exception.
    tok = transformers.AutoTokenizer.from_pretrained(str(tokenizer_path(WORDPIECE)))
    try:
        tok(["hello world how are you"], truncation=True, max_length=4, stride=10, return_overflowing_tokens=True)
    except Exception as exc:  # ValueError on both stacks; the type does not matter here
        return exc
    raise AssertionError("expected the tokenizer to refuse the stride")


def test_real_frames_with_another_exception_are_not_a_borrow_error(server_log) -> None:
    logger, path = server_log
    logger.error("Error in preprocessing prompt inputs", exc_info=real_truncation_error())
    text = path.read_text()
    assert "in set_truncation_and_padding" in text and "enable_truncation(**target)" in text
    result = scan_paths([str(path)])
    assert result.findings == []
    assert result.lines == len(text.splitlines())


def test_real_frames_cut_before_the_exception_are_a_borrow_error(server_log, tmp_path: Path) -> None:
    logger, path = server_log
    logger.error("Error in preprocessing prompt inputs", exc_info=real_truncation_error())
    lines = path.read_text().splitlines()
    cut = next(i for i, line in enumerate(lines) if "enable_truncation(**target)" in line) + 1
    excerpt = tmp_path / "excerpt.txt"
    excerpt.write_text("\n".join(lines[:cut]) + "\n")
    (finding,) = scan_paths([str(excerpt)]).findings
    assert finding.id == "tokenizer-already-borrowed"
    assert "enable_truncation(**target)" in finding.first.text
    assert finding.first.timestamp is not None  # inherited from the ERROR line's header above the traceback


def test_already_borrowed_logged_by_the_server_format(server_log) -> None:
    logger, path = server_log
    logger.info("Starting server")
    try:
        raise RuntimeError("Already borrowed")
    except RuntimeError as exc:
        logger.error("Error in preprocessing prompt inputs (request r-1)", exc_info=exc)
    result = scan_paths([str(path)])
    (finding,) = result.findings
    lines = path.read_text().splitlines()
    header = lines[1]
    assert header.startswith("ERROR ") and lines[-1] == "RuntimeError: Already borrowed"
    assert 'raise RuntimeError("Already borrowed")' in lines[-2]  # source code: must not count twice
    assert finding.id == "tokenizer-already-borrowed"
    assert finding.count == 1
    assert finding.first.line_no == len(lines)
    assert finding.first.timestamp == header.split(" [")[0].split(" ", 1)[1]  # "MM-DD HH:MM:SS" of the header
