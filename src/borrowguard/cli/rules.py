"""`borrowguard rules export`: the knowledge base's log signatures as other tools' rules, and the
troubleshooting page."""

from __future__ import annotations

import shlex

import click

from borrowguard._files import resolve_output, write_atomic
from borrowguard.cli._common import writing_output
from borrowguard.errors import ConfigError, UserInputError
from borrowguard.knowledge import load
from borrowguard.knowledge.export import FORMATS, Options, export


@click.group("rules")
def rules() -> None:
    """borrowguard's knowledge base for other tools: alert rules for your log stack, a troubleshooting page.

    \b
    borrowguard rules export --format prometheus --selector '{app="vllm"}'
    borrowguard explain ID      # what each rule's finding id means
    """


@rules.command("export", short_help="Log signatures as Loki/Prometheus, Elasticsearch/OpenSearch or Vector rules; "
                                    "the troubleshooting page (markdown).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), required=True,
              help="loki: LogQL queries; prometheus: a Loki ruler rule group (Prometheus rule format); "
                   "elasticsearch/opensearch: regexp queries (JSON); vector: a VRL remap transform (YAML); "
                   "markdown: the troubleshooting page.")
@click.option("--selector", metavar="SELECTOR",
              help='loki, prometheus: the LogQL stream selector of the server\'s logs, e.g. \'{app="vllm"}\'.')
@click.option("--window", default="5m", show_default=True, metavar="DURATION",
              help="The time range each alert counts over (loki, prometheus) or searches (elasticsearch, opensearch).")
@click.option("--field", metavar="FIELD",
              help="elasticsearch/opensearch: the keyword field holding the whole line (default message.keyword); "
                   "vector: the event field (default message).")
@click.option("--input", "source", metavar="ID", help="vector: the source the transform reads (default vllm_logs).")
@click.option("--rules", "rules_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="An extra rules file: its problems and signatures add to (or replace) the bundled ones.")
@click.option("-o", "--output", metavar="FILE", help="Write to FILE (atomically) instead of stdout.")
def export_command(
    fmt: str,
    selector: str | None,
    window: str,
    field: str | None,
    source: str | None,
    rules_file: str | None,
    output: str | None,
) -> None:
    """Export the log signatures as Loki, Elasticsearch/OpenSearch or Vector rules, or the knowledge base
    as a troubleshooting page.

    Only signatures that one log line can show go out, as regexes rewritten for the engine (Go RE2 for
    Loki, Rust regex for Vector, Lucene for Elasticsearch): traceback frames, hangs and start-up-aware
    signatures are listed in the export as "needs borrowguard scan", never exported weaker. The header
    of each export also says what scan does that a line rule cannot (colour codes, prefixes, tracebacks).

    \b
    Examples:
      borrowguard rules export --format prometheus --selector '{app="vllm"}' -o borrowguard-rules.yaml
      borrowguard rules export --format loki --selector '{namespace="llm"}' --window 10m
      borrowguard rules export --format elasticsearch --field message.keyword | jq .search
      borrowguard rules export --format vector --input kubernetes_logs -o borrowguard.yaml
      borrowguard rules export --format markdown -o docs/troubleshooting.md

    \b
    Each alert's runbook is `borrowguard explain ID`.
    Exit status: 0 written, 2 a usage error.
    """
    target = resolve_output(output, "--output") if output else None  # before any work
    kb = load(rules_file) if rules_file else load()
    try:
        text = export(kb, fmt, Options(selector, window, field, source, _command(fmt, selector, window, field, source)))
    except ConfigError as exc:  # the library names the Options field; here it is the flag that set it
        raise UserInputError(exc.said_as("--input" if exc.setting == "source" else "--" + exc.setting)) from None
    if target is not None:
        write_atomic(target, text, "--output")
        return
    with writing_output():
        click.echo(text, nl=False)


def _command(fmt: str, selector: str | None, window: str, field: str | None, source: str | None) -> str:
    # the command that makes this export again, for its header (the output path is left out)
    parts = ["borrowguard", "rules", "export", "--format", fmt]
    for option, value in (("--selector", selector), ("--field", field), ("--input", source)):
        if value is not None:
            parts += [option, value]
    if window != "5m" and fmt != "markdown":
        parts += ["--window", window]
    return shlex.join(parts)
