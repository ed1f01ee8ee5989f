"""Snapshots: collect-env parsing, the JSON round trip, hostile input, redaction, live collection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from borrowguard.doctor import (
    MAX_INPUT_BYTES,
    SCHEMA,
    Snapshot,
    collect,
    decode_nccl_version,
    diagnose,
    is_secret_name,
    parse_collect_env,
    parse_snapshot,
    read_snapshot,
)
from borrowguard.errors import UserInputError
from borrowguard.knowledge import load

FIXTURES = Path(__file__).parents[1] / "fixtures" / "doctor"
KB = load()


def ids(snapshot: Snapshot) -> dict[str, str]:
    return {f.id: f.severity for f in diagnose(snapshot, KB).findings}


def test_vllm_collect_env_on_gb200() -> None:
    snap = read_snapshot(FIXTURES / "vllm-collect-env-gb200.txt")
    assert snap.source == "collect-env"
    assert snap.python_version == "3.12.12"
    assert snap.machine == "aarch64"
    assert snap.os == "Ubuntu 24.04.2 LTS (aarch64)"
    assert snap.version("vllm") == "0.19.1"
    assert snap.version("transformers") == "4.57.1"
    assert snap.version("tokenizers") == "0.22.1"
    assert snap.version("torch") == "2.10.0+cu130"
    assert (snap.nccl_version, snap.nccl_source) == ("2.28.9", "nvidia-nccl-cu13 package (collect-env)")
    assert dict(snap.cuda) == {"torch_build": "13.0", "runtime": "13.0.88", "driver": "580.95.05"}
    assert snap.gpus == ("NVIDIA GB200",) * 4
    assert snap.plugin_registered is None  # the report does not list borrowguard: unknown
    assert snap.env["NCCL_DEBUG"] == "WARN"
    assert snap.env["TOKENIZERS_PARALLELISM"] == "false"
    assert snap.env["VLLM_API_KEY"] == "<redacted>"
    assert "HF_TOKEN" not in snap.env and "NVIDIA_VISIBLE_DEVICES" not in snap.env
    assert not snap.knows("sglang")  # not listed means unknown, not absent
    assert ids(snap) == {
        "nccl-aarch64-proxy-leak": "error",
        "tokenizers-borrow-race": "error",
        "transformers-blocks-tokenizers-fix": "warning",
        "vllm-mm-cache-desync": "warning",
        "vllm-bad-words-race": "warning",
        "vllm-renderer-workers-race": "info",  # 0.19: races only with 2+ renderer workers, not known here
    }


def test_torch_collect_env_on_x86_h100() -> None:
    snap = read_snapshot(FIXTURES / "torch-collect-env-h100.txt")
    assert (snap.python_version, snap.machine, snap.system) == ("3.11.13", "x86_64", "Linux")
    assert snap.version("transformers") == "5.20.1"
    assert snap.version("vllm") is None and not snap.knows("vllm")
    assert snap.nccl_version == "2.28.3"
    assert snap.gpus == ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3")
    assert snap.cuda["torch_build"] == "12.8"
    # NCCL 2.28.3 is in the leaking range, but this is x86_64
    assert ids(snap) == {"tokenizers-silent-race": "warning"}


def test_vllm_collect_env_with_requirement_mismatch_and_excluded_plugin() -> None:
    snap = read_snapshot(FIXTURES / "vllm-collect-env-mismatch.txt")
    assert snap.version("vllm") == "0.19.1rc1.dev214+g8f0e2b1c3"
    assert snap.plugin_registered is True
    findings = {f.id: f for f in diagnose(snap, KB).findings}
    assert "guard-active" not in findings
    assert any("does not list borrowguard" in e for e in findings["tokenizers-silent-race"].evidence)
    assert (
        findings["tokenizers-silent-race"].remedies[0]
        == "export VLLM_PLUGINS=lora_filesystem_resolver,borrowguard"
    )
    assert findings["vllm-requirement-mismatch"].evidence == (
        "transformers 5.2.0 is installed; transformers<5,>=4.56 is known requirement of vLLM "
        "0.19.1rc1.dev214+g8f0e2b1c3 (the snapshot lacks vLLM's own metadata)",
    )


@pytest.mark.parametrize(
    ("line", "machine"),
    [
        ("CPU: Architecture: aarch64", "aarch64"),
        ("Architecture:        arm64", "aarch64"),
        ("OS: Amazon Linux 2023 (aarch64)", "aarch64"),
        ("Python platform: Linux-6.1.0-aws-x86_64-with-glibc2.34", "x86_64"),
    ],
)
def test_architecture_lines(line: str, machine: str) -> None:
    snap = parse_collect_env(f"PyTorch version: 2.9.0\n{line}\n")
    assert snap.machine == machine


def test_lscpu_wins_over_other_architecture_hints() -> None:
    text = "OS: Ubuntu 22.04 (x86_64)\nCPU:\nArchitecture:  aarch64\n"
    assert parse_collect_env(text).machine == "aarch64"


def test_messy_pasted_report() -> None:
    # Indented (pasted into an issue inside <details>), CRLF line ends, N/A values, conda lines.
    text = (
        "    vLLM Version                 : 0.20.1\r\n"
        "    Python version               : 3.10.14 (main)\r\n"
        "    CUDA used to build PyTorch   : N/A\r\n"
        "    [pip3] Transformers==4.56.2\r\n"
        "    [conda] tokenizers          0.22.0          pypi_0    pypi\r\n"
        "    NCCL version 2.29.1+cuda12.9\r\n"
        "    CPU: Architecture: aarch64\r\n"
    )
    snap = parse_collect_env(text)
    assert snap.version("vllm") == "0.20.1"
    assert snap.version("transformers") == "4.56.2"
    assert snap.version("tokenizers") == "0.22.0"
    assert "torch_build" not in snap.cuda
    assert snap.nccl_version == "2.29.1"
    assert "nccl-aarch64-proxy-leak" in ids(snap)


def test_unknown_vllm_version_is_noted_not_guessed() -> None:
    snap = parse_collect_env("vLLM Version: dev-build-from-main\nPyTorch version: N/A\n")
    assert not snap.knows("vllm") and not snap.knows("torch")
    assert snap.notes == ("unrecognised vllm version: 'dev-build-from-main'",)


@pytest.mark.parametrize(
    "data",
    [
        b"hello world\nthis is not a report\n",
        b"",
        b"   \n\n",
        b"\x7fELF\x02\x01\x01\x00\x00\x00",
        b"[1, 2, 3]",
        b"{not json",
        b'{"schema": "something-else/9"}',
        b'{"environment": {}, "findings": []}',
        b"[" * 100_000,
        b"{" + b'"a":{' * 100_000,
    ],
)
def test_garbage_is_a_clear_user_error(data: bytes) -> None:
    with pytest.raises(UserInputError) as info:
        parse_snapshot(data, "in.txt")
    assert str(info.value)


def test_huge_input_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.txt"
    with path.open("wb") as fh:
        fh.write(b"PyTorch version: 2.9.0\n")
        fh.truncate(MAX_INPUT_BYTES + 1)
    with pytest.raises(UserInputError, match="larger than 10 MB"):
        read_snapshot(path)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="not found"):
        read_snapshot(tmp_path / "nope.json")
    with pytest.raises(UserInputError, match="directory"):
        read_snapshot(tmp_path)


def good_snapshot(**overrides: object) -> dict:
    doc: dict = {
        "schema": SCHEMA,
        "python": {"version": "3.12.3", "implementation": "CPython"},
        "platform": {"system": "Linux", "os": "Ubuntu", "machine": "arm64"},
        "packages": {"Tokenizers": "0.22.2", "transformers": "4.57.6", "vllm": None},
        "nccl": {"version": "2.29.2", "source": "nvidia-nccl-cu13 package"},
        "guard": {"plugin_registered": False},
        "env": {},
    }
    doc.update(overrides)
    return doc


def test_snapshot_json_is_validated_and_normalised() -> None:
    snap = Snapshot.from_dict(good_snapshot())
    assert snap.machine == "aarch64"
    assert snap.version("tokenizers") == "0.22.2"
    assert snap.knows("vllm") and snap.version("vllm") is None
    assert set(ids(snap)) == {
        "tokenizers-borrow-race",
        "transformers-blocks-tokenizers-fix",
        "nccl-aarch64-proxy-leak",
    }


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"packages": ["tokenizers"]}, "'packages' must be an object"),
        ({"packages": {"tokenizers": 22}}, "'packages.tokenizers' must be a string or null"),
        ({"python": "3.12"}, "'python' must be an object"),
        ({"python": {"version": 3.12}}, "'python.version' must be a string or null"),
        ({"guard": {"plugin_registered": "yes"}}, "'guard.plugin_registered' must be true, false or null"),
        ({"gpus": "H100"}, "'gpus' must be a list of strings"),
        ({"env": {"X": 1}}, "'env.X' must be a string"),
        ({"packages": {f"p{i}": "1" for i in range(6000)}}, "at most 5000"),
        ({"requires": {"vllm": "transformers<5"}}, "'requires.vllm' must be a list"),
        ({"server": ["renderer_num_workers"]}, "'server' must be an object"),
        ({"server": {"renderer_num_workers": True}}, "'server.renderer_num_workers' must be a number or a string"),
    ],
)
def test_snapshot_type_errors_name_the_field(overrides: dict, field: str) -> None:
    with pytest.raises(UserInputError, match="snapshot field") as info:
        Snapshot.from_dict(good_snapshot(**overrides))
    assert field in str(info.value)


def test_server_facts_round_trip() -> None:
    snap = Snapshot.from_dict(good_snapshot(server={"renderer_num_workers": 2, "structured_outputs_backend": "xgrammar"}))
    assert dict(snap.server) == {"renderer_num_workers": 2, "structured_outputs_backend": "xgrammar"}
    again = Snapshot.from_dict(json.loads(json.dumps(snap.to_dict())))
    assert dict(again.server) == dict(snap.server)
    assert Snapshot.from_dict(good_snapshot()).server == {}  # snapshots written before the field existed


def test_hostile_strings_are_cleaned_and_secrets_redacted_on_load() -> None:
    doc = good_snapshot(
        platform={
            "system": "Linux",
            "os": "\x1b[2J\x1b]0;pwned\x07[bold red]x[/]" + "A" * 5000,
            "machine": "x86_64",
        },
        env={"VLLM_API_KEY": "sk-123", "NCCL_DEBUG": "INFO", "bad name; rm -rf": "x"},
    )
    snap = Snapshot.from_dict(doc)
    assert "\x1b" not in snap.os and "\x07" not in snap.os
    assert len(snap.os) <= 400
    assert snap.env == {"VLLM_API_KEY": "<redacted>", "NCCL_DEBUG": "INFO"}


def test_doctor_json_output_is_accepted_as_a_snapshot() -> None:
    original = Snapshot.from_dict(good_snapshot())
    diagnosis = diagnose(original, KB)
    again = parse_snapshot(json.dumps(diagnosis.to_dict()).encode())
    assert ids(again) == ids(original)


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("VLLM_API_KEY", True),
        ("HF_TOKEN", True),
        ("BORROWGUARD_SECRET", True),
        ("NCCL_PASSWORD", True),
        ("vllm_api_key", True),
        ("VLLM_TOKENIZER_TOKEN", True),
        ("TOKENIZERS_PARALLELISM", False),
        ("VLLM_TOKENIZER_POOL_SIZE", False),
        ("NCCL_DEBUG", False),
        ("VLLM_PLUGINS", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


@pytest.mark.parametrize(
    ("code", "version"), [(22809, "2.28.9"), (22907, "2.29.7"), (2708, "2.7.8"), (21003, "2.10.3")]
)
def test_nccl_version_codes(code: int, version: str) -> None:
    assert decode_nccl_version(code) == version


def test_live_collection_round_trips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "sk-live-do-not-print")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv("UNRELATED_VARIABLE", "x")
    snap = collect(KB)
    assert snap.source == "live"
    assert snap.version("tokenizers") and snap.version("transformers")
    assert snap.knows("vllm") and snap.knows("torch")  # reported even when absent
    assert snap.plugin_registered is True  # this editable install declares the entry point
    assert snap.env["VLLM_API_KEY"] == "<redacted>"
    assert snap.env["NCCL_DEBUG"] == "INFO" and snap.env["TOKENIZERS_PARALLELISM"] == "false"
    assert "UNRELATED_VARIABLE" not in snap.env
    text = json.dumps(snap.to_dict())
    assert "sk-live-do-not-print" not in text
    again = parse_snapshot(text.encode())
    assert again.packages == snap.packages
    assert (again.python_version, again.machine, again.env) == (snap.python_version, snap.machine, snap.env)
    assert ids(again) == ids(snap)
