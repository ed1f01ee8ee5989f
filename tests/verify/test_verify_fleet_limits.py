"""A fleet run is checked before it starts: its files, its names, its open-file budget. No run is lost to a
traceback half-way, and no input is read without a bound."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from borrowguard.errors import UserInputError
from borrowguard.verify.fleet import load_targets
from support.fakeserver import FakeServer

VERIFY = [sys.executable, "-m", "borrowguard", "verify"]


def _cli(*args: str, timeout: float = 300, prefix: str = "") -> subprocess.CompletedProcess[str]:
    argv = " ".join(f"'{a}'" for a in [*VERIFY, *args])
    return subprocess.run(["bash", "-c", f"{prefix}exec {argv}"], capture_output=True, text=True, timeout=timeout)


def _one_line_refusal(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], proc.stderr


def test_a_target_name_with_a_trailing_newline_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "fleet.toml"
    f.write_text('[[target]]\nname = "a\\n"\nurl = "http://127.0.0.1:9"\n')
    with pytest.raises(UserInputError, match="letters, digits"):
        load_targets(f)


@pytest.mark.slow
def test_targets_from_an_endless_file_are_read_with_a_bound() -> None:
    # In a subprocess with a 2 GB address-space cap: an unbounded read fails there, not on the machine.
    code = textwrap.dedent(
        """
        import resource, sys
        from pathlib import Path
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        from borrowguard.verify.config import ConfigError
        from borrowguard.verify.fleet import load_targets
        from borrowguard.verify.wording import flag
        try:
            load_targets(Path("/dev/zero"))
        except ConfigError as exc:  # the setting, said as the CLI says it
            print(exc.said_as(flag(exc.setting)))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "--targets /dev/zero: larger than 1 MiB; not a fleet file", proc.stdout


@pytest.mark.slow
def test_a_per_target_records_file_that_cannot_be_written_is_refused_before_the_run(tmp_path: Path) -> None:
    (tmp_path / "r.b.jsonl").mkdir()  # what `--records r.jsonl` makes for target b
    with FakeServer(faults=["ok"]) as srv:
        proc = _cli("--target", f"a={srv.url}", "--target", f"b={srv.url}", "-d", "30s", "-c", "1",
                    "--image-sizes", "64x64", "--records", str(tmp_path / "r.jsonl"))
    _one_line_refusal(proc, f"target b: --records {tmp_path / 'r.b.jsonl'}: a directory")
    assert not (tmp_path / "r.a.jsonl").exists() or (tmp_path / "r.a.jsonl").stat().st_size == 0


@pytest.mark.slow
def test_a_fleet_beyond_the_open_file_limit_is_refused_in_one_line() -> None:
    """64 targets x -c 16 under `ulimit -n 1024` (hard 1024, so it cannot be raised): refused up front."""
    with FakeServer(faults=["ok"]) as srv:
        targets = [a for i in range(64) for a in ("--target", f"t{i}={srv.url}")]
        proc = _cli(*targets, "-c", "16", "-d", "5s", "--image-sizes", "64x64", "--json",
                    prefix="ulimit -Sn 1024; ulimit -Hn 1024; ")
    _one_line_refusal(proc, "open files")
    assert "ulimit -n" in proc.stderr and proc.stdout == ""


@pytest.mark.slow
def test_the_soft_open_file_limit_is_raised_when_the_hard_one_allows() -> None:
    code = textwrap.dedent(
        """
        import resource
        from borrowguard.errors import UserInputError
        from borrowguard.verify.config import VerifyConfig
        from borrowguard.verify.descriptors import descriptors_needed, ensure_descriptors
        configs = [VerifyConfig(url="http://127.0.0.1:9", concurrency=16) for _ in range(64)]
        need = descriptors_needed(configs)
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, need + 100))
        budget = ensure_descriptors(configs)
        print(budget.needed == need, resource.getrlimit(resource.RLIMIT_NOFILE)[0] == need)
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 512))
        try:
            ensure_descriptors(configs)
        except UserInputError as exc:
            print("refused:", exc)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, second = proc.stdout.splitlines()
    assert first == "True True"
    assert second.startswith("refused: this run needs about") and "the limit is 256 (hard 512)" in second
