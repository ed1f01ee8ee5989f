"""Learning the target before loading it: what server, which model, how much context, which endpoints
and which scenarios it can take. A few small requests; nothing here is counted in the verdict.

vLLM reports `max_model_len` per model in /v1/models and its version at /version; other servers may not,
and then the context is learned from the first "maximum context length" answer instead.

    pre = Preflight(session, Target(url, bundled_server=False), api_key=key, timeout=30)
    target, factory = await pre.learn(settings, model=None, max_model_len=None)   # a frozen Target

Each step returns a new `Target`; `pre.learned` is the last one, what is known when a learn is cancelled.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import aiohttp

from borrowguard._text import mask
from borrowguard.load.client import TEMPLATE_ALLOWANCE, error_message, redirect_message
from borrowguard.load.faults import Fault, MismatchKind, blame, context_numbers
from borrowguard.load.scenarios import CHAT_MIX, POOLING_MIX, Endpoint, RequestFactory, ScenarioSettings
from borrowguard.verify.discovery import EndpointProbe, discover
from borrowguard.verify.wording import FIXES, flag

if TYPE_CHECKING:
    from borrowguard.scan.startup import StartupFacts

_MAX_BODY = 1 << 20
_PROBE_SCALE = 0.05  # a probe is a small request of its scenario: it tests acceptance, not size
_PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Target:
    """What the preflight learned of the server (the run document's `target`). Frozen: each step of the
    preflight returns a new one (`dataclasses.replace`), and so does the session when the log shows the
    server's configuration."""

    url: str
    bundled_server: bool
    server_guard: bool | None = None
    model: str | None = None
    server: str | None = None  # "vllm", "borrowguard-reference", or what /v1/models says owns the model
    version: str | None = None
    max_model_len: int | None = None
    max_model_len_source: str | None = None
    endpoints: Mapping[str, bool] = field(default_factory=dict)  # path -> answered (not 404/405)
    scenarios: Mapping[str, str] = field(default_factory=dict)  # scenario -> "accepted" | "skipped: why"
    server_config: StartupFacts | None = None  # from the server's start-up log lines
    nothing_served: bool = False  # no endpoint any scenario needs answered the discovery probes

    def serves(self, endpoint: Endpoint, unknown: bool = False) -> bool:
        """Whether the discovery saw `endpoint` answer (`unknown` when it was not probed)."""
        return self.endpoints.get(str(endpoint), unknown)


class PreflightError(Exception):
    """The target cannot be loaded at all (unreachable, no model): the run is an ERROR, not a FAIL."""


class Preflight:
    """Learns `target` (its url, whether it is the bundled server) with a few small requests."""

    def __init__(
        self, session: aiohttp.ClientSession, target: Target, *, api_key: str | None, timeout: float
    ) -> None:
        self.session = session
        self.base_url = target.url
        self.learned = target  # the facts so far: each step replaces it, never changes it
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.secrets = (api_key,) if api_key else ()  # masked in what the server says, before any cut
        self.timeout = aiohttp.ClientTimeout(total=timeout)  # --timeout: is the server there at all?
        # A probe that stalls says nothing about acceptance: it is not waited for longer than this (the load
        # will show a stalling server), and the probes run at once.
        self.probe_timeout = aiohttp.ClientTimeout(total=min(timeout, _PROBE_TIMEOUT_S))

    async def learn(
        self, settings: ScenarioSettings, *, model: str | None, max_model_len: int | None
    ) -> tuple[Target, RequestFactory]:
        """The target as learned, and the workload fitted to it (the scenarios it serves and can take, sized
        to its context). `model` and `max_model_len` are the operator's, when given: they win over what the
        server says. PreflightError when the target cannot be loaded at all."""
        self.learned = await self.models(self.learned, model)
        self.learned = await self.version(self.learned)
        if self.learned.server is None and self.learned.bundled_server:
            self.learned = replace(self.learned, server="borrowguard-reference")
        if max_model_len is not None:
            self.learned = replace(self.learned, max_model_len=max_model_len, max_model_len_source=flag("max_model_len"))
        assert self.learned.model is not None  # models() raised otherwise
        factory = RequestFactory(settings, self.learned.model)
        factory.refit(factory.fit.with_context(self.learned.max_model_len))
        self.learned = await self.probe(factory, self.learned)
        if max_model_len is None:  # a context-length answer may have said it
            factory.refit(factory.fit.with_context(self.learned.max_model_len))
        self.learned = await self.measure(factory, self.learned)
        return self.learned, factory

    async def get(self, path: str) -> tuple[int, Any, str | None]:
        """(status, parsed JSON or None, where a redirect pointed: it is never followed)."""
        async with self.session.get(self.base_url + path, headers=self.headers, timeout=self.timeout,
                                    allow_redirects=False) as resp:
            return resp.status, _json(await resp.content.read(_MAX_BODY)), resp.headers.get("Location")

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any, str]:
        """(status, parsed JSON or None, the error message for a non-2xx)."""
        async with self.session.post(
            self.base_url + path, json=body, headers=self.headers, timeout=self.probe_timeout,
            allow_redirects=False,
        ) as resp:
            raw = await resp.content.read(_MAX_BODY)
            if 300 <= resp.status < 400:
                message = mask(redirect_message(resp.status, resp.headers.get("Location")), self.secrets)
            else:
                message = "" if 200 <= resp.status < 300 else mask(error_message(raw), self.secrets)
            if resp.status >= 400:
                resp.close()  # servers may drop the connection after an error answer
            return resp.status, _json(raw), message

    async def models(self, target: Target, model: str | None) -> Target:
        try:
            status, body, location = await self.get("/v1/models")
        except asyncio.TimeoutError:  # its str() is empty: say what timed out, after how long
            raise PreflightError(
                f"cannot reach {self.base_url}: GET /v1/models got no answer within "
                f"{self.timeout.total:g} s ({flag('timeout')})"
            ) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise PreflightError(f"cannot reach {self.base_url}: {type(exc).__name__}: {exc}") from None
        if 300 <= status < 400:
            said = mask(redirect_message(status, location), self.secrets)
            raise PreflightError(f"GET {self.base_url}/v1/models: {said}")
        cards = body.get("data") if isinstance(body, dict) else None
        cards = [c for c in cards if isinstance(c, dict)] if isinstance(cards, list) else []
        card = (
            next((c for c in cards if c.get("id") == model), None) if model else (cards[0] if cards else None)
        )
        named = model or (str(card["id"]) if card and "id" in card else None)
        if named is None:
            raise PreflightError(
                f"GET {self.base_url}/v1/models answered {status} without a model list; pass {flag('model')}"
            )
        target = replace(target, model=named)
        if card is not None:
            owned = card.get("owned_by")
            target = replace(target, server=str(owned) if isinstance(owned, str) else None)
            length = card.get("max_model_len")
            if isinstance(length, int) and not isinstance(length, bool) and length > 0:
                target = replace(target, max_model_len=length, max_model_len_source="/v1/models")
        return target

    async def version(self, target: Target) -> Target:
        try:
            status, body, _ = await self.get("/version")
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            return target
        if status == 200 and isinstance(body, dict) and isinstance(body.get("version"), str):
            target = replace(target, version=body["version"][:64])
            if target.server in (None, "vllm"):
                target = replace(target, server="vllm")
        return target

    async def probe(self, factory: RequestFactory, target: Target) -> Target:
        """One small request per endpoint the mix needs, then per scenario the server may refuse: what the
        server does not serve or cannot take is skipped, not failed."""
        probes = await discover(self.post, self._discovery_bodies(factory))
        target = replace(target, endpoints={**target.endpoints, **{path: p.served for path, p in probes.items()}})
        factory.serve_only(lambda endpoint: target.serves(endpoint, unknown=True))
        target = self._drop_unserved(factory, target, probes)
        if probes and not any(p.served for p in probes.values()):
            target = replace(target, nothing_served=True)
        if "tokenize" in factory.scenarios and not (
            target.serves(Endpoint.TOKENIZE) or target.serves(Endpoint.DETOKENIZE)
        ):
            why = f"no /tokenize endpoint: {FIXES[MismatchKind.NO_ENDPOINT]}"
            target = self._skip(factory, target, "tokenize", why)
        probed = [s for s in ("image", "tools") if s in factory.scenarios and factory.chat]
        answers = await asyncio.gather(*(self._refused(factory, s) for s in probed))
        for scenario, (why, length) in zip(probed, answers):
            if length and target.max_model_len is None:
                target = replace(target, max_model_len=length, max_model_len_source="a context-length answer")
            if why:
                target = self._skip(factory, target, scenario, why)
        accepted = {s: "accepted" for s in factory.scenarios if s not in target.scenarios}
        return replace(target, scenarios={**target.scenarios, **accepted})

    @staticmethod
    def _discovery_bodies(factory: RequestFactory) -> dict[str, dict[str, Any]]:
        """A tiny valid body per endpoint that a scenario of the mix would use."""
        scenarios = set(factory.scenarios)
        bodies: dict[str, dict[str, Any]] = {}
        if scenarios & {"text", "image", "tools"}:
            bodies[str(Endpoint.CHAT)] = factory.probe_body("text", Endpoint.CHAT, _PROBE_SCALE)
        if "text" in scenarios:
            bodies[str(Endpoint.COMPLETION)] = factory.probe_body("text", Endpoint.COMPLETION, _PROBE_SCALE)
        if "tokenize" in scenarios:
            for endpoint in (Endpoint.TOKENIZE, Endpoint.DETOKENIZE):
                bodies[str(endpoint)] = factory.probe_body("tokenize", endpoint, _PROBE_SCALE)
        for scenario in scenarios:
            if factory.is_pooling(scenario):
                for endpoint in factory.pooling_endpoints[scenario]:
                    bodies[str(endpoint)] = factory.probe_body(scenario, endpoint, _PROBE_SCALE)
        return bodies

    def _drop_unserved(self, factory: RequestFactory, target: Target, probes: dict[str, EndpointProbe]) -> Target:
        """Scenarios none of whose endpoints is served are not sent. Those the default mix added on the
        chance that the server serves them leave no trace but `target.endpoints`; any other is skipped with
        what the server said."""
        default = factory.settings.mix == {**CHAT_MIX, **POOLING_MIX}  # verify's default (VerifyConfig)
        chat = probes.get(str(Endpoint.CHAT))
        for scenario in list(factory.scenarios):
            if factory.is_pooling(scenario):
                endpoints = factory.pooling_endpoints[scenario]  # the served ones (serve_only), else all
                if any(probes.get(str(e)) is None or probes[str(e)].served for e in endpoints):
                    continue
                why = "; ".join(probes[str(e)].why for e in endpoints)
            elif scenario in ("image", "tools") or (scenario == "text" and not factory.completions):
                if chat is None or chat.served:
                    continue
                why = chat.why
            else:
                continue
            if default and factory.is_pooling(scenario):
                if len(factory.scenarios) > 1:
                    factory.drop(scenario)
            else:
                target = self._skip(factory, target, scenario, f"not served: {why}")
        return target

    async def _refused(self, factory: RequestFactory, scenario: str) -> tuple[str | None, int | None]:
        """Why the server refuses `scenario`'s requests, if it does (None: it takes them, or the load will
        show), and the context length its answer states, if it states one."""
        body = factory.probe_body(scenario, Endpoint.CHAT, _PROBE_SCALE)
        try:
            status, _, message = await self.post(str(Endpoint.CHAT), body)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            return None, None  # the load will show it
        if 200 <= status < 300:
            return None, None
        verdict = blame(status, message)
        length, _ = context_numbers(message)
        if verdict.fault is Fault.WORKLOAD and verdict.mismatch in (
            MismatchKind.NO_VISION,
            MismatchKind.NO_TOOLS,
        ):
            return f"{message[:160]} ({FIXES[verdict.mismatch]})", length
        return None, length

    @staticmethod
    def _skip(factory: RequestFactory, target: Target, scenario: str, why: str) -> Target:
        if len(factory.scenarios) <= 1:
            return target  # the last scenario is sent anyway: what it gets answered is the verdict's
        factory.drop(scenario)
        return replace(target, scenarios={**target.scenarios, scenario: f"skipped: {why}"})

    async def measure(self, factory: RequestFactory, target: Target) -> Target:
        """Size each scenario's largest prompt with the server's own /tokenize, where it has one."""
        if not target.serves(Endpoint.TOKENIZE):
            factory.estimate_all(None)
            return self.drop_unfit(factory, target)
        counts: dict[str, float] = {}
        for scenario in factory.scenarios:
            for scale in (1.0, 0.5):
                body = factory.largest(scenario, scale)
                try:
                    status, answer, _ = await self.post(str(Endpoint.TOKENIZE), body)
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
                    status, answer = 0, None
                count = answer.get("count") if isinstance(answer, dict) else None
                # A count beyond one token per byte of the body (plus room for a template) is not a count.
                plausible = isinstance(count, int) and 0 < count <= len(json.dumps(body)) + TEMPLATE_ALLOWANCE
                if status == 200 and plausible:
                    counts[json.dumps(body, sort_keys=True)] = float(count)
        factory.estimate_all(counts)
        return self.drop_unfit(factory, target)

    def drop_unfit(self, factory: RequestFactory, target: Target) -> Target:
        for scenario, why in factory.fit.unfit.items():
            target = self._skip(factory, target, scenario, f"cannot fit the context: {why}")
        return target


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None
