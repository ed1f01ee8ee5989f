"""`borrowguard doctor` for real: subprocesses on this venv, with its real packages and entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from click.testing import CliRunner
from packaging.version import Version

from borrowguard.cli import cli
from borrowguard.doctor import SCHEMA

FIXTURES = Path(__file__).parents[1] / "fixtures" / "doctor"
TIMEOUT_S = 60


def doctor(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "borrowguard", "doctor", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=TIMEOUT_S,
        env={**os.environ, **(env or {})},
    )


def expected_tokenizers_rule() -> str:
    tokenizers = Version(version("tokenizers"))
    if tokenizers <= Version("0.22.2"):
        return "tokenizers-borrow-race"  # .venv-old: transformers 4.57.6 + tokenizers 0.22.2
    assert tokenizers >= Version("0.23.1"), f"no rule covers tokenizers {tokenizers}"
    return "tokenizers-silent-race"  # .venv-new: transformers 5.x + tokenizers 0.23.x


def expected_exit_code() -> int:
    """From this venv's versions, not from the report under test: the borrow race is an error (exit 2) on
    tokenizers <= 0.22.2; on >= 0.23.1 the silent race is a warning (exit 1) and no rule makes it an error."""
    return 2 if expected_tokenizers_rule() == "tokenizers-borrow-race" else 1


@pytest.mark.slow
def test_doctor_json_on_this_stack() -> None:
    proc = doctor("--json", env={"VLLM_API_KEY": "sk-never-printed"})
    report = json.loads(proc.stdout)
    found = {f["id"]: f for f in report["findings"]}
    rule = expected_tokenizers_rule()
    assert rule in found
    other = {"tokenizers-borrow-race", "tokenizers-silent-race"} - {rule}
    assert not other & set(found)
    assert found[rule]["severity"] == ("error" if rule == "tokenizers-borrow-race" else "warning")
    assert f"tokenizers {version('tokenizers')}" in found[rule]["evidence"][0]
    for finding in report["findings"]:
        assert set(finding) >= {"id", "severity", "title", "evidence", "remedies", "references"}
    assert proc.returncode == expected_exit_code(), report["findings"]
    # The report agrees: its worst finding is the one that sets the exit code.
    assert report["findings"][0]["severity"] == {2: "error", 1: "warning"}[expected_exit_code()]
    env = report["environment"]
    assert env["schema"] == SCHEMA
    assert env["packages"]["tokenizers"] == version("tokenizers")
    assert env["packages"]["transformers"] == version("transformers")
    assert env["env"]["VLLM_API_KEY"] == "<redacted>"
    assert "sk-never-printed" not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_doctor_imports_none_of_the_heavy_packages() -> None:
    code = (
        "import sys\n"
        "from borrowguard.cli import main\n"
        "try:\n"
        "    main(['doctor', '--json'])\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "heavy = sorted(m for m in ('torch', 'vllm', 'transformers', 'tokenizers') if m in sys.modules)\n"
        "sys.stderr.write(f'EXIT={code} HEAVY={heavy}')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert "HEAVY=[]" in proc.stderr, proc.stderr
    assert f"EXIT={expected_exit_code()}" in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["findings"]


@pytest.mark.slow
def test_capture_then_from_gives_the_same_findings(tmp_path: Path) -> None:
    captured = doctor("--capture")
    assert captured.returncode == 0
    snapshot = tmp_path / "env.json"
    snapshot.write_text(captured.stdout)
    live = json.loads(doctor("--json").stdout)
    offline = doctor("--from", str(snapshot), "--json")
    assert [f["id"] for f in json.loads(offline.stdout)["findings"]] == [f["id"] for f in live["findings"]]
    piped = doctor("--from", "-", "--json", stdin=captured.stdout)
    assert json.loads(piped.stdout)["findings"] == json.loads(offline.stdout)["findings"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "{garbage}"], "not found"),
        (["--from", str(FIXTURES)], "directory"),
        (["--deep", "--from", "x.json"], "--deep inspects this machine"),
    ],
)
def test_user_mistakes_exit_2_without_traceback(args: list[str], message: str) -> None:
    proc = doctor(*args)
    assert proc.returncode == 2
    assert proc.stderr.startswith("borrowguard: error:")
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_garbage_and_bad_rules_exit_2(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.txt"
    garbage.write_bytes(b"lorem ipsum\n" * 100)
    proc = doctor("--from", str(garbage))
    assert proc.returncode == 2 and "not a borrowguard snapshot" in proc.stderr
    rules = tmp_path / "rules.toml"
    rules.write_text('[[problem]]\nid = "mine"\ntitle = "t"\nseverity = "bad"\nexplanation = "e"\n')
    proc = doctor("--rules", str(rules))
    assert proc.returncode == 2
    assert "rule 'mine': field 'severity' must be one of info, warning, error" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_report_for_a_collect_env_text() -> None:
    result = CliRunner().invoke(cli, ["doctor", "--from", str(FIXTURES / "vllm-collect-env-gb200.txt")])
    assert result.exit_code == 2
    out = result.output
    assert out.index("ERROR") < out.index("WARNING")
    # vLLM 0.19: the paths that race there are named; the 0.17 retry loop is not (it cannot happen)
    for rule in ("nccl-aarch64-proxy-leak", "tokenizers-borrow-race", "vllm-bad-words-race", "vllm-renderer-workers-race"):
        assert rule in out
    assert "vllm-retry-loop" not in out
    assert "pip install nvidia-nccl-cu13==2.29.7" in out
    assert "NCCL 2.28.9" in out and "NVIDIA GB200" in out
    assert "sk-live-7f3a9c0d" not in out and "hf_abcdef" not in out
    assert "2 errors, 3 warnings, 1 info (exit 2)" in " ".join(out.split())


def test_strict_turns_warnings_into_failure() -> None:
    fixture = str(FIXTURES / "torch-collect-env-h100.txt")  # one warning: tokenizers-silent-race
    assert CliRunner().invoke(cli, ["doctor", "--from", fixture]).exit_code == 1
    assert CliRunner().invoke(cli, ["doctor", "--from", fixture, "--strict"]).exit_code == 2


def test_info_only_exits_0_even_when_strict(tmp_path: Path) -> None:
    snapshot = {
        "schema": SCHEMA,
        "packages": {
            "vllm": "0.33.0",
            "borrowguard": "0.1.0",
            "tokenizers": "0.23.3",
            "transformers": "5.24.0",
        },
        "guard": {"plugin_registered": True},
        "platform": {"os": "[bold red]injected[/bold red]"},
    }
    path = tmp_path / "env.json"
    path.write_text(json.dumps(snapshot))
    result = CliRunner().invoke(cli, ["doctor", "--from", str(path), "--strict"])
    assert result.exit_code == 0, result.output
    assert "guard-active" in result.output and "tokenizers-silent-race" in result.output
    assert "[bold red]injected[/bold red]" in result.output  # printed as text, not interpreted as markup


def test_help_teaches() -> None:
    result = CliRunner().invoke(cli, ["doctor", "--help"])
    assert result.exit_code == 0
    for text in ("Examples:", "--capture > env.json", "vllm collect-env", "--strict", "Exit status"):
        assert text in result.output


@pytest.mark.slow
def test_deep_says_what_torch_there_is() -> None:
    # the shared test venvs may or may not hold torch (a CPU build when they do): both are said plainly
    import importlib.util

    result = CliRunner().invoke(cli, ["doctor", "--deep", "--capture"])
    assert result.exit_code == 0
    notes = json.loads(result.output)["notes"]
    if importlib.util.find_spec("torch") is None:
        assert "deep check: torch is not installed; nothing more to ask" in notes
        return
    import torch

    deep = [n for n in notes if n.startswith("deep check: ")]
    assert deep[0].startswith(f"deep check: torch {torch.__version__}"), deep
    if torch.version.cuda is None:
        assert "a CPU build: no CUDA, no NCCL" in deep[0] and not any("failed" in n for n in deep), deep


def test_capture_normalises_a_collect_env_text() -> None:
    result = CliRunner().invoke(
        cli, ["doctor", "--capture", "--from", str(FIXTURES / "torch-collect-env-h100.txt")]
    )
    assert result.exit_code == 0
    snapshot = json.loads(result.output)
    assert snapshot["schema"] == SCHEMA and snapshot["source"] == "collect-env"
    assert snapshot["platform"]["machine"] == "x86_64"
    assert snapshot["nccl"] == {"version": "2.28.3", "source": "nvidia-nccl-cu12 package (collect-env)"}
