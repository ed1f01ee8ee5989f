"""The verdict, as a pure function of what a run collected: no I/O, no clock, no server.

    reasons = level_reasons(level_facts)          # after each level of a sweep
    verdict, reasons, checks, notes = decide(run_facts)

FAIL when any of: a tokenizer error (in the log or in an answer's body); engine death; failed requests of
the server's own making above `max_error_rate`; identical requests with different prompt token counts;
a scenario without a single success. Requests the server refused because of what we sent (too long, no
vision, no tool parser) are the workload's fault: reported apart, never counted against the server.
ERROR (exit 2) when the run could not happen, or nothing valid could be sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from borrowguard.knowledge import Kind, load
from borrowguard.load.faults import Fault
from borrowguard.load.reference import VECTOR_TOLERANCE
from borrowguard.load.summary import LevelSummary
from borrowguard.verify.result import Check, CheckName, CheckState, LevelResult, Reason, ReasonCode, Verdict
from borrowguard.verify.wording import LOG_FLAGS

# which log findings are the tokenizer race and which the engine's death: the knowledge base says, by kind
TOKENIZER_IDS = load().log_ids(Kind.TOKENIZER_RACE)
DEATH_IDS = load().log_ids(Kind.ENGINE_DEATH)
_WORST_GROUPS = 6


@dataclass(frozen=True)
class LevelFacts:
    concurrency: int
    summary: LevelSummary
    tokenizer_counts: dict[str, int]  # log findings of this level
    first_tokenizer_line: str | None
    death: str | None
    interrupted: bool
    max_error_rate: float


@dataclass(frozen=True)
class LogState:
    """What was read of the server's log: a PASS may claim "no tokenizer errors in the log" only if
    every source yielded lines and none failed."""

    given: bool
    lines: int = 0
    failed: list[str] = field(default_factory=list)  # "source: why"
    silent: list[str] = field(default_factory=list)  # sources that never yielded a line


@dataclass(frozen=True)
class RunFacts:
    levels: list[LevelResult]
    could_not_run: str | None
    interrupted: bool
    death: str | None
    tokenizer_counts_total: dict[str, int]
    tokenizer_reported: int  # tokenizer findings already reported by a level
    first_tokenizer_line: str | None
    log: LogState
    health_watched: bool
    health_failed: bool
    health_polls: int = 0
    max_error_rate: float = 0.0


def level_reasons(f: LevelFacts) -> list[Reason]:
    s = f.summary
    reasons: list[Reason] = []
    body_tokenizer = s.failed_for(Fault.TOKENIZER)
    if f.tokenizer_counts or body_tokenizer:
        reasons.append(
            Reason(
                ReasonCode.TOKENIZER_ERRORS,
                _tokenizer_message(f.tokenizer_counts, body_tokenizer, f.first_tokenizer_line),
                f.concurrency,
            )
        )
    if f.death is not None:
        reasons.append(Reason(ReasonCode.ENGINE_DEAD, f"engine death: {f.death}", f.concurrency))
    reasons += _request_errors(f)
    for key, repeat in sorted(s.repeats.items()):
        values = ", ".join(f"{v} ({n}×)" for v, n in repeat.prompt_tokens.items())
        alone = f"; sent alone before the load it got {repeat.reference}" if repeat.reference is not None else ""
        if not repeat.consistent:
            reasons.append(
                Reason(
                    ReasonCode.PROMPT_TOKENS_MISMATCH,
                    f"identical requests {key} got different usage.prompt_tokens: {values}{alone}",
                    f.concurrency,
                    key=key,
                )
            )
        elif not repeat.matches_reference:  # consistently wrong under load
            reasons.append(
                Reason(
                    ReasonCode.PROMPT_TOKENS_MISMATCH,
                    f"identical requests {key} got usage.prompt_tokens {values} under load{alone}",
                    f.concurrency,
                    key=key,
                )
            )
        if repeat.vectors_differing:
            reasons.append(
                Reason(
                    ReasonCode.VECTOR_MISMATCH,
                    f"identical requests {key}: {repeat.vectors_differing} of {repeat.vectors_compared} answers "
                    f"had vectors beyond {VECTOR_TOLERANCE:g} (relative L2) of the reference, up to "
                    f"{repeat.vector_max_distance:.3g}",
                    f.concurrency,
                    key=key,
                )
            )
    for name, stats in s.scenarios.items():
        mismatched = sum(g.count for g in s.groups(workload=True) if g.scenario == name)
        if stats.ok == 0 and not (f.interrupted and stats.count == 0) and mismatched < stats.count:
            reasons.append(
                Reason(
                    ReasonCode.NO_SUCCESS,
                    f"scenario {name!r}: no successful request ({stats.count} sent)",
                    f.concurrency,
                )
            )
    return reasons


def _request_errors(f: LevelFacts) -> list[Reason]:
    s = f.summary
    # The workload's own mismatches are not the server's failures; neither are they valid requests.
    valid = s.valid
    server_errors = s.errors - s.failed_for(Fault.WORKLOAD)
    if valid <= 0 or server_errors / valid <= f.max_error_rate:
        return []
    worst = []
    for group in sorted(s.groups(workload=False), key=lambda g: -g.count)[:_WORST_GROUPS]:
        msg = f" ({group.messages[0][:160]})" if group.messages else ""
        worst.append(f"{group.count} × {group.status} on {group.scenario}{msg}")
    tied = s.tied_resets
    tail = f"; {tied} reset(s) right after an error answer are counted with it" if tied else ""
    if s.empty_5xx:
        tail += "; " + empty_5xx_said(s.empty_5xx, s.empty_5xx_bad_words)
    rate = f"{server_errors / valid:.2%} > {f.max_error_rate:.2%}"
    return [
        Reason(
            ReasonCode.REQUEST_ERRORS,
            f"{server_errors} of {valid} valid requests failed ({rate}): " + "; ".join(worst) + tail,
            f.concurrency,
        )
    ]


def empty_5xx_said(empty: int, on_bad_words: int) -> str:
    """What 5xx answers with an empty message are, and how to see their real error."""
    text = f"{empty} 5xx answer(s) had an empty message"
    if on_bad_words:
        text += (f", {on_bad_words} of them on requests with bad_words (vLLM answers so when the tokenizer call "
                 "of its bad_words path raises)")
    return text + ": start the server with --enable-log-requests (and give --log) to see the real error"


def decide(f: RunFacts) -> tuple[Verdict, list[Reason], list[Check], list[str]]:
    reasons: list[Reason] = []
    notes: list[str] = []
    if f.could_not_run is not None:
        reasons.append(Reason(ReasonCode.COULD_NOT_RUN, f.could_not_run))
    for level in f.levels:
        reasons.extend(level.reasons)
    # Tokenizer lines that arrived after the last level's verdict (the final read of the log) count too.
    if sum(f.tokenizer_counts_total.values()) > f.tokenizer_reported:
        reasons.append(
            Reason(
                ReasonCode.TOKENIZER_ERRORS,
                _tokenizer_message(f.tokenizer_counts_total, 0, f.first_tokenizer_line),
            )
        )
    if f.death is not None and not any(r.code is ReasonCode.ENGINE_DEAD for r in reasons):
        reasons.append(Reason(ReasonCode.ENGINE_DEAD, f"engine death: {f.death}"))
    reasons = _once_per_key(reasons)
    reasons += _cross_level_repeats(f.levels, reasons)
    valid = sum(lvl.summary.valid for lvl in f.levels)
    sent = sum(lvl.summary.requests for lvl in f.levels)
    if f.levels and sent and not valid and not reasons:
        reasons.append(
            Reason(
                ReasonCode.WORKLOAD_MISMATCH,
                f"the server refused all {sent} requests for what they asked "
                "(see the workload section): nothing valid could be sent",
            )
        )
    checks = _checks(f, reasons)
    if any(r.code in (ReasonCode.COULD_NOT_RUN, ReasonCode.WORKLOAD_MISMATCH) for r in reasons):
        verdict = Verdict.ERROR
    elif reasons:
        verdict = Verdict.FAIL
    elif f.interrupted or not f.levels:
        verdict = Verdict.INCOMPLETE
        notes.append("interrupted before the planned end: no verdict")
    else:
        verdict = Verdict.PASS
    return verdict, reasons, checks, notes


def _once_per_key(reasons: Iterable[Reason]) -> list[Reason]:
    seen: set[tuple[str, str]] = set()
    out = []
    for r in reasons:
        if r.key is not None:
            if (r.code, r.key) in seen:
                continue
            seen.add((r.code, r.key))
        out.append(r)
    return out


def _cross_level_repeats(levels: list[LevelResult], reasons: list[Reason]) -> list[Reason]:
    """Identical requests that were each consistent within a level but not across levels."""
    if len(levels) < 2:
        return []
    reported = {r.key for r in reasons if r.code is ReasonCode.PROMPT_TOKENS_MISMATCH}
    seen: dict[str, set[int]] = {}
    for level in levels:
        for key, repeat in level.summary.repeats.items():
            seen.setdefault(key, set()).update(repeat.prompt_tokens)
    return [
        Reason(
            ReasonCode.PROMPT_TOKENS_MISMATCH,
            f"identical requests {key} got different usage.prompt_tokens across levels: "
            + ", ".join(str(v) for v in sorted(values)),
            key=key,
        )
        for key, values in sorted(seen.items())
        if len(values) > 1 and key not in reported
    ]


def _checks(f: RunFacts, reasons: list[Reason]) -> list[Check]:
    """Each check, and what it compared: a check that compared nothing is not-run, never passed."""
    if f.could_not_run is not None:
        return [Check(name, CheckState.NOT_RUN, "the run could not happen") for name in CheckName]
    codes = {r.code for r in reasons}
    checks = [_log_check(f.log, codes)]
    valid = sum(lvl.summary.valid for lvl in f.levels)
    failed = sum(lvl.summary.errors - lvl.summary.failed_for(Fault.WORKLOAD) for lvl in f.levels)
    if ReasonCode.REQUEST_ERRORS in codes:
        checks.append(Check(CheckName.REQUESTS, CheckState.FAILED, f"{failed} of {valid} valid requests failed"))
    elif not valid:
        checks.append(Check(CheckName.REQUESTS, CheckState.NOT_RUN, "no valid request was sent"))
    else:
        within = f" ({failed} failed, within the max error rate {f.max_error_rate:.2%})" if failed else ""
        checks.append(Check(CheckName.REQUESTS, CheckState.PASSED,
                            f"{valid - failed} of {valid} valid requests got a 2xx{within}"))
    checks.append(_prompt_tokens_check(f.levels, codes))
    vectors = _vectors_check(f.levels, codes)
    if vectors is not None:
        checks.append(vectors)
    if not f.health_watched:
        checks.append(Check(CheckName.HEALTH, CheckState.NOT_RUN, "the health endpoint answered 404"))
    elif f.health_failed or ReasonCode.ENGINE_DEAD in codes:
        checks.append(Check(CheckName.HEALTH, CheckState.FAILED, "engine death, or health stopped answering"))
    elif f.health_polls == 0:
        checks.append(Check(CheckName.HEALTH, CheckState.NOT_RUN, "the health endpoint was never polled"))
    else:
        checks.append(Check(CheckName.HEALTH, CheckState.PASSED,
                            f"no engine death, health answered {f.health_polls} poll{'s' if f.health_polls != 1 else ''}"))
    return checks


def _prompt_tokens_check(levels: list[LevelResult], codes: set[ReasonCode]) -> Check:
    repeats = [r for lvl in levels for r in lvl.summary.repeats.values()]
    if ReasonCode.PROMPT_TOKENS_MISMATCH in codes:
        return Check(CheckName.PROMPT_TOKENS, CheckState.FAILED, "identical requests counted differently")
    compared = sum(r.compared for r in repeats)
    if not compared:
        return Check(CheckName.PROMPT_TOKENS, CheckState.NOT_RUN,
                     "the server returned no usage.prompt_tokens for identical requests: nothing to compare")
    keys = len({key for lvl in levels for key, r in lvl.summary.repeats.items() if r.compared})
    referenced = sum(r.compared for r in repeats if r.reference is not None)
    return Check(CheckName.PROMPT_TOKENS, CheckState.PASSED,
                 f"{compared} answers to {keys} identical requests agreed on usage.prompt_tokens "
                 f"({referenced} of them compared with the same request sent alone)")


def _vectors_check(levels: list[LevelResult], codes: set[ReasonCode]) -> Check | None:
    """None where no pooling answer's vectors came back to compare (a chat server): not a check it has."""
    repeats = [r for lvl in levels for r in lvl.summary.repeats.values()]
    compared = sum(r.vectors_compared for r in repeats)
    if ReasonCode.VECTOR_MISMATCH in codes:
        differing = sum(r.vectors_differing for r in repeats)
        return Check(CheckName.VECTORS, CheckState.FAILED,
                     f"{differing} of {compared} vectors of identical requests beyond {VECTOR_TOLERANCE:g}")
    if not compared:
        return None
    return Check(CheckName.VECTORS, CheckState.PASSED,
                 f"{compared} vectors of identical requests within {VECTOR_TOLERANCE:g} of their reference")


def _log_check(log: LogState, codes: set[ReasonCode]) -> Check:
    if ReasonCode.TOKENIZER_ERRORS in codes:
        return Check(CheckName.LOG, CheckState.FAILED, "tokenizer errors")
    if not log.given:
        return Check(CheckName.LOG, CheckState.NOT_RUN, f"no server log given ({LOG_FLAGS})")
    problems = [f"{s} failed" for s in log.failed] + [f"{s} yielded no line" for s in log.silent]
    if problems or log.lines == 0:
        return Check(CheckName.LOG, CheckState.NOT_RUN, "log not read: " + ("; ".join(problems) or "no line"))
    return Check(CheckName.LOG, CheckState.PASSED, f"no tokenizer errors in {log.lines} log lines")


def _tokenizer_message(counts: dict[str, int], in_bodies: int, first: str | None) -> str:
    parts = []
    if counts:
        parts.append("in the log: " + ", ".join(f"{n} × {i}" for i, n in sorted(counts.items())))
    if in_bodies:
        parts.append(f"in {in_bodies} error answer(s)")
    text = "tokenizer errors " + "; ".join(parts)
    return text + (f" — first: {first.strip()[:200]}" if first else "")
