"""The pooling scenarios (load/pooling.py), endpoint discovery's judgement (verify/discovery.py) and the
classification of a forced tool call cut by our max_tokens."""

from __future__ import annotations

import json

from borrowguard.cli._params import Mix
from borrowguard.load import pooling
from borrowguard.load.faults import Fault, MismatchKind, blame
from borrowguard.load.scenarios import Endpoint, RequestFactory, ScenarioSettings
from borrowguard.verify.config import VerifyConfig
from borrowguard.verify.discovery import served_from


def _factory(mix: str, extensions: bool = True) -> RequestFactory:
    return RequestFactory(ScenarioSettings(mix=Mix().convert(mix, None, None), vllm_extensions=extensions), "m")


def test_the_default_mix_holds_every_pooling_scenario() -> None:
    assert set(pooling.POOLING_SCENARIOS) <= set(VerifyConfig().scenario.mix)


def test_pooling_requests_mix_the_shapes_that_collide_and_repeats_are_identical() -> None:
    factory = _factory("embed=2,rerank=1,score=1,pooling=1,classify=1")
    built = [factory.build(factory.plan()) for _ in range(400)]
    by_key: dict[str, set[bytes]] = {}
    shapes: set[str] = set()
    for b in built:
        body = json.loads(b.body)
        assert body["model"] == "m"
        assert b.path in pooling.SCENARIO_ENDPOINTS[b.plan.scenario]
        if b.plan.repeat_key:
            by_key.setdefault(b.plan.repeat_key, set()).add(b.body)
        if b.plan.scenario in ("rerank", "score"):
            assert ("query" in body and body["documents"]) or ("text_1" in body and body["text_2"])
            continue
        value = body["input"]
        truncate = body.get("truncate_prompt_tokens")
        if isinstance(value, list) and value and isinstance(value[0], int):
            shapes.add("ids")
        else:
            shapes.add(("batch" if isinstance(value, list) else "single")
                       + ("-full" if truncate == -1 else "-trunc" if truncate else ""))
    # single beside batch, untruncated beside cut to a few tokens and to the model's maximum, token ids
    assert {"single", "single-trunc", "single-full", "batch", "batch-trunc", "ids"} <= shapes, shapes
    assert all(len(bodies) == 1 for bodies in by_key.values())
    assert {k.split("/")[0] for k in by_key} == set(pooling.POOLING_SCENARIOS)
    assert {k.split("/")[1] for k in by_key if k.startswith("embed/")} == set(pooling.REPEAT_VARIANTS)


def test_without_vllm_extensions_nothing_is_truncated() -> None:
    factory = _factory("embed=1,rerank=1", extensions=False)
    for _ in range(200):
        body = json.loads(factory.build(factory.plan()).body)
        assert "truncate_prompt_tokens" not in body


def test_a_rerank_scenario_keeps_to_the_endpoints_the_preflight_found() -> None:
    factory = _factory("rerank=1")
    every = factory.pooling_endpoints["rerank"]
    factory.serve_only(lambda endpoint: endpoint is Endpoint.RERANK)
    assert {factory.build(factory.plan()).path for _ in range(50)} == {"/rerank"}
    none = _factory("rerank=1")
    none.serve_only(lambda endpoint: False)  # none served: all kept, for the preflight to say why and drop it
    assert none.pooling_endpoints["rerank"] == every and not (none.chat or none.completions or none.detokenize)


def test_discovery_tells_not_served_from_served() -> None:
    assert not served_from("/v1/embeddings", 404, "Not Found").served
    assert not served_from("/classify", 405, "Method Not Allowed").served
    assert not served_from("/v1/embeddings", 400, "The model does not support Embeddings API").served
    assert served_from("/v1/embeddings", 200, "").served
    # a 500 naming the race: the endpoint exists and tokenizes
    assert served_from("/v1/embeddings", 500, "Already borrowed").served
    assert served_from("/score", 400, "truncate_prompt_tokens must be at most 512").served
    assert "404" in served_from("/pooling", 404, "Not Found").why


def test_a_forced_tool_call_cut_by_max_tokens_is_ours_only_on_the_tools_scenario() -> None:
    msg = "1 validation error: Invalid JSON: EOF while parsing a string at line 1 column 40"
    assert blame(400, msg, "tools") == (b := blame(400, msg, "tools")) and b.mismatch is MismatchKind.TOOL_CALL_CUT
    assert b.fault is Fault.WORKLOAD
    assert blame(400, msg, "text").mismatch is not MismatchKind.TOOL_CALL_CUT
    assert blame(500, msg, "tools").fault is Fault.SERVER


def test_tool_max_tokens_is_raised_within_its_bound() -> None:
    factory = _factory("tools=1")
    seen = [factory.tool_max_tokens]
    while factory.raise_tool_max_tokens(2048):
        seen.append(factory.tool_max_tokens)
    assert seen == [48, 96]
    assert factory.build(factory.plan()).plan.max_tokens == 96
    small = _factory("tools=1")
    while small.raise_tool_max_tokens(240):
        pass
    assert small.tool_max_tokens == 60  # a quarter of the context
