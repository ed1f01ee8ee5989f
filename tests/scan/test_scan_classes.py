"""The classes real-world-3 to -5 kept missing, as rules for the class (written from the servers' and clients'
own wordings before real-world-6 was collected): engine deaths in other servers' words, an error status with
its reason phrase or beside words that make it one, NCCL's other bindings and torch's older watchdog, another
binding's capitalised "Already Borrowed". Each line is of the class, none is an excerpt; the near-misses are
healthy lines of the same servers and must produce nothing."""

from __future__ import annotations

import pytest

from borrowguard.scan import Scanner

CLASS_LINES = {
    "engine-dead": [
        "ERROR 05-01 12:00:00 async_llm_engine.py:57] Background loop has errored already.",
        "vllm.engine.multiprocessing.MQEngineDeadError: Engine loop is not running. RuntimeError('MQLLMEngine is already dead')",
        "(VllmWorker rank=1 pid=123) ERROR WorkerProc hit an exception.",
        "ERROR 01-02 03:04:05 [multiproc_executor.py:140] Worker proc VllmWorker-0 died unexpectedly, shutting down executor.",
        "[2025-01-01 10:00:00] Rank 0 scheduler is dead. Please check if there are relevant logs.",
        "/ggml/src/ggml-cuda/ggml-cuda.cu:70: GGML_ASSERT(ne % 2 == 0) failed",
        "Error: llama runner process has terminated: exit status 2",
        "level=ERROR source=server.go:100 msg=\"llama runner process no longer running\" sys=139",
        "Error: Could not start backend: Could not create backend",
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
    ],
    "http-error-status": [
        "413 Payload Too Large",
        "Error: 500 Internal Server Error: unable to load model",
        "urllib.error.HTTPError: HTTP Error 503: Service Unavailable",
        "<html><head><title>502 Bad Gateway</title></head>",
        "ollama._types.ResponseError: model runner has unexpectedly stopped (status code: 500)",
        "httpx.HTTPStatusError: 422 Unprocessable Entity",
        "Request failed with status code 429",
        "WARN retrying after status=503",
        "Error: 404 model not found",
        "504 Gateway Time-out",
    ],
    "nccl-failure": [
        "cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_UNHANDLED_CUDA_ERROR: unhandled cuda error",
        "[E ProcessGroupNCCL.cpp:475] [Rank 1] NCCL watchdog thread terminated with exception: boom",
        "[E ProcessGroupNCCL.cpp:828] [Rank 0] To avoid data inconsistency, we are taking the entire process down.",
        "[Rank 2] Exception (either an error or timeout) detected by watchdog at work: 1234, last enqueued NCCL work: 1235",
    ],
    "pyo3-borrow-elsewhere": [
        'File "/usr/lib/python3/site-packages/datafusion/dataframe.py", line 10, in collect\nException: Already Borrowed Error',
    ],
}

HEALTHY = [
    'INFO:     127.0.0.1:5000 - "POST /embed HTTP/1.1" 200 OK',
    "2024-01-01T00:00:00Z  INFO text_generation_launcher: Shard 0 ready in 10.2s",
    "node1:123:456 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
    "ProcessGroupNCCL initialized with following options: NCCL_ASYNC_ERROR_HANDLING: 1 TIMEOUT(ms): 600000",
    "The status of the job is 200 steps done",
    "llama_model_loader: loaded meta data with 19 key-value pairs",
    "INFO Background loop started.",
    "return response with status 200",
    "thread 'main' panicked at 'already borrowed: BorrowMutError', src/main.rs:1:1",
    "[GIN] 2024/07/12 - 14:13:33 | 200 |   65.664µs |       127.0.0.1 | POST     \"/api/embed\"",
    "GGML_ASSERT is defined in ggml.h",
    "We retry on 429 and 503 responses",
]


def scan(text: str) -> dict[str, str]:
    sc = Scanner()
    for line in text.splitlines():
        sc.feed(line, "x")
    sc.finish()
    return {f.id: f.confidence.value for f in sc.result().findings}


@pytest.mark.parametrize(("problem", "line"), [(p, line) for p, lines in CLASS_LINES.items() for line in lines])
def test_a_line_of_the_class_is_found(problem: str, line: str) -> None:
    assert problem in scan(line), line


@pytest.mark.parametrize("line", HEALTHY)
def test_a_healthy_line_of_the_same_servers_gives_nothing(line: str) -> None:
    assert scan(line) == {}, line


LEARNED_FROM_REAL_WORLD_6 = {
    "engine-dead": [
        "Error: 500 Internal Server Error: llama-server process has terminated: exit status 1",
        'level=ERROR source=server.go:1 msg="llama runner terminated" error="exit status 2"',
        "Message: 'Received sigquit from a child proces. It usually means the child failed.'",
        "[2026-01-01 00:00:00] TokenizerManager hit an exception: Traceback (most recent call last):",
        "the server dies with GGML_ASSERT failed after a few requests",
    ],
    "http-error-status": [
        "Error 429: rate limit exceeded, retry in 10 s",
        "vectorize keywords: remote client vectorize: fail with status 503: upstream busy",
    ],
}


@pytest.mark.parametrize(
    ("problem", "line"), [(p, line) for p, lines in LEARNED_FROM_REAL_WORLD_6.items() for line in lines]
)
def test_what_real_world_6_taught_is_found_in_other_words(problem: str, line: str) -> None:
    assert problem in scan(line), line


def test_source_quoting_the_schedulers_log_call_is_not_a_death() -> None:
    assert scan('        logger.error(f"Scheduler hit an exception: {traceback}")') == {}


def test_spacys_japanese_tokenizer_is_not_the_hf_tokenizer() -> None:
    found = scan("Japanese tokenizer raises `RuntimeError: Already borrowed` under threads\nRuntimeError: Already borrowed")
    assert "tokenizer-already-borrowed" not in found and "pyo3-borrow-elsewhere" in found, found


# Written before real-world-7 was collected, from the servers' and clients' sources and the shapes people retype:
# none of these lines is an excerpt of any set.
BEFORE_REAL_WORLD_7 = {
    "tokenizer-already-borrowed": [
        "RuntimeError: already borrowed",
        "got runtime error: already borrowed when two threads call the reranker",
        'File "/srv/app/.venv/lib/python3.11/site-packages/fastembed/text/onnx_embedding.py", line 5, in embed\n'
        "RuntimeError: Already borrowed",
        'File "/app/rerank.py", line 40, in score\n    scores = model.predict(pairs)  # CrossEncoder\n'
        "RuntimeError: Already borrowed",
        'File "/opt/sglang/python/sglang/srt/managers/tokenizer_manager.py", line 300, in _tokenize_one_request\n'
        "RuntimeError: Already borrowed",
    ],
    "engine-dead": [
        "RuntimeError: Worker failed with error 'CUDA error: an illegal memory access was encountered', please check the stack trace above for the root cause",
        "2025-01-01T00:00:00.000000Z ERROR text_generation_launcher: Webserver Crashed",
        "Error: WebserverFailed",
        '{"error":"model runner has unexpectedly stopped, this may be due to resource limitations or an internal error"}',
        "Error: llama runner exited, you may not have enough memory to run the model",
        "[2025-01-01 00:00:00] Child process unexpectedly failed with exitcode=9. pid=1234",
        "[2025-01-01 00:00:00] Initialization failed. warmup error: Traceback (most recent call last):",
        "ray.exceptions.ActorDiedError: The actor died because of an error raised in its creation task",
    ],
    "nccl-failure": [
        "[rank3]:[E1201 10:00:00.123456789 ProcessGroupNCCL.cpp:1000] [PG ID 0 PG GUID 0 Rank 3] Timeout at NCCL work: 10, last enqueued NCCL work: 10, last completed NCCL work: 9.",
        "torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout",
        "[rank0]:[E1201 10:00:00.123456789 ProcessGroupNCCL.cpp:1200] [PG ID 0 PG GUID 0 Rank 0] Heartbeat monitor timed out!",
        "[E ProcessGroupNCCL.cpp:900] [Rank 1] something about the collective went wrong",
    ],
    "http-error-status": [
        "Error: HTTP 503: model is loading",
        "Response{protocol=http/1.1, code=502, message=Bad Gateway, url=http://embed:8080/embed}",
        "embedding request failed: unexpected status 500",
        "rerank call returned status 429, backing off",
        "The /v1/embeddings endpoint returns a 500 error after a few minutes",
        "client got 502 response from the gateway",
    ],
    "pyo3-borrow-elsewhere": [
        'File "/usr/lib/python3/site-packages/pycrdt/_doc.py", line 10, in transaction\nRuntimeError: Already borrowed',
        "pyo3::pycell::PyBorrowMutError: Already borrowed",
    ],
}

HEALTHY_BEFORE_REAL_WORLD_7 = [
    "[W ProcessGroupNCCL.cpp:1200] Warning: destroy_process_group() was not called before program exit",
    "[I ProcessGroupNCCL.cpp:800] [Rank 0] ProcessGroupNCCL initialization options: NCCL_ASYNC_ERROR_HANDLING: 1",
    "    raise HTTPException(status_code=500, detail=str(e))",
    '        logger.error("Engine core proc %s died unexpectedly, shutting down client.", proc_name)',
    "class EngineDeadError(Exception):",
    "from vllm.v1.engine.exceptions import EngineDeadError",
    "we returned 500 rows in 2 s",
    "HTTP 200 OK",
    "thread 'main' panicked at 'already borrowed: BorrowMutError', src/lib.rs:10:5",
    '            raise RuntimeError(f"Worker failed with error \'{e}\', please check the stack trace above")',
]


@pytest.mark.parametrize(
    ("problem", "line"), [(p, line) for p, lines in BEFORE_REAL_WORLD_7.items() for line in lines]
)
def test_a_line_of_the_class_written_before_real_world_7_is_found(problem: str, line: str) -> None:
    assert problem in scan(line), line


def test_another_pyo3_extension_is_not_the_tokenizer() -> None:
    for line in BEFORE_REAL_WORLD_7["pyo3-borrow-elsewhere"]:
        assert "tokenizer-already-borrowed" not in scan(line), line


@pytest.mark.parametrize("line", HEALTHY_BEFORE_REAL_WORLD_7)
def test_source_and_healthy_lines_written_before_real_world_7_give_nothing(line: str) -> None:
    assert scan(line) == {}, line


# What real-world-7 taught, as rules for the class: each line is of the class and none is an excerpt.
LEARNED_FROM_REAL_WORLD_7 = {
    "engine-dead": [
        'time=2025-01-01T00:00:00Z level=ERROR source=sched.go:1 msg="runner exited" error="signal: segmentation fault (core dumped)"',
        "Error: llama runner died: signal: aborted",
    ],
    "nccl-failure": [
        "RuntimeError: NCCL communicator init failed: invalid usage (run with NCCL_DEBUG=INFO for details)",
        "the job dies with unhandled cuda error in NCCL after a few steps",
        "NCCL remote error during all_gather on node 3",
    ],
    "http-error-status": [
        "anthropic.RateLimitError: Error code: 429",
        "2025-01-01 00:00:00 | ERROR | rerank failed: 503, message='Service Unavailable', url='http://rerank:8080/rerank'",
        "the reranker keeps answering with 429 when we batch",
        "after the upgrade every call returns a 422 because of the schema",
        "we are getting 502 from the gateway since monday",
    ],
}

HEALTHY_AFTER_REAL_WORLD_7 = [
    "Aborted (core dumped)",                        # any program's death in a shell: not said to be the engine
    "the query returned 500 rows in 40 ms",         # 400 and 500 count things too
    "got 400 samples with 413 tokens each",         # a count followed by a digit-free word, but no verb of answering
    "NCCL INFO Using network IB",
    "error_code: 50001",
]


@pytest.mark.parametrize(
    ("problem", "line"), [(p, line) for p, lines in LEARNED_FROM_REAL_WORLD_7.items() for line in lines]
)
def test_what_real_world_7_taught_is_found_in_other_words(problem: str, line: str) -> None:
    assert problem in scan(line), line


@pytest.mark.parametrize("line", HEALTHY_AFTER_REAL_WORLD_7)
def test_the_near_misses_of_what_real_world_7_taught_give_nothing(line: str) -> None:
    assert scan(line) == {}, line


# Written before real-world-8 was collected, from the clients' and servers' own formats: more clients' wordings of an
# answer's status, a status with its phrase in parentheses, LiteLLM's status exceptions, prose statuses after other
# verbs, an engine's death and an NCCL timeout told in prose. Each line is of the class and none is an excerpt.
CLASSES_BEFORE_REAL_WORLD_8 = {
    "http-error-status": [
        "curl: (22) The requested URL returned error: 502",
        'Error: reqwest::Error { kind: Status(503), url: "http://tei:80/embed" }',
        "urllib3.exceptions.MaxRetryError: HTTPConnectionPool(host='rerank', port=80): Max retries exceeded with url: /rerank (Caused by ResponseError('too many 503 error responses'))",
        "elasticsearch.ApiError: ApiError(503, 'search_phase_execution_exception')",
        "opensearchpy.exceptions.TransportError: TransportError(500, 'exception')",
        "google.api_core.exceptions.ResourceExhausted: 429 Quota exceeded for embeddings",
        "google.api_core.exceptions.ServiceUnavailable: 503 failed to connect to all addresses",
        "System.Net.Http.HttpRequestException: Response status code does not indicate success: 502 (Bad Gateway).",
        "HTTPError: Response code 504 (Gateway Timeout)",
        "qdrant_client.http.exceptions.UnexpectedResponse: Unexpected Response: 500 (Internal Server Error)",
        "litellm.InternalServerError: AnthropicException - Overloaded. Handle with `litellm.InternalServerError`.",
        "litellm.exceptions.ServiceUnavailableError: litellm.ServiceUnavailableError: HostedVLLMException - unavailable",
        "the embedding server responded 503 after the reload",
        "every rerank call fails with 429 when we send more than 8 documents",
    ],
    "engine-dead": [
        "vLLM engine crashed after a few hours of embedding requests",
        "EngineCore died while serving the rerank model",
        "Inference engine dies under concurrent load",
    ],
    "nccl-failure": [
        "NCCL timeout during all_reduce after 30 minutes",
        "training hangs: NCCL timed out on rank 3",
    ],
}

HEALTHY_BEFORE_REAL_WORLD_8 = [
    "curl: (22) The requested URL returned error: 200",        # not an error status (curl -f would not say so)
    "elasticsearch.ApiError: ApiError(200, 'ok')",
    "BadRequest: field 'input' is missing",                    # a status class without its code
    "ServiceUnavailable: retry in 503 ms",                     # the code must follow the class's colon
    "the query took 502 ms (Bad Gateway was not involved)",    # the phrase not right after the number in parentheses
    "the reranker responded 500 times in a minute",            # 400/500 count things: not read in prose
    "the reranker responded 200 OK",
    'INFO:     10.0.0.1:5000 - "POST /rerank HTTP/1.1" 200 OK',
    "import litellm",
    "set NCCL_TIMEOUT=1800 before launching",                  # a setting, not a timeout
    "node1:1:1 [0] NCCL INFO NCCL timeout set to 1800 s",
    "if the engine process is killed, restart the pod",
]


@pytest.mark.parametrize(
    ("problem", "line"), [(p, line) for p, lines in CLASSES_BEFORE_REAL_WORLD_8.items() for line in lines]
)
def test_the_classes_written_before_real_world_8_are_found(problem: str, line: str) -> None:
    assert problem in scan(line), line


@pytest.mark.parametrize("line", HEALTHY_BEFORE_REAL_WORLD_8)
def test_their_near_misses_give_nothing(line: str) -> None:
    assert scan(line) == {}, line


# What real-world-8 taught, as rules for the class: each line is of the class and none is an excerpt.
LEARNED_FROM_REAL_WORLD_8 = {
    "engine-dead": [
        "[Bug]: EngineCore crashes when serving a reranker with --task score",
        "Ollama: llama runner Terminated while embedding",
    ],
    "http-error-status": [
        "[Bug]: Internal Server Error on /v1/rerank with long documents",
        'the proxy answers "Service Unavailable" whenever the embedder restarts',
        "{\"message\": \"ServiceUnavailableError: model is still loading\"}",
        "Lots of 429 responses from the embedding API since yesterday",
        "504: The upstream is unavailable, retrying",
    ],
    "pyo3-borrow-elsewhere": [
        "seeing RuntimeError: Already borrowed from Pyo3 in our graph client under gunicorn threads",
    ],
}

HEALTHY_AFTER_REAL_WORLD_8 = [
    "see acme/embedder#412 (issue title, \"Engine crashes on start\")",   # a citation quoting a title
    "we processed many 500 errors worth of tickets",                      # 500 is no rare code
    "we retry on 429 and 503 errors",                                     # a policy, not occurrences
    "ERROR code 1503 responses were dropped",                             # a code inside a longer number
    "the model is overloaded with 502 parameters",                        # the overload before, not after, the code
]
# a death said as a hypothesis ("if the engine dies, ...") is no death since the tables written before real-world-9
# (HEALTHY_BEFORE_REAL_WORLD_9)


@pytest.mark.parametrize(
    ("problem", "line"), [(p, line) for p, lines in LEARNED_FROM_REAL_WORLD_8.items() for line in lines]
)
def test_what_real_world_8_taught_is_found_in_other_words(problem: str, line: str) -> None:
    assert problem in scan(line), line


@pytest.mark.parametrize("line", HEALTHY_AFTER_REAL_WORLD_8)
def test_the_near_misses_of_what_real_world_8_taught_give_nothing(line: str) -> None:
    assert scan(line) == {}, line


# The classes written for, before real-world-9 was collected: a process that serves said to die in any server's
# words, NCCL named beside a word of failure, a registered status after a word that makes it one (or before),
# a status's reason phrase alone, an out-of-memory in torch's or people's words. No line is an excerpt.
WRITTEN_BEFORE_REAL_WORLD_9 = {
    "engine-dead": [
        "[Bug]: vLLM crashed after 3 hours of embedding requests",
        "Our SGLang server keeps dying under rerank load",
        "the model runner was killed by the kernel (oom-killer)",
        "TGI suddenly terminated while warming up the reranker",
        "EngineCore_DP0 died while serving /v1/embeddings",
        "llama-server segfaults with the bge-m3 GGUF",
    ],
    "nccl-failure": [
        "NCCL all_reduce failed on rank 3 after the upgrade",
        "training is stuck in NCCL during the first backward pass",
        "RuntimeError: NCCL communicator error on the second node",
        "hang during NCCL init with 2 nodes",
    ],
    "http-error-status": [
        "[Bug]: /v1/embeddings returns 500",
        "Rerank endpoint fails with 413 when the documents are long",
        "I got a 502 from the proxy in front of TEI",
        "ERROR 500 while calling /embed",
        "the client received 429 after a few hundred requests",
        "Getting a 500 error when sending images",
        "400 Bad Request is fine, but a 503 response comes back under load",
        "the gateway answered Too Many Requests for every batch",
    ],
    "cuda-oom": [
        "torch.OutOfMemoryError: Tried to allocate 2.00 GiB",
        "CUDA OOM when loading the reranker next to the embedder",
    ],
}

HEALTHY_BEFORE_REAL_WORLD_9 = [
    "if the engine dies, the API server exits too",                       # what would happen, not what did
    "When a scheduler process crashes, the launcher sends SIGQUIT",       # a design's prose
    "the engine never crashed in 10,000 requests",                        # a negation
    "returned 500 rows in 2.3 s",                                         # a count
    "got 404 tokens after truncation",                                    # a count
    "server listening on port 5000",                                      # a port
    "status 5000 items processed",                                        # a longer number
    "no more HTTP 500 errors after the fix",                              # said not to happen
    "nccl-tests passed: no NCCL errors on 8 GPUs",                        # said not to happen
    "NCCL INFO Channel 00/02 : 0 1 timeout 1800",                         # INFO chatter
    "export NCCL_TIMEOUT=1800",                                           # a setting
    "java.lang.OutOfMemoryError: Java heap space",                        # Java's, not the GPU's
    "the encoder has 512 hidden units and 500 steps of warm-up",          # numbers, no status
]


def test_a_servers_name_ending_like_an_article_is_still_a_report() -> None:
    # the exclusion of "a/any/other/each/every PROCESS dies" (a design's prose) must not read "Ollam-a crashes"
    assert "engine-dead" in scan("[Bug]: Ollama crashes when embedding with nomic-embed-text")


# What real-world-9 taught, as rules for the class, and the supervisors' words for a serving process gone (written
# before real-world-10 was collected). No line is an excerpt.
LEARNED_FROM_REAL_WORLD_9 = {
    "engine-dead": [
        "The model has crashed while embedding a batch of 64 documents",
        "llamafile crashes after the third request",
        "our inference server died with CUDA OOM after an hour",
        "[3]  91234 segmentation fault  python -m vllm.entrypoints.openai.api_server --model m",
        "2024-01-01T00:00:00 server/signals.cpp:57 10.0.0.1 crashed SIGABRT at 0 bt 1234",
        "vllm-embed-0   0/1   CrashLoopBackOff   7   12m",
        "tei-1 exited with code 139",
        "[2024-01-01 00:00:00 +0000] [7] [ERROR] Worker (pid:12) was sent SIGKILL! Perhaps out of memory?",
        "INFO:     Child process [4242] died",
    ],
    "cuda-oom": [
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 1: cudaMalloc failed: out of memory",
        "RuntimeError: CUDA driver error: CUDA_ERROR_OUT_OF_MEMORY",
        "the reranker pod dies with Cuda OOM on long inputs",
    ],
    "tokenizer-already-borrowed": [
        "self._tokenizer.no_padding()   <- ALREADY BORROWED (RuntimeError)",
    ],
    "pyo3-borrow-elsewhere": [
        "sharing one `acme_graph.Session` between request threads raises `RuntimeError: Already borrowed`",
    ],
}

HEALTHY_AFTER_REAL_WORLD_9 = [
    "The problem is not server crashes, it's that the vectors differ",          # said not to happen
    "the server never crashed, but answers got slower",                        # a negation
    "This handler checks if the engine is dead and restarts it",               # a hypothesis
    '            logger.fatal("MQLLMEngine is already dead, terminating server")',   # source quoting the log call
    "+    @app.exception_handler(EngineDeadError)",                              # the class handed to a handler
    "- `EngineDeadError` is an unrecoverable error in `EngineCore`",           # prose defining the term
    "Aborted (core dumped)",                                                   # any program prints it
    "tei-1 exited with code 0",                                                # a clean exit
    "java.lang.OutOfMemoryError: Java heap space",                             # the JVM's, not the GPU's
]


def test_a_named_object_decides_whose_borrow_error_it_is() -> None:
    assert scan("sharing `tokenizers.Tokenizer` across threads raises `RuntimeError: Already borrowed`") == {
        "tokenizer-already-borrowed": "high"
    }


# What real-world-10 taught, as rules for the class. No line is an excerpt.
LEARNED_FROM_REAL_WORLD_10 = {
    "engine-dead": [
        "Jan  2 03:04:05 gpu1 kernel: [12345.678] llama-server[4242]: segfault at 7f00 ip 00007f00 sp 00007f00 error 4",
        "Jan  2 03:04:05 gpu1 systemd[1]: vllm.service: Main process exited, code=killed, status=9/KILL",
        "Jan  2 03:04:05 gpu1 systemd[1]: tei.service: Failed with result 'core-dump'.",
        "[host:1:2] Caught signal 6 (Aborted: raised by user)",
        "2024-01-01 00:00:00,000 xinference.core.worker 1 WARNING  Process 10.0.0.2:40000 is down.",
        "Error: Model backend is not healthy",
    ],
    "cuda-oom": [
        "         out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 22.00 GiB",
        'Unable to warmup model: Generation("Allocation on device 1 would exceed allowed memory. (out of memory)")',
    ],
    "nccl-failure": [
        "Exception raised from ncclCommWatchdog at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1418",
    ],
}

HEALTHY_AFTER_REAL_WORLD_10 = [
    "Jan  2 03:04:05 gpu1 systemd[1]: vllm.service: Main process exited, code=exited, status=0/SUCCESS",   # a clean exit
    "This PR improves /health when the V1 engine dies unexpectedly",   # a hypothesis after "when"
    "When the embedder crashes, every request fails",                  # the same, at the start
    "Process 10.0.0.2:40000 is up.",                                   # alive
    "terminate called after throwing an instance of 'std::runtime_error'",   # a training job prints it too (real-world-5)
]


WRITTEN_BEFORE_REAL_WORLD_11 = {
    "engine-dead": [
        "after a few minutes the server exited with code 1 and the embeddings client got connection refused",
        "EngineCore_DP0 exited abnormally with signal 11",
    ],
    "cuda-oom": [
        "the reranker ran out of GPU memory with 64 documents per request",
        "with bge-m3 the GPU memory runs out after an hour",
    ],
}

HEALTHY_BEFORE_REAL_WORLD_11 = [
    "the server exited with code 0 after the drain",          # a clean exit
    "if the server exits with code 1, systemd restarts it",   # a hypothesis
    "the job ran out of disk space",                          # not the GPU's memory
]


# What real-world-11 taught, as rules for the class. No line is an excerpt.
LEARNED_FROM_REAL_WORLD_11 = {
    "engine-dead": [
        "(EngineCore_DP1 pid=77) ERROR 01-02 03:04:05 [core.py:710] EngineCore failed to start.",
        "./start-embedder.sh: line 12:  4242 Segmentation fault (core dumped) python -m my.embedder",
        "stderr SIGSEGV: segmentation violation",
        "  Normal   Killing   3m   kubelet   Container tei failed liveness probe, will be restarted",
        "Ray killed this worker (ID: 1234) because it was the most recently scheduled task",
    ],
    "http-error-status": [
        "Readiness probe failed: HTTP probe failed with statuscode: 503",
        "print(resp) -> <Response [429]>",
    ],
    "mm-cache-desync": [
        "after a restart the MM receiver cache got out of sync with the sender",
    ],
}

HEALTHY_AFTER_REAL_WORLD_11 = [
    'Using the tokenizer from threads can result in an "Already borrowed" error, hence the lock',   # foreseen
    'The "No available shared memory broadcast block found" message is informational',             # quoted
    "<Response [200]>",                                                                             # a success
    "the prefix cache is out of sync with the scheduler's view",                                    # not multimodal
]


WRITTEN_BEFORE_REAL_WORLD_12 = {
    "engine-dead": [
        "vllm-embed-1 exited with code 1",
        "    Last State:     Terminated\n      Reason:       Error\n      Exit Code:    139",
        "zsh: segmentation fault  ./build/bin/llama-server -m model.gguf",
    ],
}

HEALTHY_BEFORE_REAL_WORLD_12 = [
    "vllm-embed-1 exited with code 0",   # a clean stop
    "      Exit Code:    0",             # a completed container
]


# What real-world-12 taught, as rules for the class. No line is an excerpt.
LEARNED_FROM_REAL_WORLD_12 = {
    "engine-dead": [
        "1. llama-box crashed after the second batch of embeddings",
        "the uvicorn worker gets killed as soon as the reranker loads",
    ],
    "http-error-status": [
        "the rerank endpoint answers with a 413 Payload too large for 40 documents",
        "503 Service unavailable while the model loads",
    ],
}

HEALTHY_AFTER_REAL_WORLD_12 = [
    "If the upstream returns 503, retry with backoff",                                   # a design's prose
    "When a worker subprocess crashes due to NCCL timeout, the monitor sends SIGQUIT",  # the same
    "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed.",          # a training job's loader
]


# What real-world-13 taught, as rules for the class. No line is an excerpt.
LEARNED_FROM_REAL_WORLD_13 = {
    "engine-dead": [
        "(EngineCore_DP0 pid=12) Process EngineCore_DP0:",
        "GPT4All crashes when the context is longer than 4096 tokens",
    ],
    "cuda-oom": [
        "CUDA error 2 at /src/llama.cpp/ggml-cuda.cu:1234: out of memory",
    ],
    "http-error-status": [
        "tritonclient.utils.InferenceServerException: [503] the model is not ready",
        "the embed route returns `413 Payload Too Large` for long inputs",
    ],
    "pyo3-borrow-elsewhere": [
        'Fix "Already borrowed" crash when tools share the LanceDB connection',
    ],
}

HEALTHY_AFTER_REAL_WORLD_13 = [
    "+                # the replica has died but the controller is down, so retry",   # a diff's code comment
    "`200 OK` is what the health route answers",                                    # a success in inline code
]


# What real-world-14 taught, as rules for the class. No line is an excerpt.
LEARNED_FROM_REAL_WORLD_14 = {
    "engine-dead": [
        "Jan 02 03:04:05 host ollama[42]: SIGABRT: abort",
        "the embedder runs for an hour, then crashes in the scheduler with a CUDA error",
        "the server intermittently crashes when two image requests arrive together",
    ],
    "http-error-status": [
        "proxy returned error: 503 SERVICE UNAVAILABLE {\"detail\": \"loading\"}",
        "we got some 429 from the embedding API this morning",
    ],
}

HEALTHY_AFTER_REAL_WORLD_14 = [
    "When the server sometimes crashes, the supervisor restarts it",   # a hypothesis
    "we got some 429 requests through before the limit",               # a count
]


# Written for the class before real-world-15 was collected (ggml's sources, the ways a sudden exit and a Chinese
# report say it). No line is an excerpt.
WRITTEN_BEFORE_REAL_WORLD_15 = {
    "engine-dead": [
        "GGML_ASSERT: /src/llama.cpp/ggml.c:4182: view_src == NULL || data_size + view_offs <= ggml_nbytes(view_src)",
        "  current device: 1, in function ggml_backend_cuda_synchronize at /ggml/src/ggml-cuda/ggml-cuda.cu:2446",
        "the server just exits without any error after the first long prompt",
        "LM Studio crashes immediately when I load the 70B model",
        "用 docker 部署后，服务经常崩溃，需要手动拉起",
        "并发请求多了以后进程直接挂掉",
    ],
}

HEALTHY_BEFORE_REAL_WORLD_15 = [
    '#define GGML_ASSERT(x) do { if (!(x)) { fprintf(stderr, "GGML_ASSERT: %s:%d: %s\\n", __FILE__, __LINE__, #x); } } while (0)',
    "ggml_cuda_init: found 1 CUDA devices: current device: 0",
    "the websocket connection closes immediately after the handshake",   # a connection, not the server
    "if it crashes immediately, check the driver version",              # a hypothesis
    "it never crashes immediately, only after an hour",                  # said not to happen
    "服务启动成功，模型已加载",                                               # started, loaded: healthy
]


# What real-world-15 taught, as rules for each class. No line is an excerpt.
LEARNED_FROM_REAL_WORLD_15 = {
    "cuda-oom": [
        "  what():  [TM][ERROR] CUDA runtime error: out of memory /lmdeploy/src/turbomind/utils/allocator.h:231",
        "node1:123:456 [2] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
        "the launcher errors out with OOM CUDA on every flag I try",
        "RuntimeError: Not enough memory to handle 8192 prefill tokens. You need to decrease `--max-batch-prefill-tokens`",
    ],
    "http-error-status": ["Received server error (500) from primary with message \"model is loading\""],
    "shm-broadcast-stall": [
        "(VllmWorkerProcess pid=7) WARNING 01-02 03:04:05 shm_broadcast.py:391] No available block found in 60 second.",
    ],
    "engine-dead": [
        "[Bug]: qwen 启动后报错 vllm.v1.engine.exceptions.enginedeaderror",
        "调用两小时后 worker 挂了",
        "the inference containers are crashing under load",
        "our workers keep dying after the upgrade",
    ],
}

HEALTHY_AFTER_REAL_WORLD_15 = [
    '+        "Some NCCL operations have failed or timed out. Due to the ",',   # a diff adding the message
    'print("No available block found in 60 second")',                     # quoted
    "压测一晚上服务没有崩溃",                                                # said not to happen
    "when workers are dying the router retries elsewhere",               # a hypothesis
]


# What real-world-16 taught, as rules for each class. No line is an excerpt.
LEARNED_FROM_REAL_WORLD_16 = {
    "cuda-oom": [
        "CUDA Out of Memory Error when loading the reranker",
        "CUDA is out of memory while embedding the corpus",
        "NER inference on the GPU goes OOM after a few documents",
        "the router hard crashes after an OOM error",
        "[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, stream): out of memory (/app/x.h:12)",
    ],
    "engine-dead": [
        "error_message: The actor is dead because its worker process has died.",
        "the scheduler subprocess crashed during the NCCL all-reduce",
        "TGI hard crashes after the first long prompt",
    ],
}

HEALTHY_AFTER_REAL_WORLD_16 = [
    "        except torch.cuda.OutOfMemoryError as e:",                          # source catching the class
    "error_message: The actor is dead because all references to the actor were removed.",   # a deletion
    "Adds a watchdog to detect scheduler crashes that bypass the handlers",     # what a design detects
    "retries on transient errors (e.g., NCCL timeout) before giving up",         # an example in a design
]


# What real-world-17 taught, as rules for each class. No line is an excerpt.
LEARNED_FROM_REAL_WORLD_17 = {
    "http-error-status": [
        '{"statusCode": 401, "message": "Unauthorized. Access token is missing"}',
        "A 502 from /v1/embeddings whenever the batch is large",
    ],
}

HEALTHY_AFTER_REAL_WORLD_17 = [
    '+            self._send_unhealthy(RuntimeError("Engine loop has died"))',   # source building the exception
    "Already borrowed panic when clicking the open button",                    # a Rust program's RefCell panic
    "a 404 page, a 500 page and a 503 page ship with the theme",                # no path answered
]


# What real-world-18 taught, as rules for each class. No line is an excerpt.
LEARNED_FROM_REAL_WORLD_18 = {
    "nccl-failure": ["[Bug] the server got nccl error at start-up with tp 4"],
    "engine-dead": ["runner  | goroutine 7 [running]:"],
    "http-error-status": [
        "Before: a lot of 413 errors due to payload too large",
        "we see intermittent 502 responses from the gateway",
    ],
}

HEALTHY_AFTER_REAL_WORLD_18 = [
    "the retry policy avoids many 429 errors",          # said not to happen
    "processed 413 files without errors",               # a count
    "goroutine 7 [select]:",                            # a goroutine listed, not the running one of a crash
]


# What real-world-19 taught, as rules for each class. No line is an excerpt.
LEARNED_FROM_REAL_WORLD_19 = {
    "http-error-status": ["Reranking fails with http:503 from the gateway"],
    "engine-dead": [
        "Docker restarted and printed the panic below",
        "the embedding pod keeps restarting after the upgrade",
    ],
    "cuda-oom": ["[BUG] (v1.52) - ggml-cuda.cu:6104: out of memory"],
    "mm-cache-desync": ["Qwen2.5-VL server crashes due to multi-modal cache after an hour"],
}

HEALTHY_AFTER_REAL_WORLD_19 = [
    "I1002 15:18:51.080338 1822035 ProcessGroupNCCL.cpp:530] [Rank 1] NCCL watchdog thread terminated normally",
    "With the handler, all /health requests will return 500 once the engine is gone.",   # a design
    "I restarted the container and it works again",                                     # a person's restart
    "the liveness probe may fail first, which leads to container restarts",              # what could happen
]


# What real-world-20 taught, as rules for each class. No line is an excerpt.
LEARNED_FROM_REAL_WORLD_20 = {
    "engine-dead": [
        "[Bug] v2.1 crashes with CUDA OOM error under 30 concurrent requests",
        "the inference server is crashing with signal 11 every few hours",
        "the 4090s always crash when loading the 12B model",
        "llama-server eventually segfaults under repeated /v1/chat/completions",
    ],
    "cuda-oom": ["GPU memory grows with each request until the server crashes because OOM error"],
    "http-error-status": [
        "this is the 500 (server error) default page of the app",
        "the daemon crashed under load, returning `500` from `/v1/embeddings`",
    ],
}

HEALTHY_AFTER_REAL_WORLD_20 = [
    "And some worker eventually crashes, but they are getting respawned.",   # any one of many, by design
    "if it crashes with signal 11, collect a core dump",                     # a hypothesis
    "the server never crashes when loading, only at the first request",      # said not to happen
]

WRITTEN_BEFORE_REAL_WORLD_21 = {
    "engine-dead": [
        "[Bug]: Crash when using speculative decoding",
        "Segfault during warm-up with tensor parallel",
        "Qwen2.5-VL crashes on startup",
        "vllm serve exits with code 137",
        "  exitcode  : -9 (pid: 12345)",
        "the model server keeps restarting",
        "The service goes down after some requests",
        "the process got killed by the OOM killer",
        "Out of memory: Killed process 4242 (python3)",
        "Killed",
        "Illegal instruction (core dumped)",
        "Shard process was signaled to shutdown with signal 9",
    ],
    "cuda-oom": [
        "[Bug]: OOM when running with max-model-len 32k",
        "OOM on long prompts",
        "I keep getting OOM errors when I increase the batch size",
        "[Bug]: Memory usage is always oom",
        "I consistently encounter out-of-memory errors when loading on the 24GB GPU",
        "ran out of memory while loading the model",
    ],
    "http-error-status": [
        "Bad Request (400) when posting to /embed",
        '{"detail": "overloaded", "status": 503}',
        "the rerank endpoint sends back a 500",
        "HuggingFaceInferenceAPIEmbeddings getting 413 request code",
    ],
}

HEALTHY_BEFORE_REAL_WORLD_21 = [
    "To avoid OOM, lower --gpu-memory-utilization",              # what a design avoids
    "you may see OOM if the batch is too large",                 # what may happen
    "It is possible to OOM with very long inputs",
    "[lore] ONNX OOM on attempt 1, retrying with 4096 tokens",   # another memory (real-world-11: a CPU runtime's)
    "Add OOM error msg for embedding",                           # a message about OOM (real-world-16)
    "Exit code 137 means the container ran out of memory",       # what a code means
    "Killed the server with Ctrl+C and restarted",               # a person, not the shell
    "dask.distributed.KilledWorker: attempted to run task",
    "We return 500 when the engine is dead",                     # a design
    "We answer 503 while the engine restarts",
    "The model answered 400 prompts correctly",                  # a count
    "If the server keeps restarting, check the probe",           # a hypothesis
    "Crash reporting is disabled",
]

LEARNED_FROM_REAL_WORLD_21 = {
    "engine-dead": [
        "using speculative decoding, the server will crash after the first batch",
        "a single malformed image takes down the engine",
        "an OOM in the vision tower will crash the server",
        "the pod was killed due to OOM after a day of traffic",
        "my worker process gets killed in the pod",
    ],
    "cuda-oom": [
        "Out Of Memory Error (OOM) on an A10 with the 7B model",
        "out-of-memory errors during CUDA graph capture",
    ],
    "nccl-failure": ["多机部署时报NCCL超时"],
    "http-error-status": ["the chat request fails 503 under load"],
    "mm-cache-desync": ["we gather the multimodal embeddings but hit a cache miss"],
}

HEALTHY_AFTER_REAL_WORLD_21 = [
    "This should reduce `Already Borrowed` errors in threaded code",   # what a design means to make rarer
    "Lower the batch size to prevent CUDA OOM when the GPU is shared",   # what a change prevents
    "this may cause NCCL hang if the GPUs are not consecutive",        # what may happen
    "if the engine will crash after this change, we roll back",        # a hypothesis
    "I killed the server and restarted it",                            # a person
    "host out-of-memory errors during indexing",                       # another memory
    "Prefix cache miss rate: 12%",                                     # a healthy cache's statistics
    "(EngineCore_DP0 pid=311) DEBUG 08-02 09:14:08 [encoder_cache_manager.py:77] Encoder cache miss for request "
    "chatcmpl-77, computing features.",                                # how a cache fills
]

WRITTEN_BEFORE_REAL_WORLD_22 = {
    "engine-dead": [
        "vllm server shuts down unexpectedly after a few requests",
        "the server process exits silently when sending long prompts",
        "the model server restarts every time I send an image",
        "[Bug]: vLLM stops responding and the container exits",
    ],
    "cuda-oom": ["GPU memory overflow when loading model", "CUDA内存溢出", "加载模型时显存不足", "OutOfMemoryError during cuda graph capture"],
    "http-error-status": [
        "500 errors on /v1/embeddings under concurrency",
        "we keep getting 502s from the load balancer",
        "I'm seeing 504 gateway timeouts under load",
        "接口返回 500",
    ],
    "nccl-failure": [
        "NCCL init hangs forever with tp=4",
        "multi-GPU inference hangs at init_process_group",
        "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients",
    ],
}

HEALTHY_BEFORE_REAL_WORLD_22 = [
    "we retry on 429 and 503 responses",                       # a policy
    "Retries on 502s from the gateway are handled by the client",
    "The container exited with code 0",                        # a clean exit
    "If the container exits, Kubernetes restarts it",          # a hypothesis
    "The server shuts down gracefully on SIGTERM",
    "seeing 500 tokens per second",                            # a count
    "the request took 502s to finish",                         # a time
    "java.lang.OutOfMemoryError: Java heap space",             # Java's
]

LEARNED_FROM_REAL_WORLD_22 = {
    "engine-dead": [
        "./start.sh: line 3: 41234 Killed                  python3 -m vllm.entrypoints.openai.api_server --model m",
        "run.sh: line 1: 977 Segmentation fault      (core dumped) llama-server -m model.gguf",
    ],
    "cuda-oom": ["src/runtime/cuda/cuda_device_api.cc:129: InternalError: Check failed: CUDA: out of memory"],
    "http-error-status": [
        '    "code": 503,',
        "Server error: 502 - upstream worker unavailable",
        "srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 500",
    ],
}

HEALTHY_AFTER_REAL_WORLD_22 = [
    "- telling apart router-generated and worker-relayed `502` responses",   # a kind of answer, in a docs page
    "The API is not returning a 500 Internal Server Error when it should",   # said not to come
    "Throw 429 over max number of requests",                                 # a feature asked for
    "srv  log_server_r: request: GET /props 127.0.0.1 200",                  # a healthy access line
    "./train.sh: line 2: 1234 Aborted (core dumped) python3 train.py",       # not a server
]

LEARNED_FROM_REAL_WORLD_23 = {
    "engine-dead": [
        "2024-11-15T06:12:47.794Z [APP]::Process exited with code null",
        "Restarting process in 5000ms (Attempt 4/5)",
        "with tensor_parallel=2 the grpc server will stop",
        "after the KV cache fills up it dies with error above",
        "调用几次之后整个服务异常退出了",
    ],
    "cuda-oom": ["[Bug]: CUDA OutOfMemory Error when embedding long PDFs", "推理时报Thread-3 Out of Memory"],
    "http-error-status": ["the reranker keeps returning 5xx under load", "接口返回了 503", "状态码也是 400"],
}

HEALTHY_AFTER_REAL_WORLD_23 = [
    "The test uses mocks to simulate EngineDeadError being raised during health check",   # a test's mock
    "verifies that the endpoint correctly returns HTTP 503 status code instead of 500",  # what a change makes it answer
    "- Focuses specifically on the EngineDeadError → 503 logic",                          # a design's mapping
    "after draining, the server will stop accepting new requests",                        # a design
    "服务正常退出",                                                                        # a normal exit
]

LEARNED_FROM_REAL_WORLD_24 = {
    "engine-dead": [
        "[2024-03-01 10:00:00 +0000] [71] [CRITICAL] WORKER TIMEOUT (pid:88)",
        "error: Uncaught SIGSEGV (SEGV_MAPERR) on host pid 812 tid 812",
        "the model server was SIGKILLed by the kubelet",
        "under load the router panics and stops serving",
    ],
}

HEALTHY_AFTER_REAL_WORLD_24 = [
    "send SIGKILL to the worker if it does not exit",   # an instruction
    "the worker panics are caught and logged",          # not said of the process that serves
]

LEARNED_FROM_REAL_WORLD_25 = {
    "engine-dead": ["WARN supervisor: llama-server <embed> exited with status code 137, args: `Command { ... }`"],
    "cuda-oom": ["the server always fails at start-up with an out-of-memory error"],
    "nccl-failure": [
        "with tp=4 an NCLL error occurs on the second node",
        "the second node just stopped at \"Init nccl begin\" without further progress",
        "frame #5: c10d::ProcessGroupNCCL::watchdogHandler() + 0x1da (0x73bbc95f6a9a in libtorch_cuda.so)",
    ],
    "http-error-status": [
        "(HTTP response code was 400)",
        "Error 5001 http 400 after using /embeddings",
        "Failed to embed: [failed_to_embed]: 404 Failed to load model",
    ],
}

HEALTHY_AFTER_REAL_WORLD_25 = [
    "Restart `serving-inference` on `torch.cuda.OutOfMemoryError: CUDA out of memory.`",   # what a feature reacts to
    "3. `main.py` - add gunicorn worker restart on CUDA OOM exception",
    "This change catches vLLM `EngineDeadError` exceptions and calls shutdown",                  # a change's handling
    "- Concurrent usage should no longer trigger \"RuntimeError: Already borrowed\"",          # what a fix prevents
    "vLLM actually calls check_health() and returns 503 if the engine is dead",                 # a behaviour
]

LEARNED_FROM_REAL_WORLD_26 = {
    "engine-dead": ["The server's exit code was 137 after the third request"],
    "cuda-oom": ["Check failed: (__e == VK_SUCCESS) is false: Vulkan Error, code=-2: VK_ERROR_OUT_OF_DEVICE_MEMORY"],
    "http-error-status": [
        "WARNING:src.chains:Failed to generate response due to exception [503] Service Unavailable",
        "ERROR - Failed to add to collection (Status 413): {'detail': 'payload too large'}",
        "404 page not found",
    ],
}

HEALTHY_AFTER_REAL_WORLD_26 = [
    "Demo app crashes with \"Already Borrowed: BorrowMutError\" when it cannot connect",   # Rust's RefCell, any capitals
    "Add a /live probe that returns 200 while draining and only returns 503 on fatal engine error",   # a design
]

LEARNED_FROM_REAL_WORLD_27 = {
    "engine-dead": [
        "[Bug]: the api_server often crashes after upgrading",
        "ERROR container Container.com.yahoo.jdisc.core.StandaloneMain JDisc exiting: Throwable caught:",
        "OSError: exception: access violation reading 0x0000000000000008",
    ],
    "http-error-status": [
        "elasticsearch.NotFoundError: NotFoundError(404, 'resource_not_found_exception', 'model missing')",
        "[ tei-rerank ] HTTP status is not 200. Received status was 413",
        "For HTTP I am recieving 502 errors from the gateway",
    ],
}

HEALTHY_AFTER_REAL_WORLD_27 = [
    "if the server often crashes, raise the memory limit",   # a hypothesis
    "the status was 200 for every request",                  # a success
]


LEARNED_FROM_REAL_WORLD_28 = {
    "engine-dead": [
        "16:53:24 - Crashed container in pod: tgi-standalone-7d9f-abcde",
        "then the engine process raised an uncaught exception and nothing answered",
        "I0821 08:15:33.549090 2830 pb_stub.cc:2049]  Non-graceful termination detected.",
        "./run.sh: line 4:  8812 Floating point exception (core dumped) tritonserver --model-repository=/models",
    ],
    "http-error-status": [
        "the rerank endpoint returned `Not Found` for every query",
        "our client got 'Bad Gateway' from the proxy twice an hour",
    ],
}
HEALTHY_AFTER_REAL_WORLD_28 = [
    "if the scheduler raises an unhandled exception, the server should exit",   # a hypothesis
    "the API should return `Bad Request` for an empty input",                   # a design
    "Not Found errors are cached for 10 minutes by the CDN config we ship",     # no verb of answering
]

WRITTEN_BEFORE_REAL_WORLD_29 = {
    "engine-dead": [
        "2025-01-01 10:00:00,000 WARN exited: sglang (exit status 1; not expected)",
        "2025-01-01 10:00:00,000 WARN exited: ollama (terminated by SIGKILL; not expected)",
        "PM2 | App [llm:0] exited with code [0] via signal [SIGSEGV]",
        "Warning  BackOff  2m  kubelet  Back-off restarting failed container tei in pod tei-0",
        "panic: runtime error: invalid memory address or nil pointer dereference",
        "fatal error: unexpected signal during runtime execution",
        "error: process didn't exit successfully: `target/release/text-embeddings-router` (signal: 11, SIGSEGV: invalid memory reference)",
        "*** SIGSEGV received at time=1700000000 on cpu 3 ***",
        "# A fatal error has been detected by the Java Runtime Environment:",
        "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
        "Process finished with exit code -1073741819 (0xC0000005)",
        "Error: exit status 0xc0000409",
        "the backend died after the first request",
        "tabby exited with status 1",
        "vllm serve is killed after a minute",
        "the model server went offline after a few requests",
    ],
    "http-error-status": [
        "Response [500]",
        "Embedding request failed: 413",
    ],
}
HEALTHY_BEFORE_REAL_WORLD_29 = [
    "2025-01-01 10:00:00,000 INFO exited: vllm (exit status 0; expected)",
    "PM2 | App [llm:0] exited with code [0] via signal [SIGINT]",
    "fatal error: config file not found",
    "if the backend dies, restart it",
    "the backend is ready",
    "Embedding failed: 500 rows were skipped",
    "0xC0000 is the prefix of NTSTATUS codes",
]

LEARNED_FROM_REAL_WORLD_29 = {
    "engine-dead": [
        "2024-03-12 10:00:00,000 - lmdeploy - ERROR - Engine main loop stopped.",
        "2024-09-03 00:43:40,729 xinference.api.restful_api 1 ERROR    Remote server 10.0.0.5:41234 closed",
        "the embedding pod crashes randomly due to OOM under load",
        "[Bug] Qwen server crushed after 300 requests",
        "we saw a CUDA error and the server went down",
        "部署的服务全部异常退出",
    ],
    "cuda-oom": [
        "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
        "2024-01-18 21:27:53,300 xinference.core.model 35043 ERROR    Model actor is out of memory.",
    ],
    "nccl-failure": ["The second node hangs at this line: python/sglang/srt/distributed/device_communicators/pynccl.py#L116"],
    "http-error-status": [
        "[embeddings] Bad Request Error, [RID: 1f] Validation error: input too long",
        "429: 17 occurrences",
    ],
}
HEALTHY_AFTER_REAL_WORLD_29 = [
    "if the server crashes randomly due to a segfault, send the core",   # a hypothesis
    "Remote server closed the connection, retrying",                # a connection, not a process's address
    "the service never crushed in our tests",                      # said not to happen
    "服务正常退出",                                                 # a normal exit
    "200: 864 occurrences",                                         # a success
    "as on /models it doesn't return 503.",                         # said not to come (every table of the problem)
    "## Summary by Sourcery\n\nBug Fixes:\n- ensure a 503 is returned while the model is still loading",   # a change
]

LEARNED_FROM_REAL_WORLD_30 = {
    "engine-dead": [
        "Embedding failed: Worker PID: 4242 terminated unexpectedly with code 3221225477",
        "'./server -m qwen.gguf' terminated by signal SIGILL (Illegal instruction)",
        "[Tue Sep  8 10:05:32 2026] traps: tritonserver[3838286] general protection fault ip:7f83 sp:7f7f error:0 in libc.so.6",
        "api-1  | 7:26PM DBG GRPC(phi-2-127.0.0.1:35789): stderr qemu: uncaught target signal 11 (Segmentation fault) - core dumped",
        'error: creating server: Internal - failed to load all models',
        "the server crashes with **SIGSEGV (general protection fault)** after the warning",
        "then the OS decided to kill the process",
        "服务运行两天后异常退出",
    ],
    "nccl-failure": [" 2 0x00000000000742f0 ncclAllReduce()  ???:0"],
    "cuda-oom": ["Get error `(GPU 0; 23.65 GiB total capacity; 21.87 GiB already allocated; 13.69 MiB free)`"],
    "http-error-status": ["调用 rerank 接口返回 502", "测试报500，请问该如何解决"],
}
HEALTHY_AFTER_REAL_WORLD_30 = [
    "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed.",   # a training job's loader
    "if the worker is killed by signal 9, check the memory limit",                 # a hypothesis
    "the server exited with code 0 after the drain",                               # a clean exit
    "测试返回200，一切正常",                                                      # a success
    "报5000条数据",                                                                # a longer number
    "服务正常退出",                                                                # a normal exit
    "nccl-tests: 0x00007f nccl_net plugin loaded",                                 # not one of NCCL's calls
]

WRITTEN_BEFORE_REAL_WORLD_31 = {
    "engine-dead": [
        "It often crashes, the logs like below.",
        "`Error: socket hang up` And `Running program crashes`",
        "!!!!!!! Segfault encountered !!!!!!!",
        "error: Uncaught SIGBUS (SI_0) on unknown pid 1234",
        "the reranker got killed twice last night",
        "Embedding worker terminated unexpectedly",
    ],
}
HEALTHY_BEFORE_REAL_WORLD_31 = [
    "If the engine crashes, the router retries",                              # a hypothesis
    "This adds a watchdog to detect crashes of the scheduler",                # what a change detects
    "The server never crashed in 10,000 requests",                            # said not to happen
    "And some worker eventually crashes, but they are getting respawned.",    # any one of many
    "thread 'main' panicked at 'already borrowed: BorrowMutError'",           # a Rust panic
    "+            logger.error(\"worker crashed\")",                           # a diff
    "./train.sh: line 2: 1234 Aborted (core dumped) python3 train.py",        # bash's bare abort
    "OOM's, BSOD's, extreme driver crashes all stemming from the card",       # a driver's
]

LEARNED_FROM_REAL_WORLD_31 = {
    "engine-dead": [
        "the sglang server process exits with a non-zero exit code right after loading",
        "which causes the pod to enter a crash loop",
        "2024-04-22 03:16:25,222 xinference.core.worker 95 WARNING  Recreating model actor qwen-7b-1-0 ...",
        "terminate called after throwing an instance of 'tvm::runtime::InternalError'",
        "It crashes around once a day on heavy use with cuda error",
    ],
    "http-error-status": [
        "app  | [GIN] 2024/04/12 - 17:45:41 | 2024041217454176454496988398752 | 502 |    1.2ms |  172.24.0.6 |  POST /v1/rerank",
        "Embedding Error Embedding API 404",
        'the rest fail with "429 too many requests"',
        'It gives an "unauthorized 401" error.',
    ],
}
HEALTHY_AFTER_REAL_WORLD_31 = [
    "failed to open http://127.0.0.1:8080/ in a browser tab: process exited with non-zero status",   # not the server
    "+            status_code=400,",                                     # a diff building the answer
    "the API 500 ms slower than before",                                 # a time
    "if the worker exits with a non-zero code, the supervisor restarts it",   # a hypothesis
    "Once the engine crashes, the router stops sending",                 # a hypothesis
]

LEARNED_FROM_REAL_WORLD_32 = {
    "engine-dead": [
        "After that, server stops.",
        "I asked it to rerank a document. The server would crash a lot.",
        "RayServe Replica Dies After ~1h of load",
        "the pod hits its memory limit and is eventually killed due to OOM",
        "terminate called after throwing an instance of 'nlohmann::json_abi_v3_11_3::detail::type_error'",
    ],
    "nccl-failure": [
        "A communicator with 7 ranks on one node deadlocks during `ncclCommInitRank` and never reaches the collective",
        "But when using more than 1 nodes, Training get stuck due to NCCL,",
    ],
    "cuda-oom": ["CUDA runtime erroe : out of memory"],
    "http-error-status": [
        '{"start_time":"2024-09-09T21:51:33.505Z","method":"GET","response_code":"503","response_flags":"UF"}',
        "we noticed a lot of `5xx` errors being returned to the client",
        "large requests fail due to a 413 from nginx",
    ],
}
HEALTHY_AFTER_REAL_WORLD_32 = [
    "This will enable liveness checks to terminate trials early on vLLM crashes",   # what a design reacts on
    '{"method":"GET","response_code":"200","response_flags":"-"}',                  # a success
    "no 5xx errors since the upgrade",                                               # said not to happen
    "If the worker hangs during ncclCommInitRank, set NCCL_DEBUG=INFO",              # a hypothesis
]


def test_a_process_killed_for_memory_is_a_death_not_the_gpus_memory() -> None:
    # the kernel's or a cgroup's OOM killer kills; a CUDA OOM raises (real-world-32: a model container at its 15Gi limit)
    assert scan("the model container reaches its 15Gi limit and is eventually killed due to OOM") == {"engine-dead": "medium"}


def test_a_log_cut_after_nccls_initialisation_went_on_is_no_stall() -> None:
    # NCCL's own lines after the bootstrap say initialisation went on (real-world-8, -18, -22, -29's near-misses)
    healthy = "\n".join([
        "node1:2139:2139 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.34<0>",
        "node1:2139:2139 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
        "node1:2139:2139 [0] NCCL INFO Using network Socket",
        "NCCL version 2.21.5+cuda12.4",
    ])
    assert "nccl-failure" not in scan(healthy)
    assert scan("\n".join(healthy.splitlines()[:2])) == {"nccl-failure": "low"}  # cut at the bootstrap: a stall


def test_a_paste_that_lost_its_line_breaks_is_read_in_order_for_a_stall() -> None:
    # whichever of the stall and the resume comes last on the line decides (real-world-18's vllm12292: one glued line)
    glued = (
        "INFO pynccl.py:63] vLLM is using nccl==2.20.5 gpu05:1:1 [0] NCCL INFO Bootstrap : Using bond0:172.30.52.37<0> "
        "NCCL version 2.20.5+cuda12.4 gpu05:2:2 [1] NCCL INFO Bootstrap : Using bond0:172.30.52.37<0>"
    )
    assert scan(glued) == {"nccl-failure": "low"}
    assert "nccl-failure" not in scan(glued.rsplit(" gpu05:2:2", 1)[0])   # ends after "NCCL version": went on

LEARNED_FROM_REAL_WORLD_33 = {
    "engine-dead": ["after the client sends an embedding request it causes the server to crash, then the client retries"],
    "cuda-oom": ["HSA_STATUS_ERROR_OUT_OF_RESOURCES ... Available Free mem : 0 MB"],
    "http-error-status": [
        '{":authority":"router.svc","method":"POST","response_code":503,"response_flags":"UH"}',
        "the router fails with an upstream protocol error / 502",
    ],
}
HEALTHY_AFTER_REAL_WORLD_33 = [
    "  tests/entrypoints/test_omni_entrypoints.py::test_fatal_error_raises_engine_dead \\",   # a test's name
    "  tests/diffusion/test_engine.py::TestMultiprocExecutorRaisesEngineDeadError \\",        # the same
    "a long prompt may cause the server to crash",                                              # what may happen
    '{"method":"GET","response_code":200,"response_flags":"-"}',                                # a success
]

LEARNED_FROM_REAL_WORLD_34 = {
    "engine-dead": [
        "3. after the model loaded, like at 99.9%, the program crash, and exe exit.",
        "the process hangs for couple of minutes and then just kills itself",
    ],
    "http-error-status": ["Hi! I see a 502 on text embedding. Are you using local embeddings?"],
}
HEALTHY_AFTER_REAL_WORLD_34 = [
    "Adds a `/health` endpoint which returns `200 OK` once loaded, and `503 Service Unavailable` otherwise.",   # a design
    "the app crashes with `thread 'main' panicked at 'already borrowed: BorrowMutError'`",   # a Rust program's panic
    "if the program crash, the supervisor restarts it",                                         # a hypothesis
    "I never see a 500 on the embed route",                                                     # said not to happen
]

LEARNED_FROM_REAL_WORLD_35 = {
    "engine-dead": [
        "`tgi-gaudi:latest` container does not find devices, and is in crash loop.",
        "While i chat with bot, sometime the error will generate and server is down:",
        "An example log of a crashed prefill pod is attached here",
        "I see frequent pod restarts (mostly on decode pods)",
    ],
    "nccl-failure": ["call ncclAllReduce got Signal: Segmentation fault (11)", "nccl hung", "nccl reports 'out of memory' on 8xV100"],
    "http-error-status": ['failed to save due to "internal server error", no error code given.'],
}
HEALTHY_AFTER_REAL_WORLD_35 = [
    "When the server is down, the router answers from its cache",   # a hypothesis
    "the libnccl timeout value is configurable",                    # a longer name
    "if nccl hangs, set NCCL_DEBUG=INFO",                           # a hypothesis
    "it should not return an internal server error for bad input",  # what should not be
]

LEARNED_FROM_REAL_WORLD_36 = {
    "engine-dead": [
        "E0301 10:02:11.123 77 python_be.cc:2066] Stub process is unhealthy and it will be restarted.",
        "tritonclient.utils.InferenceServerException: [StatusCode.INTERNAL] message: Stub process is not healthy.",
        "root  1059  657  0 May11 ?  00:19:02 [vllm_worker] <defunct>",
        "State:\tZ (zombie)",
        "We keep getting random crashes from the embedding server under load.",
    ],
    "cuda-oom": ["ERROR [worker.py:12] RuntimeError: Triton Error [CUDA]: out of memory"],
    "nccl-failure": ["dist.init_process_group(backend='nccl') on the second node hangs forever"],
}
HEALTHY_AFTER_REAL_WORLD_36 = [
    "Fix engine state when the worker pod is in CrashLoopBackOff",   # a change's title
    "[Bugfix] Fix CUDA out of memory on long prompts",                # vLLM's title tag
    "fix: return 503 while the model loads",                          # a conventional commit
    "Queue above 90% → HTTP 503 + Retry-After: 5",                    # a design's mapping
    "If you get crashes, lower --max-num-seqs",                       # a hypothesis
    "to avoid a zombie process, the launcher reaps its children",     # what a design avoids
    "If init_process_group hangs, set NCCL_DEBUG=INFO",               # a hypothesis
]

LEARNED_FROM_REAL_WORLD_37 = {
    "engine-dead": [
        "the sglang router is crashing again since the upgrade",
        "Observe that the predictor pod enters a CrashBackoffLoop",
        "ERROR Failed to start model server: CUDA driver initialization failed",
        "Worker with pid 77 was terminated due to signal 11",
        "llama-server crashes with 0xC0000005 when two slots decode at once",
        "Sending an empty list crash service.",
        "dmesg shows the kernel OOM-killer, not our code, killed the process at 03:12",
        "I started the batch - after 2 hours it crashed.",   # a bullet's dash, not a diff's
    ],
    "nccl-failure": ["HorovodInternalError: ncclAllGather failed: unhandled system error"],
    "cuda-oom": ["the new scheduler leads to an OOM on an A10", "wrong KV estimate led to CUDA OOM"],
    "http-error-status": ["the client logged the error at the same time as the observed 504"],
}
HEALTHY_AFTER_REAL_WORLD_37 = [
    "The host ran out of CPU memory before it ran out of GPU memory.",          # another memory first
    "Ensure the gateway returns 429 when the queue is full",                   # a task
    "when the queue is full, return a [503 Service Unavailable](https://x)",    # a design's instruction
    "you will see 502 if the backend is down",                                  # a hypothesis
    "a p99 latency of 502 ms was observed 503 ms later",                        # numbers
    "node:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\nnode:1:2 [0] NCCL INFO NET/IB : No device found.",
]

LEARNED_FROM_REAL_WORLD_38 = {
    "engine-dead": [
        "SIGSEGV: segmentation violation\nPC=0x7f3b m=5 sigcode=1\nsignal arrived during cgo execution",
        "[ 912.4] Out of memory: Killed process 4121 (python3) total-vm:91230412kB, anon-rss:80123kB",
    ],
    "cuda-oom": ["RuntimeError: cuda error: out of memory at csrc/cumem_allocator.cpp:62"],
    "http-error-status": [
        "curl: the gateway answered: upstream connect error or disconnect/reset before headers. reset reason: overflow",
        "every request now gets no healthy upstream from the mesh",
        "the embedding call came back with 504 gateway time-out after 60 s",
    ],
}
HEALTHY_AFTER_REAL_WORLD_38 = [
    "[ 88.1] VLLM::EngineCor invoked oom-killer: gfp_mask=0x140cca, order=0",      # the allocator, not the victim
    "[ 88.2] Out of memory: Killed process 311 (cc1plus) total-vm:3069420kB",       # a compiler, not the server
    "Handle fatal errors (CUDA OOM, NCCL timeout, ECC errors) by restarting the pod",  # a list of kinds
    "The server should respond status code 429 when its queue is full",            # a design
    "- [x] Bug fix\nA NCCL timeout happened when saving checkpoints; this sets the timeout", # a change's template
]

LEARNED_FROM_REAL_WORLD_39 = {
    "engine-dead": [
        "压测时服务直接自杀了，日志里什么都没有",
        "During the benchmark the worker process got killed but the pod stayed Ready",
        "启动后报错Segmentation fault，没有其他提示",
        "[2026-01-02 10:00:00] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
    ],
    "cuda-oom": ['fine-tuning on 2*T4 always raises "CUDA out of mem" at step 1'],
    "http-error-status": ["在Dify中调用嵌入接口，返回502"],
}
HEALTHY_AFTER_REAL_WORLD_39 = [
    "服务不会自杀，只会拒绝新的请求",                      # said not to happen
    "接口返回200，结果正常",                                # a success
    "如果模型没有加载，接口应该返回503",                     # what it should do
    "in the long run the worker process never got killed",          # said not to happen
]

LEARNED_FROM_REAL_WORLD_40 = {
    "engine-dead": [
        "WARNING - Runner runner_rocm has exited with code: -11",
        "ERROR health check failed. server could not get a response from detokenizer for last 20 seconds",
    ],
    "http-error-status": [
        "Failed to load resource: the server responded with a status of 504 (Gateway Timeout)",
        "2025-06-01T10:00:00Z ERROR openai: Internal server error: Failed to route the request",
        "Embedding Error eF [Error]: 429 Rate limit reached for requests",
    ],
}
HEALTHY_AFTER_REAL_WORLD_40 = [
    "restart the replica on AsyncEngineDeadError so it stops taking requests",   # what a change reacts to
    "this change will handle EngineDeadError by restarting the engine",        # the same
    "会不会是显存不够导致的？",                                                   # a guess
    "error: 4 of 5 shards loaded",                                             # not a status
]

LEARNED_FROM_REAL_WORLD_41 = {
    "engine-dead": [
        "Bug: Server Embedding Segmentation Fault",
        "the decode pod goes into crashLoopBack after the upgrade",
        "vllm 0.9 qwen3 OOM: Killed process",
    ],
    "nccl-failure": [
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970",
        "node-2: socketStartConnect: Connect to 10.0.0.3<41313> failed : Connection refused",
    ],
}
HEALTHY_AFTER_REAL_WORLD_41 = [
    "- Returns 503 with a JSON detail while not ready",                      # a readiness design
    "The gateway answers 503 until the backend is ready.",                  # the same
    "Running on GPU will lead you to an OOM error with long documents",     # what would follow
]

LEARNED_FROM_REAL_WORLD_42 = {
    "engine-dead": [
        "[2026-01-02 10:00:00] SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
        "vLLM Process dying after a few hundred requests on T4",
    ],
    "cuda-oom": ['the call to `hipMalloc` failed with an "out of memory" error on device 1'],
    "nccl-failure": ["RuntimeError: Timed out while initializing the NCCL communicator on rank 3"],
    "http-error-status": [
        "http_req_duration,1700000000,812.5,,,,false,,POST,http://10.0.0.2:8000/v1/embeddings,HTTP/1.1,ramping_vus,,502,,,"
        "http://10.0.0.2:8000/v1/embeddings,,",
    ],
}
HEALTHY_AFTER_REAL_WORLD_42 = [
    # a change's title, its closing keyword, then the prose of what it handles
    "fix(router): retry when the backend restarts\nCloses #1201.\nThe worker crashes on long prompts and the pod keeps restarting.",
    "Adds a `ReplicaFailed` condition for serving pods stuck in `CrashLoopBackOff`",   # a change about itself
    "Return HTTP 429 when the queue is full, not 500",                                  # a design's imperative
    "To test it, the engine is killed with `kill -9 <pid>` mid-request",               # a kill someone ran
    "If a pod is OOMKilled, its status shows the reason",                              # a rule for any pod
    "http_req_duration,1700000000,12.5,,,,true,,POST,http://10.0.0.2:8000/v1/embeddings,HTTP/1.1,ramping_vus,,200,,,",
]

LEARNED_FROM_REAL_WORLD_43 = {
    "engine-dead": ["the embedding container starts fine but it's crashing under load with no log line"],
    "cuda-oom": [
        "F tensorflow/core/kernels/random_op.cc:120] Non-OK-status: GpuLaunchKernel(Fill, 8, 256, 0, d.stream()) "
        "status: INTERNAL: out of memory",
    ],
    "http-error-status": [
        "Calls to /v1/score are rejected with '404 route not found' by the proxy",
        '"415 internal server error" when the UI calls the rerank microservice',
    ],
}
HEALTHY_AFTER_REAL_WORLD_43 = [
    "return 429 for a batch request if the queue is full",                 # a feature request's rule
    "- return 503 from `/embed` and `/rerank` until the models are loaded",  # a design's step
    "If the queue is full return error 503, not 500",                       # an instruction after a condition
    "the traceback would look something like:\nRuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
    "Training the model for 3 epochs until the pod is OOMKilled",           # a training job, not a server
]

LEARNED_FROM_REAL_WORLD_44 = {
    "engine-dead": ["GPU memory grows with every image until an OOM crash happens"],
    "cuda-oom": ["oneCCL: ze_call.cpp:28 do_call: EXCEPTION: ze error at zeMemAllocDevice, code: ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"],
}
HEALTHY_AFTER_REAL_WORLD_44 = [
    "Fix #812\nThe scheduler can crash the engine when the cache is evicted under load.",   # a change's closing keyword
    "Raise the proxy timeouts to prevent spurious `502 Bad Gateway` answers",            # what a change prevents
    "Increase the NCCL default timeout to 2 hours for large checkpoints",               # a setting
]

LEARNED_FROM_REAL_WORLD_45 = {
    "engine-dead": [
        "Any request with two images causes a crash of the SGLang scheduler",
        "TGI Keeps Crashing on the second shard",
    ],
    "cuda-oom": ["SGLang OOMing on long prompts at batch 8"],
}
HEALTHY_AFTER_REAL_WORLD_45 = [
    "The gateway has to send a 429 response with Retry-After",                  # what a design has to answer
    "- Reply `502 Bad Gateway` instead of `500` when the upstream refuses",     # a status chosen instead of another
    "3 Workers killed due to memory pressure (OOM), 0 Workers crashed due to other reasons",  # a count of none
    "Task was killed due to the node running low on memory.",                   # Ray's kill of a batch task
    "a longer prompt could lead to a crash, so we cap it",                      # what could
]

LEARNED_FROM_REAL_WORLD_46 = {
    "engine-dead": [
        "启动 vllm serve 后发送请求，终端显示“killed”然后退出",
        "多卡推理时报错core dumped",
    ],
    "nccl-failure": [
        "1: Waiting in store based barrier to initialize process group for rank: 5, key: store_based_barrier_key:1 "
        "(world_size=16, worker_count=9, timeout=0:30:00)",
    ],
}
HEALTHY_AFTER_REAL_WORLD_46 = [
    "Feature: allow users to configure the NCCL timeout per job",              # a setting
    "Known multi-node problems: NCCL timeouts, stale caches, port clashes",     # one kind in a list
    "Closes issue #88: the worker crashes when the queue overflows",            # a change's closing keyword
    'PyTorch training in Docker on a T4 gets "Killed"',                         # a training job
    'Crashed = "Crashed"',                                                      # a state machine's state
    "Could this be a CUDA OOM?",                                                # a guess
    "1: Waiting in store based barrier to initialize process group for rank: 5\n"
    "1: Rank 5: Completed store-based barrier for key:store_based_barrier_key:1 with 16 nodes.",
]

LEARNED_FROM_REAL_WORLD_47 = {
    "cuda-oom": [
        "GpuIndexIVF: hipMalloc error: out of memory while reserving 2147483648 bytes",
        "RuntimeError: HIP failed with error out of memory",
    ],
    "engine-dead": [
        "  what():  CUDA runtime error: out of memory /src/engine/allocator.cc:88",
        "Ollama pods crash every night",
        "TGI pod died twice today",
    ],
}
HEALTHY_AFTER_REAL_WORLD_47 = [
    "Set TORCH_NCCL_ASYNC_ERROR_HANDLING=1 to force NCCL to crash the job on a hang",   # what a setting makes it do
    "Retry support for NCCL timeouts in the elastic agent",                              # a feature
    "Without the barrier a rank might hit NCCL watchdog timeout during checkpoint load",  # what one might run into
    "Logging of NCCL errors goes to stderr",                                              # a feature
]

LEARNED_FROM_REAL_WORLD_48 = {
    "cuda-oom": [
        "ERROR [core.py:708] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
    ],
    "engine-dead": [
        "sglang fails to start after upgrading to 0.4",
        "Unable to start Ollama on Windows 11",
        "immediate crash on failed assert at the first prompt",
        "Communication error with deployment encoder at address(es) {'10.0.0.3:5000'}. Head or worker(s) may be down.",
    ],
    "pyo3-borrow-elsewhere": [
        'File "/usr/lib/python3/site-packages/qiskit/dagcircuit/dagcircuit.py", line 10, in apply_operation_back\n'
        "RuntimeError: Already mutably borrowed",
    ],
}
HEALTHY_AFTER_REAL_WORLD_48 = [
    "Add NCCL timeout to the launcher config",                                     # a setting one adds
    "[bugfix]nccl hang in the checkpoint loader",                                   # a change's title
    "The handler sends a JSON body with status 429 and a Retry-After header",       # an answer's shape in a design
    '+        f"Worker entered crash loop after {n} restarts"',                     # a diff adding the message
    "If the server crashes on a failed assertion we lose the batch",                # what would happen
]

LEARNED_FROM_REAL_WORLD_49 = {
    "engine-dead": [
        "模型会经常重启，日志里没有报错",
        "uvicorn kept rebooting workers after the second model was added",
        "the inference pod is stuck restarting after the upgrade",
        "Signal 6 received after the warm-up finished",
        "tritonserver dumped with signal 6 during the stress test",
    ],
    "nccl-failure": [
        "[rank1]:[E101 10:00:00.000 ProcessGroupHCCL.cpp:1500] [Rank 1] HCCL watchdog thread terminated with exception: timeout",
        "on node 2 the last log line was NCCL version 2.21.5+cuda12.4 and nothing after it",
    ],
    "cuda-oom": ["Mixtral 4.0 bpw OOM, so I went back", "the 34B OOM, the 13B works fine"],
    "pyo3-borrow-elsewhere": ["I think dora-rs does not like the node object shared between threads: RuntimeError: Already borrowed"],
}
HEALTHY_AFTER_REAL_WORLD_49 = [
    "extend nccl timeout for checkpoint saving in CI",          # a setting
    "支持模型自动重启",                                          # a feature: supports restarting the model
    "If the pod is stuck restarting, check its liveness probe",  # what to do if
    "Signal 15 received, shutting down gracefully",             # SIGTERM: a stop, not a crash
]


LEARNED_FROM_REAL_WORLD_50 = {
    "http-error-status": [
        "Error: embedding request failed for chunk 12: Failed to create embeddings: 429 Rate limit reached for requests",
        "frequent 503 Server errors since the upgrade",
    ],
    "cuda-oom": [
        "两台机器还是爆OOM",
        "running into memory problems on the GPU after a few hundred batches",
    ],
    "engine-dead": ["$ ./llama-server -m model.gguf\nIllegal instruction"],
}
HEALTHY_AFTER_REAL_WORLD_50 = [
    "gpu-operator-5d9f7c8b4-x2x9z   0/1   CrashLoopBackOff   4 (1m ago)   10m",  # the cluster's machinery
    "nvidia-device-plugin-daemonset-abcde   0/1   OOMKilled   2   5m",         # ... and its daemons
    "Double the timeout of NCCL operations for the 70B run",                  # a setting
    "log the upstream message instead of a generic 500 Internal Server Error", # a change's account
    "Completions: 500 requests in 42 s",                                      # a count
]


LEARNED_FROM_REAL_WORLD_51 = {
    "http-error-status": [
        "rate_limit_exceeded: too many embedding requests",
        "Requests to the ChatCompletions_Create Operation have exceeded token rate limit of your current tier",
    ],
    "cuda-oom": ["Error: command buffer exited with error status. kIOGPUCommandBufferCallbackErrorOutOfMemory"],
    "engine-dead": [
        "the embedding server restarts with 137 exit code every few hours",
        "the process crashes when the prompt has an emoji",
    ],
}
HEALTHY_AFTER_REAL_WORLD_51 = [
    "Exceeding the quota will result in HTTP 429 responses until the window resets",  # what documentation says
    "My proposal is to make the server return 500 when the backend is faulty",          # a proposal
    "using MY_TIMEOUT_SEC to make NCCL timeout configurable",                          # a setting
    "Back off before you hit the rate limit",                                          # advice
    "If the process crashes, the supervisor restarts it",                               # what would happen
]


LEARNED_FROM_REAL_WORLD_52 = {
    "nccl-failure": [
        "INTERNAL: NCCL operation ncclAllReduce(send_buffer, recv_buffer, count, dtype, op, comm, stream) failed: internal error",
        "rccl always hangs at init on the second node",
    ],
    "engine-dead": [
        "Fatal error: 'si_signo 6, si_code: -6, si_errno: 0'",
        "pods were restarting every few minutes after the upgrade",
        "长文本输入时服务就中断了",
        "Engine loop is not running. Inspect the stacktrace to find the original error",
        "the watchdog timeout causes the service to stop",
    ],
}
HEALTHY_AFTER_REAL_WORLD_52 = [
    "kserve-controller-manager-5c7d9 0/2 OOMKilled 3 10m",                           # a controller's pod
    "[Feature]: Support immediate 503 response when the queue is full",               # a feature
    "- When the queue is full, immediately return HTTP 429 Too Many Requests.",       # a design's rule
    "make sure the server does not crash due to CUDA out of memory",                  # what one wants
    "If rccl hangs at init, set NCCL_DEBUG=INFO",                                     # what to do if
]

LEARNED_FROM_REAL_WORLD_53 = {
    "engine-dead": [
        "CRITICAL 01-02 10:00:00 [core_client.py:412] Got fatal signal from worker processes, shutting down.",
        "the model server then enters a restart loop until the probe is removed",
        "memory climbs for hours and eventually the container will restart",
        "as soon as we send batches we get a crash of the server",
        "The crash happens when the second client connects",
    ],
    "cuda-oom": [
        "MPS backend out of memory (MPS allocated: 9.00 GB, other allocations: 1.20 GB, max allowed: 18.13 GB).",
        "bge-m3模型推理时OOM了",
        "批量请求太大就会导致oom",
    ],
    "nccl-failure": ["[Bug]: Server Launch Freezes At Using NCCL With TP=4"],
}
HEALTHY_AFTER_REAL_WORLD_53 = [
    "The operator controller often gets OOMKilled while reconciling 200 resources",        # the cluster's machinery
    "handled types: (ServiceUnavailableError, BadGatewayError, RateLimitError)",         # a list of classes
    "the pod's memory limit is 4Gi and we keep getting OOM errors on CPU",                # the host's memory
    "raise PyTorch's default 600s NCCL timeout for slow model downloads",                  # a setting
    "请问如何设置并发数来防止OOM？",                                                        # a question how to prevent it
    "it is a restart loop waiting to happen",                                              # what may happen
]

LEARNED_FROM_REAL_WORLD_54 = {
    "engine-dead": [
        "goroutine 17 gp=0xc000503a40 m=5 mp=0xc000100008 [syscall]:",
        "[TM][FATAL] models/llama/LlamaBatch.cc(911): Check failed: (state.size()) == 0",
        "after the upgrade the embedder is stuck in an endless crash loop",
    ],
    "http-error-status": ['POST /v2/models/iris/infer -> 503 {"detail":"Model iris is not ready"}'],
}
HEALTHY_AFTER_REAL_WORLD_54 = [
    "the nvcc process was killed by the OOM killer while compiling the flash-attention kernels",   # a build
    "the `cmake --build` subprocess was killed by SIGKILL while building the wheel",               # a build
]

LEARNED_FROM_REAL_WORLD_55 = {
    "cuda-oom": [
        "cupy.cuda.memory.OutOfMemoryError: out of memory to allocate 1073741824 bytes (total 4294967296 bytes)",
        "after a few hundred batches the GPU memory always runs out",
    ],
    "engine-dead": ["sglang 多机部署启动失败，日志如下"],
}
HEALTHY_AFTER_REAL_WORLD_55 = [
    "this regression causes the client to crash on every retry",                  # a client's crash
    "Catch reranker CUDA OOM errors and retry on CPU",                             # a plan
    "If the GPU memory runs out, fall back to the CPU queue",                      # what to do if
    "fix reranker pod crashloopbackoff on cold start",                             # a change's title
    "Raise the value of NCCL timeout for slow nodes",                              # a setting
    "部署bge-m3需要多大GPU显存？",                                                     # how much memory it needs
    "模型配置错误时容易启动失败",                                                      # what may happen
]

LEARNED_FROM_REAL_WORLD_56 = {
    "engine-dead": [
        "the reranker is killed by SIGTERM in the middle of a request",
        "then the process receives SIGTERM and exits without a response",
        "sglang quits with a CUDA error after the first request",
        "llama-server coredumps when the context is full",
        "the gunicorn workers are constantly restarted under load",
        "vllm服务无故退出，需要手动拉起",
    ],
    "nccl-failure": ["both nodes hang at 'Init torch distributed begin.' with --nnodes 2"],
    "cuda-oom": ["there is insufficient GPU memory for the reranker at batch 64"],
    "http-error-status": ["向量化失败:413 input is too long"],
}
HEALTHY_AFTER_REAL_WORLD_56 = [
    "the image builder pod was killed while building the bento",   # a build
    "手动杀死模型进程后，服务会重启",                                      # killed by hand
]

LEARNED_FROM_REAL_WORLD_57 = {
    "engine-dead": [
        "[2024-09-07 10:02:11 +0000] [1] [ERROR] Worker (pid:214) was sent code 134!",
        "the daemon panics on the second request and the socket closes",
    ],
    "http-error-status": ["we keep seeing random `503` errors from the embeddings endpoint"],
}
HEALTHY_AFTER_REAL_WORLD_57 = [
    "If you exceed the limit, the API returns a `429 Too Many Requests` status.",          # a document's rule
    "new requests will be rejected with an HTTP 503 (Service Unavailable) response",       # a design
    "route on whether the upstream returns a 502 status code",                             # a choice
    "- Map validation errors to HTTP 422 and timeouts to HTTP 504",                        # a mapping
    "Detect errors and `CrashLoopBackOff` in the init containers",                         # a feature
    "- Detect MLX/Metal OOM errors and free the cache",                                    # a plan
    "unbounded queues can exhaust memory and eventually result in an OOM",                 # what may happen
]

LEARNED_FROM_REAL_WORLD_58 = {
    "engine-dead": [
        "thread 'tokio-runtime-worker' panicked at backends/candle/src/lib.rs:312:18:",
        "2025-01-02 10:00:00.123456: F tensorflow/core/framework/tensor_shape.cc:45] Check failed: NDIMS == dims()",
        "with two models loaded the router crashes and the models unload when idle",
    ],
    "nccl-failure": ["on AMD the rccl deadlocked in the first all-reduce"],
    "cuda-oom": ["the reranker runs slowly because GPU memory is used up by the LLM"],
    "http-error-status": [
        "Too many requests for service my-endpoint (overloaded)",
        "the response was '502: upstream unavailable' for every rerank call",
    ],
}
HEALTHY_AFTER_REAL_WORLD_58 = [
    "This prevents the router crashes seen with two models loaded",                        # what a change prevents
    "If the server crashes, systemd restarts it",                                          # what to do if
]

LEARNED_FROM_REAL_WORLD_59 = {
    "nccl-failure": [
        "NET/IBP:Got completion from peer 7.0.0.1<1234> with status=12 opcode=0 len=0 vendor err 129 (Send)",
        "ProcessGroupNCCL.cpp:514, unhandled system error",
    ],
    "engine-dead": [
        "Your container application crashed. Please check the logs for your container instance",
        "[2026-01-02 10:00:00] Rank 0 scheduler died (exit code: -9)",
        "when two requests overlap the service crashes and nothing is logged",
        "Rerank Server Crashing Under Load",
    ],
}
HEALTHY_AFTER_REAL_WORLD_59 = [
    "slurmstepd: error: Detected 1 oom_kill event in StepId=42.0. Some of the step tasks have been OOM Killed.",   # a batch job
    "I think this usually means you're running out of GPU memory",                                              # a guess
    "Handle Server Crashes gracefully in the proxy",                                                            # a feature
]


LEARNED_FROM_REAL_WORLD_60 = {
    "engine-dead": [
        "cog.server.exceptions.FatalWorkerException: Prediction failed for an unknown reason. (exitcode 1)",
        "it would answer a few requests, then a segmentation fault (core dumped) occurred",
        "服务运行一段时间后出现 段错误 (核心已转储)",
    ],
}
HEALTHY_AFTER_REAL_WORLD_60 = [
    # TensorFlow's CPU allocator: the host's memory
    "ResourceExhaustedError: OOM when allocating tensor with shape[8,512,768] and type float on "
    "/job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu",
    # a change's bold template headings, then what it handles
    "**Motivation**\nOur engine crashed twice last week, so restart it from a health check.",
    "This is a small change that explains the Internal Server Error the API answers when predict() raises",
    "- **Readiness** - Returns 503 during model load, 200 once it is ready",                     # a design
    "the cleanup job lists failed pods but excludes CrashLoopBackOff pods on purpose",           # a filter
]

LEARNED_FROM_REAL_WORLD_61 = {
    "engine-dead": [
        "kernel: Memory cgroup out of memory: Killed process (deno)",
        "Exception in thread Thread-3 (_background_loop):",
        "terminate called after throwing an instance of 'c10::Error'",
    ],
    "cuda-oom": [
        "I get a CUDA Error:  out of memory after the first long prompt",
        "W0101 00:00:00.000000 1 memory.cc:135] Failed to allocate CUDA memory with byte size 1024 on GPU 0: "
        "CNMEM_STATUS_OUT_OF_MEMORY, falling back to pinned system memory",
        "tvm.error.InternalError: Check failed: (result) is false: Failed to allocate 4096 bytes with alignment 64 bytes",
    ],
    "http-error-status": [
        '    "httpStatusCode": 503,',
    ],
}
HEALTHY_AFTER_REAL_WORLD_61 = [
    "+   A pod that keeps crashing is restarted with an exponential back-off delay.",                  # a diff
    "the regression test uses httptest returns 503 for the second call and expects a retry",           # a test double
    "This documentation change explains why a crashed engine leaves replicas answering 5xx errors",    # documentation
    "_🟠 Major_ | _⚡ Quick win_\n**One bad batch crashes the whole request.**",                        # a review bot
]

LEARNED_FROM_REAL_WORLD_62 = {
    "engine-dead": [
        "01-01 10:00:00.000  4242  4242 F DEBUG   : *** *** *** *** *** *** *** *** *** *** *** *** *** *** *** ***",
        "  Warning  Evicted    12s   kubelet  The node was low on resource: ephemeral-storage.",
        "the logs show repeated restarts of the workers while the reranker loads",
        "[Bug]: Native crash in libtorch during batch embedding",
        "Thread 7 received SIGTRAP in the embedder",
    ],
    "cuda-oom": [
        "with a 32k context it runs out of VRAM and stops",
        "the NER service hits GPU memory exhaustion after a few hundred requests",
        "the KV cache GPU memory allocation failed for the draft model",
    ],
    "http-error-status": [
        "ingest failed: Error code: 503",
        "google.api_core.exceptions.FailedPrecondition: 400 Endpoint is not ready.",
    ],
}
HEALTHY_AFTER_REAL_WORLD_62 = [
    "istio-ingressgateway-5d9c7b8f4-abcde   0/1   OOMKilled   3   10m",                    # the mesh's gateway
    "Looks like an OOM error, the instance has only 8 GB of RAM",                             # a guess
    "stream large files without memory accrual resulting in OOM on small devices",           # what a change avoids
    "The server should catch the allocation error and return an HTTP 503 instead",           # what to do
    "the handler checks the model files, returning 503 if any is missing",                    # a design
]

LEARNED_FROM_REAL_WORLD_63 = {
    "engine-dead": [
        "Amazon SageMaker could not get a response from the my-endpoint endpoint.",
        "the triton container got exited after the third request",
        "部署后服务不断重启",
    ],
    "cuda-oom": [
        "vllm-rs | ERROR KVCache allocation failed: Insufficient GPU memory for KVCache allocation.",
    ],
    "http-error-status": [
        "API Error from Vertex AI (503)",
        "Exception: API call got non-200 response code (code=500, msg=oops)",
    ],
}
HEALTHY_AFTER_REAL_WORLD_63 = [
    "If you encounter CUDA OOM with long prompts, lower max_num_seqs",                                # advice
    'a smaller cache may lead to a related error "No available memory for the cache blocks"',         # what may follow
    "**Host memory** OOM after the upgrade",                                                          # the host's
    "Crash on startup: RefCell already borrowed (Rust panic at src/app.rs:12)",                       # plain Rust
]

LEARNED_FROM_REAL_WORLD_64 = {
    "engine-dead": [
        "tabby serve exitcode: 132",
        "the missing sidecar causes embed-svc restart loop",
        "running the reranker causes a segmentation  violation",
    ],
    "cuda-oom": [
        "OutOfMemoryError('Out of memory allocating 2,147,483,648 bytes (allocated so far: 1,024 bytes).')",
        "CURANDError: CURAND_STATUS_ALLOCATION_FAILED",
        "[TensorRT-LLM][ERROR] 1: [defaultAllocator.cpp::allocate::20] Error Code 1: Cuda Runtime (out of memory)",
        "it fails because of low GPU memory",
    ],
    "nccl-failure": [
        "dist.init_process_group() hangs and never returns on rank 3",
    ],
}
HEALTHY_AFTER_REAL_WORLD_64 = [
    "Found pods in error state: bench-xyz/harness (CrashLoopBackOff, last terminated: OOMKilled)",   # a load generator
    "surface container termination reasons such as OOMKilled in the report",                         # an example
    "- map `ModelNotReady` to HTTP 503 in the router",                                               # a design
]

LEARNED_FROM_REAL_WORLD_65 = {
    "engine-dead": [
        "EventType=APPCRASH",
        "Faulting application name: llama-server.exe, version: 0.0.0.0",
        "The model has exited. (Exit code: 18446744072635812000)",
        "Embedding app crashes running on upload of many files",       # "many" is no "any"
        "Action server crashes for bert large.",                       # "Action" is no "on"
    ],
}
HEALTHY_AFTER_REAL_WORLD_65 = [
    "+// ncclRemoteError only exists in NCCL versions 2.13+",                        # source
    "`ncclInternalError` is returned when NCCL hits an internal bug",               # what it means
    "Adopt ncclRemoteError",                                                        # a change
    "you can add workers until you get OOM",                                        # advice
]

LEARNED_FROM_REAL_WORLD_66 = {
    "engine-dead": [
        "The primary container for production variant my-llm did not pass the ping health check.",
        "调用embedding接口后服务直接Crash",
    ],
    "nccl-failure": [
        "RuntimeError: [2] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d key-value store",
        "多卡部署 vllm 有 nccl 超时",
    ],
    "cuda-oom": [
        "llama-server keeps running out of memory under ROCm",
    ],
}
HEALTHY_AFTER_REAL_WORLD_66 = [
    "Error message: panicked at core/src/display_object.rs:10:5:",                    # a browser's WebAssembly
    "bursts may exceed the quota and result in HTTP 429 responses",                     # what may happen
    "Builds a reason exposing `OOMKilled` / exit codes / `CrashLoopBackOff`",           # the states as a list
    "Unknown communication backend: nccl错误",                                          # a backend's name
]

LEARNED_FROM_REAL_WORLD_67 = {
    "http-error-status": [
        "Failed request (502): Rerank Request Error: upstream closed",
        "Uncaught (in promise) Error: [429 ] Resource has been exhausted.",
        "botocore.errorfactory.ThrottlingException: An error occurred (ThrottlingException) when calling the Converse "
        "operation",
    ],
}
HEALTHY_AFTER_REAL_WORLD_67 = [
    "- Adds a readiness probe so that pods are no longer stuck at NCCL initialization",   # a change's summary
    "    sys.exit(3)  # 3 is our code for CUDA OOM",                                       # what a code stands for
]

LEARNED_FROM_REAL_WORLD_68 = {
    "engine-dead": [
        "vllm-qwen-7d9f5c-abcde   1/1     Running   4 (12m ago)   3h",
        "      exitCode: 139",
        "[Bug] crash after enabling prefix caching on 0.9.2",
        "Passing --verbose causes llama-server to exit immediately",
        "embedding模型OOM后重启了三次",
        "gunicorn keeps rebooting worker after loading the reranker",
    ],
    "nccl-failure": ["NCCL communicator aborted: remote process exited"],
    "cuda-oom": ["ggml backend: cuda: out of memory while loading layer 31"],
    "http-error-status": [
        "An error occurred (throttlingException) when calling the ConverseStream operation: Too many tokens",
        "the endpoint keeps returning errors (502) under load",
    ],
}
HEALTHY_AFTER_REAL_WORLD_68 = [
    "| 429 | Too Many Requests | Retry after the interval in the Retry-After header. |",   # a documentation table
    "Long generations may take longer than the ingress timeout and hit 504 Gateway Timeout.",  # what may happen
    "+    // on SIGSEGV the server dumps its stack before it exits",                          # a diff's code comment
    "Ray prints one of the following error messages when a worker crashed:",                 # documentation
    "This moves the readiness check, so the first requests get 503 Service Unavailable",     # a change's description
    "- [x] I have added a test that the server answers 503 while loading",                   # a template's ticked box
    "gpu-feature-discovery-x2k9p   1/1   Running   2 (40m ago)   1d",                      # infrastructure's pod
]

LEARNED_FROM_REAL_WORLD_69 = {
    "engine-dead": [
        "thread '<unnamed>' panicked at /home/ci/.cargo/registry/src/index.crates.io-6f17d22bba15001f/candle-core-0.8.0/src/"
        "cuda_backend/mod.rs:120:9:",
        "Worker lost while embedding batch 12",
    ],
    "http-error-status": ["Code: 502 Undocumented | Error: Bad Gateway"],
}
HEALTHY_AFTER_REAL_WORLD_69 = [
    "Fixes a crash when the reranker answers a bare list.\nAlso caps the batch size: the defaults were causing 413 errors",
    "Error before this diff when a request timed out: HTTP 504 Gateway Timeout",   # a change naming itself
]

LEARNED_FROM_REAL_WORLD_70 = {
    "engine-dead": [
        "Sending an image larger than 4096px causes a core dump in the vision encoder",
        "Each /v2 infer call is shutting down the server",
    ],
}
HEALTHY_AFTER_REAL_WORLD_70 = [
    "[Frontend] Fix 500 Internal Server Error for a tool call without arguments",       # a change's title after its tag
    "A `CrashLoopBackOff` is a state in which a container keeps failing to start",      # documentation's definition
    "max-model-len 65536 leaves us about 300MiB from GPU OOM at 0.95 utilisation",    # how far from it
    "the client will retry without limit on a 503 response",                           # what a client does on one
    "(or any provider that always returns 429)",                                       # any server that would
]

LEARNED_FROM_REAL_WORLD_71 = {
    "engine-dead": [
        "[2]    40211 floating point exception  python -m vllm.entrypoints.openai.api_server --tp 2",
        "terminate called after throwing an instance of 'tensorrt_llm::common::TllmException'",
        "the embeddings sidecar crashed for lack of GPU support in the latest build",
    ],
    "cuda-oom": ["调用reranker后cuda超出，服务报错"],
    "http-error-status": ["the proxy return http code 502 for every streamed request"],
}
HEALTHY_AFTER_REAL_WORLD_71 = [
    "- Engine crashes → supervisor restarts it → HEALTHY",                 # a design's flow
    "docs: explain the 503 Service Unavailable returned while loading",   # a documentation change's title
]

LEARNED_FROM_REAL_WORLD_72 = {
    "engine-dead": [
        "the ranker server was restarted by the supervisor twice",
        "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD with errorcode 134.",
    ],
    "nccl-failure": ["the NCCL watchdog keeps timing out after 1800 s on the decode node"],
    "cuda-oom": ["24g的显存装不下这个模型", "GPU memory allocation error: requested 2.1 GiB"],
}
HEALTHY_AFTER_REAL_WORLD_72 = [
    "[Router] Remove dead replicas after a 503 Service Unavailable from their health check",   # a change's title
    "**Context:** the router kept sending requests to replicas that answered 503 Service Unavailable",
    "The operator pod was OOMKilled at its 64Mi limit",                                       # an operator's pod
]

LEARNED_FROM_REAL_WORLD_73 = {
    "engine-dead": [
        "Error: Webserver process was signaled to shutdown with signal 9",
        "spacy 3.7 crashing gunicorn on every deploy since the upgrade",
        "trtllm-serve aborts after loading the engine",
    ],
    "http-error-status": ["API Error (429 Too many tokens per minute) · Retrying in 4 seconds"],
}
HEALTHY_AFTER_REAL_WORLD_73 = [
    '+                == "OOMKilled"',                         # a state compared in code
    "cudaErrorMemoryAllocation = 2",                            # an error code's definition
    "# A pod may fail due to OOM when the batch is too large",   # what may happen
]

LEARNED_FROM_REAL_WORLD_74 = {
    "engine-dead": [
        "  what():  [TM][ERROR] CUDA runtime error: an illegal memory access was encountered",
        '"Booting worker" is looping infinitely in the embeddings container',
    ],
}
HEALTHY_AFTER_REAL_WORLD_74 = [
    "the embedder responds with 413 error code if a batch holds more than 32 inputs",   # what it answers when
    "Previously, the router was returning 500 for an unknown model.",                  # what a change replaces
    "- keep the current 503 response for a draining replica",                          # what a change keeps
    "Resolves `CUDA out of memory` errors when two replicas share a GPU",              # a change's title
]

LEARNED_FROM_REAL_WORLD_75 = {
    "engine-dead": [
        "libc++abi: terminating due to uncaught exception of type std::runtime_error: [METAL] Command buffer execution "
        "failed: Internal Error",
        "the embedder gets a 139 exit code on the first batch",
        "rerank-7c9f8d-x2kqp   0/1     Evicted    0          2h",
        "Retry worker: 9002 in 34 seconds.",
    ],
    "nccl-failure": ["src/utils/nccl_utils.cc:118 'unhandled system error'"],
    "http-error-status": [
        'Gemini: {"error": "quota exceeded"} (code: 429)',
        "[vertex/text-embedding-005] [503]: The service is currently unavailable.",
        "429 RESOURCE_EXHAUSTED while embedding the corpus",
    ],
}
HEALTHY_AFTER_REAL_WORLD_75 = [
    "+            // Case A: CUDA out of memory, mapped to 507",    # a diff's code comment
    "raise the memory limit for the operator - OOMKilled twice",    # an operator's
    "The API should return 137 exit code when the run is killed",   # what should be returned
]

LEARNED_FROM_REAL_WORLD_76 = {
    "engine-dead": [
        "the embeddings sidecar is killed and restarted by docker on every large batch",
        "Our uvicorn workers get killed repeatedly under load",
        "RuntimeError: [TM][ERROR] CUDA runtime error: an illegal memory access was encountered /src/llama/Batch.cc:91",
        "ERROR (tini:1): failed to exec the server: permission denied",
        "posting an image larger than 20 MB causes the service to restart",
    ],
    "http-error-status": [
        "[10.0.0.7]:51022  500  -  POST  /v1/embeddings",
        '{"detail":[{"type":"missing","loc":["query","model"],"msg":"Field required"}]}',
    ],
}
HEALTHY_AFTER_REAL_WORLD_76 = [
    "If the model server returns a 503, the client should back off",             # a design's condition
    "Show users when their pods have been restarted due to OOM",                   # a container's memory, asked for
    "an oversized batch could cause the worker to restart",                        # what may happen
]
LEARNED_FROM_REAL_WORLD_77 = {
    "engine-dead": [
        "Engine core death on the second request leaves the API server hanging",
        "the memory monitor then kills the ServeController along with two replicas",
        "and one of the processes killed was the ServeController itself",
    ],
    "http-error-status": [
        '{"message":"An invalid response was received from the upstream server"}',
        '{"message":"The upstream server is timing out"}',
        '{"message":"failure to get a peer from the ring-balancer"}',
        "2024/05/02 10:11:12 [error] 31#31: *907 upstream timed out (110: Connection timed out) while reading response "
        "header from upstream, client: 10.0.0.2, server: _, request: \"POST /v1/embeddings HTTP/1.1\"",
        "2024/05/02 10:11:12 [error] 31#31: *908 upstream prematurely closed connection while reading response header "
        "from upstream, client: 10.0.0.2",
    ],
}
HEALTHY_AFTER_REAL_WORLD_77 = [
    "This rule detects when the proxy cannot reach its backends.\nThat results in HTTP 502 errors for the user.",
    "Turn a full admission queue into a retryable HTTP 503 answer with Retry-After",   # a design's answer
    "NFD garbage collector gets OOM Killed",                                          # a cluster add-on
]
LEARNED_FROM_REAL_WORLD_78 = {
    "engine-dead": [
        "double free or corruption (out)",
        "munmap_chunk(): invalid pointer",
        "3f2a9c1d77e0   vllm/vllm-openai:v0.8.5   \"python3 -m vllm.ent…\"   2 hours ago   Exited (139) 3 minutes ago   vllm",
        "服务启动后打印了几行日志就退出了",
        "Server segmantation fault after the first request",
    ],
    "http-error-status": [
        "every call to /v1/embeddings 总是500",
        "the client shows a 502 thrown by the gateway",
    ],
}
HEALTHY_AFTER_REAL_WORLD_78 = [
    "**Unit tests:** error types across HTTP 499/500/502/504",                       # a change's test section
    "Introduce HTTP 503 for an overloaded queue",                                    # a change's title
    "This tracks a failure mode where the worker process is killed by the OOM killer",   # a failure mode named
    "Add ProcessGroupNCCLError exception type for NCCL errors",                      # an error's type named
]
LEARNED_FROM_REAL_WORLD_79 = {
    "engine-dead": [
        "xoscar.errors.ServerClosed: Remote server unixsocket:///1234567 closed: 0 bytes read",
        "E0102 10:11:12.000 pb_stub.cc:402] Stub process 'bge_reranker_0_0' is not healthy.",
        "Bus error during model.encode with 8 workers",
        "the embedding pool throws bus error inside the container",
        "thread 'tokio-runtime-worker' panicked at /usr/src/router/src/http/server.rs:1021:14:",
        "Server seg fault after the second rerank call",
    ],
    "http-error-status": [
        '{"error":"Model BAAI/bge-m3 is currently loading","estimated_time":20.0}',
    ],
    "nccl-failure": [
        " 9  /opt/conda/lib/python3.10/site-packages/torch/lib/libnccl.so.2(+0x9f27c) [0x7f21c550627c]",
    ],
}
HEALTHY_AFTER_REAL_WORLD_79 = [
    "- Verifying that the gateway returns 429 once the quota is spent",                # a test plan's check
    "Memory on the node (IP: 10.0.0.1) where the task was running was 30GB / 31GB. Ray killed this worker",
]
LEARNED_FROM_REAL_WORLD_80 = {
    "engine-dead": [
        "the embedding container restarts in a loop after the upgrade",
        "after the last shard loaded, the entire program exited with an error",
        "[Tue Mar 05 10:11:12 2024] [wsgi:error] [pid 77] End of script output before headers: ner_service.wsgi",
    ],
    "nccl-failure": ["两台机器跑vllm，启动时nccl报错"],
    "mm-cache-desync": ['    assert mm_item is not None, f"Expected a cached item for {mm_hash=}"'],
}
HEALTHY_AFTER_REAL_WORLD_80 = [
    '+        assert mm_item is not None, f"Expected a cached item for {mm_hash=}"',      # a diff adding it
    "Unless the entire program exited, the watchdog keeps the pod alive",            # under a condition
]
LEARNED_FROM_REAL_WORLD_81 = {
    "engine-dead": [
        "libc++abi: terminating due to uncaught exception of type tvm::runtime::InternalError: Check failed",
        "(ServeReplica:app:Embedder pid=4411) The actor died because of an error raised in its creation task, "
        "ray::ServeReplica:app:Embedder.__init__() (pid=4411, ip=10.0.0.3)",
    ],
    "http-error-status": ["\tMessage: Received bad response from the endpoint:\nResponse Code: 502"],
}
HEALTHY_AFTER_REAL_WORLD_81 = [
    "feat: show the last termination state when pod is in CrashloopBackoff",        # a change's title
    "add the failure's cause to the access log for 502 status code",                  # ... in lower case
    "the client receives `500 Internal Server Error` instead of `504 Gateway Timeout` on timeouts",   # what it replaces
]
LEARNED_FROM_REAL_WORLD_82 = {
    "nccl-failure": ["Unhandled system error in ProcessGroupNCCL on the second node"],
    "cuda-oom": ["RuntimeError: [TensorRT-LLM][ERROR] CUDA runtime error in cudaMallocAsync: out of memory"],
    "http-error-status": ["部署的reranker请求报错！500"],
}
HEALTHY_AFTER_REAL_WORLD_82 = [
    "HTTP 503 is the right status when the upstream has no capacity",                 # a design's judgement
]
LEARNED_FROM_REAL_WORLD_83 = {
    "engine-dead": ["the reranker worker got a SIGKILL while encoding the batch"],
    "nccl-failure": [
        "rank 3: Message truncated : received 2048 bytes instead of 512",
        "NCCL reduce scatter is failing on the second node",
    ],
    "cuda-oom": ["Out of memory when loading the 13B model on a 12GB card"],
    "http-error-status": ["网关频繁报超时504", 'every call returns "500 Internal Server" from the embedding route'],
}
HEALTHY_AFTER_REAL_WORLD_83 = [
    "The 502 Bad Gateway answer is not covered in the troubleshooting guide yet",     # what a document lacks
]
LEARNED_FROM_REAL_WORLD_84 = {
    "engine-dead": [
        "[Bug] Segmentation fault: address not mapped to object at address 0x17",
        "MPI Abort Error after the executor's first broadcast",
        # (guards the lesson's own exclusion, which reads only the gerund "Returning a 513 after ...")
        "vLLM crashed and now returns 500 after every request",
    ],
    "http-error-status": ["调用网关时频繁502错误"],
}
HEALTHY_AFTER_REAL_WORLD_84 = [
    "- Update the health check to return 513 if NIM server has crashed",           # a design's answer
    "Returning a 513 after the server has crashed lets the client fail fast",       # ... said again
]

LEARNED_FROM_REAL_WORLD_85 = {
    "engine-dead": [
        "The inference server was Killed while loading the NER model",
        "Core dumped in batch mode inside the container",
        "unescaped text makes the NER model to crash Docker container",
        "It does not crash at startup, but crashes randomly after two days of serving",
    ],
    "cuda-oom": [
        "E rocm_driver.cc:600] failed to allocate 2.00G (2147483648 bytes) from device: HIP_ERROR_OutOfMemory",
    ],
    "http-error-status": [
        "google.api_core.exceptions.RetryError: Deadline of 60.0s exceeded while calling target function, last "
        "exception: 504 Deadline Exceeded",
        "the caller gets a proxy-generated 502 after the timeout",
    ],
}
HEALTHY_AFTER_REAL_WORLD_85 = [
    "`502 Bad Gateway` is the expected response when every upstream is down",      # a design's convention
    "Worker node running into OOM, the task is retried on another node",            # a host's memory
    # (guards the lesson's own table, which reads a death after "but" only in the past or present)
    "Fine, but it will die after the timeout if the lease is gone",
]

LEARNED_FROM_REAL_WORLD_86 = {
    "shm-broadcast-stall": ["[Bug]: 部署模型报错：no available shared memory broadcast block found in 60 seconds"],
    "cuda-oom": ["the tagger stopped: out of memory error from torch on chapter 12"],
    "engine-dead": ["Llama-3.2-Vision models crash with image input on the Metal backend"],
    "http-error-status": ["Rerank calls fail with HTTP 413 for any query longer than 512 tokens"],
}
HEALTHY_AFTER_REAL_WORLD_86 = [
    '+        return JSONResponse({"detail": "not ready"}, status_code=503)',             # a diff's code
    "a timeout here should be treated as HTTP 504 by the proxy",                         # a design's mapping
    "clients would see a Cloudflare 524 response if the origin is slow",                 # a guide's what-if
    "Support OOMKilled pods in the analyzer",                                            # a feature's title
    "Release v0.4.0: Fix router OOM when many models are registered",                   # a release's title
]

LEARNED_FROM_REAL_WORLD_87 = {
    "mm-cache-desync": ["[Bug]: KeyError in mm_input_cache after a request with two images"],
    "shm-broadcast-stall": ["[Bug]: shm_broadcast hangs on a 2-node PP deployment"],
    "nccl-failure": ["gloo works, but nccl deadlock on the second node"],
    "engine-dead": ["Triton server terminate itself when input a long prompt"],
    "http-error-status": ["the embedding call keeps resulting in 500 for every batch"],
}
HEALTHY_AFTER_REAL_WORLD_87 = [
    # (guard the lesson's own exclusions: a framing quoted to be taken back, a what-if, a backend's name in code)
    'The original "shm_broadcast hangs cross-node" framing was wrong',
    "If the shm_broadcast deadlocks, the engine is restarted",
    'dist.init_process_group(backend="nccl") failed to find a free port',
]

LEARNED_FROM_REAL_WORLD_88 = {
    "engine-dead": ["[Bug] Core Dumped on the second GPU"],
    "cuda-oom": [
        "E tensorflow/stream_executor/rocm/rocm_driver.cc:601] failed to allocate 2.00G (2147483648 bytes) from device: "
        "hipError_t(1002)",
    ],
}
HEALTHY_AFTER_REAL_WORLD_88 = [
    "the tagger is always killed because OOM, the box has 16GB",                    # the host's OOM killer
    "Print the memory summary when NCCL errors",                                    # a failure as a condition
]

LEARNED_FROM_REAL_WORLD_89 = {
    "cuda-oom": ["RuntimeError: CUDA Error 2, out of memory while loading shard 3"],
    "nccl-failure": ["all_reduce_perf: NCCL Test hangs once the job spans 20 nodes"],
}
HEALTHY_AFTER_REAL_WORLD_89 = [
    "the other routes will throw 404 not found error until the model is loaded",      # a design's what-if
    "it should be 503 Service Unavailable while loading",                             # ... and its should
    "This page documents why a missing proxy_read_timeout causes 504 Gateway Timeout",  # a document's subject
    "Exit status 137 means OOM in the container",                                     # a code's meaning
]

LEARNED_FROM_REAL_WORLD_90 = {
    "engine-dead": [
        "the load test causes vLLM server to shutdown after a minute",
        "[Bug]: SGLang Server hangs and unexpectedly shutdown",
        "Kernel died while encoding the corpus with bge-m3",
    ],
    "http-error-status": ["- HTTP code: 503", "request failed. Response code: 429."],
}
HEALTHY_AFTER_REAL_WORLD_90 = [
    # (guard the lesson's own exclusions: the operating system's kernel, and LangChain's line that real-world-2 labels)
    "The Linux kernel crashed when the GPU fell off the bus",
    "Error raised by inference API HTTP code: 500",
]

LEARNED_FROM_REAL_WORLD_91 = {
    "engine-dead": ["the router is eventually killed by the OS (OOM) after a day"],
    "cuda-oom": ["the notebook still gives a GPU-out-of-memory issue"],
    "http-error-status": ["google.api_core: 400 Request contains an invalid argument.", "429 Resource has been exhausted (e.g. check quota)."],
}
HEALTHY_AFTER_REAL_WORLD_91: list[str] = []

LEARNED_FROM_REAL_WORLD_92 = {
    "cuda-oom": [
        "Model Fails to Load Due to OOM on two L4s",
        "with max_num_seqs 512 an OOM happened again.",
        "llama_model_load: error loading model: unable to allocate Vulkan0 buffer",
    ],
    "http-error-status": ["the ingest job stops with a 503 Server Error from the embedding service", "the client hit a 422 http error code on every query"],
}
HEALTHY_AFTER_REAL_WORLD_92 = [
    "[metrics] Suppress GPU OOM while sampling memory stats",
    "Surface OOM errors to the client instead of a worker crash",
    "Perhaps the OOM occurs because the host has too little swap",   # guards the lesson's "OOM happened" for a guess
    "failed to allocate CUDA_Host buffer of size 1048576",   # guards the lesson's device number: pinned host memory
]

LEARNED_FROM_REAL_WORLD_93 = {
    "cuda-oom": ["Qwen3 hits XPU out of memory at 32k context"],
    "engine-dead": [
        "multi-LoRA setup on 0.8 crashes during embedding requests",
        "the image in v2 died during prefill of long prompts",
        "the server on v1 crashes during chat requests",
    ],
    "nccl-failure": [
        "[Bug]: nccl broadcast timeout after upgrade",
        "NCCL INFO Call to connect returned Connection timed out, retrying",
    ],
    "http-error-status": ["每次调用都报错 Error code：429", "we keep getting a bad gateway from the proxy"],
}
HEALTHY_AFTER_REAL_WORLD_93 = [
    "if the replica crashes during inference, Serve restarts it",   # guards the lesson's crash during the work
    "loading libnccl allreduce error symbols",   # guards the lesson's operation after "nccl"
    "to avoid getting an internal server error, set a timeout",   # guards the lesson's phrase in lower case
    "Error code：4040 in the ticket list",   # guards the full-width colon's status
]

LEARNED_FROM_REAL_WORLD_94 = {
    "nccl-failure": [
        "running `all_gather_perf -b 8 -e 1G -g 8` hangs after the first size",
        "the alltoall_perf run on two nodes gets stuck at 64MB",
    ],
    "http-error-status": ["i keep getting the error of unauthorization 401 from the hub", "the proxy said bad gateway: 502 again"],
}
HEALTHY_AFTER_REAL_WORLD_94 = [
    "bugfix: fix core dumped when enabling speculative decoding",
    "Pass on service unavailable (503) from upstream servers to clients",   # guards the lesson's reason before its code
    "all_reduce_perf never hangs on this cluster",   # guards the lesson's nccl-tests binary
]

LEARNED_FROM_REAL_WORLD_95 = {
    "cuda-oom": [
        "the reranker says cuda is out of memory after a few batches",
        "ggml_vulkan: Device memory allocation of size 2147483648 failed.",
    ],
    "engine-dead": ["then it crashes when trying to allocate 512 MiB for the KV cache"],
    "http-error-status": ["2024-01-02T10:00:00 10.0.0.5:8000 502 POST /v1/embeddings HTTP/1.1 0"],
}
HEALTHY_AFTER_REAL_WORLD_95 = [
    "如果worker进程挂掉，服务会自动重启它",
    "当推理进程崩溃时，监控会发出告警",
]

LEARNED_FROM_REAL_WORLD_96 = {
    "engine-dead": [
        "WARNING - llama-box server for instance qwen is not running, pid 4120, restarting.",
        "EventType=BEX64",
        "[Serve] Actor crash when the client disconnects mid-stream",
    ],
    "nccl-failure": ["[Bug] NCCL Crash during allreduce on 16 GPUs"],
}
HEALTHY_AFTER_REAL_WORLD_96 = [
    "- update the worker to catch RuntimeError: CUDA error: out of memory and retry",
    "UF: Upstream connection failure in addition to 503 response code.",
    '+        err_type: str = "ServiceUnavailableError",',
    "The last line crashes and gives me the error :",
]

LEARNED_FROM_REAL_WORLD_97 = {
    "cuda-oom": ["llm-gpu-1: ggml-cuda.cu was out of memory again"],
    "engine-dead": [
        "the Ollama container threw a SIGABRT when built with CUDA",
        "Program terminated with signal SIGABRT, Aborted. It is fine when I pin 0.1.78",
    ],
    "nccl-failure": ["after two hours every rank is stuck in the all_gather"],
}
HEALTHY_AFTER_REAL_WORLD_97 = [
    "NCCL could hang (until timeout) when a worker raises",
    "training might hang in the allreduce if a rank dies",   # guards the lesson's hang in a collective
]

LEARNED_FROM_REAL_WORLD_98 = {
    "cuda-oom": ["restarting the handler twice ends in a cuda oom"],
    "engine-dead": ["[Bug] Pod boot loop after enabling the reranker", "the embedding container entered a bootloop"],
    "http-error-status": ["behind the new ingress we see lots of 502s from the gateway", "the upstream sees more 429s than 503 under load"],
}
HEALTHY_AFTER_REAL_WORLD_98 = [
    "That is not a GPU oom; the host ran out of RAM",   # guards the lesson's "oom" in lower case
    "+## 503 Service Unavailable",
    "with a tiny queue you will see lots of 429s",   # guards the lesson's plural statuses
]

LEARNED_FROM_REAL_WORLD_99 = {
    "cuda-oom": ["with two cards I end up with a GPU OoM during warm-up"],
    "engine-dead": ["Segmentation Fault When Using faiss on macOS"],
    "nccl-failure": ["reduce_scatter hangs after 20 hours", "Could not find NET with id 1"],
    "http-error-status": ["{ msg: 'Server is busy', type: 'service_unavailable' }"],
}
HEALTHY_AFTER_REAL_WORLD_99 = [
    "misc/rings.cu:319 NCCL WARN Could not create rings, falling back on simple ring.",
    "the server answers 200 instead of the appropriate 404 status code",
    "Raised the proxy timeouts to address issues with HTTP 504 errors on long calls",
    "we do not implement the proportional 503 responses when some backends are invalid",
]

LEARNED_FROM_REAL_WORLD_100: dict[str, list[str]] = {}   # its recall was 1.00 as collected
HEALTHY_AFTER_REAL_WORLD_100 = [
    "If a replica is down, the gateway should reply with a 503, not route to another model.",
    "it should never answer with 500 for a bad prompt",
]

LEARNED_FROM_REAL_WORLD_101 = {
    "engine-dead": [
        "Jul 09 16:33:22 host serve.sh[77306]: Process ForkProcess-2:",
        "nvidia-smi shows the inference process has ended and the VRAM is free again",
    ],
}
HEALTHY_AFTER_REAL_WORLD_101 = [
    "the main process exited normally after the benchmark",   # guards the lesson's ended process
    "wait until the server process has exited before restarting it",   # ... and its condition
]

LEARNED_FROM_REAL_WORLD_102 = {
    "engine-dead": [
        "$ ./text-embeddings-router --port 8080\n非法指令（核心已转储）",
        "(RayWorkerWrapper pid=812) The actor died because of an error raised in its creation task, "
        "ray::RayWorkerWrapper.__init__() (pid=812, ip=10.0.0.3)",
        "killing the model runner makes the backend become a zombie and every request after it hangs",
    ],
    "nccl-failure": [
        "Cuda failure 'invalid device ordinal' when starting with --tensor-parallel-size 8",
        "transport/p2p.cc:275 Cuda failure 1 'invalid argument'",
    ],
    "cuda-oom": ["[TRT] [E] Requested amount of GPU memory (8589934592 bytes) could not be allocated."],
}
HEALTHY_AFTER_REAL_WORLD_102 = [
    "ERROR: failed to solve: executor failed running [/bin/sh -c pip install -r requirements.txt]: exit code: 137",
    'ERROR: process "/bin/sh -c pip install torch" did not complete successfully: exit code: 137',
    "Rate limit exceeded handling for the Azure embeddings client",
    "OOMKilled refers to the kernel killing a container at its memory limit, not to GPU memory",
    "Cuda failure kernels.cu:42: 'invalid argument'",   # guards the lesson's quote right after the words
]

LEARNED_FROM_REAL_WORLD_103 = {
    "engine-dead": [
        "llama-worker-7d9f6c   0/1     Error     5 (2m ago)   11m",
        "running encode() makes the embedding pods crash with code 139",
    ],
    "http-error-status": [
        "azure.core.exceptions.HttpResponseError: Operation returned an invalid status 'Unauthorized'",
    ],
}
HEALTHY_AFTER_REAL_WORLD_103 = [
    "nvidia-cuda-validator-7ktzq   0/1     Init:CrashLoopBackOff   4 (90s ago)   6m",
    "building the wheel got killed while compiling flash-attn, so I gave docker more memory",
    "in drain mode the server terminates once all requests are completed",
    "Ray's advice: enable retry when the task crashes due to OOM (actors restart)",
    "the router remaps a full queue from `500 Internal` to a retryable `503` with a drop reason",
]
LEARNED_FROM_REAL_WORLD_104 = {
    "http-error-status": ["Error: The agent model failed to respond: 503 [503]: The model is overloaded"],
    "nccl-failure": [
        "node2:4411:4502 [3] NCCL INFO socketPollConnect: connect returned Connection refused, retrying (12/34) "
        "after sleep for 1200 msec",
    ],
}
HEALTHY_AFTER_REAL_WORLD_104 = [
    "not sure why the reranker stopped answering, maybe because of OOM, but nvidia-smi shows free memory",
    "the node answered 200 [200]: OK after the retry",   # guards the lesson's error statuses
]
LEARNED_FROM_REAL_WORLD_105 = {
    "engine-dead": [
        "Ollama server restart loop after upgrading to 0.5.1",
        "Jan: code: LlamaCppProcessError when loading Qwen3-8B",
        "after one bad image the worker Process Pool is left broken and every request fails",
        "the --v2 server produces a signal.cpp SIGSEV fault upon submission from the browser",
    ],
    "http-error-status": [
        "503 UF upstream_reset_before_response_started{connection_failure}",
        '404 "Model not found: llama3:70b, pull it first"',
    ],
    "nccl-failure": ["we keep hitting an NCCL issue when scaling the deployment to 16 GPUs"],
}
HEALTHY_AFTER_REAL_WORLD_105 = [
    "2025-01-16 11:02:44.357459 UTC worker started",   # guards the lesson's Envoy flags ("UT" then a comma or a space)
    '"GET /v1/models HTTP/1.1" 200 3415 "Python/3.11 aiohttp/3.12.15"',   # ... and its quoted message (words)
    "if you hit an NCCL issue, set NCCL_DEBUG=INFO and read the WARN lines",   # ... and its condition
]
LEARNED_FROM_REAL_WORLD_106 = {
    "http-error-status": [
        "mistral API Error: 422",
        "the client logs http status code : 502 for every retry",
    ],
    "cuda-oom": ["the worker died with out of memory and the log says the GPU memory is full"],
    "engine-dead": [
        "#4  0x00007f3a1c2b9a10 in ggml_abort () from /usr/lib/libggml-base.so",
        "ERROR 03-11 09:12:40 engine.py:387] FATAL ERROR :: MODULE:SYNHELPER Error, device acquire failed",
    ],
}
HEALTHY_AFTER_REAL_WORLD_106 = [
    "traps: gpustack_worker[208638] trap int3 ip:70f6f5934410 sp:70f69feca400 error:0 in _pydantic_core.so",
    "When it fails, what do you see, status code 504 or a timeout?",   # guards the lesson's question to the reporter
    "the slowdown might be due to another process on the GPU, resulting in an OOM error later",
    "OpenVINO compilation can take over 120s and cause crashes of the worker",
    "The collector pulls NCCL RAS status and exports dead ranks and NCCL errors to Prometheus",
]
LEARNED_FROM_REAL_WORLD_107 = {
    "nccl-failure": [
        "[rank0]: RuntimeError: OPS function error: HcclAllGather, error code is 7",
        "EI0006: [PID: 4411] 2025-05-01-10:00:02 Getting socket times out. Reason: Remote Rank did not send the data in time.",
        "llama-server aborts in NCCL on the first request with -sm row",
    ],
    "engine-dead": ["#3  0x00007f11aa0bb0da in std::terminate() () from /lib/x86_64-linux-gnu/libstdc++.so.6"],
    "cuda-oom": ["Error: Insufficient graphics memory to load this model"],
    "http-error-status": ["the gateway logged 312 requests with response_code=502 in an hour"],
}
HEALTHY_AFTER_REAL_WORLD_107 = [
    'n1:77:77 [0] init.cpp:120 NCCL WARN Missing "iommu=pt" from kernel command line which can lead to system instablity or hang!',
    "the new build works cleanly without throwing 429 errors under load",
    "if the worker aborts in NCCL during startup, set NCCL_DEBUG=INFO",   # guards the lesson's condition
]
LEARNED_FROM_REAL_WORLD_108 = {
    "engine-dead": [
        "[2024-03-02 10:11:12] root   INFO    : Embeddings process didn't exit. Force killing...",
        "the predictor's kserve-container is giving core-dump on executing the curl call",
        "panic: unable to load model: /root/.ollama/models/blobs/sha256-6a0746a1ec1a",
    ],
    "cuda-oom": ["[ERROR] [runtime.run:104] Caught CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.65 GiB total)"],
}
HEALTHY_AFTER_REAL_WORLD_108 = [
    "gpu7:5591:5591 [3] misc/cudawrap.cc:90 NCCL WARN Failed to find CUDA library in (null) (NCCL_CUDA_PATH=(null))",
    "enable cpu_offload so the 70B model loads without seeing an OOM error",
    "While the server is loading, /health returns 503 and /v1/models returns 200",
]
LEARNED_FROM_REAL_WORLD_109 = {
    "cuda-oom": [
        "[HAMI-core ERROR (pid:88 thread=1403 allocator.c:53)]: Device 1 OOM 8589934592 / 8388608000",
        "部署的embedding服务经常挂，显存报错如下",
        "How to fix CUDA out of memory when serving llama",   # guards the lesson's change titles (a question reports one)
    ],
    "http-error-status": ["WARNING:tornado.access:429 POST /predict (10.0.0.7) 3.21ms"],
    "engine-dead": ["reranker    Restarting (139) 4 seconds ago"],
}
HEALTHY_AFTER_REAL_WORLD_109 = [
    "Cut peak memory, fix VRAM OOMs on 8 GB cards and speed up loading",
    "We should add some tests to ensure the GPU is released when the engine crashed.",
    "Stop reporting a warming-up model as 404 Not Found",
]
LEARNED_FROM_REAL_WORLD_110 = {
    "engine-dead": [
        "[launch.py:434:sigkill_handler] ['python', '-m', 'mii.launch.multi_gpu_server'] exits with return code = -11",
        "RuntimeError: The Inner error is reported as above. The process exits for this inner error.",
        "halfway through loading the weights the Pod dies without any message",
        "the reranker crash after 20 minutes under load",
        "a malformed wav is causing a core-dump in whisper-server",
    ],
    "cuda-oom": ["the app says insufficient graphic memory when the large model loads"],
}
HEALTHY_AFTER_REAL_WORLD_110 = [
    "when it runs out of memory, either the pod crashes or it is left Completed",   # guards the lesson's pod deaths
]
LEARNED_FROM_REAL_WORLD_111 = {
    "engine-dead": [
        "whisper-asr-webservice > Exited with code 139",
        "long prompts fill the VRAM and make it crash within minutes",
        "The TTS server fails seconds after starting.",
        "vllm serve on 4 nodes: EngineCore initialization failed after loading weights",
    ],
    "nccl-failure": [
        "WorkNCCL(SeqNum=88, OpType=ALLGATHER, Timeout(ms)=600000) ran for 600412 milliseconds before timing out",
        "tp=4 fails with NCCL TCPStore connection reset on the second node",
    ],
    "cuda-oom": ["embedding server: failed 3.2 GiB CUDA alloc for the batch, request dropped"],
}
HEALTHY_AFTER_REAL_WORLD_111 = [
    "The gateway rejects requests over 10 MB with HTTP 413 before forwarding them.",
    "Upstream HTTP 413 is mapped to a client 400 instead of Internal 500.",   # guards the lesson's mapping
]
LEARNED_FROM_REAL_WORLD_112 = {
    "engine-dead": [
        "memory climbs past 100GB and then the runner OOMs; exo relaunches it",
        "(LLMRayActor pid=4410) The actor died because of an error raised in its creation task, ray::LLMRayActor.__init__()",
    ],
    "http-error-status": ["[Nest] 1  - 07/16/2026  WARN [HttpErrors] 502 POST /v1/chat/completions 31ms ip=10.0.0.4"],
    "nccl-failure": ["System error in ncclCommInitRankConfig on the second node (NCCL 2.21.5)"],
}
HEALTHY_AFTER_REAL_WORLD_112 = [
    "Change the 502 response code in proxy.lua to 503 when no upstream is healthy",
    "The 500 response code represents a bug in the server, so a missing upstream should not use it",
    "That error simply means you ran out of memory on your computer while loading the embeddings",
]
LEARNED_FROM_REAL_WORLD_113 = {
    "engine-dead": [
        "after the upgrade the workers exit with code 1 right after loading the model",
        "the frontend and the API exit with status code 3",
        "模型服务跑了一晚上之后自己停了",
        "(ModelActor pid=1201) what():  CUDA failed with error misaligned address",
        "(Transcriber pid=42) /opt/ray/_raylet.so(+0xfee3d8) [0x7f9fd42263d8] ray::TerminateHandler()",
    ],
    "nccl-failure": ["tensor parallel across nodes fails with `ibv_reg_mr failed with error 14` on the second node"],
    "cuda-oom": ["跑到第三轮就爆显存了", "batch调大以后直接炸了显存"],
}
HEALTHY_AFTER_REAL_WORLD_113 = [
    'detail = "Rate limit exceeded for model {}".format(model)',
    "Add a Retry-After header to every 429 response",
    "rename ServiceUnavailableError to APIUnavailableError",
    "We don't believe this is a CUDA OOM issue since the card has 20 GB free",
    "Mitigate GPU out of memory errors when batching long documents",
    "防止爆显存，把batch_size调小",   # guards the lesson's verb before the GPU's memory
    "服务停止以后重新加载模型",   # ... and its stop by itself (a stop alone is a shutdown)
    "the workers exit with code 0 once drained",   # ... and its failing code
]

LEARNED_FROM_REAL_WORLD_114 = {
    "engine-dead": [
        "the inference pod keeps failing after the upgrade and never becomes ready",
        "our replicas keep failing with the new image",
        "[core] nightly benchmarks occasionally crash with segfault or bus error",
    ],
    "cuda-oom": ["CUDA Error out of memory when loading the 70B model"],
}
HEALTHY_AFTER_REAL_WORLD_114 = [
    "    status_code=503, detail=\"model is still loading\",",
    "This policy will retry twice and return a 504 if the upstream never answers",
    "- Added HTTP 502 error handling to the proxy routes",
    "It is perhaps an issue of running out of GPU memory, but nvidia-smi shows 30 GB free",
    "if the pod keeps failing, describe it and read its events",   # guards the lesson's condition
    "the trainer pods keep failing after the etcd restart",   # ... and a training job's pods
]

LEARNED_FROM_REAL_WORLD_115 = {
    "engine-dead": [
        "after a while the server fails with core dump",
        "Dump file: C:\\Users\\me\\AppData\\Local\\CrashDumps\\ollama_llama_server.exe.8812.dmp",
        "it just crashes without notification",
        "长时间运行后 EngineCore异常退出",
    ],
    "nccl-failure": [
        "NCCL communications fail between the two GPUs",
        "[ERROR] hccl fftsplus task timeout occurred during task execution, stream_id:3",
    ],
}
HEALTHY_AFTER_REAL_WORLD_115 = [
    "Pass wait_for_model=true to block instead of getting a 503 while the model loads",
    "if you get a 429, back off and retry after the Retry-After seconds",
    "if it crashes with a core dump, attach the backtrace",   # guards the lesson's condition
    "if NCCL communications fail, set NCCL_DEBUG=INFO",   # ... and NCCL's
]

LEARNED_FROM_REAL_WORLD_116 = {
    "engine-dead": [
        "with long audio I get a segmentation fault every time",
        "the desktop app unexpectedly terminates when the download finishes",
        "GPT-J crashes oobabooga when called through the API",
    ],
    "http-error-status": ['{"upstreamHost":"10.0.0.7:8000","responseCode":"502","duration":"12"}'],
    "nccl-failure": ["三台机器都卡在nccl初始化，一直没有输出"],
    "cuda-oom": [
        "after a few batches the reranker starts to throw OOM on the A10",
        'the embed call failed with an "out of memory" error on the 8 GB card',
    ],
}
HEALTHY_AFTER_REAL_WORLD_116 = [
    "**Fix the error body when returning 502**",
    "Add 429 Too Many Requests response when the queue is full",
    "the websocket connection unexpectedly terminated, reconnecting",   # guards the lesson's connection that ends
    "if you get a segmentation fault, run it under gdb",   # ... and its condition
    "a bad request could crash oobabooga",   # ... and what may happen
    "large inputs may throw OOM on small cards",   # ... and what may come
]

LEARNED_FROM_REAL_WORLD_117 = {
    "engine-dead": [
        "after the upgrade the prefill pods crash-loop on start",
        "the container starts and then exits 139 without a message",
    ],
    "http-error-status": ["the app shows 'internal server error' when I upload a PDF"],
    "nccl-failure": ["ncclAllGather Error with tp=4 on two MI250 nodes"],
}
HEALTHY_AFTER_REAL_WORLD_117 = [
    "把 torch.OutofMemoryError 改为 torch.cuda.OutOfMemoryError",
    "if the pods crash-loop, check the events",   # guards the lesson's condition
]

LEARNED_FROM_REAL_WORLD_118 = {
    "engine-dead": [
        "dependency failed to start: container tei-embedding-server exited (137)",
        "selecting the 13B model gives an instant crash with nothing in the console",
        "加载模型后出现段错误",
    ],
    "http-error-status": [
        "调用embedding接口时服务端抛出502",
        "接口错误HTTP503，换端口也一样",
        '  "errorCode": 503,',
        '"message": "<400> InvalidParameter.Length: input too long"',
    ],
    "nccl-failure": ["nccl initialization fails on the second pod"],
}
HEALTHY_AFTER_REAL_WORLD_118 = [
    "退出码为0，进程退出逻辑正常",
    "Large batches can cause out of GPU memory errors on 16 GB cards",
    "maps `ERROR_UNAVAILABLE` (HTTP 503 / gRPC UNAVAILABLE) and `ERROR_INTERNAL` (HTTP 500 / gRPC INTERNAL)",
    "this avoids an immediate crash when the model file is missing",   # guards the lesson's crash avoided
    "dependency started: container redis exited (0)",   # ... and its failing code
]

LEARNED_FROM_REAL_WORLD_119 = {
    "engine-dead": ["It exits with code 2 as soon as the model loads"],
    "http-error-status": ["2024-05-02 10:11:02 [ERROR] embeddings: Internal server error"],
    "nccl-failure": ["Call to ibv_reg_mr failed with error Bad address"],
    "cuda-oom": ["Device memory allocation of size 4294967296 failed."],
}
HEALTHY_AFTER_REAL_WORLD_119 = [
    "when it exits with code 1, the supervisor restarts it",   # guards the lesson's condition
]


def test_the_tokenizer_named_as_hugging_faces_is_the_tokenizers_beside_pyo3() -> None:
    line = "under load the shared HF tokenizer's Rust backend (PyO3 `RefCell`) raises `RuntimeError: Already borrowed`"
    assert scan(line) == {"tokenizer-already-borrowed": "high"}


def test_an_object_of_a_package_that_holds_the_tokenizer_is_the_tokenizers() -> None:
    assert scan("sharing one `vllm.LLM` between request threads raises `RuntimeError: Already borrowed`") == {
        "tokenizer-already-borrowed": "high"
    }


# Each round's table: the lines of each class it must find, and the healthy lines it must leave alone. One pair of
# tests reads them all, so a new round is a table, not two more functions.
ROUNDS = {
    "written before real-world-9": (WRITTEN_BEFORE_REAL_WORLD_9, HEALTHY_BEFORE_REAL_WORLD_9),
    "learned from real-world-9": (LEARNED_FROM_REAL_WORLD_9, HEALTHY_AFTER_REAL_WORLD_9),
    "learned from real-world-10": (LEARNED_FROM_REAL_WORLD_10, HEALTHY_AFTER_REAL_WORLD_10),
    "written before real-world-11": (WRITTEN_BEFORE_REAL_WORLD_11, HEALTHY_BEFORE_REAL_WORLD_11),
    "learned from real-world-11": (LEARNED_FROM_REAL_WORLD_11, HEALTHY_AFTER_REAL_WORLD_11),
    "written before real-world-12": (WRITTEN_BEFORE_REAL_WORLD_12, HEALTHY_BEFORE_REAL_WORLD_12),
    "learned from real-world-12": (LEARNED_FROM_REAL_WORLD_12, HEALTHY_AFTER_REAL_WORLD_12),
    "learned from real-world-13": (LEARNED_FROM_REAL_WORLD_13, HEALTHY_AFTER_REAL_WORLD_13),
    "learned from real-world-14": (LEARNED_FROM_REAL_WORLD_14, HEALTHY_AFTER_REAL_WORLD_14),
    "written before real-world-15": (WRITTEN_BEFORE_REAL_WORLD_15, HEALTHY_BEFORE_REAL_WORLD_15),
    "learned from real-world-15": (LEARNED_FROM_REAL_WORLD_15, HEALTHY_AFTER_REAL_WORLD_15),
    "learned from real-world-16": (LEARNED_FROM_REAL_WORLD_16, HEALTHY_AFTER_REAL_WORLD_16),
    "learned from real-world-17": (LEARNED_FROM_REAL_WORLD_17, HEALTHY_AFTER_REAL_WORLD_17),
    "learned from real-world-18": (LEARNED_FROM_REAL_WORLD_18, HEALTHY_AFTER_REAL_WORLD_18),
    "learned from real-world-19": (LEARNED_FROM_REAL_WORLD_19, HEALTHY_AFTER_REAL_WORLD_19),
    "learned from real-world-20": (LEARNED_FROM_REAL_WORLD_20, HEALTHY_AFTER_REAL_WORLD_20),
    "written before real-world-21": (WRITTEN_BEFORE_REAL_WORLD_21, HEALTHY_BEFORE_REAL_WORLD_21),
    "learned from real-world-21": (LEARNED_FROM_REAL_WORLD_21, HEALTHY_AFTER_REAL_WORLD_21),
    "written before real-world-22": (WRITTEN_BEFORE_REAL_WORLD_22, HEALTHY_BEFORE_REAL_WORLD_22),
    "learned from real-world-22": (LEARNED_FROM_REAL_WORLD_22, HEALTHY_AFTER_REAL_WORLD_22),
    "learned from real-world-23": (LEARNED_FROM_REAL_WORLD_23, HEALTHY_AFTER_REAL_WORLD_23),
    "learned from real-world-24": (LEARNED_FROM_REAL_WORLD_24, HEALTHY_AFTER_REAL_WORLD_24),
    "learned from real-world-25": (LEARNED_FROM_REAL_WORLD_25, HEALTHY_AFTER_REAL_WORLD_25),
    "learned from real-world-26": (LEARNED_FROM_REAL_WORLD_26, HEALTHY_AFTER_REAL_WORLD_26),
    "learned from real-world-27": (LEARNED_FROM_REAL_WORLD_27, HEALTHY_AFTER_REAL_WORLD_27),
    "learned from real-world-28": (LEARNED_FROM_REAL_WORLD_28, HEALTHY_AFTER_REAL_WORLD_28),
    "written before real-world-29": (WRITTEN_BEFORE_REAL_WORLD_29, HEALTHY_BEFORE_REAL_WORLD_29),
    "learned from real-world-29": (LEARNED_FROM_REAL_WORLD_29, HEALTHY_AFTER_REAL_WORLD_29),
    "learned from real-world-30": (LEARNED_FROM_REAL_WORLD_30, HEALTHY_AFTER_REAL_WORLD_30),
    "written before real-world-31": (WRITTEN_BEFORE_REAL_WORLD_31, HEALTHY_BEFORE_REAL_WORLD_31),
    "learned from real-world-31": (LEARNED_FROM_REAL_WORLD_31, HEALTHY_AFTER_REAL_WORLD_31),
    "learned from real-world-32": (LEARNED_FROM_REAL_WORLD_32, HEALTHY_AFTER_REAL_WORLD_32),
    "learned from real-world-33": (LEARNED_FROM_REAL_WORLD_33, HEALTHY_AFTER_REAL_WORLD_33),
    "learned from real-world-34": (LEARNED_FROM_REAL_WORLD_34, HEALTHY_AFTER_REAL_WORLD_34),
    "learned from real-world-35": (LEARNED_FROM_REAL_WORLD_35, HEALTHY_AFTER_REAL_WORLD_35),
    "learned from real-world-36": (LEARNED_FROM_REAL_WORLD_36, HEALTHY_AFTER_REAL_WORLD_36),
    "learned from real-world-37": (LEARNED_FROM_REAL_WORLD_37, HEALTHY_AFTER_REAL_WORLD_37),
    "learned from real-world-38": (LEARNED_FROM_REAL_WORLD_38, HEALTHY_AFTER_REAL_WORLD_38),
    "learned from real-world-39": (LEARNED_FROM_REAL_WORLD_39, HEALTHY_AFTER_REAL_WORLD_39),
    "learned from real-world-40": (LEARNED_FROM_REAL_WORLD_40, HEALTHY_AFTER_REAL_WORLD_40),
    "learned from real-world-41": (LEARNED_FROM_REAL_WORLD_41, HEALTHY_AFTER_REAL_WORLD_41),
    "learned from real-world-42": (LEARNED_FROM_REAL_WORLD_42, HEALTHY_AFTER_REAL_WORLD_42),
    "learned from real-world-43": (LEARNED_FROM_REAL_WORLD_43, HEALTHY_AFTER_REAL_WORLD_43),
    "learned from real-world-44": (LEARNED_FROM_REAL_WORLD_44, HEALTHY_AFTER_REAL_WORLD_44),
    "learned from real-world-45": (LEARNED_FROM_REAL_WORLD_45, HEALTHY_AFTER_REAL_WORLD_45),
    "learned from real-world-46": (LEARNED_FROM_REAL_WORLD_46, HEALTHY_AFTER_REAL_WORLD_46),
    "learned from real-world-47": (LEARNED_FROM_REAL_WORLD_47, HEALTHY_AFTER_REAL_WORLD_47),
    "learned from real-world-48": (LEARNED_FROM_REAL_WORLD_48, HEALTHY_AFTER_REAL_WORLD_48),
    "learned from real-world-49": (LEARNED_FROM_REAL_WORLD_49, HEALTHY_AFTER_REAL_WORLD_49),
    "learned from real-world-50": (LEARNED_FROM_REAL_WORLD_50, HEALTHY_AFTER_REAL_WORLD_50),
    "learned from real-world-51": (LEARNED_FROM_REAL_WORLD_51, HEALTHY_AFTER_REAL_WORLD_51),
    "learned from real-world-52": (LEARNED_FROM_REAL_WORLD_52, HEALTHY_AFTER_REAL_WORLD_52),
    "learned from real-world-53": (LEARNED_FROM_REAL_WORLD_53, HEALTHY_AFTER_REAL_WORLD_53),
    "learned from real-world-54": (LEARNED_FROM_REAL_WORLD_54, HEALTHY_AFTER_REAL_WORLD_54),
    "learned from real-world-55": (LEARNED_FROM_REAL_WORLD_55, HEALTHY_AFTER_REAL_WORLD_55),
    "learned from real-world-56": (LEARNED_FROM_REAL_WORLD_56, HEALTHY_AFTER_REAL_WORLD_56),
    "learned from real-world-57": (LEARNED_FROM_REAL_WORLD_57, HEALTHY_AFTER_REAL_WORLD_57),
    "learned from real-world-58": (LEARNED_FROM_REAL_WORLD_58, HEALTHY_AFTER_REAL_WORLD_58),
    "learned from real-world-59": (LEARNED_FROM_REAL_WORLD_59, HEALTHY_AFTER_REAL_WORLD_59),
    "learned from real-world-60": (LEARNED_FROM_REAL_WORLD_60, HEALTHY_AFTER_REAL_WORLD_60),
    "learned from real-world-61": (LEARNED_FROM_REAL_WORLD_61, HEALTHY_AFTER_REAL_WORLD_61),
    "learned from real-world-62": (LEARNED_FROM_REAL_WORLD_62, HEALTHY_AFTER_REAL_WORLD_62),
    "learned from real-world-63": (LEARNED_FROM_REAL_WORLD_63, HEALTHY_AFTER_REAL_WORLD_63),
    "learned from real-world-64": (LEARNED_FROM_REAL_WORLD_64, HEALTHY_AFTER_REAL_WORLD_64),
    "learned from real-world-65": (LEARNED_FROM_REAL_WORLD_65, HEALTHY_AFTER_REAL_WORLD_65),
    "learned from real-world-66": (LEARNED_FROM_REAL_WORLD_66, HEALTHY_AFTER_REAL_WORLD_66),
    "learned from real-world-67": (LEARNED_FROM_REAL_WORLD_67, HEALTHY_AFTER_REAL_WORLD_67),
    "learned from real-world-68": (LEARNED_FROM_REAL_WORLD_68, HEALTHY_AFTER_REAL_WORLD_68),
    "learned from real-world-69": (LEARNED_FROM_REAL_WORLD_69, HEALTHY_AFTER_REAL_WORLD_69),
    "learned from real-world-70": (LEARNED_FROM_REAL_WORLD_70, HEALTHY_AFTER_REAL_WORLD_70),
    "learned from real-world-71": (LEARNED_FROM_REAL_WORLD_71, HEALTHY_AFTER_REAL_WORLD_71),
    "learned from real-world-72": (LEARNED_FROM_REAL_WORLD_72, HEALTHY_AFTER_REAL_WORLD_72),
    "learned from real-world-73": (LEARNED_FROM_REAL_WORLD_73, HEALTHY_AFTER_REAL_WORLD_73),
    "learned from real-world-74": (LEARNED_FROM_REAL_WORLD_74, HEALTHY_AFTER_REAL_WORLD_74),
    "learned from real-world-75": (LEARNED_FROM_REAL_WORLD_75, HEALTHY_AFTER_REAL_WORLD_75),
    "learned from real-world-76": (LEARNED_FROM_REAL_WORLD_76, HEALTHY_AFTER_REAL_WORLD_76),
    "learned from real-world-77": (LEARNED_FROM_REAL_WORLD_77, HEALTHY_AFTER_REAL_WORLD_77),
    "learned from real-world-78": (LEARNED_FROM_REAL_WORLD_78, HEALTHY_AFTER_REAL_WORLD_78),
    "learned from real-world-79": (LEARNED_FROM_REAL_WORLD_79, HEALTHY_AFTER_REAL_WORLD_79),
    "learned from real-world-80": (LEARNED_FROM_REAL_WORLD_80, HEALTHY_AFTER_REAL_WORLD_80),
    "learned from real-world-81": (LEARNED_FROM_REAL_WORLD_81, HEALTHY_AFTER_REAL_WORLD_81),
    "learned from real-world-82": (LEARNED_FROM_REAL_WORLD_82, HEALTHY_AFTER_REAL_WORLD_82),
    "learned from real-world-83": (LEARNED_FROM_REAL_WORLD_83, HEALTHY_AFTER_REAL_WORLD_83),
    "learned from real-world-84": (LEARNED_FROM_REAL_WORLD_84, HEALTHY_AFTER_REAL_WORLD_84),
    "learned from real-world-85": (LEARNED_FROM_REAL_WORLD_85, HEALTHY_AFTER_REAL_WORLD_85),
    "learned from real-world-86": (LEARNED_FROM_REAL_WORLD_86, HEALTHY_AFTER_REAL_WORLD_86),
    "learned from real-world-87": (LEARNED_FROM_REAL_WORLD_87, HEALTHY_AFTER_REAL_WORLD_87),
    "learned from real-world-88": (LEARNED_FROM_REAL_WORLD_88, HEALTHY_AFTER_REAL_WORLD_88),
    "learned from real-world-89": (LEARNED_FROM_REAL_WORLD_89, HEALTHY_AFTER_REAL_WORLD_89),
    "learned from real-world-90": (LEARNED_FROM_REAL_WORLD_90, HEALTHY_AFTER_REAL_WORLD_90),
    "learned from real-world-91": (LEARNED_FROM_REAL_WORLD_91, HEALTHY_AFTER_REAL_WORLD_91),
    "learned from real-world-92": (LEARNED_FROM_REAL_WORLD_92, HEALTHY_AFTER_REAL_WORLD_92),
    "learned from real-world-93": (LEARNED_FROM_REAL_WORLD_93, HEALTHY_AFTER_REAL_WORLD_93),
    "learned from real-world-94": (LEARNED_FROM_REAL_WORLD_94, HEALTHY_AFTER_REAL_WORLD_94),
    "learned from real-world-95": (LEARNED_FROM_REAL_WORLD_95, HEALTHY_AFTER_REAL_WORLD_95),
    "learned from real-world-96": (LEARNED_FROM_REAL_WORLD_96, HEALTHY_AFTER_REAL_WORLD_96),
    "learned from real-world-97": (LEARNED_FROM_REAL_WORLD_97, HEALTHY_AFTER_REAL_WORLD_97),
    "learned from real-world-98": (LEARNED_FROM_REAL_WORLD_98, HEALTHY_AFTER_REAL_WORLD_98),
    "learned from real-world-99": (LEARNED_FROM_REAL_WORLD_99, HEALTHY_AFTER_REAL_WORLD_99),
    "learned from real-world-100": (LEARNED_FROM_REAL_WORLD_100, HEALTHY_AFTER_REAL_WORLD_100),
    "learned from real-world-101": (LEARNED_FROM_REAL_WORLD_101, HEALTHY_AFTER_REAL_WORLD_101),
    "learned from real-world-102": (LEARNED_FROM_REAL_WORLD_102, HEALTHY_AFTER_REAL_WORLD_102),
    "learned from real-world-103": (LEARNED_FROM_REAL_WORLD_103, HEALTHY_AFTER_REAL_WORLD_103),
    "learned from real-world-104": (LEARNED_FROM_REAL_WORLD_104, HEALTHY_AFTER_REAL_WORLD_104),
    "learned from real-world-105": (LEARNED_FROM_REAL_WORLD_105, HEALTHY_AFTER_REAL_WORLD_105),
    "learned from real-world-106": (LEARNED_FROM_REAL_WORLD_106, HEALTHY_AFTER_REAL_WORLD_106),
    "learned from real-world-107": (LEARNED_FROM_REAL_WORLD_107, HEALTHY_AFTER_REAL_WORLD_107),
    "learned from real-world-108": (LEARNED_FROM_REAL_WORLD_108, HEALTHY_AFTER_REAL_WORLD_108),
    "learned from real-world-109": (LEARNED_FROM_REAL_WORLD_109, HEALTHY_AFTER_REAL_WORLD_109),
    "learned from real-world-110": (LEARNED_FROM_REAL_WORLD_110, HEALTHY_AFTER_REAL_WORLD_110),
    "learned from real-world-111": (LEARNED_FROM_REAL_WORLD_111, HEALTHY_AFTER_REAL_WORLD_111),
    "learned from real-world-112": (LEARNED_FROM_REAL_WORLD_112, HEALTHY_AFTER_REAL_WORLD_112),
    "learned from real-world-113": (LEARNED_FROM_REAL_WORLD_113, HEALTHY_AFTER_REAL_WORLD_113),
    "learned from real-world-114": (LEARNED_FROM_REAL_WORLD_114, HEALTHY_AFTER_REAL_WORLD_114),
    "learned from real-world-115": (LEARNED_FROM_REAL_WORLD_115, HEALTHY_AFTER_REAL_WORLD_115),
    "learned from real-world-116": (LEARNED_FROM_REAL_WORLD_116, HEALTHY_AFTER_REAL_WORLD_116),
    "learned from real-world-117": (LEARNED_FROM_REAL_WORLD_117, HEALTHY_AFTER_REAL_WORLD_117),
    "learned from real-world-118": (LEARNED_FROM_REAL_WORLD_118, HEALTHY_AFTER_REAL_WORLD_118),
    "learned from real-world-119": (LEARNED_FROM_REAL_WORLD_119, HEALTHY_AFTER_REAL_WORLD_119),
}


@pytest.mark.parametrize(
    ("problem", "line"),
    [pytest.param(p, line, id=f"{r}-{p}-{line}") for r, (found, _) in ROUNDS.items() for p, lines in found.items()
     for line in lines],
)
def test_a_line_of_each_rounds_classes_is_found(problem: str, line: str) -> None:
    assert problem in scan(line), line


@pytest.mark.parametrize(
    "line", [pytest.param(line, id=f"{r}-{line}") for r, (_, healthy) in ROUNDS.items() for line in healthy]
)
def test_the_near_misses_of_each_rounds_classes_give_nothing(line: str) -> None:
    assert scan(line) == {}, line
