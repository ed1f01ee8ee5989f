"""`borrowguard verify`: load a server, watch its log and health, and give the operator's verdict.

    result = run_verify(VerifyConfig(duration=30, concurrency=16))   # no url: the bundled server
    result.verdict, result.exit_code, result.reasons                  # "PASS", 0, []

FAIL when any of: a tokenizer signature in the logs; engine death (log signature, the bundled server's
process gone, health failing, connections refused after start); failed requests above
`max_error_rate` (default 0: any); identical requests with different `usage.prompt_tokens`; a scenario
without a single success. ERROR (exit 2) when the run could not happen at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import IO, Any

import aiohttp

from borrowguard._version import __version__
from borrowguard.errors import UserInputError
from borrowguard.load.client import ChatClient
from borrowguard.load.metrics import Metrics
from borrowguard.load.runner import LoadPlan, LoadRun
from borrowguard.load.scenarios import RequestFactory, ScenarioSettings
from borrowguard.load.watch import Finding, HealthWatch, LogWatch, scrape_metrics

TOKENIZER_IDS = frozenset({"tokenizer-already-borrowed", "tokenizer-acquire-retry"})
DEATH_IDS = frozenset({"engine-dead"})
SCHEMA = "borrowguard.verify/1"

PASS, FAIL, ERROR, INCOMPLETE = "PASS", "FAIL", "ERROR", "INCOMPLETE"
_EXIT = {PASS: 0, FAIL: 1, ERROR: 2, INCOMPLETE: 2}
_MAX_MODELS_BODY = 1 << 20
_DEATH_GRACE = 1.0  # after engine death, in-flight requests get this long to fail on their own


@dataclass
class VerifyConfig:
    url: str | None = None  # None: start the bundled reference server
    model: str | None = None
    api_key_env: str | None = None
    logs: list[Path] = field(default_factory=list)
    log_commands: list[str] = field(default_factory=list)
    health_path: str = "/health"
    scenario: ScenarioSettings = field(default_factory=ScenarioSettings)
    concurrency: int = 16
    duration: float | None = 30.0
    requests: int | None = None
    ramp_up: float = 0.0
    timeout: float = 60.0
    sweep: list[int] | None = None
    max_error_rate: float = 0.0
    records: Path | None = None
    server_guard: bool = True
    server_workers: int = 4
    server_log: Path | None = None  # keep the bundled server's log here (default: a temporary file)
    server_start_timeout: float = 180.0

    def validate(self) -> None:
        if self.concurrency < 1:
            raise UserInputError("--concurrency must be at least 1")
        if self.requests is not None and self.requests < 1:
            raise UserInputError("--requests must be at least 1")
        if self.duration is None and self.requests is None:
            raise UserInputError("give --duration or --requests")
        if not 0.0 <= self.max_error_rate <= 1.0:
            raise UserInputError("--max-error-rate must be between 0 and 1 (0.01 = 1%)")
        if self.timeout <= 0:
            raise UserInputError("--timeout must be more than zero")
        if not self.health_path.startswith("/"):
            raise UserInputError(f"--health-path must start with '/', got {self.health_path!r}")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise UserInputError(f"--url must start with http:// or https://, got {self.url!r}")
        if self.api_key_env is not None and not os.environ.get(self.api_key_env):
            raise UserInputError(
                f"--api-key-env: the environment variable {self.api_key_env} is not set or empty"
            )
        for path in self.logs:
            if not path.is_file():
                raise UserInputError(f"--log: no such file: {path}")
        if self.url is None and (self.logs or self.log_commands):
            pass  # allowed: extra logs next to the bundled server's own

    @property
    def levels(self) -> list[int]:
        return list(self.sweep) if self.sweep else [self.concurrency]

    def to_dict(self) -> dict[str, Any]:
        s = self.scenario
        return {
            "url": self.url,
            "model": self.model,
            "api_key_env": self.api_key_env,  # the name only; the key is never written anywhere
            "logs": [str(p) for p in self.logs],
            "log_commands": self.log_commands,
            "health_path": self.health_path,
            "mix": s.mix,
            "image_sizes": [f"{w}x{h}" for w, h in s.image_sizes],
            "images_per_request": s.images_per_request,
            "tool_result_bytes": s.tool_result_bytes,
            "vllm_extensions": s.vllm_extensions,
            "stream": s.stream,
            "concurrency": self.concurrency,
            "duration_s": self.duration,
            "requests": self.requests,
            "ramp_up_s": self.ramp_up,
            "timeout_s": self.timeout,
            "sweep": self.sweep,
            "max_error_rate": self.max_error_rate,
            "records": str(self.records) if self.records else None,
            "server_guard": self.server_guard if self.url is None else None,
        }


@dataclass
class Reason:
    code: str  # tokenizer-errors, engine-dead, request-errors, prompt-tokens-mismatch, no-success, ...
    message: str
    level: int | None = None  # the sweep level's concurrency, when it belongs to one

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "level": self.level}


@dataclass
class LevelResult:
    concurrency: int
    elapsed: float
    summary: dict[str, Any]
    series: dict[str, Any]
    reasons: list[Reason]
    cancelled_in_flight: int = 0

    @property
    def passed(self) -> bool:
        return not self.reasons

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "elapsed_s": round(self.elapsed, 3),
            "passed": self.passed,
            "reasons": [r.to_dict() for r in self.reasons],
            "cancelled_in_flight": self.cancelled_in_flight,
            "summary": self.summary,
            "series": self.series,
        }


@dataclass
class VerifyResult:
    verdict: str
    reasons: list[Reason]
    config: VerifyConfig
    levels: list[LevelResult] = field(default_factory=list)
    target: dict[str, Any] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    finding_counts: dict[str, int] = field(default_factory=dict)
    log_lines: int = 0
    health: dict[str, Any] | None = None
    metrics_scrape: dict[str, Any] | None = None
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)
    started_at: str = ""
    elapsed: float = 0.0

    @property
    def exit_code(self) -> int:
        return _EXIT[self.verdict]

    @property
    def highest_passing(self) -> int | None:
        passing = [lvl.concurrency for lvl in self.levels if lvl.passed]
        return max(passing) if passing else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "reasons": [r.to_dict() for r in self.reasons],
            "interrupted": self.interrupted,
            "highest_passing_concurrency": self.highest_passing,
            "started_at": self.started_at,
            "elapsed_s": round(self.elapsed, 3),
            "target": self.target,
            "config": self.config.to_dict(),
            "environment": _environment(),
            "levels": [lvl.to_dict() for lvl in self.levels],
            "log": {
                "lines": self.log_lines,
                "finding_counts": self.finding_counts,
                "findings": [f.to_dict() for f in self.findings],
            },
            "health": self.health,
            "metrics": self.metrics_scrape,
            "notes": self.notes,
        }


@dataclass
class Progress:
    """A snapshot for the live display, handed out about twice a second."""

    level: int
    levels: int
    concurrency: int
    elapsed: float
    duration: float | None
    requests: int
    ok: int
    errors: int
    rate: float
    p50: float | None
    p95: float | None
    inflight: int
    findings: dict[str, int]
    health: str


def run_verify(config: VerifyConfig, progress: Callable[[Progress], None] | None = None) -> VerifyResult:
    """Run the whole check; blocks. Ctrl-C ends the load early and still returns a (partial) result."""
    config.validate()
    return asyncio.run(_Verify(config, progress).main())


class _Verify:
    def __init__(self, config: VerifyConfig, progress: Callable[[Progress], None] | None) -> None:
        self.config = config
        self.progress = progress
        self.api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
        self.logs = LogWatch(files=list(config.logs), commands=list(config.log_commands))
        self.health: HealthWatch | None = None
        self.run: LoadRun | None = None
        self.level_index = 0
        self.death: str | None = None
        self.interrupted = False
        self.notes: list[str] = []
        self.server: Any = None
        self.metrics: Metrics | None = None
        self.reported_tokenizer = 0

    # -- the run -----------------------------------------------------------------------------------------

    async def main(self) -> VerifyResult:
        started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        t_start = time.perf_counter()
        result = VerifyResult(ERROR, [], self.config, started_at=started_at)
        with contextlib.ExitStack() as stack:
            try:
                base_url = self.config.url or self._start_server(stack)
            except Exception as exc:  # the bundled server could not start: nothing was measured
                result.reasons.append(Reason("could-not-run", f"the bundled server did not start: {exc}"))
                return result
            result.target = {
                "url": _base(base_url),
                "bundled_server": self.config.url is None,
                "server_guard": self.config.server_guard if self.config.url is None else None,
            }
            await self._run(_base(base_url), result)
        result.elapsed = time.perf_counter() - t_start
        return result

    async def _run(self, base_url: str, result: VerifyResult) -> None:
        records = open(self.config.records, "w", encoding="utf-8") if self.config.records else None  # noqa: SIM115
        session = aiohttp.ClientSession()
        background: list[asyncio.Task] = []
        restore_signals = self._install_signals()
        try:
            model, problem = await self._preflight(session, base_url)
            result.target["model"] = model
            if model is None:
                result.reasons.append(Reason("could-not-run", problem or "no model"))
                return
            if self.logs.active:
                self.logs.clock = self._clock
                self.logs.on_finding = self._on_finding
                self.logs.start()
                background.append(asyncio.create_task(self.logs.run()))
            self.health = HealthWatch(base_url + self.config.health_path, on_failure=self._on_health_failure)
            background.append(asyncio.create_task(self.health.run(session)))
            metrics_before = await scrape_metrics(session, base_url + "/metrics")
            factory = RequestFactory(self.config.scenario, model)
            for index, concurrency in enumerate(self.config.levels):
                self.level_index = index
                level = await self._level(base_url, factory, concurrency, records)
                result.levels.append(level)
                if self.interrupted or self.death or not level.passed:
                    break
            metrics_after = await scrape_metrics(session, base_url + "/metrics")
            if metrics_before is not None or metrics_after is not None:
                result.metrics_scrape = {"before": metrics_before, "after": metrics_after}
        finally:
            restore_signals()
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await asyncio.to_thread(self.logs.stop)
            await session.close()
            if records is not None:
                records.close()
        self._verdict(result)

    def _start_server(self, stack: contextlib.ExitStack) -> str:
        from borrowguard.server.process import ServerProcess

        log_path = self.config.server_log
        if log_path is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="borrowguard-verify-"))
            log_path = Path(tmp) / "server.log"
        self.server = stack.enter_context(
            ServerProcess(
                guard=self.config.server_guard,
                workers=self.config.server_workers,
                log_path=log_path,
                start_timeout=self.config.server_start_timeout,
            )
        )
        self.logs.fresh_files.append(Path(self.server.log_path))
        return str(self.server.url)

    async def _preflight(
        self, session: aiohttp.ClientSession, base_url: str
    ) -> tuple[str | None, str | None]:
        """Reachability and the model name (the first of /v1/models unless --model was given)."""
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            async with session.get(
                base_url + "/v1/models", headers=headers, timeout=aiohttp.ClientTimeout(total=15)
            ) as resp:
                status = resp.status
                raw = await resp.content.read(_MAX_MODELS_BODY)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            return None, f"cannot reach {base_url}: {type(exc).__name__}: {exc}"
        if self.config.model:
            return self.config.model, None
        try:
            return str(json.loads(raw)["data"][0]["id"]), None
        except (ValueError, TypeError, KeyError, IndexError):
            return None, f"GET {base_url}/v1/models answered {status} without a model list; pass --model"

    async def _level(
        self, base_url: str, factory: RequestFactory, concurrency: int, records: IO[str] | None
    ) -> LevelResult:
        metrics = Metrics(factory.scenarios)
        self.metrics = metrics
        plan = LoadPlan(
            concurrency=concurrency,
            duration=self.config.duration,
            requests=self.config.requests,
            ramp_up=self.config.ramp_up,
            drain=self.config.timeout,
        )
        async with ChatClient(
            base_url, concurrency=concurrency, timeout=self.config.timeout, api_key=self.api_key
        ) as client:
            self.run = LoadRun(
                client, factory, metrics, plan, records, record_extra={"concurrency": concurrency}
            )
            ticker = asyncio.create_task(self._tick(concurrency))
            try:
                await self.run.run()
            finally:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker
        # Lines the server wrote while answering the last requests belong to this level.
        await asyncio.sleep(0.3 if self.logs.active else 0)
        if self.logs.active:
            self.logs.drain()
        self._check_death()
        elapsed = self.run.elapsed()
        return LevelResult(
            concurrency=concurrency,
            elapsed=elapsed,
            summary=metrics.summary(elapsed),
            series=metrics.series.to_dict(),
            reasons=self._level_reasons(metrics, concurrency),
            cancelled_in_flight=self.run.cancelled_in_flight,
        )

    async def _tick(self, concurrency: int) -> None:
        while True:
            await asyncio.sleep(0.5)
            self._check_death()
            m = self.metrics
            if self.progress is not None and self.run is not None and m is not None:
                self.progress(
                    Progress(
                        level=self.level_index + 1,
                        levels=len(self.config.levels),
                        concurrency=concurrency,
                        elapsed=self.run.elapsed(),
                        duration=self.config.duration,
                        requests=m.requests,
                        ok=m.ok,
                        errors=m.requests - m.ok,
                        rate=m.rate(self.run.elapsed()),
                        p50=m.overall.percentile(50),
                        p95=m.overall.percentile(95),
                        inflight=m.inflight,
                        findings=dict(self.logs.counts),
                        health=self._health_state(),
                    )
                )

    # -- events ------------------------------------------------------------------------------------------

    def _clock(self) -> tuple[int, float]:
        return self.level_index, (self.run.elapsed() if self.run is not None else 0.0)

    def _on_finding(self, finding: Finding) -> None:
        if self.metrics is not None:
            self.metrics.finding(finding.t, finding.id)
        if finding.id in DEATH_IDS:
            self._died(f"the log reports engine death ({finding.id}): {finding.text[:200]}")

    def _on_health_failure(self, error: str) -> None:
        if self.metrics is not None and self.run is not None:
            self.metrics.health_failure(self.run.elapsed())
        if self.health is not None and self.health.failing:
            self._died(f"health check {self.health.url} failing: {error}")

    def _check_death(self) -> None:
        if self.server is not None and self.server.poll() is not None:
            self._died(f"the bundled server exited with code {self.server.poll()}")
        if self.metrics is not None and self.metrics.first_refused is not None:
            self._died("connections refused after the run had started")

    def _died(self, why: str) -> None:
        if self.death is None:
            self.death = why
            if self.run is not None:
                run = self.run
                run.stop()
                # requests still in flight get a moment to fail by themselves, then the run ends
                asyncio.get_running_loop().call_later(_DEATH_GRACE, run.abort)

    def _health_state(self) -> str:
        h = self.health
        if h is None or h.unsupported:
            return "n/a"
        return "failing" if h.failing else ("ok" if h.consecutive == 0 else f"{h.consecutive} failed")

    def _install_signals(self) -> Callable[[], None]:
        loop = asyncio.get_running_loop()

        def on_sigint() -> None:
            if self.interrupted and self.run is not None:
                self.run.abort()  # a second Ctrl-C: stop waiting for in-flight requests
            self.interrupted = True
            if self.run is not None:
                self.run.stop()

        try:
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or Windows
            return lambda: None
        return lambda: loop.remove_signal_handler(signal.SIGINT)

    # -- the verdict -------------------------------------------------------------------------------------

    def _level_reasons(self, metrics: Metrics, concurrency: int) -> list[Reason]:
        reasons: list[Reason] = []
        counts = {i: n for (lvl, i), n in self.logs.level_counts.items() if lvl == self.level_index}
        tokenizer_counts = {i: n for i, n in counts.items() if i in TOKENIZER_IDS}
        if tokenizer_counts:
            self.reported_tokenizer += sum(tokenizer_counts.values())
            reasons.append(
                Reason(
                    "tokenizer-errors",
                    _tokenizer_message(tokenizer_counts, self.logs.findings, self.level_index),
                    concurrency,
                )
            )
        if self.death is not None:
            reasons.append(Reason("engine-dead", f"engine death: {self.death}", concurrency))
        errors = metrics.requests - metrics.ok
        if metrics.requests and errors / metrics.requests > self.config.max_error_rate:
            worst = []
            for group in sorted(metrics.errors.values(), key=lambda g: -g.count)[:6]:
                msg = f" ({group.messages[0][:160]})" if group.messages else ""
                worst.append(f"{group.count} × {group.label} on {group.scenario}{msg}")
            rate = f"{errors / metrics.requests:.2%} > {self.config.max_error_rate:.2%}"
            reasons.append(
                Reason(
                    "request-errors",
                    f"{errors} of {metrics.requests} requests failed ({rate}): " + "; ".join(worst),
                    concurrency,
                )
            )
        for key, stats in sorted(metrics.repeats.items()):
            if not stats.consistent:
                values = ", ".join(f"{v} ({n}×)" for v, n in sorted(stats.values.items()))
                reasons.append(
                    Reason(
                        "prompt-tokens-mismatch",
                        f"identical requests {key} got different usage.prompt_tokens: {values}",
                        concurrency,
                    )
                )
        for name, stats in metrics.scenarios.items():
            if stats.ok == 0 and not (self.interrupted and stats.count == 0):
                reasons.append(
                    Reason(
                        "no-success",
                        f"scenario {name!r}: no successful request ({stats.count} sent)",
                        concurrency,
                    )
                )
        return reasons

    def _verdict(self, result: VerifyResult) -> None:
        result.findings = list(self.logs.findings)
        result.finding_counts = dict(self.logs.counts)
        result.log_lines = self.logs.lines
        result.health = self.health.to_dict() if self.health is not None else None
        result.interrupted = self.interrupted
        result.notes = self.notes + [f"log follower failed: {e}" for e in self.logs.follower_errors]
        for level in result.levels:
            result.reasons.extend(level.reasons)
        # Tokenizer lines that arrived after the last level's verdict (the final read of the log) count too.
        late = {i: n for i, n in self.logs.counts.items() if i in TOKENIZER_IDS}
        if sum(late.values()) > self.reported_tokenizer:
            result.reasons.append(
                Reason("tokenizer-errors", _tokenizer_message(late, self.logs.findings, None))
            )
        if self.death is not None and not any(r.code == "engine-dead" for r in result.reasons):
            result.reasons.append(Reason("engine-dead", f"engine death: {self.death}"))
        self._cross_level_repeats(result)
        if self.health is not None and self.health.unsupported:
            result.notes.append(f"{self.health.url} answered 404: health was not watched")
        repeats = [r for lvl in result.levels for r in lvl.summary["repeats"].values()]
        if repeats and not any(r["prompt_tokens"] for r in repeats):
            result.notes.append(
                "the server returned no usage.prompt_tokens: identical requests could not be compared"
            )
        if result.reasons and any(r.code == "could-not-run" for r in result.reasons):
            result.verdict = ERROR
        elif result.reasons:
            result.verdict = FAIL
        elif self.interrupted or not result.levels:
            result.verdict = INCOMPLETE
            result.notes.append("interrupted before the planned end: no verdict")
        else:
            result.verdict = PASS

    def _cross_level_repeats(self, result: VerifyResult) -> None:
        if len(result.levels) < 2:
            return
        seen: dict[str, set[str]] = {}
        for level in result.levels:
            for key, data in level.summary["repeats"].items():
                seen.setdefault(key, set()).update(data["prompt_tokens"])
        for key, values in sorted(seen.items()):
            if len(values) > 1 and not any(
                r.code == "prompt-tokens-mismatch" and key in r.message for r in result.reasons
            ):
                result.reasons.append(
                    Reason(
                        "prompt-tokens-mismatch",
                        f"identical requests {key} got different usage.prompt_tokens across levels: "
                        + ", ".join(sorted(values, key=int)),
                    )
                )


def _base(url: str) -> str:
    """`http://h:8000/v1/` -> `http://h:8000`: endpoints are appended with their /v1 prefix."""
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _environment() -> dict[str, Any]:
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


def _tokenizer_message(counts: dict[str, int], findings: list[Finding], level: int | None) -> str:
    text = ", ".join(f"{n} × {i}" for i, n in sorted(counts.items()))
    first = next((f for f in findings if f.id in TOKENIZER_IDS and (level is None or f.level == level)), None)
    return f"tokenizer errors in the log: {text}" + (f" — first: {first.text.strip()[:200]}" if first else "")
