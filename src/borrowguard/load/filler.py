"""What prompts are made of: filler words from a fixed corpus and tool results of a given size.

Unique per request (a random window and tag), cheap to draw, and the same for the same seed.
"""

from __future__ import annotations

import json
import random

_WORDS = (  # noqa: SIM905 - a sentence of filler words reads better than a 60-item literal
    "engine token batch cache model server thread queue request stream image vision tool result system "
    "user answer weather invoice latency memory kernel prompt budget region cluster shard replica policy "
    "review summary table column filter search report metric alert window buffer offset vector graph node "
    "edge router gateway schedule deploy rollback commit branch feature signal health probe ready worker"
).split()

# Drawing every word per request costs more CPU than the rest of the client; a random window into a
# fixed corpus, behind a random tag, is just as unique for the server and ten times cheaper.
_CORPUS = random.Random(12345).choices(_WORDS, k=8192)


def words(rng: random.Random, n: int) -> str:
    start = rng.randrange(len(_CORPUS) - n) if n < len(_CORPUS) else 0
    return f"{rng.getrandbits(32):08x} " + " ".join(_CORPUS[start : start + n])


def tool_result(rng: random.Random, size: int) -> str:
    rows, length = [], 2
    while length < size:
        row = json.dumps({"id": rng.randrange(10**6), "text": words(rng, 8)})
        rows.append(row)
        length += len(row) + 1
    return ("[" + ",".join(rows) + "]")[: max(2, size)] if size > 0 else ""
