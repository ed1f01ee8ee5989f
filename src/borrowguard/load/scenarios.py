"""What the load sends: text, image, tool-heavy and tokenize requests, plus identical repeats.

The failure this tool looks for hides in two places, and the request mix is built to expose both:
- concurrent tokenizer calls with *different* settings make old stacks raise "Already borrowed". In vLLM
  the settings differ by request shape: `max_tokens` decides the truncation length (and, in 0.19–0.20,
  which of two microbatch queues tokenizes the prompt: `max_tokens=1` lands where a request without it
  does), `truncate_prompt_tokens` sets its own, `/v1/completions` adds special tokens where chat does not,
  `bad_words` are encoded on the event loop beside the renderer's threads, `/tokenize` and `/detokenize`
  take yet other paths. The mix varies every one of them, with valid requests only;
- on new stacks the settings leak silently, so one request gets another's truncation. Each scenario
  therefore repeats a few byte-identical requests; their `usage.prompt_tokens` must never differ.

Every size is scaled by the scenario's `ContextFit` scale, so that prompts fit the server's context.
Planning (cheap, on the event loop) is split from building (image encoding, JSON), so building can run
in a worker thread with its own seeded RNG.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce
from itertools import cycle
from math import gcd
from typing import Any

from borrowguard._compat import StrEnum
from borrowguard.data.tools import TOOLS
from borrowguard.load import pooling
from borrowguard.load.filler import tool_result, words
from borrowguard.load.fit import ContextFit, ScenarioSize
from borrowguard.load.images import FORMATS, data_url, make_image

SCENARIOS = ("text", "image", "tools", "tokenize", "embed", "rerank", "score", "pooling", "classify")  # a mix's names
CHAT_MIX = {"text": 2.0, "image": 1.0, "tools": 1.0, "tokenize": 1.0}
# The pooling scenarios (load.pooling) are in verify's default mix too (VerifyConfig): the preflight keeps
# those the server serves, so an embedding or reranking server gets its own endpoints raced and a chat
# server loses nothing.
POOLING_MIX = {"embed": 2.0, "rerank": 1.0, "score": 1.0, "pooling": 1.0, "classify": 1.0}
TRUNCATE_RANGE = (8, 192)
# Not image requests: cutting a multimodal prompt can cut its image placeholders, which a healthy vLLM
# rejects. Image requests still collide with the truncating text/tool requests on the shared tokenizer.
TRUNCATABLE = frozenset({"text", "tools"})
REPEAT_TRUNCATE = 48  # the repeat variant with a fixed truncate_prompt_tokens
MAX_TOKENS = 16
TOOL_MAX_TOKENS = 48  # a forced tool call must fit, or some servers answer 400 (vLLM 0.17)
TOOL_MAX_TOKENS_BOUND = 96  # ... raised up to this when they do: random weights may never close a call, and
# a bigger bound only makes the scenario slow (vLLM 0.17 on a CPU: requests past the drain at 384)
BAD_WORDS = ("zebra", "quantum")
TEXT_WORDS = (24, 60, 400, 900)
IMAGE_WORDS = 200
MIN_WORDS = 4
MIN_IMAGE_SIDE = 32
CHARS_PER_TOKEN_GUESS = 2.5  # without the server's own count: high, so that the first requests fit
_TOKENS_PER_IMAGE_PIXEL = 1 / 784  # Qwen2-VL: one token per 28×28 pixels; others learn from answers


class Endpoint(StrEnum):
    CHAT = "/v1/chat/completions"
    COMPLETION = "/v1/completions"
    TOKENIZE = "/tokenize"
    DETOKENIZE = "/detokenize"
    # the pooling endpoints (load.pooling)
    EMBEDDINGS = "/v1/embeddings"
    SCORE = "/score"
    RERANK = "/rerank"
    V1_RERANK = "/v1/rerank"
    POOLING = "/pooling"
    CLASSIFY = "/classify"


POOLING_ENDPOINTS = frozenset(Endpoint(p) for paths in pooling.SCENARIO_ENDPOINTS.values() for p in paths)


@dataclass(frozen=True)
class ScenarioSettings:
    """The knobs of the request mix (all from the CLI)."""

    mix: dict[str, float] = field(default_factory=lambda: dict(CHAT_MIX))  # verify's default adds POOLING_MIX
    image_sizes: tuple[tuple[int, int], ...] = ((256, 256), (720, 1280))
    images_per_request: int = 1
    tool_result_bytes: int = 2048
    vllm_extensions: bool = True
    stream: bool = False
    truncate_share: float = 0.35
    bad_words_share: float = 0.25
    repeat_every: int = 4
    seed: int = 0


@dataclass(frozen=True)
class RequestPlan:
    """One request to send, decided on the event loop: what to build and how."""

    scenario: str
    variant: str  # "unique", or the name of a repeat variant
    seed: int
    truncate: int | None = None
    endpoint: Endpoint = Endpoint.CHAT
    max_tokens: int = MAX_TOKENS
    bad_words: bool = False
    generation: int = 0  # the ContextFit generation the request is built at

    @property
    def repeat_key(self) -> str | None:
        if self.variant == "unique":
            return None
        key = f"{self.scenario}/{self.variant}"
        return key if self.generation == 0 else f"{key}#{self.generation}"


@dataclass(frozen=True)
class BuiltRequest:
    plan: RequestPlan
    body: bytes
    stream: bool = False
    scale: float = 1.0

    @property
    def path(self) -> str:
        return str(self.plan.endpoint)


class RequestFactory:
    """Plans a deterministic, weighted interleaving of scenarios and builds their JSON bodies."""

    def __init__(self, settings: ScenarioSettings, model: str, fit: ContextFit | None = None) -> None:
        if settings.images_per_request < 1 and "image" in settings.mix:
            raise ValueError("images_per_request must be >= 1")
        self.settings = settings
        self.model = model
        self._fit = fit or ContextFit(max_tokens=self.max_tokens_sent)
        self._rng = random.Random(settings.seed)
        self._order = cycle(_smooth_weighted_order(settings.mix))
        self._counts = dict.fromkeys(settings.mix, 0)
        self._variants = {name: cycle(self.repeat_variants(name)) for name in settings.mix}
        self._repeat_cache: dict[str, bytes] = {}
        # What the server serves, until the preflight says (serve_only): /v1/completions, /detokenize and
        # /v1/chat/completions (a pooling server has not), and per pooling scenario its endpoints.
        self.completions = True
        self.detokenize = True
        self.chat = True
        self.pooling_endpoints: dict[str, tuple[Endpoint, ...]] = {
            name: tuple(Endpoint(p) for p in paths) for name, paths in pooling.SCENARIO_ENDPOINTS.items()
        }
        self.tool_max_tokens = TOOL_MAX_TOKENS  # raised when a forced tool call is cut (raise_tool_max_tokens)

    @property
    def fit(self) -> ContextFit:
        """The workload's current fit to the server's context: what every request is built at."""
        return self._fit

    def refit(self, fit: ContextFit) -> bool:
        """Build from now on at `fit` (made from the current one: `ContextFit.with_context`, `observed`...).
        True when it is another fit. The one way the fit changes: on the event loop, where the session learns
        from answers; a builder on a thread reads the old fit or the new, whole."""
        if fit is self._fit:
            return False
        self._fit = fit
        return True

    @property
    def scenarios(self) -> list[str]:
        return list(self.settings.mix)

    @property
    def max_tokens_sent(self) -> int:
        return TOOL_MAX_TOKENS if "tools" in self.settings.mix else MAX_TOKENS

    def repeat_variants(self, scenario: str) -> list[str]:
        # "plain": no truncation; "trunc": a fixed truncation. A leak shows in either direction.
        if scenario in pooling.POOLING_SCENARIOS:
            return list(pooling.REPEAT_VARIANTS if self.settings.vllm_extensions else ("plain", "batch"))
        truncates = self.settings.vllm_extensions and scenario in TRUNCATABLE
        return ["plain", "trunc"] if truncates else ["plain"]

    def serve_only(self, serves: Callable[[Endpoint], bool]) -> None:
        """Send only to the endpoints for which `serves` is true (the preflight's discovery): a pooling
        scenario none of whose endpoints is served keeps them all, for the preflight to say why and drop it."""
        self.completions = serves(Endpoint.COMPLETION)
        self.detokenize = serves(Endpoint.DETOKENIZE)
        self.chat = serves(Endpoint.CHAT)
        for name, endpoints in self.pooling_endpoints.items():
            self.pooling_endpoints[name] = tuple(e for e in endpoints if serves(e)) or endpoints

    def drop(self, scenario: str) -> None:
        """Stop sending `scenario` (the server cannot take it); the others keep their weights."""
        mix = {k: v for k, v in self.settings.mix.items() if k != scenario}
        if mix and scenario in self.settings.mix:
            self.settings = ScenarioSettings(**{**self.settings.__dict__, "mix": mix})
            self._order = cycle(_smooth_weighted_order(mix))

    def plan(self) -> RequestPlan:
        scenario = next(self._order)
        self._counts[scenario] += 1
        generation = self.fit.generation
        every = self.settings.repeat_every
        if every > 0 and (self._counts[scenario] - 1) % every == 0:  # the first one too: an early baseline
            return self.repeat_plan(scenario, next(self._variants[scenario]), generation)
        return self._unique(scenario, generation)

    def repeat_plan(self, scenario: str, variant: str, generation: int | None = None) -> RequestPlan:
        """The plan of one repeat variant (byte-identical every time at one fit generation): what the load
        repeats, and what verify first sends alone as the serial reference (verify.reference)."""
        generation = self.fit.generation if generation is None else generation
        if scenario in pooling.POOLING_SCENARIOS:  # a repeat goes to one endpoint, always the same
            return RequestPlan(scenario, variant, seed=0, endpoint=self.pooling_endpoints[scenario][0],
                               max_tokens=0, generation=generation)
        return RequestPlan(
            scenario,
            variant,
            seed=0,
            truncate=REPEAT_TRUNCATE if variant == "trunc" else None,
            endpoint=Endpoint.TOKENIZE if scenario == "tokenize" else Endpoint.CHAT,
            max_tokens=self.tool_max_tokens if scenario == "tools" else MAX_TOKENS,
            generation=generation,
        )

    def _unique(self, scenario: str, generation: int) -> RequestPlan:
        r, s = self._rng, self.settings
        ext = s.vllm_extensions
        if scenario in pooling.POOLING_SCENARIOS:
            endpoint = r.choice(self.pooling_endpoints[scenario])
            return RequestPlan(scenario, "unique", r.getrandbits(63), None, endpoint, 0, False, generation)
        truncate = None
        if ext and scenario in TRUNCATABLE and r.random() < s.truncate_share:
            truncate = r.randint(*TRUNCATE_RANGE)
        endpoint = Endpoint.CHAT
        if scenario == "text" and self.completions and (r.random() < 0.5 or not self.chat):
            endpoint = Endpoint.COMPLETION
        elif scenario == "tokenize":
            endpoint = Endpoint.DETOKENIZE if r.random() < 0.3 and self.detokenize else Endpoint.TOKENIZE
        # max_tokens=1 moves vLLM 0.19's truncation length to the model's maximum: another queue.
        max_tokens = self.tool_max_tokens if scenario == "tools" else (1 if r.random() < 0.35 else MAX_TOKENS)
        bad_words = ext and scenario != "tokenize" and r.random() < s.bad_words_share
        return RequestPlan(
            scenario, "unique", r.getrandbits(63), truncate, endpoint, max_tokens, bad_words, generation
        )

    def build(self, plan: RequestPlan) -> BuiltRequest:
        """Thread-safe: uses only the plan's own seed (and a cache of identical repeat bodies)."""
        scale = self.fit.scale(plan.scenario)
        key = plan.repeat_key
        if key is not None and key in self._repeat_cache:
            return BuiltRequest(plan, self._repeat_cache[key], self._streams(plan), scale)
        rng = random.Random(plan.seed) if key is None else None
        body = self.body(plan, rng, scale)
        data = json.dumps(body, separators=(",", ":")).encode()
        if key is not None:
            self._repeat_cache[key] = data  # a benign race: both threads build the same bytes
        return BuiltRequest(plan, data, self._streams(plan), scale)

    def raise_tool_max_tokens(self, context: int | None) -> bool:
        """A forced tool call was cut by max_tokens: double the tools scenario's max_tokens, within
        TOOL_MAX_TOKENS_BOUND and a quarter of the context. False when it is at its bound already."""
        bound = min(TOOL_MAX_TOKENS_BOUND, context // 4) if context else TOOL_MAX_TOKENS_BOUND
        wanted = min(bound, self.tool_max_tokens * 2)
        if wanted <= self.tool_max_tokens:
            return False
        self.tool_max_tokens = wanted
        return True

    @staticmethod
    def is_pooling(scenario: str) -> bool:
        return scenario in pooling.POOLING_SCENARIOS

    def _streams(self, plan: RequestPlan) -> bool:
        return self.settings.stream and plan.endpoint in (Endpoint.CHAT, Endpoint.COMPLETION)

    def body(self, plan: RequestPlan, rng: random.Random | None, scale: float) -> dict[str, Any]:
        """The JSON body of `plan`; `rng=None` gives the fixed content of a repeat."""
        if plan.scenario in pooling.POOLING_SCENARIOS:
            return pooling.body(plan.scenario, self.model, rng, scale, plan.variant,
                                extensions=self.settings.vllm_extensions)
        if plan.endpoint is Endpoint.DETOKENIZE:
            r = rng or random.Random(4)
            # ids below 256 exist in every byte-level and most other vocabularies
            return {"model": self.model, "tokens": [r.randrange(256) for _ in range(r.randint(4, 64))]}
        messages = {"text": self._text, "image": self._image, "tools": self._tools, "tokenize": self._text}[
            plan.scenario
        ](rng, scale)
        body: dict[str, Any] = {"model": self.model}
        if plan.endpoint is Endpoint.COMPLETION:
            body["prompt"] = "\n\n".join(m["content"] for m in messages if isinstance(m["content"], str))
        else:
            body["messages"] = messages
        if plan.scenario == "tools":
            body["tools"] = TOOLS
            if plan.endpoint is not Endpoint.TOKENIZE:
                body["tool_choice"] = "required"
        if plan.endpoint is Endpoint.TOKENIZE:
            return body
        body["max_tokens"] = plan.max_tokens
        body["temperature"] = 0
        if plan.truncate is not None:
            body["truncate_prompt_tokens"] = plan.truncate
        if plan.bad_words:
            body["bad_words"] = list(BAD_WORDS)
        if self._streams(plan):
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        else:
            body["stream"] = False
        return body

    def needs_thread(self, plan: RequestPlan) -> bool:
        """Image encoding takes milliseconds; do it off the event loop (Pillow releases the GIL)."""
        return plan.scenario == "image" and plan.repeat_key not in self._repeat_cache

    # -- sizes, for fitting the context --------------------------------------------------------------

    def probe_body(self, scenario: str, endpoint: Endpoint, scale: float) -> dict[str, Any]:
        """A small, valid request of `scenario` on `endpoint`, for the preflight."""
        if scenario in pooling.POOLING_SCENARIOS:
            return pooling.probe_body(scenario, self.model)
        max_tokens = TOOL_MAX_TOKENS if scenario == "tools" else 1
        plan = RequestPlan(scenario, "probe", seed=1, endpoint=endpoint, max_tokens=max_tokens)
        body = self.body(plan, random.Random(1), scale)
        body["stream"] = False
        body.pop("stream_options", None)
        return body

    def estimate_all(self, counts: dict[str, float] | None) -> None:
        """Fit every scenario: sizes from the server's own token counts (keyed by the JSON of the body
        measured) where given, else from a deliberately high guess of tokens per character."""

        def count(body: dict[str, Any]) -> float:
            key = json.dumps(body, sort_keys=True)
            if counts and key in counts:
                return counts[key]
            return _chars(body) / CHARS_PER_TOKEN_GUESS

        self.refit(self.fit.with_sizes({scenario: self.estimate(scenario, count) for scenario in self.scenarios}))

    def largest(self, scenario: str, scale: float) -> dict[str, Any]:
        """The /tokenize body of the scenario's largest request at `scale` (images left out)."""
        if scenario in pooling.POOLING_SCENARIOS:
            return pooling.largest_prompt(self.model, scale)
        r = _Largest(0)
        messages = {"text": self._text, "image": self._image, "tools": self._tools, "tokenize": self._text}[
            scenario
        ](r, scale)
        for message in messages:
            if isinstance(message["content"], list):
                message["content"] = " ".join(p["text"] for p in message["content"] if p["type"] == "text")
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if scenario == "tools":
            body["tools"] = TOOLS
        return body

    def image_tokens(self, scale: float) -> float:
        """An estimate of the image tokens of the largest image request (learned answers correct it)."""
        if "image" not in self.settings.mix:
            return 0.0
        area = max(w * h for w, h in self.settings.image_sizes) * scale
        return area * _TOKENS_PER_IMAGE_PIXEL * self.settings.images_per_request

    def estimate(self, scenario: str, count: Any) -> ScenarioSize:
        """A scenario's size from `count(body) -> tokens` at two scales (fixed + scaled parts)."""
        full, half = float(count(self.largest(scenario, 1.0))), float(count(self.largest(scenario, 0.5)))
        fixed = max(0.0, 2 * half - full)
        scaled = max(0.0, full - fixed)
        if scenario == "image":
            scaled += self.image_tokens(1.0)
        return ScenarioSize(fixed, scaled)

    # -- message builders; rng=None means the fixed content of a repeat --------------------------------

    def _text(self, rng: random.Random | None, scale: float) -> list[dict]:
        r = rng or random.Random(1)
        n_words = r.choice(TEXT_WORDS) if rng else 700  # short and long; repeats are long
        return [
            {"role": "system", "content": "You are a concise assistant."},
            {"role": "user", "content": words(r, _scaled(n_words, scale))},
        ]

    def _image(self, rng: random.Random | None, scale: float) -> list[dict]:
        r = rng or random.Random(2)
        text = "Describe these images. " + words(r, _scaled(IMAGE_WORDS, scale))
        parts: list[dict] = [{"type": "text", "text": text}]
        sizes = self.settings.image_sizes
        side = math.sqrt(scale)  # image tokens grow with the area
        for i in range(self.settings.images_per_request):
            width, height = r.choice(sizes) if rng else sizes[0]
            width, height = max(MIN_IMAGE_SIDE, int(width * side)), max(MIN_IMAGE_SIDE, int(height * side))
            fmt = r.choice(FORMATS) if rng else FORMATS[i % len(FORMATS)]
            if isinstance(r, _Largest):
                continue  # sizes only: no image is drawn
            url = data_url(make_image(width, height, fmt, rng), fmt)
            parts.append({"type": "image_url", "image_url": {"url": url}})
        return [{"role": "user", "content": parts}]

    def _tools(self, rng: random.Random | None, scale: float) -> list[dict]:
        r = rng or random.Random(3)
        calls = [
            {
                "id": f"call_{i}_{r.getrandbits(32):08x}",
                "type": "function",
                "function": {
                    "name": TOOLS[j]["function"]["name"],
                    "arguments": json.dumps({"query": words(r, 6)}),
                },
            }
            for i, j in enumerate(r.sample(range(len(TOOLS)), 2))
        ]
        messages: list[dict] = [
            {"role": "system", "content": "You are an operations agent. Always answer with a tool call."},
            {"role": "user", "content": words(r, _scaled(60, scale))},
            {"role": "assistant", "content": "", "tool_calls": calls},
        ]
        result_bytes = int(self.settings.tool_result_bytes * scale)
        for call in calls:
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": tool_result(r, result_bytes)}
            )
        messages.append({"role": "user", "content": "Now file a ticket about it. " + words(r, 20)})
        return messages


class _Largest(random.Random):
    """An RNG that always draws the largest option: for measuring a scenario's largest prompt."""

    def choice(self, seq: Any) -> Any:
        if seq and isinstance(seq[0], int):
            return max(seq)
        if seq and isinstance(seq[0], tuple):
            return max(seq, key=lambda wh: wh[0] * wh[1])
        return seq[0]


def _chars(body: dict[str, Any]) -> int:
    text = sum(len(m["content"]) for m in body.get("messages", []) if isinstance(m.get("content"), str))
    text += len(body.get("prompt", "")) if isinstance(body.get("prompt"), str) else 0
    return text + len(json.dumps(body.get("tools", ""))) + 16 * len(body.get("messages", []))


def _scaled(n: int, scale: float) -> int:
    return max(MIN_WORDS, int(n * scale))


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
