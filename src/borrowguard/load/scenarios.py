"""What the load sends: text, image and tool-heavy chat requests, plus identical repeats.

The failure this tool looks for hides in two places, and the request mix is built to expose both:
- concurrent tokenizer calls with *different* truncation settings (the `truncate_prompt_tokens` share
  next to plain chat-template calls) make old stacks raise "Already borrowed";
- on new stacks the settings leak silently, so one request gets another's truncation. Each scenario
  therefore repeats a few byte-identical requests; their `usage.prompt_tokens` must never differ.

Planning (cheap, on the event loop) is split from building (image encoding, JSON), so building can run
in a worker thread with its own seeded RNG.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from functools import reduce
from itertools import cycle
from math import gcd

from borrowguard.load.images import FORMATS, data_url, make_image
from borrowguard.load.options import SCENARIOS

_WORDS = (  # noqa: SIM905 - a sentence of filler words reads better than a 60-item literal
    "engine token batch cache model server thread queue request stream image vision tool result system "
    "user answer weather invoice latency memory kernel prompt budget region cluster shard replica policy "
    "review summary table column filter search report metric alert window buffer offset vector graph node "
    "edge router gateway schedule deploy rollback commit branch feature signal health probe ready worker"
).split()

TRUNCATE_RANGE = (8, 192)
# Not image requests: cutting a multimodal prompt can cut its image placeholders, which a healthy vLLM
# rejects. Image requests still collide with the truncating text/tool requests on the shared tokenizer.
TRUNCATABLE = frozenset({"text", "tools"})
REPEAT_TRUNCATE = 48  # the repeat variant with a fixed truncate_prompt_tokens
MAX_TOKENS = 16

TOOLS: list[dict] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    p: {"type": t, "description": f"The {p.replace('_', ' ')}."} for p, t in params
                },
                "required": [params[0][0]],
            },
        },
    }
    for name, description, params in (
        ("get_weather", "Current weather for a city.", (("city", "string"), ("unit", "string"))),
        (
            "search_docs",
            "Full-text search over the knowledge base.",
            (("query", "string"), ("limit", "integer")),
        ),
        ("read_file", "Read a file from the workspace.", (("path", "string"), ("max_bytes", "integer"))),
        ("run_sql", "Run a read-only SQL query.", (("sql", "string"), ("timeout_s", "number"))),
        ("send_email", "Send an e-mail.", (("to", "string"), ("subject", "string"), ("body", "string"))),
        ("create_ticket", "Open a ticket in the tracker.", (("title", "string"), ("priority", "integer"))),
    )
]


@dataclass(frozen=True)
class ScenarioSettings:
    """The knobs of the request mix (all from the CLI)."""

    mix: dict[str, float] = field(default_factory=lambda: {name: 1.0 for name in SCENARIOS})
    image_sizes: tuple[tuple[int, int], ...] = ((256, 256), (720, 1280))
    images_per_request: int = 1
    tool_result_bytes: int = 2048
    vllm_extensions: bool = True
    stream: bool = False
    truncate_share: float = 0.35
    repeat_every: int = 4
    seed: int = 0


@dataclass(frozen=True)
class Plan:
    """One request to send, decided on the event loop: what to build and how."""

    scenario: str
    variant: str  # "unique", or the name of a repeat variant
    seed: int
    truncate: int | None = None

    @property
    def repeat_key(self) -> str | None:
        return None if self.variant == "unique" else f"{self.scenario}/{self.variant}"


@dataclass(frozen=True)
class BuiltRequest:
    plan: Plan
    body: bytes
    stream: bool = False


class RequestFactory:
    """Plans a deterministic, weighted interleaving of scenarios and builds their JSON bodies."""

    def __init__(self, settings: ScenarioSettings, model: str) -> None:
        if settings.images_per_request < 1 and "image" in settings.mix:
            raise ValueError("images_per_request must be >= 1")
        self.settings = settings
        self.model = model
        self._rng = random.Random(settings.seed)
        self._order = cycle(_smooth_weighted_order(settings.mix))
        self._counts = dict.fromkeys(settings.mix, 0)
        self._variants = {name: cycle(self.repeat_variants(name)) for name in settings.mix}
        self._repeat_cache: dict[str, bytes] = {}

    @property
    def scenarios(self) -> list[str]:
        return list(self.settings.mix)

    def repeat_variants(self, scenario: str) -> list[str]:
        # "plain": no truncation; "trunc": a fixed truncation. A leak shows in either direction.
        truncates = self.settings.vllm_extensions and scenario in TRUNCATABLE
        return ["plain", "trunc"] if truncates else ["plain"]

    def plan(self) -> Plan:
        scenario = next(self._order)
        self._counts[scenario] += 1
        every = self.settings.repeat_every
        if every > 0 and (self._counts[scenario] - 1) % every == 0:  # the first one too: an early baseline
            variant = next(self._variants[scenario])
            return Plan(scenario, variant, seed=0, truncate=REPEAT_TRUNCATE if variant == "trunc" else None)
        truncate = None
        if (
            self.settings.vllm_extensions
            and scenario in TRUNCATABLE
            and self._rng.random() < self.settings.truncate_share
        ):
            truncate = self._rng.randint(*TRUNCATE_RANGE)
        return Plan(scenario, "unique", seed=self._rng.getrandbits(63), truncate=truncate)

    def build(self, plan: Plan) -> BuiltRequest:
        """Thread-safe: uses only the plan's own seed (and a cache of identical repeat bodies)."""
        key = plan.repeat_key
        if key is not None and key in self._repeat_cache:
            return BuiltRequest(plan, self._repeat_cache[key], self.settings.stream)
        rng = random.Random(plan.seed) if key is None else None
        builder = {"text": self._text, "image": self._image, "tools": self._tools}[plan.scenario]
        body: dict = {
            "model": self.model,
            "messages": builder(rng),
            "max_tokens": MAX_TOKENS,
            "temperature": 0,
        }
        if plan.scenario == "tools":
            body["tools"] = TOOLS
            body["tool_choice"] = "required"
        if plan.truncate is not None:
            body["truncate_prompt_tokens"] = plan.truncate
        body["stream"] = self.settings.stream
        if self.settings.stream:
            body["stream_options"] = {"include_usage": True}
        data = json.dumps(body, separators=(",", ":")).encode()
        if key is not None:
            self._repeat_cache[key] = data  # a benign race: both threads build the same bytes
        return BuiltRequest(plan, data, self.settings.stream)

    def needs_thread(self, plan: Plan) -> bool:
        """Image encoding takes milliseconds; do it off the event loop (Pillow releases the GIL)."""
        return plan.scenario == "image" and plan.repeat_key not in self._repeat_cache

    # -- message builders; rng=None means the fixed content of a repeat --------------------------------

    def _text(self, rng: random.Random | None) -> list[dict]:
        r = rng or random.Random(1)
        n_words = r.choice((24, 60, 400, 900)) if rng else 700  # short and long; repeats are long
        return [
            {"role": "system", "content": "You are a concise assistant."},
            {"role": "user", "content": _words(r, n_words)},
        ]

    def _image(self, rng: random.Random | None) -> list[dict]:
        r = rng or random.Random(2)
        parts: list[dict] = [{"type": "text", "text": "Describe these images. " + _words(r, 200)}]
        sizes = self.settings.image_sizes
        for i in range(self.settings.images_per_request):
            width, height = r.choice(sizes) if rng else sizes[0]
            fmt = r.choice(FORMATS) if rng else FORMATS[i % len(FORMATS)]
            parts.append(
                {
                    "type": "image_url",
                    "image_url": {"url": data_url(make_image(width, height, fmt, rng), fmt)},
                }
            )
        return [{"role": "user", "content": parts}]

    def _tools(self, rng: random.Random | None) -> list[dict]:
        r = rng or random.Random(3)
        calls = [
            {
                "id": f"call_{i}_{r.getrandbits(32):08x}",
                "type": "function",
                "function": {
                    "name": TOOLS[j]["function"]["name"],
                    "arguments": json.dumps({"query": _words(r, 6)}),
                },
            }
            for i, j in enumerate(r.sample(range(len(TOOLS)), 2))
        ]
        messages: list[dict] = [
            {"role": "system", "content": "You are an operations agent. Always answer with a tool call."},
            {"role": "user", "content": _words(r, 60)},
            {"role": "assistant", "content": "", "tool_calls": calls},
        ]
        for call in calls:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": _tool_result(r, self.settings.tool_result_bytes),
                }
            )
        messages.append({"role": "user", "content": "Now file a ticket about it. " + _words(r, 20)})
        return messages


# Drawing every word per request costs more CPU than the rest of the client; a random window into a
# fixed corpus, behind a random tag, is just as unique for the server and ten times cheaper.
_CORPUS = random.Random(12345).choices(_WORDS, k=8192)


def _words(rng: random.Random, n: int) -> str:
    start = rng.randrange(len(_CORPUS) - n) if n < len(_CORPUS) else 0
    return f"{rng.getrandbits(32):08x} " + " ".join(_CORPUS[start : start + n])


def _tool_result(rng: random.Random, size: int) -> str:
    rows, length = [], 2
    while length < size:
        row = json.dumps({"id": rng.randrange(10**6), "text": _words(rng, 8)})
        rows.append(row)
        length += len(row) + 1
    return ("[" + ",".join(rows) + "]")[: max(2, size)] if size > 0 else ""


def _smooth_weighted_order(weights: dict[str, float]) -> list[str]:
    """One period of a smooth weighted round robin (nginx style): every scenario early and often."""
    scale = 1000 / max(weights.values())
    ints = {name: max(1, round(w * scale)) for name, w in weights.items()}
    # Reduce the period so short runs still see every scenario.
    g = reduce(gcd, ints.values())
    ints = {name: v // g for name, v in ints.items()}
    total = sum(ints.values())
    current = dict.fromkeys(ints, 0)
    order = []
    for _ in range(min(total, 10_000)):
        for name in current:
            current[name] += ints[name]
        best = max(current, key=current.__getitem__)
        current[best] -= total
        order.append(best)
    return order
