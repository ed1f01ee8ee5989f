"""vLLM >= 0.21's renderer tokenizer pool, on vLLM's own code, with the production-size tokenizer (issue 21).

`make test-vllm` runs these in the vLLM 0.32 environment (they skip where vLLM has no pool). The renderer is
built as `vllm serve` builds it (plugins loaded by its argument parser, then `renderer_from_config` with
the server's default `renderer_num_workers` of 1), on DeepSeek V4's tokenizer.json (129k vocab). Deep copies
of the tokenizer are counted by the driver (vLLM's pool makes them with copy.deepcopy). Every result is
compared with a serial reference computed UNGUARDED in its own process.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from frontend_driver import write_model_dir
from test_vllm_frontend import (
    MIN_CALLS,
    _release,
    assert_mutation_seen,
    assert_versions_named,
    drive,
    reference_file,
    shapes,
)

pytestmark = pytest.mark.skipif(_release("vllm") < (0, 21), reason="vLLM < 0.21 has no renderer pool")

WORKERS = 1  # vllm serve's default --renderer-num-workers; the pool starts with WORKERS + 1 copies
REPLACED = "renderer pool replaced by the guarded tokenizer"


@pytest.fixture(scope="module")
def production_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model_dir(tmp_path_factory.mktemp("tiny-deepseek"), tokenizer="production")


@pytest.fixture(scope="module")
def production_expected(production_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return reference_file(production_dir, tmp_path_factory.mktemp("reference-production"))


def test_plugin_replaces_the_pool_no_deep_copies_every_call_exact(
    production_dir: Path, production_expected: Path, tmp_path: Path
) -> None:
    report = drive("plugin", production_dir, tmp_path, production_expected)
    [line] = report["plugin_log"]
    assert line.startswith("INFO ") and "tokenizer guard installed" in line and REPLACED in line, line
    assert_versions_named(line)
    assert report["tokenizer_len"] == 129280, "the production-size tokenizer must be the one under test"
    assert report["thread_safe_mark"] is True, "vLLM must see the renderer's tokenizer as thread-safe"
    assert "TokenizerPool" not in report["tokenizer_class"], report["tokenizer_class"]
    assert report["deep_copies_at_start"] == 0
    assert report["deep_copies_under_load"] == 0
    hammer = report["hammer"]
    assert report["reference_errors"] == 0
    assert hammer["calls"] >= MIN_CALLS, hammer
    assert set(hammer["calls_by_shape"]) >= shapes(report)
    assert report["warmup_wrong"] == []
    assert hammer["exceptions"] == {}, hammer["examples"]
    assert hammer["wrong_outputs"] == {}, hammer["examples"]
    assert_mutation_seen(report["mutation"])


def test_without_borrowguard_vllm_builds_its_pool_of_deep_copies(
    production_dir: Path, production_expected: Path, tmp_path: Path
) -> None:
    # The control: the same counter sees vLLM's own copies, and the same mutation check sees the pool miss
    # a runtime add_special_tokens (its copies never get it: vllm-project/vllm#40949's closing note).
    report = drive("bare", production_dir, tmp_path, production_expected, min_calls=0, BORROWGUARD_DISABLE="1")
    [line] = report["plugin_log"]
    assert "disabled by BORROWGUARD_DISABLE" in line, line
    assert report["thread_safe_mark"] is True and "TokenizerPool" in report["tokenizer_class"]
    assert report["deep_copies_at_start"] == WORKERS + 1
    assert report["mutation"].get("after_wrong", 0) > 0, report["mutation"]
    print("unguarded behind vLLM's pool:", report["hammer"]["exceptions"], report["hammer"]["wrong_outputs"],
          "deep copies under load:", report["deep_copies_under_load"])


def test_keep_switch_keeps_vllms_pool_and_says_so(
    production_dir: Path, production_expected: Path, tmp_path: Path
) -> None:
    # No call-count floor: vLLM's pool deep-copies the 129k tokenizer on the request path (seconds each).
    report = drive("plugin", production_dir, tmp_path, production_expected, min_calls=0,
                   BORROWGUARD_VLLM_POOL="keep")
    [line] = report["plugin_log"]
    assert "tokenizer guard installed" in line and "renderer pool kept (BORROWGUARD_VLLM_POOL=keep)" in line, line
    assert "TokenizerPool" in report["tokenizer_class"]
    assert report["deep_copies_at_start"] == WORKERS + 1
    # The pool's copies are exclusive (one thread at a time): the guard steps aside for them, at start and
    # on the request path, while the paths vLLM never routes to them (tokenize, encode_plus, _tokenizer) run
    # on the shared tokenizer, still guarded. Every call exact against the unguarded serial reference.
    assert report["deep_copies_guarded"] == 0, report
    assert report["shared_tokenizer_guarded"] is True, report
    hammer = report["hammer"]
    assert hammer["calls"] > 0 and report["deep_copies_at_start"] + report["deep_copies_under_load"] > 0, hammer
    assert report["warmup_wrong"] == []
    assert hammer["exceptions"] == {}, hammer["examples"]
    assert hammer["wrong_outputs"] == {}, hammer["examples"]


UNKNOWN_SHAPE = """
import copy, logging, sys
sys.path.insert(0, {here!r})
from frontend_driver import force_cpu_platform, tokenizer_dir, _serve_parser_factory
from pathlib import Path
import vllm.logger
logging.getLogger("vllm").setLevel(logging.INFO)
force_cpu_platform()
import vllm.tokenizers.hf as hf
vllms = hf.maybe_make_thread_pool

def maybe_make_thread_pool(tokenizer, copies=1, *, share=False):  # a vLLM whose pool changed shape
    return vllms(tokenizer, copies)

hf.maybe_make_thread_pool = maybe_make_thread_pool
from vllm.utils.argparse_utils import FlexibleArgumentParser
_serve_parser_factory()(FlexibleArgumentParser())  # loads the plugins, as vllm serve does
assert hf.maybe_make_thread_pool is maybe_make_thread_pool, "the plugin must leave an unknown pool alone"
from vllm.config import ModelConfig, VllmConfig
from vllm.renderers.registry import renderer_from_config
model = Path({model!r})
made = []
deepcopy = copy.deepcopy
copy.deepcopy = lambda obj, *a, **k: (made.append(type(obj).__name__), deepcopy(obj, *a, **k))[1]
config = ModelConfig(model=str(model), tokenizer=str(tokenizer_dir(model)), max_model_len=2048)
renderer = renderer_from_config(VllmConfig(model_config=config))
print("class", type(renderer.get_tokenizer()).__name__, "copies", len(made))
renderer.shutdown()
"""


def test_a_pool_of_unknown_shape_is_kept_and_the_line_says_why(production_dir: Path) -> None:
    import subprocess
    import sys

    from test_vllm_frontend import HERE, TIMEOUT_S, _env

    code = UNKNOWN_SHAPE.format(here=str(HERE), model=str(production_dir))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(),
                          timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "] borrowguard " in ln]
    assert len(lines) == 1, lines
    assert "tokenizer guard installed" in lines[0], lines[0]
    assert "renderer pool kept: vLLM's pool is not the known shape" in lines[0], lines[0]
    assert "('tokenizer', 'copies', 'share')" in lines[0], lines[0]
    assert "class TokenizerPool" in proc.stdout and f"copies {WORKERS + 1}" in proc.stdout, proc.stdout
