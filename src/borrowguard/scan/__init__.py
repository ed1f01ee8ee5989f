"""Diagnose server logs against the knowledge base's failure signatures.

    from borrowguard.scan import Scanner, scan_paths, Follower, follow_file, follow_command

    result = scan_paths(["vllm.log", "old/*.log.gz"])        # fast, streaming, constant memory
    sc = Scanner()                                            # or line by line (follow mode, verify)
    hits = sc.feed(line, source="server.log")
    sc.result().to_dict()   # {"findings": [...], "chain": [...], "lines": N, ...}

Modules: normalize (prefixes, headers, colours), tracebacks (frames per process), scanner (matching),
state (what is kept per source), record (findings, an engine death's cause), startup (start-up lines:
configuration and phase), bulk and fast (the bulk reader, its anchor search), chain (causal order),
live (follow mode over several sources), model (result types: `Hit` is one occurrence, `LogFinding`
every occurrence of one problem). The inputs subpackage makes inputs readable: readers (files, .gz,
stdin, globs), file_follower and command_follower (a growing file, a command), follower (several
sources at once, a thread each: scan's follow mode and verify's log watch), stream (an input made
readable: gzip, UTF-16, binary; over kind, byte_streams and long_lines), report (what happened reading
the inputs).
Signatures are compiled by borrowguard.knowledge.signatures.
"""

from __future__ import annotations

from collections.abc import Sequence

from borrowguard._text import printable
from borrowguard.errors import UserInputError
from borrowguard.knowledge import KnowledgeBase
from borrowguard.scan.inputs.command_follower import follow_command
from borrowguard.scan.inputs.file_follower import follow_file
from borrowguard.scan.inputs.follower import Follower, SourceState
from borrowguard.scan.inputs.readers import Input, expand, open_input
from borrowguard.scan.inputs.report import InputReport
from borrowguard.scan.model import ChainStep, Hit, LogFinding, ScanResult
from borrowguard.scan.normalize import Line, normalize
from borrowguard.scan.scanner import Scanner

__all__ = [
    "ChainStep",
    "Follower",
    "Hit",
    "Input",
    "InputReport",
    "Line",
    "LogFinding",
    "ScanResult",
    "Scanner",
    "SourceState",
    "expand",
    "follow_command",
    "follow_file",
    "normalize",
    "open_input",
    "scan_inputs",
    "scan_paths",
]


def scan_inputs(
    inputs: Sequence[Input], scanner: Scanner | None = None, report: InputReport | None = None
) -> ScanResult:
    """Scan each input to its end with the fast path. A damaged .gz is scanned as far as it decompresses
    and named in the result's warnings; binary files are skipped and named in its notes (UserInputError
    when no input is a readable log); lines cut to their ends are noted once per input. What is said
    about the inputs also goes to `report` (apply it to a later `scanner.result()`)."""
    sc = scanner if scanner is not None else Scanner()
    report = report if report is not None else InputReport()
    skipped: list[str] = []
    for inp in inputs:
        with open_input(inp) as stream:
            if stream.not_a_log:
                skipped.append(f"{inp.name}: {stream.not_a_log}")
                report.note(f"skipped {skipped[-1]}")
                continue
            sc.scan_stream(stream, inp.name)  # type: ignore[arg-type]
            report.read(stream)
    if inputs and len(skipped) == len(inputs):
        more = f" (and {len(skipped) - 3} more)" if len(skipped) > 3 else ""
        raise UserInputError(printable("nothing to scan: " + "; ".join(skipped[:3]) + more))
    return report.apply(sc.result())


def scan_paths(specs: Sequence[str], kb: KnowledgeBase | None = None) -> ScanResult:
    """Files, globs and "-" (stdin), merged into one result."""
    return scan_inputs(expand(specs), Scanner(kb))
