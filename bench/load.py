"""Client throughput and memory of `borrowguard verify`'s load generator, against baselines in the same run.

1. Rate: the full client (request factory, SSE parsing, metrics, time series) against a plain aiohttp
   loop of the kind `vllm bench serve` uses (post, iterate the stream, json.loads each chunk), sending the
   same bodies at the same concurrency to the same minimal loopback server. Rounds alternate A/B so that
   drift on a shared machine hits both. Goal: ratio >= 0.9.
2. Memory: the full client with the whole mix (unique images included) for a long run; RSS sampled every
   few seconds after a warm-up. Goal: flat (growth after warm-up under 10 MiB).

    python bench/load.py                       # 5 rounds x 3 s each side, 40 s memory run
    python bench/load.py --rounds 5 --round-seconds 10 --memory-seconds 600 --strict
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import time

import aiohttp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from borrowguard.load.client import ChatClient
from borrowguard.load.metrics import LoadMetrics
from borrowguard.load.runner import LoadPlan, LoadRun
from borrowguard.load.scenarios import RequestFactory, ScenarioSettings
from support.fakeserver import FakeServer  # test scaffolding, not shipped

MIB = 1 << 20


async def baseline(url: str, bodies: list[bytes], concurrency: int, seconds: float) -> int:
    """What `vllm bench serve` does per request (async_request_openai_chat_completions)."""
    done = 0
    stop = time.perf_counter() + seconds
    connector = aiohttp.TCPConnector(limit=concurrency + 4, limit_per_host=0)
    timeout = aiohttp.ClientTimeout(total=6 * 60 * 60)
    async with aiohttp.ClientSession(trust_env=True, timeout=timeout, connector=connector) as session:

        async def worker(index: int) -> None:
            nonlocal done
            i = index
            while time.perf_counter() < stop:
                body = bodies[i % len(bodies)]
                i += concurrency
                st = time.perf_counter()
                ttft = 0.0
                generated = ""
                headers = {"Content-Type": "application/json"}
                async with session.post(url + "/v1/chat/completions", data=body, headers=headers) as response:
                    if response.status == 200:
                        async for chunk_bytes in response.content:
                            chunk_bytes = chunk_bytes.strip()
                            if not chunk_bytes:
                                continue
                            chunk = chunk_bytes.decode("utf-8").removeprefix("data: ")
                            if chunk != "[DONE]":
                                data = json.loads(chunk)
                                if choices := data.get("choices"):
                                    content = choices[0]["delta"].get("content")
                                    if ttft == 0.0:
                                        ttft = time.perf_counter() - st
                                    generated += content or ""
                                elif usage := data.get("usage"):
                                    _ = usage.get("completion_tokens")
                        done += 1

        await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return done


async def ours(url: str, settings: ScenarioSettings, concurrency: int, seconds: float) -> tuple[int, int]:
    factory = RequestFactory(settings, "fake-model")
    metrics = LoadMetrics(factory.scenarios)
    async with ChatClient(url, concurrency=concurrency, timeout=60) as client:
        await LoadRun(
            client, factory, metrics, LoadPlan(concurrency=concurrency, duration=seconds, drain=5)
        ).run()
    return metrics.ok, metrics.requests


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def memory_run(
    url: str, concurrency: int, seconds: float, warmup: float, every: float
) -> list[tuple[float, int]]:
    settings = ScenarioSettings(mix={"text": 1.0, "image": 1.0, "tools": 1.0}, stream=True)  # the generating mix, unique PNG/JPEG images at 256x256 and 720x1280
    factory = RequestFactory(settings, "fake-model")
    metrics = LoadMetrics(factory.scenarios)
    samples: list[tuple[float, int]] = []

    async def sampler() -> None:
        t0 = time.perf_counter()
        while True:
            await asyncio.sleep(every)
            samples.append((time.perf_counter() - t0, rss()))

    async with ChatClient(url, concurrency=concurrency, timeout=60) as client:
        task = asyncio.create_task(sampler())
        await LoadRun(
            client, factory, metrics, LoadPlan(concurrency=concurrency, duration=seconds, drain=5)
        ).run()
        task.cancel()
    print(
        f"  memory run: {metrics.requests} requests ({metrics.ok} ok) in {seconds:.0f}s, "
        f"{metrics.requests / seconds:.0f} req/s"
    )
    return [(t, r) for t, r in samples if t >= warmup]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--round-seconds", type=float, default=3.0)
    parser.add_argument("--memory-seconds", type=float, default=40.0)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a goal is missed")
    args = parser.parse_args()

    text_stream = ScenarioSettings(mix={"text": 1.0}, stream=True)
    factory = RequestFactory(text_stream, "fake-model")
    bodies = [factory.build(factory.plan()).body for _ in range(512)]  # the same bodies for both clients
    ratios = []
    ok = True
    print(
        f"bench/load.py: concurrency {args.concurrency}, "
        f"{args.rounds} rounds of {args.round_seconds:g}s each side"
    )
    with FakeServer(faults=["ok"]) as srv:
        for r in range(args.rounds):
            base = asyncio.run(baseline(srv.url, bodies, args.concurrency, args.round_seconds))
            got, sent = asyncio.run(ours(srv.url, text_stream, args.concurrency, args.round_seconds))
            assert got == sent, f"the client saw {sent - got} failures against a healthy server"
            ratio = got / base if base else float("nan")
            ratios.append(ratio)
            print(
                f"  round {r + 1}: plain aiohttp loop {base / args.round_seconds:7.1f} req/s   "
                f"borrowguard client {got / args.round_seconds:7.1f} req/s   ratio {ratio:.3f}"
            )
        median = statistics.median(ratios)
        met = median >= 0.9
        ok &= met
        print(
            f"rate ratio (median of {len(ratios)}): {median:.3f}   goal >= 0.9: {'met' if met else 'NOT met'}"
        )

        if args.memory_seconds > 0:
            samples = asyncio.run(
                memory_run(srv.url, args.concurrency, args.memory_seconds, args.warmup, 2.0)
            )
            if len(samples) >= 2:
                first, last = samples[0][1], samples[-1][1]
                peak = max(r for _, r in samples)
                growth = (last - first) / MIB
                flat = growth < 10
                ok &= flat
                print(
                    f"RSS after {args.warmup:g}s warm-up: {first / MIB:.1f} MiB -> {last / MIB:.1f} MiB at "
                    f"{samples[-1][0]:.0f}s (peak {peak / MIB:.1f} MiB, growth {growth:+.1f} MiB)   "
                    f"goal flat (< 10 MiB growth): {'met' if flat else 'NOT met'}"
                )
            print(
                f"max RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}"
                " MiB"
            )
    return 0 if ok or not args.strict else 1


if __name__ == "__main__":
    sys.exit(main())
