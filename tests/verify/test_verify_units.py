"""verify's parts without a server: whose fault a failure is, fitting prompts to the context, the verdict."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from borrowguard.load.faults import Fault, MismatchKind, blame, context_numbers
from borrowguard.load.fit import ContextFit, ScenarioSize
from borrowguard.load.scenarios import Endpoint, RequestFactory, ScenarioSettings
from borrowguard.load.summary import (
    ErrorGroup,
    LevelSummary,
    Percentiles,
    RepeatStats,
    ScenarioSummary,
    Series,
)
from borrowguard.verify.config import DEFAULT_DURATION, ConfigError, VerifyConfig
from borrowguard.verify.result import CheckName, CheckState, LevelResult, ReasonCode, Verdict
from borrowguard.verify.verdict import LevelFacts, LogState, RunFacts, decide, level_reasons

# Error messages as real servers word them (vLLM 0.17 - 0.21 serving_engine / renderer; see the
# test-vllm-serve harness for where they were observed on a real 0.19.1 server).
TOO_LONG_V19 = (
    "This model's maximum context length is 2048 tokens. However, your request has 2100 input tokens. "
    "Please reduce the length of the input messages."
)
TOO_LONG_AT_LEAST = (
    "This model's maximum context length is 2048 tokens. However, your prompt contains at least 2033 "
    "input tokens, and you requested 16 output tokens."
)
NO_TOOL_PARSER = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
NO_TOOL_PARSER_REQUIRED = 'tool_choice="required" requires --tool-call-parser to be set'
TOO_LONG_V17 = (
    "You passed 2100 input tokens and requested 16 output tokens. However, the model's context length is only "
    "2048 tokens, resulting in a maximum input length of 2032 tokens. Please reduce the length of the input prompt."
)
TOO_LONG_CHARS = (
    "This model's maximum context length is 2048 tokens. However, you requested 16 output tokens and your prompt "
    "contains 90000 characters (more than 81280 characters, which is the upper bound for 2032 input tokens). "
    "Please reduce the length of the input prompt or the number of requested output tokens."
)


@pytest.mark.parametrize(
    ("status", "message", "fault", "kind"),
    [
        (400, TOO_LONG_V19, Fault.WORKLOAD, MismatchKind.TOO_LONG),
        (400, TOO_LONG_AT_LEAST, Fault.WORKLOAD, MismatchKind.TOO_LONG),
        (400, "Prompt length of 2100 is longer than the maximum model length of 2048.", Fault.WORKLOAD,
         MismatchKind.TOO_LONG),
        (400, NO_TOOL_PARSER, Fault.WORKLOAD, MismatchKind.NO_TOOLS),
        (400, NO_TOOL_PARSER_REQUIRED, Fault.WORKLOAD, MismatchKind.NO_TOOLS),
        (400, TOO_LONG_V17, Fault.WORKLOAD, MismatchKind.TOO_LONG),
        (400, TOO_LONG_CHARS, Fault.WORKLOAD, MismatchKind.TOO_LONG),
        (400, "max_tokens=5000cannot be greater than max_model_len=max_total_tokens=2048. Please request fewer "
         "output tokens.", Fault.WORKLOAD, MismatchKind.TOO_LONG),
        (400, "/models/tiny is not a multimodal model", Fault.WORKLOAD, MismatchKind.NO_VISION),
        (400, "At most 0 image(s) may be provided in one prompt.", Fault.WORKLOAD, MismatchKind.TOO_MANY_IMAGES),
        (404, "Not Found", Fault.WORKLOAD, MismatchKind.NO_ENDPOINT),
        (400, "Already borrowed", Fault.TOKENIZER, None),
        (500, "RuntimeError: Already borrowed", Fault.TOKENIZER, None),
        (400, "Exception: Truncation error: Second sequence not provided", Fault.TOKENIZER, None),
        (500, "", Fault.SERVER, None),  # vLLM's bad_words race: a 500 with an empty message
        (400, "something nobody anticipated", Fault.SERVER, None),
        (503, "maximum context length is 10 tokens", Fault.SERVER, None),  # only a 4xx is ours
        (None, "ServerDisconnectedError", Fault.SERVER, None),
    ],
)
def test_blame_tells_ours_from_the_servers(status, message, fault, kind):
    verdict = blame(status, message)
    assert (verdict.fault, verdict.mismatch) == (fault, kind)


def test_context_numbers_are_read_from_every_wording():
    assert context_numbers(TOO_LONG_V19) == (2048, 2100)
    assert context_numbers(TOO_LONG_AT_LEAST) == (2048, 2033)
    assert context_numbers("Prompt length of 2100 is longer than the maximum model length of 2048.") == (2048, 2100)
    assert context_numbers(TOO_LONG_V17) == (2048, 2100)
    assert context_numbers(TOO_LONG_CHARS) == (2048, None)  # characters are not tokens
    assert context_numbers("nothing here") == (None, None)


def test_fit_shrinks_to_the_budget_and_learns_from_answers():
    sizes = {"text": ScenarioSize(100, 4000), "tiny": ScenarioSize(5, 10)}
    fit = ContextFit(max_model_len=2048, max_tokens=48, sizes=sizes).planned()
    budget = fit.budget
    assert budget is not None and fit.sizes["text"].at(fit.scale("text")) <= budget + 1e-6
    assert fit.scale("tiny") == 1.0
    shrunk = fit.observed("text", fit.scale("text"), int(budget * 1.5))
    assert shrunk.generation > fit.generation and shrunk.scale("text") < fit.scale("text") < 1.0
    assert shrunk.observed("text", 1.0, 10) is shrunk  # fits: nothing changes
    assert shrunk.observed("text", fit.scale("text"), int(budget * 1.5)) is shrunk  # shrunk past it already
    assert fit.with_context(2048) is fit and fit.with_context(4096).scale("text") > fit.scale("text")


def test_fit_says_when_a_scenario_cannot_fit_at_all():
    fit = ContextFit(max_model_len=256, max_tokens=16, sizes={"tools": ScenarioSize(900, 100)}).planned()
    assert "tools" in fit.unfit


@pytest.mark.parametrize("max_model_len", [512, 2048])
def test_every_request_fits_the_learned_context(max_model_len):
    """With the deliberately high chars-per-token guess, no request's text can exceed the budget."""
    factory = RequestFactory(ScenarioSettings(image_sizes=((64, 64),)), "m")
    factory.refit(factory.fit.with_context(max_model_len))
    factory.estimate_all(None)
    budget = factory.fit.budget
    assert set(factory.fit.unfit) == ({"tools"} if max_model_len == 512 else set())
    for _ in range(300):
        plan = factory.plan()
        if plan.endpoint is Endpoint.DETOKENIZE or plan.scenario in factory.fit.unfit:
            continue  # an unfit scenario is skipped by the preflight (tested with the server)
        body = factory.body(plan, random.Random(plan.seed), factory.fit.scale(plan.scenario))
        parts = [body.get("prompt") or ""] + [m["content"] for m in body.get("messages", [])]
        # images are sized apart (by area); here the text of every request, tool schemas included
        text = "".join(p if isinstance(p, str) else " ".join(x.get("text", "") for x in p) for p in parts)
        text += json.dumps(body.get("tools", ""))
        assert len(text) / 2.5 <= budget * 1.25, (plan, len(text))


def test_mix_varies_every_setting_that_makes_tokenizer_calls_differ():
    factory = RequestFactory(ScenarioSettings(image_sizes=((64, 64),)), "m")
    plans = [factory.plan() for _ in range(400)]
    assert {p.endpoint for p in plans} >= {Endpoint.CHAT, Endpoint.COMPLETION, Endpoint.TOKENIZE, Endpoint.DETOKENIZE}
    assert {p.max_tokens for p in plans if p.scenario == "text"} == {1, 16}
    assert any(p.bad_words for p in plans) and any(p.truncate for p in plans)
    bodies = [factory.body(p, random.Random(p.seed), 1.0) for p in plans if p.bad_words]
    assert all(b["bad_words"] for b in bodies)
    no_ext = RequestFactory(ScenarioSettings(vllm_extensions=False), "m")
    for p in (no_ext.plan() for _ in range(200)):
        body = no_ext.body(p, random.Random(p.seed), 1.0) if p.scenario != "image" else {}
        assert "bad_words" not in body and "truncate_prompt_tokens" not in body


def test_repeat_keys_change_with_the_fit_generation():
    factory = RequestFactory(ScenarioSettings(), "m")
    first = factory.plan()
    assert first.repeat_key == "text/plain"
    factory.refit(replace(factory.fit, generation=3))
    factory._counts["text"] = 4  # the next text request is a repeat again
    factory._order = iter(["text"])
    assert factory.plan().repeat_key.endswith("#3")


# ------------------------------------------------------------------------------------------- verdict


def _summary(requests=10, ok=10, groups=(), repeats=None, faults=None):
    scenario = ScenarioSummary(requests, ok, {}, Percentiles(), None, 0, None)
    return LevelSummary(requests=requests, ok=ok, requests_per_s=None, latency=Percentiles(),
                        scenarios={"text": scenario}, errors_by_fault={Fault(k): n for k, n in (faults or {}).items()},
                        tied_resets=0, retried=0, error_groups=tuple(groups), error_groups_dropped=0,
                        repeats=repeats or {})


def _group(status, fault, count, message, mismatch=None):
    return ErrorGroup("text", status, Fault(fault), mismatch and MismatchKind(mismatch), count, 0.0, (message,))


def _repeat(values):
    return RepeatStats(values, {v: 0.0 for v in values}, 0)


def _level(summary, **kw):
    facts = LevelFacts(concurrency=4, summary=summary, tokenizer_counts=kw.get("tok", {}),
                       first_tokenizer_line=None, death=kw.get("death"), interrupted=False, max_error_rate=0.0)
    return LevelResult(4, 1.0, summary, Series(1.0, ()), level_reasons(facts))


def _run(levels, log=None, **kw):
    return decide(RunFacts(levels=levels, could_not_run=kw.get("could_not_run"), interrupted=False, death=None,
                           tokenizer_counts_total={}, tokenizer_reported=0, first_tokenizer_line=None,
                           log=log or LogState(given=True, lines=100), health_watched=True, health_failed=False))


def test_workload_mismatches_are_never_counted_against_the_server():
    group = _group("400", "workload", 4, TOO_LONG_V19, "too-long")
    summary = _summary(requests=10, ok=6, groups=[group], faults={"workload": 4})
    verdict, reasons, _checks, _ = _run([_level(summary)])
    assert verdict is Verdict.PASS, reasons


def test_nothing_valid_sent_is_an_error_not_a_pass_or_fail():
    group = _group("400", "workload", 10, TOO_LONG_V19, "too-long")
    summary = _summary(requests=10, ok=0, groups=[group], faults={"workload": 10})
    verdict, reasons, _, _ = _run([_level(summary)])
    assert verdict is Verdict.ERROR and reasons[0].code is ReasonCode.WORKLOAD_MISMATCH


def test_a_tokenizer_error_in_an_answer_fails_even_without_a_log():
    group = _group("500", "tokenizer", 1, "Already borrowed")
    summary = _summary(requests=10, ok=9, groups=[group], faults={"tokenizer": 1})
    verdict, reasons, _checks, _ = _run([_level(summary)], log=LogState(given=False))
    assert verdict is Verdict.FAIL
    assert {r.code for r in reasons} == {ReasonCode.TOKENIZER_ERRORS, ReasonCode.REQUEST_ERRORS}


@pytest.mark.parametrize(
    ("log", "detail"),
    [
        (LogState(given=False), "no server log given"),
        (LogState(given=True, lines=0, failed=["docker logs -f x: the command ended early (exit code 1)"]), "failed"),
        (LogState(given=True, lines=0, silent=["vllm.log"]), "yielded no line"),
    ],
)
def test_pass_never_claims_a_log_check_that_did_not_run(log, detail):
    verdict, _, checks, _ = _run([_level(_summary())], log=log)
    assert verdict is Verdict.PASS
    log_check = next(c for c in checks if c.name is CheckName.LOG)
    assert log_check.state is CheckState.NOT_RUN and detail in log_check.detail


def test_prompt_token_mismatch_is_reported_once_per_key_across_levels():
    bad = {"k": _repeat({10: 2, 12: 1})}
    levels = [_level(_summary(repeats=bad)), _level(_summary(repeats=bad))]
    _, reasons, _, _ = _run(levels)
    assert [r.code for r in reasons].count(ReasonCode.PROMPT_TOKENS_MISMATCH) == 1


def test_cross_level_mismatch_is_found():
    a = {"k": _repeat({10: 2})}
    b = {"k": _repeat({12: 2})}
    verdict, reasons, _, _ = _run([_level(_summary(repeats=a)), _level(_summary(repeats=b))])
    assert verdict is Verdict.FAIL and "across levels" in reasons[0].message


@pytest.mark.parametrize(
    ("server", "version", "bad_words", "workers", "says"),
    [
        ("vllm", "0.21.0", True, 4, "cannot race"),
        ("vllm", "0.33.0", True, None, "cannot race"),
        ("vllm", "0.19.1", False, 1, "could not race"),
        ("vllm", "0.19.1", True, 1, None),  # bad_words race even with one renderer worker
        ("vllm", "0.19.1", False, 4, None),  # two microbatch queues
        ("vllm", "0.19.1", False, None, None),  # the log did not say: no claim
        ("vllm", "0.17.1", False, 1, None),  # images race through the shared processor
        ("borrowguard-stub-engine", "0.1.0", False, 1, None),
        ("vllm", "not-a-version", False, 1, None),
    ],
)
def test_race_exposure_says_when_a_server_cannot_race(server, version, bad_words, workers, says):
    from borrowguard.verify.exposure import race_exposure

    note = race_exposure(server, version, bad_words_sent=bad_words, renderer_workers=workers)
    assert (note is None) if says is None else (says in note)


def test_a_full_disk_ends_the_records_not_the_run():
    import errno

    from borrowguard.load.client import Outcome
    from borrowguard.load.metrics import LoadMetrics
    from borrowguard.load.runner import LoadPlan, LoadRun

    class FullDisk:
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    factory = RequestFactory(ScenarioSettings(), "m")
    run = LoadRun(None, factory, LoadMetrics(factory.scenarios), LoadPlan(), FullDisk())  # type: ignore[arg-type]
    run._record(Outcome("text", None, None, start=0.0, status=200))
    assert run.records is None and "No space left" in (run.records_error or "")


# ------------------------------------------------------------------------------------------- config


def test_the_config_owns_the_run_length_rule() -> None:
    assert VerifyConfig().duration == DEFAULT_DURATION
    assert VerifyConfig(requests=5).duration is None  # a request count alone: no time limit
    assert VerifyConfig(requests=5, duration=2.0).duration == 2.0


@pytest.mark.parametrize(
    ("config", "setting"),
    [
        (VerifyConfig(url="http://127.0.0.1:9", server_guard=False), "server_guard"),
        (VerifyConfig(url="localhost:8000"), "url"),
        (VerifyConfig(concurrency=0), "concurrency"),
        (VerifyConfig(max_error_rate=2.0), "max_error_rate"),
        (VerifyConfig(health_path="health"), "health_path"),
    ],
)
def test_config_errors_name_the_setting_never_a_flag(config: VerifyConfig, setting: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config.validate()
    assert caught.value.setting == setting and str(caught.value).startswith(setting)
    assert "--" not in str(caught.value)
    assert caught.value.said_as("--x").startswith("--x")
    assert caught.value.for_target("a").said_as("--x").startswith("target a: --x")


def test_the_verify_options_take_their_defaults_from_the_config() -> None:
    from click.testing import CliRunner

    from borrowguard.cli import cli
    from borrowguard.cli._params import show_mix

    out = "".join(CliRunner().invoke(cli, ["verify", "--help"]).output.split())  # help wraps inside words
    config = VerifyConfig()
    for shown in (f"[default:{config.concurrency};", f"[default:{show_mix(config.scenario.mix)}]",
                  "[default:256x256,720x1280]", f"[default:{config.timeout:g}s]"):
        assert shown in out, shown


def test_fleet_input_errors_carry_the_setting_and_the_cli_says_its_flag(tmp_path: Path) -> None:
    from borrowguard.verify.fleet import check_targets, load_targets, parse_target
    from borrowguard.verify.wording import flag

    with pytest.raises(ConfigError) as spec:
        parse_target("{no name}")  # braces in the user's text are said as they are
    assert spec.value.setting == "targets"
    assert spec.value.said_as(flag("targets")).startswith("--target: expected NAME=URL")
    assert "'{no name}'" in spec.value.said_as(flag("targets"))
    with pytest.raises(ConfigError) as option:
        parse_target("a=http://h:1,log-cmd")
    assert option.value.said_as(flag("targets")).startswith("--target a: expected KEY=VALUE")
    missing = tmp_path / "fleet.toml"
    with pytest.raises(ConfigError) as file:
        load_targets(missing)
    assert file.value.setting == "targets_file"
    assert file.value.said_as(flag("targets_file")).startswith(f"--targets {missing}: ")
    with pytest.raises(ConfigError) as none:
        check_targets([])
    assert none.value.said_as(flag("targets")) == "give at least one --target"


def test_the_preflights_target_is_frozen_and_replaced_not_changed() -> None:
    import dataclasses

    from borrowguard.verify.preflight import Target

    target = Target("http://127.0.0.1:8000", bundled_server=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        target.model = "m"  # type: ignore[misc]
    served = dataclasses.replace(target, endpoints={str(Endpoint.TOKENIZE): True})
    assert served.serves(Endpoint.TOKENIZE) and not target.serves(Endpoint.TOKENIZE)
    assert target.serves(Endpoint.CHAT, unknown=True) and not served.serves(Endpoint.CHAT)


def test_the_servers_start_up_facts_travel_typed_and_are_written_as_known_facts(tmp_path: Path) -> None:
    """A log's head (read once) and its live lines merge, the live ones over the head's; the document
    writes the known facts only, as before the facts were typed."""
    from borrowguard.scan.startup import StartupFacts
    from borrowguard.verify.document import to_dict
    from borrowguard.verify.preflight import Target
    from borrowguard.verify.session import _renderer_workers
    from borrowguard.verify.watch import _merged, _startup_facts

    log = tmp_path / "server.log"
    log.write_text("INFO [utils.py:233] non-default args: {'model': 'm', 'max_model_len': 2048, 'max_num_seqs': 16}\n")
    head = _startup_facts(log)
    assert head is not None and (head.max_model_len, head.renderer_num_workers) == (2048, 1)  # absent: vLLM's 1
    merged = _merged(head, StartupFacts(renderer_num_workers=4))
    assert merged is not None and (merged.max_model_len, merged.renderer_num_workers) == (2048, 4)
    assert _merged(None, head) is head and _merged(head, None) is head and _startup_facts(tmp_path / "none") is None
    assert _renderer_workers(merged) == 4 and _renderer_workers(None) is None
    document = to_dict(Target("http://h:8000", bundled_server=False, server_config=merged))
    assert document["server_config"] == {k: v for k, v in merged.to_dict().items() if v is not None}
    assert to_dict(Target("http://h:8000", bundled_server=False))["server_config"] == {}
