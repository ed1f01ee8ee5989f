"""What a server's start-up lines say: its configuration, and whether it is still starting.

vLLM logs its version (`vLLM API server version 0.19.1`, the ASCII banner, `Initializing a V1 LLM engine
(v0.19.1) with config: ...`), the arguments that differ from the defaults (`non-default args: {...}`, or
`args: Namespace(...)` in old versions) and its progress through start-up (weights, torch.compile, CUDA
graphs, KV cache) until it serves (`Application startup complete`). Lines are often cut in pastes, so
every fact is read with its own bounded regex rather than by parsing the whole dict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from enum import Enum
from typing import Any

from borrowguard.knowledge.model import jsonable


class Phase(Enum):
    BEGIN = "begin"
    """A start-up begins (a new run of the server)."""
    PROGRESS = "progress"
    """The server is still starting (loading, compiling, capturing graphs)."""
    READY = "ready"
    """The server (or its engine) finished starting."""


@dataclass(frozen=True)
class StartupFacts:
    """The facts the knowledge base's rules may use; None where the log does not say."""

    vllm_version: str | None = None
    model: str | None = None
    max_model_len: int | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    max_num_seqs: int | None = None
    renderer_num_workers: int | None = None
    structured_outputs_backend: str | None = None

    def known(self) -> bool:
        return any(getattr(self, f.name) is not None for f in fields(self))

    def facts(self) -> dict[str, Any]:
        """The known facts by name (for rule conditions)."""
        return {k: v for k, v in self.to_dict().items() if v is not None}

    def to_dict(self) -> dict[str, Any]:
        return jsonable(self)  # type: ignore[no-any-return]

    def merged(self, later: StartupFacts) -> StartupFacts:
        """These facts, with what `later` knows over them."""
        return replace(self, **later.facts())


_PHASES: tuple[tuple[Phase, tuple[str, ...]], ...] = (
    (
        Phase.BEGIN,
        (
            "vLLM API server version", "non-default args", "Initializing a V1 LLM engine", "Initializing an LLM engine",
            "args: Namespace(",
        ),
    ),
    (
        Phase.PROGRESS,
        (
            "Starting to load model", "Loading model", "Loading weights", "Model loading took", "torch.compile",
            "Capturing CUDA graph", "KV cache memory", "KV cache size",
        ),
    ),
    (
        Phase.READY,
        ("Application startup complete", "Uvicorn running on", "Starting vLLM API server", "init engine (profile"),
    ),
)
# Few, and shared with the signatures' anchors where possible: the multi-pattern search slows down
# sharply past 64 patterns in all.
_ENGINE = "LLM engine (v"  # in "Initializing a V1 LLM engine (v0.19.1) with config: ..." and its failure dump
ANCHORS: tuple[str, ...] = (*(a for _, group in _PHASES for a in group if "LLM engine" not in a), _ENGINE)
"""Literals of every line this module reads (for the bulk scan's anchor search)."""
_ANY = re.compile("|".join(re.escape(a) for a in ANCHORS))

_VERSION = re.compile(
    r"(?:vLLM API server version |LLM engine \(v)"
    r"(?P<v>\d[\w.+-]{0,80})"
)
_INT = r"(?P<v>\d{1,9})\b"


def _key(name: str, value: str = _INT) -> re.Pattern[str]:
    # 'name': value (a dict repr) or name=value (Namespace and engine-config reprs)
    return re.compile(rf"(?:'{name}': |\b{name}=){value}")


_STR = r"'(?P<v>[^'\n]{1,512})'"
_FACTS: tuple[tuple[str, tuple[re.Pattern[str], ...]], ...] = (
    ("model", (_key("model", _STR), _key("model_tag", _STR))),
    ("max_model_len", (_key("max_model_len"), _key("max_seq_len"))),
    ("tensor_parallel_size", (_key("tensor_parallel_size"),)),
    ("pipeline_parallel_size", (_key("pipeline_parallel_size"),)),
    ("max_num_seqs", (_key("max_num_seqs"),)),
    ("renderer_num_workers", (_key("renderer_num_workers"),)),
    (
        "structured_outputs_backend",
        (
            _key("guided_decoding_backend", r"'(?P<v>[\w-]{1,40})'"),
            re.compile(r"[Ss]tructured_?[Oo]utputs_?[Cc]onfig\W{0,4}[^\n]{0,200}?backend(?:': |=)'(?P<v>[\w-]{1,40})'"),
        ),
    ),
)
_DEFAULT_ONE = ("tensor_parallel_size", "pipeline_parallel_size", "renderer_num_workers")
"""Facts that equal 1 when the server lists its non-default arguments without them."""


class StartupWatch:
    """Reads start-up lines as they come: the configuration (the first value of each fact wins, except
    that an engine's own config line corrects an argument's) and the start-up phase."""

    def __init__(self) -> None:
        self._facts: dict[str, Any] = {}  # fact -> its value, as read so far
        self._args_seen = False

    def observe(self, message: str) -> Phase | None:
        """The phase event `message` marks, if any; the configuration it reveals is kept."""
        if _ANY.search(message) is None:
            return None
        m = _VERSION.search(message)
        if m and self._facts.get("vllm_version") is None:
            self._facts["vllm_version"] = m["v"].rstrip(".)")
        is_args = "non-default args" in message or "args: Namespace(" in message
        engine_line = _ENGINE in message  # also the config dump an engine writes when it fails
        if is_args or engine_line:
            self._args_seen = self._args_seen or is_args
            self._read_facts(message, override=engine_line)
        for phase, group in _PHASES:
            if any(a in message for a in group):
                return phase
        return None

    def config(self) -> StartupFacts | None:
        """What is known so far (None when nothing is)."""
        if not self._facts:
            return None
        defaults = dict.fromkeys(_DEFAULT_ONE, 1) if self._args_seen else {}
        return StartupFacts(**{**defaults, **self._facts})

    def _read_facts(self, message: str, override: bool) -> None:
        for name, patterns in _FACTS:
            if self._facts.get(name) is not None and not override:
                continue
            for pattern in patterns:
                m = pattern.search(message)
                if m:
                    value: Any = m["v"]
                    if name not in ("model", "structured_outputs_backend"):
                        value = int(value)
                    self._facts[name] = value
                    break
