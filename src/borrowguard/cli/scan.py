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

from borrowguard._text import printable
from borrowguard.cli._common import console, writing_output
from borrowguard.errors import UserInputError
from borrowguard.exit_codes import ExitCode
from borrowguard.knowledge import CONFIDENCES, Confidence, load
from borrowguard.scan import Hit, LogFinding, Scanner, ScanResult, expand, fast, scan_inputs
from borrowguard.scan.chain import summary
from borrowguard.scan.inputs.report import InputReport
from borrowguard.scan.live import follow

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_CONFIDENCE_STYLE = {"high": "bold", "medium": "", "low": "dim"}


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
@click.option("--min-confidence", type=click.Choice(CONFIDENCES), default="low", show_default=True,
              help="Report only findings at least this sure: high (the exact final line), medium (traceback "
                   "frames only), low (context only, e.g. a hang).")
def scan(
    logs: Sequence[str],
    as_json: bool,
    follow_mode: bool,
    follow_cmd: str | None,
    duration: float | None,
    from_end: bool,
    rules: str | None,
    min_confidence: str,
) -> None:
    """Diagnose server logs: known failure signatures, their causal chain and remedies.

    Reads vLLM (V0 and V1), SGLang, uvicorn and plain Python logs, through docker-compose and kubectl
    prefixes, colour codes and .gz compression (by content, also on stdin; a cut .gz is read as far as it
    goes), UTF-16 and byte-order marks; tracebacks are recognised even when the excerpt stops before the
    exception line. LOG can be a file, a glob, a FIFO or <(command), or - for stdin; binary files are
    skipped, said so.

    \b
    Examples:
      borrowguard scan vllm.log
      borrowguard scan 'logs/*.log*' --json > findings.json
      docker logs vllm 2>&1 | borrowguard scan -
      borrowguard scan --follow vllm.log                  # live; Ctrl-C prints the report
      borrowguard scan --follow-cmd "docker logs -f vllm" --for 600
      borrowguard scan vllm.log --min-confidence medium   # leave out hangs and other context-only findings

    \b
    Exit status: 0 nothing found (or only info), 1 warnings, 2 errors (or a usage error).
    Input that was not read whole (a cut .gz, a log command that wrote nothing) is at
    least 1; a log source that failed (--follow-cmd exiting with an error) is 2.
    """
    kb = load(rules) if rules else load()
    logs, follow_mode = _check_options(logs, follow_mode, follow_cmd, duration)
    inputs = expand(logs) if logs else []
    scanner = Scanner(kb)
    out = console()
    floor = Confidence(min_confidence)
    report = InputReport()  # what happened to the inputs themselves: cut .gz, failed command, skipped files
    if follow_mode:
        _follow(scanner, inputs, follow_cmd, duration, from_end, None if as_json else out, floor, report)
    else:
        scan_inputs(inputs, scanner, report)
    result = scanner.result(floor)
    slow = fast.speed_note(result.lines)
    if slow is not None:
        report.note(slow)
    result = report.apply(result)
    _print_result(result, as_json, out)
    click.get_current_context().exit(result.exit_code)


def _check_options(
    logs: Sequence[str], follow_mode: bool, follow_cmd: str | None, duration: float | None
) -> tuple[Sequence[str], bool]:
    """The logs to read (stdin when none is given and it is not a terminal) and whether to follow them
    (--follow-cmd implies --follow); UserInputError for options that do not go together."""
    if follow_cmd is not None:
        follow_mode = True
    if not logs and follow_cmd is None:
        if sys.stdin.isatty():
            raise UserInputError("give a log file, a glob, '-' for stdin, or --follow-cmd CMD (see --help)")
        logs = ("-",)
    if duration is not None and not follow_mode:
        raise UserInputError("--for only applies with --follow or --follow-cmd")
    if follow_cmd is not None and not follow_cmd.strip():
        raise UserInputError('--follow-cmd needs a command, e.g. --follow-cmd "docker logs -f vllm"')
    return logs, follow_mode


def _print_result(result: ScanResult, as_json: bool, out: Console) -> None:
    """Warnings and notes about the inputs on stderr, then the result (JSON or the report) on stdout."""
    for warning in result.warnings:
        click.echo(f"borrowguard: warning: {printable(warning)}", err=True)
    for note in result.notes:
        click.echo(f"borrowguard: note: {printable(note)}", err=True)
    with writing_output():
        if as_json:
            click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        else:
            render(result, out)


def _follow(
    scanner: Scanner,
    inputs: Sequence[object],
    command: str | None,
    duration: float | None,
    from_end: bool,
    out: Console | None,
    floor: Confidence,
    report: InputReport,
) -> None:
    stop = threading.Event()
    if duration is not None:
        timer = threading.Timer(duration, stop.set)
        timer.daemon = True
        timer.start()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    reader_gone: list[int] = []

    def show(hit: Hit) -> None:
        # Called from the reading threads, where exiting would end only the thread: a reader of our
        # output that went away (rich exits with ExitCode.BROKEN_PIPE) stops the whole follow instead.
        if hit.confidence.rank < floor.rank or reader_gone:
            return
        try:
            out.print(_hit_line(hit))  # type: ignore[union-attr]
        except (SystemExit, BrokenPipeError):
            reader_gone.append(ExitCode.BROKEN_PIPE)
            stop.set()

    on_hit = show if out is not None else None
    try:
        if out is not None:
            names = [i.name for i in inputs] + ([f"$ {command}"] if command else [])  # type: ignore[attr-defined]
            out.print(Text(f"following {', '.join(names)} (Ctrl-C to stop)", style="dim"))
        follow(
            scanner,
            inputs,  # type: ignore[arg-type]
            stop,
            command=command,
            on_hit=on_hit,
            from_end=from_end,
            report=report,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    if reader_gone:
        sys.exit(ExitCode.BROKEN_PIPE)


# ---- rendering ------------------------------------------------------------------------------------
# Everything taken from a log is passed as Text (never as markup), so a hostile log cannot style or
# link anything in the operator's terminal.


def _hit_line(hit: Hit) -> Text:
    return Text.assemble(
        (f"{hit.severity.upper():7} ", _STYLE.get(hit.severity, "")),
        (hit.id, "bold"),
        (f" ({hit.confidence})", "dim"),
        f"  {hit.source}:{hit.line_no}",
        (f"  {hit.timestamp}" if hit.timestamp else "", "dim"),
        (f"  [{hit.process}]" if hit.process else "", "dim"),
        f"  {hit.text}",
    )


def _where(hit: Hit, several: bool) -> str:
    where = f"{hit.source}:{hit.line_no}" if several else f"line {hit.line_no}"
    return f"{where} ({hit.timestamp})" if hit.timestamp else where


def _nothing_found(result: ScanResult, sources: str) -> Text:
    """The line for a scan without findings: a clean bill only when the input was read whole."""
    lines = f"{result.lines:,} line{'s' if result.lines != 1 else ''}"
    read = "no line was read"
    if result.lines:
        read = f"no known failure signatures in the {lines} read of {sources}"
    if result.input_failed:
        why = ": a log source failed (see the warnings above); "
        return Text.assemble(("No verdict", "bold red"), f"{why}{read}.")
    if result.warnings:
        why = ", and the input was not read whole (see the warnings above)."
        return Text.assemble(("Incomplete", "bold yellow"), f": {read}{why}")
    if not result.lines:
        return Text.assemble(("Nothing to scan", "bold yellow"), f": no line was read from {sources}.")
    return Text.assemble(("No known failure signatures", "bold green"), f" in {lines} of {sources}.")


def render(result: ScanResult, out: Console) -> None:
    sources = ", ".join(result.sources) or "no input"
    if result.server is not None:
        out.print(Text.assemble(("server  ", "dim"), _server_line(result)))
    if not result.findings:
        out.print(_nothing_found(result, sources))
        return
    several = len(result.sources) > 1
    title = f"{len(result.findings)} problem(s) in {result.lines:,} lines of {sources}"
    table = Table(title=title, title_justify="left")
    table.add_column("severity")
    table.add_column("id", no_wrap=True)
    table.add_column("confidence")
    table.add_column("count", justify="right")
    table.add_column("first", overflow="fold")
    table.add_column("last", overflow="fold")
    for f in result.findings:
        table.add_row(
            Text(f.severity, style=_STYLE.get(f.severity, "")),
            Text(f.id, style="bold"),
            Text(f.confidence, style=_CONFIDENCE_STYLE.get(f.confidence, "")),
            str(f.count),
            Text(_where(f.first, several)),
            Text(_where(f.last, several)),
        )
    out.print(table)
    for f in result.findings:
        _render_finding(f, out)
    _render_chain(result, out)


def _server_line(result: ScanResult) -> str:
    facts = result.server.facts() if result.server is not None else {}
    names = {"vllm_version": "vLLM", "tensor_parallel_size": "TP", "pipeline_parallel_size": "PP"}
    return " · ".join(f"{names.get(k, k)} {v}" for k, v in facts.items())


def _render_finding(f: LogFinding, out: Console) -> None:
    out.print()
    out.print(Text.assemble(
        (f"● {f.id}", _STYLE.get(f.severity, "bold")), " — ", (f.title, "bold"), (f"  ({f.confidence})", "dim")
    ))
    out.print(Text.assemble(("  excerpt  ", "dim"), f.first.text))
    if f.evidence:
        out.print(Text.assemble(("  evidence ", "dim"), f"{f.confidence}: {f.evidence}"))
    if f.cause:
        out.print(Text.assemble(("  cause    ", "dim"), f"EngineCore's own final exception: {f.cause}"))
    if f.processes:
        out.print(Text.assemble(("  process  ", "dim"), ", ".join(f.processes)))
    if f.details:
        details = ", ".join(f"{k} ×{v}" for k, v in f.details.most_common())
        out.print(Text.assemble(("  details  ", "dim"), details))
    out.print(Text.assemble(("  why      ", "dim"), " ".join(f.explanation.split())))
    for remedy in f.remedies:
        out.print(Text.assemble(("  fix      ", "green"), remedy))


def _render_chain(result: ScanResult, out: Console) -> None:
    if not result.chain:
        return
    out.print()
    out.print(Text("Causal chain (read in this order)", style="bold"))
    lines = summary(result.chain)
    for line in lines:
        out.print(Text("  " + line))
    for step in result.chain:
        if step.role == "environment":
            out.print(Text.assemble(
                ("  cause in the environment: ", "dim"), (step.id, "bold"), f" — {step.title}"
            ))
            if step.advice:
                out.print(Text.assemble(("    fix  ", "green"), step.advice))
        elif step.role == "root" and step.advice and not lines:
            out.print(Text.assemble(("  ", ""), (step.id, "bold"), f": {step.advice}"))
