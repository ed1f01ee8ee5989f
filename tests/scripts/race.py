"""Share one bundled tokenizer across threads with mixed settings; print what happened as JSON lines.

    python race.py [--modes inline,spawn,forkserver] [--seconds S] [--threads N]

One JSON line per mode: {"mode", "pid", "guarded", "calls", "overlapping", "exceptions", "wrong_outputs"}.
The parent never imports transformers, so a spawn/forkserver child is guarded only if it set the guard up
itself. The serial reference is computed unguarded (unguarded.py), whatever this process is. An unguarded
run stops early once it has seen failures, to keep the test suite fast; a clean one runs its full time.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys


def race(seconds: float, threads: int) -> dict:
    import random
    import threading

    from transformers import AutoTokenizer
    from unguarded import serial_unguarded

    import borrowguard
    from borrowguard.data import tokenizer_path
    from borrowguard.race import hammer, make_calls

    def load():
        return AutoTokenizer.from_pretrained(str(tokenizer_path()))

    tok = load()
    calls = make_calls(tok, random.Random(0), 150)
    expected = serial_unguarded(load, calls)
    stop = threading.Event()

    def on_progress(snapshot) -> None:
        if snapshot.calls >= 300 and (snapshot.exceptions or snapshot.wrong_outputs):
            stop.set()

    result = hammer(tok, calls, expected, threads=threads, seconds=seconds, stop=stop,
                    on_progress=on_progress)
    try:
        guarded = borrowguard.is_installed()
    except AttributeError:  # a borrowguard without the guard API
        guarded = False
    return {
        "pid": os.getpid(),
        "guarded": guarded,
        "calls": result.calls,
        "overlapping": result.overlapping,
        "exceptions": result.exceptions,
        "wrong_outputs": result.wrong_outputs,
    }


def _child(queue, seconds: float, threads: int) -> None:
    queue.put(race(seconds, threads))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--modes", default="inline")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    for mode in args.modes.split(","):
        if mode == "inline":
            out = race(args.seconds, args.threads)
        else:
            ctx = multiprocessing.get_context(mode)
            queue = ctx.Queue()
            proc = ctx.Process(target=_child, args=(queue, args.seconds, args.threads))
            proc.start()
            out = queue.get(timeout=120)
            proc.join(timeout=30)
        print(json.dumps({"mode": mode, **out}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
