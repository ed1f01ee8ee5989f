"""Every fixture log (written for this project) against the expected findings, on both read paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from borrowguard.knowledge import load
from borrowguard.scan import Scanner, ScanResult, fast, scan_paths
from borrowguard.scan.chain import summary as chain_summary

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"

# fixture -> {id: (count, first line, first timestamp, first process)}
EXPECTED: dict[str, dict[str, tuple[int, int, str | None, str | None]]] = {
    "vllm_v1_borrow_chain.log": {
        "tokenizer-already-borrowed": (1, 23, "07-07 20:12:45", "APIServer pid=2841"),
        "tokenizer-acquire-retry": (3, 7, "07-07 20:12:44", "APIServer pid=2841"),
        "http-error-status": (3, 24, "07-07 20:12:45", "APIServer pid=2841"),
        "engine-dead": (4, 26, "07-07 20:13:02", "EngineCore_DP0 pid=2990"),
    },
    "vllm_v0_format.log": {
        # raw traceback (no header per line) through the encode_special_tokens setter
        "tokenizer-already-borrowed": (1, 9, "07-07 20:12:46", None),
        "engine-dead": (1, 11, "07-07 20:12:46", None),
    },
    "excerpt_cut_borrowed.txt": {"tokenizer-already-borrowed": (1, 5, None, None)},
    "mm_cache_desync.log": {
        "engine-dead": (1, 1, "08-02 09:14:07", "EngineCore_DP0 pid=311"),
        "mm-cache-desync": (1, 7, "08-02 09:14:07", "EngineCore_DP0 pid=311"),
    },
    "mm_cache_cut.txt": {"mm-cache-desync": (1, 3, None, None)},
    "shm_stall.log": {"shm-broadcast-stall": (3, 4, "09-12 03:17:44", "EngineCore_DP0 pid=77")},
    "nccl_failure.log": {"nccl-failure": (4, 5, None, None)},
    # EngineCore's "failed to start" is the engine's death (as real-world-8 and -11 label it); the OOM is its cause
    "cuda_oom.log": {
        "engine-dead": (1, 1, "10-01 11:22:33", "EngineCore_DP0 pid=901"),
        "cuda-oom": (1, 5, "10-01 11:22:33", "EngineCore_DP0 pid=901"),
    },
    "http_status.log": {"http-error-status": (3, 6, None, None)},
    "near_misses.log": {},
    "docker_compose.log": {
        "tokenizer-acquire-retry": (1, 1, "07-07 20:12:44", "vllm-1 > APIServer pid=1"),
        "tokenizer-already-borrowed": (1, 2, "07-07 20:12:45", "vllm-1 > APIServer pid=1"),
        "http-error-status": (1, 3, "07-07 20:12:45", "proxy-1"),
    },
    "kubectl_prefix.log": {
        "shm-broadcast-stall": (1, 2, "07-07 20:13:10", "vllm-7d9f6c-abcde/vllm > EngineCore_DP0 pid=90"),
        "engine-dead": (1, 3, "07-07 20:14:10", "vllm-7d9f6c-abcde/vllm > APIServer pid=1"),
    },
    "caret_ansi.log": {"engine-dead": (1, 2, "07-07 20:12:45", None)},
    "interleaved_processes.log": {
        "tokenizer-already-borrowed": (1, 8, "07-07 20:12:44", "APIServer pid=7"),
        "cuda-oom": (1, 9, "07-07 20:12:44", "EngineCore pid=1 > RayWorkerProc pid=2, ip=10.0.0.5"),
    },
    "python_logging.log": {
        "tokenizer-already-borrowed": (1, 8, "2025-07-07 20:12:45,456", None),
        "cuda-oom": (1, 9, "2025-07-07T20:12:46Z", None),
    },
}


def summary(result: ScanResult) -> dict[str, tuple[int, int, str | None, str | None]]:
    return {f.id: (f.count, f.first.line_no, f.first.timestamp, f.first.process) for f in result.findings}


def feed_all(path: Path) -> ScanResult:
    sc = Scanner()
    with path.open("rb") as fh:
        for line in fh:
            sc.feed(line, source=path.name)
    sc.finish()
    return sc.result()


def test_every_fixture_is_listed() -> None:
    assert sorted(p.name for p in LOGS.iterdir() if p.is_file()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_findings_bulk_path(name: str) -> None:
    assert summary(scan_paths([str(LOGS / name)])) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_findings_line_path(name: str) -> None:
    assert summary(feed_all(LOGS / name)) == EXPECTED[name]


def test_every_scan_id_has_a_fixture() -> None:
    ids = {p.id for p in load() if p.signatures}
    covered = {i for found in EXPECTED.values() for i in found}
    assert ids == covered


@pytest.mark.slow
def test_fixtures_buried_in_healthy_lines_give_the_same_findings(tmp_path: Path) -> None:
    # The bulk path skips lines without anchors: a failure surrounded by thousands of healthy lines, across
    # block boundaries, must be found exactly as the line-by-line path finds it.
    healthy = (
        "(APIServer pid=2841) INFO 07-07 20:11:00 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 "
        "tokens/s, Running: 1 reqs\n"
        '(APIServer pid=2841) INFO:     127.0.0.1:1 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    ) * 3000
    big = tmp_path / "big.log"
    with big.open("w") as fh:
        for name in sorted(EXPECTED):
            fh.write(healthy)
            text = (LOGS / name).read_text(encoding="utf-8", errors="replace")
            fh.write(text if text.endswith("\n") else text + "\n")
    sc = Scanner()
    with big.open("rb") as fh:
        for block in fast.blocks(fh, size=64 * 1024):  # small blocks: many boundaries
            sc._apply(sc._source("big.log"), fast.analyse(block, sc._anchor_search, sc._probe_bytes))
    sc.finish()
    bulk = sc.result()
    line = feed_all(big)
    assert bulk.lines == line.lines
    assert summary(bulk) == summary(line)
    assert {f.id: f.last.line_no for f in bulk.findings} == {f.id: f.last.line_no for f in line.findings}
    assert len(bulk.findings) == 8


def test_traceback_is_one_occurrence_and_excerpt_is_the_exception() -> None:
    result = scan_paths([str(LOGS / "vllm_v1_borrow_chain.log")])
    borrowed = next(f for f in result.findings if f.id == "tokenizer-already-borrowed")
    assert borrowed.count == 1  # frames + exception line of one traceback
    assert borrowed.first.text == "RuntimeError: Already borrowed"


def test_cut_excerpt_names_the_frames() -> None:
    result = scan_paths([str(LOGS / "excerpt_cut_borrowed.txt")])
    (finding,) = result.findings
    assert "in set_truncation_and_padding" in finding.first.text
    assert "no_truncation()" in finding.first.text
    assert finding.first.text.endswith("(cut before the exception)")


def test_traceback_ending_in_another_exception_is_not_a_borrow_error() -> None:
    sc = Scanner()
    for line in [
        "Traceback (most recent call last):",
        '  File "/x/tokenization_utils_fast.py", line 494, in set_truncation_and_padding',
        "    self._tokenizer.enable_truncation(**target)",
        "Exception: Truncation error: Second sequence not provided",
    ]:
        sc.feed(line)
    sc.finish()
    assert sc.result().findings == []


def test_details_count_http_statuses_and_retry_attempts() -> None:
    result = scan_paths([str(LOGS / "vllm_v1_borrow_chain.log")])
    by_id = {f.id: f for f in result.findings}
    assert dict(by_id["http-error-status"].details) == {"400": 2, "500": 1}
    assert dict(by_id["tokenizer-acquire-retry"].details) == {"1/5": 1, "2/5": 1, "5/5": 1}


def test_causal_chain_of_the_borrow_cascade() -> None:
    result = scan_paths([str(LOGS / "vllm_v1_borrow_chain.log")])
    chain = [(s.role, s.id) for s in result.chain]
    # The engine death is not put down to the tokenizer race: EngineCore's own traceback ends in a
    # ValueError without tokenizer frames, and that exception is shown as its cause.
    assert chain == [
        ("root", "tokenizer-already-borrowed"),
        ("environment", "tokenizers-borrow-race"),
        ("environment", "vllm-bad-words-race"),  # the log's start-up lines say vLLM 0.19.1, 1 renderer worker
        ("consequence", "tokenizer-acquire-retry"),
        ("root", "engine-dead"),
        ("consequence", "http-error-status"),
    ]
    root = result.chain[0]
    assert root.advice is not None and "tokenizer race first" in root.advice
    env = result.chain[1]
    assert env.advice == load()["tokenizers-borrow-race"].remedies[0]  # the remedy is written once, in the KB
    death = next(f for f in result.findings if f.id == "engine-dead")
    assert death.cause == "ValueError: Request chatcmpl-41 has no cached encoder input"
    assert not death.via_tokenizer
    assert result.chain[4].advice == f"EngineCore's own final exception: {death.cause}"
    assert chain_summary(result.chain) == [
        "tokenizer-acquire-retry".join(["tokenizer-already-borrowed → ", " → http-error-status: "])
        + root.advice,
        f"engine-dead: EngineCore's own final exception: {death.cause}",
    ]
    assert result.server is not None and result.server.vllm_version == "0.19.1"
    assert result.server.renderer_num_workers == 1  # not among the non-default args: the default


ENGINE_TOKENIZER_DEATH = """(EngineCore_DP0 pid=9) ERROR 07-07 20:13:02 [core.py:710] EngineCore encountered a fatal error.
(EngineCore_DP0 pid=9) ERROR 07-07 20:13:02 [core.py:710] Traceback (most recent call last):
(EngineCore_DP0 pid=9) ERROR 07-07 20:13:02 [core.py:710]   File "/v/vllm/v1/engine/core.py", line 701, in run_engine_core
(EngineCore_DP0 pid=9) ERROR 07-07 20:13:02 [core.py:710]     engine_core.run_busy_loop()
(EngineCore_DP0 pid=9) ERROR 07-07 20:13:02 [core.py:710]   File "/t/transformers/tokenization_utils_fast.py", line 494, in set_truncation_and_padding
(EngineCore_DP0 pid=9) ERROR 07-07 20:13:02 [core.py:710]     self._tokenizer.enable_truncation(**target)
(EngineCore_DP0 pid=9) ERROR 07-07 20:13:02 [core.py:710] RuntimeError: Already borrowed
"""


def test_the_race_is_linked_to_a_death_only_through_enginecores_own_traceback(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text(ENGINE_TOKENIZER_DEATH)
    result = scan_paths([str(log)])
    death = next(f for f in result.findings if f.id == "engine-dead")
    assert death.cause == "RuntimeError: Already borrowed" and death.via_tokenizer
    assert [(s.role, s.id, s.caused_by) for s in result.chain if s.role != "environment"] == [
        ("root", "tokenizer-already-borrowed", ()),
        ("consequence", "engine-dead", ("tokenizer-already-borrowed",)),
    ]
    assert death.count == 1  # the message and its traceback are one occurrence


def test_shm_stall_points_at_the_nccl_rule() -> None:
    result = scan_paths([str(LOGS / "shm_stall.log")])
    assert [(s.role, s.id) for s in result.chain] == [
        ("root", "shm-broadcast-stall"),
        ("environment", "nccl-aarch64-proxy-leak"),
    ]


def test_several_sources_merge() -> None:
    result = scan_paths([str(LOGS / "shm_stall.log"), str(LOGS / "kubectl_prefix.log")])
    by_id = {f.id: f for f in result.findings}
    assert by_id["shm-broadcast-stall"].count == 4
    assert by_id["shm-broadcast-stall"].first.source.endswith("shm_stall.log")
    assert by_id["shm-broadcast-stall"].last.source.endswith("kubectl_prefix.log")
    assert result.lines == 6 + 3
    assert len(result.sources) == 2


def test_json_schema() -> None:
    doc = scan_paths([str(LOGS / "vllm_v1_borrow_chain.log")]).to_dict()
    assert set(doc) >= {"findings", "chain", "lines"}
    assert doc["lines"] == 39
    for f in doc["findings"]:
        assert {"id", "severity", "count", "first", "last", "process", "excerpt", "remedies"} <= set(f)
        assert set(f["first"]) == {"source", "line", "timestamp"}
        assert f["remedies"] == list(load()[f["id"]].remedies)
    assert [f["severity"] for f in doc["findings"]] == ["error", "error", "warning", "warning"]
    assert doc["chain"][0]["role"] == "root"


def test_source_lines_in_a_traceback_are_not_messages_on_either_path(tmp_path: Path) -> None:
    # The bulk path starts reading at the anchor's line; it must back up to the traceback's start so
    # that the quoted source line below is read as code, as the line-by-line path reads it.
    log = tmp_path / "code.log"
    log.write_text(
        "INFO 07-07 20:12:40 [a.py:1] healthy\n" * 50
        + "ERROR 07-07 20:12:44 [context.py:270] retry failed\n"
        "Traceback (most recent call last):\n"
        '  File "/x/vllm/multimodal/context.py", line 270, in call_hf_processor\n'
        "    if 'Already borrowed' in str(exc) or 'EngineDeadError' in str(exc):\n"
        "ValueError: processor failed\n"
    )
    assert scan_paths([str(log)]).findings == []
    assert feed_all(log).findings == []
