"""What scan reads around the signatures: the server's configuration and start-up phase, hangs, confidence,
tracebacks that lost their indentation, and the cause of an engine death."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from borrowguard.doctor import read_snapshot
from borrowguard.doctor.source import with_server_log
from borrowguard.scan import Scanner, ScanResult
from borrowguard.scan.startup import Phase, StartupWatch

REAL = Path(__file__).parents[1] / "fixtures" / "logs" / "real-world"

STARTUP_019 = [
    "(APIServer pid=1) INFO 11-30 10:20:26 [api_server.py:1880] vLLM API server version 0.19.1",
    "(APIServer pid=1) INFO 11-30 10:20:26 [utils.py:326] non-default args: {'model_tag': 'Qwen/Qwen2.5-VL-3B', "
    "'model': 'Qwen/Qwen2.5-VL-3B', 'max_model_len': 2048, 'max_num_seqs': 16, 'renderer_num_workers': 2, "
    "'structured_outputs_config': StructuredOutputsConfig(backend='guidance', disable_fallback=False)}",
]


def both(lines: list[str]) -> list[ScanResult]:
    bulk = Scanner()
    bulk.scan_stream(io.BytesIO("".join(line + "\n" for line in lines).encode()), "x")
    line = Scanner()
    for text in lines:
        line.feed(text, "x")
    line.finish()
    return [bulk.result(), line.result()]


def ids(result: ScanResult) -> dict[str, tuple[int, str]]:
    return {f.id: (f.count, f.confidence.value) for f in result.findings}


# ---- server configuration -------------------------------------------------------------------------


def test_configuration_from_the_start_up_lines() -> None:
    for result in both(STARTUP_019):
        assert result.server is not None
        assert result.server.to_dict() == {
            "vllm_version": "0.19.1",
            "model": "Qwen/Qwen2.5-VL-3B",
            "max_model_len": 2048,
            "tensor_parallel_size": 1,  # the server lists its non-default args: absent means the default
            "pipeline_parallel_size": 1,
            "max_num_seqs": 16,
            "renderer_num_workers": 2,
            "structured_outputs_backend": "guidance",
        }
        assert result.to_dict()["server"]["renderer_num_workers"] == 2
        assert result.findings == []


def test_old_formats_and_the_engine_config_line() -> None:
    watch = StartupWatch()
    watch.observe(
        "args: Namespace(host=None, port=8000, model='/models/llama', tensor_parallel_size=4, "
        "guided_decoding_backend='xgrammar', max_num_seqs=256)"
    )
    watch.observe("Initializing an LLM engine (v0.5.2) with config: model='/models/llama', max_seq_len=4096, "
                  "tensor_parallel_size=2, pipeline_parallel_size=1")
    config = watch.config()
    assert config is not None
    # the engine's own config line corrects what the arguments said
    assert (config.vllm_version, config.tensor_parallel_size, config.max_model_len) == ("0.5.2", 2, 4096)
    assert (config.max_num_seqs, config.structured_outputs_backend) == (256, "xgrammar")
    assert StartupWatch().config() is None


def test_phases() -> None:
    watch = StartupWatch()
    assert watch.observe("hello") is None
    assert watch.observe("vLLM API server version 0.21.0") is Phase.BEGIN
    assert watch.observe("Loading weights took 3.2 seconds") is Phase.PROGRESS
    assert watch.observe("INFO:     Application startup complete.") is Phase.READY


def test_a_cut_args_line_still_gives_what_it_holds() -> None:
    watch = StartupWatch()
    watch.observe("non-default args: {'model': '/m', 'max_model_len': 2048, 'quantization': 'ascend', 'tensor_para")
    config = watch.config()
    assert config is not None and (config.model, config.max_model_len) == ("/m", 2048)


def test_the_servers_settings_choose_the_vllm_rules_in_the_chain() -> None:
    borrowed = "(APIServer pid=1) ERROR 11-30 10:21:00 [serving.py:1] RuntimeError: Already borrowed"
    (result, _) = both([*STARTUP_019, borrowed])
    env = [s.id for s in result.chain if s.role == "environment"]
    assert env == ["tokenizers-borrow-race", "vllm-bad-words-race", "vllm-renderer-workers-race"]
    one_worker = [line.replace("'renderer_num_workers': 2, ", "") for line in STARTUP_019]
    (result, _) = both([*one_worker, borrowed])
    assert [s.id for s in result.chain if s.role == "environment"] == ["tokenizers-borrow-race", "vllm-bad-words-race"]
    (result, _) = both([borrowed])  # no start-up lines: no version-specific rule is claimed
    assert [s.id for s in result.chain if s.role == "environment"] == ["tokenizers-borrow-race"]


@pytest.mark.slow
def test_doctor_reads_the_servers_settings_from_its_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("\n".join(STARTUP_019) + "\n")
    snap = read_snapshot(Path(__file__).parents[1] / "fixtures" / "doctor" / "vllm-collect-env-gb200.txt")
    snap = with_server_log(snap, str(log))
    assert snap.server["renderer_num_workers"] == 2
    assert any("server facts from" in n for n in snap.notes)
    proc = subprocess.run(
        [sys.executable, "-m", "borrowguard", "doctor", "--json", "--log", str(log), "--from",
         str(Path(__file__).parents[1] / "fixtures" / "doctor" / "vllm-collect-env-gb200.txt")],
        capture_output=True, text=True, timeout=120,
    )
    doc = json.loads(proc.stdout)
    race = next(f for f in doc["findings"] if f["id"] == "vllm-renderer-workers-race")
    assert race["severity"] == "warning" and "renderer_num_workers 2 (>=2)" in race["evidence"]
    assert doc["environment"]["server"]["renderer_num_workers"] == 2


# ---- start-up: shm stalls while compiling are not hangs; stalls and nothing else are -----------------------------

SHM = "(EngineCore pid=1) INFO 05-20 20:35:51 [shm_broadcast.py:681] No available shared memory broadcast block found in 60 seconds."
COMPILE = "(Worker_TP0 pid=2) INFO 05-20 20:36:19 [backends.py:1148] torch.compile takes 88.0 s in total"
READY = "(APIServer pid=3) INFO:     Application startup complete."


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ([SHM, COMPILE, SHM], {}),  # held back, then the server turned out to be starting
        ([STARTUP_019[0], SHM, COMPILE, SHM], {}),  # starting, busy between the stalls
        ([STARTUP_019[0], SHM, SHM, COMPILE], {}),  # starting, slow: its progress came after
        ([STARTUP_019[0], SHM, SHM, READY], {}),  # ... and it became ready
        # starting, then nothing but stalls (real-world-86: graph capture that never proceeds); and a restart after it
        ([STARTUP_019[0], SHM, SHM], {"shm-broadcast-stall": (1, "high")}),
        ([STARTUP_019[0], SHM, SHM, SHM, STARTUP_019[0]], {"shm-broadcast-stall": (2, "high")}),
        ([READY, SHM, SHM], {"shm-broadcast-stall": (2, "high")}),  # serving
        ([SHM, SHM], {"shm-broadcast-stall": (2, "high")}),  # no start-up lines at all: counted at the end
        ([SHM, *["x"] * 600, COMPILE], {"shm-broadcast-stall": (1, "high")}),  # long before: counted
        ([READY, SHM, STARTUP_019[0], SHM], {"shm-broadcast-stall": (1, "high")}),  # a restart after a stall
    ],
)
def test_stalls_during_start_up_are_not_reported(lines: list[str], expected: dict) -> None:
    for result in both(lines):
        assert ids(result) == expected


def test_held_back_occurrences_reach_follow_mode_once_settled() -> None:
    sc = Scanner()
    assert sc.feed(SHM) == []  # held back: the server may still be starting
    assert [f.id for f in sc.result().findings] == ["shm-broadcast-stall"]  # a report counts it as at the end
    hits = []
    for _ in range(500):
        hits += sc.feed("INFO 05-20 20:36:00 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s")
    assert [h.id for h in hits] == ["shm-broadcast-stall"]


# ---- hangs at NCCL init ----------------------------------------------------------------------------

NCCL_INIT = [
    "(Worker pid=820) INFO 08-09 20:55:03 [pynccl.py:113] vLLM is using nccl==2.28.9",
    "host:820:820 [0] NCCL INFO Bootstrap: Using lo:127.0.0.1<0>",
    "host:820:820 NCCL CALL ncclGetUniqueId(0xa23895e6a021a90f)",
]


def test_a_log_that_stops_in_nccl_init_is_a_low_confidence_stall() -> None:
    for result in both(NCCL_INIT):
        (finding,) = result.findings
        assert (finding.id, finding.confidence, dict(finding.details)) == (
            "nccl-failure", "low", {"stalled at NCCL init": 1}
        )
        assert finding.first.line_no == 3


@pytest.mark.parametrize(
    "after",
    [
        ["host:820:820 [0] NCCL INFO ncclCommInitRank comm 0x55 rank 0 nranks 2 - Init COMPLETE"],
        ["(Worker pid=820) INFO 08-09 20:55:30 [default_loader.py:1] Loading weights took 2.6 seconds"],
        ["host:820:821 [0] NCCL WARN Call to connect returned Connection refused"],  # an error, not a hang
        ["filler"] * 60,  # the log goes on: whatever it was, it was not stuck here
    ],
)
def test_progress_or_an_error_after_nccl_init_is_no_stall(after: list[str]) -> None:
    for result in both(NCCL_INIT + after):
        assert all(f.first.text != NCCL_INIT[-1] for f in result.findings)
        assert not any(f.details.get("stalled at NCCL init") for f in result.findings)


# ---- confidence ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_confidence_of_final_lines_frames_and_hangs(tmp_path: Path) -> None:
    log = tmp_path / "mixed.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        '  File "/venv/transformers/tokenization_utils_fast.py", line 494, in set_truncation_and_padding\n'
        "    self._tokenizer.enable_truncation(**target)\n"
        "RuntimeError: Already borrowed\n"
        + (REAL / "positive" / "engine_ci_2xh100_timeout.log").read_text()
        + "\n".join(NCCL_INIT) + "\n"
    )
    expected = {"tokenizer-already-borrowed": "high", "engine-dead": "medium", "nccl-failure": "low"}
    out = subprocess.run(
        [sys.executable, "-m", "borrowguard", "scan", "--json", str(log)], capture_output=True, text=True, timeout=120
    )
    doc = json.loads(out.stdout)
    assert {f["id"]: f["confidence"] for f in doc["findings"]} == expected
    for floor, kept in (("medium", {"tokenizer-already-borrowed", "engine-dead"}), ("high", {"tokenizer-already-borrowed"})):
        out = subprocess.run(
            [sys.executable, "-m", "borrowguard", "scan", "--json", "--min-confidence", floor, str(log)],
            capture_output=True, text=True, timeout=120,
        )
        assert {f["id"] for f in json.loads(out.stdout)["findings"]} == kept
        assert out.returncode == 2
    rich = subprocess.run(
        [sys.executable, "-m", "borrowguard", "scan", str(log)], capture_output=True, text=True, timeout=120
    )
    assert "(low)" in rich.stdout and "│ medium" in rich.stdout


@pytest.mark.slow
def test_min_confidence_can_turn_a_warning_exit_into_0(tmp_path: Path) -> None:
    log = tmp_path / "hang.log"
    log.write_text("\n".join(NCCL_INIT) + "\n")
    base = [sys.executable, "-m", "borrowguard", "scan", str(log)]
    assert subprocess.run(base, capture_output=True, timeout=120).returncode == 2
    assert subprocess.run([*base, "--min-confidence", "medium"], capture_output=True, timeout=120).returncode == 0


# ---- tracebacks that lost their indentation, engine death causes -----------------------------------


def test_a_flat_paste_with_glued_code_is_read_as_one_traceback() -> None:
    lines = (REAL / "positive" / "tokenizer_groundingdino_uvicorn_glued.log").read_text().splitlines()
    body = [line for line in lines if not line.startswith("# ")]
    for result in both(body):
        (finding,) = result.findings
        assert finding.first.text.startswith('File "/usr/local/lib/python3.10/dist-packages/transformers/tokenization_utils_fast.py"')
        assert finding.first.text.endswith("(cut before the exception)")
    # a logged line after a flat traceback is a message again, not code
    for result in both([*body, "ERROR 01-01 00:00:00 [a.py:1] EngineCore encountered a fatal error."]):
        assert {f.id for f in result.findings} == {"tokenizer-already-borrowed", "engine-dead"}


def test_an_engine_deaths_cause_is_enginecores_own_last_exception() -> None:
    lines = (REAL / "positive" / "mm_keyerror_deepseek_vl2_busy_loop.log").read_text().splitlines()
    body = [line for line in lines if not line.startswith("# ")]
    for result in both(body):
        death = next(f for f in result.findings if f.id == "engine-dead")
        assert death.cause == "KeyError: 'a23ac4af3082cb762542f11e83b7d3f6690912dc3b1b32f0c221aea278569f02'"
        assert death.count == 1  # "EngineCore hit an exception", its KeyError and the chained traceback
        assert [(s.role, s.id) for s in result.chain if s.role != "environment"] == [
            ("root", "mm-cache-desync"), ("consequence", "engine-dead")
        ]


def test_a_lone_version_rule_is_shown_when_the_log_does_not_say_the_version() -> None:
    # mm-cache-desync has one environment rule about vLLM versions (recovery from 0.33): shown without a
    # version; with a version, only when it matches.
    desync = "ERROR 01-01 00:00:00 [core.py:1] AssertionError: Expected a cached item for mm_hash='ab'"
    (result, _) = both([desync])
    assert [s.id for s in result.chain if s.role == "environment"] == ["vllm-mm-cache-desync"]
    (result, _) = both(["INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.33.1", desync])
    assert [s.id for s in result.chain if s.role == "environment"] == []


# A change's description (a pull request's), as such descriptions are written: its template's heading, then prose
# naming the statuses and deaths the change handles, then a log pasted in a code fence.
CHANGE = [
    "## Purpose",
    "Before this change the engine crashed silently and /health kept answering 200 while requests got a 500 Internal Server Error.",
    "This PR makes it return a 503 Service Unavailable instead, so a load balancer routes around it.",
]
PASTED = ["```", "INFO:     10.0.0.1:5000 - \"GET /health HTTP/1.1\" 503 Service Unavailable", "```"]


def test_a_change_that_names_deaths_and_statuses_reports_none() -> None:
    for result in both(CHANGE):
        assert ids(result) == {}, result
        assert any("a change's description" in w for w in result.warnings)


def test_the_same_prose_without_a_changes_cue_is_a_report() -> None:
    for result in both(CHANGE[1:2]):
        assert set(ids(result)) == {"engine-dead", "http-error-status"}


def test_a_log_pasted_in_a_change_counts() -> None:
    for result in both([*CHANGE, *PASTED]):
        assert ids(result) == {"http-error-status": (1, "high")}
    # a log line with its own header counts outside a fence too
    for result in both([*CHANGE, "ERROR 05-01 12:00:00 [core.py:1] EngineCore encountered a fatal error."]):
        assert set(ids(result)) == {"engine-dead"}


def test_a_change_reaches_only_so_far() -> None:
    from borrowguard.knowledge import load

    filler = [f"step {i}: renamed a helper" for i in range(load().change.reach)]
    for result in both([CHANGE[0], *filler, CHANGE[1]]):
        assert set(ids(result)) == {"engine-dead", "http-error-status"}


def test_a_fix_titled_at_the_heading_opens_its_description() -> None:
    # real-world-86 and -87: a pull request's title, then the crash it fixes told in prose, no template heading
    prose = "When the bootstrap server is unreachable, the dangling reference then crashes the next scheduler step."
    for result in both(["Fix scheduler crash on unreachable bootstrap abort", prose]):
        assert ids(result) == {}
    for result in both(["[Bugfix] Drop failed requests after the abort loop", prose]):
        assert ids(result) == {}
    # a report's title, or a fix title further down a thread, opens nothing; nor does a conventional commit's
    # (the sets label the incidents those retell)
    for head in ("Scheduler crash on unreachable bootstrap abort", "fix: scheduler crash on unreachable bootstrap"):
        for result in both([head, prose]):
            assert "engine-dead" in ids(result)
    for result in both(["The scheduler died twice today.", "Fix scheduler crash on unreachable bootstrap abort", prose]):
        assert "engine-dead" in ids(result)


def test_a_bug_fix_that_says_the_tokenizer_race_happens_still_reports_it() -> None:
    lines = ["## Purpose", "Sharing one fast tokenizer across request threads raises RuntimeError: Already borrowed."]
    for result in both(lines):
        assert "tokenizer-already-borrowed" in ids(result)


def test_a_traceback_indented_inside_a_warning_ends_at_its_exception_line() -> None:
    # pytest's PytestUnhandledThreadExceptionWarning indents the thread's traceback under its own line
    lines = [
        "PytestUnhandledThreadExceptionWarning: Exception in thread Thread-4 (embed)",
        "",
        "  Traceback (most recent call last):",
        '    File "/app/.venv/lib/python3.11/site-packages/transformers/tokenization_utils_fast.py", line 528, in _batch_encode_plus',
        "      encodings = self._tokenizer.encode_batch(",
        "  RuntimeError: Already borrowed",
        "the test still passed",
    ]
    for result in both(lines):
        assert ids(result) == {"tokenizer-already-borrowed": (1, "high")}
    # the same exception line deeper than the header is the traceback's code, not its end
    for result in both([*lines[:5], "      RuntimeError: Already borrowed", "  ValueError: other"]):
        assert "tokenizer-already-borrowed" not in ids(result)


@pytest.mark.parametrize(
    ("heading", "prose", "problem"),
    [
        # a design's own heading
        ("## Solution", "The health ping raises EngineDeadError when EngineCore dies or hangs past the timeout.",
         "engine-dead"),
        # a template's heading as a rendered page has it
        ("<html><body><h2>Purpose</h2>",
         "<p>/health returns 200 even when the busy loop is frozen by an NCCL hang.</p>",
         "nccl-failure"),
    ],
)
def test_a_changes_headings_are_its_cues(heading: str, prose: str, problem: str) -> None:
    for result in both([heading, prose]):
        assert ids(result) == {}
    for result in both([prose]):
        assert problem in ids(result)


def test_a_traceback_from_sglangs_scheduler_process_is_its_death() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2009, in run_scheduler_process',
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)",
        '  File "/sgl/python/sglang/srt/model_executor/cuda_graph_runner.py", line 210, in __init__',
        "    self.capture()",
        "RuntimeError: Capture cuda graph failed: CUDA out of memory. Tried to allocate 20.00 MiB.",
    ]
    for result in both(lines):
        assert set(ids(result)) == {"engine-dead", "cuda-oom"}
