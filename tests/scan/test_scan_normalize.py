"""Line normalisation: every wrapper real logs come in."""

from __future__ import annotations

import pytest

from borrowguard.scan.normalize import ELLIPSIS, HEAD, MAX_LINE, Line, decode, normalize

CASES: list[tuple[str | bytes, Line]] = [
    # vLLM V1, with and without process prefixes, path-style file names
    ("INFO 07-07 20:12:44 [serving.py:311] hello", Line("hello", "07-07 20:12:44", "INFO", None)),
    (
        "(APIServer pid=12) WARNING 07-07 20:12:44 [v1/engine/async_llm.py:480] x",
        Line("x", "07-07 20:12:44", "WARNING", "APIServer pid=12"),
    ),
    # vLLM V0
    ("ERROR 07-07 20:12:44 metrics.py:295] v0", Line("v0", "07-07 20:12:44", "ERROR", None)),
    # nested Ray prefixes; the traceback indentation is kept
    (
        "(EngineCore pid=1) (RayWorkerProc pid=2, ip=10.0.0.5) ERROR 07-07 20:12:44 [c.py:9]   File \"a\"",
        Line('  File "a"', "07-07 20:12:44", "ERROR", "EngineCore pid=1 > RayWorkerProc pid=2, ip=10.0.0.5"),
    ),
    (
        "(VllmWorker rank=0 pid=5) INFO 01-02 03:04:05 [w.py:1] up",
        Line("up", "01-02 03:04:05", "INFO", "VllmWorker rank=0 pid=5"),
    ),
    # docker compose, coloured, with docker's own timestamp
    (
        "\x1b[36mvllm-1  |\x1b[0m 2025-07-07T20:12:44.123456789Z RuntimeError: Already borrowed",
        Line("RuntimeError: Already borrowed", "2025-07-07T20:12:44.123456789Z", None, "vllm-1"),
    ),
    # kubectl logs --prefix --timestamps
    (
        "[pod/vllm-0/vllm] 2025-07-07T20:12:44Z (APIServer pid=1) INFO 07-07 20:12:44 [a.py:1] m",
        Line("m", "07-07 20:12:44", "INFO", "vllm-0/vllm > APIServer pid=1"),
    ),
    # caret notation from `cat -v`
    ("^[[31mERROR^[[0m 07-07 20:12:44 [a.py:1] boom", Line("boom", "07-07 20:12:44", "ERROR", None)),
    # uvicorn, python logging (asctime and default), ISO
    (
        'INFO:     1.2.3.4:5 - "GET / HTTP/1.1" 200',
        Line('1.2.3.4:5 - "GET / HTTP/1.1" 200', None, "INFO", None),
    ),
    ("2025-07-07 20:12:44,123 - vllm - ERROR - boom", Line("boom", "2025-07-07 20:12:44,123", "ERROR", None)),
    ("ERROR:root:thing", Line("thing", None, "ERROR", None)),
    ("2025-07-07T20:12:46+02:00 WARN w: slow", Line("w: slow", "2025-07-07T20:12:46+02:00", "WARNING", None)),
    # progress bars redrawn with CR, CRLF endings
    ("load 10%\rload 100%\rINFO 07-07 20:12:44 [x.py:1] ok\r\n", Line("ok", "07-07 20:12:44", "INFO", None)),
    # Buildkite's "  | " column, V0 header
    (
        "  | ERROR 07-01 13:54:43 multiproc_worker_utils.py:120] Worker died",
        Line("Worker died", "07-01 13:54:43", "ERROR", None),
    ),
    # torchrun and launcher labels
    ("[vllm]: [rank0]:   File \"p.py\", line 1, in f", Line('  File "p.py", line 1, in f', None, None, "vllm > rank0")),
    # colour codes kept as text, or whose ESC a paste lost
    (
        "ESC[0;36m(EngineCore_DP0 pid=5)ESC[0;0m Exception in thread Thread-5 (process_input_sockets):",
        Line("Exception in thread Thread-5 (process_input_sockets):", None, None, "EngineCore_DP0 pid=5"),
    ),
    (" [36m(RayWorkerVllm pid=5085) [0m [E x.cpp:1] boom", Line(" [E x.cpp:1] boom", None, None, "RayWorkerVllm pid=5085")),
    # GitHub's markdown turned "]" into "[]" in a pasted header
    ("ERROR 10-20 03:20:50 [core.py:720[] fatal", Line("fatal", "10-20 03:20:50", "ERROR", None)),
    # plain text and parentheses that are not process prefixes
    ("(see above) RuntimeError", Line("(see above) RuntimeError", None, None, None)),
    ("two words | row", Line("two words | row", None, None, None)),
    (b"\xff\xfe junk \x00", Line("\ufffd\ufffd junk \x00", None, None, None)),
]


@pytest.mark.parametrize(("raw", "expected"), CASES)
def test_normalize(raw: str | bytes, expected: Line) -> None:
    assert normalize(raw) == expected


def test_compose_prefix_requires_the_pipe_after_padding() -> None:
    assert normalize("vllm-1 | message").process == "vllm-1"
    assert normalize("vllm-1|message").process is None


def test_long_lines_keep_their_ends() -> None:
    line = "ERROR 07-07 20:12:44 [a.py:1] " + "x" * (3 * MAX_LINE) + " RuntimeError: Already borrowed"
    text = decode(line)
    assert len(text) == 2 * HEAD + len(ELLIPSIS)
    assert text.endswith("RuntimeError: Already borrowed")
    assert normalize(line.encode()).timestamp == "07-07 20:12:44"
    assert decode(line.encode()) == text


def test_bytes_and_str_agree() -> None:
    for raw, _ in CASES:
        if isinstance(raw, str):
            assert normalize(raw.encode()) == normalize(raw)
