"""Read a snapshot for offline diagnosis: `doctor --capture` JSON or collect-env text, size-capped."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO

from borrowguard.doctor.collect_env import parse_collect_env
from borrowguard.doctor.snapshot import Snapshot
from borrowguard.errors import UserInputError

MAX_INPUT_BYTES = 10_000_000
"""Snapshots are a few kB and collect-env reports some tens of kB; larger input is refused unread."""


def read_snapshot(path: Path | str) -> Snapshot:
    """A snapshot from a file (or "-" for stdin) holding `doctor --capture`/`--json` output or the text of
    `vllm collect-env` / `python -m torch.utils.collect_env`."""
    name = str(path)
    if name == "-":
        data = _read_capped(sys.stdin.buffer, "standard input")
    else:
        try:
            with Path(path).open("rb") as fh:
                data = _read_capped(fh, name)
        except FileNotFoundError:
            raise UserInputError(f"snapshot file not found: {name}") from None
        except IsADirectoryError:
            raise UserInputError(f"{name} is a directory, not a snapshot file") from None
        except OSError as exc:
            raise UserInputError(f"cannot read {name}: {exc.strerror or exc}") from None
    return parse_snapshot(data, name)


def parse_snapshot(data: bytes, name: str = "input") -> Snapshot:
    if b"\x00" in data[:65536]:
        raise UserInputError(f"{name} is a binary file, not a snapshot or collect-env text")
    text = data.decode("utf-8", errors="replace").lstrip("\ufeff")
    if not text.strip():
        raise UserInputError(f"{name} is empty")
    if text.lstrip().startswith("{"):
        try:
            document = json.loads(text)
        except RecursionError:
            raise UserInputError(f"{name}: JSON nested too deeply") from None
        except ValueError as exc:
            raise UserInputError(f"{name}: not valid JSON: {exc}") from None
        return Snapshot.from_dict(document)
    return parse_collect_env(text)


def _read_capped(stream: BinaryIO, name: str) -> bytes:
    data = stream.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise UserInputError(
            f"{name} is larger than {MAX_INPUT_BYTES // 1_000_000} MB; a snapshot or collect-env report "
            "is far smaller, so it is not read"
        )
    return data


def with_server_log(snapshot: Snapshot, path: str) -> Snapshot:
    """`snapshot` plus how the server runs, read from the start-up lines of its log (vLLM's version,
    non-default arguments, engine config): what rules with a `server` condition need. The log's vLLM
    version is used when the snapshot does not know one (doctor run away from the server)."""
    from borrowguard.scan import scan_paths  # the scan machinery only when a log is given

    config = scan_paths([path]).server
    if config is None:
        return snapshot.with_notes(f"{path}: no server start-up lines found (server conditions stay unknown)")
    facts = config.facts()
    version = facts.pop("vllm_version", None)
    facts.pop("model", None)
    packages = dict(snapshot.packages)
    notes = [f"server facts from {path}: " + (", ".join(f"{k}={v}" for k, v in facts.items()) or "none")]
    if version and not snapshot.version("vllm"):
        packages["vllm"] = version
        notes.append(f"vllm {version} taken from {path} (not installed here)")
    return replace(snapshot, server=MappingProxyType(facts), packages=MappingProxyType(packages)).with_notes(*notes)
