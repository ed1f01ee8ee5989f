"""`borrowguard repro`: a thin click layer over borrowguard.repro (options, progress, output, exit codes)."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from borrowguard.cli._common import console
from borrowguard.race import HammerResult
from borrowguard.race.repro import CRASH, SAFE, PassResult, ReproReport, describe, run_repro

_STYLE = {CRASH: "bold red", SAFE: "bold green"}


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--tokenizer",
    metavar="DIR",
    help="A local Hugging Face tokenizer directory (default: the bundled ChatML byte-level BPE).",
)
@click.option("--threads", type=int, default=8, show_default=True, help="Threads sharing one tokenizer.")
@click.option(
    "--seconds",
    type=float,
    default=5.0,
    show_default=True,
    help="Total time for both passes, setup included.",
)
@click.option(
    "--guard", "guard_only", is_flag=True, help="Only the guarded pass; its verdict is the one that counts."
)
@click.option(
    "--processor", is_flag=True, help="Add a Qwen2-VL-style multimodal processor path (images + text)."
)
@click.option(
    "--vllm", is_flag=True, help="Load the tokenizer through vLLM's own loader (vLLM must be installed)."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the call mix.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def repro(
    tokenizer: str | None,
    threads: int,
    seconds: float,
    guard_only: bool,
    processor: bool,
    vllm: bool,
    seed: int,
    as_json: bool,
) -> None:
    """Run the tokenizer race on this stack: crash, silent corruption, or safe.

    Threads share one fast tokenizer and call it with different truncation/padding settings, pairs,
    batches and chat templates; every result is compared with the same call made serially first.
    By default an unguarded pass shows what this stack does, then a guarded pass (borrowguard.protect)
    on a fresh tokenizer shows the fix, side by side.

    \b
    Verdicts:
      crash              calls raise "Already borrowed" (tokenizers <= 0.22: failed requests in a server)
      silent-corruption  no such errors, but calls get another call's settings (tokenizers >= 0.23.1)
      safe               every concurrent call returned exactly its serial result

    \b
    Exit status: 0 when the verdict that counts is safe (the unguarded pass's; with --guard, the
    guarded pass's), 1 otherwise, 2 on bad input.

    \b
    Examples:
      borrowguard repro                          # this stack, unguarded vs guarded
      borrowguard repro --guard                  # proof that the guard makes it safe (exit 0)
      borrowguard repro --tokenizer /models/qwen2.5-7b --threads 16 --seconds 10
      borrowguard repro --processor --json | jq .verdict
    """
    err = console(stderr=True)
    with _LiveProgress(err) as live:
        report = run_repro(
            tokenizer=tokenizer,
            threads=threads,
            seconds=seconds,
            guard_only=guard_only,
            processor=processor,
            vllm=vllm,
            seed=seed,
            on_progress=live.update,
        )
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        _render(console(), report)
    raise SystemExit(report.exit_code)


class _LiveProgress:
    """A progress bar per pass on stderr, fed from the hammer's snapshots (shown only on a terminal)."""

    def __init__(self, out: Console) -> None:
        self.progress = Progress(
            TextColumn("{task.description:<10}"),
            BarColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
            console=out,
            transient=True,
            disable=not out.is_terminal,
        )
        self.tasks: dict[str, TaskID] = {}

    def __enter__(self) -> _LiveProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def update(self, name: str, snapshot: HammerResult, budget: float) -> None:
        if name not in self.tasks:
            self.tasks[name] = self.progress.add_task(name, total=budget, status="")
        status = (
            f"{snapshot.calls:,} calls · {snapshot.total_exceptions:,} exceptions · "
            f"{snapshot.total_wrong:,} wrong"
        )
        self.progress.update(self.tasks[name], completed=min(snapshot.seconds, budget), status=status)


def _render(out: Console, report: ReproReport) -> None:
    stack = report.stack
    out.print(
        Text.assemble(
            ("borrowguard repro", "bold"),
            f" · transformers {stack.transformers} · tokenizers {stack.tokenizers}"
            f" · python {stack.python} · vllm {stack.vllm or '—'}",
        )
    )
    out.print(
        Text(
            f"{report.threads} threads · {report.seconds:g} s · paths: {', '.join(report.paths)}", style="dim"
        )
    )
    passes = [p for p in (report.unguarded, report.guarded) if p is not None]
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("")
    for p in passes:
        table.add_column("guarded (borrowguard)" if p.name == "guarded" else "unguarded")
    table.add_row("verdict", *(Text(p.verdict, style=_STYLE.get(p.verdict, "bold yellow")) for p in passes))
    table.add_row("calls", *(f"{p.result.calls:,}" for p in passes))
    table.add_row("exceptions", *(_counts(p.result.exceptions) for p in passes))
    table.add_row("wrong outputs", *(_counts(p.result.wrong_outputs) for p in passes))
    table.add_row("wrong rate", *(_rate(p) for p in passes))
    out.print()
    out.print(table)
    out.print()
    for note in report.notes:
        out.print(Text(f"note: {note}", style="dim"))
    counted = report.counting
    out.print(
        Text.assemble(
            "verdict: ",
            (counted.verdict, _STYLE.get(counted.verdict, "bold yellow")),
            f" — {describe(counted.verdict)}",
        )
    )
    if counted.verdict != SAFE and counted.name == "unguarded":
        out.print(
            Text(
                "fix: borrowguard.install() in the server process, or start it with "
                "`borrowguard run -- COMMAND…` (vLLM: pip install borrowguard; the plugin activates it)",
                style="green",
            )
        )
    for example in counted.result.examples[:1]:
        out.print(
            Text(
                f"e.g. {example.shape}: {_cut(example.call)}\n"
                f"     expected {_cut(example.expected)}\n     got      {_cut(example.got)}",
                style="dim",
            )
        )


def _cut(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _counts(counts: dict[str, int]) -> Text:
    if not counts:
        return Text("—")
    return Text(", ".join(f"{kind} {n:,}" for kind, n in counts.items()))


def _rate(p: PassResult) -> str:
    r = p.result
    if not r.calls:
        return "—"
    return f"{100 * (r.total_exceptions + r.total_wrong) / r.calls:.1f}%"
