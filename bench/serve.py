"""Throughput of `borrowguard serve` for small text chats, against baselines measured in the same run.

For each server (guard off, guard on; each a real subprocess) and the same aiohttp client at the same
concurrency: the rate of GET /health (the HTTP stack alone: the ceiling on this machine) and the rate of
small text chats (chat template + tokenizer on the pool + stub decode). Prints chats/s, the ratio of
chats to /health, and guard on / guard off. Goal: well over 100 chats/s on 2 cores; guard on / off >= 0.8.

    python bench/serve.py                      # 2 rounds x 1500 requests per measurement
    python bench/serve.py --requests 5000 --rounds 3 --concurrency 32
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

import aiohttp

from borrowguard.server import ServerProcess

CHAT = {"messages": [{"role": "user", "content": "Hello! How are you today?"}], "max_tokens": 8}


async def rate(url: str, method: str, path: str, requests: int, concurrency: int) -> float:
    statuses: dict[int, int] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        gate = asyncio.Semaphore(concurrency)

        async def one() -> None:
            body = CHAT if method == "POST" else None
            async with gate, session.request(method, url + path, json=body) as response:
                await response.read()
                statuses[response.status] = statuses.get(response.status, 0) + 1

        await asyncio.gather(*(one() for _ in range(min(200, requests))))  # warm-up: connections, caches
        statuses.clear()
        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(requests)))
        elapsed = time.perf_counter() - started
    if set(statuses) != {200}:
        raise SystemExit(f"{method} {path}: unexpected statuses {statuses}")
    return requests / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    chats: dict[bool, float] = {}
    for guard in (False, True):
        with ServerProcess(guard=guard, workers=args.workers) as server:
            assert server.url is not None
            health, chat = [], []
            for _ in range(args.rounds):  # alternate, so drift on a shared machine hits both
                for path, samples in (("/health", health), ("/v1/chat/completions", chat)):
                    method = "GET" if path == "/health" else "POST"
                    measured = rate(server.url, method, path, args.requests, args.concurrency)
                    samples.append(asyncio.run(measured))
        chats[guard], ceiling = statistics.median(chat), statistics.median(health)
        label = "on " if guard else "off"
        print(f"guard {label}: {chats[guard]:7.0f} chats/s, /health {ceiling:7.0f} req/s, "
              f"chats / health = {chats[guard] / ceiling:.2f}"
              f"  ({args.requests} requests x {args.rounds} rounds, concurrency {args.concurrency})")
    ratio = chats[True] / chats[False]
    print(f"guard on / guard off = {ratio:.2f}")
    ok = min(chats.values()) > 100 and ratio >= 0.8
    print("goal (> 100 chats/s, guard on / off >= 0.8):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
