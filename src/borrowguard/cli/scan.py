"""`borrowguard scan`: the click layer over borrowguard.scan (options, rendering, exit codes)."""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Sequence

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from borrowguard.cli._common import console
from borrowguard.errors import UserInputError
from borrowguard.knowledge import load
from borrowguard.scan import Hit, Scanner, ScanResult, expand, scan_inputs
from borrowguard.scan.chain import summary
from borrowguard.scan.live import follow

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


@click.command("scan")
@click.argument("logs", nargs=-1, metavar="[LOG]...")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (findings, chain, lines).")
@click.option("-f", "--follow", "follow_mode", is_flag=True,
              help="Keep reading as the files grow (survives rotation and truncation); Ctrl-C ends.")
@click.option("--follow-cmd", metavar="CMD", help='Follow a command\'s output, e.g. "docker logs -f vllm".')
@click.option("--for", "duration", type=click.FloatRange(min=0.1), metavar="SECONDS",
              help="In follow mode, stop after this many seconds (default: until Ctrl-C).")
@click.option("--from-end", is_flag=True,
              help="In follow mode, skip what the files already hold (like tail -f).")
@click.option("--rules", type=click.Path(dir_okay=False), metavar="FILE",
              help="An extra rules file: its problems and signatures add to (or replace) the bundled ones.")
def scan(
    logs: Sequence[str],
    as_json: bool,
    follow_mode: bool,
    follow_cmd: str | None,
    duration: float | None,
    from_end: bool,
    rules: str | None,
) -> None:
    """Diagnose server logs: known failure signatures, their causal chain and remedies.

    Reads vLLM (V0 and V1), SGLang, uvicorn and plain Python logs, through docker-compose and kubectl
    prefixes, colour codes and .gz compression; tracebacks are recognised even when the excerpt stops
    before the exception line. LOG can be a file, a glob or - for stdin.

    \b
    Examples:
      borrowguard scan vllm.log
      borrowguard scan 'logs/*.log*' --json > findings.json
      docker logs vllm 2>&1 | borrowguard scan -
      borrowguard scan --follow vllm.log                  # live; Ctrl-C prints the report
      borrowguard scan --follow-cmd "docker logs -f vllm" --for 600

    \b
    Exit status: 0 nothing found (or only info), 1 warnings, 2 errors (or a usage error).
    """
    kb = load(rules) if rules else load()
    if follow_cmd is not None:
        follow_mode = True
    if not logs and follow_cmd is None:
        if sys.stdin.isatty():
            raise UserInputError("give a log file, a glob, '-' for stdin, or --follow-cmd CMD (see --help)")
        logs = ("-",)
    if duration is not None and not follow_mode:
        raise UserInputError("--for only applies with --follow or --follow-cmd")
    inputs = expand(logs) if logs else []
    scanner = Scanner(kb)
    out = console()
    if follow_mode:
        result = _follow(scanner, inputs, follow_cmd, duration, from_end, None if as_json else out)
    else:
        result = scan_inputs(inputs, scanner)
    for warning in result.warnings:
        click.echo(f"borrowguard: warning: {warning}", err=True)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        render(result, out)
    click.get_current_context().exit(result.exit_code)


def _follow(
    scanner: Scanner,
    inputs: Sequence[object],
    command: str | None,
    duration: float | None,
    from_end: bool,
    out: Console | None,
) -> ScanResult:
    stop = threading.Event()
    if duration is not None:
        timer = threading.Timer(duration, stop.set)
        timer.daemon = True
        timer.start()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    on_hit = (lambda hit: out.print(_hit_line(hit))) if out is not None else None
    try:
        if out is not None:
            names = [i.name for i in inputs] + ([f"$ {command}"] if command else [])  # type: ignore[attr-defined]
            out.print(Text(f"following {', '.join(names)} (Ctrl-C to stop)", style="dim"))
        follow(scanner, inputs, stop, command=command, on_hit=on_hit, from_end=from_end)  # type: ignore[arg-type]
    finally:
        signal.signal(signal.SIGINT, previous)
    return scanner.result()


# ---- rendering ------------------------------------------------------------------------------------
# Everything taken from a log is passed as Text (never as markup), so a hostile log cannot style or
# link anything in the operator's terminal.


def _hit_line(hit: Hit) -> Text:
    return Text.assemble(
        (f"{hit.severity.upper():7} ", _STYLE.get(hit.severity, "")),
        (hit.id, "bold"),
        f"  {hit.source}:{hit.line_no}",
        (f"  {hit.timestamp}" if hit.timestamp else "", "dim"),
        (f"  [{hit.process}]" if hit.process else "", "dim"),
        f"  {hit.text}",
    )


def _where(hit: Hit, several: bool) -> str:
    where = f"{hit.source}:{hit.line_no}" if several else f"line {hit.line_no}"
    return f"{where} ({hit.timestamp})" if hit.timestamp else where


def render(result: ScanResult, out: Console) -> None:
    sources = ", ".join(result.sources) or "no input"
    if not result.findings:
        out.print(Text.assemble(
            ("No known failure signatures", "bold green"), f" in {result.lines:,} lines of {sources}."
        ))
        return
    several = len(result.sources) > 1
    title = f"{len(result.findings)} problem(s) in {result.lines:,} lines of {sources}"
    table = Table(title=title, title_justify="left")
    table.add_column("severity")
    table.add_column("id", no_wrap=True)
    table.add_column("count", justify="right")
    table.add_column("first", overflow="fold")
    table.add_column("last", overflow="fold")
    for f in result.findings:
        table.add_row(
            Text(f.severity, style=_STYLE.get(f.severity, "")),
            Text(f.id, style="bold"),
            str(f.count),
            Text(_where(f.first, several)),
            Text(_where(f.last, several)),
        )
    out.print(table)
    for f in result.findings:
        out.print()
        out.print(Text.assemble((f"● {f.id}", _STYLE.get(f.severity, "bold")), " — ", (f.title, "bold")))
        out.print(Text.assemble(("  excerpt  ", "dim"), f.first.text))
        if f.processes:
            out.print(Text.assemble(("  process  ", "dim"), ", ".join(f.processes)))
        if f.details:
            details = ", ".join(f"{k} ×{v}" for k, v in f.details.most_common())
            out.print(Text.assemble(("  details  ", "dim"), details))
        out.print(Text.assemble(("  why      ", "dim"), " ".join(f.explanation.split())))
        for remedy in f.remedies:
            out.print(Text.assemble(("  fix      ", "green"), remedy))
    if result.chain:
        out.print()
        out.print(Text("Causal chain (read in this order)", style="bold"))
        line = summary(result.chain)
        if line:
            out.print(Text("  " + line))
        for step in result.chain:
            if step.role == "environment":
                out.print(Text.assemble(
                    ("  cause in the environment: ", "dim"), (step.id, "bold"), f" — {step.title}"
                ))
                if step.advice:
                    out.print(Text.assemble(("    fix  ", "green"), step.advice))
            elif step.role == "root" and step.advice and not line:
                out.print(Text.assemble(("  ", ""), (step.id, "bold"), f": {step.advice}"))
