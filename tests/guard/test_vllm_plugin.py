"""The vLLM general plugin, as far as it can be checked without vLLM (the rest: `make test-vllm`).

Each check runs register() in a fresh interpreter, because what it does is process-wide (the guard, the
once-per-process log line) and what it must NOT do (import heavy modules) is only visible in a clean
sys.modules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata

import pytest

from borrowguard.integrations import vllm as plugin

HEAVY = ("transformers", "tokenizers", "torch", "vllm")

# Runs in the child: configure logging like a server would, call register() several times, report.
CHILD = textwrap.dedent(
    """
    import json, logging, sys
    records = []
    class Keep(logging.Handler):
        def emit(self, record):
            records.append({"level": record.levelname, "name": record.name, "msg": record.getMessage()})
    logging.basicConfig(level=logging.DEBUG, handlers=[Keep()])
    import borrowguard.integrations.vllm as plugin
    after_import = sorted(m for m in __HEAVY__ if m in sys.modules)
    for _ in range(__TIMES__):
        plugin.register()
    loaded = sorted(m for m in __HEAVY__ if m in sys.modules)
    installed = None
    if "transformers" in sys.modules:  # only ask the guard where register() already loaded it
        import borrowguard
        installed = borrowguard.is_installed()
    print(json.dumps({"after_import": after_import, "loaded": loaded, "records": records,
                      "installed": installed}))
    """
)


def run_register(times: int = 1, **env: str) -> dict:
    child_env = {k: v for k, v in os.environ.items() if k not in ("BORROWGUARD_DISABLE", "VLLM_PLUGINS")}
    child_env.update(env)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD.replace("__HEAVY__", repr(HEAVY)).replace("__TIMES__", str(times))],
        capture_output=True,
        text=True,
        env=child_env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def plugin_lines(result: dict) -> list[dict]:
    return [r for r in result["records"] if r["name"] == plugin.LOGGER_NAME]


def test_entry_point_is_declared_and_loads_register() -> None:
    eps = [ep for ep in metadata.entry_points(group="vllm.general_plugins") if ep.name == plugin.PLUGIN_NAME]
    assert len(eps) == 1, "pyproject must declare exactly one borrowguard vllm.general_plugins entry point"
    assert eps[0].value == "borrowguard.integrations.vllm:register"
    assert eps[0].load() is plugin.register


@pytest.mark.slow
def test_import_and_disabled_register_load_nothing_heavy() -> None:
    result = run_register(BORROWGUARD_DISABLE="1")
    assert result["after_import"] == []
    assert result["loaded"] == [], "a disabled plugin must not import transformers, tokenizers, torch or vllm"
    [line] = plugin_lines(result)
    assert line["level"] == "INFO"
    assert plugin.DISABLED in line["msg"]
    assert plugin.INSTALLED not in line["msg"]


@pytest.mark.slow
@pytest.mark.parametrize("dist", ["transformers", "tokenizers"])
def test_log_line_names_installed_versions(dist: str) -> None:
    [line] = plugin_lines(run_register(BORROWGUARD_DISABLE="true"))
    assert f"{dist} {metadata.version(dist)}" in line["msg"]


@pytest.mark.slow
@pytest.mark.parametrize("value", ["other", "", "borrowguard_extra,lora"])
def test_vllm_plugins_without_us_does_nothing(value: str) -> None:
    result = run_register(VLLM_PLUGINS=value)
    assert result["loaded"] == []
    [line] = plugin_lines(result)
    assert line["level"] == "INFO"
    assert plugin.NOT_ALLOWED in line["msg"]


@pytest.mark.slow
def test_enabled_register_installs_once_and_logs_once() -> None:
    # Listed among others (vLLM's allow-list syntax), and called three times as vLLM may do.
    result = run_register(times=3, VLLM_PLUGINS="lora_filesystem_resolver,borrowguard")
    lines = plugin_lines(result)
    assert len(lines) == 1, lines
    [line] = lines
    assert line["level"] == "INFO", line
    assert plugin.INSTALLED in line["msg"]
    assert f"transformers {metadata.version('transformers')}" in line["msg"]
    assert f"tokenizers {metadata.version('tokenizers')}" in line["msg"]
    assert "BORROWGUARD_DISABLE=1" in line["msg"], "the line must say how to turn it off"
    assert result["installed"] is True
    # The guard needs transformers; it must not drag in torch or vllm. Where torch is installed, transformers'
    # own fast-tokenizer module imports it (transformers/utils/generic.py): only what goes beyond that is ours.
    assert "torch" not in result["loaded"] or fast_tokenizer_module_loads("torch")
    assert "vllm" not in result["loaded"]


def fast_tokenizer_module_loads(module: str) -> bool:
    """Whether importing transformers' fast-tokenizer module alone, in a fresh interpreter, loads `module`."""
    code = f"import sys, transformers.tokenization_utils_fast; print({module!r} in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1] == "True"


@pytest.mark.slow
def test_register_after_guard_already_installed_says_so() -> None:
    code = textwrap.dedent(
        """
        import logging, sys
        logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s|%(message)s")
        import borrowguard
        borrowguard.install()
        import borrowguard.integrations.vllm as plugin
        plugin.register()
        print("installed", borrowguard.is_installed())
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("BORROWGUARD_DISABLE", "VLLM_PLUGINS")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(plugin.LOGGER_NAME + "|")]
    assert len(lines) == 1 and plugin.ALREADY in lines[0], proc.stdout
    assert "installed True" in proc.stdout


@pytest.mark.slow
def test_line_is_printed_when_logging_is_not_configured_yet() -> None:
    # Newer vLLM loads plugins while building its CLI parser, before it configures logging.
    code = "import borrowguard.integrations.vllm as p; p.register(); p.register()"
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_PLUGINS",)}
    env["BORROWGUARD_DISABLE"] = "1"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if "borrowguard" in ln]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("INFO ") and plugin.DISABLED in lines[0]


@pytest.mark.slow
def test_failed_install_warns_and_does_not_raise() -> None:
    # A guard that cannot load (here: transformers made unimportable) must not kill vLLM's CLI parser.
    code = textwrap.dedent(
        """
        import logging, sys
        fmt = "%(levelname)s|%(name)s|%(message)s"
        logging.basicConfig(level=logging.INFO, stream=sys.stdout, format=fmt)
        sys.modules["transformers"] = None
        import borrowguard.integrations.vllm as plugin
        plugin.register()
        print("survived")
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("BORROWGUARD_DISABLE", "VLLM_PLUGINS")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if f"|{plugin.LOGGER_NAME}|" in ln]
    assert len(lines) == 1, proc.stdout
    assert lines[0].startswith("WARNING|") and plugin.FAILED in lines[0]
    assert proc.stdout.rstrip().endswith("survived")


@pytest.mark.parametrize(
    ("raw", "allowed"),
    [(None, True), ("borrowguard", True), ("a,borrowguard", True), ("", False), ("a,b", False),
     ("borrowguard2", False),
     # vLLM splits on "," without stripping: it would skip the plugin, so we must say so too.
     ("a, borrowguard", False)],
)
def test_allow_list_rule_is_vllms(raw: str | None, allowed: bool) -> None:
    assert plugin.allowed_by_vllm_plugins(raw) is allowed
