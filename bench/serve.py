"""Throughput of `borrowguard serve` for small text chats, against baselines measured in the same run.

Both servers (guard off, guard on; each a real subprocess) run at once, and the same aiohttp client at
the same concurrency measures them interleaved — off and on alternate within every round, the order flips
each round — so drift on a shared machine hits both alike: the rate of GET /health (the HTTP stack alone:
the ceiling on this machine) and the rate of small text chats (chat template + tokenizer on the pool + stub
decode). Prints chats/s (medians over rounds), the ratio of chats to /health, and guard on / guard off.
Goal: well over 100 chats/s on 2 cores; guard on / off >= 0.8 (`--check` exits 1 when missed).

    python bench/serve.py                      # 3 rounds x 1500 requests per measurement
    python bench/serve.py --requests 5000 --rounds 5 --concurrency 32 --check
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time

import aiohttp

from borrowguard.server import ServerProcess
from goals import Goal, add_check, finish

PATHS = ("/health", "/v1/chat/completions")

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


def schedule(rounds: int) -> list[tuple[bool, str]]:
    """(guard, path) in the order measured: within a round guard off and on alternate for each path, and
    which goes first flips every round, so neither side always runs on a warmer (or busier) machine."""
    order: list[tuple[bool, str]] = []
    for r in range(rounds):
        guards = (False, True) if r % 2 == 0 else (True, False)
        order += [(guard, path) for path in PATHS for guard in guards]
    return order


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--workers", type=int, default=4)
    add_check(parser)
    args = parser.parse_args()
    samples: dict[tuple[bool, str], list[float]] = {(g, p): [] for g in (False, True) for p in PATHS}
    with contextlib.ExitStack() as stack:
        servers = {guard: stack.enter_context(ServerProcess(guard=guard, workers=args.workers))
                   for guard in (False, True)}
        for guard, path in schedule(args.rounds):
            url = servers[guard].url
            assert url is not None
            method = "GET" if path == "/health" else "POST"
            samples[guard, path].append(asyncio.run(rate(url, method, path, args.requests, args.concurrency)))
    chats: dict[bool, float] = {}
    for guard in (False, True):
        chats[guard] = statistics.median(samples[guard, PATHS[1]])
        ceiling = statistics.median(samples[guard, PATHS[0]])
        label = "on " if guard else "off"
        print(f"guard {label}: {chats[guard]:7.0f} chats/s, /health {ceiling:7.0f} req/s, "
              f"chats / health = {chats[guard] / ceiling:.2f}"
              f"  ({args.requests} requests x {args.rounds} rounds, concurrency {args.concurrency})")
    ratio = chats[True] / chats[False]
    print(f"guard on / guard off = {ratio:.2f} (medians of {args.rounds} interleaved rounds)")
    goals = [
        Goal("> 100 chats/s, guard off and on", min(chats.values()) > 100, f"{min(chats.values()):.0f} chats/s"),
        Goal("guard on / off >= 0.8", ratio >= 0.8, f"{ratio:.2f}"),
    ]
    return finish(goals, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
