"""Attribution by context, not by string, and traceback shapes beyond vLLM's (written for this project:
tests/fixtures/logs/shapes/, each a shape or near miss seen in public threads, made small).

"Already borrowed" is the tokenizer race when the context says tokenizer; another PyO3 library's is its own
info finding; a bare line is the race at low confidence. Every case on both read paths.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from borrowguard.knowledge import Kind, load
from borrowguard.scan import Scanner, ScanResult

SHAPES = Path(__file__).parents[1] / "fixtures" / "logs" / "shapes"
KB = load()
TOKENIZER = "tokenizer-already-borrowed"
ELSEWHERE = KB.of_kind(Kind.NOT_THE_TOKENIZER)[0].id

# fixture -> {id: (confidence, detail or None, a word the evidence must contain)}
EXPECTED: dict[str, dict[str, tuple[str, str | None, str]]] = {
    "bare_line.log": {TOKENIZER: ("low", None, "no context")},
    # "failed: HTTP 500 {...}" is the answer's status too (read since the rules written before real-world-7)
    "http_answer_body.log": {TOKENIZER: ("high", None, "HTTP answer"), "http-error-status": ("high", "500", "")},
    "rich_boxed.log": {TOKENIZER: ("high", None, "traceback")},
    "sentry_json_frames.log": {TOKENIZER: ("high", None, "below")},
    "json_record_escaped_traceback.log": {TOKENIZER: ("high", None, "traceback")},
    "glued_one_line.log": {TOKENIZER: ("high", None, "traceback")},
    "glued_one_line_cut.log": {TOKENIZER: ("medium", None, "cut before")},
    "thread_pool_cut_in_tokenization.log": {TOKENIZER: ("medium", None, "thread pool")},
    "cut_in_tokenization_no_threads.log": {TOKENIZER: ("low", None, "no thread frames")},
    "client_status_lines.log": {"http-error-status": ("high", "413", "")},
    "innermost_frame_other_extension.log": {ELSEWHERE: ("medium", "torchft", "innermost frame")},
    "watchfiles_reload.log": {ELSEWHERE: ("high", "watchfiles", "not the tokenizer race")},
    "polars_two_threads.log": {ELSEWHERE: ("high", "polars", "not the tokenizer race")},
    "pyo3_test_source.log": {},
    "nccl_watchdog_new_wording.log": {"nccl-failure": ("high", None, "")},
}


def bulk(path: Path) -> ScanResult:
    sc = Scanner()
    sc.scan_stream(io.BytesIO(path.read_bytes()), path.name)
    return sc.result()


def line_by_line(path: Path) -> ScanResult:
    sc = Scanner()
    for line in path.read_text(encoding="utf-8").splitlines():
        sc.feed(line, path.name)
    sc.finish()
    return sc.result()


def test_every_shape_fixture_is_listed() -> None:
    assert sorted(p.name for p in SHAPES.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_shape_on_both_read_paths(name: str) -> None:
    for result in (bulk(SHAPES / name), line_by_line(SHAPES / name)):
        got = {f.id: f for f in result.findings}
        assert set(got) == set(EXPECTED[name]), name
        for problem, (confidence, detail, word) in EXPECTED[name].items():
            f = got[problem]
            assert f.confidence == confidence, (name, f.evidence)
            assert (next(iter(f.details), None) if detail else None) == detail
            assert word in (f.evidence or ""), (name, f.evidence)


def test_another_library_never_raises_the_tokenizer_id_and_says_which() -> None:
    finding = bulk(SHAPES / "watchfiles_reload.log").findings[0]
    assert finding.severity == "info" and finding.to_dict()["evidence"].startswith(
        "a PyO3 borrow error in watchfiles — not the tokenizer race"
    )


def test_a_bare_line_is_decided_once_the_lines_below_cannot_change_it() -> None:
    sc = Scanner()
    assert sc.feed("RuntimeError: Already borrowed", "s") == []  # waits: evidence may follow
    assert [f.confidence for f in sc.result().findings] == ["low"]  # as if the input ended now
    hits = []
    for _ in range(sc.signatures[0].context.reach):  # type: ignore[union-attr]
        hits += sc.feed("INFO nothing to see", "s")
    hits += sc.feed("INFO one more", "s")
    assert [(h.id, h.confidence) for h in hits] == [(TOKENIZER, "low")]


def test_evidence_below_decides_a_waiting_line() -> None:
    sc = Scanner()
    assert sc.feed("RuntimeError: Already borrowed", "s") == []
    hits = sc.feed('  File "/venv/watchfiles/main.py", line 120, in watch', "s")
    assert [(h.id, h.detail) for h in hits] == [(ELSEWHERE, "watchfiles")]


def test_the_tokenizer_frames_win_over_another_library_further_out() -> None:
    # a tokenizer called inside another library's callback: the innermost frame decides
    lines = [
        "Traceback (most recent call last):",
        '  File "/venv/polars/dataframe/frame.py", line 10, in map_rows',
        "    return self._df.map_rows(function)",
        '  File "/srv/app.py", line 3, in f',
        "    return tok(row[0], truncation=True)",
        "RuntimeError: Already borrowed",
    ]
    sc = Scanner()
    for line in lines:
        sc.feed(line, "s")
    sc.finish()
    assert [(f.id, f.confidence) for f in sc.result().findings] == [(TOKENIZER, "high")]


FAST = '  File "/venv/lib/python3.11/site-packages/transformers/tokenization_utils_fast.py", line {n}, in {fn}'
POOL = '  File "/usr/lib/python3.11/concurrent/futures/thread.py", line 58, in run'


def _cut(*lines: str) -> list[tuple[str, str]]:
    """Findings of a paste cut after `lines` (then a blank line), on both read paths (they must agree)."""
    body = "\n".join(lines) + "\n\nIt happens on CPU too.\n"
    sc = Scanner()
    sc.scan_stream(io.BytesIO(body.encode()), "paste")
    got = [(f.id, f.confidence.value) for f in sc.result().findings]
    sc = Scanner()
    for line in body.splitlines():
        sc.feed(line, "paste")
    sc.finish()
    assert [(f.id, f.confidence.value) for f in sc.result().findings] == got
    return got


@pytest.mark.parametrize("under_pool", [False, True])
def test_a_paste_cut_at_the_batch_encode_is_not_the_race(under_pool: bool) -> None:
    # encode_batch takes a shared borrow: the race raises in the thread that changes the settings (measured
    # on tokenizers 0.22.2: every "Already borrowed" in the setters), so a paste that stops at the batch
    # encode call hides some other error (a TypeError on the input, as in forest-snow/alps#2)
    head = (POOL,) if under_pool else ()
    assert _cut(*head, FAST.format(n=385, fn="_batch_encode_plus"), "    encodings = self._tokenizer.encode_batch(") == []
    # the same with 3.11's carets and a call spread over lines (3.13 prints them all): its first line decides
    assert _cut(
        *head, FAST.format(n=385, fn="_batch_encode_plus"), "    encodings = self._tokenizer.encode_batch(",
        "                ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^", "        batch_text_or_text_pairs,",
    ) == []


@pytest.mark.parametrize("under_pool", [False, True])
def test_a_paste_cut_where_the_race_raises_still_counts(under_pool: bool) -> None:
    head = (POOL,) if under_pool else ()
    for tail in (
        (FAST.format(n=541, fn="_batch_encode_plus"), "    self.set_truncation_and_padding("),
        (FAST.format(n=541, fn="_batch_encode_plus"),),  # the frame line alone: where the paste stopped is unknown
        (FAST.format(n=541, fn="_batch_encode_plus"), "    self.set_truncation_and_padding(",
         FAST.format(n=494, fn="set_truncation_and_padding"), "    self._tokenizer.enable_truncation(**target)"),
    ):
        assert _cut(*head, *tail) == [(TOKENIZER, "medium")], tail


CALL = '  File "/venv/lib/python3.11/site-packages/transformers/tokenization_utils_base.py", line {n}, in {fn}'
APP = '  File "/srv/app.py", line 12, in embed'


@pytest.mark.parametrize("tail", [
    (CALL.format(n=2858, fn="__call__"), "    encodings = self._call_one(text=text, text_pair=text_pair, **all_kwargs)"),
    (CALL.format(n=2944, fn="_call_one"), "    return self.batch_encode_plus("),
    (FAST.format(n=302, fn="tokenize"), "    return self.encode_plus(text=text, text_pair=pair).tokens()"),
    (CALL.format(n=2858, fn="__call__"),),  # the frame line alone
])
def test_a_paste_cut_inside_the_tokenizer_call_without_threads_is_the_race_at_low_confidence(
    tail: tuple[str, ...],
) -> None:
    assert _cut(APP, "    return tok(texts, truncation=True)", *tail) == [(TOKENIZER, "low")]


@pytest.mark.parametrize("tail", [
    # the call's own argument checks raise there: a ValueError/TypeError of the arguments, not the race
    (CALL.format(n=2950, fn="_call_one"), "    raise ValueError("),
    # encode_batch takes a shared borrow (see above): an input TypeError hides there
    (FAST.format(n=385, fn="_batch_encode_plus"), "    encodings = self._tokenizer.encode_batch("),
    # loading, not calling, a tokenizer: an OSError or a ValueError of the files
    (CALL.format(n=2013, fn="from_pretrained"), "    return cls._from_pretrained("),
    # the exception line is there and it is another error
    (CALL.format(n=2944, fn="_call_one"), "    return self.batch_encode_plus(",
     "TypeError: TextEncodeInput must be Union[TextInputSequence, Tuple[InputSequence, InputSequence]]"),
])
def test_a_paste_cut_inside_the_tokenizer_where_the_race_is_not_raised_is_not_it(tail: tuple[str, ...]) -> None:
    assert _cut(APP, "    return tok(texts, truncation=True)", *tail) == []


def _lines(*lines: str) -> list[tuple[str, str, str | None]]:
    """(id, confidence, first detail) of `lines` read as one log, on both read paths (they must agree)."""
    body = "\n".join(lines) + "\n"
    sc = Scanner()
    sc.scan_stream(io.BytesIO(body.encode()), "log")
    got = [(f.id, f.confidence.value, next(iter(f.details), None)) for f in sc.result().findings]
    sc = Scanner()
    for line in lines:
        sc.feed(line, "log")
    sc.finish()
    assert [(f.id, f.confidence.value, next(iter(f.details), None)) for f in sc.result().findings] == got
    return got


def test_a_whole_traceback_whose_innermost_call_is_no_tokenizers_is_another_extension() -> None:
    # PyO3 raises in the frame that calls the Rust method: that frame calls the other library
    head = ("Traceback (most recent call last):", '  File "/srv/app.py", line 9, in handler', "    job.run()")
    for frame, code, library in (
        ('  File "/venv/lib/python3.11/site-packages/torchft/manager.py", line 556, in should_commit',
         "    should_commit = self._client.should_commit(", "torchft"),
        ('  File "/home/me/torchft/torchft/manager.py", line 556, in should_commit',
         "    should_commit = self._client.should_commit(", "torchft/manager"),
    ):
        assert _lines(*head, frame, code, "RuntimeError: Already borrowed") == [(ELSEWHERE, "medium", library)]
    # ... but not a re-raise (where it came from is not shown), nor a frame calling the tokenizer
    assert _lines(*head, '  File "/venv/lib/python3.11/asyncio/futures.py", line 203, in result',
                  "    raise self._exception.with_traceback(self._exception_tb)",
                  "RuntimeError: Already borrowed") == [(TOKENIZER, "low", None)]
    assert _lines(*head, '  File "/srv/embed.py", line 12, in embed', "    return model.encode(texts)",
                  "RuntimeError: Already borrowed") == [(TOKENIZER, "high", None)]
    # a generic call (`.encode(`, no tokenizer in its words) made inside another package's code is that
    # package's Rust object; in the application's own code, or in a frame naming the tokenizer, it is the tokenizer's
    tiktoken = ('  File "/venv/lib/python3.11/site-packages/tiktoken/core.py", line 120, in encode',
                "    return self._core_bpe.encode(text, allowed_special)", "RuntimeError: Already borrowed")
    assert _lines(*head, *tiktoken) == [(ELSEWHERE, "medium", "tiktoken")]
    assert _lines(*head, '  File "/venv/lib/python3.11/site-packages/sentence_transformers/SentenceTransformer.py", '
                  "line 160, in encode", "    out = self.encode(sentences)",
                  "RuntimeError: Already borrowed") == [(TOKENIZER, "high", None)]
    assert _lines(*head, '  File "/venv/lib/python3.11/site-packages/flair/embeddings.py", line 900, in _add',
                  "    enc = self.tokenizer.encode_plus(text)", "RuntimeError: Already borrowed") == [(TOKENIZER, "high", None)]
    # a call that is handed the tokenizer (tokenizers' DecodeStream.step) is not another library's either
    assert _lines(*head, '  File "/venv/lib/python3.11/site-packages/myserver/stream.py", line 230, in step',
                  "    token = self.stream.step(self.tokenizer, token_id)",
                  "RuntimeError: Already borrowed") == [(TOKENIZER, "low", None)]


def test_a_source_line_outside_a_traceback_is_no_evidence_on_either_path() -> None:
    # only a traceback is read whole by the fast path: a diff's `self.tokenizer(` elsewhere is not context
    lines = ('the fast tokenizer (Rust) hits "Already borrowed" exceptions', "-        return self.tokenizer(")
    assert _lines(*lines) == [(TOKENIZER, "low", None)]


@pytest.mark.parametrize("line, expected", [
    ("{'error': {'message': 'EngineCore encountered an issue. See stack trace (above) for the root cause.',",
     ("engine-dead", "high", None)),
    ("Exception in ControllerSingle:", ("engine-dead", "high", None)),
    ("Fatal Python error: Aborted", ("engine-dead", "medium", None)),
    ("Error: status_code: 500, body: {'message': 'internal server error'}", ("http-error-status", "high", "500")),
    ('  "code": 429,', ("http-error-status", "high", "429")),
    ('HTTP Request: POST http://127.0.0.1:8000/v1/embeddings "HTTP/1.1 500 Internal Server Error"',
     ("http-error-status", "high", "500")),
    ("HTTP/1.1 400 Bad Request", ("http-error-status", "high", "400")),
    ("aiohttp.client_exceptions.ClientResponseError: 503, message='Service Unavailable', url=URL('http://x/embed')",
     ("http-error-status", "high", "503")),
    ('{"method": "POST", "path": "/v1/embeddings", "status": 500, "duration_ms": 12}', ("http-error-status", "high", "500")),
    ("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
     ("engine-dead", "high", None)),
    ("2024-05-01T10:00:00.000000Z ERROR text_generation_launcher: Shard 0 crashed", ("engine-dead", "high", None)),
    ("2024-05-01T10:00:00.000000Z ERROR text_generation_launcher: Shard 1 failed to start", ("engine-dead", "high", None)),
    ("Error: ShardCannotStart", ("engine-dead", "high", None)),
    ("Test NCCL failure all_gather.cu:95 'unhandled system error'", ("nccl-failure", "high", None)),
    ("[rank3]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
     ("nccl-failure", "high", None)),
    ("httpx.HTTPStatusError: Server error '503Service Unavailable' for url 'http://tei:80/embed'",
     ("http-error-status", "high", "503")),
    ("[GIN] 2024/07/12 - 14:13:33 | 400 |      65.664µs |       127.0.0.1 | POST     \"/api/embeddings\"",
     ("http-error-status", "high", "400")),
])
def test_a_death_or_an_error_status_as_others_pass_it_on(line: str, expected: tuple[str, str, str | None]) -> None:
    assert _lines(line) == [expected]


@pytest.mark.parametrize("line", [
    '  "code": 50001',  # an application's own error code, not an HTTP status
    "INFO threadThresholds 8/8/64 | 64/8/64 | 512 | 512",  # NCCL's table, not an access line
    "status_code=200, elapsed=0.2s",
    'HTTP Request: POST http://127.0.0.1:8000/v1/embeddings "HTTP/1.1 200 OK"',
    '{"method": "GET", "path": "/health", "status": 200}',
    "Loading checkpoint shards: 100%|##########| 4/4",
    "2024-05-01T10:00:00.000000Z  INFO shard-manager: text_generation_launcher: Shard ready in 12.3s rank=0",
    "nccl-tests: all_reduce_perf passed, no NCCL failures",
    "Fatal Python error: init_fs_encoding: failed to get the Python codec of the filesystem encoding",
])
def test_near_misses_of_those(line: str) -> None:
    assert _lines(line) == []


def test_a_waiting_line_of_a_quiet_followed_log_is_decided_without_more_lines() -> None:
    sc = Scanner()
    assert sc.feed("RuntimeError: Already borrowed", "s") == []  # waits: evidence may follow
    assert sc.settle_idle(quiet_s=3600) == []  # read just now: still waiting
    hits = sc.settle_idle(quiet_s=0)  # the log went quiet: decided by what came so far
    assert [(h.id, h.confidence) for h in hits] == [(TOKENIZER, "low")]
    more = [h for _ in range(sc.signatures[0].context.reach + 5) for h in sc.feed("INFO nothing", "s")]  # type: ignore[union-attr]
    assert more == [] and sc.settle_idle(quiet_s=0) == []  # decided once, never again
    assert [f.count for f in sc.result().findings] == [1]


def test_follow_reports_a_lone_bare_line_while_the_log_stays_quiet(tmp_path: Path) -> None:
    import threading

    from borrowguard.scan.inputs.readers import Input
    from borrowguard.scan.live import follow

    log = tmp_path / "server.log"
    log.write_text("INFO serving\nRuntimeError: Already borrowed\n")  # then nothing more, ever
    stop = threading.Event()
    seen: list[str] = []

    def on_hit(hit: object) -> None:
        seen.append(hit.id)  # type: ignore[attr-defined]
        stop.set()

    gave_up: list[bool] = []
    bound = threading.Timer(120, lambda: (gave_up.append(True), stop.set()))  # a hang bound, not a timing assertion
    bound.start()
    try:
        follow(Scanner(), [Input(str(log), log)], stop, on_hit=on_hit, poll_interval=0.05)
    finally:
        bound.cancel()
    # while following, not at the end: before, it came only after 200 more lines (never, here) or at the stop
    assert seen == [TOKENIZER] and not gave_up


def test_a_json_log_record_with_a_message_field_is_no_http_answer() -> None:
    # an answer carrying the error is evidence; a log record's own "message" key is not an answer
    record = ('{"text": "RuntimeError: Already borrowed", "record": {"level": {"name": "ERROR"}, '
              '"message": "embedding failed", "function": "embed"}}')
    assert _lines(record) == [(TOKENIZER, "low", None)]
    assert _lines('{"detail": "Already borrowed"}') == [(TOKENIZER, "high", None)]


def test_a_v0_engine_loop_that_ended_with_an_exception_is_the_engines_death() -> None:
    head = ("Exception in callback functools.partial(<function _raise_exception_on_finish at 0x7f>, error_callback=x)",
            "Traceback (most recent call last):",
            '  File "/venv/vllm/engine/async_llm_engine.py", line 39, in _raise_exception_on_finish',
            "    task.result()",
            '  File "/venv/vllm/engine/async_llm_engine.py", line 509, in run_engine_loop',
            "    has_requests_in_progress = await asyncio.wait_for(")
    assert _lines(*head, "RuntimeError: CUDA error: an illegal memory access was encountered") == [("engine-dead", "high", None)]
    assert _lines(*head) == [("engine-dead", "medium", None)]  # cut before its exception
    assert _lines(*head, "asyncio.exceptions.CancelledError") == []  # the loop cancelled at shutdown


@pytest.mark.parametrize("lines, library", [
    (("from lindera import Segmenter", "seg = Segmenter()", "RuntimeError: Already borrowed"), "lindera"),
    (("it works with sudachipy 0.6.8 but 0.6.9 raises `RuntimeError: Already borrowed`",), "sudachipy"),
    (("let cell: Bound<'_, Counter> = ...;", "extracting it raised `Already mutably borrowed`"), "pyo3"),
])
def test_other_rust_backed_tokenizers_and_a_pyo3_users_classes_are_not_the_hf_tokenizer(
    lines: tuple[str, ...], library: str
) -> None:
    got = _lines(*lines)
    assert [(i, d) for i, _, d in got] == [(ELSEWHERE, library)]
