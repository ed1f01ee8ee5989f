"""`borrowguard verify`: the thin click layer over borrowguard.verify (options, rendering, exit code)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click
from rich.live import Live
from rich.table import Table
from rich.text import Text

from borrowguard._files import resolve_output
from borrowguard._text import printable
from borrowguard.cli._common import console
from borrowguard.cli._params import Duration, ImageSizes, Levels, Mix, show_duration, show_mix, show_sizes
from borrowguard.errors import UserInputError
from borrowguard.exit_codes import ExitCode
from borrowguard.load.scenarios import ScenarioSettings
from borrowguard.report import to_json, write_html
from borrowguard.verify import CheckState, Progress, Verdict, VerifyConfig, VerifyResult, run_verify
from borrowguard.verify.config import DEFAULT_DURATION, ConfigError
from borrowguard.verify.fleet import (
    FleetResult,
    check_base,
    check_targets,
    load_targets,
    parse_target,
    run_fleet,
)
from borrowguard.verify.wording import FIXES, flag

_STYLE = {Verdict.PASS: "bold green", Verdict.FAIL: "bold red"}
_CONFIG = VerifyConfig()  # the defaults: VerifyConfig owns them, the options show them
_SCENARIO = _CONFIG.scenario


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--url", metavar="URL", help="OpenAI-compatible base URL. Without it: the bundled server.")
@click.option(
    "--target",
    "targets",
    multiple=True,
    metavar="NAME=URL[,log-cmd=CMD][,log=FILE]",
    help="A fleet: each replica loaded and watched at once, each with its own log source and verdict; the "
    "fleet's verdict is the worst (repeatable). Give each replica's own URL: through a Service the load "
    "spreads over replicas and hides which one fails.",
)
@click.option(
    "--targets",
    "targets_file",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FLEET.toml",
    help="The fleet as [[target]] tables (name, url, log, log_cmd, model): for commands with commas.",
)
@click.option("--model", metavar="NAME", help="Model name to send (default: the first of /v1/models).")
@click.option(
    "--api-key-env", metavar="NAME", help="Environment variable holding the API key (never logged)."
)
@click.option(
    "--log",
    "logs",
    multiple=True,
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Server log file to follow and scan (repeatable).",
)
@click.option(
    "--log-cmd",
    "log_cmds",
    multiple=True,
    metavar="CMD",
    help='Command whose output is the server log, e.g. "docker logs -f --since 1s vllm".',
)
@click.option("--health-path", default=_CONFIG.health_path, show_default=True, help="Polled every second.")
@click.option(
    "--mix",
    type=Mix(),
    default=show_mix(_SCENARIO.mix),
    show_default=True,
    help="Scenario weights: text (chat and /v1/completions), image, tools (tool_choice=required), "
    "tokenize (/tokenize and /detokenize). One the server cannot take is skipped with a note.",
)
@click.option(
    "--image-sizes", type=ImageSizes(), default=show_sizes(_SCENARIO.image_sizes), show_default=True,
    help="WIDTHxHEIGHT list.",
)
@click.option(
    "--images-per-request", default=_SCENARIO.images_per_request, show_default=True, type=click.IntRange(1, 16)
)
@click.option(
    "--tool-result-bytes",
    default=_SCENARIO.tool_result_bytes,
    show_default=True,
    type=click.IntRange(0, 1 << 20),
    help="Size of each prior tool result in tool conversations.",
)
@click.option(
    "--no-vllm-extensions",
    is_flag=True,
    help="Send no truncate_prompt_tokens or bad_words (for servers that reject unknown fields).",
)
@click.option(
    "--max-model-len",
    type=click.IntRange(64),
    metavar="TOKENS",
    help="The server's context window, when /v1/models does not say it (prompts are fitted to it).",
)
@click.option("--stream/--no-stream", default=_SCENARIO.stream, show_default=True, help="Streamed (SSE) answers.")
@click.option("--concurrency", "-c", default=_CONFIG.concurrency, show_default=True, type=click.IntRange(1, 4096))
@click.option(
    "--duration",
    "-d",
    type=Duration(),
    metavar="TIME",
    help=f"How long each level runs: 30s, 5m, 1h [default: {show_duration(DEFAULT_DURATION)}; with -n alone: "
    "no time limit].",
)
@click.option("--requests", "-n", type=click.IntRange(1), help="Stop after N requests (per level).")
@click.option(
    "--ramp-up", type=Duration(allow_zero=True), default=show_duration(_CONFIG.ramp_up), show_default=True,
    metavar="TIME", help="Start workers over this time.",
)
@click.option(
    "--timeout", type=Duration(), default=show_duration(_CONFIG.timeout), show_default=True, metavar="TIME",
    help="Per-request timeout.",
)
@click.option("--sweep", type=Levels(), metavar="LIST", help="Concurrency levels to run in turn, e.g. 8,16,32,64.")
@click.option(
    "--max-error-rate",
    default=_CONFIG.max_error_rate,
    show_default=True,
    type=float,
    help="Failed requests tolerated, as a fraction (0.01 = 1%).",
)
@click.option(
    "--records",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="Write one JSON line per request here (nothing is kept in memory).",
)
@click.option(
    "--report",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE.html",
    help="Write a self-contained HTML report with charts.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option(
    "--server-guard",
    type=click.Choice(["on", "off"]),
    default=None,
    help="Bundled server only: run it with or without the guard.  [default: on]",
)
@click.option(
    "--server-log",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="Bundled server only: keep its log here.",
)
@click.option("--seed", default=_SCENARIO.seed, hidden=True, type=int)
def verify(**opts: Any) -> None:
    """Load a server with concurrent image, tool and text chats, watch its log and health, give a verdict.

    \b
    First a short preflight learns the target: server and version, model, context window
    (max_model_len), endpoints, and whether it takes images and tools. Every request is then
    fitted to the context, and the mix varies what makes tokenizer calls differ (max_tokens,
    truncate_prompt_tokens, bad_words, chat beside /v1/completions, /tokenize) to provoke the race.

    \b
    PASS (exit 0): no tokenizer errors in the log or answers, no engine death, every valid
    request 2xx, identical requests got identical usage.prompt_tokens. The PASS line names the
    checks that ran and those that could not (no --log: the log was not checked).
    FAIL (exit 1) with the reasons otherwise. Requests refused for what we sent (too long, no
    vision, no tool parser) are reported apart, with the flag that fixes them, never against the
    server. Exit 2 when the run could not happen, was interrupted, or nothing valid could be sent.

    \b
    Examples:
      borrowguard verify                                   # bundled server, 30 s at concurrency 16
      borrowguard verify --server-guard off -d 20s         # watch the unguarded server fail
      borrowguard verify --url http://127.0.0.1:8000 --log /var/log/vllm.log -d 5m --report report.html
      borrowguard verify --url http://gpu1:8000/v1 --log-cmd "docker logs -f vllm" --sweep 8,16,32
      borrowguard verify --url $URL --api-key-env OPENAI_API_KEY --mix image=3,tools=1 --stream --json
    """
    try:
        fleet = _fleet_targets(opts)
        config = _config(opts)
        if fleet:
            check_base(config)  # the library's rule: each target has its own URL and logs
        config.validate()
    except ConfigError as exc:
        raise UserInputError(exc.said_as(flag(exc.setting))) from None
    # Checked before the load, not after it: a run of minutes must not end in "no such directory".
    for option in ("report", "records"):
        if opts[option]:
            resolve_output(opts[option], f"--{option}")
    err = console(stderr=True)
    try:
        with _ProgressView(err) as view:
            if fleet:
                result: Any = run_fleet(fleet, config, progress=view.update_target)
            else:
                result = run_verify(config, progress=view.update)
    except ConfigError as exc:  # a fleet target's own settings
        raise UserInputError(exc.said_as(flag(exc.setting))) from None
    except KeyboardInterrupt:  # during server start-up, or a second signal: nothing to report
        err.print("borrowguard verify: interrupted: stopped without a report")
        sys.exit(ExitCode.ERROR)
    doc = result.to_dict()
    if opts["as_json"]:
        click.echo(to_json(doc))
    elif fleet:
        _render_fleet(console(), result)
    else:
        _render(console(), result)
    if opts["report"]:
        try:
            write_html(doc, opts["report"])
            err.print(f"report: {opts['report']}")
        except (OSError, UserInputError) as exc:  # the verdict stands; say what was lost
            err.print(f"borrowguard verify: error: the report could not be written: {exc}", markup=False)
            sys.exit(max(result.exit_code, ExitCode.ERROR))
    sys.exit(result.exit_code)


def _fleet_targets(opts: dict[str, Any]) -> list[Any]:
    if not (opts["targets"] or opts["targets_file"]):
        return []
    targets = [parse_target(spec) for spec in opts["targets"]]
    if opts["targets_file"]:
        targets += load_targets(opts["targets_file"])
    check_targets(targets)
    return targets


def _config(opts: dict[str, Any]) -> VerifyConfig:
    scenario = ScenarioSettings(
        mix=opts["mix"],
        image_sizes=opts["image_sizes"],
        images_per_request=opts["images_per_request"],
        tool_result_bytes=opts["tool_result_bytes"],
        vllm_extensions=not opts["no_vllm_extensions"],
        stream=opts["stream"],
        seed=opts["seed"],
    )
    guard = {"on": True, "off": False, None: None}[opts["server_guard"]]
    return VerifyConfig(
        url=opts["url"],
        model=opts["model"],
        api_key_env=opts["api_key_env"],
        logs=list(opts["logs"]),
        log_commands=list(opts["log_cmds"]),
        health_path=opts["health_path"],
        scenario=scenario,
        concurrency=opts["concurrency"],
        duration=opts["duration"],
        requests=opts["requests"],
        ramp_up=opts["ramp_up"],
        timeout=opts["timeout"],
        sweep=opts["sweep"],
        max_error_rate=opts["max_error_rate"],
        max_model_len=opts["max_model_len"],
        records=opts["records"],
        server_guard=guard,
        server_log=opts["server_log"],
    )


class _ProgressView:
    """Live progress on a terminal; one line every 5 s elsewhere (CI logs stay readable)."""

    def __init__(self, err: Any) -> None:
        self.err = err
        self.live: Live | None = None
        self._last_line = 0.0
        self.lines: dict[str, str] = {}

    def __enter__(self) -> _ProgressView:
        if self.err.is_terminal:
            self.live = Live(Text("starting…"), console=self.err, transient=True, refresh_per_second=4)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)

    def update_target(self, name: str, p: Progress) -> None:
        self.lines[name] = f"{name}: {_progress_line(p)}"
        self._show("\n".join(self.lines.values()))

    def update(self, p: Progress) -> None:
        self._show(_progress_line(p))

    def _show(self, line: str) -> None:
        if self.live is not None:
            self.live.update(Text(line))
        elif time.monotonic() - self._last_line >= 5:
            self._last_line = time.monotonic()
            self.err.print(line, soft_wrap=True)


def _progress_line(p: Progress) -> str:
    level = f"level {p.level}/{p.levels} " if p.levels > 1 else ""
    total = f"/{p.duration:.0f}" if p.duration else ""
    findings = ", ".join(f"{k}: {v}" for k, v in p.findings.items()) or "none"
    return (
        f"{level}c={p.concurrency} {p.elapsed:.0f}{total}s  {p.requests} requests  {p.rate:.1f} req/s  "
        f"{p.errors} errors  p50 {_ms(p.p50)}  p95 {_ms(p.p95)}  in flight {p.inflight}  "
        f"health {p.health}  log findings: {findings}"
    )


def _render(out: Any, result: VerifyResult) -> None:
    if not out.is_terminal:
        out.width = max(out.width, 120)  # a pipe or CI log: do not squeeze the table into 80 columns
    for level in result.levels:
        s = level.summary
        table = Table(
            title=f"concurrency {level.concurrency}: {s.requests} requests in "
            f"{level.elapsed:.1f}s ({s.requests_per_s or 0:.1f} req/s)",
            title_justify="left",
        )
        for col in ("scenario", "count", "ok", "statuses", "p50", "p95", "p99", "TTFT p50", "out tok/s"):
            table.add_column(col, justify="left" if col in ("scenario", "statuses") else "right")
        for name, sc in s.scenarios.items():
            table.add_row(
                name,
                str(sc.count),
                str(sc.ok),
                ", ".join(f"{k}: {v}" for k, v in sc.statuses.items()),
                _ms(sc.latency.p50),
                _ms(sc.latency.p95),
                _ms(sc.latency.p99),
                _ms(sc.ttft.p50 if sc.ttft is not None else None),
                f"{sc.output_tokens_per_s or 0:.0f}",
            )
        out.print(table)
    if result.finding_counts:
        out.print(Text(_shown(result, "log findings: " + ", ".join(f"{k} × {v}" for k, v in result.finding_counts.items()))))
    _render_workload(out, result)
    for note in result.notes:
        out.print(Text(_shown(result, f"note: {note}"), style="dim"))
    if result.highest_passing is not None and len(result.levels) > 1:
        out.print(f"highest concurrency that passed: {result.highest_passing}")
    verdict = Text(str(result.verdict), style=_STYLE.get(result.verdict, "bold"))
    if result.verdict is Verdict.PASS:
        ran = [c.detail for c in result.checks if c.state is CheckState.PASSED]
        out.print(Text.assemble(verdict, " — " + ", ".join(ran)))
    else:
        out.print(verdict)
        for reason in result.reasons:
            out.print(Text(_shown(result, f"  - [{reason.code}] {reason.message}")))
    for check in result.checks:
        if check.state is CheckState.NOT_RUN:
            out.print(Text(_shown(result, f"  not checked: {check.name}: {check.detail}"), style="yellow"))


def _render_workload(out: Any, result: VerifyResult) -> None:
    """The target as learned, and what the workload could not send: never the server's fault."""
    t = result.target
    if t is not None:
        learned = [f"{t.server or 'server'} {t.version or ''}".strip(), f"model {t.model}"]
        if t.max_model_len:
            learned.append(f"max_model_len {t.max_model_len} ({t.max_model_len_source})")
        out.print(Text(_shown(result, "target: " + ", ".join(learned)), style="dim"))
        for name, state in t.scenarios.items():
            if state != "accepted":
                out.print(Text(_shown(result, f"scenario {name}: {state}"), style="yellow"))
    for g in (g for level in result.levels for g in level.summary.groups(workload=True)):
        msg = g.messages[0][:160] if g.messages else ""
        fix = FIXES.get(g.mismatch, "see the message") if g.mismatch is not None else "see the message"
        line = (f"workload mismatch (ours, not counted against the server): {g.count} × {g.status} "
                f"on {g.scenario} [{g.mismatch}] {msg} — fix: {fix}")
        out.print(Text(_shown(result, line), style="yellow"))


def _render_fleet(out: Any, fleet: FleetResult) -> None:
    """One row per target, the reasons of those that did not pass, then the fleet's verdict."""
    if not out.is_terminal:
        out.width = max(out.width, 120)
    table = Table(title=f"fleet of {len(fleet.targets)}: {fleet.elapsed:.1f}s", title_justify="left")
    for col in ("target", "url", "verdict", "requests", "ok", "tokenizer findings", "not checked"):
        table.add_column(col, justify="right" if col in ("requests", "ok", "tokenizer findings") else "left")
    for name, r in fleet.targets:
        last = r.levels[-1].summary if r.levels else None
        tokenizer = sum(n for k, n in r.finding_counts.items() if k.startswith("tokenizer"))
        skipped = ", ".join(str(c.name) for c in r.checks if c.state is CheckState.NOT_RUN)
        table.add_row(Text(_shown(r, name)), Text(_shown(r, r.target.url if r.target else "")),
                      Text(str(r.verdict), style=_STYLE.get(r.verdict, "bold")),
                      str(last.requests if last else 0), str(last.ok if last else 0), str(tokenizer), skipped or "–")
    out.print(table)
    for name, r in fleet.targets:
        for reason in r.reasons:
            out.print(Text(_shown(r, f"  {name}: [{reason.code}] {reason.message}")))
        for note in r.notes:
            out.print(Text(_shown(r, f"  {name}: note: {note}"), style="dim"))
    out.print(Text.assemble(Text(f"fleet {fleet.verdict}", style=_STYLE.get(fleet.verdict, "bold")),
                            " — the worst of its targets"))


def _shown(result: VerifyResult, text: str) -> str:
    """Text from the server or its log, safe for the terminal: no escape sequence (secrets were masked where
    the text came in)."""
    return printable(text)


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1000:.0f}ms"
