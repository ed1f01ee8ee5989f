"""Drive vLLM's own frontend code from 8 threads, with or without borrowguard, and report as JSON.

Run by tests/vllm/test_vllm_frontend.py inside the lean vLLM environment (scripts/vllm_env.py), one
process per mode, because plugins load once per process:

    python tests/vllm/frontend_driver.py --mode plugin --model-dir DIR --out result.json

Modes:
    bare    BORROWGUARD_DISABLE=1, plugins loaded by building `vllm serve`'s argument parser: the plugin
            says it is disabled and vLLM runs unprotected.
    plugin  plugins loaded by building `vllm serve`'s argument parser, before any tokenizer exists.
    late    a tokenizer is created through vLLM's cached loader first, plugins are loaded after it,
            and the renderer then reuses that very tokenizer: the guard must cover existing instances
            (and vLLM's CachedTokenizer dynamic subclass).

What runs is vLLM's code: its tokenizer loader (cached_get_tokenizer -> CachedHfTokenizer ->
get_cached_tokenizer), its HfRenderer (render_cmpl / render_chat: chat templates with tools, prompt
tokenization with vLLM's TokenizeParams: per-request truncate_prompt_tokens, left truncation,
detokenization), and the output processor's IncrementalDetokenizer (a DecodeStream on the backend). Results are compared with a serial, single-thread reference by
borrowguard.race.hammer.

Not driven: vLLM's multimodal processor. Every multimodal model module of vLLM 0.19.1 (or the
transformers 5.5.3 processor it loads) imports torchvision, and no CPU build of torchvision can be
installed here (PyPI's wheels are CUDA builds that fail against the CPU torch: "operator torchvision::nms
does not exist").
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

_PROSE = (
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Tokenizers shared between threads must never see another request's settings.",
    "Please summarise the attached quarterly report in three short bullet points.",
    "def add(a, b):\n    return a + b  # code tokens split differently from prose",
    "Numbers like 3.14159, 2718 and 1e-9 split in interesting ways, as do dates: 2026-11-30.",
    "Emoji too: 🚀🔥✨ and accents: café, naïve, Zürich, and some 中文 text.",
)

def write_model_dir(path: Path) -> Path:
    """A tiny Qwen2-style model directory: the bundled ChatML tokenizer and a config.json, no weights.

    Enough for vLLM's ModelConfig, tokenizer loader and renderer; nothing is downloaded.
    """
    import shutil

    from borrowguard.data import CHATML, tokenizer_path

    path.mkdir(parents=True, exist_ok=True)
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
        "vocab_size": 16000,
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
    return calls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["bare", "plugin", "late"], required=True)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=4.0)
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

    import vllm.plugins
    from vllm.tokenizers.registry import cached_get_tokenizer

    if args.mode in ("bare", "plugin"):
        # Exactly as `vllm serve` does: building its argument parser loads the general plugins, before
        # any tokenizer exists (EngineArgs and the model registry would load them later otherwise).
        try:
            from vllm.entrypoints.openai.cli_args import make_arg_parser
        except ImportError:  # vLLM >= 0.2x moved it
            from vllm.entrypoints.common.cli_args import make_arg_parser
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        make_arg_parser(FlexibleArgumentParser())
        if not vllm.plugins.plugins_loaded:
            raise RuntimeError("building vllm serve's parser no longer loads the general plugins")
    early = plugins_before = None
    if args.mode == "late":
        # Same arguments as cached_tokenizer_from_config, so the renderer gets this very object.
        early = cached_get_tokenizer(
            args.model_dir, runner_type="generate", tokenizer_mode="auto", revision=None,
            trust_remote_code=False,
        )
        plugins_before = vllm.plugins.plugins_loaded
        vllm.plugins.load_general_plugins()

    from vllm.config import ModelConfig, VllmConfig
    from vllm.renderers.registry import renderer_from_config

    model_config = ModelConfig(
        model=args.model_dir,
        tokenizer=args.model_dir,
        renderer_num_workers=THREADS,  # the server's own concurrency knob
        max_model_len=MAX_MODEL_LEN,
    )
    renderer = renderer_from_config(VllmConfig(model_config=model_config))
    tokenizer = renderer.get_tokenizer()
    setup_s = time.monotonic() - t0

    from borrowguard.race import Raised, hammer, reference

    frontend = Frontend(renderer)
    calls = make_calls(tokenizer)
    expected = reference(frontend, calls)
    ref_errors = Counter(e.kind for e in expected if isinstance(e, Raised))
    result = hammer(frontend, calls, expected, threads=THREADS, seconds=args.seconds)

    import borrowguard

    report = {
        "mode": args.mode,
        "platform": platform,
        "vllm": vllm.__version__,
        "setup_s": round(setup_s, 1),
        "plugin_log": records.plugin,
        "guard_installed": borrowguard.is_installed(),
        "tokenizer_class": type(tokenizer).__name__,
        "fast_detokenizer": any(isinstance(e, tuple) and e[:1] == ("FastIncrementalDetokenizer",) for e in expected),
        "tokenizer_is_early": early is not None and tokenizer is early,
        # vLLM >= 0.21's renderer works on a shallow copy (same backend) of the loaded tokenizer.
        "tokenizer_shares_early_backend": early is not None and tokenizer._tokenizer is early._tokenizer,
        "plugins_loaded_before_late_load": plugins_before,
        "reference_errors": sum(ref_errors.values()),
        "hammer": result.to_dict(),
    }
    Path(args.out).write_text(json.dumps(report, indent=2), encoding="utf-8")
    renderer.shutdown()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    sys.exit(main())
