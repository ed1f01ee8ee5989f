"""Hostile input: any bytes, huge lines, regex-hostile lines, damaged .gz, unbounded tracebacks."""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from borrowguard.errors import UserInputError
from borrowguard.scan import Scanner, expand, fast, scan_paths
from borrowguard.scan.inputs.readers import LineSplitter
from borrowguard.scan.model import MAX_DETAILS, MAX_PROCESSES
from borrowguard.scan.normalize import MAX_LINE
from borrowguard.scan.tracebacks import MAX_WINDOW_LINES, MAX_WINDOWS

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
SCANNER = Scanner()  # compiled once; the tests below make fresh ones where state matters

# Pieces of real log lines, so that random combinations reach the interesting paths.
FRAGMENTS = [
    b"(APIServer pid=1) ", b"(EngineCore_DP0 pid=2) ", b"(EngineCore pid=1) (RayWorker pid=2, ip=1.2.3.4) ",
    b"vllm-1  | ", b"[pod/p/c] ", b"2025-07-07T20:12:44Z ", b"ERROR 07-07 20:12:44 [core.py:1] ",
    b"WARNING 07-07 20:12:44 metrics.py:295] ", b"INFO:     ", b"\x1b[31m", b"^[[0m", b"\x1b]8;;http://x\x07",
    b"Traceback (most recent call last):", b'  File "t.py", line 494, in set_truncation_and_padding',
    b"    self._tokenizer.enable_truncation(**target)", b"RuntimeError: Already borrowed",
    b"Failed to acquire tokenizer in current thread. Retrying (1/5)...", b"EngineDeadError",
    b"No available shared memory broadcast block found", b"NCCL WARN x", b"NCCL INFO y",
    b'"POST /v1/chat/completions HTTP/1.1" 400 Bad Request', b"CUDA out of memory",
    b"  File \"c.py\", line 5, in get_and_update_features", b"KeyError: 'h'", b"\r", b"\n", b"\n", b"\n",
    b"\xff\xfe", b"\x00", b"    ", b"\xe2\x80", b"Received request r: prompt: 'Already borrowed'",
    b'    raise RuntimeError("Already borrowed")', b"    if 'EngineDeadError' in str(e):",
    # start-up phase, hangs at NCCL init, flat tracebacks, colour codes kept as text, engine deaths
    b"vLLM API server version 0.19.1", b"torch.compile takes 9 s", b"INFO:     Application startup complete.",
    b"vLLM is using nccl==2.28.3", b"host:1:1 NCCL CALL ncclGetUniqueId(0x1)", b"NCCL INFO ncclCommInitRank x",
    b'File "t.py", line 420, in _batch_encode_plus', b"self.set_truncation_and_padding(", b"ESC[0;36m",
    b" [36m", b"EngineCore hit an exception: Traceback (most recent call last):",
    b'  File "c.py", line 1, in run_engine_core', b"KeyError: 'a23ac4af3082cb762542f11e83'",
    b'  File "shm_broadcast.py", line 4, in acquire_read', b"RuntimeError: cancelled", b"TimeoutError",
]


def summary(sc: Scanner) -> list[tuple[str, int, int, int, str | None, str | None]]:
    return sorted(
        (f.id, f.count, f.first.line_no, f.last.line_no, f.first.timestamp, f.first.process)
        for f in sc.result().findings
    )


def both_paths(data: bytes) -> tuple[Scanner, Scanner]:
    bulk = Scanner(SCANNER.kb)
    bulk.scan_stream(io.BytesIO(data), "x")
    line = Scanner(SCANNER.kb)
    for raw in data.split(b"\n") if data else []:
        line.feed(raw, "x")
    if data.endswith(b"\n"):  # split leaves an empty last piece that is not a line
        line._sources["x"].line_no -= 1
        line._lines -= 1
    line.finish()
    return bulk, line


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=3000))
def test_any_bytes_never_crash(data: bytes) -> None:
    bulk, line = both_paths(data)
    expected = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    assert bulk.result().lines == line.result().lines == expected
    bulk.result().to_dict()


@pytest.mark.parametrize("data", [b"\x1b@", b"\x1b[0m", b"a\n\x1b@", b"\x1b@\n\x1b[31m"])
def test_a_last_line_of_colour_codes_only_is_still_a_line(data: bytes) -> None:
    # found by test_any_bytes_never_crash on the old stack: the bulk reader removed b"\x1b@" and counted 0 lines
    bulk, line = both_paths(data)
    expected = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    assert bulk.result().lines == line.result().lines == expected


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=12)), max_size=80))
def test_random_log_like_input_gives_the_same_findings_on_both_paths(parts: list[bytes]) -> None:
    bulk, line = both_paths(b"".join(parts))
    assert summary(bulk) == summary(line)


def test_huge_lines_are_handled_and_capped(tmp_path: Path) -> None:
    log = tmp_path / "huge.log"
    filler = b"A" * (3 * 1024 * 1024)
    log.write_bytes(
        b"ERROR 07-07 20:12:44 [serving_chat.py:1] prompt " + filler + b" RuntimeError: Already borrowed\n"
        + b"INFO 07-07 20:12:45 [x.py:1] middle " + filler + b"EngineDeadError" + filler + b"\n"
        + filler + b"\nCUDA out of memory\n"
    )
    result = scan_paths([str(log)])
    by_id = {f.id: f for f in result.findings}
    assert set(by_id) == {"tokenizer-already-borrowed", "cuda-oom"}  # the middle of a huge line is a prompt
    assert by_id["tokenizer-already-borrowed"].first.timestamp == "07-07 20:12:44"
    assert len(by_id["tokenizer-already-borrowed"].first.text) <= 300
    assert result.lines == 4
    sc = Scanner()
    for raw in log.read_bytes().split(b"\n")[:-1]:
        sc.feed(raw)
    assert {f.id for f in sc.result().findings} == set(by_id)


def test_line_splitter_keeps_memory_bounded() -> None:
    splitter = LineSplitter()
    out: list[bytes] = []
    for _ in range(200):  # a 13 MB line arriving in pieces
        out += splitter.push(b"x" * 65536)
        assert len(splitter._pending) <= MAX_LINE + 65536
    out += splitter.push(b" tail\nnext")
    out += splitter.flush()
    assert [len(x) <= MAX_LINE + 8 for x in out] == [True, True]
    assert out[0].endswith(b" tail") and out[1] == b"next"


ADVERSARIAL = textwrap.dedent(
    """
    import sys, time
    from borrowguard.scan import Scanner
    import io
    n = 70_000
    lines = [
        "Engine core proc " * (n // 17), "Already " * (n // 8), "HTTP/1." * (n // 7) + '"',
        'HTTP/1.1" ' * (n // 10), "(a=" * (n // 3), "(APIServer pid=1) " * (n // 18), "[" * n, "(" * n,
        "\\x1b[" * (n // 2), "^[[" * (n // 3), "\\x1b]" + "x" * n, '  File "' * (n // 8), "NCCL " * (n // 5),
        "2025-07-07T20:12:44" * (n // 19), "INFO 07-07 20:12:44 " * (n // 20), "vllm-1 " * (n // 7) + "|",
        "Failed to acquire tokenizer in current thread. Retrying (" * 1000, " " * n + "x", "a" * n + "!",
        "in set_truncation_and_padding" * 2000, "Traceback (most recent call last):" * 2000,
        "[pod/" + "a" * n, "ERROR:" + ":" * n, "0" * n, "\\t" * n,
    ]
    sc = Scanner()
    start = time.perf_counter()
    for line in lines:
        sc.feed(line)
        sc.feed("    " + line)
    sc.scan_stream(io.BytesIO(("\\n".join(lines) + "\\n").encode("utf-8", "surrogatepass")), "bulk")
    print(round(time.perf_counter() - start, 2))
    """
)


@pytest.mark.slow
def test_regex_hostile_lines_finish_quickly() -> None:
    # In a subprocess with a timeout: catastrophic backtracking would hang, not fail.
    # Catastrophic backtracking on these 2**k-long lines takes hours, not seconds: the subprocess's timeout is
    # the (generous) hang bound; how fast it really runs is bench/scan.py's business.
    try:
        proc = subprocess.run(
            [sys.executable, "-c", ADVERSARIAL], capture_output=True, text=True, timeout=300, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail("scanning the hostile lines hung (> 300 s)")
    assert proc.returncode == 0, proc.stderr
    float(proc.stdout.strip())  # it finished and printed its time


def test_gzip_input_by_magic_bytes(tmp_path: Path) -> None:
    data = (LOGS / "vllm_v1_borrow_chain.log").read_bytes()
    gz = tmp_path / "rotated.log.1"  # no .gz suffix: detected by its magic bytes
    gz.write_bytes(gzip.compress(data))
    plain = scan_paths([str(LOGS / "vllm_v1_borrow_chain.log")])
    packed = scan_paths([str(gz)])
    assert [(f.id, f.count) for f in packed.findings] == [(f.id, f.count) for f in plain.findings]
    assert packed.lines == plain.lines


def test_truncated_gzip_is_scanned_up_to_the_damage(tmp_path: Path) -> None:
    data = (LOGS / "vllm_v1_borrow_chain.log").read_bytes() + b"x" * 200_000
    gz = tmp_path / "cut.log.gz"
    gz.write_bytes(gzip.compress(data)[:-40])
    result = scan_paths([str(gz)])
    assert result.warnings and "damaged or truncated" in result.warnings[0]


def test_unbounded_traceback_and_many_processes_keep_state_bounded() -> None:
    sc = Scanner()
    sc.feed("Traceback (most recent call last):", "t")
    for i in range(MAX_WINDOW_LINES + 10):
        sc.feed(f'  File "f{i}.py", line 1, in g', "t")
    assert sc._sources["t"].windows[None].lines <= MAX_WINDOW_LINES + 1
    for pid in range(MAX_WINDOWS * 3):
        sc.feed(f"(Worker pid={pid}) Traceback (most recent call last):", "t")
        sc.feed(f'(Worker pid={pid})   File "a.py", line 1, in get_and_update_features', "t")
    assert len(sc._sources["t"].windows) <= MAX_WINDOWS
    for pid in range(100):
        for status in range(400, 460):
            sc.feed(f'(P pid={pid}) INFO:     1.2.3.4:5 - "GET / HTTP/1.1" {status} X', "t")
    sc.finish()
    by_id = {f.id: f for f in sc.result().findings}
    assert by_id["mm-cache-desync"].count == MAX_WINDOWS * 3  # evicted tracebacks still count
    http = by_id["http-error-status"]
    assert http.count == 6000
    assert len(http.processes) == MAX_PROCESSES
    assert len(http.details) <= MAX_DETAILS + 1 and http.details["other"] > 0


def test_expand_globs_stdin_and_mistakes(tmp_path: Path) -> None:
    for name in ("b.log", "a.log", "c.txt"):
        (tmp_path / name).write_text("x\n")
    assert [i.name for i in expand([str(tmp_path / "*.log"), "-", "-"])] == [
        str(tmp_path / "a.log"), str(tmp_path / "b.log"), "<stdin>",
    ]
    with pytest.raises(UserInputError, match="no file matches"):
        expand([str(tmp_path / "*.gz")])
    with pytest.raises(UserInputError, match="no such file"):
        expand([str(tmp_path / "missing.log")])
    with pytest.raises(UserInputError, match="is a directory"):
        expand([str(tmp_path)])


@pytest.mark.slow
def test_accelerated_and_stdlib_search_give_the_same_findings(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        import ahocorasick_rs  # noqa: F401

        available = True
    except ImportError:
        available = False
    quick = Scanner()
    assert quick._anchor_search.accelerated is available
    monkeypatch.setattr(fast, "_aho", None)
    plain = Scanner()
    assert not plain._anchor_search.accelerated and plain.probes
    data = b"".join((p.read_bytes() + b"\n") * 3 for p in sorted(LOGS.rglob("*")) if p.is_file())
    data += b"in set_truncation_and_paddingEngineDeadError\nAlready borrowed Already mutably borrowed\n"
    for sc in (quick, plain):
        sc.scan_stream(io.BytesIO(data), "x")
    assert quick.result().to_dict() == plain.result().to_dict()
    assert len(quick.result().findings) == 9  # every scan id, and another library's borrow error


def test_runs_of_traceback_openers_read_as_the_line_path_reads_them() -> None:
    # the bulk reader applies a run of identical bare openers at once: the same lines, findings, timestamps
    opener = "Traceback (most recent call last):\n"
    prefixed = "(APIServer pid=7) ERROR 07-07 20:12:45 [serving_chat.py:240] Traceback (most recent call last):\n"
    body = (
        opener * 3000 + prefixed * 2000
        + "(APIServer pid=7) ERROR 07-07 20:12:46 [serving_chat.py:240] Traceback (most recent call last):\n"
        + '(APIServer pid=7) ERROR 07-07 20:12:46 [serving_chat.py:240]   File "/v/transformers/tokenization_utils_fast.py", '
        "line 494, in set_truncation_and_padding\n"
        + "(APIServer pid=7) ERROR 07-07 20:12:46 [serving_chat.py:240] RuntimeError: Already borrowed\n"
        + opener * 1000 + "RuntimeError: Already borrowed\n"
    ).encode()
    bulk = Scanner()
    bulk.scan_stream(io.BytesIO(body), "x")
    line = Scanner()
    for raw in body.splitlines():
        line.feed(raw, "x")
    line.finish()
    a, b = bulk.result(), line.result()
    assert a.lines == b.lines == body.count(b"\n")
    assert [f.to_dict() for f in a.findings] == [f.to_dict() for f in b.findings]
    assert [(f.id, f.count, f.first.line_no, f.first.timestamp) for f in a.findings] == [
        ("tokenizer-already-borrowed", 2, 5003, "07-07 20:12:46")
    ]
