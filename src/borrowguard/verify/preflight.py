"""Learning the target before loading it: what server, which model, how much context, which endpoints
and which scenarios it can take. A few small requests; nothing here is counted in the verdict.

vLLM reports `max_model_len` per model in /v1/models and its version at /version; other servers may not,
and then the context is learned from the first "maximum context length" answer instead.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp

from borrowguard._text import mask
from borrowguard.load.client import TEMPLATE_ALLOWANCE, error_message, redirect_message
from borrowguard.load.faults import FIXES, Fault, MismatchKind, blame, context_numbers
from borrowguard.load.scenarios import CHAT_MIX, POOLING_MIX, Endpoint, RequestFactory
from borrowguard.verify.discovery import EndpointProbe, discover

_MAX_BODY = 1 << 20
_PROBE_SCALE = 0.05  # a probe is a small request of its scenario: it tests acceptance, not size
_PROBE_TIMEOUT_S = 20.0


@dataclass
class Target:
    url: str
    bundled_server: bool
    server_guard: bool | None = None
    model: str | None = None
    server: str | None = None  # "vllm", "borrowguard-reference", or what /v1/models says owns the model
    version: str | None = None
    max_model_len: int | None = None
    max_model_len_source: str | None = None
    endpoints: dict[str, bool] = field(default_factory=dict)  # path -> answered (not 404/405)
    scenarios: dict[str, str] = field(default_factory=dict)  # scenario -> "accepted" | "skipped: why"
    server_config: dict[str, Any] = field(default_factory=dict)  # from the server's start-up log lines
    nothing_served: bool = False  # no endpoint any scenario needs answered the discovery probes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class PreflightError(Exception):
    """The target cannot be loaded at all (unreachable, no model): the run is an ERROR, not a FAIL."""


class Preflight:
    def __init__(
        self, session: aiohttp.ClientSession, base_url: str, *, api_key: str | None, timeout: float
    ) -> None:
        self.session = session
        self.base_url = base_url
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.secrets = (api_key,) if api_key else ()  # masked in what the server says, before any cut
        self.timeout = aiohttp.ClientTimeout(total=timeout)  # --timeout: is the server there at all?
        # A probe that stalls says nothing about acceptance: it is not waited for longer than this (the load
        # will show a stalling server), and the probes run at once.
        self.probe_timeout = aiohttp.ClientTimeout(total=min(timeout, _PROBE_TIMEOUT_S))

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

    async def models(self, target: Target, model: str | None) -> None:
        try:
            status, body, location = await self.get("/v1/models")
        except asyncio.TimeoutError:  # its str() is empty: say what timed out, after how long
            raise PreflightError(
                f"cannot reach {self.base_url}: GET /v1/models got no answer within "
                f"{self.timeout.total:g} s (--timeout)"
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
        target.model = model or (str(card["id"]) if card and "id" in card else None)
        if target.model is None:
            raise PreflightError(
                f"GET {self.base_url}/v1/models answered {status} without a model list; pass --model"
            )
        if card is not None:
            owned = card.get("owned_by")
            target.server = str(owned) if isinstance(owned, str) else None
            length = card.get("max_model_len")
            if isinstance(length, int) and not isinstance(length, bool) and length > 0:
                target.max_model_len, target.max_model_len_source = length, "/v1/models"

    async def version(self, target: Target) -> None:
        try:
            status, body, _ = await self.get("/version")
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            return
        if status == 200 and isinstance(body, dict) and isinstance(body.get("version"), str):
            target.version = body["version"][:64]
            if target.server in (None, "vllm"):
                target.server = "vllm"

    async def probe(self, factory: RequestFactory, target: Target) -> None:
        """One small request per endpoint the mix needs, then per scenario the server may refuse: what the
        server does not serve or cannot take is skipped, not failed."""
        probes = await discover(self.post, self._discovery_bodies(factory))
        target.endpoints.update({path: p.served for path, p in probes.items()})
        factory.completions = target.endpoints.get(str(Endpoint.COMPLETION), True)
        factory.detokenize = target.endpoints.get(str(Endpoint.DETOKENIZE), True)
        factory.chat = target.endpoints.get(str(Endpoint.CHAT), True)
        self._drop_unserved(factory, target, probes)
        if probes and not any(p.served for p in probes.values()):
            target.nothing_served = True
        if "tokenize" in factory.scenarios and not (
            target.endpoints.get(str(Endpoint.TOKENIZE)) or target.endpoints.get(str(Endpoint.DETOKENIZE))
        ):
            self._skip(
                factory, target, "tokenize", f"no /tokenize endpoint: {FIXES[MismatchKind.NO_ENDPOINT]}"
            )
        probed = [s for s in ("image", "tools") if s in factory.scenarios and factory.chat]
        refusals = await asyncio.gather(*(self._refused(factory, s, target) for s in probed))
        for scenario, why in zip(probed, refusals):
            if why:
                self._skip(factory, target, scenario, why)
        for scenario in factory.scenarios:
            target.scenarios.setdefault(scenario, "accepted")

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

    def _drop_unserved(self, factory: RequestFactory, target: Target, probes: dict[str, EndpointProbe]) -> None:
        """Scenarios none of whose endpoints is served are not sent. Those the default mix added on the
        chance that the server serves them leave no trace but `target.endpoints`; any other is skipped with
        what the server said."""
        default = factory.settings.mix == {**CHAT_MIX, **POOLING_MIX}  # verify's default (VerifyConfig)
        chat = probes.get(str(Endpoint.CHAT))
        for scenario in list(factory.scenarios):
            if factory.is_pooling(scenario):
                served = tuple(e for e in factory.pooling_endpoints[scenario]
                               if probes.get(str(e)) is None or probes[str(e)].served)
                if served:
                    factory.pooling_endpoints[scenario] = served
                    continue
                why = "; ".join(probes[str(e)].why for e in factory.pooling_endpoints[scenario])
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
                self._skip(factory, target, scenario, f"not served: {why}")

    async def _refused(self, factory: RequestFactory, scenario: str, target: Target) -> str | None:
        body = factory.probe_body(scenario, Endpoint.CHAT, _PROBE_SCALE)
        try:
            status, _, message = await self.post(str(Endpoint.CHAT), body)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            return None  # the load will show it
        if 200 <= status < 300:
            return None
        verdict = blame(status, message)
        length, _ = context_numbers(message)
        if length and target.max_model_len is None:
            target.max_model_len, target.max_model_len_source = length, "a context-length answer"
        if verdict.fault is Fault.WORKLOAD and verdict.mismatch in (
            MismatchKind.NO_VISION,
            MismatchKind.NO_TOOLS,
        ):
            return f"{message[:160]} ({FIXES[verdict.mismatch]})"
        return None

    @staticmethod
    def _skip(factory: RequestFactory, target: Target, scenario: str, why: str) -> None:
        if len(factory.scenarios) > 1:
            factory.drop(scenario)
            target.scenarios[scenario] = f"skipped: {why}"

    async def measure(self, factory: RequestFactory, target: Target) -> None:
        """Size each scenario's largest prompt with the server's own /tokenize, where it has one."""
        if not target.endpoints.get(str(Endpoint.TOKENIZE)):
            factory.estimate_all(None)
            self.drop_unfit(factory, target)
            return
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
        self.drop_unfit(factory, target)

    def drop_unfit(self, factory: RequestFactory, target: Target) -> None:
        for scenario, why in factory.fit.unfit.items():
            self._skip(factory, target, scenario, f"cannot fit the context: {why}")


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None
