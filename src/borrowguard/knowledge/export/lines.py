"""Which signatures of the knowledge base can leave as a one-line regex, and which need `borrowguard scan`.

A log engine (Loki, Elasticsearch, Vector) sees one raw line at a time. A signature goes out only when a
line regex says exactly what scan says: `message` regexes, minus the `exclude` ones, and nothing that
needs more than the line (traceback frames, a hang at the end of the log, the server's start-up phase).
Its regexes must also be expressible in the target engine's dialect (see `dialects`). Everything else is
listed, with the reason, as "needs borrowguard scan": a weaker rule would be a wrong one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from borrowguard._version import __version__
from borrowguard.knowledge.export.dialects import Unsupported
from borrowguard.knowledge.loader import KnowledgeBase, Problem
from borrowguard.knowledge.model import listed


@dataclass(frozen=True)
class LineSignature:
    """One `[[problem.signature]]` table as a line rule: a line that matches one of `message` and none of
    `exclude` (both already in the target dialect) is an occurrence."""

    index: int
    message: tuple[str, ...]
    exclude: tuple[str, ...]
    python: tuple[str, ...]
    """The original (Python) message regexes, for comments and docs."""
    attribution: str | None = None
    """For a signature with a context table: what of scan's attribution the line rule carries."""


@dataclass(frozen=True)
class LineRule:
    problem: Problem
    signatures: tuple[LineSignature, ...]
    total: int
    """How many signatures the problem has in all (the others need scan)."""


@dataclass(frozen=True)
class ScanOnly:
    problem_id: str
    index: int
    why: str


@dataclass(frozen=True)
class ExportPlan:
    rules: tuple[LineRule, ...]
    scan_only: tuple[ScanOnly, ...]
    environment_only: tuple[str, ...]
    """Problems with no log signature at all: `borrowguard doctor` finds them in the environment."""


def plan(kb: KnowledgeBase, convert: Callable[[str], str]) -> ExportPlan:
    """Split every signature of `kb` into line rules (regexes rewritten by `convert`) and scan-only ones."""
    rules: list[LineRule] = []
    scan_only: list[ScanOnly] = []
    environment: list[str] = []
    for problem in kb:
        if not problem.signatures:
            environment.append(problem.id)
            continue
        exported: list[LineSignature] = []
        for index, raw in enumerate(problem.signatures):
            why = scan_only_reason(raw)
            if why is None:
                try:
                    exported.append(_line_signature(index, raw, convert))
                    continue
                except Unsupported as exc:
                    why = f"its regex cannot be written for this engine: {exc}"
            scan_only.append(ScanOnly(problem.id, index, why))
        if exported:
            rules.append(LineRule(problem, tuple(exported), len(problem.signatures)))
    return ExportPlan(tuple(rules), tuple(scan_only), tuple(environment))


def scan_only_reason(raw: Mapping[str, Any]) -> str | None:
    """Why a signature table cannot be a line rule in any engine, or None."""
    if raw.get("frames"):
        return "traceback frames (needs the traceback: frames in order, then its exception line)"
    if raw.get("stall"):
        return "a hang (needs the end of the log: a stall line with no resume line after it)"
    if raw.get("startup") == "ignore":
        return "not counted while the server starts up (needs the server's start-up phase)"
    if not raw.get("message"):
        return "no message regex"
    return None


def _line_signature(index: int, raw: Mapping[str, Any], convert: Callable[[str], str]) -> LineSignature:
    message = listed(raw.get("message"))
    exclude = listed(raw.get("exclude"))
    context = raw.get("context")
    note = None
    if isinstance(context, Mapping):
        # What one line can carry of scan's attribution: a line that itself names another library is that
        # library's error (scan: the `elsewhere` finding), source code quoting the words is no occurrence.
        # The rest needs the lines around it (frames, the same process's lines): scan's, not a line rule's.
        others = context.get("others") or {}
        exclude += tuple(re.escape(lit) for lits in others.values() for lit in listed(lits))
        exclude += listed(context.get("quoted"))
        note = attribution_note(context)
    return LineSignature(
        index=index,
        message=tuple(convert(p) for p in message),
        exclude=tuple(convert(p) for p in exclude),
        python=message,
        attribution=note,
    )


def attribution_note(context: Mapping[str, Any]) -> str:
    """What a line rule of a signature with a context table does, and what it leaves to scan."""
    others = ", ".join(str(name) for name in (context.get("others") or {}))
    text = "one line only: "
    if others:
        text += f"a line naming another library ({others}) is left out (scan: {context.get('elsewhere')}), "
    if context.get("quoted"):
        text += "so is source code quoting the words, "
    return text + (
        f"any other line counts at {context.get('bare', 'low')} confidence; scan decides by the context "
        "(traceback frames, the lines around it) and raises it to high when that names the tokenizer, "
        "or attributes it elsewhere"
    )


NOT_DONE = (
    "colour codes stay on the line: one inside the matched words hides them (scan removes raw, caret-notation "
    "and text-form ANSI codes first)",
    "prefixes stay on the line (docker-compose and kubectl labels, timestamps, vLLM's (APIServer pid=...) "
    "and log headers): the rules search anywhere in the line, so they still match, but an exclusion can "
    "also match a prefix",
    "no traceback context: scan does not count a message quoted in a traceback's source lines and counts "
    "one occurrence per traceback; a line rule counts every matching line",
    "scan reads only the last carriage-return segment of a progress-bar line, and only the two ends of a "
    "line over 64 KiB",
    "one event must be one line: where a shipper merges lines (multi-line tracebacks), an exclusion "
    "anywhere in the event suppresses it",
    "no paragraph context: scan does not count a problem that the prose of a change's description names as "
    "what the change handles (a death, a status, an OOM, an NCCL failure; after its template's headings, or "
    "in a title that begins \"Fix \", \"[Bugfix]\", \"fix:\"); a line rule counts it",
)


def header(p: ExportPlan, command: str, engine: str) -> list[str]:
    """The explanation every export carries (as comments where the format has them): what it is, what
    it cannot do, and what still needs scan."""
    n = sum(len(r.signatures) for r in p.rules)
    lines = [
        f"Generated by `{command}` (borrowguard {__version__}) from its knowledge base (rules.toml).",
        f"{len(p.rules)} finding ids, {n} log signatures as {engine} line rules; "
        f"{len(p.scan_only)} signatures need `borrowguard scan` (listed below).",
        "Explain a finding: borrowguard explain ID",
        "What a line rule does not do that scan does:",
        *(f"  - {item}" for item in NOT_DONE),
    ]
    for r in p.rules:
        for sig in r.signatures:
            if sig.attribution is not None:
                lines.append(f"Attribution of {r.problem.id} #{sig.index + 1}: {sig.attribution}")
    lines.append("Needs borrowguard scan (not expressible as one line regex):")
    grouped: dict[tuple[str, str], list[str]] = {}
    for s in p.scan_only:
        grouped.setdefault((s.problem_id, s.why), []).append(f"#{s.index + 1}")
    lines += [f"  - {pid} {', '.join(idx)}: {why}" for (pid, why), idx in grouped.items()] or ["  (none)"]
    if p.environment_only:
        lines.append(f"Environment problems, not in logs (borrowguard doctor): {', '.join(p.environment_only)}")
    return lines
