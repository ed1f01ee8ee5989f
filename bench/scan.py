"""How fast does `borrowguard scan` read a big log, against `grep -c -E` with the same patterns?

Generates a vLLM-style log (a real start-up sequence, then mostly healthy lines: metrics, access log,
request logs, NCCL chatter, from several processes; a failure every --every lines: tracebacks, retries,
engine death, NCCL, 4xx/5xx) into a temp dir, then times, in the same run, interleaved, on the same
(page-cached) file:

  baseline  grep -c -E -f PATTERNS   every signature regex of the knowledge base (message, first frame,
                                     stall and resume; lookarounds dropped, which grep -E lacks)
  scan      borrowguard.scan's bulk path (Scanner.scan_stream), findings aggregated as in the CLI

and prints MB/s of each (medians of --runs) and the ratio scan/grep (target >= 0.3). The file is
deleted afterwards.

    python bench/scan.py                 # 256 MB
    python bench/scan.py --size-mb 64    # a quick run
    python bench/scan.py --no-accel      # without the optional ahocorasick-rs (stdlib only)
    python bench/scan.py --check         # exit 1 when the ratio is below the target
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from borrowguard.scan import Scanner, fast
from goals import Goal, add_check, finish

STARTUP = [
    "(APIServer pid={pid}) INFO {ts} [api_server.py:1880] vLLM API server version 0.19.1",
    "(APIServer pid={pid}) INFO {ts} [utils.py:326] non-default args: {{'model': 'Qwen/Qwen2.5-VL-7B-Instruct', "
    "'max_model_len': 32768, 'tensor_parallel_size': 2, 'renderer_num_workers': 2}}",
    "(EngineCore_DP0 pid={pid2}) INFO {ts} [core.py:88] Initializing a V1 LLM engine (v0.19.1) with config: "
    "model='Qwen/Qwen2.5-VL-7B-Instruct', max_seq_len=32768, tensor_parallel_size=2, pipeline_parallel_size=1",
    "(Worker_TP0 pid={pid2}) INFO {ts} [pynccl.py:113] vLLM is using nccl==2.27.3",
    "gpu-node-1:{pid2}:{pid2} [0] NCCL INFO Bootstrap: Using eth0:10.0.0.5<0>",
    "gpu-node-1:{pid2}:{pid2} [0] NCCL INFO ncclCommInitRank comm 0x5581 rank 0 nranks 2 - Init COMPLETE",
    "(Worker_TP0 pid={pid2}) INFO {ts} [gpu_model_runner.py:2345] Model loading took 15.6 GiB and 20.1 seconds",
    "(EngineCore_DP0 pid={pid2}) INFO {ts} [core.py:210] init engine (profile, create kv cache, warmup model) "
    "took 41.20 seconds",
    "(APIServer pid={pid}) INFO {ts} [api_server.py:1951] Starting vLLM API server 0 on http://0.0.0.0:8000",
    "(APIServer pid={pid}) INFO:     Application startup complete.",
]
HEALTHY = [
    "(APIServer pid={pid}) INFO {ts} [loggers.py:123] Engine 000: Avg prompt throughput: {f} tokens/s, "
    "Avg generation throughput: {f} tokens/s, Running: {n} reqs, Waiting: 0 reqs, GPU KV cache usage: {f}%, "
    "Prefix cache hit rate: {f}%",
    '(APIServer pid={pid}) INFO:     127.0.0.1:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    '(APIServer pid={pid}) INFO:     127.0.0.1:{port} - "GET /health HTTP/1.1" 200 OK',
    "(APIServer pid={pid}) INFO {ts} [logger.py:43] Received request chatcmpl-{hex}: prompt: "
    "'<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n<|im_start|>user\\nDescribe the image "
    "in detail, step by step.<|im_end|>\\n<|im_start|>assistant\\n', params: SamplingParams(n=1, "
    "temperature=0.7, top_p=0.8, max_tokens={n}), prompt_token_ids: None, lora_request: None.",
    "(APIServer pid={pid}) INFO {ts} [async_llm.py:261] Added request chatcmpl-{hex}.",
    "(EngineCore_DP0 pid={pid2}) DEBUG {ts} [core.py:402] EngineCore loop active, {n} requests scheduled.",
    "(EngineCore_DP0 pid={pid2}) INFO {ts} [block_pool.py:321] Prefix cache reset, {n} blocks freed.",
    "(APIServer pid={pid}) WARNING {ts} [protocol.py:88] The following fields were present in the request "
    "but ignored: {{'metadata'}}",
    "gpu-node-1:{pid2}:{pid2} [0] NCCL INFO Channel 00/0{n} : 0[0] -> 1[1] via P2P/CUMEM/read",
]
FAILURES = [
    "(APIServer pid={pid}) WARNING {ts} [context.py:276] Failed to acquire tokenizer in current thread. "
    "Retrying (1/5)...",
    "(APIServer pid={pid}) ERROR {ts} [serving_chat.py:240] Error in preprocessing prompt inputs\n"
    "(APIServer pid={pid}) ERROR {ts} [serving_chat.py:240] Traceback (most recent call last):\n"
    '(APIServer pid={pid}) ERROR {ts} [serving_chat.py:240]   File "/usr/lib/python3/site-packages/'
    'transformers/tokenization_utils_fast.py", line 494, in set_truncation_and_padding\n'
    "(APIServer pid={pid}) ERROR {ts} [serving_chat.py:240]     self._tokenizer.enable_truncation(**target)\n"
    "(APIServer pid={pid}) ERROR {ts} [serving_chat.py:240] RuntimeError: Already borrowed",
    '(APIServer pid={pid}) INFO:     127.0.0.1:{port} - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request',
    "(EngineCore_DP0 pid={pid2}) WARNING {ts} [shm_broadcast.py:466] No available shared memory broadcast "
    "block found in 60 seconds. This typically happens when some processes are hanging.",
    "(APIServer pid={pid}) ERROR {ts} [core_client.py:564] Engine core proc EngineCore_DP0 died "
    "unexpectedly, shutting down client.",
]


def generate(path: Path, size: int, every: int, seed: int = 0) -> int:
    """Write about `size` bytes; returns the number of failure snippets written."""
    rnd = random.Random(seed)

    def fill(template: str) -> str:
        return template.format(
            pid=rnd.randint(100, 999), pid2=rnd.randint(1000, 9999), port=rnd.randint(30000, 60000),
            ts=f"07-{rnd.randint(1, 28):02d} {rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:"
               f"{rnd.randint(0, 59):02d}",
            f=f"{rnd.random() * 1000:.1f}", n=rnd.randint(1, 9), hex=f"{rnd.getrandbits(64):016x}",
        )

    # A few MB of distinct text, repeated: generating a gigabyte line by line would dominate the run.
    lines: list[str] = [fill(t) for t in STARTUP]
    failures_per_piece = 0
    for i in range(40_000):
        if i % every == every - 1:
            lines.append(fill(rnd.choice(FAILURES)))
            failures_per_piece += 1
        else:
            lines.append(fill(rnd.choice(HEALTHY)))
    piece = ("\n".join(lines) + "\n").encode()
    written = failures = 0
    with path.open("wb") as fh:
        while written < size:
            fh.write(piece)
            written += len(piece)
            failures += failures_per_piece
    return failures


def grep_patterns(scanner: Scanner) -> list[str]:
    """The signature regexes in POSIX ERE: the same strings minus Python-only group syntax (lookarounds
    dropped: grep then matches a few more lines, which only makes the baseline's job bigger)."""
    out: list[str] = []
    for sig in scanner.signatures:
        for pattern in sig.starters():
            ere = re.sub(r"\(\?[=!<][^()]*\)", "", pattern.pattern)
            ere = ere.replace("(?:", "(").replace("(?P<detail>", "(")
            if re.search(r"(?<!\\)\(\?", ere):   # a group's "(?", not an escaped bracket made optional ("\\(?")
                raise SystemExit(f"cannot express {pattern.pattern!r} for grep -E")
            out.append(ere)
    return out


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=256, help="log size in MB (default 256)")
    ap.add_argument("--every", type=int, default=5000, help="one failure every N lines (default 5000)")
    ap.add_argument("--runs", type=int, default=3, help="timed runs of each, interleaved; medians (default 3)")
    ap.add_argument("--no-accel", action="store_true",
                    help="ignore ahocorasick-rs even if installed (one substring search per anchor)")
    add_check(ap)
    args = ap.parse_args()
    if args.no_accel:
        fast._aho = None
    if shutil.which("grep") is None:
        print("grep not found", file=sys.stderr)
        return 2
    scanner_for_patterns = Scanner()
    tmp = Path(tempfile.mkdtemp(prefix="borrowguard-bench-scan-"))
    try:
        log = tmp / "vllm.log"
        pat = tmp / "patterns.txt"
        pat.write_text("\n".join(grep_patterns(scanner_for_patterns)) + "\n")
        failures = generate(log, args.size_mb * 1_000_000, args.every)
        size = log.stat().st_size
        subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # into the page cache

        def grep() -> int:
            proc = subprocess.run(
                ["grep", "-c", "-E", "-f", str(pat), str(log)], capture_output=True, text=True,
                env={"LC_ALL": "C"}, timeout=3600,
            )
            if proc.returncode > 1:   # 1 is "no line matched"; above it grep refused a pattern and the baseline is void
                raise SystemExit(f"grep -E failed ({proc.returncode}): {proc.stderr.strip()[:300]}")
            return int(proc.stdout.strip() or 0)

        def scan() -> object:
            sc = Scanner()
            with log.open("rb") as fh:
                sc.scan_stream(fh, "vllm.log")
            return sc.result()

        grep_times, scan_times = [], []
        for _ in range(args.runs):  # interleaved: drift on a shared machine hits both alike
            t, grep_lines = timed(grep)
            grep_times.append(t)
            t, result = timed(scan)
            scan_times.append(t)
        grep_s, scan_s = statistics.median(grep_times), statistics.median(scan_times)
        mb = size / 1e6
        print(f"log: {mb:.0f} MB, {result.lines} lines, {failures} failure snippets")  # type: ignore[attr-defined]
        print(f"grep -c -E ({len(grep_patterns(scanner_for_patterns))} patterns): {grep_s:.2f} s, "
              f"{mb / grep_s:.0f} MB/s, {grep_lines} matching lines")
        found = ", ".join(f"{f.id}={f.count}" for f in result.findings)  # type: ignore[attr-defined]
        finder = "ahocorasick-rs" if fast.AnchorSearch((b"x",)).accelerated else "one find per anchor"
        print(f"borrowguard scan ({finder}): {scan_s:.2f} s, {mb / scan_s:.0f} MB/s; {found}")
        print(f"runs (s): grep {', '.join(f'{t:.2f}' for t in grep_times)}; "
              f"scan {', '.join(f'{t:.2f}' for t in scan_times)}")
        ratio = grep_s / scan_s
        print(f"ratio scan/grep (medians): {ratio:.2f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish([Goal("scan / grep rate >= 0.3x", ratio >= 0.3, f"{ratio:.2f}x")], check=args.check)


if __name__ == "__main__":
    sys.exit(main())
