"""One verify run, start to end: the bundled server (if any), the preflight, the levels of load with the
log and health watched beside them, and the facts handed to the pure verdict.

    result = run_verify(VerifyConfig(duration=30, concurrency=16))   # no url: the bundled server
    result.verdict, result.exit_code, result.reasons                  # PASS, 0, []
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import IO, TYPE_CHECKING

import aiohttp

from borrowguard._text import without_password
from borrowguard.load.client import ChatClient, Outcome
from borrowguard.load.faults import Fault, MismatchKind, context_numbers
from borrowguard.load.fit import FitSummary
from borrowguard.load.metrics import UNFINISHED_FACTOR, LoadMetrics
from borrowguard.load.reference import Reference
from borrowguard.load.reference import take as take_references
from borrowguard.load.runner import LoadPlan, LoadRun
from borrowguard.load.scenarios import RequestFactory
from borrowguard.verify.bundled import start_bundled
from borrowguard.verify.config import VerifyConfig
from borrowguard.verify.descriptors import ensure_descriptors
from borrowguard.verify.exposure import race_exposure
from borrowguard.verify.preflight import Preflight, PreflightError, Target
from borrowguard.verify.result import CheckName, CheckState, LevelResult, Verdict, VerifyResult
from borrowguard.verify.signals import install_interrupts, terminate_as_interrupt
from borrowguard.verify.soundness import exercise, incomplete_because
from borrowguard.verify.verdict import (
    DEATH_IDS,
    TOKENIZER_IDS,
    LevelFacts,
    LogState,
    RunFacts,
    decide,
    level_reasons,
)
from borrowguard.verify.watch import PREFLIGHT, HealthWatch, LogEvent, LogWatch, MetricsScrape, scrape_metrics
from borrowguard.verify.wording import flag

if TYPE_CHECKING:
    from borrowguard.scan.startup import StartupFacts
    from borrowguard.server.process import ServerProcess

_DEATH_GRACE = 1.0  # after engine death, in-flight requests get this long to fail on their own
_DRAIN_GRACE = 5.0  # after the planned end, in-flight requests get at most this + a quarter of the duration


@dataclass(frozen=True)
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
    """Run the whole check; blocks. SIGINT or SIGTERM end the load early and still return a (partial)
    result; the bundled server never outlives the run."""
    config.validate()
    ensure_descriptors([config])
    with terminate_as_interrupt():
        return asyncio.run(Session(config, progress).main())


class Session:
    def __init__(
        self, config: VerifyConfig, progress: Callable[[Progress], None] | None, *, own_signals: bool = True
    ) -> None:
        self.config = config
        self.progress = progress
        self.api_key = config.api_key
        # Masked where outside text comes in (answers, log lines), before any cut; never in our own words.
        self.secrets = (self.api_key,) if self.api_key else ()
        self.auth: aiohttp.BasicAuth | None = None  # a user:password from --url, out of every URL we write
        self.logs = LogWatch(files=list(config.logs), commands=list(config.log_commands), secrets=self.secrets,
                             on_finding=self._on_finding, clock=self._clock,
                             preflight_ids=TOKENIZER_IDS | DEATH_IDS)
        self.health: HealthWatch | None = None
        self.run: LoadRun | None = None
        self.level_index = PREFLIGHT  # the first level sets 0
        self.death: str | None = None
        self.interrupted = False
        self.server: ServerProcess | None = None  # the bundled server, when it is the target
        self.target: Target | None = None  # what is known of the server: set anew as facts come, never changed
        self.metrics: LoadMetrics | None = None
        self.factory: RequestFactory | None = None
        self.tokenizer_reported = 0
        self.tool_calls_cut = 0
        self.references: dict[str, Reference] = {}  # repeat key -> the same request sent alone (load.reference)
        self.served: frozenset[str] = frozenset()  # paths the preflight's discovery saw answer
        self.nothing_served: str | None = None  # the discovery's findings, when no endpoint was served
        self.notes: list[str] = []
        self.levels: list[LevelResult] = []
        self.fit: FitSummary | None = None
        self.metrics_scrape: MetricsScrape | None = None
        self.own_signals = own_signals  # False in a fleet run: it handles signals once, for all its sessions
        self._preflight_task: asyncio.Task | None = None
        self._reference_task: asyncio.Task | None = None

    async def main(self) -> VerifyResult:
        started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        t_start = time.perf_counter()
        could_not_run: str | None = None
        with contextlib.ExitStack() as stack:
            try:
                base_url = self.config.url or self._start_bundled(stack)
            except Exception as exc:  # the bundled server could not start: nothing was measured
                could_not_run = f"the bundled server did not start: {exc}"
            else:
                self.target = Target(
                    _base(self._strip_credentials(base_url)),
                    self.config.url is None,
                    self.config.guarded if self.config.url is None else None,
                )
                could_not_run = await self._run(self.target)
        return self._conclude(could_not_run, started_at, time.perf_counter() - t_start)

    def _start_bundled(self, stack: contextlib.ExitStack) -> str:
        bundled = start_bundled(self.config, stack)
        self.server = bundled.process
        self.logs.files.append(bundled.log_path)
        return bundled.url

    async def _run(self, target: Target) -> str | None:
        records_file = open(self.config.records, "w", encoding="utf-8") if self.config.records else None  # noqa: SIM115
        records: IO[str] | None = records_file
        session = aiohttp.ClientSession(auth=self.auth)
        background: list[asyncio.Task] = []
        restore_signals = install_interrupts(self.interrupt) if self.own_signals else (lambda: None)
        try:
            if self.logs.active:  # from the preflight on: its concurrent probes can meet the race too
                self.logs.start()
                background.append(asyncio.create_task(self.logs.run()))
            preflight = Preflight(session, target, api_key=self.api_key, timeout=self.config.timeout)
            self._preflight_task = asyncio.ensure_future(preflight.learn(
                self.config.scenario, model=self.config.model, max_model_len=self.config.max_model_len
            ))
            try:
                self.target, factory = await self._preflight_task
            except asyncio.CancelledError:
                if not self.interrupted:
                    raise
                self.target = preflight.learned  # what was learned before the signal
                self.notes.append("interrupted during the preflight: no load was sent")
                return None
            finally:
                self._preflight_task = None
            target = self.target
            self.factory = factory
            self.served = frozenset(path for path, ok in target.endpoints.items() if ok)
            if self.logs.active:
                # The preflight's own requests never count against the server: what it made the server write is
                # read before the first level starts, and a line naming an endpoint the load never asks (the
                # discovery's 404s) is the preflight's whenever it arrives (a log command hands lines on late).
                self.logs.unrequested = frozenset(path for path, ok in target.endpoints.items() if not ok)
                await self.logs.settle()
            if target.nothing_served:  # nothing to load: not a PASS, not the server's failure either
                self.nothing_served = ", ".join(f"{p} answered {'yes' if ok else 'no'}" for p, ok in
                                                sorted(target.endpoints.items()))
                return None
            base_url = target.url
            self.health = HealthWatch(base_url + self.config.health_path, on_failure=self._on_health_failure)
            background.append(asyncio.create_task(self.health.run(session)))
            metrics_before = await scrape_metrics(session, base_url + "/metrics")
            for index, concurrency in enumerate(self.config.levels):
                if self.interrupted:
                    break
                self.level_index = index
                level = await self._level(base_url, factory, concurrency, records)
                self.levels.append(level)
                if self.run is not None and self.run.records_error:
                    self.notes.append(
                        f"{flag('records')}: writing stopped ({self.run.records_error}); the run went on"
                    )
                    records = None
                if self.interrupted or self.death or not level.passed:
                    break
            # Interrupted: no more waiting on the server (a hung one would hold the exit for the scrape's timeout).
            metrics_after = None if self.interrupted else await scrape_metrics(session, base_url + "/metrics")
            if metrics_before is not None or metrics_after is not None:
                self.metrics_scrape = MetricsScrape(metrics_before, metrics_after)
            self.fit = factory.fit.summary()
            server_config = self.logs.server_config()
            if server_config is not None:
                self.target = replace(target, server_config=server_config)
            exposure = race_exposure(
                target.server,
                target.version,
                bad_words_sent=self.config.scenario.vllm_extensions,
                renderer_workers=_renderer_workers(server_config),
            )
            if exposure:
                self.notes.append(exposure)
            if self.references:
                self.notes.append(_references_said(self.references))
            unfinished = sum(level.summary.unfinished for level in self.levels)
            if unfinished:
                slowest = max(level.summary.slowest_answer for level in self.levels)
                self.notes.append(
                    f"{unfinished} request(s) were still in flight when the drain after the planned end ran out, "
                    f"none longer than {UNFINISHED_FACTOR:g} × the slowest answer ({slowest:.1f} s): a busy server's "
                    "slow answers, counted neither as answered nor as failed (a longer --duration or -n lets "
                    "them finish)"
                )
            if self.tool_calls_cut:
                self.notes.append(
                    f"{self.tool_calls_cut} tools request(s) had their forced tool call cut by our max_tokens "
                    f"(the server answered 400 'Invalid JSON: EOF while parsing', as vLLM 0.17 does): they were "
                    f"tokenized and generated, so they count as exercised, never against the server; max_tokens "
                    f"of the tools scenario ended at {factory.tool_max_tokens}"
                )
        except PreflightError as exc:
            self.target = preflight.learned
            return str(exc)
        finally:
            restore_signals()
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            if self.server is not None:
                # Ours: stopped before the log's last read, so every line it writes (a request cancelled at the
                # end still runs its tokenizer call, and may log its traceback) is in the report.
                await asyncio.to_thread(self.server.stop)
            await asyncio.to_thread(self.logs.stop)
            await session.close()
            if records_file is not None:
                with contextlib.suppress(OSError):  # a full disk was reported already, as a note
                    records_file.close()
        return None

    async def _level(
        self, base_url: str, factory: RequestFactory, concurrency: int, records: IO[str] | None
    ) -> LevelResult:
        metrics = LoadMetrics(factory.scenarios, self.references)
        self.metrics = metrics
        await self._load(base_url, factory, metrics, concurrency, records)
        # Lines the server wrote while answering the last requests belong to this level.
        if self.logs.active:
            await asyncio.sleep(0.3)
            self.logs.drain()
        self._check_death()
        assert self.run is not None
        elapsed = self.run.elapsed()
        summary = metrics.summary(elapsed)
        facts = LevelFacts(
            concurrency=concurrency,
            summary=summary,
            tokenizer_counts=self._level_tokenizer_counts(),
            first_tokenizer_line=self._first_tokenizer_line(self.level_index),
            death=self.death,
            interrupted=self.interrupted,
            max_error_rate=self.config.max_error_rate,
        )
        series = metrics.series.summary()
        return LevelResult(concurrency, elapsed, summary, series, level_reasons(facts), self.run.cancelled_in_flight)

    async def _load(
        self, base_url: str, factory: RequestFactory, metrics: LoadMetrics, concurrency: int, records: IO[str] | None
    ) -> None:
        duration = self.config.duration
        # In-flight requests may finish after the planned end, but a hanging server cannot stretch the run.
        drain = self.config.timeout if duration is None else min(self.config.timeout, _DRAIN_GRACE + duration / 4)
        plan = LoadPlan(concurrency, duration, self.config.requests, self.config.ramp_up, drain)
        async with ChatClient(base_url, concurrency=concurrency, timeout=self.config.timeout,
                              api_key=self.api_key, auth=self.auth, served=self.served) as client:
            self.run = LoadRun(client, factory, metrics, plan, records, on_outcome=self._on_outcome)
            if not await self._take_references(base_url, factory):
                return
            ticker = asyncio.create_task(self._tick(concurrency))
            try:
                await self.run.run()
            finally:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker

    async def _take_references(self, base_url: str, factory: RequestFactory) -> bool:
        """Each repeat first alone: what every answer to it under load must equal. False: interrupted.
        On a client of its own, so that the load starts on fresh connections, as it did without it."""
        if self.interrupted:
            return False
        async with ChatClient(base_url, concurrency=1, timeout=self.config.timeout, api_key=self.api_key,
                              auth=self.auth, served=self.served) as client:
            self._reference_task = asyncio.ensure_future(take_references(client, factory, self.references))
            try:
                self.references.update(await self._reference_task)
            except asyncio.CancelledError:
                if not self.interrupted:
                    raise
                return False
            finally:
                self._reference_task = None
        return True

    def _level_tokenizer_counts(self) -> dict[str, int]:
        counts = {i: n for (lvl, i), n in self.logs.level_counts.items() if lvl == self.level_index}
        tokenizer = {i: n for i, n in counts.items() if i in TOKENIZER_IDS}
        self.tokenizer_reported += sum(tokenizer.values())
        return tokenizer

    def _first_tokenizer_line(self, level: int | None) -> str | None:
        first = next(
            (f for f in self.logs.findings if f.id in TOKENIZER_IDS and (level is None or f.level == level)),
            None,
        )
        return first.text if first else None

    async def _tick(self, concurrency: int) -> None:
        while True:
            await asyncio.sleep(0.5)
            self._check_death()
            m, run = self.metrics, self.run
            if self.progress is not None and run is not None and m is not None:
                self.progress(
                    Progress(
                        level=self.level_index + 1,
                        levels=len(self.config.levels),
                        concurrency=concurrency,
                        elapsed=run.elapsed(),
                        duration=self.config.duration,
                        requests=m.requests,
                        ok=m.ok,
                        errors=m.requests - m.ok,
                        rate=m.rate(run.elapsed()),
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

    def _on_outcome(self, outcome: Outcome) -> None:
        """Fit the workload as the server answers: a prompt said to be too long shrinks its scenario."""
        factory = self.factory
        if factory is None:
            return
        if outcome.mismatch is MismatchKind.TOOL_CALL_CUT:
            self._tool_call_cut(outcome)
            return
        fit = factory.fit
        if outcome.fault is Fault.WORKLOAD and outcome.mismatch is MismatchKind.TOO_LONG:
            length, tokens = context_numbers(outcome.message or "")
            if length and self.config.max_model_len is None:
                fit = fit.with_context(length)
            if tokens:
                fit = fit.observed(outcome.scenario, outcome.scale, tokens)
            elif fit.budget is not None:
                fit = fit.observed(outcome.scenario, outcome.scale, int(fit.budget * 2))
            factory.refit(fit)
        elif outcome.ok and outcome.prompt_tokens and not RequestFactory.is_pooling(outcome.scenario):
            # (a pooling answer counts every input of a batch, and truncated ones: not one prompt's size)
            factory.refit(fit.observed(outcome.scenario, outcome.scale, outcome.prompt_tokens))

    def _tool_call_cut(self, outcome: Outcome) -> None:
        """Our max_tokens cut a forced tool call (vLLM 0.17's 400 "Invalid JSON: EOF while parsing"): the prompt
        was tokenized and generated, so the request exercised the tokenizer; raise max_tokens, within a bound."""
        assert self.factory is not None
        self.tool_calls_cut += 1
        fit = self.factory.fit
        if self.factory.raise_tool_max_tokens(fit.max_model_len):
            self.factory.refit(fit.with_max_tokens(max(fit.max_tokens, self.factory.tool_max_tokens)))

    def _on_finding(self, finding: LogEvent) -> None:
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

    def _strip_credentials(self, url: str) -> str:
        """The URL without its user:password, which goes in `self.auth` (sent as Basic auth, written nowhere)."""
        bare, credentials = without_password(url)
        if credentials is not None:
            self.auth = aiohttp.BasicAuth(*credentials)
        return bare

    def interrupt(self) -> None:
        """Ctrl-C or SIGTERM: end at once. The preflight is cancelled, and the load stops without waiting for
        in-flight requests (counted as cancelled): a hung server cannot hold the run (the second signal,
        handled in verify.signals, exits without a report)."""
        self.interrupted = True
        if self._preflight_task is not None:
            self._preflight_task.cancel()
        if self._reference_task is not None:
            self._reference_task.cancel()
        if self.run is not None:
            self.run.abort()

    # -- the verdict -------------------------------------------------------------------------------------

    def _conclude(self, could_not_run: str | None, started_at: str, elapsed: float) -> VerifyResult:
        """The run's result, made once from what the session gathered and the pure verdict."""
        logs = self.logs
        sources = logs.sources_state()
        facts = RunFacts(
            levels=self.levels,
            could_not_run=could_not_run,
            interrupted=self.interrupted,
            death=self.death,
            tokenizer_counts_total={i: n for i, n in logs.counts.items() if i in TOKENIZER_IDS},
            tokenizer_reported=self.tokenizer_reported,
            first_tokenizer_line=self._first_tokenizer_line(None),
            log=LogState(
                given=logs.active,
                lines=logs.lines,
                failed=[f"{s.source}: {s.error}" for s in sources if s.error],
                silent=[s.source for s in sources if not s.lines and not s.error],
            ),
            health_watched=self.health is not None and not self.health.unsupported,
            health_failed=bool(self.health and self.health.failing),
            health_polls=self.health.polls if self.health is not None else 0,
            max_error_rate=self.config.max_error_rate,
        )
        verdict, reasons, checks, said = decide(facts)
        notes = self.notes + said
        if self.nothing_served is not None:
            verdict = Verdict.INCOMPLETE
            notes = [n for n in notes if not n.startswith("interrupted before")]
            notes.append("the server serves none of the tokenizing endpoints verify knows (chat, completions, "
                         "tokenize, embeddings, score, rerank, pooling, classify), so nothing was tested: "
                         f"{self.nothing_served}")
        elif verdict is Verdict.PASS:  # a PASS claims only what it tested
            log_check = next((c for c in checks if c.name == CheckName.LOG), None)
            ran = exercise((lvl.concurrency, _ok_counts(lvl)) for lvl in self.levels)
            why = incomplete_because(
                ran, sorted(self.served),
                log_asked=logs.active, log_ran=log_check is not None and log_check.state == CheckState.PASSED,
                log_detail=log_check.detail if log_check is not None else "",
            )
            if why:
                verdict = Verdict.INCOMPLETE
                notes.extend(why)
            else:
                notes.append(f"exercised under concurrent load: {ran.describe()}")
        return VerifyResult(
            verdict, reasons, self.config, levels=list(self.levels), target=self.target, checks=checks,
            fit=self.fit, findings=list(logs.findings), finding_counts=dict(logs.counts), log_lines=logs.lines,
            log_sources=sources, health=self.health.summary() if self.health is not None else None,
            metrics_scrape=self.metrics_scrape, interrupted=self.interrupted, notes=notes,
            started_at=started_at, elapsed=elapsed,
        )


def _references_said(references: dict[str, Reference]) -> str:
    usable = [r for r in references.values() if r.usable]
    failed = [r for r in references.values() if r.failed is not None]
    text = (f"serial reference: {len(references)} repeated request(s) first sent alone, before the load; "
            f"{len(usable)} answered with a count or vectors that every answer under load must equal")
    if failed:
        text += f"; {len(failed)} failed alone, so only compared with each other (first: {failed[0].failed})"
    return text


def _ok_counts(level: LevelResult) -> dict[str, int]:
    """Per scenario the requests that reached the tokenizer and were answered: the 2xx, and the forced tool
    calls our max_tokens cut (tokenized and generated: vLLM 0.17's 400 "Invalid JSON: EOF")."""
    cut: dict[str, int] = {}
    for group in level.summary.groups(workload=True):
        if group.mismatch is MismatchKind.TOOL_CALL_CUT:
            cut[group.scenario] = cut.get(group.scenario, 0) + group.count
    return {name: stats.ok + cut.get(name, 0) for name, stats in level.summary.scenarios.items()}


def _renderer_workers(server_config: StartupFacts | None) -> int | None:
    """vLLM's --renderer-num-workers, from its start-up lines in the log (absent there: the default, 1)."""
    if server_config is None:
        return None
    workers = server_config.renderer_num_workers
    return workers if workers is not None else 1


def _base(url: str) -> str:
    """`http://h:8000/v1/` -> `http://h:8000`: endpoints are appended with their /v1 prefix."""
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url
