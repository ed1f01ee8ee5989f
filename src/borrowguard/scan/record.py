"""Hits into findings: aggregation per problem, and the cause of an engine death."""

from __future__ import annotations

import re
from collections.abc import Mapping

from borrowguard.knowledge import Kind, KnowledgeBase
from borrowguard.scan.model import Hit, LogFinding
from borrowguard.scan.state import CAUSE_REACH, Ended, SourceState

_NOT_A_CAUSE = re.compile(r"EngineDeadError|EngineCore encountered|died unexpectedly|CancelledError")
"""Exceptions that report the death itself (or a request it cancelled), not what caused it."""


def record(findings: dict[str, LogFinding], hit: Hit, kb: KnowledgeBase) -> None:
    finding = findings.get(hit.id)
    if finding is not None:
        finding.add(hit)
        return
    problem = kb.get(hit.id)
    finding = findings[hit.id] = LogFinding(
        id=hit.id,
        severity=hit.severity,
        title=problem.title if problem else hit.id,
        first=hit,
        last=hit,
        explanation=problem.explanation if problem else "",
        remedies=problem.remedies if problem else (),
        references=problem.references if problem else (),
        related=problem.related if problem else (),
        confidence=hit.confidence,
    )
    finding._note(hit)


def engine_causes(findings: Mapping[str, LogFinding], sources: Mapping[str, SourceState], kb: KnowledgeBase) -> None:
    """Give the engine death its cause: the last exception that ended one of EngineCore's own tracebacks
    near the first death (the same process when the death was logged by EngineCore or by a log without
    process labels; any EngineCore process when the API server reported it)."""
    finding = findings.get(kb.the(Kind.ENGINE_DEATH).id)
    if finding is None or finding.cause is not None:
        return
    hit = finding.first
    st = sources.get(hit.source)
    if st is None:
        return
    own = hit.process is None or "EngineCore" in hit.process

    def engine_side(e: Ended) -> bool:
        if own:
            return e.process == hit.process
        return e.process is not None and "EngineCore" in e.process

    near = [
        e for e in st.ended
        if abs(e.line_no - hit.line_no) <= CAUSE_REACH and engine_side(e) and not _NOT_A_CAUSE.search(e.text)
    ]
    if near:
        finding.cause = near[-1].text
        finding.via_tokenizer = near[-1].tokenizer
