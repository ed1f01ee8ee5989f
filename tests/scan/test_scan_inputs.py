"""What scan and doctor make of the input users really give them (issue 14, "Reliability pass").

A log source that fails, a cut .gz, gzip on a pipe, a rotated .gz in follow mode, a PowerShell (UTF-16)
log, a binary file, a FIFO or `<(...)`, lines over 64 KiB, a collect-env paste cut short, a full disk, a
VLLM_PLUGINS with a blank, escape sequences in a log: each is said, never a clean bill or a traceback.
Inputs are generated here from the fixture logs.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import pytest
from rich.text import Text

from borrowguard.cli._common import _PrintableConsole, console
from borrowguard.doctor import guard_status, read_snapshot
from borrowguard.doctor.snapshot import SCHEMA, Snapshot
from borrowguard.scan import scan_paths
from borrowguard.scan.inputs.kind import not_text, text_encoding
from borrowguard.scan.inputs.long_lines import LongLines
from borrowguard.scan.inputs.readers import LineSplitter
from borrowguard.scan.inputs.stream import open_stream

FIXTURES = Path(__file__).parents[1] / "fixtures"
BORROW = FIXTURES / "logs" / "vllm_v1_borrow_chain.log"  # 39 lines, "RuntimeError: Already borrowed" on 23
CLEAN = FIXTURES / "logs" / "near_misses.log"  # 24 lines, no finding
COLLECT_ENV = FIXTURES / "doctor" / "vllm-collect-env-gb200.txt"
TIMEOUT_S = 60


def borrowguard(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "borrowguard", *args],
        input=stdin, capture_output=True, timeout=TIMEOUT_S, check=False, env={**os.environ, "COLUMNS": "200"},
    )


def one_line_error(proc: subprocess.CompletedProcess[bytes]) -> str:
    err = proc.stderr.decode()
    assert proc.returncode == 2, (proc.returncode, err)
    assert err.startswith("borrowguard: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def finding_ids(doc: dict) -> list[str]:
    return [f["id"] for f in doc["findings"]]


def zcat(data: bytes) -> bytes:
    """What `zcat` prints of a damaged .gz: everything that decompresses before the damage."""
    d = zlib.decompressobj(wbits=31)
    try:
        return d.decompress(data)
    except zlib.error:
        return b""


def filler(n_lines: int) -> bytes:
    """Incompressible log lines, so that a cut in the compressed file falls well after the fixture."""
    return b"".join(b"INFO 07-07 20:14:00 [x.py:1] " + os.urandom(48).hex().encode() + b"\n" for _ in range(n_lines))


# ---- 1. a log source that fails, ends early or never writes ------------------------------------------


@pytest.mark.slow
def test_a_failing_follow_command_is_reported_with_its_status_and_is_not_clean() -> None:
    proc = borrowguard("scan", "--follow-cmd", "sh -c 'echo No such container >&2; exit 1'")
    err, out = proc.stderr.decode(), proc.stdout.decode()
    assert proc.returncode == 2, (out, err)
    assert "exit status 1" in err and "No such container" in err
    assert "No known failure signatures" not in out
    assert "a log source failed" in out
    doc = json.loads(borrowguard("scan", "--json", "--follow-cmd", "sh -c 'exit 3'").stdout)
    assert doc["input_failed"] is True
    assert any("exit status 3" in w for w in doc["warnings"])


@pytest.mark.slow
def test_a_follow_command_that_writes_nothing_is_not_a_clean_log() -> None:
    ended = borrowguard("scan", "--follow-cmd", "true")
    assert ended.returncode == 1
    assert b"without writing a line" in ended.stderr
    assert b"No known failure signatures" not in ended.stdout
    silent = borrowguard("scan", "--follow-cmd", "sleep 30", "--for", "1")
    assert silent.returncode == 1
    assert b"wrote nothing" in silent.stderr
    assert b"No known failure signatures" not in silent.stdout


@pytest.mark.slow
def test_a_follow_command_that_ends_cleanly_after_its_log_is_a_note() -> None:
    proc = borrowguard("scan", "--json", "--follow-cmd", f"cat {shlex.quote(str(BORROW))}")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 2 and "tokenizer-already-borrowed" in finding_ids(doc)
    assert doc["input_failed"] is False and not doc["warnings"]
    assert any("ended by itself (exit status 0) after 39 lines" in n for n in doc["notes"])


@pytest.mark.slow
@pytest.mark.parametrize("command", ["", "   "])
def test_an_empty_follow_command_is_refused(command: str) -> None:
    assert "--follow-cmd needs a command" in one_line_error(borrowguard("scan", "--follow-cmd", command))


# ---- 2. gzip, encodings, binary files ------------------------------------------------------------


@pytest.mark.slow
def test_a_cut_gz_is_read_as_far_as_zcat_reads_it_and_said_to_be_cut(tmp_path: Path) -> None:
    packed = gzip.compress(BORROW.read_bytes() + filler(20_000))
    cut = tmp_path / "vllm.log.1.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    assert b"RuntimeError: Already borrowed" in zcat(cut.read_bytes())
    result = scan_paths([str(cut)])
    assert "tokenizer-already-borrowed" in [f.id for f in result.findings]
    assert result.lines > 39
    assert any("damaged or truncated" in w for w in result.warnings)
    assert result.input_exit_code == 1

    clean = tmp_path / "clean.log.gz"
    packed = gzip.compress(CLEAN.read_bytes() + filler(20_000))
    clean.write_bytes(packed[: len(packed) // 2])
    proc = borrowguard("scan", str(clean))
    assert proc.returncode == 1, proc.stderr
    assert b"No known failure signatures" not in proc.stdout
    assert b"not read whole" in proc.stdout
    assert b"borrowguard: warning: " in proc.stderr and b"truncated" in proc.stderr


def test_a_corrupt_gz_keeps_the_lines_before_the_damage(tmp_path: Path) -> None:
    packed = bytearray(gzip.compress(BORROW.read_bytes() + filler(20_000)))
    middle = len(packed) // 2
    packed[middle : middle + 64] = b"\xff" * 64
    damaged = tmp_path / "damaged.gz"
    damaged.write_bytes(bytes(packed))
    result = scan_paths([str(damaged)])
    assert "tokenizer-already-borrowed" in [f.id for f in result.findings]
    assert any("damaged or truncated" in w for w in result.warnings)


@pytest.mark.slow
def test_gzip_on_stdin_is_decompressed() -> None:
    plain = json.loads(borrowguard("scan", "--json", str(BORROW)).stdout)
    piped = json.loads(borrowguard("scan", "--json", "-", stdin=gzip.compress(BORROW.read_bytes())).stdout)
    assert finding_ids(piped) == finding_ids(plain)
    assert piped["lines"] == plain["lines"] == 39


@pytest.mark.slow
def test_follow_mode_reads_a_rotated_gz_once_instead_of_following_its_bytes(tmp_path: Path) -> None:
    (tmp_path / "vllm.log").write_bytes(CLEAN.read_bytes())
    (tmp_path / "vllm.log.1.gz").write_bytes(gzip.compress(BORROW.read_bytes()))
    pattern = str(tmp_path / "vllm.log*")
    doc = json.loads(borrowguard("scan", "--json", "--follow", pattern, "--for", "3").stdout)
    assert "tokenizer-already-borrowed" in finding_ids(doc)
    assert doc["lines"] == 24 + 39
    assert any("vllm.log.1.gz" in n and "read once" in n for n in doc["notes"])
    skipped = json.loads(borrowguard("scan", "--json", "--follow", pattern, "--from-end", "--for", "1").stdout)
    assert skipped["findings"] == [] and skipped["lines"] == 0
    assert any("skipped" in n and "vllm.log.1.gz" in n for n in skipped["notes"])


@pytest.mark.parametrize(
    ("codec", "bom"),
    [("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff"), ("utf-8", b"\xef\xbb\xbf"), ("utf-16-le", b"")],
)
def test_a_log_with_a_byte_order_mark_or_in_utf16_is_decoded(tmp_path: Path, codec: str, bom: bytes) -> None:
    text = BORROW.read_text(encoding="utf-8").replace("\n", "\r\n")  # PowerShell writes CRLF too
    log = tmp_path / "vllm.log"
    log.write_bytes(bom + text.encode(codec))
    plain = scan_paths([str(BORROW)])
    result = scan_paths([str(log)])
    assert [(f.id, f.count) for f in result.findings] == [(f.id, f.count) for f in plain.findings]
    assert result.lines == plain.lines
    assert result.findings[0].first.text == "RuntimeError: Already borrowed"


@pytest.mark.slow
def test_a_utf16_log_is_decoded_in_follow_mode_too(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_bytes(b"\xff\xfe" + BORROW.read_text(encoding="utf-8").encode("utf-16-le"))
    doc = json.loads(borrowguard("scan", "--json", "--follow", str(log), "--for", "3").stdout)
    assert "tokenizer-already-borrowed" in finding_ids(doc)
    assert doc["lines"] == 39


@pytest.mark.slow
def test_a_binary_file_is_not_scanned_and_said_so(tmp_path: Path) -> None:
    binary = tmp_path / "core.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    err = one_line_error(borrowguard("scan", str(binary)))
    assert "nothing to scan" in err and "binary" in err
    doc = json.loads(borrowguard("scan", "--json", str(binary), str(BORROW)).stdout)
    assert doc["sources"] == [str(BORROW)]
    assert any("skipped" in n and "core.bin" in n and "binary" in n for n in doc["notes"])
    xz = tmp_path / "old.log.xz"
    xz.write_bytes(b"\xfd7zXZ\x00" + os.urandom(200))
    assert "xz -dc" in one_line_error(borrowguard("scan", str(xz)))


def test_what_is_text_and_what_is_not() -> None:
    assert not_text(BORROW.read_bytes()) is None
    assert not_text(b"") is None
    assert not_text("é ü ß — 日本語\n".encode() * 100) is None
    assert not_text(b"\x00" * 70_000) is None  # nothing but a hole so far
    assert not_text(b"\x00" * 4096 + BORROW.read_bytes()) is None  # copytruncate left a hole
    assert not_text(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256))) is not None
    assert not_text(os.urandom(4096).replace(b"\x00", b"")) is not None
    assert text_encoding("RuntimeError\n".encode("utf-16-le")) == ("utf-16-le", 0)
    assert text_encoding(b"\xff\xfe\x00\x00" + "x".encode("utf-32-le")) == ("utf-32-le", 4)
    assert text_encoding(b"plain ascii text, long enough") == (None, 0)


def test_a_log_after_a_copytruncate_hole_is_scanned(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_bytes(b"\x00" * 200_000 + BORROW.read_bytes())
    assert "tokenizer-already-borrowed" in [f.id for f in scan_paths([str(log)]).findings]


# ---- 3. FIFOs and process substitution ---------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_read_as_a_stream(tmp_path: Path) -> None:
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)

    def writer() -> None:
        with open(fifo, "wb") as fh:
            fh.write(BORROW.read_bytes())

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    result = scan_paths([str(fifo)])
    t.join(timeout=10)
    assert "tokenizer-already-borrowed" in [f.id for f in result.findings]
    assert result.lines == 39


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bash") is None, reason="process substitution needs bash")
def test_process_substitution_is_read_as_a_stream() -> None:
    command = f"{shlex.quote(sys.executable)} -m borrowguard scan --json <(cat {shlex.quote(str(BORROW))})"
    proc = subprocess.run(["bash", "-c", command], capture_output=True, timeout=TIMEOUT_S, check=False)
    assert b"Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2
    assert "tokenizer-already-borrowed" in finding_ids(json.loads(proc.stdout))
    follow = f"{shlex.quote(sys.executable)} -m borrowguard scan --json --follow <(cat {shlex.quote(str(BORROW))})"
    proc = subprocess.run(["bash", "-c", follow], capture_output=True, timeout=TIMEOUT_S, check=False)
    assert b"Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)
    assert "tokenizer-already-borrowed" in finding_ids(doc) and doc["lines"] == 39


# ---- 4. lines over 64 KiB -----------------------------------------------------------------------------


@pytest.mark.slow
def test_lines_over_64_kib_are_said_once_in_the_output_and_the_json(tmp_path: Path) -> None:
    log = tmp_path / "huge.log"
    huge = b"INFO 07-07 20:12:44 [x.py:1] prompt " + b"A" * 200_000 + b"\n"
    log.write_bytes(BORROW.read_bytes()[:200] + b"\n" + huge * 3 + BORROW.read_bytes())
    proc = borrowguard("scan", "--json", str(log))
    notes = [n for n in json.loads(proc.stdout)["notes"] if "longer than 64 KiB" in n]
    assert len(notes) == 1, notes
    assert "3 lines" in notes[0] and "line 3" in notes[0]
    err = borrowguard("scan", str(log)).stderr.decode()
    assert err.count("borrowguard: note: ") == 1 and "longer than 64 KiB" in err
    follow = json.loads(borrowguard("scan", "--json", "--follow-cmd", f"cat {shlex.quote(str(log))}").stdout)
    assert sum("longer than 64 KiB" in n for n in follow["notes"]) == 1


def test_the_long_line_counter_agrees_with_the_splitter() -> None:
    data = b"a\n" + b"x" * 70_000 + b"\nb\n" + b"y" * 65_536 + b"\n" + b"z" * 65_537 + b"\n" + b"w" * 200_000
    for size in (1, 7, 4096, 65_536, 1 << 20):
        watch = LongLines()
        for i in range(0, len(data), size):
            watch.see(data[i : i + size])
        assert (watch.long, watch.first_long, watch.seen) == (3, 2, 6), size
    seen: list[int] = []
    splitter = LineSplitter(on_long=seen.append)
    for i in range(0, len(data), 4096):
        splitter.push(data[i : i + 4096])
    splitter.flush()
    assert (splitter.long, seen) == (3, [2])


def test_open_stream_reads_without_seeking() -> None:
    class Pipe(io.RawIOBase):
        def __init__(self, data: bytes) -> None:
            self._data = io.BytesIO(data)

        def readable(self) -> bool:
            return True

        def readinto(self, b: bytearray) -> int:  # type: ignore[override]
            chunk = self._data.read(min(len(b), 1000))  # a pipe gives little at a time
            b[: len(chunk)] = chunk
            return len(chunk)

        def seekable(self) -> bool:
            return False

    opened = open_stream(io.BufferedReader(Pipe(gzip.compress(BORROW.read_bytes()))), "pipe")
    assert opened.compression == "gzip"
    assert opened.read() == BORROW.read_bytes()


# ---- 5. a collect-env paste cut short -------------------------------------------------------------


@pytest.mark.slow
def test_a_cut_collect_env_paste_says_what_it_lacks(tmp_path: Path) -> None:
    head = "".join(COLLECT_ENV.read_text().splitlines(keepends=True)[:20])
    proc = borrowguard("doctor", "--from", "-", stdin=head.encode())
    out = " ".join(proc.stdout.decode().split())
    assert proc.returncode == 1, out
    assert "no known problem (exit 0)" not in out
    assert "incomplete" in out and "no transformers or tokenizers version" in out
    assert "no package list at all" in out
    assert borrowguard("doctor", "--strict", "--from", "-", stdin=head.encode()).returncode == 2
    doc = json.loads(borrowguard("doctor", "--json", "--from", "-", stdin=head.encode()).stdout)
    assert any("incomplete" in n for n in doc["environment"]["notes"])
    # ...and the same once captured: the note is not repeated
    captured = tmp_path / "env.json"
    captured.write_bytes(borrowguard("doctor", "--capture", "--from", "-", stdin=head.encode()).stdout)
    again = json.loads(borrowguard("doctor", "--json", "--from", str(captured)).stdout)
    assert sum("incomplete" in n for n in again["environment"]["notes"]) == 1
    assert borrowguard("doctor", "--from", str(captured)).returncode == 1


def test_a_whole_collect_env_report_is_not_called_incomplete() -> None:
    snapshot = read_snapshot(COLLECT_ENV)
    assert snapshot.lacks == () and snapshot.lacks_note() is None
    assert not any("cut short" in n for n in snapshot.notes)
    assert Snapshot(source="collect-env", packages={"transformers": "4.57.6"}).lacks == ()
    assert Snapshot(source="snapshot", packages={"vllm": "0.19.1"}).lacks == ("transformers", "tokenizers")


# ---- 6. output that cannot be written -----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize(
    "args", [["doctor", "--capture"], ["doctor"], ["doctor", "--json"], ["scan", str(BORROW)]]
)
def test_a_full_disk_is_one_line_not_a_traceback(args: list[str]) -> None:
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "borrowguard", *args],
            stdout=full, stderr=subprocess.PIPE, timeout=TIMEOUT_S, check=False,
        )
    assert "cannot write the output: No space left on device" in one_line_error(proc)


# ---- 7. VLLM_PLUGINS that already lists borrowguard, with a blank --------------------------------------


@pytest.mark.slow
def test_vllm_plugins_with_a_blank_is_fixed_by_removing_it_not_by_repeating_the_name(tmp_path: Path) -> None:
    base = {"vllm": "0.19.1", "borrowguard": "0.1.0", "tokenizers": "0.23.3", "transformers": "5.24.0"}
    status = guard_status(
        Snapshot(packages=base, plugin_registered=True, env={"VLLM_PLUGINS": "lora,borrowguard "})
    )
    assert not status.active
    assert status.remedy is not None
    assert status.remedy.startswith("export VLLM_PLUGINS=lora,borrowguard ")
    assert status.remedy.count("borrowguard,") == 0 and "remove the blanks" in status.remedy
    quoted = guard_status(Snapshot(packages=base, plugin_registered=True, env={"VLLM_PLUGINS": '"borrowguard"'}))
    assert quoted.remedy is not None and quoted.remedy.startswith("export VLLM_PLUGINS=borrowguard ")
    plain = guard_status(Snapshot(packages=base, plugin_registered=True, env={"VLLM_PLUGINS": "lora"}))
    assert plain.remedy == "export VLLM_PLUGINS=lora,borrowguard"
    # As the operator reads it
    snapshot = {
        "schema": SCHEMA, "packages": base, "guard": {"plugin_registered": True},
        "env": {"VLLM_PLUGINS": "lora,borrowguard "},
    }
    path = tmp_path / "env.json"
    path.write_text(json.dumps(snapshot))
    out = " ".join(borrowguard("doctor", "--from", str(path)).stdout.decode().split())
    assert "fix: export VLLM_PLUGINS=lora,borrowguard # borrowguard is already listed" in out
    assert "borrowguard,borrowguard" not in out


# ---- 8. escape sequences from a log or a snapshot never reach the terminal -----------------------------

HOSTILE = (
    b"(APIServer pid=1\x9b2J\x07) RuntimeError: Already borrowed \x1b]0;owned\x07 \x1b[2J\n"
    b"(EngineCore_DP0 pid=\x1b]0;title\x07x) ERROR 07-07 20:12:45 [core.py:1] EngineCore encountered a fatal error.\n"
    b"(EngineCore_DP0 pid=\xc2\x9b2Jx) ERROR 07-07 20:12:46 [core.py:1] EngineCore encountered a fatal error.\n"
)  # the last one: U+009B (CSI as one C1 character) in UTF-8


def _controls(text: str) -> list[str]:
    return [ch for ch in text if (ord(ch) < 32 and ch not in "\n") or 0x7F <= ord(ch) <= 0x9F]


@pytest.mark.slow
def test_a_hostile_log_cannot_drive_the_terminal(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_bytes(HOSTILE)
    named = tmp_path / "x\x1b]0;title\x07.log"
    named.write_bytes(HOSTILE)
    proc = borrowguard("scan", str(log), str(named))
    out = proc.stdout.decode("utf-8", "replace") + proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2 and "tokenizer-already-borrowed" in out
    assert _controls(out) == [], sorted(set(_controls(out)))
    follow = borrowguard("scan", "--follow-cmd", f"cat {shlex.quote(str(log))}")
    out = follow.stdout.decode("utf-8", "replace") + follow.stderr.decode("utf-8", "replace")
    assert "tokenizer-already-borrowed" in out
    assert _controls(out) == [], sorted(set(_controls(out)))


def test_the_console_prints_no_escape_from_text(tmp_path: Path) -> None:
    out = console()
    buffer = io.StringIO()
    out.file = buffer
    out.print(Text("model \x1b]0;owned\x1b\\ name \x1b[2J\u009b2J end"))
    assert buffer.getvalue() == "model  name  end\n"
    buffer = io.StringIO()
    styled = _PrintableConsole(file=buffer, force_terminal=True, color_system="standard", highlight=False)
    styled.print(Text("\x1b[2J ok", style="bold"))
    assert buffer.getvalue() == "\x1b[1m ok\x1b[0m\n"  # rich's own styling is kept


@pytest.mark.slow
def test_a_hostile_snapshot_cannot_drive_the_terminal(tmp_path: Path) -> None:
    snapshot = {
        "schema": SCHEMA,
        "packages": {"vllm": "0.19.1\x1b[2J", "tokenizers": "0.22.2", "transformers": "4.57.6"},
        "platform": {"os": "Linux \x1b]0;owned\x07", "machine": "x86_64\u009b2J"},
        "requires": {"vllm\x1b]0;x\x07": ["transformers<5"]},
        "env": {"VLLM_PLUGINS": "a\x1b[31m,borrowguard\u009b"},
        "guard": {"plugin_registered": True},
        "notes": ["\x1b]8;;http://evil\x07click\x1b]8;;\x07"],
    }
    path = tmp_path / "env.json"
    path.write_text(json.dumps(snapshot))
    proc = borrowguard("doctor", "--from", str(path))
    out = proc.stdout.decode("utf-8", "replace") + proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in out and proc.returncode in (1, 2)
    assert _controls(out) == [], sorted(set(_controls(out)))


def test_of_two_inputs_only_the_cut_one_is_named(tmp_path: Path) -> None:
    packed = gzip.compress(CLEAN.read_bytes() + filler(20_000))
    cut = tmp_path / "cut.gz"
    cut.write_bytes(packed[: len(packed) // 3])
    result = scan_paths([str(BORROW), str(cut)])
    assert [w.split(":")[0] for w in result.warnings] == [str(cut)]
    assert result.sources == [str(BORROW), str(cut)]
    assert result.input_exit_code == 1 and result.exit_code == 2
