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

from borrowguard.cli._common import console
from borrowguard.errors import UserInputError
from borrowguard.load.options import parse_duration, parse_image_sizes, parse_levels, parse_mix
from borrowguard.load.scenarios import ScenarioSettings
from borrowguard.report import to_json, write_html
from borrowguard.verify import PASS, Progress, VerifyConfig, VerifyResult, run_verify

_STYLE = {"PASS": "bold green", "FAIL": "bold red"}


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--url", metavar="URL", help="OpenAI-compatible base URL. Without it: the bundled server.")
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
@click.option("--health-path", default="/health", show_default=True, help="Polled every second.")
@click.option("--mix", default="text=1,image=1,tools=1", show_default=True, help="Scenario weights.")
@click.option("--image-sizes", default="256x256,720x1280", show_default=True, help="WIDTHxHEIGHT list.")
@click.option("--images-per-request", default=1, show_default=True, type=click.IntRange(1, 16))
@click.option(
    "--tool-result-bytes",
    default=2048,
    show_default=True,
    type=click.IntRange(0, 1 << 20),
    help="Size of each prior tool result in tool conversations.",
)
@click.option(
    "--no-vllm-extensions",
    is_flag=True,
    help="Send no truncate_prompt_tokens (for servers that reject unknown fields).",
)
@click.option("--stream/--no-stream", default=False, show_default=True, help="Streamed (SSE) answers.")
@click.option("--concurrency", "-c", default=16, show_default=True, type=click.IntRange(1, 4096))
@click.option(
    "--duration", "-d", metavar="TIME", help="How long each level runs: 30s, 5m, 1h [default: 30s]."
)
@click.option("--requests", "-n", type=click.IntRange(1), help="Stop after N requests (per level).")
@click.option(
    "--ramp-up", default="0s", show_default=True, metavar="TIME", help="Start workers over this time."
)
@click.option("--timeout", default="60s", show_default=True, metavar="TIME", help="Per-request timeout.")
@click.option("--sweep", metavar="LIST", help="Concurrency levels to run in turn, e.g. 8,16,32,64.")
@click.option(
    "--max-error-rate",
    default=0.0,
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
@click.option("--seed", default=0, hidden=True, type=int)
def verify(**opts: Any) -> None:
    """Load a server with concurrent image, tool and text chats, watch its log and health, give a verdict.

    \b
    PASS (exit 0): no tokenizer errors in the log, no engine death, every request 2xx,
    identical requests got identical usage.prompt_tokens, every scenario succeeded.
    FAIL (exit 1) with the reasons otherwise; exit 2 when the run could not happen.

    \b
    Examples:
      borrowguard verify                                   # bundled server, 30 s at concurrency 16
      borrowguard verify --server-guard off -d 20s         # watch the unguarded server fail
      borrowguard verify --url http://127.0.0.1:8000 --log /var/log/vllm.log -d 5m --report report.html
      borrowguard verify --url http://gpu1:8000/v1 --log-cmd "docker logs -f vllm" --sweep 8,16,32
      borrowguard verify --url $URL --api-key-env OPENAI_API_KEY --mix image=3,tools=1 --stream --json
    """
    config = _config(opts)
    err = console(stderr=True)
    try:
        with _ProgressView(err) as view:
            result = run_verify(config, progress=view.update)
    except KeyboardInterrupt:  # before the load started (server start-up): nothing to report
        err.print("borrowguard verify: interrupted before the load started")
        sys.exit(2)
    if opts["report"]:
        write_html(result.to_dict(), opts["report"])
        err.print(f"report: {opts['report']}")
    if opts["as_json"]:
        click.echo(to_json(result.to_dict()))
    else:
        _render(console(), result)
    sys.exit(result.exit_code)


def _config(opts: dict[str, Any]) -> VerifyConfig:
    duration = parse_duration(opts["duration"], "--duration") if opts["duration"] else None
    if duration is None and opts["requests"] is None:
        duration = 30.0
    scenario = ScenarioSettings(
        mix=parse_mix(opts["mix"]),
        image_sizes=tuple(parse_image_sizes(opts["image_sizes"])),
        images_per_request=opts["images_per_request"],
        tool_result_bytes=opts["tool_result_bytes"],
        vllm_extensions=not opts["no_vllm_extensions"],
        stream=opts["stream"],
        seed=opts["seed"],
    )
    if opts["url"] and opts["server_guard"] is not None:
        raise UserInputError(
            "--server-guard applies to the bundled server only; it cannot change a server at --url"
        )
    return VerifyConfig(
        url=opts["url"],
        model=opts["model"],
        api_key_env=opts["api_key_env"],
        logs=list(opts["logs"]),
        log_commands=list(opts["log_cmds"]),
        health_path=opts["health_path"],
        scenario=scenario,
        concurrency=opts["concurrency"],
        duration=duration,
        requests=opts["requests"],
        ramp_up=parse_duration(opts["ramp_up"], "--ramp-up", allow_zero=True),
        timeout=parse_duration(opts["timeout"], "--timeout"),
        sweep=parse_levels(opts["sweep"]) if opts["sweep"] else None,
        max_error_rate=opts["max_error_rate"],
        records=opts["records"],
        server_guard=opts["server_guard"] != "off",
        server_log=opts["server_log"],
    )


class _ProgressView:
    """Live progress on a terminal; one line every 5 s elsewhere (CI logs stay readable)."""

    def __init__(self, err: Any) -> None:
        self.err = err
        self.live: Live | None = None
        self._last_line = 0.0

    def __enter__(self) -> _ProgressView:
        if self.err.is_terminal:
            self.live = Live(Text("starting…"), console=self.err, transient=True, refresh_per_second=4)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)

    def update(self, p: Progress) -> None:
        line = _progress_line(p)
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
    doc = result.to_dict()
    for level in doc["levels"]:
        s = level["summary"]
        table = Table(
            title=f"concurrency {level['concurrency']}: {s['requests']} requests in "
            f"{level['elapsed_s']:.1f}s ({s['requests_per_s'] or 0:.1f} req/s)",
            title_justify="left",
        )
        for col in ("scenario", "count", "ok", "statuses", "p50", "p95", "p99", "TTFT p50", "out tok/s"):
            table.add_column(col, justify="left" if col in ("scenario", "statuses") else "right")
        for name, sc in s["scenarios"].items():
            lat, ttft = sc["latency_s"], sc["ttft_s"] or {}
            table.add_row(
                name,
                str(sc["count"]),
                str(sc["ok"]),
                ", ".join(f"{k}: {v}" for k, v in sc["statuses"].items()),
                _ms(lat["p50"]),
                _ms(lat["p95"]),
                _ms(lat["p99"]),
                _ms(ttft.get("p50")),
                f"{sc['output_tokens_per_s'] or 0:.0f}",
            )
        out.print(table)
    if doc["log"]["finding_counts"]:
        out.print("log findings: " + ", ".join(f"{k} × {v}" for k, v in doc["log"]["finding_counts"].items()))
    for note in doc["notes"]:
        out.print(f"note: {note}", style="dim")
    if result.highest_passing is not None and len(result.levels) > 1:
        out.print(f"highest concurrency that passed: {result.highest_passing}")
    verdict = Text(result.verdict, style=_STYLE.get(result.verdict, "bold"))
    if result.verdict == PASS:
        out.print(
            Text.assemble(
                verdict,
                " — no tokenizer errors, no engine death, every request 2xx, identical requests consistent",
            )
        )
    else:
        out.print(verdict)
        for reason in result.reasons:
            out.print(f"  - [{reason.code}] {reason.message}", markup=False, highlight=False)


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1000:.0f}ms"
