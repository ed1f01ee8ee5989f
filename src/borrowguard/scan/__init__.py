"""Diagnose server logs against the knowledge base's failure signatures.

    from borrowguard.scan import Scanner, scan_paths, follow_file, follow_command

    result = scan_paths(["vllm.log", "old/*.log.gz"])        # fast, streaming, constant memory
    sc = Scanner()                                            # or line by line (follow mode, verify)
    hits = sc.feed(line, source="server.log")
    sc.result().to_dict()   # {"findings": [...], "chain": [...], "lines": N, ...}

Modules: normalize (prefixes, headers, colours), tracebacks (frames per process), scanner (matching and
aggregation), fast (the bulk reader's anchor search), chain (causal order), readers (files, .gz, stdin,
globs, a growing file, a command), live (follow mode over several sources), model (result types).
Signatures are compiled by borrowguard.knowledge.signatures.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Sequence

from borrowguard.errors import UserInputError
from borrowguard.knowledge import KnowledgeBase
from borrowguard.scan.model import ChainStep, Finding, Hit, ScanResult
from borrowguard.scan.normalize import Line, normalize
from borrowguard.scan.readers import Input, expand, follow_command, follow_file, open_input
from borrowguard.scan.scanner import Scanner

__all__ = [
    "ChainStep",
    "Finding",
    "Hit",
    "Input",
    "Line",
    "ScanResult",
    "Scanner",
    "expand",
    "follow_command",
    "follow_file",
    "normalize",
    "open_input",
    "scan_inputs",
    "scan_paths",
]


def scan_inputs(inputs: Sequence[Input], scanner: Scanner | None = None) -> ScanResult:
    """Scan each input to its end with the fast path; a damaged .gz is scanned as far as it reads and
    noted in the result's warnings."""
    sc = scanner if scanner is not None else Scanner()
    for inp in inputs:
        with open_input(inp) as stream:
            try:
                sc.scan_stream(stream, inp.name)
            except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
                sc.finish(inp.name)
                sc.warn(f"{inp.name}: compressed data is damaged or truncated; scanned up to there ({exc})")
            except OSError as exc:
                raise UserInputError(f"cannot read {inp.name}: {exc.strerror or exc}") from None
    return sc.result()


def scan_paths(specs: Sequence[str], kb: KnowledgeBase | None = None) -> ScanResult:
    """Files, globs and "-" (stdin), merged into one result."""
    return scan_inputs(expand(specs), Scanner(kb))
