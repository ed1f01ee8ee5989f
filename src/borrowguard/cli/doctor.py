"""`borrowguard doctor`: the click layer over borrowguard.doctor (options, rendering, exit codes)."""

from __future__ import annotations

import json

import click
from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.text import Text

from borrowguard.cli._common import console, writing_output
from borrowguard.doctor import Diagnosis, Snapshot, collect, diagnose, read_snapshot
from borrowguard.doctor.source import MAX_INPUT_BYTES, with_server_log
from borrowguard.errors import UserInputError
from borrowguard.knowledge import load

_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold cyan"}
_SHOWN_PACKAGES = ("vllm", "transformers", "tokenizers", "torch", "sglang", "xgrammar", "borrowguard")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--json", "as_json", is_flag=True, help="Print the environment and findings as JSON.")
@click.option("--strict", is_flag=True, help="Warnings fail too: exit 2 instead of 1.")
@click.option(
    "--capture", is_flag=True, help="Print a JSON snapshot of the environment for --from; no diagnosis."
)
@click.option(
    "--from",
    "source",
    metavar="FILE",
    help="Diagnose a snapshot (--capture/--json output) or the text of `vllm collect-env` / "
    f"`python -m torch.utils.collect_env` instead of this environment; '-' reads stdin "
    f"(at most {MAX_INPUT_BYTES // 1_000_000} MB).",
)
@click.option(
    "--rules", metavar="FILE", help="A TOML file of extra [[problem]] rules; same ids replace bundled ones."
)
@click.option(
    "--deep", is_flag=True, help="Also import torch (in a child process) for its CUDA and NCCL versions."
)
@click.option(
    "--log",
    "server_log",
    metavar="LOG",
    help="The server's log: how it runs (vLLM version, --renderer-num-workers...) is read from its start-up "
    "lines, for the rules that depend on it.",
)
def doctor(
    as_json: bool,
    strict: bool,
    capture: bool,
    source: str | None,
    rules: str | None,
    deep: bool,
    server_log: str | None,
) -> None:
    """Check this environment against known-bad versions and combinations.

    Reads package metadata only (no torch, vLLM or transformers import), in well under a second,
    and reports each known problem with its evidence and the commands that fix it.

    \b
    Exit status: 0 nothing or info only, 1 warnings, 2 errors (or bad input).
    With --strict, warnings exit 2 as well: use it to fail a CI job or a deploy.
    A --from report that gives no transformers or tokenizers version (a paste cut
    short) cannot be a clean bill: it is noted and exits 1 (2 with --strict).

    \b
    Examples:
      borrowguard doctor                      # this environment
      borrowguard doctor --json | jq '.findings[].id'
      borrowguard doctor --capture > env.json # on the server...
      borrowguard doctor --from env.json      # ...diagnosed anywhere
      vllm collect-env > env.txt && borrowguard doctor --from env.txt
      borrowguard doctor --strict --rules site-rules.toml
      borrowguard doctor --log vllm.log       # plus the server's settings from its start-up lines
    """
    if deep and source:
        raise UserInputError("--deep inspects this machine; it cannot be combined with --from")
    kb = load(rules)
    snapshot = read_snapshot(source) if source else collect(kb, deep=deep)
    if server_log:
        snapshot = with_server_log(snapshot, server_log)
    lacking = snapshot.lacks_note()
    if lacking and not any(note.startswith("incomplete:") for note in snapshot.notes):
        snapshot = snapshot.with_notes(lacking)
    out = console()
    with writing_output():
        if capture:
            click.echo(json.dumps(snapshot.to_dict(), indent=2))
            return
        diagnosis = diagnose(snapshot, kb)
        if as_json:
            click.echo(json.dumps(diagnosis.to_dict(), indent=2))
        else:
            _render(out, diagnosis, strict)
        raise SystemExit(diagnosis.exit_code(strict))


def _render(out: Console, diagnosis: Diagnosis, strict: bool) -> None:
    # Every dynamic string goes through Text, never markup: snapshots and collect-env texts are untrusted.
    snap = diagnosis.environment
    origin = {"live": "this environment", "snapshot": "snapshot", "collect-env": "collect-env report"}
    out.print(Text.assemble(("borrowguard doctor", "bold"), f" · {origin.get(snap.source, snap.source)}"))
    for line in _environment_lines(snap, diagnosis):
        out.print(_indented(Text(line), 2))
    for note in snap.notes:
        out.print(_indented(Text(f"note: {note}", style="dim"), 2))
    out.print()
    for finding in diagnosis.findings:
        out.print(
            Text.assemble(
                (f"{finding.severity.upper():8}", _STYLE[finding.severity]),
                (finding.id, "bold"),
                f"  {finding.title}",
            )
        )
        for item in finding.evidence:
            out.print(_indented(Text(f"• {item}"), 4))
        out.print(_indented(Text(" ".join(finding.explanation.split()), style="dim"), 4))
        for remedy in finding.remedies:
            out.print(_indented(Text.assemble(("fix: ", "green"), remedy), 4))
        if finding.references:
            out.print(_indented(Text("see: " + ", ".join(finding.references), style="dim"), 4))
        out.print()
    out.print(_summary(diagnosis, strict))


def _indented(renderable: RenderableType, left: int) -> Padding:
    return Padding(renderable, (0, 0, 0, left), expand=False)


def _environment_lines(snap: Snapshot, diagnosis: Diagnosis) -> list[str]:
    python = " ".join(x for x in (snap.python_version, snap.python_implementation) if x) or "unknown"
    platform = " ".join(x for x in (snap.system, snap.machine) if x) or "unknown"
    packages = "  ".join(
        f"{name} {snap.version(name) or '—'}"
        for name in _SHOWN_PACKAGES
        if snap.knows(name) or name == "vllm"
    )
    cuda = ", ".join(f"{k} {v}" for k, v in snap.cuda.items()) or "—"
    nccl = f"{snap.nccl_version} ({snap.nccl_source})" if snap.nccl_version else "—"
    lines = [
        f"Python {python} · {platform}" + (f" · {snap.os}" if snap.os else ""),
        packages,
        f"CUDA: {cuda} · NCCL: {nccl} · GPUs: {', '.join(snap.gpus) or '—'}",
        f"guard: {'active' if diagnosis.guard.active else 'not active'} ({diagnosis.guard.reason})",
    ]
    if snap.env:
        lines.append("env: " + " ".join(f"{k}={v}" for k, v in sorted(snap.env.items())))
    return lines


def _summary(diagnosis: Diagnosis, strict: bool) -> Text:
    counts = {s: sum(f.severity == s for f in diagnosis.findings) for s in ("error", "warning", "info")}
    parts = [f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items() if n]
    code = diagnosis.exit_code(strict)
    verdict = "no known problem" if not diagnosis.findings else ", ".join(parts)
    if diagnosis.environment.lacks:
        verdict = ("no known problem found" if not diagnosis.findings else verdict) + (
            f", but the report is incomplete: no {' or '.join(diagnosis.environment.lacks)} version"
        )
    style = "bold red" if code == 2 else "bold yellow" if code == 1 else "bold green"
    return Text.assemble((verdict, style), f" (exit {code}{', strict' if strict else ''})")
