"""The closed-loop load generator: N workers, each sends its next request when the last one ended.

That is the shape of `vllm bench serve --max-concurrency N` and of real agent traffic; it holds
exactly N requests in flight, which is what the operator's "held N concurrent requests" means.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from borrowguard.load.client import TIMEOUT, ChatClient, Outcome
from borrowguard.load.faults import Fault
from borrowguard.load.metrics import LoadMetrics
from borrowguard.load.scenarios import RequestFactory


@dataclass(frozen=True)
class LoadPlan:
    concurrency: int = 16
    duration: float | None = 30.0  # seconds; None: until `requests` are done
    requests: int | None = None
    ramp_up: float = 0.0
    drain: float = 30.0  # after the end, how long in-flight requests may still finish


class LoadRun:
    """One level of load; `stop()` ends it early (Ctrl-C, engine death), `abort()` also cuts the drain."""

    def __init__(
        self,
        client: ChatClient,
        factory: RequestFactory,
        metrics: LoadMetrics,
        plan: LoadPlan,
        records: IO[str] | None = None,
        on_outcome: Callable[[Outcome], None] | None = None,
    ) -> None:
        self.client = client
        self.factory = factory
        self.metrics = metrics
        self.plan = plan
        self.records = records
        self._on_outcome = on_outcome
        self._stop = asyncio.Event()
        self._abort = asyncio.Event()
        self._issued = 0
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.cancelled_in_flight = 0
        self.records_error: str | None = None

    def stop(self) -> None:
        self._stop.set()

    def abort(self) -> None:
        self._stop.set()
        self._abort.set()

    @property
    def _since(self) -> float:
        assert self.started_at is not None, "LoadRun's workers run only after run() has started"
        return self.started_at

    def elapsed(self) -> float:
        if self.started_at is None:
            return 0.0
        return (self.ended_at or time.perf_counter()) - self.started_at

    async def run(self) -> None:
        # The level's clock is its own: every outcome's start counts from here (handed to send, not written
        # into the client).
        self.started_at = time.perf_counter()
        workers = [asyncio.create_task(self._worker(i)) for i in range(self.plan.concurrency)]
        timer = asyncio.create_task(self._timer())
        all_done = asyncio.gather(*workers)
        stop_wait = asyncio.ensure_future(self._stop.wait())
        abort_wait = asyncio.ensure_future(self._abort.wait())
        try:
            await asyncio.wait([stop_wait, all_done], return_when="FIRST_COMPLETED")
            # no new requests from here on; let in-flight ones finish unless aborted or too slow
            await asyncio.wait([all_done, abort_wait], timeout=self.plan.drain, return_when="FIRST_COMPLETED")
        finally:
            self.ended_at = time.perf_counter()
            stop_wait.cancel()
            abort_wait.cancel()
            timer.cancel()
            for task in workers:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await all_done
            with contextlib.suppress(asyncio.CancelledError):
                await timer

    async def _timer(self) -> None:
        if self.plan.duration is not None:
            await asyncio.sleep(self.plan.duration)
            self._stop.set()

    async def _worker(self, index: int) -> None:
        if self.plan.ramp_up > 0 and index:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.plan.ramp_up * index / self.plan.concurrency)
        loop = asyncio.get_running_loop()
        while not self._stop.is_set():
            if self.plan.requests is not None:
                if self._issued >= self.plan.requests:
                    self._stop.set()  # the last worker's answer still counts: the drain waits for it
                    return
                self._issued += 1
            plan = self.factory.plan()
            if self.factory.needs_thread(plan):
                built = await loop.run_in_executor(None, self.factory.build, plan)
            else:
                built = self.factory.build(plan)
            if self._stop.is_set() and self.plan.requests is None:
                return
            started = time.perf_counter()
            self.metrics.started(started - self._since)
            try:
                outcome = await self.client.send(built, since=self._since)
            except asyncio.CancelledError:
                if self._abort.is_set():  # Ctrl-C twice, engine death: not the request's own failure
                    self.metrics.inflight -= 1
                    self.cancelled_in_flight += 1
                    raise
                # Still unanswered when the drain after the planned end ran out. No slower than the server's
                # answers of this level: unfinished, not counted (a busy server is slow, not failing). Far
                # slower, or with nothing answered: a request the server did not answer in time, which counts
                # (a stalling server must not look like an idle one).
                if not self.metrics.cut_at_drain(time.perf_counter() - started):
                    self.metrics.finished(self._unanswered(built, started))
                raise
            outcome = self.metrics.finished(outcome)  # as counted: a tied reset carries its answer's fault
            if self._on_outcome is not None:
                self._on_outcome(outcome)
            if self.records is not None:
                self._record(outcome)

    def _unanswered(self, built: Any, started: float) -> Outcome:
        plan = built.plan
        now = time.perf_counter()
        return Outcome(
            plan.scenario, plan.repeat_key, plan.truncate, start=started - self._since, latency=now - started,
            error=TIMEOUT, message=f"no answer {self.plan.drain:g}s after the planned end (still in flight)",
            endpoint=built.path, scale=built.scale, fault=Fault.SERVER,
        )

    def _record(self, outcome: Outcome) -> None:
        record = outcome.to_dict()
        record["concurrency"] = self.plan.concurrency  # which level it was sent at
        try:
            self.records.write(json.dumps(record, separators=(",", ":")) + "\n")  # type: ignore[union-attr]
        except OSError as exc:  # a full disk ends the records, not the run
            self.records_error = f"{type(exc).__name__}: {exc.strerror or exc}"
            self.records = None
