"""The JSON documents of verify, written in one place: `to_dict(value)` for every value they hold.

`borrowguard.verify/1` (a run, `to_dict(VerifyResult)`) and `borrowguard.verify-fleet/1` (a fleet,
`to_dict(FleetResult)`): what `verify --json` prints, what the HTML report renders and what users'
automation reads. Between the modules the values stay typed (load/summary.py, verify/result.py); only here
do they become dicts, and the keys here are the schema's: stable, whatever the library calls its fields
(tests/verify/test_verify_document.py holds them to the shape of version 1). Secrets are masked where outside
text came in (answers, log lines, the URL), never here over the whole document, where a key like `PASS` or
`token` would mangle the schema's own words.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import asdict
from functools import singledispatch
from importlib import metadata
from typing import Any

from borrowguard._text import display_url
from borrowguard._version import __version__
from borrowguard.load.fit import FitSummary
from borrowguard.load.summary import (
    ErrorGroup,
    LevelSummary,
    Percentiles,
    RepeatStats,
    ScenarioSummary,
    Series,
    SeriesPoint,
)
from borrowguard.verify.config import VerifyConfig
from borrowguard.verify.fleet import SCHEMA as FLEET_SCHEMA
from borrowguard.verify.fleet import FleetResult
from borrowguard.verify.preflight import Target
from borrowguard.verify.result import SCHEMA, Check, LevelResult, Reason, VerifyResult
from borrowguard.verify.watch import HealthSummary, LogEvent, LogSource, MetricsScrape


@singledispatch
def to_dict(value: Any) -> Any:
    """The JSON form of one of verify's values."""
    raise TypeError(f"no JSON form for {type(value).__name__}")


@to_dict.register
def _(value: VerifyResult) -> dict[str, Any]:
    return _run(value)


def _run(r: VerifyResult) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "verdict": r.verdict,
        "exit_code": r.exit_code,
        "reasons": [to_dict(x) for x in r.reasons],
        "checks": [to_dict(c) for c in r.checks],
        "interrupted": r.interrupted,
        "highest_passing_concurrency": r.highest_passing,
        "started_at": r.started_at,
        "elapsed_s": round(r.elapsed, 3),
        "target": to_dict(r.target) if r.target is not None else {},
        "config": to_dict(r.config),
        "environment": environment(),
        "workload": _workload(r),
        "levels": [to_dict(lvl) for lvl in r.levels],
        "log": {
            "lines": r.log_lines,
            "sources": [to_dict(s) for s in r.log_sources],
            "finding_counts": r.finding_counts,
            "findings": [to_dict(f) for f in r.findings],
        },
        "health": to_dict(r.health) if r.health is not None else None,
        "metrics": to_dict(r.metrics_scrape) if r.metrics_scrape is not None else None,
        "notes": r.notes,
    }


def _workload(r: VerifyResult) -> dict[str, Any]:
    """How the workload was fitted, and which scenarios were sent (empty when no load was)."""
    if r.fit is None:
        return {}
    return {"fit": to_dict(r.fit), "scenarios": dict(r.target.scenarios) if r.target is not None else {}}


@to_dict.register
def _(value: FitSummary) -> dict[str, Any]:
    return {
        "max_model_len": value.max_model_len,
        "max_tokens": value.max_tokens,
        "budget_tokens": value.budget,
        "scales": dict(value.scales),
        "estimated_largest_prompt": dict(value.largest_prompt),
        "unfit": dict(value.unfit),
    }


@to_dict.register
def _(value: HealthSummary) -> dict[str, Any]:
    return {
        "url": value.url,
        "supported": value.supported,
        "polls": value.polls,
        "failures": value.failures,
        "first_failure": value.first_failure,
        "last_error": value.last_error,
    }


@to_dict.register
def _(value: MetricsScrape) -> dict[str, Any]:
    return {"before": value.before, "after": value.after}


@to_dict.register
def _(fleet: FleetResult) -> dict[str, Any]:
    # each target's run document, under its name
    return {
        "schema": FLEET_SCHEMA,
        "verdict": fleet.verdict,
        "exit_code": fleet.exit_code,
        "started_at": fleet.started_at,
        "elapsed_s": round(fleet.elapsed, 3),
        "interrupted": fleet.interrupted,
        "summary": [
            {"name": name, "url": r.target.url if r.target else None, "verdict": r.verdict, "reasons": len(r.reasons)}
            for name, r in fleet.targets
        ],
        "targets": [{"name": name, **to_dict(result)} for name, result in fleet.targets],
    }


@to_dict.register
def _(value: Target) -> dict[str, Any]:
    return {
        "url": value.url,
        "bundled_server": value.bundled_server,
        "server_guard": value.server_guard,
        "model": value.model,
        "server": value.server,
        "version": value.version,
        "max_model_len": value.max_model_len,
        "max_model_len_source": value.max_model_len_source,
        "endpoints": dict(value.endpoints),
        "scenarios": dict(value.scenarios),
        "server_config": value.server_config.facts() if value.server_config is not None else {},
        "nothing_served": value.nothing_served,
    }


@to_dict.register
def _(value: LogEvent) -> dict[str, Any]:
    return {
        "t": round(value.t, 3),
        "level": value.level,
        "id": value.id,
        "severity": value.severity,
        "source": value.source,
        "line_no": value.line_no,
        "text": value.text,
    }


@to_dict.register
def _(value: LogSource) -> dict[str, Any]:
    source: dict[str, Any] = {"source": value.source, "kind": value.kind, "lines": value.lines, "error": value.error}
    if value.exited:  # a command that ended by itself
        source["exit_code"] = value.exit_code
    return source


@to_dict.register
def _(value: Reason) -> dict[str, Any]:
    return {"code": value.code, "message": value.message, "level": value.level}


@to_dict.register
def _(value: Check) -> dict[str, Any]:
    return asdict(value)


@to_dict.register
def _(value: LevelResult) -> dict[str, Any]:
    return {
        "concurrency": value.concurrency,
        "elapsed_s": round(value.elapsed, 3),
        "passed": value.passed,
        "reasons": [to_dict(r) for r in value.reasons],
        "cancelled_in_flight": value.cancelled_in_flight,
        "summary": to_dict(value.summary),
        "series": to_dict(value.series),
    }


@to_dict.register
def _(value: LevelSummary) -> dict[str, Any]:
    return {
        "requests": value.requests,
        "ok": value.ok,
        "errors": value.errors,
        "error_rate": value.error_rate,
        "requests_per_s": value.requests_per_s,
        "latency_s": to_dict(value.latency),
        "scenarios": {name: to_dict(s) for name, s in value.scenarios.items()},
        "errors_by_fault": {str(fault): n for fault, n in value.errors_by_fault.items()},
        "resets_tied_to_error_answers": value.tied_resets,
        "retried_on_closed_connection": value.retried,
        "errors_by_status": [to_dict(g) for g in value.error_groups],
        "error_groups_dropped": value.error_groups_dropped,
        "repeats": {key: to_dict(r) for key, r in value.repeats.items()},
        "empty_5xx": value.empty_5xx,
        "empty_5xx_bad_words": value.empty_5xx_bad_words,
        "unfinished": value.unfinished,
        "slowest_answer_s": value.slowest_answer,
    }


@to_dict.register
def _(value: Percentiles) -> dict[str, Any]:
    return {"p50": value.p50, "p95": value.p95, "p99": value.p99, "mean": value.mean, "max": value.max}


@to_dict.register
def _(value: ScenarioSummary) -> dict[str, Any]:
    return {
        "count": value.count,
        "ok": value.ok,
        "statuses": dict(value.statuses),
        "latency_s": to_dict(value.latency),
        "ttft_s": to_dict(value.ttft) if value.ttft is not None else None,
        "completion_tokens": value.completion_tokens,
        "output_tokens_per_s": value.output_tokens_per_s,
    }


@to_dict.register
def _(value: ErrorGroup) -> dict[str, Any]:
    return {
        "scenario": value.scenario,
        "status": value.status,
        "fault": str(value.fault),
        "mismatch": str(value.mismatch) if value.mismatch is not None else None,
        "count": value.count,
        "first_t": value.first_t,
        "messages": list(value.messages),
    }


@to_dict.register
def _(value: RepeatStats) -> dict[str, Any]:
    return {
        "prompt_tokens": {str(v): n for v, n in value.prompt_tokens.items()},
        "first_seen_t": {str(v): t for v, t in value.first_seen.items()},
        "without_usage": value.without_usage,
        "consistent": value.consistent,
        "reference": value.reference,
        "matches_reference": value.matches_reference,
        "vectors_compared": value.vectors_compared,
        "vectors_differing": value.vectors_differing,
        "vector_max_distance": value.vector_max_distance,
    }


@to_dict.register
def _(value: Series) -> dict[str, Any]:
    return {"width_s": value.width, "buckets": [to_dict(p) for p in value.points]}


@to_dict.register
def _(value: SeriesPoint) -> dict[str, Any]:
    return {
        "t": value.t,
        "count": value.count,
        "classes": dict(value.classes),
        "p50": value.p50,
        "p95": value.p95,
        "max": value.max,
        "inflight_max": value.inflight_max,
        "findings": dict(value.findings),
        "health_failures": value.health_failures,
    }


@to_dict.register
def _(value: VerifyConfig) -> dict[str, Any]:
    s = value.scenario
    return {
        "url": display_url(value.url),  # a password in the URL is never written
        "model": value.model,
        "api_key_env": value.api_key_env,  # the name only; the key is never written anywhere
        "logs": [str(p) for p in value.logs],
        "log_commands": value.log_commands,
        "health_path": value.health_path,
        "mix": s.mix,
        "image_sizes": [f"{w}x{h}" for w, h in s.image_sizes],
        "images_per_request": s.images_per_request,
        "tool_result_bytes": s.tool_result_bytes,
        "vllm_extensions": s.vllm_extensions,
        "stream": s.stream,
        "concurrency": value.concurrency,
        "duration_s": value.duration,
        "requests": value.requests,
        "ramp_up_s": value.ramp_up,
        "timeout_s": value.timeout,
        "sweep": value.sweep,
        "max_error_rate": value.max_error_rate,
        "max_model_len": value.max_model_len,
        "records": str(value.records) if value.records else None,
        "server_guard": value.guarded if value.url is None else None,
    }


def environment() -> dict[str, Any]:
    """The client side of the run (the server's side is in `target`)."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": sys.platform,
        "borrowguard": __version__,
    }
    for dist in ("transformers", "tokenizers", "aiohttp"):
        try:
            env[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            env[dist] = None
    return env
