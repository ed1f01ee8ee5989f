"""One knowledge-base entry in words: what it is, how it shows in logs, which versions, remedies in order,
references. `borrowguard explain` prints it; the markdown export (the troubleshooting page) renders it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from borrowguard.knowledge.export.lines import scan_only_reason
from borrowguard.knowledge.loader import KnowledgeBase, Problem
from borrowguard.knowledge.model import Confidence, jsonable, listed

NEITHER = "neither doctor nor scan (no check, no log signature)"
_ISSUE = re.compile(r"(?P<repo>[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100})#(?P<number>[0-9]{1,9})")


@dataclass(frozen=True)
class Reference:
    text: str
    url: str | None


@dataclass(frozen=True)
class Entry:
    id: str
    title: str
    severity: str
    explanation: str
    found_by: tuple[str, ...]
    logs: tuple[str, ...]
    """One sentence per log signature; regexes in backticks."""
    line_rules: tuple[int, ...]
    """The signatures (1-based) that `rules export` writes as line rules; the others need scan."""
    versions: tuple[str, ...]
    remedies: tuple[str, ...]
    references: tuple[Reference, ...]
    related: tuple[str, ...]
    referenced_by: tuple[str, ...]
    kind: str = "other"
    leads_to: tuple[str, ...] = ()
    """Findings it causes (scan's causal chain)."""
    leads_to_when_traced: tuple[str, ...] = ()
    """Findings it causes only when their own traceback runs through its frames."""
    advice: str | None = None
    answers: tuple[str, ...] = ()
    """Texts by which it shows in an HTTP answer's error message (verify's fault classification)."""
    exposed_by: tuple[str, ...] = ()
    """Request features without which it cannot happen (verify's race exposure)."""
    attribution: tuple[str, ...] = ()
    """Per log signature with a context table: how scan decides whose error the matched line is."""
    never: str | None = None
    """The lines no signature of it counts (its problem-wide `exclude`), in words; each of `logs` leaves them out."""

    def to_dict(self) -> dict[str, Any]:
        return jsonable(self)  # type: ignore[no-any-return]


def describe(kb: KnowledgeBase, problem: Problem) -> Entry:
    found_by = (*(("doctor",) if problem.detect else ()), *(("scan",) if problem.signatures else ()))
    versions = list(conditions(problem.detect)) if problem.detect else []
    for other_id in problem.related:
        other = kb.get(other_id)
        if other is not None and other.detect:
            facts = [c for c in conditions(other.detect) if not c.startswith("reported as")]
            versions.append(f"through {other_id}: {'; '.join(facts)}")
    return Entry(
        id=problem.id,
        title=problem.title,
        severity=str(problem.severity),
        explanation=problem.explanation,
        found_by=found_by,
        logs=tuple(signature(raw, besides=problem.exclude) for raw in problem.signatures),
        line_rules=tuple(i + 1 for i, raw in enumerate(problem.signatures) if scan_only_reason(raw) is None),
        versions=tuple(versions),
        remedies=problem.remedies,
        references=tuple(reference(r) for r in problem.references),
        related=problem.related,
        referenced_by=tuple(p.id for p in kb if problem.id in p.related),
        kind=str(problem.kind.value),
        leads_to=problem.leads_to,
        leads_to_when_traced=problem.leads_to_when_traced,
        advice=problem.advice,
        answers=problem.answers,
        exposed_by=problem.exposed_by,
        attribution=tuple(
            attribution(raw["context"]) for raw in problem.signatures if isinstance(raw.get("context"), Mapping)
        ),
        never=f"Whichever of these reads it, never a line matching {_any(problem.exclude)}" if problem.exclude else None,
    )


def attribution(context: Mapping[str, Any]) -> str:
    """A signature's `[problem.signature.context]` table as one sentence: whose error a matched line is."""
    reach = context.get("reach", 200)
    parts = []
    if context.get("tokenizer"):
        parts.append(
            "this problem (high confidence) when its traceback's innermost frames or source line, its own line "
            f"or a line of the same process within {reach} lines names {_any(context['tokenizer'])}"
        )
    if context.get("code"):
        parts.append(f"the same when a quoted source line of its traceback matches {_any(context['code'])}")
    if context.get("answer"):
        parts.append(f"the same when its own line is an HTTP answer matching {_any(context['answer'])}")
    others = context.get("others") or {}
    if others:
        libraries = ", ".join(f"{name} ({_any(lits)})" for name, lits in others.items())
        parts.append(
            f"not this problem but {context.get('elsewhere')} when the nearest evidence names another library: "
            f"{libraries}"
        )
    if context.get("quoted"):
        parts.append(f"not an occurrence when it is source code quoting the words ({_any(context['quoted'])})")
    parts.append(f"with no such context at all: {context.get('bare', 'low')} confidence")
    return "Whose error it is, by its context: " + "; ".join(parts)


def reference(text: str) -> Reference:
    m = _ISSUE.fullmatch(text.strip())
    if m:  # GitHub redirects /issues/N to /pull/N for a pull request
        return Reference(text, f"https://github.com/{m['repo']}/issues/{m['number']}")
    return Reference(text, text if text.startswith(("https://", "http://")) else None)


def code(text: str) -> str:
    """Inline code that survives backticks inside."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _any(patterns: Any) -> str:
    items = (patterns,) if isinstance(patterns, str) else tuple(patterns)
    return " or ".join(code(p) for p in items)


def signature(raw: Mapping[str, Any], besides: tuple[str, ...] = ()) -> str:
    """A `[[problem.signature]]` table as one sentence; `besides`: exclusions said once for the whole problem
    (its `exclude`), left out here."""
    confidence = raw.get("confidence", "high")
    sure = "" if confidence == "high" else f" ({confidence} confidence)"
    if raw.get("stall"):
        text = f"the log ends within {raw.get('stall_lines', 50)} lines after a line matching {_any(raw['stall'])}"
        if raw.get("resume"):
            text += f", with no line matching {_any(raw['resume'])} after it"
        text += sure
    elif raw.get("frames"):
        frames = (raw["frames"],) if isinstance(raw["frames"], str) else tuple(raw["frames"])
        text = "a traceback through " + ", then ".join(code(f) for f in frames)
        if raw.get("raises"):
            text += f", ending in an exception line matching {_any(raw['raises'])}"
        text += sure
        cut = raw.get("when_cut") or Confidence(confidence).lower().value
        text += (
            "; not counted when cut before its exception line" if cut == "none"
            else f"; when cut before its exception line: {cut} confidence"
        )
        if cut != "none" and raw.get("cut_inside"):
            text += f", only when its last frame matches {_any(raw['cut_inside'])}"
        if cut != "none" and raw.get("cut_not_at"):
            text += f", never when its innermost call matches {_any(raw['cut_not_at'])}"
    else:
        text = f"a log line matching {_any(raw.get('message', ()))}{sure}"
    own = [x for x in listed(raw.get("exclude")) if x not in besides]
    if own:
        text += f"; never a line matching {_any(own)}"
    if raw.get("startup") == "ignore":
        text += "; not while the server starts up"
    return text[:1].upper() + text[1:]


def conditions(detect: Mapping[str, Any]) -> list[str]:
    """A doctor rule's `[problem.detect]` as the versions and settings it is about."""
    out: list[str] = []
    packages = detect.get("packages") or {}
    if packages:
        out.append(", ".join(f"{name} {spec}" if spec else f"{name} (any version)" for name, spec in packages.items()))
    if detect.get("python"):
        out.append(f"Python {detect['python']}")
    if detect.get("nccl"):
        out.append(f"NCCL {detect['nccl']}")
    if detect.get("machine"):
        out.append(f"machine {' or '.join(detect['machine'])}")
    if detect.get("system"):
        out.append(f"system {' or '.join(detect['system'])}")
    for name, spec in (detect.get("server") or {}).items():
        out.append(f"server {name} {spec if isinstance(spec, str) else ' or '.join(spec)}")
    if "guard" in detect:
        out.append("borrowguard's vLLM plugin " + ("active" if detect["guard"] else "not active"))
    if detect.get("check") == "vllm-requirements":
        out.append("the installed packages against vLLM's declared requirements (Requires-Dist)")
    if detect.get("guarded_severity"):
        out.append(f"reported as {detect['guarded_severity']} when borrowguard's guard is active")
    return out
