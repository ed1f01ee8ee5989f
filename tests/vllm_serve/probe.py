#!/usr/bin/env python3
"""Probe a real `vllm serve` for the "Already borrowed" race: a request mix at fixed concurrency, counted.

Runs in .venv-old (aiohttp); the server runs in the serve environment (scripts/vllm_serve_env.py).

    # start the servers itself (the tiny Qwen2-VL model of scripts/tiny_vlm.py), one after the other:
    .venv-old/bin/python tests/vllm_serve/probe.py --python "$(python3.11 scripts/vllm_serve_env.py)" \
        --start unguarded,guarded --mix full --duration 45 --facts --out /tmp/probe
    # or probe a server that is already up (its log is read for the log-side counts):
    .venv-old/bin/python tests/vllm_serve/probe.py --url http://127.0.0.1:8000 --log server.log --mix full

Why the mixes race on vLLM 0.19.1 (read from its source): the API server tokenizes through
AsyncMicrobatchTokenizer on the renderer's ThreadPoolExecutor(--renderer-num-workers), one batcher per queue
key. Chat/completion requests tokenize with truncation=True and max_length = truncate_prompt_tokens, or
else max_model_len - max_tokens + 1; only when that equals tokenizer.model_max_length (max_tokens=1 on a
model served at its full context) is the key ("encode", True, True, "model_max"), every other request goes
to ("encode", "other"). Two batchers, two worker threads, one tokenizer with different truncation settings:
"Already borrowed". `bad_words` is encoded on the event-loop thread (SamplingParams.update_from_tokenizer)
and races any worker thread, even with a single renderer worker.

Mixes (weights per request kind): see MIXES. Counted per kind: HTTP statuses, bodies containing
"Already borrowed", 500s whose error message is empty, client-side exceptions; per mix: the log lines
written during the mix that contain "Already borrowed" (and a few other markers).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import http.client
import json
import random
import struct
import sys
import time
import zlib
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vllm_serve_harness as harness

BORROWED = "Already borrowed"
LOG_MARKERS = {
    "already_borrowed": BORROWED,
    "acquire_retry": "Failed to acquire tokenizer",
    "traceback": "Traceback (most recent call last)",
    "engine_dead": "EngineDeadError",
    "error_lines": " ERROR ",
    "http_500": '" 500 ',
    "http_400": '" 400 ',
}

# Request kinds. The queue each lands in (vLLM 0.19.1, max_model_len 2048 == model_max_length):
#   chat_mt1 / completion_mt1 -> "model_max" (max_length 2048); chat_mt4, chat_none (max_length 2049),
#   chat_trunc, completion(_trunc_long), image, tools -> "other"; tokenize -> the no-truncation queue;
#   chat_bad_words -> "other", and its bad words are encoded on the event-loop thread.
MIXES: dict[str, dict[str, int]] = {
    # control: a single queue (every request max_tokens=4) and no bad_words: no race expected
    "text": {"chat_mt4": 1},
    # two microbatch queues at once: the renderer-worker race
    "queues": {"chat_mt1": 2, "chat_mt4": 1, "chat_none": 1, "chat_trunc": 1, "completion_trunc_long": 1},
    # bad_words (event loop) beside ordinary requests (worker thread), all in one queue otherwise
    "bad_words": {"chat_bad_words": 1, "completion_trunc_long": 1},
    # everything an operator's traffic could hold
    "full": {"chat_mt1": 3, "chat_mt4": 2, "chat_none": 1, "chat_trunc": 1, "image": 2, "tools": 1,
             "chat_bad_words": 1, "completion_mt1": 1, "completion": 1, "completion_trunc_long": 1,
             "tokenize": 1, "detokenize": 1},
}

SYLLABLES = ["ka", "lo", "mi", "ren", "tas", "vo", "shi", "pra", "dun", "el", "qui", "zor", "ba", "nek"]
WEATHER_TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo"]}},
                       "required": ["city"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Current time",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}},
]


def words(rng: random.Random, n: int) -> str:
    return " ".join("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(n))


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def image_url(rng: random.Random) -> str:
    w, h = rng.choice([(56, 56), (112, 84), (84, 112), (140, 112)])
    data = png(w, h, (rng.randrange(256), rng.randrange(256), rng.randrange(256)))
    return "data:image/png;base64," + base64.b64encode(data).decode()


def request(kind: str, rng: random.Random, model: str) -> tuple[str, dict]:
    """(path, JSON body) for one request of a kind."""
    # ~100-1200 tokens: long enough to keep encode_batch busy, short enough for every kind to fit in 2048
    text = words(rng, rng.randint(40, 200 if kind == "tools" else 400))
    chat = {"model": model, "messages": [{"role": "user", "content": text}]}
    if kind == "chat_mt1":
        return "/v1/chat/completions", {**chat, "max_tokens": 1}
    if kind == "chat_mt4":
        return "/v1/chat/completions", {**chat, "max_tokens": 4}
    if kind == "chat_none":  # the model's generation_config caps it at 16 tokens
        return "/v1/chat/completions", chat
    if kind == "chat_trunc":
        return "/v1/chat/completions", {**chat, "max_tokens": 2, "truncate_prompt_tokens": rng.randint(32, 512)}
    if kind == "chat_bad_words":
        # each bad word is encoded twice on the event-loop thread (with and without a leading space)
        bad = [words(rng, rng.randint(1, 40)) for _ in range(8)]
        return "/v1/chat/completions", {**chat, "max_tokens": 2, "bad_words": bad}
    if kind == "image":
        content = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": image_url(rng)}}]
        return "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": content}],
                                        "max_tokens": rng.choice([1, 2, 4])}
    if kind == "tools":
        return "/v1/chat/completions", {**chat, "tools": WEATHER_TOOLS, "tool_choice": "required",
                                        "max_tokens": 192}
    if kind == "completion_mt1":
        return "/v1/completions", {"model": model, "prompt": text, "max_tokens": 1}
    if kind == "completion_trunc_long":
        # a long text (~6-13k tokens) truncated to a few tokens: long for the tokenizer, cheap for the engine
        return "/v1/completions", {"model": model, "prompt": words(rng, rng.randint(2000, 4000)),
                                   "truncate_prompt_tokens": rng.randint(8, 64), "max_tokens": 1}
    if kind == "completion":
        return "/v1/completions", {"model": model, "prompt": text, "max_tokens": rng.choice([2, 3])}
    if kind == "tokenize":
        if rng.random() < 0.5:
            return "/tokenize", {"model": model, "prompt": text}
        return "/tokenize", {"model": model, "messages": chat["messages"]}
    if kind == "detokenize":
        return "/detokenize", {"model": model, "tokens": [rng.randrange(8, 15000) for _ in range(rng.randint(20, 400))]}
    raise ValueError(kind)


def error_message(body: str) -> str | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    err = data.get("error") if isinstance(data, dict) else None
    if isinstance(err, dict):
        return str(err.get("message", ""))
    if isinstance(data, dict) and "message" in data:
        return str(data["message"])
    return None


async def run_mix(base_url: str, model: str, mix: str, duration_s: float, concurrency: int,
                  seed: int = 0) -> dict:
    import aiohttp

    weights = MIXES[mix]
    kinds, cum = list(weights), list(weights.values())
    per_kind: dict[str, dict] = defaultdict(lambda: {"n": 0, "status": Counter(), "borrowed": 0,
                                                     "empty_500": 0, "exceptions": Counter(), "lat_s": 0.0})
    samples: dict[str, str] = {}
    deadline = time.monotonic() + duration_s

    async def worker(i: int, session: aiohttp.ClientSession) -> None:
        rng = random.Random(seed * 1000 + i)
        while time.monotonic() < deadline:
            kind = rng.choices(kinds, cum)[0]
            path, body = request(kind, rng, model)
            st = per_kind[kind]
            t0 = time.monotonic()
            try:
                async with session.post(base_url + path, json=body) as resp:
                    text = await resp.text()
                    status = resp.status
            except Exception as exc:  # connection dropped, timeout
                st["n"] += 1
                st["exceptions"][type(exc).__name__] += 1
                continue
            st["n"] += 1
            st["lat_s"] += time.monotonic() - t0
            st["status"][status] += 1
            msg = error_message(text) if status >= 400 else None
            if BORROWED in text:
                st["borrowed"] += 1
                samples.setdefault(f"{kind} {status} borrowed", text[:600])
            if status == 500 and msg == "":
                st["empty_500"] += 1
                samples.setdefault(f"{kind} 500 empty", text[:600])
            if status >= 400:
                samples.setdefault(f"{kind} {status}", text[:600])

    timeout = aiohttp.ClientTimeout(total=180)
    connector = aiohttp.TCPConnector(limit=concurrency)
    t0 = time.monotonic()
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        await asyncio.gather(*(worker(i, session) for i in range(concurrency)))
    elapsed = time.monotonic() - t0
    out = {k: {"n": v["n"], "status": {str(s): c for s, c in sorted(v["status"].items())},
               "borrowed_bodies": v["borrowed"], "empty_500": v["empty_500"],
               "exceptions": dict(v["exceptions"]),
               "mean_latency_s": round(v["lat_s"] / max(1, sum(v["status"].values())), 3)}
           for k, v in sorted(per_kind.items())}
    total = Counter()
    for v in per_kind.values():
        total.update({str(s): c for s, c in v["status"].items()})
    return {"mix": mix, "weights": weights, "duration_s": round(elapsed, 1), "concurrency": concurrency,
            "requests": sum(v["n"] for v in per_kind.values()),
            "status": dict(sorted(total.items())),
            "borrowed_bodies": sum(v["borrowed"] for v in per_kind.values()),
            "empty_500": sum(v["empty_500"] for v in per_kind.values()),
            "exceptions": sum(sum(v["exceptions"].values()) for v in per_kind.values()),
            "per_kind": out, "samples": samples}


def log_counts(log_path: Path, start: int) -> dict:
    data = log_path.read_bytes()[start:].decode("utf-8", "replace")
    lines = data.splitlines()
    counts = {name: sum(1 for line in lines if marker in line) for name, marker in LOG_MARKERS.items()}
    first = next((line for line in lines if BORROWED in line), None)
    counts["first_borrowed_line"] = first[:400] if first else None
    return counts


# ---- one-off facts -------------------------------------------------------------------------------------

def http_json(base_url: str, method: str, path: str, body: dict | None = None,
              *, follow_up: bool = False) -> dict:
    """One request on a fresh connection; with follow_up, a GET /health on the same connection after it,
    to tell whether the server kept the connection open after answering."""
    u = urlsplit(base_url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    payload = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, body=payload, headers=headers)
    resp = conn.getresponse()
    raw = resp.read().decode("utf-8", "replace")
    out: dict = {"status": resp.status, "connection_header": resp.getheader("connection")}
    try:
        out["json"] = json.loads(raw)
    except ValueError:
        out["text"] = raw[:2000]
    if follow_up:
        try:
            conn.request("GET", "/health")
            r2 = conn.getresponse()
            r2.read()
            out["connection_reused_after"] = r2.status == 200
        except (OSError, http.client.HTTPException) as exc:
            out["connection_reused_after"] = False
            out["follow_up_error"] = type(exc).__name__
    conn.close()
    return out


def facts(base_url: str, model: str) -> dict:
    rng = random.Random(7)
    long_text = words(rng, 3000)
    out = {
        "v1_models": http_json(base_url, "GET", "/v1/models"),
        "version": http_json(base_url, "GET", "/version"),
        "too_long_chat": http_json(base_url, "POST", "/v1/chat/completions",
                                   {"model": model, "messages": [{"role": "user", "content": long_text}],
                                    "max_tokens": 4}, follow_up=True),
        "too_long_completion": http_json(base_url, "POST", "/v1/completions",
                                         {"model": model, "prompt": long_text, "max_tokens": 4},
                                         follow_up=True),
        "max_tokens_over_context": http_json(base_url, "POST", "/v1/chat/completions",
                                             {"model": model, "messages": [{"role": "user", "content": "hi"}],
                                              "max_tokens": 4096}, follow_up=True),
        "truncate_over_limit": http_json(base_url, "POST", "/v1/chat/completions",
                                         {"model": model, "messages": [{"role": "user", "content": "hi"}],
                                          "max_tokens": 4, "truncate_prompt_tokens": 4000}, follow_up=True),
        "tools_required": http_json(base_url, "POST", *request("tools", rng, model)),
        "image": http_json(base_url, "POST", *request("image", rng, model), follow_up=True),
        "tokenize": http_json(base_url, "POST", "/tokenize", {"model": model, "prompt": "hello world"}),
    }
    return out


def text_only_facts(base_url: str, model: str) -> dict:
    rng = random.Random(8)
    return {
        "v1_models": http_json(base_url, "GET", "/v1/models"),
        "image_to_text_only_model": http_json(base_url, "POST", *request("image", rng, model), follow_up=True),
        "tools_required_without_tool_parser": http_json(base_url, "POST", *request("tools", rng, model),
                                                        follow_up=True),
        "tools_auto_without_tool_parser": http_json(
            base_url, "POST", "/v1/chat/completions",
            {"model": model, "messages": [{"role": "user", "content": "hi"}], "tools": WEATHER_TOOLS,
             "tool_choice": "auto", "max_tokens": 4}, follow_up=True),
    }


# ---- driver --------------------------------------------------------------------------------------------

def probe_server(base_url: str, log_path: Path | None, mixes: list[str], duration_s: float,
                 concurrency: int, want_facts: bool, model: str = harness.SERVED_NAME) -> dict:
    result: dict = {"base_url": base_url, "mixes": {}}
    if want_facts:
        result["facts"] = facts(base_url, model)
    for n, mix in enumerate(mixes):
        start = log_path.stat().st_size if log_path else 0
        res = asyncio.run(run_mix(base_url, model, mix, duration_s, concurrency, seed=n))
        if log_path:
            time.sleep(1.0)  # let the server flush its last lines
            res["log"] = log_counts(log_path, start)
        result["mixes"][mix] = res
        summary = {k: res[k] for k in ("requests", "status", "borrowed_bodies", "empty_500", "exceptions")}
        print(f"[probe] {mix}: {json.dumps(summary)} log={json.dumps(res.get('log', {}).get('already_borrowed'))}",
              file=sys.stderr, flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="probe this server (already running)")
    ap.add_argument("--log", type=Path, help="its log file (for the log-side counts)")
    ap.add_argument("--start", help="comma list of servers to start in turn: unguarded, guarded, text-only")
    ap.add_argument("--python", type=Path, default=harness.serve_python(),
                    help=f"the serve environment's python (default ${harness.PYTHON_ENV})")
    ap.add_argument("--renderer-workers", type=int, default=4)
    ap.add_argument("--mix", default="full", help=f"comma list of {', '.join(MIXES)}")
    ap.add_argument("--duration", type=float, default=45.0, help="seconds per mix")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--facts", action="store_true", help="also record /v1/models, /version, error bodies")
    ap.add_argument("--out", type=Path, default=Path("probe-out"), help="directory for logs and result JSON")
    args = ap.parse_args(argv)
    mixes = [m for m in args.mix.split(",") if m]
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict = {}
    if args.url:
        results["external"] = probe_server(args.url.rstrip("/"), args.log, mixes, args.duration,
                                           args.concurrency, args.facts)
    for name in [s for s in (args.start or "").split(",") if s]:
        if args.python is None:
            ap.error(f"--start needs --python or ${harness.PYTHON_ENV}")
        text_only = name == "text-only"
        model = harness.build_tiny_model(args.python, text_only=text_only)
        log_path = args.out / f"{name}.log"
        with harness.vllm_server(args.python, model, log_path, guarded=(name != "unguarded"),
                                 renderer_workers=args.renderer_workers, multimodal=not text_only,
                                 tool_parser=not text_only) as srv:
            print(f"[probe] {name}: {srv.base_url} healthy after {srv.startup_s}s", file=sys.stderr, flush=True)
            if text_only:
                res = {"base_url": srv.base_url, "facts": text_only_facts(srv.base_url, srv.model)}
            else:
                res = probe_server(srv.base_url, log_path, mixes, args.duration, args.concurrency, args.facts)
            res["startup_s"] = srv.startup_s
            res["cmd"] = srv.cmd
            res["plugin_lines"] = harness.plugin_lines(log_path.read_text("utf-8", "replace"))
        results[name] = res
        (args.out / "result.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    (args.out / "result.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(args.out / "result.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
