"""Run the tokenizer race on this machine's stack and say what it does: crash, silent corruption, or safe.

    report = run_repro(threads=8, seconds=5)      # unguarded pass, then guarded pass
    report.verdict                                # "crash" on transformers 4.57 + tokenizers 0.22
    report.to_dict()

The workload is `borrowguard.race`'s: per-call mixes of truncation/padding settings, pairs, batches and
chat templates, checked against serial results computed first. The guarded pass runs the same calls on a
fresh tokenizer under `borrowguard.protect()` and compares them with the same unguarded serial results,
for at least as long as the unguarded pass ran. A pass is "safe" only after enough calls that overlapped.
"""

from __future__ import annotations

import importlib
import platform
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from borrowguard._compat import StrEnum
from borrowguard.errors import ConfigError, UserInputError
from borrowguard.race import HammerResult, hammer, make_calls, make_processor, reference

__all__ = [
    "CRASH",
    "INCONCLUSIVE",
    "SAFE",
    "SILENT_CORRUPTION",
    "PassResult",
    "ReproReport",
    "ReproVerdict",
    "Stack",
    "describe",
    "run_repro",
    "verdict_of",
]



class ReproVerdict(StrEnum):
    CRASH = "crash"
    SILENT_CORRUPTION = "silent-corruption"
    SAFE = "safe"
    INCONCLUSIVE = "inconclusive"


CRASH, SILENT_CORRUPTION, SAFE, INCONCLUSIVE = ReproVerdict
BORROW_KINDS = frozenset({"Already borrowed"})
"""Exceptions from two threads borrowing the Rust tokenizer at once (tokenizers <= 0.22.2)."""

N_CALLS = 160
MAX_THREADS = 256
MAX_SECONDS = 3600.0
MIN_SECONDS = 1.0
MIN_PASS_SECONDS = 0.5
FEW_CALLS = 200
"""Below this many calls, or with no call overlapping another, a clean pass is inconclusive, never safe."""

Progress = Callable[[str, HammerResult, float], None]
"""on_progress(pass name, snapshot, seconds allotted to that pass)."""


@dataclass(frozen=True)
class Stack:
    python: str
    transformers: str
    tokenizers: str
    vllm: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PassResult:
    """One hammer pass (unguarded or guarded), its verdict and the seconds it was given."""

    name: str
    verdict: ReproVerdict
    result: HammerResult
    budget: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        data = self.result.to_dict()
        del data["calls_by_shape"]
        return {"verdict": self.verdict, **data}


@dataclass(frozen=True)
class ReproReport:
    stack: Stack
    threads: int
    seconds: float
    paths: tuple[str, ...]
    """What was driven: "tokenizer", "processor", "vllm-loader"."""
    unguarded: PassResult | None
    guarded: PassResult | None
    notes: tuple[str, ...] = ()

    @property
    def counting(self) -> PassResult:
        """The pass whose verdict counts: the unguarded one when it ran (it is the proof about this stack)."""
        counted = self.unguarded or self.guarded
        assert counted is not None
        return counted

    @property
    def verdict(self) -> ReproVerdict:
        return self.counting.verdict

    @property
    def exit_code(self) -> int:
        return 0 if self.verdict == SAFE else 1

    def to_dict(self) -> dict[str, Any]:
        """The issue's schema; the top-level counts are the counting pass's ("pass" says which), and
        "guarded" is the guarded pass when it ran beside an unguarded one, else null."""
        counted = self.counting.to_dict()
        return {
            "verdict": self.verdict,
            "stack": self.stack.to_dict(),
            "threads": self.threads,
            "seconds": self.seconds,
            "calls": counted["calls"],
            "exceptions": counted["exceptions"],
            "wrong_outputs": counted["wrong_outputs"],
            "guarded": self.guarded.to_dict() if self.guarded and self.unguarded else None,
            "pass": self.counting.name,
            "paths": list(self.paths),
            "examples": counted["examples"],
            "notes": list(self.notes),
        }


def verdict_of(result: HammerResult) -> ReproVerdict:
    """crash: borrow-conflict exceptions ("Already borrowed"); silent-corruption: none of those, but calls got
    another call's settings (wrong outputs, or errors those settings cause such as "Truncation error");
    safe: at least FEW_CALLS calls, some of them overlapping another thread's, and every one matched the
    serial reference; inconclusive: a clean pass with fewer calls or none concurrent (it proves nothing)."""
    if any(kind in BORROW_KINDS for kind in result.exceptions):
        return CRASH
    if result.total_wrong or result.total_exceptions:
        return SILENT_CORRUPTION
    return SAFE if result.calls >= FEW_CALLS and result.concurrent else INCONCLUSIVE


def run_repro(
    *,
    tokenizer: str | Path | None = None,
    threads: int = 8,
    seconds: float = 5.0,
    guard_only: bool = False,
    processor: bool = False,
    vllm: bool = False,
    seed: int = 0,
    on_progress: Progress | None = None,
) -> ReproReport:
    """Unguarded pass then guarded pass (or only the guarded one), within `seconds` from the call.

    Setup (imports, loading, the serial reference) comes out of the same budget and each pass gets an
    equal share of what is left, so the whole run takes `seconds` plus the time for in-flight calls to
    return (and the guarded pass's reload). Raises UserInputError for bad input.
    """
    start = time.monotonic()
    _check(threads, seconds)
    path = _tokenizer_dir(tokenizer)
    import borrowguard

    notes: list[str] = []
    was_installed = borrowguard.is_installed()
    if was_installed and not guard_only:
        # e.g. under `borrowguard run`: the unguarded pass must really be unguarded.
        borrowguard.uninstall()
        notes.append("the guard was installed in this process; it was uninstalled for the unguarded pass")
    try:
        load = _loader(path, processor=processor, vllm=vllm)
        target = load()
        calls = make_calls(target, random.Random(seed), N_CALLS)
        expected = reference(target, calls)
        paths = ("vllm-loader" if vllm else "tokenizer",) + (("processor",) if processor else ())
        stack = _stack()

        passes = ["guarded"] if guard_only else ["unguarded", "guarded"]
        results = _run_passes(passes, load, target, calls, expected, start + seconds, threads, seed,
                              on_progress, notes)
    finally:
        if was_installed and not borrowguard.is_installed():
            borrowguard.install()
    return ReproReport(
        stack=stack,
        threads=threads,
        seconds=seconds,
        paths=paths,
        unguarded=results.get("unguarded"),
        guarded=results.get("guarded"),
        notes=tuple(notes),
    )


def _run_passes(
    passes: list[str],
    load: Callable[[], Any],
    target: Any,
    calls: list[Any],
    expected: list[Any],
    deadline: float,
    threads: int,
    seed: int,
    on_progress: Progress | None,
    notes: list[str],
) -> dict[str, PassResult]:
    """Each pass hammers the same calls for the same share of the budget left after setup: the guarded
    pass never gets less time than the unguarded control it is compared with."""
    import borrowguard

    results: dict[str, PassResult] = {}
    # Setup came out of the budget; on a slow start each pass still gets a minimum to count.
    budget = max(MIN_PASS_SECONDS, (deadline - time.monotonic()) / len(passes))
    for name in passes:
        if name == "guarded":
            target = borrowguard.protect(load())  # a fresh object: nothing left from the first pass

        def progress(snapshot: HammerResult, name: str = name, budget: float = budget) -> None:
            if on_progress is not None:
                on_progress(name, snapshot, budget)

        # Enough calls for a verdict even on a slow machine: the pass runs on past its budget until FEW_CALLS.
        result = hammer(target, calls, expected, threads=threads, seconds=budget, min_calls=FEW_CALLS, seed=seed,
                        on_progress=progress)
        results[name] = PassResult(name, verdict_of(result), result, budget)
        if results[name].verdict == INCONCLUSIVE:
            overlapped = "" if result.concurrent else ", none of them overlapping another thread's"
            notes.append(f"the {name} pass made only {result.calls} clean calls{overlapped}; "
                         "give it more seconds (and more than one thread) for a verdict")
    return results


def _check(threads: int, seconds: float) -> None:
    if not 1 <= threads <= MAX_THREADS:
        raise ConfigError("threads", f"{{}} must be between 1 and {MAX_THREADS}, got {threads}")
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        bounds = f"{MIN_SECONDS:g} and {MAX_SECONDS:g}"
        raise ConfigError("seconds", f"{{}} must be between {bounds}, got {seconds:g}")


def _tokenizer_dir(tokenizer: str | Path | None) -> Path:
    if tokenizer is None:
        from borrowguard.data import tokenizer_path

        return tokenizer_path()
    path = Path(tokenizer).expanduser()
    if not path.is_dir():
        raise ConfigError("tokenizer", "{} ", detail=f"{tokenizer}: not a directory (give a local tokenizer directory)")
    if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        raise ConfigError("tokenizer", "{} ", detail=f"{tokenizer}: no tokenizer.json or tokenizer_config.json in it")
    return path


def _loader(path: Path, *, processor: bool, vllm: bool) -> Callable[[], Any]:
    """A function returning a fresh, loaded target each time it is called (one per pass)."""
    load_tokenizer = _vllm_loader(path) if vllm else _hf_loader(path)
    if not processor:
        return load_tokenizer

    def load_processor() -> Any:
        try:
            return make_processor(load_tokenizer())
        except ValueError as exc:
            raise ConfigError("processor", "{}: ", detail=str(exc)) from None
        except ImportError as exc:
            raise ConfigError("processor", "{} needs transformers and Pillow: ", detail=str(exc)) from None

    return load_processor


def _hf_loader(path: Path) -> Callable[[], Any]:
    from transformers import AutoTokenizer

    def load() -> Any:
        try:
            tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        except Exception as exc:  # transformers raises OSError, ValueError, KeyError... for a bad dir
            reason = f"{type(exc).__name__}: {exc}"
            raise UserInputError(f"cannot load a tokenizer from {path}: {reason}") from None
        if not getattr(tok, "is_fast", False):
            raise UserInputError(f"{path} loads a slow (Python) tokenizer; the race is in fast tokenizers")
        return tok

    return load


def _vllm_loader(path: Path) -> Callable[[], Any]:
    """vLLM's own tokenizer loader (its caching wrapper included), where the installed version has one."""
    try:
        importlib.import_module("vllm")
    except ImportError:
        raise ConfigError("vllm", "{}: vLLM is not installed in this environment") from None
    get_tokenizer = None
    for module in ("vllm.tokenizers", "vllm.transformers_utils.tokenizer"):
        try:
            get_tokenizer = importlib.import_module(module).get_tokenizer
            break
        except (ImportError, AttributeError):
            continue
    if get_tokenizer is None:
        raise ConfigError("vllm", "{}: this vLLM version has no get_tokenizer() that borrowguard knows")

    def load() -> Any:
        return get_tokenizer(str(path), trust_remote_code=False)

    return load


def _stack() -> Stack:
    import tokenizers
    import transformers

    try:
        from importlib.metadata import version

        vllm_version: str | None = version("vllm")
    except Exception:
        vllm_version = None
    return Stack(platform.python_version(), transformers.__version__, tokenizers.__version__, vllm_version)


def describe(verdict: ReproVerdict) -> str:
    """One sentence per verdict, for people."""
    return {
        CRASH: "calls fail with 'Already borrowed': in a server, failed requests (HTTP 400/500) and retries",
        SILENT_CORRUPTION: "no borrow errors, but calls silently got another call's truncation/padding",
        SAFE: "every concurrent call returned exactly its serial result",
        INCONCLUSIVE: "too few calls, or none concurrent, in the time given to call it safe",
    }[verdict]
