"""Real-world excerpts: recall and precision of `borrowguard scan` on logs people actually posted.

tests/fixtures/logs/real-world/ holds verbatim excerpts from public issue threads (vLLM, vllm-ascend, SGLang-
adjacent projects, embedding and vision services), each file citing its thread. Header lines start with
"# ": `source:` (required), `note:`, `expect: ID CONFIDENCE` (what it must produce), `reject: ID` (what it
must not), `server: key=value ...` (start-up facts it must extract). positive/ files expect at least one
finding; near-miss/ files are clean of the problems they resemble. A finding that a file does not expect is
a false positive, whichever directory it is in.

    pytest -s tests/scan/test_scan_recall.py -k numbers    # prints precision and recall
"""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence
from pathlib import Path

import pytest

from borrowguard.knowledge import load
from borrowguard.scan import Scanner, ScanResult
from support.realworld import ROOT, Case, read_case

FILES = sorted(ROOT.glob("*/*.log"))
MIN_RECALL = 0.9
MIN_PRECISION = 1.0


def bulk(case: Case) -> ScanResult:
    """The excerpt read as one stream (once per run: several tests of a file look at the same result)."""
    return _read_stream(case.body, case.path.name)


@functools.cache
def _read_stream(body: str, source: str) -> ScanResult:
    sc = Scanner()
    sc.scan_stream(io.BytesIO(body.encode()), source)
    return sc.result()


def line_by_line(case: Case) -> ScanResult:
    sc = Scanner()
    for line in case.body.splitlines():
        sc.feed(line, case.path.name)
    sc.finish()
    return sc.result()


def found(result: ScanResult) -> dict[str, str]:
    return {f.id: f.confidence.value for f in result.findings}


CASES = [read_case(p) for p in FILES]


def cases(directory: str) -> list[Case]:
    """The excerpts of one set (a directory of tests/fixtures/logs/ with positive/ and near-miss/)."""
    return [read_case(p) for p in sorted((ROOT.parent / directory).glob("*/*.log"))]


def test_the_set_is_big_enough_and_every_file_is_cited() -> None:
    assert len(CASES) >= 40
    families = {"tokenizer-already-borrowed", "engine-dead", "nccl-failure", "mm-cache-desync"}
    assert families <= {i for c in CASES for i in c.expect}
    for case in CASES:
        assert case.source, f"{case.path.name} does not cite its source"
        assert case.body.strip()
        assert (case.path.parent.name == "positive") == bool(case.expect), case.path.name
        assert not case.reject & set(case.expect), case.path.name
    ids = {p.id for p in load()}
    assert {i for c in CASES for i in (*c.expect, *c.reject)} <= ids


def test_headers_are_inert_so_the_files_can_be_scanned_as_they_are() -> None:
    sc = Scanner()
    for case in CASES:
        for line in case.path.read_text(encoding="utf-8").splitlines():
            if line.startswith("# "):
                sc.feed(line, case.path.name)
    sc.finish()
    assert sc.result().findings == []


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.path.parent.name}/{c.path.name}")
def test_each_excerpt_on_both_read_paths(case: Case) -> None:
    expected = dict(case.expect)
    for result in (bulk(case), line_by_line(case)):
        got = found(result)
        assert got == expected, case.source
        assert not case.reject & set(got)
        if case.server:
            assert result.server is not None
            facts = {k: str(v) for k, v in result.server.facts().items()}
            assert {k: facts.get(k) for k in case.server} == case.server


def score(cases: Sequence[Case] = CASES) -> tuple[float, float, int, int, int]:
    """Precision, recall and the counts behind them, over `cases` read in one pass."""
    tp = fp = fn = 0
    for case in cases:
        got = set(found(bulk(case)))
        tp += len(got & set(case.expect))
        fn += len(set(case.expect) - got)
        fp += len(got - set(case.expect))
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall, tp, fp, fn


def check_collected_set(collected: Sequence[Case], earlier: Sequence[Case]) -> None:
    """A set collected after the rules: at least 30 excerpts, each citing a thread that no earlier set has,
    its folder saying its label."""
    earlier_threads = {c.source.split()[0] for c in earlier}
    assert len(collected) >= 30
    for case in collected:
        assert case.source.split()[-1].startswith("https://"), case.path.name
        assert case.source.split()[0] not in earlier_threads, f"{case.path.name}: its source is already in an earlier set"
        assert (case.path.parent.name == "positive") == bool(case.expect), case.path.name
        assert not case.reject & set(case.expect), case.path.name


@pytest.mark.slow  # scores every real-world case: ~12 s
def test_numbers() -> None:
    precision, recall, tp, fp, fn = score()
    positives = sum(1 for c in CASES if c.expect)
    print(
        f"\nreal-world excerpts: {len(CASES)} files ({positives} positive, {len(CASES) - positives} near-miss), "
        f"{tp + fn} expected findings: precision {precision:.2f}, recall {recall:.2f} (tp {tp}, fp {fp}, fn {fn})"
    )
    assert precision >= MIN_PRECISION
    assert recall >= MIN_RECALL


# ---- full logs of real vLLM servers (tests/fixtures/logs/real/, recorded by tests/vllm_serve) ----------

SERVER_LOGS = sorted((ROOT.parent / "real").glob("*.log"))


@pytest.mark.skipif(not SERVER_LOGS, reason="no recorded server logs yet")
@pytest.mark.parametrize("path", SERVER_LOGS, ids=lambda p: p.name)
def test_recorded_vllm_server_logs(path: Path) -> None:
    header = path.read_text(encoding="utf-8", errors="replace").splitlines()[0]
    sc = Scanner()
    with path.open("rb") as fh:
        sc.scan_stream(fh, path.name)
    result = sc.result()
    assert result.server is not None and result.server.vllm_version is not None
    if "--renderer-num-workers" in header:
        workers = int(header.split("--renderer-num-workers", 1)[1].split()[0])
        assert result.server.renderer_num_workers == workers
    got = found(result)
    if "UNGUARDED" in header:
        assert got.get("tokenizer-already-borrowed") == "high"
        # the race answers requests with errors; it does not kill the engine
        assert "engine-dead" not in got or not next(f for f in result.findings if f.id == "engine-dead").via_tokenizer
        env = [s.id for s in result.chain if s.role == "environment"]
        if result.server.vllm_version.startswith(("0.18", "0.19", "0.20")):
            assert "vllm-retry-loop" not in env and "vllm-bad-words-race" in env
    elif "guarded" in path.name:
        assert "tokenizer-already-borrowed" not in got and "tokenizer-acquire-retry" not in got


@pytest.mark.slow
def test_excerpts_buried_in_healthy_lines_read_the_same_on_both_paths(tmp_path: Path) -> None:
    # Small blocks put block boundaries inside tracebacks, held-back stalls and start-up phases.
    from borrowguard.scan import fast

    healthy = (
        "(APIServer pid=2841) INFO 07-07 20:11:00 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 "
        "tokens/s, Running: 1 reqs, GPU KV cache usage: 0.1%\n"
        '(APIServer pid=2841) INFO:     127.0.0.1:1 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
        "gpu-node-1:1:1 [0] NCCL INFO Channel 00/02 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
    ) * 300
    big = tmp_path / "big.log"
    big.write_text("".join(healthy + case.body for case in CASES), encoding="utf-8")
    bulk = Scanner()
    with big.open("rb") as fh:
        for block in fast.blocks(fh, size=16 * 1024):
            bulk._apply(bulk._source("big"), fast.analyse(block, bulk._anchor_search, bulk._probe_bytes))
    bulk.finish()
    line = Scanner()
    with big.open("rb") as fh:
        for raw in fh:
            line.feed(raw, "big")
    line.finish()
    a, b = bulk.result(), line.result()
    assert a.lines == b.lines
    assert [(f.id, f.count, f.first.line_no, f.last.line_no, f.confidence) for f in a.findings] == [
        (f.id, f.count, f.first.line_no, f.last.line_no, f.confidence) for f in b.findings
    ]
