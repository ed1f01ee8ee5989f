"""The causal chain: found problems in the order the operator should read them, causes first.

The edges are what was observed on real servers (vLLM above all): a tokenizer borrow error makes the
multimodal processor retry ("Failed to acquire tokenizer") and fail the request with a 400 or 500, and can
leave the multimodal caches out of step; a desynced cache, an NCCL failure or a full GPU can kill the
engine; after a death every request fails. A tokenizer race is *not* an engine death's cause: measured on
vLLM 0.17.1 to 0.21.0 under image, tool and bad_words load it never killed EngineCore. The two are linked
only when EngineCore's own fatal traceback runs through tokenizer frames; otherwise the death's cause is
EngineCore's own final exception, shown with it.

The edges and the advice are the knowledge base's (`leads_to`, `leads_to_when_traced`, `advice` in
rules.toml): this module only orders what was found by them.

Each root also points at its environment causes through the knowledge base's `related` ids, so the remedy
is the one written once there. Rules about particular vLLM versions or settings are shown only when the
log's start-up lines say the server matches them.
"""

from __future__ import annotations

from collections.abc import Sequence

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from borrowguard.knowledge import Kind, KnowledgeBase, Problem
from borrowguard.knowledge.detect import server_condition, vllm_range
from borrowguard.scan.model import ChainStep, LogFinding, Role
from borrowguard.scan.startup import StartupFacts


def build_chain(
    findings: Sequence[LogFinding], kb: KnowledgeBase, server: StartupFacts | None = None
) -> list[ChainStep]:
    """Found problems in causal order (ties: the order given, i.e. first occurrence), each root (nothing
    found explains it) followed by its environment causes. Empty when nothing was found."""
    present = {f.id: f for f in findings}
    death = kb.the(Kind.ENGINE_DEATH).id
    causes_of = {
        fid: tuple(c for c in _causes(fid, present, kb, death) if c in present and c != fid) for fid in present
    }
    steps: list[ChainStep] = []
    env_seen: set[str] = set()
    for fid in _causal_order(present, causes_of):
        f = present[fid]
        if causes_of[fid]:
            steps.append(ChainStep(fid, f.title, Role.CONSEQUENCE, causes_of[fid], _death_advice(f, death)))
            continue
        problem = kb.get(fid)
        own = problem.advice if problem is not None else None
        advice = _death_advice(f, death) or (own if len(present) > 1 or f.related else None)
        steps.append(ChainStep(fid, f.title, Role.ROOT, (), advice))
        for env in _environment(f, kb, server):
            if env.id not in env_seen:
                env_seen.add(env.id)
                remedy = env.remedies[0] if env.remedies else None
                steps.append(ChainStep(env.id, env.title, Role.ENVIRONMENT, (fid,), remedy))
    return steps


def _environment(f: LogFinding, kb: KnowledgeBase, server: StartupFacts | None) -> list[Problem]:
    """The environment problems behind a root: every related rule that is not about particular vLLM
    versions or settings; of those that are, the ones the server's start-up lines say it matches, or,
    when the log does not say, the one such rule if it has no alternative."""
    related = [p for p in (kb.get(i) for i in f.related) if p is not None]
    specific = [p for p in related if _version_specific(p)]
    if server is None or server.vllm_version is None:
        lone = specific if len(specific) == 1 and not (specific[0].detect or {}).get("server") else []
        return [p for p in related if p not in specific or p in lone]
    return [p for p in related if p not in specific or _applies(p, server)]


def _version_specific(problem: Problem) -> bool:
    detect = problem.detect or {}
    return vllm_range(detect) is not None or bool(detect.get("server"))


def _causes(fid: str, present: dict[str, LogFinding], kb: KnowledgeBase, death: str) -> tuple[str, ...]:
    # a traced edge (a tokenizer error -> the engine's death) holds only when the death's traceback ran
    # through the cause's frames, which the scanner tells for the engine death alone
    return kb.causes_of(fid, traced=fid == death and present[fid].via_tokenizer)


def _death_advice(f: LogFinding, death: str) -> str | None:
    if f.id != death:
        return None
    if f.cause is None:
        return "EngineCore's own traceback, above the first occurrence, names the cause"
    tokenizer = " (its traceback runs through tokenizer frames)" if f.via_tokenizer else ""
    return f"EngineCore's own final exception: {f.cause}{tokenizer}"


def _applies(env: Problem, server: StartupFacts) -> bool:
    """Whether an environment rule about particular vLLM versions or settings matches the server."""
    detect = env.detect or {}
    versions = vllm_range(detect)
    if server.vllm_version is None:
        return False
    try:
        if versions is not None and not SpecifierSet(versions).contains(Version(server.vllm_version), True):
            return False
    except InvalidVersion:
        return False
    return server_condition(detect, server.facts()) is not None


def _causal_order(present: dict[str, LogFinding], causes_of: dict[str, tuple[str, ...]]) -> list[str]:
    # Kahn's algorithm over the found problems; ties keep the given order (first occurrence first).
    order: list[str] = []
    remaining = list(present)
    while remaining:
        ready = [fid for fid in remaining if all(c in order for c in causes_of[fid])]
        if not ready:  # a user's rules file may make a cycle: never loop forever on one
            ready = remaining[:1]
        order.append(ready[0])
        remaining.remove(ready[0])
    return order


def summary(steps: Sequence[ChainStep]) -> list[str]:
    """One line per group of found problems that explain each other: "a → b → c: advice", roots first;
    a problem alone in its group gets a line only when it has advice."""
    found = [s for s in steps if s.role is not Role.ENVIRONMENT]
    groups: dict[str, list[ChainStep]] = {}
    root_of: dict[str, str] = {}
    for step in found:
        root = root_of.get(step.caused_by[0], step.caused_by[0]) if step.caused_by else step.id
        root_of[step.id] = root
        groups.setdefault(root, []).append(step)
    lines = []
    for group in groups.values():
        if len(group) == 1 and len(found) == 1:
            continue
        arrow = " → ".join(s.id for s in group)
        advice = next((s.advice for s in group if s.role is Role.ROOT and s.advice), None)
        lines.append(f"{arrow}: {advice}" if advice else arrow)
    return lines
